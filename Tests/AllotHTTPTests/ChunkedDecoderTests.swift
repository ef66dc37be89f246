import Testing

@testable import AllotHTTP

@Suite struct ChunkedDecoderTests {
    func decode(_ text: String, maxBody: Int = 1000, splitAt: [Int] = []) -> (
        body: [UInt8], outcome: ChunkedDecoder.Outcome, consumed: Int
    ) {
        var decoder = ChunkedDecoder(maxBodyBytes: maxBody, maxTrailerBytes: 64)
        let bytes = Array(text.utf8)
        var body: [UInt8] = []
        var start = 0
        var consumed = 0
        for end in splitAt + [bytes.count] where end >= start {
            let (used, outcome) = bytes[start..<end].withUnsafeBufferPointer { decoder.decode($0, into: &body) }
            consumed += used
            if outcome != .needMore { return (body, outcome, consumed) }
            #expect(used == end - start)
            start = end
        }
        return (body, .needMore, consumed)
    }

    @Test func decodesChunksExtensionsAndTrailers() {
        let text =
            "4;name=value\r\nWiki\r\n5 ; x\r\npedia\r\nE\r\n in\r\n\r\nchunks.\r\n0\r\nExpires: never\r\n\r\nNEXT"
        let result = decode(text)
        #expect(result.outcome == .done)
        #expect(String(decoding: result.body, as: UTF8.self) == "Wikipedia in\r\n\r\nchunks.")
        #expect(result.consumed == text.utf8.count - 4)  // stops before the next message
    }

    @Test func decodesTheSameWhateverTheSplit() {
        let text = "3\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\n\r\n"
        for split in 1..<text.utf8.count {
            let result = decode(text, splitAt: [split])
            #expect(result.outcome == .done, "split at \(split)")
            #expect(String(decoding: result.body, as: UTF8.self) == "abc0123456789abcdef", "split at \(split)")
        }
    }

    @Test(arguments: [
        ("g\r\n", "invalid chunk size"),
        ("-1\r\n", "invalid chunk size"),
        (" 5\r\n", "invalid chunk size"),
        ("\r\n", "invalid chunk size"),
        ("5\nabcde\r\n0\r\n\r\n", "invalid chunk size"),
        ("5\r\rabcde", "chunk size line without LF"),
        ("3\r\nabcd\r\n", "chunk data longer than its size"),
        ("3\r\nabc\r\r", "chunk data without CRLF"),
        ("0\r\nX: y\n\r\n", "bare LF in chunked trailer"),
        ("1;\0\r\n", "invalid character in chunk extension"),
    ])
    func rejectsMalformedChunks(text: String, message: String) {
        let result = decode(text)
        guard case .failure(let error) = result.outcome else {
            Issue.record("expected failure for \(text.debugDescription), got \(result.outcome)")
            return
        }
        #expect(error.status == .badRequest)
        #expect(error.message == message)
    }

    @Test func refusesBodiesOverTheLimitBeforeBufferingThem() {
        let result = decode("400\r\n", maxBody: 1000)
        guard case .failure(let error) = result.outcome else { Issue.record("\(result.outcome)"); return }
        #expect(error.status == .contentTooLarge)
        // The header at fault is the chunked encoding: no Content-Length was sent.
        #expect(error.field == "Transfer-Encoding")
        #expect(result.body.isEmpty)
        guard case .failure(let huge) = decode("fffffffffffffffffff\r\n").outcome else {
            Issue.record("no failure"); return
        }
        #expect(huge.status == .contentTooLarge)
        #expect(huge.field == "Transfer-Encoding")
    }

    @Test func refusesEndlessTrailers() {
        let result = decode("0\r\n" + String(repeating: "X: y\r\n", count: 20) + "\r\n")
        guard case .failure(let error) = result.outcome else { Issue.record("\(result.outcome)"); return }
        #expect(error.status == .requestHeaderFieldsTooLarge)
    }
}
