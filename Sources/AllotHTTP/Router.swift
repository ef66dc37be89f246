/// A request handler: an async function that may await as long as it likes (a long-poll parks here
/// without holding any thread) and throws `HTTPError` for client errors.
public typealias HTTPHandler = @Sendable (HTTPRequest) async throws -> HTTPResponse

/// A registered route: a method and a pattern such as `/v1/tenants/{id}/override`.
public struct HTTPRoute: Hashable, Sendable, CustomStringConvertible {
    public var method: HTTPMethod
    public var pattern: String

    public init(method: HTTPMethod, pattern: String) {
        self.method = method
        self.pattern = pattern
    }

    public var description: String { "\(method) \(pattern)" }
}

/// What the router tells its observer after each request, for metrics and request logs.
public struct HTTPRouteObservation: Sendable {
    public var method: HTTPMethod
    /// The matched route's pattern (bounded cardinality, fit for a metric label), or nil when no route
    /// matched (404 or 405).
    public var routePattern: String?
    public var status: HTTPStatus
    /// Time spent in the router and handler.
    public var duration: Duration
    public var remoteAddress: String?
    /// For a 500: the description of the error the handler threw (the client only sees
    /// "internal server error").
    public var errorDescription: String?
}

/// Maps method and path to handlers.
///
/// Patterns are `/`-separated segments, each a literal or a `{name}` parameter matching one
/// non-empty percent-decoded segment. A literal beats a parameter at the same position, with
/// backtracking, so `/v1/tenants/summary` and `/v1/tenants/{id}` coexist. Unknown paths get a 404
/// JSON error; a known path with another method gets a 405 JSON error whose `Allow` header lists the
/// methods that path accepts. `HEAD` falls back to the `GET` handler (the server then sends the head
/// only). Thrown `HTTPError`s become their JSON response; any other error becomes a 500 JSON response
/// (and the observer gets its description), so a handler bug never takes the process down.
///
/// Build it with value semantics, then hand it to the server: a `Router` is immutable once shared.
public struct Router: HTTPResponder {
    private struct Node {
        var literals: [String: Int] = [:]
        var parameter: Int?
        var handlers: [HTTPMethod: Entry] = [:]
    }

    private struct Entry {
        var pattern: String
        var parameterNames: [String]
        var handler: HTTPHandler
    }

    private var nodes: [Node] = [Node()]
    /// Every registered route in registration order (compared with the OpenAPI document in tests).
    public private(set) var routes: [HTTPRoute] = []
    /// Called after every request with the route pattern, status and duration.
    public var observer: (@Sendable (HTTPRouteObservation) -> Void)?

    public init() {}

    /// Registers `handler` for `method` and `pattern`. A malformed pattern or a duplicate route is a
    /// programming error and stops the process at start-up.
    public mutating func add(_ method: HTTPMethod, _ pattern: String, _ handler: @escaping HTTPHandler) {
        precondition(pattern.hasPrefix("/"), "route pattern must start with '/': \(pattern)")
        var node = 0
        var names: [String] = []
        let segments = pattern == "/" ? [] : pattern.dropFirst().split(separator: "/", omittingEmptySubsequences: false)
        for segment in segments {
            if segment.hasPrefix("{") && segment.hasSuffix("}") && segment.count > 2 {
                names.append(String(segment.dropFirst().dropLast()))
                if let next = nodes[node].parameter {
                    node = next
                } else {
                    nodes.append(Node())
                    nodes[node].parameter = nodes.count - 1
                    node = nodes.count - 1
                }
            } else {
                precondition(!segment.contains("{") && !segment.contains("}"), "malformed route segment in \(pattern)")
                if let next = nodes[node].literals[String(segment)] {
                    node = next
                } else {
                    nodes.append(Node())
                    nodes[node].literals[String(segment)] = nodes.count - 1
                    node = nodes.count - 1
                }
            }
        }
        precondition(nodes[node].handlers[method] == nil, "duplicate route \(method) \(pattern)")
        nodes[node].handlers[method] = Entry(pattern: pattern, parameterNames: names, handler: handler)
        routes.append(HTTPRoute(method: method, pattern: pattern))
    }

