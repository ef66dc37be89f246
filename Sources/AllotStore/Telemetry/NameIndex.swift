/// The distinct names of one batch in order of first appearance, with a lookup from a name to its
/// position: how ``PreparedBatch`` numbers a batch's tenants, upstreams, gateways and model versions.
///
/// Why not `[String: Int32]`: the lookup runs four times per event, and hashing a `String` with
/// `Hasher` (SipHash) cost more than everything else ``PreparedBatch`` does. Here a name's UTF-8
/// bytes are hashed with ``BatchStrings/hash(_:)`` (a few multiplications), and the comparison that
/// confirms a match is usually decided by `String`'s own fast path (names the decoder interned share
/// their storage; short names are compared as two words).
///
/// That hash is not keyed, so a hostile batch could make its names collide. A lookup therefore
/// inspects at most ``BatchStrings/maxProbes`` slots; a name that finds neither itself nor a free
/// slot there goes to an ordinary (seeded) dictionary, which keeps every lookup cheap and exact.
struct NameIndex {
    /// The names, by index.
    private(set) var names: [String] = []
    /// Open addressing with linear probing; -1 marks an empty slot. A power of two, at most half full.
    private var slots: [Int32]
    private var hashes: [UInt64] = []
    /// Names whose probe sequence was full (see the type's documentation).
    private var overflow: [String: Int32] = [:]

    /// The hash used; replaceable so that tests can make every name collide.
    private let hash: (UnsafeBufferPointer<UInt8>) -> UInt64

    init(capacity: Int = 16, hash: @escaping (UnsafeBufferPointer<UInt8>) -> UInt64 = BatchStrings.hash) {
        self.hash = hash
        var size = 16
        while size < capacity * 2 { size *= 2 }
        slots = Array(repeating: -1, count: size)
        names.reserveCapacity(capacity)
        hashes.reserveCapacity(capacity)
    }

    var count: Int { names.count }

    /// The index of `name`, adding it (as the next index) when it is new.
    @inline(__always)
    mutating func index(of name: String) -> (index: Int32, isNew: Bool) {
        var name = name
        let hash = name.withUTF8 { self.hash($0) }
        let mask = slots.count - 1
        var slot = Int(truncatingIfNeeded: hash) & mask
        for _ in 0..<BatchStrings.maxProbes {
            let index = slots[slot]
            if index < 0 {
                if !overflow.isEmpty, let index = overflow[name] { return (index, false) }
                let new = append(name, hash: hash)
                slots[slot] = new
                if names.count * 2 > slots.count { grow() }
                return (new, true)
            }
            if hashes[Int(index)] == hash && names[Int(index)] == name { return (index, false) }
            slot = (slot + 1) & mask
        }
        if let index = overflow[name] { return (index, false) }
        let new = append(name, hash: hash)
        overflow[name] = new
        return (new, true)
    }

    private mutating func append(_ name: String, hash: UInt64) -> Int32 {
        names.append(name)
        hashes.append(hash)
        return Int32(names.count - 1)
    }

    /// Doubles the table and re-places the names that were in it (not those in `overflow`), each within
    /// ``BatchStrings/maxProbes`` slots of its home, where lookups will look; one that does not fit
    /// there moves to `overflow`.
    private mutating func grow() {
        var inTable = [Bool](repeating: true, count: names.count)
        for index in overflow.values { inTable[Int(index)] = false }
        slots = Array(repeating: -1, count: slots.count * 2)
        let mask = slots.count - 1
        for index in names.indices where inTable[index] {
            var slot = Int(truncatingIfNeeded: hashes[index]) & mask
            var placed = false
            for _ in 0..<BatchStrings.maxProbes {
                if slots[slot] < 0 {
                    slots[slot] = Int32(index)
                    placed = true
                    break
                }
                slot = (slot + 1) & mask
            }
            if !placed { overflow[names[index]] = Int32(index) }
        }
    }
}
