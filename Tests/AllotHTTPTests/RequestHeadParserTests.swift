import Testing

@testable import AllotHTTP

/// The request parser on its own, with well-formed and hostile heads.
@Suite struct RequestHeadParserTests {
    static let limits = RequestLimits(
        maxHeaderBytes: 1024, maxRequestLineBytes: 256, maxHeaderCount: 10, maxBodyBytes: 1000)

    /// Feeds `text` in one piece.
    func parse(_ text: String, limits: RequestLimits = limits) -> RequestHeadParser.Outcome {
        parse(Array(text.utf8), limits: limits)
    }

    func parse(_ bytes: [UInt8], limits: RequestLimits = limits) -> RequestHeadParser.Outcome {
        var parser = RequestHeadParser(limits: limits)
        return bytes.withUnsafeBufferPointer { parser.parse($0) }
    }

    /// Feeds `text` one byte at a time (as a dripping client would) and returns the first decisive outcome.
    func parseByteByByte(_ text: String) -> RequestHeadParser.Outcome {
        var parser = RequestHeadParser(limits: Self.limits)
        let bytes = Array(text.utf8)
        for end in 1...bytes.count {
            let outcome = bytes[0..<end].withUnsafeBufferPointer { parser.parse($0) }
            if case .needMore = outcome { continue }
            return outcome
        }
        return .needMore
    }

    func head(_ outcome: RequestHeadParser.Outcome) throws -> RequestHead {
        guard case .head(let head, _) = outcome else {
            Issue.record("expected a head, got \(outcome)")
            throw ParseFailed()
        }
        return head
    }

    func error(_ outcome: RequestHeadParser.Outcome) -> HTTPError? {
        if case .failure(let error) = outcome { return error }
        return nil
    }

    struct ParseFailed: Error {}

