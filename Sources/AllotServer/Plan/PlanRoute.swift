import AllotCore
import AllotHTTP
import AllotJSON

/// `POST /v1/plan` (SPEC 6 "What-if plans"): one allocation computed without history or
/// dampening against the policy in force; the same computation as `allot plan`.
public struct PlanRoute: Sendable {
    public static let path = "/v1/plan"
    /// The policy whose tiers and settings fill what a plan leaves out.
    public var policy: @Sendable () async -> Policy

    public init(policy: @escaping @Sendable () async -> Policy) {
        self.policy = policy
    }

    public func respond(to request: HTTPRequest) async throws -> HTTPResponse {
        _ = try OperatorQuery(request, allowed: [])  // as every operator route: a typo is not silently ignored
        // A plan *file* may carry a byte order mark (`allot plan FILE` skips it); a body may not, and is told so.
        try OperatorRequest.requireJSON(request, "plans are JSON: send Content-Type: application/json")
        let current = await policy()
        do {
            return .json(bytes: try Plan.run(bytes: request.body, policy: current))
        } catch {
            throw HTTPError(.badRequest, code: error.code, message: error.message, field: error.field)
        }
    }
}
