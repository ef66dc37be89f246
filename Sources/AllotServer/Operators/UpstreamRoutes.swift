import AllotCore
import AllotHTTP
import AllotJSON
import AllotLoop
import AllotStore
import AllotTime

/// Capacity estimates over time, sampled from the loop's view whenever it is read after a new tick
/// (the API, the dashboard and `/metrics` all read it), for the dashboard's upstream chart. The
/// rollups hold served traffic per minute but not the Observer's estimates, so these are kept in
/// memory: at most ``limit`` samples per upstream (an hour at the default 5 s tick).
struct CapacityHistory: Sendable {
    struct Sample: Sendable {
        var at: Double
        var estimate: PerDimension<Double?>
        var capacity: PerDimension<Double?>
        var allocated: PerDimension<Double>
        var state: UpstreamState
    }

    static let limit = 720
    private(set) var samples: [String: [Sample]] = [:]
    private var lastTick: Double?

    /// Adds one sample per upstream if `view` holds a tick not sampled yet.
    mutating func sample(_ view: LoopView) {
        guard let at = view.lastTickAt, at != lastTick, let decision = view.decision else { return }
        lastTick = at
        let estimates = Dictionary(
            (view.observer?.upstreams ?? []).map { ($0.upstream, $0.estimate) }, uniquingKeysWith: { first, _ in first }
        )
        for pool in decision.pools {
            var series = samples[pool.upstream, default: []]
            series.append(
                Sample(
                    at: at, estimate: estimates[pool.upstream] ?? pool.capacityEstimate, capacity: pool.capacity,
                    allocated: pool.allocated, state: pool.state))
            if series.count > Self.limit { series.removeFirst(series.count - Self.limit) }
            samples[pool.upstream] = series
        }
    }
}

/// The rollup query behind the served-traffic history, reused for 15 s (the dashboard refreshes
/// every few seconds; the rollups change once a minute).
struct UpstreamUsageCache: Sendable {
    var computedAt: Double
    var minutes: Int
    var rows: [UpstreamMinute]
}

/// `GET /v1/upstreams`, `GET /v1/gateways` (the publisher's handler), `GET /v1/alerts` (SPEC 4, 7, 9).
struct UpstreamRoutes: Sendable {
    let console: OperatorConsole

