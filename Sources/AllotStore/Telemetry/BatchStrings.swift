#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// The distinct strings of one telemetry batch, looked up by their UTF-8 bytes: each is made into a
/// `String` once per batch and shared by every event that repeats it.
///
/// Why: gateway, tenant, upstream, model version and error type repeat across a batch's events (a
/// batch comes from one gateway; a tenant's requests cluster; a few pools and models serve them all),
/// and a `String` of more than 15 UTF-8 bytes is a heap allocation, freed again with the batch, and
/// reference-counted wherever events are copied. ``TelemetryDecoder`` interns those fields here.
///
/// Hostile input cannot make lookups slow: the hash is not keyed, so a batch could be built whose
/// names all collide, and therefore a lookup gives up after ``maxProbes`` slots and returns a fresh,
/// un-interned `String` (interning only saves work; it never changes a value).
struct BatchStrings {
    // One array per attribute rather than an array of entries: reading an entry's hash or length then
    // never copies (and reference-counts) its string.
    /// Open addressing with linear probing; -1 marks an empty slot. A power of two, at most half full.
    private var slots: [Int32]
    private var hashes: [UInt64] = []
    private var starts: [Int] = []
    private var counts: [Int] = []
    private var strings: [String] = []
    /// The bytes of every entry, back to back.
    private var arena: [UInt8] = []

    /// The longest UTF-8 a `String` stores inline on 64-bit platforms.
    static let smallStringBytes = 15

    /// Slots a lookup inspects before it gives up interning (see the type's documentation).
    static let maxProbes = 8

    /// The hash used; replaceable so that tests can make every name collide.
    private let hash: (UnsafeBufferPointer<UInt8>) -> UInt64

    init(hash: @escaping (UnsafeBufferPointer<UInt8>) -> UInt64 = BatchStrings.hash) {
        slots = Array(repeating: -1, count: 64)
        self.hash = hash
    }

    /// How many distinct strings are held.
    var count: Int { strings.count }

    /// The batch's `String` for `bytes` (which must be valid UTF-8), made on first sight.
    ///
    /// Up to ``smallStringBytes`` bytes, a `String` keeps its bytes inline (no allocation, no reference
    /// counting), and making one costs less than looking it up, so those are not interned.
    mutating func intern(_ bytes: UnsafeBufferPointer<UInt8>) -> String {
        if bytes.count <= Self.smallStringBytes { return String(decoding: bytes, as: UTF8.self) }
        let hash = self.hash(bytes)
        let mask = slots.count - 1
        var slot = Int(truncatingIfNeeded: hash) & mask
        for _ in 0..<Self.maxProbes {
            let index = Int(slots[slot])
            if index < 0 {
                let string = String(decoding: bytes, as: UTF8.self)
                insert(string, bytes: bytes, hash: hash, at: slot)
                return string
            }
            if hashes[index] == hash && counts[index] == bytes.count && matches(starts[index], bytes) {
                return strings[index]
            }
            slot = (slot + 1) & mask
        }
        return String(decoding: bytes, as: UTF8.self)
    }

    private func matches(_ start: Int, _ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        arena.withUnsafeBufferPointer { stored in
            guard let base = bytes.baseAddress, let storedBase = stored.baseAddress else { return bytes.isEmpty }
            return memcmp(storedBase + start, base, bytes.count) == 0
        }
    }

    private mutating func insert(_ string: String, bytes: UnsafeBufferPointer<UInt8>, hash: UInt64, at slot: Int) {
        slots[slot] = Int32(strings.count)
        hashes.append(hash)
        starts.append(arena.count)
        counts.append(bytes.count)
        strings.append(string)
        arena.append(contentsOf: bytes)
        if strings.count * 2 > slots.count { grow() }
    }

    private mutating func grow() {
        slots = Array(repeating: -1, count: slots.count * 2)
        let mask = slots.count - 1
        for index in hashes.indices {
            var slot = Int(truncatingIfNeeded: hashes[index]) & mask
            while slots[slot] >= 0 { slot = (slot + 1) & mask }
            slots[slot] = Int32(index)
        }
    }

    /// A fast 64-bit hash of short byte strings: eight bytes at a time, multiply and fold, then mix all
    /// bits into all bits. Not keyed: see the type's documentation for why that is safe here.
    @inline(__always)
    static func hash(_ bytes: UnsafeBufferPointer<UInt8>) -> UInt64 {
        let multiplier: UInt64 = 0x9E37_79B9_7F4A_7C15
        var hash = UInt64(bytes.count) &* multiplier
        guard let base = bytes.baseAddress else { return hash }
        var position = 0
        while position + 8 <= bytes.count {
            let word = UnsafeRawPointer(base + position).loadUnaligned(as: UInt64.self)
            hash = (hash ^ word) &* multiplier
            hash ^= hash >> 32
            position += 8
        }
        var tail: UInt64 = 0
        let left = bytes.count - position
        if left > 0 && bytes.count >= 8 {
            // The last eight bytes, overlapping the words already mixed: no byte loop.
            tail = UnsafeRawPointer(base + bytes.count - 8).loadUnaligned(as: UInt64.self)
        } else {
            var shift: UInt64 = 0
            while position < bytes.count {
                tail |= UInt64(base[position]) << shift
                shift += 8
                position += 1
            }
        }
        hash = (hash ^ tail) &* multiplier
        // Final avalanche (as in MurmurHash3's fmix64): tables index by the low bits, and a product's
        // low bits depend only on its operands' low bits, which names like `tenant-17` / `tenant-42`
        // share; without this they all collide.
        hash ^= hash >> 33
        hash &*= 0xFF51_AFD7_ED55_8CCD
        hash ^= hash >> 33
        hash &*= 0xC4CE_B9FE_1A85_EC53
        return hash ^ (hash >> 33)
    }
}
