import AllotHTTP
import AllotLog
import AllotSQLite
import AllotStore

/// The operator API of SPEC 9, route by route with its access rule: what customer success and SREs
/// use (tenants, overrides, bursts, proposals, upstreams, gateways, alerts, audit, costs) and the
/// admin's tokens. The handlers are in the `*Routes` types beside this file.
public enum OperatorRoutes {
    /// Registers every operator route on `table`, served from the service's operator console.
    public static func register(in table: inout RouteTable, context: ServiceContext) {
        register(in: &table, console: context.operators)
    }

    /// Registers every operator route on `table`, served from `console` (tests build their own).
    public static func register(in table: inout RouteTable, console: OperatorConsole) {
        let tenants = TenantRoutes(console: console)
        table.get("/v1/tenants", .operator) { request, _ in try await tenants.list(request) }
        table.get("/v1/tenants/{id}", .operator) { request, _ in try await tenants.detail(request) }
        table.put("/v1/tenants/{id}/override", .operator) { request, principal in
            try await tenants.setOverride(request, principal)
        }
        table.delete("/v1/tenants/{id}/override", .operator) { request, principal in
            try await tenants.deleteOverride(request, principal)
        }
        table.post("/v1/tenants/{id}/bursts", .burst) { request, principal in
            try await tenants.requestBurst(request, principal)
        }
        table.get("/v1/tenants/{id}/bursts", .burst) { request, _ in try await tenants.bursts(request) }

        let proposals = ProposalRoutes(console: console)
        table.get("/v1/proposals", .sre) { request, _ in try await proposals.list(request) }
        table.post("/v1/proposals/{id}/approve", .sre) { request, principal in
            try await proposals.resolve(request, principal, verdict: .approve)
        }
        table.post("/v1/proposals/{id}/reject", .sre) { request, principal in
            try await proposals.resolve(request, principal, verdict: .reject)
        }

        let upstreams = UpstreamRoutes(console: console)
        table.get("/v1/upstreams", .operator) { request, _ in try await upstreams.upstreams(request) }
        table.get("/v1/gateways", .operator) { request, _ in try await upstreams.gateways(request) }
        table.delete("/v1/gateways/{id}", .gatewayLeave) { request, principal in
            try await upstreams.leave(request, principal)
        }
        table.get("/v1/alerts", .operator) { request, _ in try await upstreams.alerts(request) }

        let costs = CostsRoute(console: console)
        table.get("/v1/costs", .operator) { request, _ in try await costs.costs(request) }

        let audit = AuditRoute(console: console)
        table.get("/v1/audit", .sre) { request, _ in try await audit.list(request) }

        let tokens = TokenRoutes(console: console)
        table.get("/v1/tokens", .admin) { request, _ in try await tokens.list(request) }
        table.post("/v1/tokens", .admin) { request, principal in try await tokens.create(request, principal) }
        table.delete("/v1/tokens/{id}", .admin) { request, principal in try await tokens.revoke(request, principal) }
    }

    /// A storage failure as the API answers it: 503 with `Retry-After`, never the SQL.
    static func unavailable(_ error: any Error) -> HTTPError {
        if let error = error as? HTTPError { return error }
        return HTTPError(
            .serviceUnavailable, code: "database_unavailable",
            message: "the database cannot be read or written right now; retry shortly", headers: ["Retry-After": "1"])
    }

    /// An operator store error (404/409), or a storage failure (503).
    static func storeError(_ error: any Error) -> HTTPError {
        if let error = error as? OperatorStoreError { return error.httpError }
        return unavailable(error)
    }
}