    /// Every upstream pool: state and signals, declared, header and estimated capacity with
    /// confidence, `C` after the safety margin, what is allocated and lent, latency percentiles,
    /// outcomes in the short window, price. `history_minutes` (0-1440, default 0) adds the
    /// estimate and served traffic over time.
    func upstreams(_ request: HTTPRequest) async throws -> HTTPResponse {
        let query = try OperatorQuery(request, allowed: ["history_minutes"])
        let minutes = try query.int("history_minutes", in: 0...1440) ?? 0
        let now = console.clock.now
        let view = console.view
        if let view { console.capacityHistory.withLock { $0.sample(view) } }
        let (policy, _) = console.policy()
        let statuses = Dictionary(
            (view?.observer?.upstreams ?? []).map { ($0.upstream, $0) }, uniquingKeysWith: { first, _ in first })
        let pools = Dictionary(
            (view?.decision?.pools ?? []).map { ($0.upstream, $0) }, uniquingKeysWith: { first, _ in first })
        let ids = Set(statuses.keys).union(pools.keys).union(policy.upstreams.map(\.id)).sorted()
        let usage = minutes > 0 ? try await served(minutes: minutes, now: now) : []
        let usageByUpstream = Dictionary(grouping: usage, by: \.upstream)
        let samples = minutes > 0 ? console.capacityHistory.withLock { $0.samples } : [:]
        var tenants: [String: Int] = [:]
        for allocation in view?.decision?.allocations ?? [] { tenants[allocation.upstream, default: 0] += 1 }

        let entries: [JSON] = ids.map { id in
            let status = statuses[id]
            let pool = pools[id]
            let declared = policy.upstream(id)?.capacity ?? PerDimension(nil)
            let (price, priced) = policy.price(ofUpstream: id)
            var entry: JSONObject = [
                "id": .string(id), "state": .string((status?.state ?? pool?.state ?? .healthy).rawValue),
                "signals": .array((status?.signals ?? []).map(JSON.string)),
                "circuit_open": .bool(status?.circuitOpen ?? false),
                "shed": .array((status?.shed ?? []).map(JSON.string)),
                "declared": OperatorJSON.dimensions(status?.declared ?? declared),
                "header_limit": OperatorJSON.dimensions(status?.headerLimit ?? PerDimension(nil)),
                "estimate": OperatorJSON.dimensions(status?.estimate ?? pool?.capacityEstimate ?? declared),
                "confidence": OperatorJSON.number(status?.confidence),
                "capacity": OperatorJSON.dimensions(pool?.capacity ?? PerDimension(nil)),
                "allocated": pool.map { OperatorJSON.dimensions($0.allocated) } ?? .null,
                "unallocated": pool.map { OperatorJSON.dimensions($0.unallocated) } ?? .null,
                "credits_lent": pool.map { OperatorJSON.dimensions($0.creditsLent) } ?? .null,
                "burst_reserve": pool.map { OperatorJSON.dimensions($0.burstReserve) } ?? .null,
                "degraded": OperatorJSON.dimensions(pool?.degraded ?? PerDimension(false)),
                "level": OperatorJSON.dimensions(pool?.level ?? PerDimension(nil)),
                "served": status.map { OperatorJSON.dimensions($0.served) } ?? .null,
                "utilisation": OperatorJSON.dimensions(status?.utilisation ?? PerDimension(nil)),
                "latency": [
                    "short": OperatorJSON.latency(status?.latencyShort ?? LatencyPercentiles()),
                    "long": OperatorJSON.latency(status?.latencyLong ?? LatencyPercentiles()),
                ],
                "outcomes": .object(
                    JSONObject(
                        (status?.outcomes ?? [:]).sorted { $0.key < $1.key }.map { ($0.key, .int(Int64($0.value))) })),
                "model_version": status?.modelVersion.map(JSON.string) ?? .null,
                "last_event_at": OperatorJSON.time(status?.lastEventAt),
                "tenants": .int(Int64(tenants[id] ?? 0)), "priced": .bool(priced),
                "price": [
                    "input_per_mtok": OperatorJSON.number(price.inputPerMillionTokens),
                    "output_per_mtok": OperatorJSON.number(price.outputPerMillionTokens),
                    "per_request": OperatorJSON.number(price.perRequest),
                ],
            ]
            if minutes > 0 {
                let since = now - Double(minutes) * 60
                entry["history"] = [
                    "capacity": .array(
                        (samples[id] ?? []).filter { $0.at >= since }.map { sample in
                            [
                                "t": OperatorJSON.time(sample.at), "estimate": OperatorJSON.dimensions(sample.estimate),
                                "capacity": OperatorJSON.dimensions(sample.capacity),
                                "allocated": OperatorJSON.dimensions(sample.allocated),
                                "state": .string(sample.state.rawValue),
                            ]
                        }),
                    "served": .array(
                        (usageByUpstream[id] ?? []).map { minute in
                            [
                                "t": OperatorJSON.time(milliseconds: minute.minuteMs),
                                "requests": .int(minute.requests),
                                "ok": .int(minute.ok), "throttled": .int(minute.quotaExhausted + minute.overloaded),
                                "denied_local": .int(minute.deniedLocal), "queued": .int(minute.queued),
                                "tokens": .int(minute.promptTokens + minute.completionTokens),
                            ]
                        }),
                ]
            }
            return .object(entry)
        }
        return .json([
            "upstreams": .array(entries), "tick": .int(view?.tick ?? 0),
            "last_tick_at": OperatorJSON.time(view?.lastTickAt),
            "snapshot_version": console.snapshotVersion.map(JSON.int) ?? .null, "generated_at": OperatorJSON.time(now),
        ])
    }

    private func served(minutes: Int, now: Double) async throws(HTTPError) -> [UpstreamMinute] {
        if let cached = console.usageCache.value, cached.minutes >= minutes, now - cached.computedAt < 15,
            now >= cached.computedAt
        {
            let fromMs = EpochTime.milliseconds(fromSeconds: now) - Int64(minutes) * 60_000
            return cached.rows.filter { $0.minuteMs >= fromMs / 60_000 * 60_000 }
        }
        let toMs = (EpochTime.milliseconds(fromSeconds: now) / 60_000 + 1) * 60_000
        do {
            let rows = try await console.telemetry.upstreamMinutes(
                fromMs: toMs - Int64(minutes + 1) * 60_000, toMs: toMs)
            console.usageCache.value = UpstreamUsageCache(computedAt: now, minutes: minutes, rows: rows)
            return rows
        } catch {
            throw OperatorRoutes.unavailable(error)
        }
    }

    /// `GET /v1/gateways` (SPEC 7): served by the publisher's ``GatewaysRoute`` once the loop is
    /// attached; before that no gateway can have polled, so the list is empty.
    func gateways(_ request: HTTPRequest) async throws -> HTTPResponse {
        _ = try OperatorQuery(request, allowed: [])
        guard let loop = console.loop else { return .json(["version": .null, "gateways": []]) }
        let console = self.console
        return await GatewaysRoute(publisher: loop.publisher, policy: { console.policy().policy }, clock: console.clock)
            .respond(to: request)
    }

