import AllotCore
import AllotHTTP
import AllotJSON
import AllotStore
import AllotTime

/// `GET /v1/proposals`, `POST /v1/proposals/{id}/approve`, `POST /v1/proposals/{id}/reject`
/// (SPEC 6.7, 6.8, 9).
struct ProposalRoutes: Sendable {
    let console: OperatorConsole

    /// Filters: `status` (`pending` by default; `approved`, `rejected`, `expired`, `withdrawn` or
    /// `all`), `tenant`, `source` (`engine`, `override`), `limit` (1-1000, default 200) and `offset`,
    /// paged as `GET /v1/tenants` is. Each proposal carries its evidence (the explanation of the unclamped value)
    /// and its expiry.
    func list(_ request: HTTPRequest) async throws -> HTTPResponse {
        let query = try OperatorQuery(request, allowed: ["status", "tenant", "source", "limit", "offset"])
        let status = try query.choice("status", StoredProposal.statuses + ["all"]) ?? "pending"
        let source = try query.choice("source", StoredProposal.Source.allCases.map(\.rawValue))
        let now = console.clock.now
        var proposals: [StoredProposal]
        do {
            proposals = try await console.store.proposals(
                statuses: status == "all" ? nil : [status], tenant: query.string("tenant"), now: now, limit: 10_000)
        } catch {
            throw OperatorRoutes.unavailable(error)
        }
        if let source { proposals.removeAll { $0.source.rawValue != source } }
        let settings = console.policy().policy.proposals
        var body: JSONObject = [:]
        let page = try query.page(proposals, defaultLimit: 200, into: &body)
        body["proposals"] = .array(page.map { OperatorJSON.proposal($0, now: now) })
        body["settings"] = [
            "ttl_s": OperatorJSON.number(settings.ttlSeconds),
            "approval_ttl_s": OperatorJSON.number(settings.approvalTTLSeconds),
            "reject_cooldown_s": OperatorJSON.number(settings.rejectCooldownSeconds),
        ]
        body["generated_at"] = OperatorJSON.time(now)
        return .json(.object(body))
    }

    /// Approves or rejects a pending proposal; the actor is the token's name and an optional JSON
    /// body `{"reason": "…"}` says why. 404 for an unknown id, 409 when it expired or was already
    /// decided. Engine proposals take effect at the next tick; an approved override is in force
    /// from the next tick for the approval TTL (or its own expiry, if sooner).
    func resolve(_ request: HTTPRequest, _ principal: Principal, verdict: ProposalResolution.Verdict) async throws
        -> HTTPResponse
    {
        let id = request.pathParameters["id"] ?? ""
        _ = try OperatorQuery(request, allowed: [])
        let object = try OperatorRequest.optionalJSONObject(request)
        try OperatorRequest.checkMembers(object, known: ["reason"])
        let reason = try OperatorRequest.string(object, "reason")
        let now = console.clock.now
        let nowMs = EpochTime.milliseconds(fromSeconds: now)
        let settings = console.policy().policy.proposals
        let role = principal.role.rawValue
        let after: StoredProposal
        let requested: Double?
        do {
            requested = try await console.store.proposal(id: id)?.proposal.override?.expiresAt
            after = try await console.store.resolve(
                id: id, verdict: verdict, actor: principal.name, now: now, settings: settings
            ) { before, after in
                AuditEntry(
                    atMs: nowMs, actor: principal.name, actorRole: role, action: "proposal.\(verdict.rawValue)",
                    subject: id, tenant: before.proposal.tenant, before: OperatorJSON.proposal(before, now: now),
                    after: OperatorJSON.proposal(after, now: now), reason: reason)
            }
        } catch {
            throw OperatorRoutes.storeError(error)
        }
        // An approval holds for `approval_ttl_s`: an approved override ends then if it asked for longer. Said, not
        // done silently (round 21: a one-hour override approved under a 120-s TTL ended after two minutes).
        var warning = JSON.null
        if after.source == .override, verdict == .approve, let override = after.proposal.override,
            let requested, override.expiresAt < requested
        {
            warning = .string(
                "the override ends at \(RFC3339.format(override.expiresAt)), when this approval lapses "
                    + "(proposals.approval_ttl_s, \(OperatorJSON.seconds(settings.approvalTTLSeconds)) s), not at "
                    + "the expiry it asked for; set it again before then to keep it (a new proposal)")
        }
        return .json([
            "status": .string(after.storedStatus), "proposal": OperatorJSON.proposal(after, now: now),
            "applies": "at the next tick", "warning": warning,
        ])
    }
}

/// `GET /v1/audit` (SPEC 8): the audit log, newest first.
struct AuditRoute: Sendable {
    let console: OperatorConsole

