/// An HTTP request as handlers see it: the head, the whole body, and what the router matched.
public struct HTTPRequest: Sendable {
    public var method: HTTPMethod
    /// The request target exactly as received, e.g. `/v1/snapshot?gateway=gw%201&wait=30`.
    public private(set) var target: String
    /// The path part of the target, still percent-encoded, e.g. `/v1/tenants/a%2Fb`.
    public private(set) var path: String
    /// The path's segments, percent-decoded: `["v1", "tenants", "a/b"]`. Routing matches these, so an
    /// encoded `/` inside a tenant id stays inside its segment.
    public private(set) var pathSegments: [String]
    /// The raw query (without `?`), or nil when the target has none.
    public private(set) var query: String?
    /// The query's `name=value` pairs in order, percent-decoded with `+` as space.
    public private(set) var queryItems: [HTTPQueryItem]
    public var version: HTTPVersion
    /// Header fields, looked up case-insensitively.
    public var headers: HTTPHeaders
    /// The whole body (already de-chunked); bounded by `HTTPServerConfiguration.maxBodyBytes`.
    public var body: [UInt8]
    /// The peer as `host:port` (`[::1]:port` for IPv6); nil for requests built in tests.
    public var remoteAddress: String?
    /// Values of the `{name}` segments of the matched route, filled by `Router`.
    public var pathParameters: [String: String]
    /// The matched route's pattern, e.g. `/v1/tenants/{id}/override`, filled by `Router`.
    public var routePattern: String?

    /// Builds a request, e.g. for router tests. Malformed percent-escapes in `target` are kept as
    /// written here; the server itself rejects them with 400 before a request is ever built.
    public init(
        method: HTTPMethod = .get, target: String, version: HTTPVersion = .http1_1, headers: HTTPHeaders = [:],
        body: [UInt8] = [], remoteAddress: String? = nil
    ) {
        let parsed = (try? RequestTarget(target, strict: false)) ?? RequestTarget(rawPath: target)
        self.init(
            method: method, target: parsed, version: version, headers: headers, body: body,
            remoteAddress: remoteAddress)
    }

    init(
        method: HTTPMethod, target: RequestTarget, version: HTTPVersion, headers: HTTPHeaders, body: [UInt8],
        remoteAddress: String?
    ) {
        self.method = method
        self.target = target.raw
        self.path = target.path
        self.pathSegments = target.segments
        self.query = target.query
        self.queryItems = target.queryItems
        self.version = version
        self.headers = headers
        self.body = body
        self.remoteAddress = remoteAddress
        self.pathParameters = [:]
        self.routePattern = nil
    }

    /// The first value of query parameter `name`, or nil.
    public func queryValue(_ name: String) -> String? {
        queryItems.first { $0.name == name }?.value
    }

    /// The body as UTF-8 text (invalid sequences replaced).
    public var bodyText: String { String(decoding: body, as: UTF8.self) }
}

/// One `name=value` pair of a query string, percent-decoded (`value` is `""` for a bare `name`).
public struct HTTPQueryItem: Sendable, Equatable {
    public var name: String
    public var value: String

    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }
}

/// A request target split into path and query, both decoded (RFC 9112 §3.2).
///
/// Accepted forms: origin-form (`/path?query`), absolute-form (`http://host/path`, whose authority
/// is dropped) and `*` (asterisk-form, for `OPTIONS`). The path is not normalised: `..` is just a
/// segment that no route matches, and an empty trailing segment (`/v1/tenants/`) is kept, so
/// `/v1/tenants/` and `/v1/tenants` are different paths.
struct RequestTarget {
    var raw: String
    var path: String
    var segments: [String]
    var query: String?
    var queryItems: [HTTPQueryItem]