    /// `DELETE /v1/gateways/{id}`: the gateway leaves (``AllocationPublisher/leave(gateway:now:)``): a gateway says
    /// so as it stops (scaled down), or an SRE for one that crashed and will not come back. Without it a departed
    /// gateway raised `gateway_lag` ("silent") until `forget_after_s` (an hour) passed, and its tenants' slices were
    /// re-split only once it had been silent for `gateway_lag_s`. Answers `{"gateway", "left": true, "last_contact",
    /// "resplit": "at the next tick"}`; 404 when no gateway of that id has polled (or it was forgotten). Audited
    /// (`gateway.leave`, subject the gateway id).
    ///
    /// `?instance=` (a gateway leaving sends the instance its polls named): when another instance polled under that
    /// id within 75 s and since this one first did, `409 gateway_replaced` and the gateway is not removed (an old
    /// process stopping after its replacement started, or one of two sharing the id); either way a poll of the
    /// instance that left, still in flight, does not register it again.
    func leave(_ request: HTTPRequest, _ principal: Principal) async throws -> HTTPResponse {
        _ = try OperatorQuery(request, allowed: ["instance"])
        let id = request.pathParameters["id"] ?? ""
        // None could have polled: a malformed id, said so rather than 404.
        _ = try GatewayID.checked(id, field: "id", subject: "gateway id")
        try principal.checkGateway(id, field: "id")
        // As the snapshot route reads it (an empty one is malformed, not absent): the gateway sends both.
        let instance = try SnapshotRoute.instance(request.queryValue("instance"))
        let now = console.clock.now
        let contact: GatewayContact
        switch console.loop?.publisher.leave(gateway: id, instance: instance, now: now) ?? .unknown {
        case .left(let gone):
            contact = gone
        case .unknown:
            throw HTTPError.notFound("no gateway \(id) has polled (or it was forgotten)", field: "id")
        case .replaced(_, let other):
            throw HTTPError.conflict(
                "gateway \(id) is still polled by another instance (\(other)): it stays; \(instance ?? "") left",
                code: "gateway_replaced", field: "instance")
        }
        let before: JSON = [
            "id": .string(id), "first_contact": .string(RFC3339.format(contact.firstContact)),
            "last_contact": .string(RFC3339.format(contact.lastContact)),
            "enforced_version": contact.enforcedVersion.map(JSON.int) ?? .null, "polls": .int(contact.polls),
            "instance": contact.instance.map(JSON.string) ?? .null,
        ]
        let entry = AuditEntry(
            atMs: EpochTime.milliseconds(fromSeconds: now), actor: principal.name, actorRole: principal.role.rawValue,
            action: "gateway.leave", subject: id, before: before, after: .null)
        await console.audit.appendAfterTheFact(
            entry, logger: console.logger, failure: "cannot audit a gateway leaving",
            fields: [("gateway", .string(id))])
        return .json([
            "gateway": .string(id), "left": true, "last_contact": .string(RFC3339.format(contact.lastContact)),
            "resplit": "at the next tick",
        ])
    }

    /// Every alert in force (SPEC 9): the loop's (starvation, degraded mode, circuit open, gateway
    /// lag, drift, budgets, runaway tasks, unknown prices, tick failures, …), the policy watcher's
    /// rejection of the files on disk, and override proposals awaiting an SRE. Filters: `kind`,
    /// `severity`, `tenant`, `upstream`.
    func alerts(_ request: HTTPRequest) async throws -> HTTPResponse {
        let query = try OperatorQuery(request, allowed: ["kind", "severity", "tenant", "upstream"])
        let severity = try query.choice("severity", ["info", "warning", "critical"])
        let kind = try query.alertKind("kind")
        let now = console.clock.now
        var alerts = console.view?.alerts ?? []
        do {
            alerts += try await console.serviceAlerts(now: now)
        } catch {
            throw OperatorRoutes.unavailable(error)
        }
        if let kind { alerts.removeAll { $0.kind != kind } }
        if let severity { alerts.removeAll { $0.severity.rawValue != severity } }
        if let tenant = query.string("tenant") { alerts.removeAll { $0.tenant != tenant } }
        if let upstream = query.string("upstream") { alerts.removeAll { $0.upstream != upstream } }
        alerts.sort { lhs, rhs in
            let order: [LoopAlert.Severity: Int] = [.critical: 0, .warning: 1, .info: 2]
            return (order[lhs.severity] ?? 3, lhs.kind, lhs.tenant ?? "", lhs.upstream ?? "", lhs.message)
                < (order[rhs.severity] ?? 3, rhs.kind, rhs.tenant ?? "", rhs.upstream ?? "", rhs.message)
        }
        var counts = JSONObject()
        for level in ["critical", "warning", "info"] {
            counts[level] = .int(Int64(alerts.filter { $0.severity.rawValue == level }.count))
        }
        return .json([
            "alerts": .array(alerts.map(OperatorJSON.alert)), "count": .int(Int64(alerts.count)),
            "by_severity": .object(counts), "generated_at": OperatorJSON.time(now),
        ])
    }
}
