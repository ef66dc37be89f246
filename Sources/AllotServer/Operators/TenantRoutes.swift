import AllotCore
import AllotCrypto
import AllotHTTP
import AllotJSON
import AllotLoop
import AllotStore
import AllotTime

/// `GET /v1/tenants`, `GET /v1/tenants/{id}`, `PUT`/`DELETE /v1/tenants/{id}/override`,
/// `POST`/`GET /v1/tenants/{id}/bursts` (SPEC 6.5, 6.8, 6.9, 9).
struct TenantRoutes: Sendable {
    let console: OperatorConsole

    static let sortKeys = [
        "id", "tier", "class", "demand_rpm", "demand_tpm", "usage_rpm", "usage_tpm", "allocation_rpm",
        "allocation_tpm", "last_seen",
    ]

    // MARK: List

    /// Filters: `tier`, `group` (a policy group: one customer's keys), `class`, `upstream`, `alert` (a kind,
    /// or `any`), `starved`, `override`, `suspect`, `search` (case-insensitive substring of the id). Sorting:
    /// `sort` (a key of ``sortKeys``, `-` prefix for descending) and `order` (`asc`, `desc`). Paging: `limit`
    /// (1-1000, default 100) and `offset`.
    func list(_ request: HTTPRequest) async throws -> HTTPResponse {
        let query = try OperatorQuery(
            request,
            allowed: [
                "tier", "group", "class", "upstream", "alert", "starved", "override", "suspect", "search", "sort",
                "order", "limit", "offset",
            ])
        let now = console.clock.now
        let directory = try await directory(now: now)
        var rows = Array(directory.summaries.values)
        // Every tier an override may set or a filter may name: the policy's, and any a tenant still has.
        let tiers = Set(console.policy().policy.tiers.map(\.name)).union(rows.map(\.tier)).sorted()
        // A tier no policy defines and no tenant has is a typo: an empty list hid it (round 14).
        if let tier = try query.known("tier", among: tiers, what: "tier") {
            rows.removeAll { $0.tier != tier }
        }
        // Groups are the policy's: a name none of its tenants has is a typo, refused with the nearest.
        let groups = Set(console.policy().policy.tenants.compactMap(\.group)).sorted()
        if let group = try query.known("group", among: groups, what: "group") {
            rows.removeAll { $0.group != group }
        }
        if let wanted = try query.choice("class", TenantClass.allCases.map(\.rawValue)) {
            rows.removeAll { id in
                !(directory.statuses[id.id] ?? []).contains { $0.tenantClass.rawValue == wanted }
                    && id.tenantClass?.rawValue != wanted
            }
        }
        if let upstream = query.string("upstream") {
            let listed = Set(rows.flatMap(\.upstreams))
            if !listed.contains(upstream),
                let message = console.policy().policy.unknownUpstreamMessage(
                    upstream, tracked: trackedUpstreams() + listed.sorted())
            {
                throw HTTPError.badRequest(message, code: "invalid_parameter", field: "upstream")
            }
            rows.removeAll { !$0.upstreams.contains(upstream) }
        }
        if let alert = try query.alertKind("alert", also: ["any"]) {
            rows.removeAll { alert == "any" ? $0.alerts.isEmpty : !$0.alerts.contains(alert) }
        }
        if let starved = try query.bool("starved") { rows.removeAll { $0.starved != starved } }
        if let override = try query.bool("override") { rows.removeAll { $0.override != override } }
        if let suspect = try query.bool("suspect") { rows.removeAll { $0.suspect != suspect } }
        if let search = query.string("search")?.lowercased() {
            rows.removeAll { !$0.id.lowercased().contains(search) }
        }
        var sort = query.string("sort") ?? "id"
        var descending = false
        if sort.hasPrefix("-") {
            descending = true
            sort.removeFirst()
        }
        guard Self.sortKeys.contains(sort) else {
            throw HTTPError.badRequest(
                "sort must be one of \(Self.sortKeys.joined(separator: ", ")) (prefix - for descending); got '\(sort)'",
                code: "invalid_parameter", field: "sort")
        }
        if let order = try query.choice("order", ["asc", "desc"]) {
            // `sort=-x&order=asc` asked for both orders; the second won silently (round 14).
            if descending, order == "asc" {
                throw HTTPError.badRequest(
                    "sort=-\(sort) asks for descending and order=asc for ascending: give one",
                    code: "invalid_parameter", field: "order")
            }
            descending = order == "desc"
        }
        rows.sort { Self.ordered($0, $1, by: sort, descending: descending) }
        var body: JSONObject = [:]
        let page = try query.page(rows, defaultLimit: 100, into: &body)
        body["tenants"] = .array(page.map(Self.row))
        body["generated_at"] = OperatorJSON.time(now)
        body["snapshot_version"] = console.snapshotVersion.map(JSON.int) ?? .null
        body["tick"] = .int(console.view?.tick ?? 0)
        body["tiers"] = .array(tiers.map(JSON.string))
        return .json(.object(body))
    }

