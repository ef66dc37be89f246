import AllotHTTP
import AllotStore

/// What a bearer token may do (SPEC 8). Roles are not a strict ladder: a gateway token can
/// post telemetry, poll snapshots and say it leaves, but read nothing else; `operator` reads everything and
/// manages overrides and bursts; `sre` is operator plus proposals, plans and the audit log;
/// `admin` can do everything, including tokens and drain.
public enum Role: String, Sendable, Hashable, Codable, CaseIterable {
    case gateway
    case `operator`
    case sre
    case admin
}

/// Which roles may call a route. `public` routes need no token.
public struct Access: Sendable, Hashable {
    public var allowed: Set<Role>
    public var isPublic: Bool

    public init(_ allowed: Set<Role>) {
        self.allowed = allowed
        self.isPublic = false
    }

    private init(public: Bool) {
        allowed = Set(Role.allCases)
        isPublic = `public`
    }

    /// No token needed (`/healthz`, `/readyz`, `/openapi.json`, the dashboard page).
    public static let `public` = Access(public: true)
    /// Gateways' own traffic: telemetry. Admin may act as anything.
    public static let gateway = Access([.gateway, .admin])
    /// Snapshots: gateways, and every human role for inspection.
    public static let snapshot = Access([.gateway, .operator, .sre, .admin])
    /// Burst requests come from gateways (detected fan-out) and from customer success.
    public static let burst = Access([.gateway, .operator, .sre, .admin])
    /// Reading everything and customer-success mutations (overrides).
    public static let `operator` = Access([.operator, .sre, .admin])
    /// Proposals, plans, audit.
    public static let sre = Access([.sre, .admin])
    /// A gateway leaving (`DELETE /v1/gateways/{id}`): the gateway itself as it shuts down, or an SRE retiring one
    /// that will not come back.
    public static let gatewayLeave = Access([.gateway, .sre, .admin])
    /// Tokens, drain.
    public static let admin = Access([.admin])
}

/// Who is calling: the token's id, name and role (or the `--dev` stand-in).
public struct Principal: Sendable, Hashable {
    public var tokenID: String
    public var name: String
    public var role: Role
    /// The gateway ids a `gateway` token may speak for (`gateway_scope`: an exact id or a prefix ending in `*`);
    /// nil: any.
    public var gatewayScope: String?

    public init(tokenID: String, name: String, role: Role, gatewayScope: String? = nil) {
        self.tokenID = tokenID
        self.name = name
        self.role = role
        self.gatewayScope = gatewayScope
    }

    /// Refuses, `403 gateway_out_of_scope` naming `field`, a gateway id this token may not speak for.
    public func checkGateway(_ gateway: String, field: String) throws(HTTPError) {
        guard !GatewayScope.allows(gatewayScope, gateway: gateway) else { return }
        throw HTTPError(
            .forbidden, code: "gateway_out_of_scope",
            message: "token '\(name)' " + GatewayScope.refusal(gatewayScope ?? "*", gateway: gateway), field: field)
    }

    /// The identity used for every request when `--dev` disables auth.
    public static let developer = Principal(tokenID: "dev", name: "dev", role: .admin)
    /// The identity of unauthenticated calls to public routes.
    public static let anonymous = Principal(tokenID: "", name: "anonymous", role: .gateway)
}

/// Turns a request's `Authorization: Bearer …` header into a principal, or refuses it.
/// 401 without a token or with an unknown/revoked one; the route table answers 403 for a
/// known token whose role is not allowed.
public protocol Authenticator: Sendable {
    func authenticate(_ request: HTTPRequest) async throws(HTTPError) -> Principal
}

/// `--dev`: every request is the developer (admin). Only allowed on loopback addresses.
public struct DevAuthenticator: Authenticator {
    public init() {}

    public func authenticate(_ request: HTTPRequest) async throws(HTTPError) -> Principal { .developer }
}

extension HTTPRequest {
    /// The bearer token of the `Authorization` header, if well-formed. Nil when the header is given more than once
    /// (RFC 9110 §5.3: it is not a list): which one counts is where a proxy and this server could disagree.
    public var bearerToken: String? {
        guard headers.values(for: "Authorization").count == 1, let header = headers["Authorization"] else {
            return nil
        }
        let parts = header.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        guard parts.count == 2, parts[0].lowercased() == "bearer" else { return nil }
        let token = parts[1].trimmingCharacters(in: .whitespaces)
        return token.isEmpty ? nil : token
    }
}
