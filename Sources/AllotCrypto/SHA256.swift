/// SHA-256 as specified in FIPS 180-4, section 6.2.
///
/// Allot stores API tokens only as SHA-256 hashes (SPEC section 8), and the toolchain gives us no
/// hash on Linux without a package dependency, so this is our own. It is a value type: copying a
/// half-fed hasher forks the computation, which is what `HMACSHA256` uses to reuse a keyed state.
///
/// ```swift
/// var hasher = SHA256()
/// hasher.update("ab")
/// hasher.update("c")
/// hasher.finalize().hex  // "ba7816bf…"
/// SHA256.hash("abc") == hasher.finalize()
/// ```
public struct SHA256: Sendable {
    /// Size of one compression block in bytes (512 bits).
    public static let blockSize = 64
    /// Size of a digest in bytes (256 bits).
    public static let digestSize = 32

    /// The eight working hash words H0…H7, initialised per FIPS 180-4 section 5.3.3.
    private var state: (UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32) = (
        0x6a09_e667, 0xbb67_ae85, 0x3c6e_f372, 0xa54f_f53a, 0x510e_527f, 0x9b05_688c, 0x1f83_d9ab, 0x5be0_cd19
    )
    /// Bytes of an incomplete block waiting for more input (always fewer than 64).
    private var pending: [UInt8] = []
    /// Total message length in bytes; the padding encodes it in bits (mod 2^64).
    private var length: UInt64 = 0

    /// A hasher with the initial state and no input.
    public init() {
        pending.reserveCapacity(SHA256.blockSize)
    }

    /// Feeds raw bytes.
    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
        guard !bytes.isEmpty else { return }
        length &+= UInt64(bytes.count)
        var input = bytes[...]
        if !pending.isEmpty {
            let take = min(SHA256.blockSize - pending.count, input.count)
            pending.append(contentsOf: input.prefix(take))
            input = input.dropFirst(take)
            guard pending.count == SHA256.blockSize else { return }
            pending.withUnsafeBytes { SHA256.compress(&state, blocks: $0) }
            pending.removeAll(keepingCapacity: true)
        }
        let whole = input.count - input.count % SHA256.blockSize
        if whole > 0 {
            SHA256.compress(&state, blocks: UnsafeRawBufferPointer(rebasing: input.prefix(whole)))
        }
        pending.append(contentsOf: input.dropFirst(whole))
    }

    /// Feeds a byte array (or any contiguous bytes).
    public mutating func update(_ bytes: some Sequence<UInt8>) {
        let handled = bytes.withContiguousStorageIfAvailable { update(UnsafeRawBufferPointer($0)) } != nil
        if !handled {
            Array(bytes).withUnsafeBytes { update($0) }
        }
    }

    /// Feeds the UTF-8 encoding of a string.
    public mutating func update(_ string: String) {
        var string = string
        string.withUTF8 { update(UnsafeRawBufferPointer($0)) }
    }

    /// Applies the padding (FIPS 180-4 section 5.1.1) and returns the digest.
    ///
    /// The hasher itself is not consumed: this works on a copy, so more input may follow and a
    /// later `finalize()` covers everything fed so far.
    public func finalize() -> SHA256Digest {
        var copy = self
        let bitLength = length &* 8
        // A single 0x80 byte, zeros until 8 bytes short of a block boundary, the big-endian bit length.
        var tail = pending
        tail.append(0x80)
        let zeros = (SHA256.blockSize - 8 - tail.count % SHA256.blockSize + SHA256.blockSize) % SHA256.blockSize
        tail.append(contentsOf: repeatElement(0, count: zeros))
        for shift in stride(from: 56, through: 0, by: -8) {
            tail.append(UInt8(truncatingIfNeeded: bitLength >> UInt64(shift)))
        }
        tail.withUnsafeBytes { SHA256.compress(&copy.state, blocks: $0) }
        let s = copy.state
        return SHA256Digest(words: [s.0, s.1, s.2, s.3, s.4, s.5, s.6, s.7])
    }

    /// One-shot hash of bytes.
    public static func hash(_ bytes: some Sequence<UInt8>) -> SHA256Digest {
        var hasher = SHA256()
        hasher.update(bytes)
        return hasher.finalize()
    }

    /// One-shot hash of a string's UTF-8 encoding.
    public static func hash(_ string: String) -> SHA256Digest {
        var hasher = SHA256()
        hasher.update(string)
        return hasher.finalize()
    }

    /// Round constants K0…K63 (FIPS 180-4 section 4.2.2): the first 32 bits of the fractional parts
    /// of the cube roots of the first 64 primes.
    private static let k: [UInt32] = [
        0x428a_2f98, 0x7137_4491, 0xb5c0_fbcf, 0xe9b5_dba5, 0x3956_c25b, 0x59f1_11f1, 0x923f_82a4, 0xab1c_5ed5,
        0xd807_aa98, 0x1283_5b01, 0x2431_85be, 0x550c_7dc3, 0x72be_5d74, 0x80de_b1fe, 0x9bdc_06a7, 0xc19b_f174,
        0xe49b_69c1, 0xefbe_4786, 0x0fc1_9dc6, 0x240c_a1cc, 0x2de9_2c6f, 0x4a74_84aa, 0x5cb0_a9dc, 0x76f9_88da,
        0x983e_5152, 0xa831_c66d, 0xb003_27c8, 0xbf59_7fc7, 0xc6e0_0bf3, 0xd5a7_9147, 0x06ca_6351, 0x1429_2967,
        0x27b7_0a85, 0x2e1b_2138, 0x4d2c_6dfc, 0x5338_0d13, 0x650a_7354, 0x766a_0abb, 0x81c2_c92e, 0x9272_2c85,
        0xa2bf_e8a1, 0xa81a_664b, 0xc24b_8b70, 0xc76c_51a3, 0xd192_e819, 0xd699_0624, 0xf40e_3585, 0x106a_a070,
        0x19a4_c116, 0x1e37_6c08, 0x2748_774c, 0x34b0_bcb5, 0x391c_0cb3, 0x4ed8_aa4a, 0x5b9c_ca4f, 0x682e_6ff3,
        0x748f_82ee, 0x78a5_636f, 0x84c8_7814, 0x8cc7_0208, 0x90be_fffa, 0xa450_6ceb, 0xbef9_a3f7, 0xc671_78f2,
    ]

    /// Runs the compression function (FIPS 180-4 section 6.2.2) over whole 64-byte blocks.
    ///
    /// Written against raw pointers so the hot loop has no bounds checks or array retains.
    private static func compress(
        _ state: inout (UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32, UInt32),
        blocks: UnsafeRawBufferPointer
    ) {
        precondition(blocks.count % blockSize == 0, "SHA256.compress needs whole blocks")
        guard let base = blocks.baseAddress else { return }
        var (h0, h1, h2, h3, h4, h5, h6, h7) = state
        k.withUnsafeBufferPointer { kp in
            withUnsafeTemporaryAllocation(of: UInt32.self, capacity: 64) { w in
                var offset = 0
                while offset < blocks.count {
                    let block = base + offset
                    for t in 0..<16 {
                        w[t] = UInt32(bigEndian: block.loadUnaligned(fromByteOffset: t * 4, as: UInt32.self))
                    }
                    for t in 16..<64 {
                        let x = w[t - 15]
                        let y = w[t - 2]
                        let s0 = x.rotatedRight(7) ^ x.rotatedRight(18) ^ (x >> 3)
                        let s1 = y.rotatedRight(17) ^ y.rotatedRight(19) ^ (y >> 10)
                        w[t] = w[t - 16] &+ s0 &+ w[t - 7] &+ s1
                    }
                    var a = h0, b = h1, c = h2, d = h3, e = h4, f = h5, g = h6, h = h7
                    // Eight rounds per iteration with the variables rotated by name instead of by
                    // assignment, so the compiler keeps all eight in registers without moves.
                    var t = 0
                    while t < 64 {
                        round(a, b, c, &d, e, f, g, &h, kp[t] &+ w[t])
                        round(h, a, b, &c, d, e, f, &g, kp[t + 1] &+ w[t + 1])
                        round(g, h, a, &b, c, d, e, &f, kp[t + 2] &+ w[t + 2])
                        round(f, g, h, &a, b, c, d, &e, kp[t + 3] &+ w[t + 3])
                        round(e, f, g, &h, a, b, c, &d, kp[t + 4] &+ w[t + 4])
                        round(d, e, f, &g, h, a, b, &c, kp[t + 5] &+ w[t + 5])
                        round(c, d, e, &f, g, h, a, &b, kp[t + 6] &+ w[t + 6])
                        round(b, c, d, &e, f, g, h, &a, kp[t + 7] &+ w[t + 7])
                        t += 8
                    }
                    h0 &+= a
                    h1 &+= b
                    h2 &+= c
                    h3 &+= d
                    h4 &+= e
                    h5 &+= f
                    h6 &+= g
                    h7 &+= h
                    offset += blockSize
                }
            }
        }
        state = (h0, h1, h2, h3, h4, h5, h6, h7)
    }
}