    /// Splits and decodes `raw`; in strict mode a malformed escape or non-UTF-8 result is a 400.
    init(_ raw: String, strict: Bool) throws(HTTPError) {
        self.raw = raw
        var pathPart = Substring(raw)
        if raw.hasPrefix("http://") || raw.hasPrefix("https://") {
            let afterScheme = raw[raw.range(of: "://")!.upperBound...]
            if let slash = afterScheme.firstIndex(where: { $0 == "/" || $0 == "?" }) {
                pathPart = afterScheme[slash...]
                if pathPart.first == "?" { pathPart = "/" + pathPart }
            } else {
                pathPart = "/"
            }
        }
        if let mark = pathPart.firstIndex(of: "?") {
            query = String(pathPart[pathPart.index(after: mark)...])
            pathPart = pathPart[..<mark]
        } else {
            query = nil
        }
        path = String(pathPart)
        if path == "*" {
            segments = []
        } else {
            guard path.hasPrefix("/") else {
                throw HTTPError.badRequest("request target must start with '/'", code: "invalid_target")
            }
            segments = []
            if path != "/" {
                for part in path.utf8.dropFirst().split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
                {
                    guard let decoded = PercentDecoding.decode(part, plusIsSpace: false) else {
                        if strict {
                            throw HTTPError.badRequest("malformed percent-encoding in path", code: "invalid_target")
                        }
                        segments.append(String(decoding: part, as: UTF8.self))
                        continue
                    }
                    segments.append(decoded)
                }
            }
        }
        queryItems = []
        if let query, !query.isEmpty {
            for pair in query.utf8.split(separator: UInt8(ascii: "&")) {
                let equals = pair.firstIndex(of: UInt8(ascii: "="))
                let name = equals.map { pair[..<$0] } ?? pair[...]
                let value = equals.map { pair[pair.index(after: $0)...] } ?? pair[pair.endIndex...]
                guard let decodedName = PercentDecoding.decode(name, plusIsSpace: true),
                    let decodedValue = PercentDecoding.decode(value, plusIsSpace: true)
                else {
                    if strict {
                        throw HTTPError.badRequest(
                            "malformed percent-encoding in query", code: "invalid_query",
                            field: String(decoding: name, as: UTF8.self))
                    }
                    queryItems.append(
                        HTTPQueryItem(
                            name: String(decoding: name, as: UTF8.self), value: String(decoding: value, as: UTF8.self)))
                    continue
                }
                queryItems.append(HTTPQueryItem(name: decodedName, value: decodedValue))
            }
        }
    }

    /// A target taken literally (fallback for test-built requests that are not even lenient-parseable).
    init(rawPath: String) {
        raw = rawPath
        path = rawPath
        segments = rawPath.split(separator: "/", omittingEmptySubsequences: false).dropFirst().map(String.init)
        query = nil
        queryItems = []
    }
}

/// Percent-decoding (RFC 3986 §2.1) into strict UTF-8.
enum PercentDecoding {
    /// Decodes `%XX` escapes (and `+` as space when `plusIsSpace`); nil for a malformed escape or a
    /// result that is not valid UTF-8.
    static func decode<Bytes: Collection<UInt8>>(_ bytes: Bytes, plusIsSpace: Bool) -> String? {
        if !bytes.contains(where: { $0 == UInt8(ascii: "%") || (plusIsSpace && $0 == UInt8(ascii: "+")) }) {
            return String(validating: bytes, as: UTF8.self)
        }
        var output: [UInt8] = []
        output.reserveCapacity(bytes.count)
        var index = bytes.startIndex
        while index != bytes.endIndex {
            let byte = bytes[index]
            if byte == UInt8(ascii: "%") {
                let first = bytes.index(after: index)
                guard first != bytes.endIndex else { return nil }
                let second = bytes.index(after: first)
                guard second != bytes.endIndex, let high = hexValue(bytes[first]), let low = hexValue(bytes[second])
                else { return nil }
                output.append(high << 4 | low)
                index = bytes.index(after: second)
                continue
            }
            output.append(plusIsSpace && byte == UInt8(ascii: "+") ? UInt8(ascii: " ") : byte)
            index = bytes.index(after: index)
        }
        return String(validating: output, as: UTF8.self)
    }

    @inline(__always)
    static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case 0x30...0x39: byte - 0x30
        case 0x41...0x46: byte - 0x41 + 10
        case 0x61...0x66: byte - 0x61 + 10
        default: nil
        }
    }
}
