/// FNV-1a (64-bit), with an optional final avalanche: a hash that is the same in every process and on every
/// machine (Swift's `Hasher` is seeded per process), for ids and values that are persisted or must not depend
/// on the run. Not cryptographic. <http://www.isthe.com/chongo/tech/comp/fnv/>
public struct StableHash: Sendable {
    /// The FNV-1a state: the hash of the bytes added so far, without the avalanche.
    public private(set) var value: UInt64 = 0xCBF2_9CE4_8422_2325

    public init() {}

    public mutating func add(_ byte: UInt8) {
        value = (value ^ UInt64(byte)) &* 0x0000_0100_0000_01B3
    }

    public mutating func add(_ text: String) {
        for byte in text.utf8 { add(byte) }
    }

    /// `value` as 16 lower-case hex digits.
    public var hex: String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }

    /// `value` after a final avalanche (two xor-shifts around a multiply), so that nearby inputs land far
    /// apart in every bit.
    public var mixed: UInt64 {
        var hash = value
        hash ^= hash >> 33
        hash &*= 0xFF51_AFD7_ED55_8CCD
        hash ^= hash >> 33
        return hash
    }
}