    /// Filters: `actor`, `action` (`override.set`, or a family such as `override`), `tenant`,
    /// `subject`, `from`, `to` (RFC 3339 or epoch ms). Paging: `limit` (1-1000, default 100) and
    /// `cursor` (the previous page's `next_cursor`).
    func list(_ request: HTTPRequest) async throws -> HTTPResponse {
        let query = try OperatorQuery(
            request, allowed: ["actor", "action", "tenant", "subject", "from", "to", "limit", "cursor"])
        let limit = try query.int("limit", in: 1...1000) ?? 100
        var cursor: Int64?
        if let text = query.string("cursor") {
            guard let value = Int64(text), value > 0 else {
                throw HTTPError.badRequest(
                    "cursor must be a next_cursor value from a previous page", code: "invalid_parameter",
                    field: "cursor")
            }
            cursor = value
        }
        let from = try query.time("from")
        let to = try query.time("to")
        let audit = AuditQuery(
            actor: query.string("actor"), action: query.string("action"), tenant: query.string("tenant"),
            subject: query.string("subject"), fromMs: from.map(EpochTime.milliseconds(fromSeconds:)),
            toMs: to.map(EpochTime.milliseconds(fromSeconds:)), beforeID: cursor, limit: limit + 1)
        let entries: [AuditEntry]
        do {
            entries = try await console.audit.entries(audit)
        } catch {
            throw OperatorRoutes.unavailable(error)
        }
        let page = entries.prefix(limit)
        let next = entries.count > limit ? page.last.map { JSON.string(String($0.id)) } ?? .null : .null
        return .json(["entries": .array(page.map(OperatorJSON.audit)), "next_cursor": next])
    }
}

/// `GET /v1/tokens`, `POST /v1/tokens`, `DELETE /v1/tokens/{id}` (admin; SPEC 8): the HTTP face of
/// `allot tokens`. A created token's secret is in the response once and nowhere else.
struct TokenRoutes: Sendable {
    let console: OperatorConsole

    func list(_ request: HTTPRequest) async throws -> HTTPResponse {
        _ = try OperatorQuery(request, allowed: [])
        do {
            return .json(["tokens": .array(try await console.tokens.all().map(OperatorJSON.token))])
        } catch {
            throw OperatorRoutes.unavailable(error)
        }
    }

    /// `{"name": "…", "role": "gateway|operator|sre|admin", "gateway_scope": "gw-eu-*"}` (the scope optional, for a
    /// gateway token only) → 201 with the token (shown once).
    func create(_ request: HTTPRequest, _ principal: Principal) async throws -> HTTPResponse {
        _ = try OperatorQuery(request, allowed: [])
        let object = try OperatorRequest.jsonObject(request)
        try OperatorRequest.checkMembers(object, known: ["name", "role", "gateway_scope"])
        guard let name = try OperatorRequest.string(object, "name", maxLength: 512) else {
            throw HTTPError.badRequest("name is required", code: "missing_field", field: "name")
        }
        guard let role = try OperatorRequest.string(object, "role") else {
            throw HTTPError.badRequest("role is required", code: "missing_field", field: "role")
        }
        let issued: TokenIssuer.Issued
        do {
            issued = try await console.issuer.create(
                name: name, role: role, gatewayScope: try OperatorRequest.string(object, "gateway_scope"),
                actor: TokenIssuer.Actor(name: principal.name, role: principal.role.rawValue), now: console.clock.now)
        } catch let error as TokenError {
            throw HTTPError.badRequest(error.message, code: "invalid_value", field: error.field)
        } catch {
            throw OperatorRoutes.unavailable(error)
        }
        var json = OperatorJSON.token(issued.record)
        if case .object(var object) = json {
            object["token"] = .string(issued.secret)
            json = .object(object)
        }
        return .json(json, status: .created, headers: ["Cache-Control": "no-store"])
    }

    func revoke(_ request: HTTPRequest, _ principal: Principal) async throws -> HTTPResponse {
        let id = request.pathParameters["id"] ?? ""
        _ = try OperatorQuery(request, allowed: [])
        let revoked: TokenRecord?
        do {
            // Over HTTP the last admin token in force stays: without one nobody can create or revoke tokens over
            // HTTP until someone on the host runs `allot tokens create --role admin` (outside evaluation round 27).
            revoked = try await console.issuer.revoke(
                id: id, actor: TokenIssuer.Actor(name: principal.name, role: principal.role.rawValue),
                now: console.clock.now, keepingAnAdmin: true)?.record
        } catch is LastAdminToken {
            throw HTTPError(
                .conflict, code: "last_admin_token",
                message: "token \(id) is the last admin token in force: create another admin token first "
                    + "(POST /v1/tokens), or revoke it on the host with `allot tokens revoke \(id)`",
                field: "id")
        } catch {
            throw OperatorRoutes.unavailable(error)
        }
        guard let revoked else { throw HTTPError.notFound("no token \(id)", field: "id") }
        console.authenticator.invalidate(tokenID: id)
        return .json(OperatorJSON.token(revoked))
    }
}
