/// Comparison of secrets whose running time does not depend on their contents.
///
/// SPEC section 8 requires token hashes to be compared in constant time, so that an attacker
/// timing `401` responses cannot learn how many leading bytes of a guess were right.
public enum ConstantTime {
    /// Whether two byte sequences are equal, examining every byte of both.
    ///
    /// No early exit: the loop always runs over the longer length, folding every byte difference
    /// (and the length mismatch) into one accumulator, so the time depends only on the lengths.
    /// Lengths are not treated as secret (for Allot both sides are 32-byte hashes anyway); a
    /// shorter input is compared as if zero-padded, and a mismatched length still answers `false`.
    @inline(never)
    public static func equals(_ lhs: UnsafeRawBufferPointer, _ rhs: UnsafeRawBufferPointer) -> Bool {
        let count = max(lhs.count, rhs.count)
        var difference: UInt8 = lhs.count == rhs.count ? 0 : 1
        var index = 0
        while index < count {
            let a: UInt8 = index < lhs.count ? lhs[index] : 0
            let b: UInt8 = index < rhs.count ? rhs[index] : 0
            difference |= a ^ b
            index += 1
        }
        return difference == 0
    }

    /// Byte-array convenience for `equals(_:_:)`.
    public static func equals(_ lhs: [UInt8], _ rhs: [UInt8]) -> Bool {
        lhs.withUnsafeBytes { l in rhs.withUnsafeBytes { r in equals(l, r) } }
    }

    /// Compares the UTF-8 encodings of two strings (e.g. two hex token hashes).
    public static func equals(_ lhs: String, _ rhs: String) -> Bool {
        equals(Array(lhs.utf8), Array(rhs.utf8))
    }

    /// Compares two digests (e.g. a presented token's hash against the stored one).
    public static func equals(_ lhs: SHA256Digest, _ rhs: SHA256Digest) -> Bool {
        equals(lhs.bytes, rhs.bytes)
    }
}