    /// Ascending order by `key`, ties broken by id (always ascending, so pages are stable).
    static func ordered(_ lhs: TenantSummary, _ rhs: TenantSummary, by key: String, descending: Bool) -> Bool {
        func compare<T: Comparable>(_ a: T, _ b: T) -> Bool? {
            a == b ? nil : (descending ? a > b : a < b)
        }
        let result: Bool?
        switch key {
        case "tier": result = compare(lhs.priority, rhs.priority) ?? compare(lhs.tier, rhs.tier)
        case "class":
            result = compare(
                lhs.tenantClass.map(TenantSummary.rank) ?? -1, rhs.tenantClass.map(TenantSummary.rank) ?? -1)
        case "demand_rpm": result = compare(lhs.demand.rpm, rhs.demand.rpm)
        case "demand_tpm": result = compare(lhs.demand.tpm, rhs.demand.tpm)
        case "usage_rpm": result = compare(lhs.usage.rpm, rhs.usage.rpm)
        case "usage_tpm": result = compare(lhs.usage.tpm, rhs.usage.tpm)
        case "allocation_rpm": result = compare(lhs.allocation.rpm ?? -1, rhs.allocation.rpm ?? -1)
        case "allocation_tpm": result = compare(lhs.allocation.tpm ?? -1, rhs.allocation.tpm ?? -1)
        case "last_seen": result = compare(lhs.lastSeen ?? 0, rhs.lastSeen ?? 0)
        default: result = compare(lhs.id, rhs.id)
        }
        return result ?? (lhs.id < rhs.id)
    }

    static func row(_ summary: TenantSummary) -> JSON {
        [
            "id": .string(summary.id), "tier": .string(summary.tier), "group": summary.group.map(JSON.string) ?? .null,
            "class": summary.tenantClass.map { .string($0.rawValue) } ?? .null, "suspect": .bool(summary.suspect),
            "upstreams": .array(summary.upstreams.map(JSON.string)),
            "demand": OperatorJSON.dimensions(summary.demand), "usage": OperatorJSON.dimensions(summary.usage),
            "denied_rpm": OperatorJSON.number(summary.denied),
            "allocation": OperatorJSON.dimensions(summary.allocation),
            "reason": [
                "rpm": summary.reason.rpm.map { .string($0.rawValue) } ?? .null,
                "tpm": summary.reason.tpm.map { .string($0.rawValue) } ?? .null,
            ],
            "reasons": .array(summary.reasons.sorted().map(JSON.string)),
            "alerts": .array(summary.alerts.sorted().map(JSON.string)), "starved": .bool(summary.starved),
            "override": .bool(summary.override), "burst_credit": .bool(summary.burstCredit),
            "deny": summary.deny.map(JSON.string) ?? .null, "first_seen": OperatorJSON.time(summary.firstSeen),
            "last_seen": OperatorJSON.time(summary.lastSeen),
        ]
    }

