import AllotTime
import Glibc

/// Writes a response head (status line and fields) as bytes.
enum ResponseEncoder {
    /// Encodes `response`'s head for a connection that will (`keepAlive`) or will not stay open.
    ///
    /// The server owns the framing fields: `Content-Length` is the body's size (also for `HEAD`,
    /// whose body is then not sent; omitted for 1xx, 204 and 304), `Connection: close` is sent
    /// when the connection ends after this response, `Connection: keep-alive` when an HTTP/1.0
    /// client asked for it, and `Date` is added (RFC 9110 §6.6.1). Values a handler set for those
    /// fields are ignored. Other fields are written as given, except that a name that is not a token
    /// is dropped and CR, LF and other control bytes in a value become spaces, so no handler can
    /// split a response by putting user input in a header.
    static func head(for response: HTTPResponse, keepAlive: Bool, version: HTTPVersion) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(160 + response.headers.count * 40)
        bytes.append(contentsOf: "HTTP/1.1 ".utf8)
        appendDecimal(response.status.code, to: &bytes)
        bytes.append(ASCII.space)
        appendSanitised(response.status.reasonPhrase, to: &bytes)
        bytes.append(contentsOf: "\r\n".utf8)
        if !response.status.forbidsBody {
            bytes.append(contentsOf: "Content-Length: ".utf8)
            appendDecimal(response.body.count, to: &bytes)
            bytes.append(contentsOf: "\r\n".utf8)
        }
        if !keepAlive {
            bytes.append(contentsOf: "Connection: close\r\n".utf8)
        } else if version == .http1_0 {
            bytes.append(contentsOf: "Connection: keep-alive\r\n".utf8)
        }
        bytes.append(contentsOf: "Date: ".utf8)
        bytes.append(contentsOf: DateHeaderCache.current())
        bytes.append(contentsOf: "\r\n".utf8)
        for (name, value) in response.headers {
            switch name.utf8.count {
            case 4 where HTTPHeaders.equalNames(name, "date"): continue
            case 10 where HTTPHeaders.equalNames(name, "connection"): continue
            case 14 where HTTPHeaders.equalNames(name, "content-length"): continue
            case 17 where HTTPHeaders.equalNames(name, "transfer-encoding"): continue
            default: break
            }
            guard !name.isEmpty, name.utf8.allSatisfy(ASCII.isToken) else { continue }
            bytes.append(contentsOf: name.utf8)
            bytes.append(contentsOf: ": ".utf8)
            appendSanitised(value, to: &bytes)
            bytes.append(contentsOf: "\r\n".utf8)
        }
        bytes.append(contentsOf: "\r\n".utf8)
        return bytes
    }

    /// The interim `100 Continue` response (RFC 9110 §15.2.1).
    static let continueResponse: [UInt8] = Array("HTTP/1.1 100 Continue\r\n\r\n".utf8)

    @inline(__always)
    static func appendDecimal(_ value: Int, to bytes: inout [UInt8]) {
        if value < 10 {
            bytes.append(UInt8(0x30 + value))
            return
        }
        var digits:
            (
                UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8,
                UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8, UInt8
            ) =
                (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        var count = 0
        var rest = value
        withUnsafeMutableBytes(of: &digits) { buffer in
            while rest > 0 {
                buffer[count] = UInt8(0x30 + rest % 10)
                rest /= 10
                count += 1
            }
            for i in stride(from: count - 1, through: 0, by: -1) {
                bytes.append(buffer[i])
            }
        }
    }

    private static func appendSanitised(_ text: String, to bytes: inout [UInt8]) {
        for byte in text.utf8 {
            bytes.append(ASCII.isFieldValue(byte) ? byte : ASCII.space)
        }
    }
}

/// The `Date` field value (IMF-fixdate, RFC 9110 §5.6.7), formatted by AllotTime at most once a second
/// and shared by every response of that second.
enum DateHeaderCache {
    private struct Cache {
        var second: Int = -1
        var bytes: [UInt8] = []
    }

    private static let cache = Locked(Cache())

    static func current() -> [UInt8] {
        let now = Int(time(nil))
        return cache.withLock { cache in
            if cache.second != now {
                cache.second = now
                cache.bytes = Array(HTTPDate.format(Double(now)).utf8)
            }
            return cache.bytes
        }
    }
}
