import Glibc

/// How a request's body is delimited (RFC 9112 §6).
enum BodyFraming: Equatable, Sendable {
    case none
    case length(Int)
    case chunked
}

/// A parsed and validated request head, with the framing and connection decisions made.
struct RequestHead: Sendable {
    var method: HTTPMethod
    var target: RequestTarget
    var version: HTTPVersion
    var headers: HTTPHeaders
    var framing: BodyFraming
    /// Whether the connection may serve another request after this one (HTTP/1.1 unless
    /// `Connection: close`; HTTP/1.0 only with `Connection: keep-alive`).
    var keepAlive: Bool
    /// `Expect: 100-continue` on an HTTP/1.1 request.
    var expectsContinue: Bool
}

/// The limits the request parser enforces, each answered with its own status.
struct RequestLimits: Sendable {
    /// The whole head (request line and fields, with line endings): beyond it, 431.
    var maxHeaderBytes: Int
    /// The request line: beyond it, 414 (the target is what makes a request line long).
    var maxRequestLineBytes: Int
    /// Header field lines: beyond it, 431.
    var maxHeaderCount: Int
    /// Declared or de-chunked body bytes: beyond it, 413.
    var maxBodyBytes: Int
}

/// An incremental, strict parser of HTTP/1.1 request heads (RFC 9112 §2–§3, §5, §6).
///
/// Strictness is deliberate; Allot sits behind proxies and gateways, and every leniency is a
/// disagreement an attacker can use to smuggle a request past one of them:
/// - Lines end in CRLF. A bare LF is rejected with 400 (RFC 9112 §2.2 allows either choice; we
///   pick the one that cannot disagree with a strict front end), and so is a bare CR.
/// - No whitespace between a field name and its colon, no obsolete line folding, no NUL or other
///   control characters in values, no spaces in the target: 400.
/// - `Transfer-Encoding` together with `Content-Length`, a repeated or non-decimal
///   `Content-Length`, and `Transfer-Encoding` on HTTP/1.0 are all 400 (§6.1, §6.3).
/// - `Transfer-Encoding: chunked` is supported; any other coding is 501.
/// - HTTP/1.1 requests need exactly one `Host` field (§3.2): 400 otherwise.
/// - Versions other than 1.0 and 1.x are 505.
///
/// Bytes arriving one at a time are not rescanned: `scanned` remembers how far line endings were
/// checked, so a slow client costs O(n) work in total, not O(n²).
struct RequestHeadParser {
    enum Outcome {
        case needMore
        case head(RequestHead, length: Int)
        case failure(HTTPError)
    }

    let limits: RequestLimits
    private var scanned = 0
    private var lineStart = 0
    private var requestLineEnd = -1
    private var headerLines = 0

    init(limits: RequestLimits) {
        self.limits = limits
    }

    /// Forgets the previous request; call before parsing the next one on the same connection.
    mutating func reset() {
        scanned = 0
        lineStart = 0
        requestLineEnd = -1
        headerLines = 0
    }

    /// Looks at the bytes of one request head, starting at `bytes[0]` (the same start each call,
    /// with more bytes appended).
    mutating func parse(_ bytes: UnsafeBufferPointer<UInt8>) -> Outcome {
        let count = bytes.count
        var index = scanned
        while index < count {
            guard let base = bytes.baseAddress,
                let found = memchr(base + index, Int32(ASCII.lf), count - index)
            else {
                index = count
                break
            }
            let lf = base.distance(to: found.assumingMemoryBound(to: UInt8.self))
            guard lf > lineStart, bytes[lf - 1] == ASCII.cr else {
                return .failure(.badRequest("line ending without CR (bare LF)", code: "malformed_request"))
            }
            let lineEnd = lf - 1
            if requestLineEnd < 0 {
                if lf + 1 > limits.maxRequestLineBytes { return .failure(Self.targetTooLong(limits)) }
                if lineEnd == 0 { return .failure(.badRequest("malformed request line", code: "malformed_request")) }
                requestLineEnd = lineEnd
            } else if lineEnd == lineStart {
                scanned = lf + 1
                return finish(bytes, headLength: lf + 1)
            } else {
                headerLines += 1
                if headerLines > limits.maxHeaderCount {
                    return .failure(
                        HTTPError(
                            .requestHeaderFieldsTooLarge, code: "too_many_headers",
                            message: "more than \(limits.maxHeaderCount) header fields"))
                }
            }
            if lf + 1 > limits.maxHeaderBytes { return .failure(Self.headTooLarge(limits)) }
            lineStart = lf + 1
            index = lf + 1
        }
        scanned = index
        if requestLineEnd < 0 {
            // Reject garbage (a TLS handshake, a binary protocol) at once rather than waiting for a
            // line ending that may never come: the method must be a token followed by a space.
            for i in 0..<count {
                let byte = bytes[i]
                if byte == ASCII.space { break }
                if !ASCII.isToken(byte) {
                    return .failure(.badRequest("malformed request line", code: "malformed_request"))
                }
            }
            if count > limits.maxRequestLineBytes { return .failure(Self.targetTooLong(limits)) }
        }
        if count > limits.maxHeaderBytes { return .failure(Self.headTooLarge(limits)) }
        return .needMore
    }