    private func directory(now: Double, tenant: String? = nil) async throws(HTTPError) -> TenantDirectory {
        let registry: [AllotStore.TenantRecord]
        let overrides: [StoredOverride]
        do {
            registry = Array(try await console.telemetry.names().tenants.values)
            overrides = try await console.store.overrides(tenant: tenant, now: now)
        } catch {
            throw OperatorRoutes.unavailable(error)
        }
        return TenantDirectory(
            view: console.view, policy: console.policy().policy,
            registry: tenant.map { id in registry.filter { $0.id == id } } ?? registry, overrides: overrides)
    }

    // MARK: One tenant

    /// Everything about one tenant: per upstream its class, demand, usage, allocation with reasons
    /// and the "why" explanation (SPEC 6.9), burst account; the override in force and pending
    /// override proposals; alerts; budgets; recent burst requests; per-minute history from the
    /// rollups (`history_minutes`, default 60, at most 1440).
    func detail(_ request: HTTPRequest) async throws -> HTTPResponse {
        let id = try OperatorRequest.tenantID(request)
        let query = try OperatorQuery(request, allowed: ["history_minutes"])
        let minutes = try query.int("history_minutes", in: 0...1440) ?? 60
        let now = console.clock.now
        let directory = try await directory(now: now, tenant: id)
        guard let summary = directory.summaries[id] else {
            throw HTTPError.notFound("no tenant \(id): it never sent telemetry and no policy names it", field: "id")
        }
        let view = console.view
        let policy = console.policy().policy
        let snapshot = console.snapshot
        let version = snapshot?.version
        let overrides: [StoredOverride]
        let proposals: [StoredProposal]
        let bursts: [StoredBurst]
        let history: [MinuteRollup]
        do {
            overrides = try await console.store.overrides(tenant: id, now: now)
            proposals = try await console.store.proposals(tenant: id, now: now, limit: 50)
            bursts = try await console.store.bursts(tenant: id, limit: 20)
            let toMs = (EpochTime.milliseconds(fromSeconds: now) / 60_000 + 1) * 60_000
            history =
                minutes == 0
                ? []
                : try await console.telemetry.rollups(
                    fromMs: toMs - Int64(minutes) * 60_000, toMs: toMs, tenant: id)
        } catch {
            throw OperatorRoutes.unavailable(error)
        }

        var upstreams: [JSON] = []
        let statuses = Dictionary(
            (directory.statuses[id] ?? []).map { ($0.key.upstream, $0) }, uniquingKeysWith: { first, _ in first })
        let allocations = Dictionary(
            (directory.allocations[id] ?? []).map { ($0.upstream, $0) }, uniquingKeysWith: { first, _ in first })
        for upstream in Set(statuses.keys).union(allocations.keys).sorted() {
            upstreams.append(
                Self.upstreamEntry(
                    upstream, status: statuses[upstream], allocation: allocations[upstream],
                    pool: view?.decision?.pool(upstream), snapshotVersion: version,
                    slices: snapshot?.gatewaySlices(tenant: id, upstream: upstream) ?? [], now: now))
        }
        let budgets = (view?.decision?.budgets ?? []).filter { $0.tenant == id }.map(OperatorJSON.budget)
        let tierName = summary.tier
        var body: JSONObject = [
            "id": .string(id), "tier": .string(tierName),
            "tier_source": .string(
                overrides.contains { $0.override.tier != nil }
                    ? "override" : (policy.tenant(id) != nil ? "policy" : "default")),
            "priority": policy.tier(named: tierName).map { .int(Int64($0.priority)) } ?? .null,
            "group": summary.group.map(JSON.string) ?? .null,
            "class": summary.tenantClass.map { .string($0.rawValue) } ?? .null, "suspect": .bool(summary.suspect),
            "demand": OperatorJSON.dimensions(summary.demand), "usage": OperatorJSON.dimensions(summary.usage),
            "allocation": OperatorJSON.dimensions(summary.allocation), "starved": .bool(summary.starved),
            "first_seen": OperatorJSON.time(summary.firstSeen), "last_seen": OperatorJSON.time(summary.lastSeen),
        ]
        body["upstreams"] = .array(upstreams)
        body["override"] = overrides.first.map(OperatorJSON.override) ?? .null
        body["overrides"] = .array(overrides.map(OperatorJSON.override))
        body["proposals"] = .array(
            proposals.filter { ["pending", "approved"].contains($0.status(at: now)) }
                .map { OperatorJSON.proposal($0, now: now) })
        body["alerts"] = .array((directory.alerts[id] ?? []).map(OperatorJSON.alert))
        body["budgets"] = .array(budgets)
        body["bursts"] = .array(bursts.map { OperatorJSON.burst($0, now: now) })
        body["history"] = Self.history(history, minutes: minutes, now: now)
        body["snapshot_version"] = version.map(JSON.int) ?? .null
        body["tick"] = .int(view?.tick ?? 0)
        body["last_tick_at"] = OperatorJSON.time(view?.lastTickAt)
        body["policy_version"] = .string(console.policy().version)
        body["generated_at"] = OperatorJSON.time(now)
        return .json(.object(body))
    }