/// One SHA-256 round (FIPS 180-4 section 6.2.2 step 3) written in place: `d += T1`, `h = T1 + T2`.
/// `ch` and `maj` use the equivalent forms with fewer operations.
@inline(__always)
private func round(
    _ a: UInt32, _ b: UInt32, _ c: UInt32, _ d: inout UInt32,
    _ e: UInt32, _ f: UInt32, _ g: UInt32, _ h: inout UInt32, _ kw: UInt32
) {
    let s1 = e.rotatedRight(6) ^ e.rotatedRight(11) ^ e.rotatedRight(25)
    let ch = g ^ (e & (f ^ g))
    let t1 = h &+ s1 &+ ch &+ kw
    let s0 = a.rotatedRight(2) ^ a.rotatedRight(13) ^ a.rotatedRight(22)
    let maj = (a & b) | (c & (a | b))
    d &+= t1
    h = t1 &+ s0 &+ maj
}

extension UInt32 {
    @inline(__always)
    fileprivate func rotatedRight(_ count: UInt32) -> UInt32 {
        (self >> count) | (self << (32 - count))
    }
}

/// A 32-byte SHA-256 digest.
///
/// `Equatable` here is ordinary (early-exit) equality, fine for hashes of public data; compare
/// secrets with `ConstantTime.equals`.
public struct SHA256Digest: Sendable, Hashable, CustomStringConvertible {
    /// The digest bytes, big-endian word order as FIPS 180-4 prints them.
    public let bytes: [UInt8]

    init(words: [UInt32]) {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(SHA256.digestSize)
        for word in words {
            bytes.append(UInt8(truncatingIfNeeded: word >> 24))
            bytes.append(UInt8(truncatingIfNeeded: word >> 16))
            bytes.append(UInt8(truncatingIfNeeded: word >> 8))
            bytes.append(UInt8(truncatingIfNeeded: word))
        }
        self.bytes = bytes
    }

    /// Lowercase hexadecimal, 64 characters: the form Allot stores token hashes in.
    public var hex: String { Hex.encode(bytes) }

    public var description: String { hex }
}
