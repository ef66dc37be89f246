import AllotHTTP

/// A handler that knows who is calling.
public typealias AuthorizedHandler = @Sendable (HTTPRequest, Principal) async throws -> HTTPResponse

/// Builds the service's `Router`: every route is declared with the roles that may call it, and
/// authentication runs before the handler. Keeping the access rule next to the route makes the
/// auth matrix reviewable in one file and testable route by route.
public struct RouteTable: Sendable {
    public private(set) var router = Router()
    /// Each route's access rule, for the auth-matrix test and the OpenAPI agreement test.
    public private(set) var access: [HTTPRoute: Access] = [:]
    private let authenticator: any Authenticator

    public init(authenticator: any Authenticator) {
        self.authenticator = authenticator
    }

    /// - Parameter held: Whether a request may be held (a long-poll): when `held(request)` says it was, the token is
    ///   checked again before the answer goes out, so a token revoked while the request waited gets `401`, not one
    ///   more snapshot (outside evaluation round 22).
    public mutating func add(
        _ method: HTTPMethod, _ pattern: String, _ rule: Access, held: (@Sendable (HTTPRequest) -> Bool)? = nil,
        _ handler: @escaping AuthorizedHandler
    ) {
        let authenticator = self.authenticator
        access[HTTPRoute(method: method, pattern: pattern)] = rule
        @Sendable func authorize(_ request: HTTPRequest) async throws(HTTPError) -> Principal {
            let principal = try await authenticator.authenticate(request)
            guard rule.allowed.contains(principal.role) else {
                throw HTTPError.forbidden(
                    "role '\(principal.role.rawValue)' may not \(method.rawValue) \(pattern); allowed: "
                        + rule.allowed.map(\.rawValue).sorted().joined(separator: ", "))
            }
            return principal
        }
        router.add(method, pattern) { request in
            if rule.isPublic { return try await handler(request, .anonymous) }
            let principal = try await authorize(request)
            let response = try await handler(request, principal)
            if let held, held(request) { _ = try await authorize(request) }
            return response
        }
    }

    public mutating func get(
        _ pattern: String, _ rule: Access, held: (@Sendable (HTTPRequest) -> Bool)? = nil,
        _ handler: @escaping AuthorizedHandler
    ) {
        add(.get, pattern, rule, held: held, handler)
    }

    public mutating func post(_ pattern: String, _ rule: Access, _ handler: @escaping AuthorizedHandler) {
        add(.post, pattern, rule, handler)
    }

    public mutating func put(_ pattern: String, _ rule: Access, _ handler: @escaping AuthorizedHandler) {
        add(.put, pattern, rule, handler)
    }

    public mutating func delete(_ pattern: String, _ rule: Access, _ handler: @escaping AuthorizedHandler) {
        add(.delete, pattern, rule, handler)
    }

    /// Sets the per-request observer (metrics and request logs).
    public mutating func observe(_ observer: @escaping @Sendable (HTTPRouteObservation) -> Void) {
        router.observer = observer
    }
}