    /// A slice's rate, or null where the pool has no capacity for the dimension (published as
    /// ``SnapshotContent/unlimited``, split between the gateways), as the allocation shows it.
    static func sliceRate(_ rate: Double) -> JSON {
        OperatorJSON.number(rate < SnapshotContent.unlimited / 1000 ? rate : nil)
    }

    static func upstreamEntry(
        _ upstream: String, status: TenantStatus?, allocation: TenantAllocation?, pool: PoolSummary?,
        snapshotVersion: Int64?, slices: [(gateway: String, rpm: Double, tpm: Double)], now: Double
    ) -> JSON {
        var entry: JSONObject = ["upstream": .string(upstream)]
        if let status {
            entry["class"] = .string(status.tenantClass.rawValue)
            entry["suspect"] = .bool(status.suspect)
            entry["suspect_reasons"] = .array(status.suspectReasons.map(JSON.string))
            entry["demand"] = OperatorJSON.dimensions(status.demand)
            entry["usage"] = [
                "short": OperatorJSON.dimensions(status.servedShort),
                "long": OperatorJSON.dimensions(status.servedLong),
            ]
            entry["denied_rpm"] = OperatorJSON.number(status.deniedRPM)
            entry["queued_rpm"] = OperatorJSON.number(status.queuedRPM)
            entry["peak_to_average"] = OperatorJSON.number(status.peakToAverage)
            entry["tokens_per_request"] = OperatorJSON.number(status.tokensPerRequest)
            entry["trend"] = OperatorJSON.number(status.trend)
            entry["retry_ratio"] = OperatorJSON.number(status.retryRatio)
            entry["queue_wait_p95_ms"] = OperatorJSON.number(status.queueWaitP95Ms)
            entry["starved"] = .bool(status.starved)
            entry["starved_since"] = OperatorJSON.time(status.starvedSince)
            entry["last_activity_at"] = OperatorJSON.time(status.lastActivityAt)
            entry["samples"] = .int(Int64(status.samples))
            entry["gateway_shares"] = .object(
                JSONObject(
                    status.gatewayShares.sorted { $0.key < $1.key }.map { ($0.key, OperatorJSON.number($0.value)) }))
        }
        // What each gateway enforces in the served version (SPEC 7's split of the allocation), as against the
        // demand shares above it was cut from: a young tenant is split evenly, every share has a small minimum.
        entry["gateway_slices"] = .object(
            JSONObject(
                slices.map { slice in
                    (
                        slice.gateway,
                        .object(["rpm": Self.sliceRate(slice.rpm), "tpm": Self.sliceRate(slice.tpm)])
                    )
                }))
        if let allocation {
            entry["tier"] = .string(allocation.tier)
            var dimensions = JSONObject()
            for dimension in RateDimension.allCases {
                // As published: no capacity there is unlimited (null), unless a spend budget or an absolute ceiling
                // limits the tenant (its limit, with no "why": the engine did not allocate it).
                dimensions[dimension.rawValue] =
                    allocation.published(dimension).map { published in
                        [
                            "rate": OperatorJSON.number(published.rate),
                            "burst": OperatorJSON.number(published.burst),
                            "reason": .string(published.reason.rawValue),
                            "why": allocation[dimension].map {
                                why($0, pool: pool, dimension: dimension, snapshotVersion: snapshotVersion)
                            } ?? .null,
                        ]
                    } ?? .null
            }
            entry["allocation"] = .object(dimensions)
            entry["burst_credit"] = OperatorJSON.credit(allocation.burstCredit, now: now)
            entry["burst_account"] = OperatorJSON.account(allocation.burstAccount, now: now)
            entry["deny"] = allocation.deny.map(JSON.string) ?? .null
            entry["mode"] = .string(allocation.mode.rawValue)
            entry["max_concurrency"] = .int(Int64(allocation.maxConcurrency))
            entry["queue_weight"] = OperatorJSON.number(allocation.queueWeight)
            entry["fallback"] = OperatorJSON.dimensions(allocation.fallback)
            entry["override"] = allocation.override.map(OperatorJSON.override) ?? .null
        } else {
            entry["allocation"] = .null
        }
        return .object(entry)
    }