    public mutating func get(_ pattern: String, _ handler: @escaping HTTPHandler) { add(.get, pattern, handler) }
    public mutating func post(_ pattern: String, _ handler: @escaping HTTPHandler) { add(.post, pattern, handler) }
    public mutating func put(_ pattern: String, _ handler: @escaping HTTPHandler) { add(.put, pattern, handler) }
    public mutating func delete(_ pattern: String, _ handler: @escaping HTTPHandler) { add(.delete, pattern, handler) }

    /// Answers `request`: the matched handler's response, or the JSON error for 404, 405, a thrown
    /// `HTTPError` or (500) any other thrown error. Never throws, never traps on handler errors.
    public func respond(to request: HTTPRequest) async -> HTTPResponse {
        let started = ContinuousClock.now
        var request = request
        var routePattern: String?
        var errorDescription: String?
        let response: HTTPResponse
        switch match(request.method, request.pathSegments) {
        case .found(let entry, let values):
            routePattern = entry.pattern
            request.routePattern = entry.pattern
            request.pathParameters = Dictionary(
                zip(entry.parameterNames, values), uniquingKeysWith: { first, _ in first })
            do {
                response = try await entry.handler(request)
            } catch let error as HTTPError {
                response = error.response
            } catch is CancellationError {
                response = HTTPError(.serviceUnavailable, code: "cancelled", message: "request cancelled").response
            } catch {
                errorDescription = String(describing: error)
                response = HTTPError.internalError().response
            }
        case .methodNotAllowed(let allowed):
            let allow = allowed.map(\.rawValue).joined(separator: ", ")
            response =
                HTTPError(
                    .methodNotAllowed, code: "method_not_allowed",
                    message: "\(request.method) is not allowed on \(request.path); allowed: \(allow)",
                    headers: ["Allow": allow]
                ).response
        case .notFound:
            response = HTTPError.notFound("no route for \(request.path)").response
        }
        if let observer {
            observer(
                HTTPRouteObservation(
                    method: request.method, routePattern: routePattern, status: response.status,
                    duration: ContinuousClock.now - started, remoteAddress: request.remoteAddress,
                    errorDescription: errorDescription))
        }
        return response
    }

    private enum Match {
        case found(Entry, [String])
        case methodNotAllowed([HTTPMethod])
        case notFound
    }

    private func match(_ method: HTTPMethod, _ segments: [String]) -> Match {
        var candidates: [(node: Int, values: [String])] = []
        var values: [String] = []
        collect(node: 0, segments: segments[...], values: &values, into: &candidates)
        for candidate in candidates {
            let handlers = nodes[candidate.node].handlers
            if let entry = handlers[method] ?? (method == .head ? handlers[.get] : nil) {
                return .found(entry, candidate.values)
            }
        }
        guard !candidates.isEmpty else { return .notFound }
        var allowed = Set<HTTPMethod>()
        for candidate in candidates {
            allowed.formUnion(nodes[candidate.node].handlers.keys)
        }
        if allowed.contains(.get) { allowed.insert(.head) }
        return .methodNotAllowed(allowed.sorted())
    }

    /// Depth-first, literals before parameters: every node with handlers that `segments` reaches.
    private func collect(
        node: Int, segments: ArraySlice<String>, values: inout [String],
        into candidates: inout [(node: Int, values: [String])]
    ) {
        guard let segment = segments.first else {
            if !nodes[node].handlers.isEmpty { candidates.append((node, values)) }
            return
        }
        let rest = segments.dropFirst()
        if let literal = nodes[node].literals[segment] {
            collect(node: literal, segments: rest, values: &values, into: &candidates)
        }
        if let parameter = nodes[node].parameter, !segment.isEmpty {
            values.append(segment)
            collect(node: parameter, segments: rest, values: &values, into: &candidates)
            values.removeLast()
        }
    }
}
