import AllotCrypto
import Testing

@Suite("Hex, base64url and base32")
struct EncodingTests {
    @Test("hex round trip and case")
    func hex() throws {
        #expect(Hex.encode([0x00, 0x0f, 0xa0, 0xff]) == "000fa0ff")
        #expect(Hex.encode([UInt8]()) == "")
        #expect(try Hex.decode("000FA0ff") == [0x00, 0x0f, 0xa0, 0xff])
        #expect(try Hex.decode("") == [])
    }

    @Test(
        "hex rejects hostile input with the offset at fault",
        arguments: [
            ("abc", 3, "hex text has an odd number of characters (3)"),
            ("0g", 1, "invalid hex character 'g' at offset 1"),
            ("0x12", 1, "invalid hex character 'x' at offset 1"),
            (" 12 ", 0, "invalid hex character ' ' at offset 0"),
            ("12\n3", 2, "invalid hex character byte 0x0a at offset 2"),
            ("é", 0, "invalid hex character byte 0xc3 at offset 0"),
        ])
    func hexHostile(text: String, offset: Int, message: String) {
        #expect(throws: CryptoError(code: .invalidEncoding, message: message, offset: offset)) {
            try Hex.decode(text)
        }
    }

    /// RFC 4648 section 10 vectors, translated to base64url without padding.
    @Test(
        "base64url RFC 4648 vectors",
        arguments: [
            ("", ""), ("f", "Zg"), ("fo", "Zm8"), ("foo", "Zm9v"), ("foob", "Zm9vYg"), ("fooba", "Zm9vYmE"),
            ("foobar", "Zm9vYmFy"),
        ])
    func base64url(plain: String, encoded: String) throws {
        #expect(Base64URL.encode(Array(plain.utf8)) == encoded)
        #expect(try Base64URL.decode(encoded) == Array(plain.utf8))
    }

    @Test("base64url uses - and _ (Python's urlsafe_b64encode gives -vv8_f7_ABA)")
    func base64urlAlphabet() throws {
        let bytes: [UInt8] = [250, 251, 252, 253, 254, 255, 0x00, 0x10]
        #expect(Base64URL.encode(bytes) == "-vv8_f7_ABA")
        #expect(try Base64URL.decode("-vv8_f7_ABA") == bytes)
    }

    @Test(
        "base64url strict decoding",
        arguments: [
            "Zg==", "Zm9v+", "Zm9v/", "Z", "Zm9vY", "Zh", "Zm9 v", "Zm9v\u{0}", "ＺＡ",
        ])
    func base64urlHostile(text: String) {
        #expect(throws: CryptoError.self) { try Base64URL.decode(text) }
    }

    @Test(
        "base32 RFC 4648 vectors in lowercase without padding",
        arguments: [
            ("", ""), ("f", "my"), ("fo", "mzxq"), ("foo", "mzxw6"), ("foob", "mzxw6yq"), ("fooba", "mzxw6ytb"),
            ("foobar", "mzxw6ytboi"),
        ])
    func base32(plain: String, encoded: String) throws {
        #expect(Base32.encode(Array(plain.utf8)) == encoded)
        #expect(try Base32.decode(encoded) == Array(plain.utf8))
    }

    @Test(
        "base32 strict decoding",
        arguments: [
            "MY", "my======", "m", "mzx", "mzxw6y", "mz", "my1", "my8", "my ", "mzxw6ytbo!",
        ])
    func base32Hostile(text: String) {
        #expect(throws: CryptoError.self) { try Base32.decode(text) }
    }

    @Test("base32 error messages name character and offset")
    func base32Message() {
        #expect(
            throws: CryptoError(code: .invalidEncoding, message: "invalid base32 character '1' at offset 2", offset: 2)
        ) {
            try Base32.decode("my1q")
        }
        #expect(
            throws: CryptoError(code: .invalidEncoding, message: "base32 text has an impossible length (1)", offset: 1)
        ) {
            try Base32.decode("m")
        }
        #expect(
            throws: CryptoError(
                code: .invalidEncoding, message: "base32 text has non-zero padding bits in its last character",
                offset: 1)
        ) {
            try Base32.decode("mz")
        }
    }

    @Test("random round trips (seeded)")
    func roundTrips() throws {
        var random = SeededGenerator(seed: 42)
        for _ in 0..<300 {
            let bytes = (0..<Int.random(in: 0...40, using: &random)).map { _ in
                UInt8.random(in: 0...255, using: &random)
            }
            #expect(try Hex.decode(Hex.encode(bytes)) == bytes)
            #expect(try Base64URL.decode(Base64URL.encode(bytes)) == bytes)
            #expect(try Base32.decode(Base32.encode(bytes)) == bytes)
        }
    }
}