    /// "Why did I get this" (SPEC 6.9): the explanation's inputs (capacity, weight, floor,
    /// ceiling, demand), the fair-share level `f`, the dampening step, plus the pool's degraded
    /// flag and the snapshot version that carries the value.
    static func why(
        _ value: DimensionAllocation, pool: PoolSummary?, dimension: RateDimension, snapshotVersion: Int64?
    ) -> JSON {
        guard case .object(var object) = value.explanation.json else { return .null }
        object["snapshot_version"] = snapshotVersion.map(JSON.int) ?? .null
        if let pool { object["pool_degraded"] = .bool(pool.degraded[dimension]) }
        return .object(object)
    }

    /// Per-minute history summed over upstreams and task classes.
    static func history(_ rows: [MinuteRollup], minutes: Int, now: Double) -> JSON {
        var byMinute: [Int64: MinuteCounters] = [:]
        for row in rows { byMinute[row.minuteMs, default: MinuteCounters()].merge(row.counters) }
        let points: [JSON] = byMinute.keys.sorted().map { minute in
            let counters = byMinute[minute]!
            return [
                "t": OperatorJSON.time(milliseconds: minute), "requests": .int(counters.requests),
                "ok": .int(counters.ok), "throttled": .int(counters.quotaExhausted + counters.overloaded),
                "errors": .int(counters.serverError + counters.timeout + counters.spendCap),
                "denied_local": .int(counters.deniedLocal), "queued": .int(counters.queued),
                "prompt_tokens": .int(counters.promptTokens), "completion_tokens": .int(counters.completionTokens),
                "latency_avg_ms": counters.latencyCount > 0
                    ? OperatorJSON.number(counters.latencySumMs / Double(counters.latencyCount)) : .null,
            ]
        }
        return ["minutes": .int(Int64(minutes)), "step_s": 60, "points": .array(points)]
    }

    // MARK: Overrides

    /// A warning for an override or a burst request on a tenant nobody has seen (no telemetry, not in the policy),
    /// with the nearest known id: `acmee` for `acme` was applied silently and listed as a tenant of its own (round
    /// 14). It is stored all the same (an override may be set up before a tenant's first call); null for a known
    /// tenant.
    private func unknownTenantWarning(
        _ id: String, policy: Policy, consequence: String = "the override waits for its first call"
    ) async throws(HTTPError) -> JSON {
        guard policy.tenant(id) == nil else { return .null }
        // A tenant the loop already follows is known without reading the tenant table (gateways post bursts
        // for active tenants; the table is read only for one the loop has not seen, to suggest a name).
        if console.view?.classifier?.statuses.contains(where: { $0.key.tenant == id }) == true { return .null }
        let seen: [String]
        do {
            seen = try await console.telemetry.names().tenants.values.map(\.id)
        } catch {
            throw OperatorRoutes.unavailable(error)
        }
        guard !seen.contains(id) else { return .null }
        var text = "no tenant \(id) has sent telemetry or is named by the policy: \(consequence)"
        if let nearest = NameSuggestion.closest(to: id, among: seen + policy.tenants.map(\.id)) {
            text += "; did you mean \"\(nearest)\"?"
        }
        return .string(text)
    }