    @Test func parsesASimpleGet() throws {
        let text = "GET /v1/snapshot?gateway=gw%201&wait=30 HTTP/1.1\r\nHost: allot\r\nX-Mixed-Case: Value \r\n\r\n"
        let outcome = parse(text)
        guard case .head(let head, let length) = outcome else { Issue.record("\(outcome)"); return }
        #expect(length == text.utf8.count)
        #expect(head.method == .get)
        #expect(head.target.path == "/v1/snapshot")
        #expect(head.target.segments == ["v1", "snapshot"])
        #expect(head.target.query == "gateway=gw%201&wait=30")
        #expect(
            head.target.queryItems == [
                HTTPQueryItem(name: "gateway", value: "gw 1"), HTTPQueryItem(name: "wait", value: "30"),
            ])
        #expect(head.version == .http1_1)
        #expect(head.headers["x-mixed-case"] == "Value")
        #expect(head.headers["HOST"] == "allot")
        #expect(head.framing == .none)
        #expect(head.keepAlive)
        #expect(!head.expectsContinue)
    }

    @Test func byteByByteGivesTheSameResult() throws {
        let text = "POST /echo HTTP/1.1\r\nHost: a\r\nContent-Length: 12\r\n\r\n"
        let dripped = try head(parseByteByByte(text))
        let whole = try head(parse(text))
        #expect(dripped.framing == .length(12))
        #expect(dripped.headers == whole.headers)
        #expect(dripped.target.raw == whole.target.raw)
    }

    @Test func needsMoreUntilTheBlankLine() {
        guard case .needMore = parse("GET / HTTP/1.1\r\nHost: a\r\n") else { Issue.record("expected needMore"); return }
    }

    @Test func percentDecodesPathSegmentsKeepingEncodedSlashesInside() throws {
        let head = try head(parse("GET /v1/tenants/acme%2Fprod/override HTTP/1.1\r\nHost: a\r\n\r\n"))
        #expect(head.target.segments == ["v1", "tenants", "acme/prod", "override"])
        #expect(head.target.path == "/v1/tenants/acme%2Fprod/override")
    }

    @Test func absoluteFormTargetKeepsThePath() throws {
        let head = try head(parse("GET http://allot:8080/healthz?x=1 HTTP/1.1\r\nHost: allot\r\n\r\n"))
        #expect(head.target.path == "/healthz")
        #expect(head.target.query == "x=1")
    }

    @Test func connectionSemantics() throws {
        #expect(try !head(parse("GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, Close\r\n\r\n")).keepAlive)
        #expect(try !head(parse("GET / HTTP/1.0\r\n\r\n")).keepAlive)
        #expect(try head(parse("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n")).keepAlive)
        #expect(try head(parse("GET / HTTP/1.9\r\nHost: a\r\n\r\n")).version == .http1_1)
    }

    @Test func expectations() throws {
        #expect(
            try head(parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nExpect: 100-Continue\r\n\r\n"))
                .expectsContinue)
        #expect(error(parse("POST / HTTP/1.1\r\nHost: a\r\nExpect: teapot\r\n\r\n"))?.status == .expectationFailed)
    }

    @Test func chunkedFraming() throws {
        #expect(try head(parse("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: Chunked\r\n\r\n")).framing == .chunked)
        #expect(
            error(parse("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n"))?.status
                == .notImplemented)
        #expect(
            error(parse("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n"))?.status
                == .badRequest)
        #expect(
            error(parse("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, chunked\r\n\r\n"))?.status
                == .badRequest)
        #expect(error(parse("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"))?.status == .badRequest)
    }

    @Test(arguments: [
        // (request, status, message)
        (
            "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 400,
            "both Transfer-Encoding and Content-Length"
        ),
        (
            "GET / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", 400,
            "both Transfer-Encoding and Content-Length"
        ),
        ("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", 400, "invalid Content-Length"),
        ("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\n", 400, "invalid Content-Length"),
        ("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x10\r\n\r\n", 400, "invalid Content-Length"),
        ("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1 2\r\n\r\n", 400, "invalid Content-Length"),
        ("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: \r\n\r\n", 400, "invalid Content-Length"),
        ("GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 5,5\r\n\r\n", 400, "invalid Content-Length"),
        (
            "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n", 400,
            "more than one Content-Length"
        ),
        (
            "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 99999999999999999999999\r\n\r\n", 413,
            "request body exceeds the limit of 1000 bytes"
        ),
        (
            "GET / HTTP/1.1\r\nHost: a\r\nContent-Length: 1001\r\n\r\n", 413,
            "request body exceeds the limit of 1000 bytes"
        ),
        ("GET / HTTP/1.1\nHost: a\n\n", 400, "line ending without CR (bare LF)"),
        ("GET / HTTP/1.1\r\nHost: a\n\r\n", 400, "line ending without CR (bare LF)"),
        ("GET / HTTP/1.1\r\nHost: a\rX: b\r\n\r\n", 400, "invalid character in header value"),
        ("GET / HTTP/1.1\r\nHost: a\r\nNoColon\r\n\r\n", 400, "header line without a colon"),
        ("GET / HTTP/1.1\r\nHost: a\r\nBad Name: x\r\n\r\n", 400, "invalid header name"),
        ("GET / HTTP/1.1\r\nHost: a\r\nName : x\r\n\r\n", 400, "invalid header name"),
        ("GET / HTTP/1.1\r\nHost: a\r\n: x\r\n\r\n", 400, "empty header name"),
        ("GET / HTTP/1.1\r\nHost: a\r\nX: a\0b\r\n\r\n", 400, "invalid character in header value"),
        ("GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n folded\r\n\r\n", 400, "obsolete line folding in header"),
        ("GET / HTTP/1.1\r\n\r\n", 400, "missing Host header"),
        ("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400, "more than one Host header"),
        ("GET /a\0b HTTP/1.1\r\nHost: a\r\n\r\n", 400, "invalid character in request target"),
        ("GET /%zz HTTP/1.1\r\nHost: a\r\n\r\n", 400, "malformed percent-encoding in path"),
        ("GET /%C3%28 HTTP/1.1\r\nHost: a\r\n\r\n", 400, "malformed percent-encoding in path"),
        ("GET /?a=%2 HTTP/1.1\r\nHost: a\r\n\r\n", 400, "malformed percent-encoding in query"),
        ("GET relative HTTP/1.1\r\nHost: a\r\n\r\n", 400, "request target must start with '/'"),
        ("GET  / HTTP/1.1\r\nHost: a\r\n\r\n", 400, "malformed request line"),
        ("GET / HTTP/1.1 \r\nHost: a\r\n\r\n", 400, "malformed HTTP version"),
        ("GET / http/1.1\r\nHost: a\r\n\r\n", 400, "malformed HTTP version"),
        ("GET / HTTP/1.10\r\nHost: a\r\n\r\n", 400, "malformed HTTP version"),
        ("GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505, "HTTP/2.0 is not supported; use HTTP/1.1"),
        ("GET / HTTP/0.9\r\nHost: a\r\n\r\n", 505, "HTTP/0.9 is not supported; use HTTP/1.1"),
        ("G@T / HTTP/1.1\r\nHost: a\r\n\r\n", 400, "malformed request line"),
        ("\r\n", 400, "malformed request line"),
    ])
    func rejectsHostileHeads(request: String, status: Int, message: String) {
        let failure = error(parse(request))
        #expect(failure?.status.code == status, "\(request.debugDescription)")
        #expect(failure?.message == message, "\(request.debugDescription)")
    }

    @Test func garbageIsRejectedBeforeALineEndArrives() {
        // A TLS ClientHello: not a token, refused at the first byte instead of waiting for CRLF.
        #expect(error(parse([0x16, 0x03, 0x01, 0x02, 0x00]))?.status == .badRequest)
        // A plausible method prefix still waits.
        guard case .needMore = parse("GET /slo") else { Issue.record("expected needMore"); return }
    }

    @Test func limitsHaveTheirOwnStatuses() {
        let longTarget = "GET /" + String(repeating: "a", count: 300) + " HTTP/1.1\r\nHost: a\r\n\r\n"
        #expect(error(parse(longTarget))?.status == .uriTooLong)
        // Without a line end yet, too: a client streaming an endless target is stopped at the limit.
        #expect(error(parse("GET /" + String(repeating: "a", count: 300)))?.status == .uriTooLong)
        let bigHeader = "GET / HTTP/1.1\r\nHost: a\r\nX: " + String(repeating: "b", count: 1100) + "\r\n\r\n"
        #expect(error(parse(bigHeader))?.status == .requestHeaderFieldsTooLarge)
        #expect(
            error(parse("GET / HTTP/1.1\r\nHost: a\r\nX: " + String(repeating: "b", count: 1100)))?.code
                == "headers_too_large")
        let manyHeaders = "GET / HTTP/1.1\r\nHost: a\r\n" + (0..<11).map { "X\($0): y\r\n" }.joined() + "\r\n"
        #expect(error(parse(manyHeaders))?.code == "too_many_headers")
    }

    @Test func resetParsesTheNextPipelinedRequest() throws {
        let first = "GET /one HTTP/1.1\r\nHost: a\r\n\r\n"
        let second = "GET /two HTTP/1.1\r\nHost: a\r\n\r\n"
        var parser = RequestHeadParser(limits: Self.limits)
        let bytes = Array((first + second).utf8)
        let outcome1 = bytes.withUnsafeBufferPointer { parser.parse($0) }
        guard case .head(let head1, let length1) = outcome1 else { Issue.record("\(outcome1)"); return }
        parser.reset()
        let outcome2 = bytes.withUnsafeBufferPointer { parser.parse(UnsafeBufferPointer(rebasing: $0[length1...])) }
        guard case .head(let head2, _) = outcome2 else { Issue.record("\(outcome2)"); return }
        #expect(head1.target.path == "/one")
        #expect(head2.target.path == "/two")
    }

    /// A bounded, seeded fuzz loop: random mutations of valid heads (and pure noise) must never crash
    /// the parser, and every decision must be a head or one of the statuses the parser documents.
    @Test func fuzzedInputNeverCrashes() {
        var random = SeededRandom(seed: 0xA110_7)
        let seeds = [
            "GET /v1/snapshot?gateway=g1&wait=30 HTTP/1.1\r\nHost: allot\r\nIf-None-Match: \"42\"\r\n\r\n",
            "POST /v1/telemetry HTTP/1.1\r\nHost: a\r\nContent-Length: 10\r\nContent-Type: application/json\r\n\r\n",
            "PUT /v1/tenants/acme/override HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nExpect: 100-continue\r\n\r\n",
        ].map { Array($0.utf8) }
        let allowed: Set<Int> = [400, 413, 414, 417, 431, 501, 505]
        var decisions = [0, 0, 0]
        for iteration in 0..<3000 {
            var bytes: [UInt8]
            if iteration % 10 == 0 {
                bytes = (0..<Int(random.next() % 200)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
            } else {
                bytes = seeds[Int(random.next() % UInt64(seeds.count))]
                for _ in 0..<(1 + Int(random.next() % 4)) {
                    let position = Int(random.next() % UInt64(bytes.count))
                    switch random.next() % 4 {
                    case 0: bytes[position] = UInt8(truncatingIfNeeded: random.next())
                    case 1: bytes.insert(UInt8(truncatingIfNeeded: random.next()), at: position)
                    case 2: bytes.remove(at: position)
                    default: bytes.insert(contentsOf: [13, 10, 0, 58, 32].shuffled(using: &random), at: position)
                    }
                    if bytes.isEmpty { bytes = [0] }
                }
            }
            switch parse(bytes) {
            case .needMore: decisions[0] += 1
            case .head(_, let length):
                decisions[1] += 1
                #expect(length <= bytes.count)
            case .failure(let error):
                decisions[2] += 1
                #expect(allowed.contains(error.status.code), "unexpected status \(error.status) for \(bytes)")
            }
        }
        // The mutations exercise all three outcomes.
        #expect(decisions.allSatisfy { $0 > 50 }, "\(decisions)")
    }
}

/// SplitMix64: a small, seedable generator so fuzz and property tests are reproducible.
struct SeededRandom: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
