import AllotCrypto
import Testing

@Suite("HMAC-SHA256")
struct HMACSHA256Tests {
    struct Vector: Sendable, CustomTestStringConvertible {
        let name: String
        let key: [UInt8]
        let data: [UInt8]
        let mac: String
        var testDescription: String { name }
    }

    /// RFC 4231 section 4, HMAC-SHA-256 results (test case 5 is truncated to 128 bits there).
    static let vectors: [Vector] = [
        Vector(
            name: "test case 1", key: Array(repeating: 0x0b, count: 20), data: Array("Hi There".utf8),
            mac: "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7"),
        Vector(
            name: "test case 2", key: Array("Jefe".utf8), data: Array("what do ya want for nothing?".utf8),
            mac: "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"),
        Vector(
            name: "test case 3", key: Array(repeating: 0xaa, count: 20), data: Array(repeating: 0xdd, count: 50),
            mac: "773ea91e36800e46854db8ebd09181a72959098b3ef8c122d9635514ced565fe"),
        Vector(
            name: "test case 4", key: Array(1...25), data: Array(repeating: 0xcd, count: 50),
            mac: "82558a389a443c0ea4cc819899f2083a85f0faa3e578f8077a2e3ff46729665b"),
        Vector(
            name: "test case 5 (truncated)", key: Array(repeating: 0x0c, count: 20),
            data: Array("Test With Truncation".utf8), mac: "a3b6167473100ee06e0c796c2955552b"),
        Vector(
            name: "test case 6", key: Array(repeating: 0xaa, count: 131),
            data: Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8),
            mac: "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"),
        Vector(
            name: "test case 7", key: Array(repeating: 0xaa, count: 131),
            data: Array(
                ("This is a test using a larger than block-size key and a larger than block-size data. "
                    + "The key needs to be hashed before being used by the HMAC algorithm.").utf8),
            mac: "9b09ffa71b942fcb27635fbcd5b0e944bfdc63644f0713938a7f51535c3a35e2"),
    ]

    @Test("RFC 4231 vectors", arguments: vectors)
    func rfc4231(vector: Vector) {
        let mac = HMACSHA256.authenticationCode(for: vector.data, key: vector.key).hex
        #expect(mac.hasPrefix(vector.mac))
        #expect(mac.count == 64)
    }

    @Test("streaming equals one-shot, and a key of exactly one block is not hashed")
    func streaming() {
        var mac = HMACSHA256(key: Array("Jefe".utf8))
        mac.update("what do ya ")
        mac.update(Array("want for nothing?".utf8))
        #expect(mac.finalize().hex == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")

        let blockKey = [UInt8](repeating: 0x42, count: 64)
        let longKey = [UInt8](repeating: 0x42, count: 65)
        #expect(
            HMACSHA256.authenticationCode(for: "m", key: blockKey)
                != HMACSHA256.authenticationCode(for: "m", key: SHA256.hash(blockKey).bytes))
        #expect(
            HMACSHA256.authenticationCode(for: "m", key: longKey)
                == HMACSHA256.authenticationCode(for: "m", key: SHA256.hash(longKey).bytes))
    }
}