    /// `PUT /v1/tenants/{id}/override` (SPEC 6.8): applies at the next tick (200), or — when it
    /// crosses a guardrail — is filed as a proposal for an SRE (202). The actor is the token's name.
    func setOverride(_ request: HTTPRequest, _ principal: Principal) async throws -> HTTPResponse {
        let id = try OperatorRequest.tenantID(request)
        _ = try OperatorQuery(request, allowed: [])
        let object = try OperatorRequest.jsonObject(request)
        let now = console.clock.now
        let (policy, _) = console.policy()
        let override: Override
        do {
            override = try Override.parse(
                .object(object), tenant: id, actor: principal.name, now: now, policy: policy,
                tracked: trackedUpstreams())
        } catch {
            throw HTTPError.badRequest(error.message, code: error.code, field: error.field)
        }
        var capacities: [String: PerDimension<Double?>] = [:]
        for pool in console.view?.decision?.pools ?? [] { capacities[pool.upstream] = pool.capacity }
        let crossings = Guardrails.crossings(of: override, policy: policy, capacities: capacities)
        let nowMs = EpochTime.milliseconds(fromSeconds: now)
        let role = principal.role.rawValue
        // Where the override, combined with the tenant's other terms, leaves a floor above its ceiling or above a
        // pool (on the pools the tenant uses, for a tenant-wide one): said whether it applies now or waits.
        let used = Set((console.view?.decision?.allocations ?? []).filter { $0.tenant == id }.map(\.upstream))
        let conflicts: [String]
        do {
            conflicts = Guardrails.conflicts(
                of: override, alongside: try await console.store.overrides(tenant: id, now: now).map(\.override),
                policy: policy, capacities: capacities, tenantPools: used.isEmpty ? nil : used)
        } catch {
            throw OperatorRoutes.storeError(error)
        }
        if crossings.isEmpty {
            let after = OperatorJSON.override(override)
            let previous: StoredOverride?
            do {
                previous = try await console.store.setOverride(override, now: now) { previous in
                    AuditEntry(
                        atMs: nowMs, actor: principal.name, actorRole: role, action: "override.set", subject: id,
                        tenant: id, before: previous.map(OperatorJSON.override), after: after, reason: override.reason)
                }
            } catch {
                throw OperatorRoutes.storeError(error)
            }
            let unknown = try await unknownTenantWarning(id, policy: policy).stringValue
            let warnings = (unknown.map { [$0] } ?? []) + conflicts
            return .json([
                "status": "applied", "override": after, "previous": previous.map(OperatorJSON.override) ?? .null,
                "applies": "at the next tick",
                "warning": warnings.isEmpty ? .null : .string(warnings.joined(separator: "; ")),
            ])
        }
        let proposal = Proposal.forOverride(override, crossings: crossings, settings: policy.proposals)
        let stored = StoredProposal(proposal: proposal, source: .override, storedStatus: "pending")
        let json = OperatorJSON.proposal(stored, now: now)
        do {
            try await console.store.fileOverrideProposal(
                proposal, now: now,
                audit: AuditEntry(
                    atMs: nowMs, actor: principal.name, actorRole: role, action: "override.propose", subject: id,
                    tenant: id, after: json, reason: override.reason))
        } catch {
            throw OperatorRoutes.storeError(error)
        }
        return .json(
            [
                "status": "proposed", "proposal": json,
                "warning": conflicts.isEmpty ? .null : .string(conflicts.joined(separator: "; ")),
            ], status: .accepted)
    }

