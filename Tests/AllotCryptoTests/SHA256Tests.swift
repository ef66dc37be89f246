import AllotCrypto
import Foundation
import Testing

@Suite("SHA-256")
struct SHA256Tests {
    /// Test vectors from FIPS 180-4's examples (NIST CSRC "SHA256.pdf") and the one-million-'a' message.
    @Test(
        "FIPS 180-4 example messages",
        arguments: [
            ("", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
            ("abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"),
            (
                "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq",
                "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"
            ),
            (
                "abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmn"
                    + "hijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu",
                "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1"
            ),
        ])
    func fipsVectors(message: String, expected: String) {
        #expect(SHA256.hash(message).hex == expected)
        #expect(SHA256.hash(Array(message.utf8)).hex == expected)
    }

    @Test("one million 'a' (fed as 1000 chunks of 1000)")
    func millionA() {
        let chunk = [UInt8](repeating: UInt8(ascii: "a"), count: 1000)
        var hasher = SHA256()
        for _ in 0..<1000 { hasher.update(chunk) }
        #expect(hasher.finalize().hex == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0")
    }

    /// Messages `(i * 7 + 3) % 256` for i in 0..<n, around the padding boundaries (55/56 bytes is
    /// where the length stops fitting in the last block). Expected digests were computed with
    /// `python3 -c 'import hashlib; print(hashlib.sha256(bytes((i*7+3)%256 for i in range(n))).hexdigest())'`
    /// and pasted here as literals.
    @Test(
        "block-boundary lengths match Python's hashlib",
        arguments: [
            (0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"),
            (1, "084fed08b978af4d7d196a7446a86b58009e636b611db16211b65a9aadff29c5"),
            (3, "6ab0dba1f4f1dfbb37b4f9eeb092c09fca4900ad32bdcd147d8dde35d6c87c35"),
            (55, "e7313d333c272e639f790978283f9eb392e843d0f29b7016828bb1daa4aac70b"),
            (56, "4324d65f3c103567f5589c710bc08f8523f929a9272e3af36fc968e52abc6c27"),
            (57, "35df609437dcfea3279283ab79fd554e2bf78f8f7ae2de532d8ee300b09e8f73"),
            (63, "81c80242132f230c3bd41b3e63bbcff16107339549214a99614ff26664625055"),
            (64, "39e3d7b6b5d075d37d053ad89b24b41bef4f3c29760c84447cab3f3be1882241"),
            (65, "aacca6ff74fdbb296d165a45cecfa04e5127bc008770fbbdd48006f2d2fae95e"),
            (119, "9ce7368e4daf32341631b492e80359dc9f594b48453cd0dd5bf0b19279cc177e"),
            (120, "7836b787757e95e58b3ca5aec90b1b004e8deba1e50e9675af9cabf1a13a04b5"),
            (121, "1189a98a00c71bc1848ea8bdc9700b442bee0be7c3f45172303f1ab0b6f1617e"),
            (127, "a8d23e75d936f303d248888d9b165ee543f4cbafcad3c9dd2a79bd84faa11d07"),
            (128, "d2742f1f4ac6bb7ca2b239ee18402ba8b3f9f8e652d2a72973c2b9ba11c08cf6"),
            (129, "307f8fc2c1622b92762e818d39a185d4d667ad49a4b07ceae1f4afa008a93ec4"),
            (1000, "1e9bc38cbf860b9ec31918b065f9b52476c549a782e0e7990bed8ce3868d2371"),
        ])
    func blockBoundaries(length: Int, expected: String) {
        let message = (0..<length).map { UInt8(($0 * 7 + 3) % 256) }
        #expect(SHA256.hash(message).hex == expected)
        // Byte by byte exercises the pending-block path for every split point.
        var hasher = SHA256()
        for byte in message { hasher.update([byte]) }
        #expect(hasher.finalize().hex == expected)
    }

    @Test("streaming in random chunk sizes equals one-shot (seeded)")
    func randomChunks() {
        var random = SeededGenerator(seed: 0x5eed_0001)
        for _ in 0..<200 {
            let length = Int.random(in: 0...700, using: &random)
            let message = (0..<length).map { _ in UInt8.random(in: 0...255, using: &random) }
            var hasher = SHA256()
            var offset = 0
            while offset < message.count {
                let size = min(Int.random(in: 0...130, using: &random), message.count - offset)
                hasher.update(message[offset..<offset + size])
                offset += size
            }
            #expect(hasher.finalize() == SHA256.hash(message), "length \(length)")
        }
    }

    @Test("UTF-8 strings hash their encoding (digest computed with Python's hashlib)")
    func unicodeString() {
        let text = "héllo wörld ✓ 🚀"
        #expect(SHA256.hash(text).hex == "c1a19c07e61550d4eb0bec9e7259bbf521b29ef90cede8cc2b5170f4046a7373")
        #expect(SHA256.hash(text) == SHA256.hash(Array(text.utf8)))
    }

    @Test("finalize does not consume the hasher; copies fork the computation")
    func finalizeIsNonDestructive() {
        var hasher = SHA256()
        hasher.update("ab")
        let fork = hasher
        #expect(hasher.finalize() == SHA256.hash("ab"))
        hasher.update("c")
        #expect(hasher.finalize().hex == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(fork.finalize() == SHA256.hash("ab"))
    }

    @Test("digest bytes, hex and description agree")
    func digestShape() {
        let digest = SHA256.hash("abc")
        #expect(digest.bytes.count == 32)
        #expect(digest.bytes.prefix(4) == [0xba, 0x78, 0x16, 0xbf])
        #expect(digest.description == digest.hex)
        #expect(digest.hex.count == 64)
    }

    /// Throughput figure for the report; run with `ALLOT_BENCH=1 swift test -c release --filter throughput`.
    @Test("throughput (ALLOT_BENCH=1)", .enabled(if: ProcessInfo.processInfo.environment["ALLOT_BENCH"] == "1"))
    func throughput() {
        let block = [UInt8](repeating: 0x61, count: 1 << 20)
        var rates: [Double] = []
        for _ in 0..<5 {
            let start = DispatchTime.now().uptimeNanoseconds
            var hasher = SHA256()
            for _ in 0..<64 { hasher.update(block) }
            _ = hasher.finalize()
            let seconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
            rates.append(64 / seconds)
        }
        let median = rates.sorted()[rates.count / 2]
        print("SHA-256 throughput: \(Int(median)) MB/s (median of 5 runs of 64 MiB)")
        #expect(median > 0)
    }
}
