import AllotCrypto
import Testing

@Suite("Constant-time comparison, random bytes and API tokens")
struct SecretTests {
    @Test("constant-time equality semantics")
    func constantTime() {
        #expect(ConstantTime.equals([UInt8](), []))
        #expect(ConstantTime.equals([1, 2, 3], [1, 2, 3]))
        #expect(!ConstantTime.equals([1, 2, 3], [1, 2, 4]))
        #expect(!ConstantTime.equals([0, 2, 3], [1, 2, 3]))
        // Length mismatch is unequal even when the shorter one is a prefix, or zero padding would match.
        #expect(!ConstantTime.equals([1, 2, 3], [1, 2]))
        #expect(!ConstantTime.equals([1, 2, 0], [1, 2]))
        #expect(!ConstantTime.equals([], [0]))
        #expect(ConstantTime.equals("abc", "abc"))
        #expect(!ConstantTime.equals("abc", "abd"))
        #expect(ConstantTime.equals(SHA256.hash("x"), SHA256.hash("x")))
        #expect(!ConstantTime.equals(SHA256.hash("x"), SHA256.hash("y")))
    }

    @Test("constant-time equality agrees with == on random pairs (seeded)")
    func constantTimeProperty() {
        var random = SeededGenerator(seed: 7)
        for _ in 0..<500 {
            let a = (0..<Int.random(in: 0...6, using: &random)).map { _ in UInt8.random(in: 0...2, using: &random) }
            let b = (0..<Int.random(in: 0...6, using: &random)).map { _ in UInt8.random(in: 0...2, using: &random) }
            #expect(ConstantTime.equals(a, b) == (a == b), "\(a) vs \(b)")
        }
    }

    @Test("secure random bytes: requested sizes, not constant, a large request is filled")
    func secureRandom() throws {
        #expect(try SecureRandom.bytes(0) == [])
        let a = try SecureRandom.bytes(32)
        let b = try SecureRandom.bytes(32)
        #expect(a.count == 32)
        #expect(a != b)  // Probability of a false failure: 2^-256.
        let big = try SecureRandom.bytes(1 << 20)
        // Every byte value shows up in a MiB of random data (each is missing with probability ~e^-4096).
        #expect(Set(big).count == 256)
    }

    @Test("the /dev/urandom fallback fills buffers and reports a missing device with its errno")
    func deviceFallback() throws {
        var buffer = [UInt8](repeating: 0, count: 4096)
        try buffer.withUnsafeMutableBytes { try SecureRandom.fillFromDevice($0) }
        #expect(Set(buffer).count > 200)
        let error = #expect(throws: CryptoError.self) {
            try buffer.withUnsafeMutableBytes { try SecureRandom.fillFromDevice($0, path: "/nonexistent/urandom") }
        }
        #expect(error?.code == .randomUnavailable)
        #expect(error?.errno == 2)  // ENOENT
        #expect(error?.message == "cannot open /nonexistent/urandom: No such file or directory")
        // A device that ends early (an empty regular file) is an error, not a silently short buffer.
        let short = #expect(throws: CryptoError.self) {
            try buffer.withUnsafeMutableBytes { try SecureRandom.fillFromDevice($0, path: "/dev/null") }
        }
        #expect(short?.message == "cannot read /dev/null: unexpected end of file")
    }

    @Test("token format: prefix, length, alphabet, well-formedness")
    func tokenFormat() throws {
        let token = try APIToken.generate()
        #expect(token.hasPrefix("allot_"))
        #expect(token.count == 58)
        #expect(APIToken.length == 58)
        let body = token.dropFirst(6)
        #expect(body.allSatisfy { ("a"..."z").contains($0) || ("2"..."7").contains($0) })
        #expect(APIToken.isWellFormed(token))
        #expect(try Base32.decode(String(body)).count == 32)
    }

    @Test("tokens are unique across many generations")
    func tokenUniqueness() throws {
        var seen = Set<String>()
        for _ in 0..<2000 { seen.insert(try APIToken.generate()) }
        #expect(seen.count == 2000)
    }

    @Test(
        "malformed tokens are recognised",
        arguments: [
            "", "allot_", "Bearer allot_abc", "allot_" + String(repeating: "a", count: 51),
            "allot_" + String(repeating: "a", count: 53), "ALLOT_" + String(repeating: "a", count: 52),
            "allot_" + String(repeating: "A", count: 52), "allot_" + String(repeating: "a", count: 51) + "1",
            // The 52nd character carries 4 padding bits that must be zero: 'b' sets one.
            "allot_" + String(repeating: "a", count: 51) + "b",
            "allot_" + String(repeating: "a", count: 50) + "é",
            "xllot_" + String(repeating: "a", count: 52),
        ])
    func malformedTokens(text: String) {
        #expect(!APIToken.isWellFormed(text))
    }

    @Test("a well-formed token spelled by hand")
    func handWrittenToken() {
        #expect(APIToken.isWellFormed("allot_" + String(repeating: "a", count: 52)))
        #expect(APIToken.isWellFormed("allot_" + String(repeating: "7", count: 51) + "q"))
    }

    @Test("storage hash is the SHA-256 hex of the whole token (value computed with Python's hashlib)")
    func storageHash() {
        let token = "allot_abcdefghijklmnopqrstuvwxyz234567abcdefghijklmnopqrst"
        #expect(APIToken.storageHash(of: token) == "69bd9ae40f36dd9755f8651aef19ab7a6cc2787200f8874870195b4542bb07ac")
    }

    @Test("redacted form keeps prefix and four characters")
    func redacted() {
        #expect(APIToken.redacted("allot_k3xqabcdefgh") == "allot_k3xq…")
        #expect(APIToken.redacted("secret") == "…")
    }
}
