import AllotJSON

/// An HTTP response: status, headers and the whole body.
///
/// `Content-Length`, `Date` and `Connection` are written by the server from the body and the
/// connection's state; values set here for them are replaced.
public struct HTTPResponse: Sendable, Equatable {
    public var status: HTTPStatus
    public var headers: HTTPHeaders
    public var body: [UInt8]

    public init(status: HTTPStatus = .ok, headers: HTTPHeaders = [:], body: [UInt8] = []) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// The body as UTF-8 text (invalid sequences replaced), for tests and logs.
    public var bodyText: String { String(decoding: body, as: UTF8.self) }

    /// A JSON response with a body already encoded, e.g. `JSONWriter.bytes` or a cached snapshot.
    public static func json(bytes: [UInt8], status: HTTPStatus = .ok, headers: HTTPHeaders = [:]) -> HTTPResponse {
        var headers = headers
        headers["Content-Type"] = "application/json"
        return HTTPResponse(status: status, headers: headers, body: bytes)
    }

    /// A JSON response serialising `value` compactly, keys in stored order.
    public static func json(_ value: JSON, status: HTTPStatus = .ok, headers: HTTPHeaders = [:]) -> HTTPResponse {
        json(bytes: value.serialized(), status: status, headers: headers)
    }

    /// A plain-text response.
    public static func text(
        _ text: String, status: HTTPStatus = .ok, contentType: String = "text/plain; charset=utf-8"
    ) -> HTTPResponse {
        HTTPResponse(status: status, headers: ["Content-Type": contentType], body: Array(text.utf8))
    }

    /// Parses the body as JSON (for tests and clients).
    public func json() throws(JSONParseError) -> JSON {
        try JSON.parse(body)
    }
}
