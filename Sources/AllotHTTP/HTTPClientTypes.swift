import AllotJSON

/// A request for `HTTPClient`.
public struct HTTPClientRequest: Sendable {
    public var method: HTTPMethod
    /// `http://host[:port]/path?query`. HTTPS is not supported (Allot talks plain HTTP on trusted
    /// networks or behind a TLS-terminating proxy).
    public var url: String
    public var headers: HTTPHeaders
    public var body: [UInt8]

    public init(method: HTTPMethod = .get, url: String, headers: HTTPHeaders = [:], body: [UInt8] = []) {
        self.method = method
        self.url = url
        self.headers = headers
        self.body = body
    }
}

/// A complete response received by `HTTPClient`.
public struct HTTPClientResponse: Sendable, Equatable {
    public var status: HTTPStatus
    public var headers: HTTPHeaders
    public var body: [UInt8]

    public init(status: HTTPStatus, headers: HTTPHeaders = [:], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    public var bodyText: String { String(decoding: body, as: UTF8.self) }

    public func json() throws(JSONParseError) -> JSON { try JSON.parse(body) }
}

/// Why an `HTTPClient` request failed.
public struct HTTPClientError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        /// The URL is not `http://host[:port]/…`.
        case invalidURL = "invalid_url"
        /// The host name did not resolve.
        case unresolvableHost = "unresolvable_host"
        /// Nothing listens there (`ECONNREFUSED`).
        case connectionRefused = "connection_refused"
        /// The request did not complete within its timeout (connecting included).
        case timedOut = "timed_out"
        /// The server closed the connection before the response was complete.
        case connectionClosed = "connection_closed"
        /// The server sent something that is not a valid HTTP/1.1 response.
        case malformedResponse = "malformed_response"
        /// The response body exceeded `HTTPClientConfiguration.maxResponseBytes`.
        case responseTooLarge = "response_too_large"
        /// The calling task was cancelled.
        case cancelled
        /// The client was shut down.
        case shutDown = "shut_down"
        /// Another system call failed.
        case system
    }

    public var kind: Kind
    public var message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { "\(kind.rawValue): \(message)" }
}

/// Settings of an `HTTPClient`.
public struct HTTPClientConfiguration: Sendable {
    /// The timeout of a request that does not give its own (connecting, sending and receiving). Default 30 s.
    public var timeout: Duration
    /// Connections open at once per host and port (in use, idle or connecting); further requests wait
    /// for one, within their timeout. Default 256. Held long-polls occupy a connection each.
    public var maxConnectionsPerHost: Int
    /// Idle keep-alive connections kept per host and port. Default 32.
    public var maxIdleConnectionsPerHost: Int
    /// How long an idle pooled connection is kept. Default 15 s, below the server's default idle timeout
    /// (30 s), so the client drops a connection before the server does.
    public var idleConnectionTimeout: Duration
    /// Largest response body accepted. Default 64 MiB.
    public var maxResponseBytes: Int
    /// Largest response head accepted. Default 64 KiB.
    public var maxHeaderBytes: Int

    /// - Parameters:
    ///   - timeout: default per-request timeout, 30 s.
    ///   - maxConnectionsPerHost: concurrent connections per host, 256.
    ///   - maxIdleConnectionsPerHost: keep-alive pool size per host, 32.
    ///   - idleConnectionTimeout: pooled connection lifetime when unused, 15 s.
    ///   - maxResponseBytes: response body limit, 64 MiB.
    ///   - maxHeaderBytes: response head limit, 64 KiB.
    public init(
        timeout: Duration = .seconds(30), maxConnectionsPerHost: Int = 256, maxIdleConnectionsPerHost: Int = 32,
        idleConnectionTimeout: Duration = .seconds(15), maxResponseBytes: Int = 64 * 1024 * 1024,
        maxHeaderBytes: Int = 64 * 1024
    ) {
        self.timeout = timeout
        self.maxConnectionsPerHost = max(1, maxConnectionsPerHost)
        self.maxIdleConnectionsPerHost = maxIdleConnectionsPerHost
        self.idleConnectionTimeout = idleConnectionTimeout
        self.maxResponseBytes = maxResponseBytes
        self.maxHeaderBytes = maxHeaderBytes
    }
}

/// A parsed `http://` URL.
struct HTTPURL: Equatable {
    var host: String
    var port: Int
    /// Origin-form target: path and query.
    var target: String

    /// The pool key and `Host` header value.
    var authority: String {
        let name = host.contains(":") ? "[\(host)]" : host
        return port == 80 ? name : "\(name):\(port)"
    }

    init(_ text: String) throws(HTTPClientError) {
        guard text.hasPrefix("http://") else {
            throw HTTPClientError(.invalidURL, "only http:// URLs are supported: \(text)")
        }
        let rest = text.dropFirst(7)
        let authorityEnd = rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex
        let authority = rest[..<authorityEnd]
        var pathPart = rest[authorityEnd...]
        if let fragment = pathPart.firstIndex(of: "#") { pathPart = pathPart[..<fragment] }
        target = pathPart.isEmpty ? "/" : (pathPart.first == "?" ? "/" + pathPart : String(pathPart))
        guard !authority.isEmpty, !authority.contains("@") else {
            throw HTTPClientError(.invalidURL, "missing or unsupported host in \(text)")
        }
        var hostPart: Substring
        var portPart: Substring?
        if authority.first == "[" {
            guard let close = authority.firstIndex(of: "]") else {
                throw HTTPClientError(.invalidURL, "unterminated IPv6 address in \(text)")
            }
            hostPart = authority[authority.index(after: authority.startIndex)..<close]
            let after = authority[authority.index(after: close)...]
            if after.first == ":" {
                portPart = after.dropFirst()
            } else if !after.isEmpty {
                throw HTTPClientError(.invalidURL, "malformed authority in \(text)")
            }
        } else if let colon = authority.lastIndex(of: ":") {
            hostPart = authority[..<colon]
            portPart = authority[authority.index(after: colon)...]
        } else {
            hostPart = authority
        }
        guard !hostPart.isEmpty else { throw HTTPClientError(.invalidURL, "missing host in \(text)") }
        host = String(hostPart)
        if let portPart {
            guard let port = Int(portPart), (1...65535).contains(port) else {
                throw HTTPClientError(.invalidURL, "invalid port in \(text)")
            }
            self.port = port
        } else {
            port = 80
        }
        guard target.utf8.allSatisfy(ASCII.isTargetByte) else {
            throw HTTPClientError(.invalidURL, "the path must be percent-encoded: \(text)")
        }
    }
}
