import Glibc

/// A listening or connecting address, `HOST:PORT`, as `--listen` takes it (SPEC section 13).
///
/// IPv6 literals need brackets (`[::1]:8080`) because the port is separated by a colon. Port 0
/// is allowed: it asks the kernel for an ephemeral port, which tests use.
public struct HostPort: Sendable, Hashable, CustomStringConvertible {
    /// Host name or IP literal, without brackets.
    public var host: String
    /// TCP port.
    public var port: UInt16

    /// An address from its parts.
    public init(host: String, port: UInt16) {
        self.host = host
        self.port = port
    }

    /// Parses `HOST:PORT` or `[IPV6]:PORT`; nil if malformed (see `parse` for the reason).
    public init?(_ text: String) {
        guard case .success(let value) = HostPort.parse(text) else { return nil }
        self = value
    }

    /// Parses `HOST:PORT` or `[IPV6]:PORT`, explaining what is wrong on failure.
    public static func parse(_ text: String) -> Result<HostPort, HostPortError> {
        let host: Substring
        let portText: Substring
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return .failure(HostPortError("missing ']'")) }
            host = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            guard rest.hasPrefix(":") else { return .failure(HostPortError("missing :PORT after ']'")) }
            portText = rest.dropFirst()
            guard !host.isEmpty, host.contains(":"),
                host.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." })
            else {
                return .failure(HostPortError("\(quoted(String(host))) is not an IPv6 address"))
            }
        } else {
            guard let colon = text.lastIndex(of: ":") else { return .failure(HostPortError("missing :PORT")) }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
            if host.contains(":") {
                return .failure(HostPortError("IPv6 addresses need brackets, e.g. [::1]:8080"))
            }
            guard !host.isEmpty else { return .failure(HostPortError("missing host")) }
            guard host.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "." || $0 == "-" || $0 == "_") })
            else {
                return .failure(HostPortError("host \(quoted(String(host))) has invalid characters"))
            }
        }
        guard !portText.isEmpty, portText.count <= 5, portText.allSatisfy({ $0.isASCII && $0.isNumber }),
            let port = Int(portText)
        else {
            return .failure(HostPortError("port \(quoted(String(portText))) is not a number"))
        }
        guard port <= 65_535 else { return .failure(HostPortError("port \(port) is out of range 0-65535")) }
        return .success(HostPort(host: String(host), port: UInt16(port)))
    }

    /// Whether the host is a loopback address: `localhost`, anything in 127.0.0.0/8, or `::1`.
    ///
    /// `allot serve --dev` disables authentication and is refused on anything else (SPEC section 8).
    public var isLoopback: Bool {
        if host.lowercased() == "localhost" { return true }
        var v4 = in_addr()
        if inet_pton(AF_INET, host, &v4) == 1 {
            return UInt32(bigEndian: v4.s_addr) >> 24 == 127
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, host, &v6) == 1 {
            return withUnsafeBytes(of: &v6) { bytes in bytes.prefix(15).allSatisfy { $0 == 0 } && bytes[15] == 1 }
        }
        return false
    }

    /// `host:port`, with brackets around IPv6 literals.
    public var description: String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }
}

/// Why a `HOST:PORT` value was rejected.
public struct HostPortError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The reason, e.g. `port 99999 is out of range 0-65535`.
    public let reason: String

    /// An error with this reason.
    public init(reason: String) { self.reason = reason }

    init(_ reason: String) { self.reason = reason }

    public var description: String { reason }
}