    private static func targetTooLong(_ limits: RequestLimits) -> HTTPError {
        HTTPError(
            .uriTooLong, code: "uri_too_long",
            message: "request line exceeds the limit of \(limits.maxRequestLineBytes) bytes")
    }

    private static func headTooLarge(_ limits: RequestLimits) -> HTTPError {
        HTTPError(
            .requestHeaderFieldsTooLarge, code: "headers_too_large",
            message: "request header exceeds the limit of \(limits.maxHeaderBytes) bytes")
    }

    // MARK: Interpreting a complete head

    private func finish(_ bytes: UnsafeBufferPointer<UInt8>, headLength: Int) -> Outcome {
        do throws(HTTPError) {
            let head = try Self.interpret(bytes, requestLineEnd: requestLineEnd, headLength: headLength, limits: limits)
            return .head(head, length: headLength)
        } catch {
            return .failure(error)
        }
    }

    private static func malformed(_ message: String, field: String? = nil) -> HTTPError {
        HTTPError(.badRequest, code: "malformed_request", message: message, field: field)
    }

    private static func interpret(
        _ bytes: UnsafeBufferPointer<UInt8>, requestLineEnd: Int, headLength: Int, limits: RequestLimits
    ) throws(HTTPError) -> RequestHead {
        // Request line: method SP request-target SP HTTP-version, single spaces only.
        guard let firstSpace = (0..<requestLineEnd).first(where: { bytes[$0] == ASCII.space }), firstSpace > 0 else {
            throw malformed("malformed request line")
        }
        let targetStart = firstSpace + 1
        guard let secondSpace = (targetStart..<requestLineEnd).first(where: { bytes[$0] == ASCII.space }),
            secondSpace > targetStart
        else { throw malformed("malformed request line") }
        for i in 0..<firstSpace where !ASCII.isToken(bytes[i]) { throw malformed("malformed request line") }
        for i in targetStart..<secondSpace where !ASCII.isTargetByte(bytes[i]) {
            throw malformed("invalid character in request target")
        }
        let version = try parseVersion(UnsafeBufferPointer(rebasing: bytes[(secondSpace + 1)..<requestLineEnd]))
        let method = HTTPMethod.from(UnsafeBufferPointer(rebasing: bytes[0..<firstSpace]))
        let targetText = String(
            decoding: UnsafeBufferPointer(rebasing: bytes[targetStart..<secondSpace]), as: UTF8.self)
        let target = try RequestTarget(targetText, strict: true)

        // Field lines.
        var headers = HTTPHeaders()
        var contentLengths: [Substring] = []
        var transferCodings: [String] = []
        var hasTransferEncoding = false
        var hostCount = 0
        var expectation: String?
        var lineStart = requestLineEnd + 2
        let end = headLength - 2
        while lineStart < end {
            // Lines end at LF (the scanner checked each is preceded by CR); a bare CR inside a line
            // stays in it and fails the character checks below.
            var lineEnd = lineStart
            while bytes[lineEnd] != ASCII.lf { lineEnd += 1 }
            lineEnd -= 1
            let first = bytes[lineStart]
            if first == ASCII.space || first == ASCII.tab {
                throw malformed("obsolete line folding in header")
            }
            guard let colon = (lineStart..<lineEnd).first(where: { bytes[$0] == ASCII.colon }) else {
                throw malformed("header line without a colon")
            }
            guard colon > lineStart else { throw malformed("empty header name") }
            for i in lineStart..<colon where !ASCII.isToken(bytes[i]) {
                throw malformed("invalid header name")
            }
            var valueStart = colon + 1
            var valueEnd = lineEnd
            while valueStart < valueEnd && (bytes[valueStart] == ASCII.space || bytes[valueStart] == ASCII.tab) {
                valueStart += 1
            }
            while valueEnd > valueStart && (bytes[valueEnd - 1] == ASCII.space || bytes[valueEnd - 1] == ASCII.tab) {
                valueEnd -= 1
            }
            let name = String(decoding: UnsafeBufferPointer(rebasing: bytes[lineStart..<colon]), as: UTF8.self)
            for i in valueStart..<valueEnd where !ASCII.isFieldValue(bytes[i]) {
                throw malformed("invalid character in header value", field: name)
            }
            let value = String(decoding: UnsafeBufferPointer(rebasing: bytes[valueStart..<valueEnd]), as: UTF8.self)
            headers.add(name: name, value: value)

            switch name.utf8.count {
            case 4 where HTTPHeaders.equalNames(name, "host"):
                hostCount += 1
            case 6 where HTTPHeaders.equalNames(name, "expect"):
                expectation = value
            case 14 where HTTPHeaders.equalNames(name, "content-length"):
                contentLengths.append(Substring(value))
            case 17 where HTTPHeaders.equalNames(name, "transfer-encoding"):
                hasTransferEncoding = true
                for coding in value.split(separator: ",", omittingEmptySubsequences: false) {
                    transferCodings.append(coding.trimmingOWS().lowercased())
                }
            default:
                break
            }
            lineStart = lineEnd + 2
        }

        if version == .http1_1 && hostCount != 1 {
            throw malformed(hostCount == 0 ? "missing Host header" : "more than one Host header", field: "Host")
        }

        // Framing (RFC 9112 §6.3): refuse every ambiguous combination rather than guess.
        var framing = BodyFraming.none
        if hasTransferEncoding {
            if !contentLengths.isEmpty {
                throw malformed("both Transfer-Encoding and Content-Length", field: "Transfer-Encoding")
            }
            if version == .http1_0 {
                throw malformed("Transfer-Encoding in an HTTP/1.0 request", field: "Transfer-Encoding")
            }
            if transferCodings == ["chunked"] {
                framing = .chunked
            } else if transferCodings.last == "chunked" && !transferCodings.dropLast().contains("chunked") {
                throw HTTPError(
                    .notImplemented, code: "unsupported_transfer_encoding",
                    message: "only the chunked transfer coding is supported", field: "Transfer-Encoding")
            } else {
                throw malformed("chunked must be the final transfer coding, exactly once", field: "Transfer-Encoding")
            }
        } else if !contentLengths.isEmpty {
            guard contentLengths.count == 1 else {
                throw malformed("more than one Content-Length", field: "Content-Length")
            }
            let digits = contentLengths[0].utf8
            guard !digits.isEmpty, digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else {
                throw malformed("invalid Content-Length", field: "Content-Length")
            }
            guard digits.count <= 18, let length = Int(contentLengths[0]), length <= limits.maxBodyBytes else {
                throw HTTPError.bodyTooLarge(limit: limits.maxBodyBytes)
            }
            framing = length == 0 ? .none : .length(length)
        }

        let keepAlive =
            version == .http1_1
            ? !headers.containsToken("close", in: "Connection")
            : headers.containsToken("keep-alive", in: "Connection")

        var expectsContinue = false
        if let expectation {
            guard expectation.lowercased() == "100-continue" else {
                throw HTTPError(
                    .expectationFailed, code: "expectation_failed",
                    message: "only 'Expect: 100-continue' is supported", field: "Expect")
            }
            expectsContinue = version == .http1_1
        }

        return RequestHead(
            method: method, target: target, version: version, headers: headers, framing: framing,
            keepAlive: keepAlive, expectsContinue: expectsContinue)
    }

    /// `HTTP/1.0` and `HTTP/1.1` are served; `HTTP/1.x` with a higher minor is served as 1.1
    /// (RFC 9110 §2.5); other well-formed versions are 505; anything else is 400.
    private static func parseVersion(_ bytes: UnsafeBufferPointer<UInt8>) throws(HTTPError) -> HTTPVersion {
        guard bytes.count == 8, bytes[0] == 0x48, bytes[1] == 0x54, bytes[2] == 0x54, bytes[3] == 0x50,
            bytes[4] == 0x2F, bytes[6] == 0x2E, (0x30...0x39).contains(bytes[5]), (0x30...0x39).contains(bytes[7])
        else { throw malformed("malformed HTTP version") }
        let major = Int(bytes[5] - 0x30)
        let minor = Int(bytes[7] - 0x30)
        guard major == 1 else {
            throw HTTPError(
                .httpVersionNotSupported, code: "version_not_supported",
                message: "HTTP/\(major).\(minor) is not supported; use HTTP/1.1")
        }
        return minor == 0 ? .http1_0 : .http1_1
    }
}