    /// `DELETE /v1/tenants/{id}/override[?upstream=…]`: removes the override (and withdraws a
    /// pending override proposal for the same tenant and upstream). An optional JSON body or
    /// `reason` parameter says why.
    func deleteOverride(_ request: HTTPRequest, _ principal: Principal) async throws -> HTTPResponse {
        let id = try OperatorRequest.tenantID(request)
        let query = try OperatorQuery(request, allowed: ["upstream", "reason"])
        let object = try OperatorRequest.optionalJSONObject(request)
        try OperatorRequest.checkMembers(object, known: ["reason", "upstream"])
        let reason = try OperatorRequest.string(object, "reason") ?? query.string("reason", maxLength: 1024)
        let upstream =
            try OperatorRequest.string(object, "upstream", maxLength: 256) ?? query.string("upstream", maxLength: 256)
        let now = console.clock.now
        let nowMs = EpochTime.milliseconds(fromSeconds: now)
        let role = principal.role.rawValue
        let outcome: (removed: StoredOverride?, withdrawn: StoredProposal?)?
        do {
            outcome = try await console.store.deleteOverride(
                tenant: id, upstream: upstream, now: now, actor: principal.name
            ) { removed, withdrawn in
                var before = JSONObject()
                if let removed { before["override"] = OperatorJSON.override(removed) }
                if let withdrawn { before["proposal"] = OperatorJSON.proposal(withdrawn, now: now) }
                return AuditEntry(
                    atMs: nowMs, actor: principal.name, actorRole: role, action: "override.delete", subject: id,
                    tenant: id, before: .object(before), after: nil, reason: reason)
            }
        } catch {
            throw OperatorRoutes.storeError(error)
        }
        guard let outcome else {
            let scope = upstream.map { " on \($0)" } ?? ""
            var message = "tenant \(id) has no override\(scope) in force"
            // Without `upstream` only the tenant-wide override is removed: name the per-pool ones it has instead
            // (outside evaluation round 38: "no override in force" for a tenant with one on a pool).
            if upstream == nil {
                let pools = ((try? await console.store.overrides(tenant: id, now: now)) ?? [])
                    .compactMap(\.override.upstream).sorted()
                if !pools.isEmpty {
                    message =
                        "tenant \(id) has no tenant-wide override in force; it has one on "
                        + pools.joined(separator: ", ") + " (remove it with upstream=POOL)"
                }
            }
            throw HTTPError.notFound(message, code: "not_found")
        }
        return .json([
            "status": "removed", "removed": outcome.removed.map(OperatorJSON.override) ?? .null,
            "withdrawn": outcome.withdrawn.map { OperatorJSON.proposal($0, now: now) } ?? .null,
            "applies": "at the next tick",
        ])
    }

    // MARK: Bursts

    static let maxBurstTTL = 86_400.0

