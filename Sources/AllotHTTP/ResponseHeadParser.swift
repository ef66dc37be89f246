import Glibc

/// A parsed response head, with its framing decided (RFC 9112 §6.3).
struct ResponseHead {
    enum Framing: Equatable {
        case none
        case length(Int)
        case chunked
        /// No length and not chunked: the body runs until the server closes.
        case untilClose
    }

    var status: HTTPStatus
    var headers: HTTPHeaders
    var framing: Framing
    var keepAlive: Bool
}

/// Parses response heads for `HTTPClient`: CRLF line endings, a status line, field lines with colons.
struct ResponseHeadParser {
    enum Outcome {
        case needMore
        case head(ResponseHead, length: Int)
        case failure(String)
    }

    let maxHeaderBytes: Int
    private var scanned = 0

    init(maxHeaderBytes: Int) {
        self.maxHeaderBytes = maxHeaderBytes
    }

    mutating func reset() { scanned = 0 }

    mutating func parse(_ bytes: UnsafeBufferPointer<UInt8>, requestMethod: HTTPMethod) -> Outcome {
        // Find the blank line, resuming where the last call stopped (minus 3 bytes of a split CRLFCRLF).
        var index = max(0, scanned - 3)
        var end = -1
        while index + 3 < bytes.count {
            if bytes[index + 3] == ASCII.lf && bytes[index + 2] == ASCII.cr && bytes[index + 1] == ASCII.lf
                && bytes[index] == ASCII.cr
            {
                end = index + 4
                break
            }
            index += 1
        }
        guard end > 0 else {
            scanned = bytes.count
            return bytes.count > maxHeaderBytes ? .failure("response head exceeds \(maxHeaderBytes) bytes") : .needMore
        }
        guard end <= maxHeaderBytes else { return .failure("response head exceeds \(maxHeaderBytes) bytes") }
        let text = String(decoding: UnsafeBufferPointer(rebasing: bytes[0..<(end - 4)]), as: UTF8.self)
        var lines = text.split(separator: "\r\n", omittingEmptySubsequences: false)
        let statusLine = lines.removeFirst()
        let parts = statusLine.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count >= 2, parts[0] == "HTTP/1.1" || parts[0] == "HTTP/1.0", parts[1].utf8.count == 3,
            let code = Int(parts[1]), (100...999).contains(code)
        else { return .failure("malformed status line: \(statusLine.prefix(80).debugDescription)") }
        let version: HTTPVersion = parts[0] == "HTTP/1.1" ? .http1_1 : .http1_0
        let status = HTTPStatus(code: code, reasonPhrase: parts.count > 2 ? String(parts[2]) : "")
        var headers = HTTPHeaders()
        for line in lines {
            guard let colon = line.firstIndex(of: ":"), colon != line.startIndex,
                line[..<colon].utf8.allSatisfy(ASCII.isToken), !line.contains("\n"), !line.contains("\r")
            else { return .failure("malformed header line: \(line.prefix(80).debugDescription)") }
            headers.add(name: String(line[..<colon]), value: String(line[line.index(after: colon)...].trimmingOWS()))
        }

        var framing = ResponseHead.Framing.untilClose
        let lengths = headers.values(for: "Content-Length")
        if requestMethod == .head || status.forbidsBody {
            framing = .none
        } else if let coding = headers.values(for: "Transfer-Encoding").last {
            framing =
                coding.split(separator: ",").last?.trimmingOWS().lowercased() == "chunked" ? .chunked : .untilClose
        } else if !lengths.isEmpty {
            guard Set(lengths).count == 1, let length = Int(lengths[0]), length >= 0,
                lengths[0].utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 })
            else { return .failure("invalid Content-Length: \(lengths.joined(separator: ", "))") }
            framing = length == 0 ? .none : .length(length)
        }
        let keepAlive =
            framing != .untilClose
            && (version == .http1_1
                ? !headers.containsToken("close", in: "Connection")
                : headers.containsToken("keep-alive", in: "Connection"))
        return .head(
            ResponseHead(status: status, headers: headers, framing: framing, keepAlive: keepAlive), length: end)
    }
}
