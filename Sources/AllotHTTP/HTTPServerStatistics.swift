/// Counters of an `HTTPServer`, for `/metrics` (SPEC §9) and tests. All but `openConnections` only
/// grow.
public struct HTTPServerStatistics: Sendable, Equatable {
    /// Connections open now (not counting refused ones still being told 503).
    public var openConnections = 0
    /// Connections accepted and served since start.
    public var acceptedConnections = 0
    /// Connections refused with 503 because `maxConnections` were open.
    public var rejectedConnections = 0
    /// Connections dropped because a request head or body, or a response write, made no progress in
    /// time (`headerReadTimeout`, `bodyReadTimeout`, `writeTimeout`).
    public var timedOutConnections = 0
    /// Keep-alive connections closed after `idleTimeout` without a request (normal housekeeping).
    public var idleClosedConnections = 0
    /// Requests handed to the responder.
    public var requests = 0
    /// Requests the server answered itself with an error (malformed, over a limit) and then closed.
    public var rejectedRequests = 0
    /// Requests whose handler was cancelled because the client went away while it ran.
    public var cancelledRequests = 0

    public init() {}
}

/// Answers requests: the router, or anything else that turns a request into a response.
///
/// It cannot throw: errors are responses (see `Router`, which maps thrown `HTTPError`s to their JSON
/// and anything else to a 500).
public protocol HTTPResponder: Sendable {
    func respond(to request: HTTPRequest) async -> HTTPResponse
}