    /// `POST /v1/tenants/{id}/bursts` (SPEC 6.5): `{"calls", "tokens", "ttl_s", "upstream"?,
    /// "task_id"?, "reason"?}`. Stored pending and decided at the next tick; 202 with the request. The upstream
    /// may be left out when the tenant uses exactly one (or the policy declares exactly one). The reason (and the
    /// task) go to the audit log, as an override's does.
    func requestBurst(_ request: HTTPRequest, _ principal: Principal) async throws -> HTTPResponse {
        let id = try OperatorRequest.tenantID(request)
        _ = try OperatorQuery(request, allowed: [])
        let object = try OperatorRequest.jsonObject(request)
        try OperatorRequest.checkMembers(object, known: ["calls", "tokens", "ttl_s", "upstream", "task_id", "reason"])
        let calls = try OperatorRequest.number(object, "calls", in: 0...1e9) ?? 0
        let tokens = try OperatorRequest.number(object, "tokens", in: 0...1e13) ?? 0
        guard let ttl = try OperatorRequest.number(object, "ttl_s", in: 1...Self.maxBurstTTL) else {
            throw HTTPError.badRequest(
                "ttl_s is required: how long the credit is wanted, seconds",
                code: "missing_field", field: "ttl_s")
        }
        guard calls > 0 || tokens > 0 else {
            throw HTTPError.badRequest(
                "a burst asks for calls, tokens or both (> 0)", code: "missing_field", field: "calls")
        }
        let taskID = try OperatorRequest.string(object, "task_id", maxLength: 256)
        let reason = try OperatorRequest.string(object, "reason")
        let auditReason = [taskID.map { "task \($0)" }, reason].compactMap(\.self).filter { !$0.isEmpty }
            .joined(separator: "; ")
        let upstream = try resolveUpstream(try OperatorRequest.string(object, "upstream", maxLength: 256), tenant: id)
        let now = console.clock.now
        let burstID = "b-" + Hex.encode(try SecureRandom.bytes(8))
        let burst = BurstRequest(
            id: burstID, tenant: id, upstream: upstream, calls: calls, tokens: tokens, ttlSeconds: ttl,
            taskID: taskID, requestedAt: now)
        let stored = StoredBurst(request: burst, requestedBy: principal.name, status: "pending")
        let json = OperatorJSON.burst(stored, now: now)
        do {
            try await console.store.requestBurst(
                burst, requestedBy: principal.name,
                audit: AuditEntry(
                    atMs: EpochTime.milliseconds(fromSeconds: now), actor: principal.name,
                    actorRole: principal.role.rawValue, action: "burst.request", subject: id, tenant: id, after: json,
                    reason: auditReason.isEmpty ? nil : auditReason))
        } catch {
            throw OperatorRoutes.storeError(error)
        }
        let warning = try await unknownTenantWarning(
            id, policy: console.policy().policy,
            consequence: "the next tick decides the burst as unknown (the tenant is in no decision)")
        return .json(
            ["status": "pending", "burst": json, "decided": "at the next tick", "warning": warning], status: .accepted,
            headers: ["Location": "/v1/tenants/\(id)/bursts"])
    }

    /// The pools the loop tracks (declared or not), from its latest tick.
    private func trackedUpstreams() -> [String] {
        console.view?.decision?.pools.map(\.upstream) ?? []
    }

    private func resolveUpstream(_ given: String?, tenant: String) throws(HTTPError) -> String {
        if let given {
            guard !given.isEmpty else {
                throw HTTPError.badRequest("upstream must not be empty", code: "invalid_value", field: "upstream")
            }
            if let message = console.policy().policy.unknownUpstreamMessage(given, tracked: trackedUpstreams()) {
                throw HTTPError.badRequest(message, code: "unknown_upstream", field: "upstream")
            }
            return given
        }
        var used = Set<String>()
        for status in console.view?.classifier?.statuses ?? [] where status.key.tenant == tenant {
            used.insert(status.key.upstream)
        }
        if used.count == 1, let only = used.first { return only }
        let declared = console.policy().policy.upstreams.map(\.id)
        if used.isEmpty, declared.count == 1, let only = declared.first { return only }
        let choices = (used.isEmpty ? declared : used.sorted()).joined(separator: ", ")
        throw HTTPError.badRequest(
            "upstream is required: \(tenant) could use several (\(choices))", code: "missing_field", field: "upstream")
    }

    /// `GET /v1/tenants/{id}/bursts`: the tenant's recent burst requests and their outcomes.
    func bursts(_ request: HTTPRequest) async throws -> HTTPResponse {
        let id = try OperatorRequest.tenantID(request)
        let query = try OperatorQuery(request, allowed: ["limit"])
        let limit = try query.int("limit", in: 1...500) ?? 50
        let now = console.clock.now
        let bursts: [StoredBurst]
        do {
            bursts = try await console.store.bursts(tenant: id, limit: limit)
        } catch {
            throw OperatorRoutes.unavailable(error)
        }
        return .json(["tenant": .string(id), "bursts": .array(bursts.map { OperatorJSON.burst($0, now: now) })])
    }
}
