import AllotAssets
import AllotHTTP
import AllotJSON
import AllotLoop
import AllotSQLite
import AllotTime

/// The HTTP API of SPEC section 9, route by route with its access rule. Handlers live next to
/// the component they serve; this file is the table of contents.
enum ServiceRoutes {
    static func register(
        in table: inout RouteTable, context: ServiceContext, loop: LoopRunner, shutdownSignal: ShutdownSignal
    ) {
        // Operations: no token (a load balancer or Kubernetes probe has none).
        table.get("/healthz", .public) { _, _ in .json(["status": "ok"]) }
        table.get("/readyz", .public) { _, _ in await readiness(context) }
        table.get("/metrics", context.configuration.metricsRequireToken ? Access(Set(Role.allCases)) : .public) {
            _, _ in
            await metrics(context)
        }
        table.get("/openapi.json", .public) { _, _ in asset("openapi.json", contentType: "application/json") }
        table.get("/", .public) { _, _ in asset("dashboard.html", contentType: "text/html; charset=utf-8") }

        // Gateways.
        let telemetry = TelemetryRoute(
            store: context.telemetry, defaultTier: { context.policy.policy.defaultTier }, clock: context.clock,
            metrics: context.metrics)
        table.post(TelemetryRoute.path, .gateway) { request, principal in
            await telemetry.respond(to: request, gatewayScope: principal.gatewayScope)
        }
        let snapshot = SnapshotRoute(publisher: loop.publisher, shutdownSignal: shutdownSignal)
        table.get(SnapshotRoute.path, .snapshot, held: SnapshotRoute.isLongPoll) { request, principal in
            try await snapshot.respond(to: request, principal: principal)
        }

        // Admins: drain before maintenance (SPEC 7).
        let drain = DrainRoute(
            publisher: loop.publisher, clock: context.clock, audit: context.operators.audit, logger: context.logger)
        table.post(DrainRoute.path, .admin) { request, principal in try await drain.drain(request, by: principal) }
        table.delete(DrainRoute.path, .admin) { request, principal in try await drain.resume(request, by: principal) }

        // SREs.
        let plan = PlanRoute(policy: { context.policy.policy })
        table.post(PlanRoute.path, .sre) { request, _ in try await plan.respond(to: request) }

        // Operators: tenants, overrides, bursts, proposals, upstreams, gateways, alerts, audit, costs, tokens.
        OperatorRoutes.register(in: &table, context: context)
    }

    /// `GET /readyz`: 200 when the database answers a read within `readinessProbeSeconds` (5 s; and its last write,
    /// if it failed for the database's sake, has been followed by one that committed), a snapshot is being served and
    /// the policy files on disk are valid; otherwise 503 naming every failing check.
    static func readiness(_ context: ServiceContext) async -> HTTPResponse {
        var checks = JSONObject()
        var ready = true
        // A stalled disk blocks the probe inside SQLite: reported after `readinessProbeSeconds` rather than never
        // answered (outside evaluation round 40: `/readyz` hung for the whole of a frozen filesystem's stall). The
        // reader reads on under another process's write lock (WAL): the writer's last failure says whether writes
        // work (round 13: a held lock failed every ingest with 503 while this check said ok).
        let deadline = context.configuration.readinessProbeSeconds
        switch await context.readinessProbe.result(on: context.pool.reader, within: deadline) {
        case nil:
            ready = false
            let message = "the database has not answered a read for \(formattedSeconds(deadline)) s (a stalled disk?)"
            checks["database"] = ["ok": false, "error": .string(message)]
        case .some(let failure?):
            ready = false
            checks["database"] = ["ok": false, "error": .string(failure.description)]
        case .some(nil):
            if let failure = context.pool.writer.lastWriteFailure {
                ready = false
                checks["database"] = ["ok": false, "error": .string(failure.description)]
            } else {
                checks["database"] = ["ok": true]
            }
        }
        if let version = context.operators.loop?.publisher.current?.version {
            checks["snapshot"] = ["ok": true, "version": .int(version)]
        } else {
            ready = false
            checks["snapshot"] = ["ok": false, "error": "no snapshot published yet"]
        }
        // A loop that stopped ticking — stuck in a tick, or every tick failing — leaves the last snapshot served
        // but the allocations frozen: not ready (round 11: a weight that overflowed froze the loop unseen). One that
        // only waits for a wall clock stepped back to reach its next tick's time again is ready, said in the check
        // and by the `loop_stalled` alert: it serves the snapshot in force, whose lease gateways run on Allot's clock,
        // and a probe that took it out of service for the step would cut the gateways off instead.
        if let loop = context.operators.loop {
            if let stall = loop.stall(now: loop.clock.now) {
                let message = stallMessage(
                    seconds: stall.seconds, intervalSeconds: stall.intervalSeconds, wallClockBehind: stall.wallClockBehind)
                if stall.waitsForClock {
                    checks["loop"] = ["ok": true, "tick": .int(loop.view.tick), "waiting": .string(message)]
                } else {
                    ready = false
                    checks["loop"] = ["ok": false, "error": .string(message)]
                }
            } else {
                checks["loop"] = ["ok": true, "tick": .int(loop.view.tick)]
            }
        }
        // A drain is the operator's choice, not a fault: shown, without failing readiness.
        if let publisher = context.operators.loop?.publisher {
            if let since = await publisher.drainedSince {
                checks["drain"] = ["ok": true, "in_force": true, "since": .string(RFC3339.format(since))]
            } else {
                checks["drain"] = ["ok": true, "in_force": false]
            }
        }
        if let error = await context.policyWatcher.lastError {
            ready = false
            checks["policy"] = ["ok": false, "error": .string(error.message)]
        } else {
            checks["policy"] = ["ok": true, "version": .string(context.policy.version)]
        }
        let body: JSON = ["status": .string(ready ? "ready" : "not_ready"), "checks": .object(checks)]
        return .json(body, status: ready ? .ok : .serviceUnavailable)
    }

    /// `/readyz`'s words for a loop that has not ticked for `seconds` (``LoopRunner/stall(now:)``), naming a wall
    /// clock that stepped back `wallClockBehind` seconds since the last tick.
    static func stallMessage(seconds: Double, intervalSeconds: Double, wallClockBehind: Double?) -> String {
        var message =
            "no tick has completed for \(Int(seconds)) s (loop.interval_s \(formattedSeconds(intervalSeconds)))"
        if let behind = wallClockBehind {
            message += "; the wall clock stepped back \(Int(behind.rounded())) s since the last tick, and the "
                + "loop waits until it reaches the next tick's time again"
        }
        return message
    }

    static func metrics(_ context: ServiceContext) async -> HTTPResponse {
        // The proposals awaiting an SRE are in the database, which the collector cannot wait for: read them now
        // (on a failure the last reading stands).
        _ = try? await context.operators.serviceAlerts(now: context.clock.now)
        return HTTPResponse(
            status: .ok, headers: ["Content-Type": "text/plain; version=0.0.4; charset=utf-8"],
            body: Array(context.metrics.render().utf8))
    }

    static func asset(_ name: String, contentType: String) -> HTTPResponse {
        guard let file = AllotAssets.file(name) else {
            return HTTPError.notFound("\(name) is not built into this binary").response
        }
        return HTTPResponse(status: .ok, headers: ["Content-Type": contentType], body: file.bytes)
    }
}

/// Seconds in messages: a whole number without decimals (`5`, not `5.0`), others as they are (`0.05`).
func formattedSeconds(_ value: Double) -> String {
    value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
}
