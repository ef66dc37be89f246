import AllotAssets
import AllotHTTP
import AllotJSON
import AllotLog
import AllotLoop
import AllotStore
@testable import AllotServer
import AllotTime
import Dispatch
import Foundation
import Testing

/// `allot serve` as a living system: the loop opened by the service on a virtual clock, the
/// snapshot and drain routes, readiness, policy hot reload reaching the loop, and a restart that
/// serves the last snapshot at once with versions continuing above it (SPEC 2, 7, 10).
@Suite struct ServiceLoopTests {
    static let start = 1_795_000_000.0

    struct Running {
        let service: AllotService
        let client: HTTPClient
        let clock: ManualClock

        func send(_ method: HTTPMethod, _ path: String, body: String = "") async throws -> HTTPClientResponse {
            try await client.execute(
                HTTPClientRequest(
                    method: method, url: "http://127.0.0.1:\(service.port)\(path)",
                    headers: body.isEmpty ? [:] : ["Content-Type": "application/json"], body: Array(body.utf8)))
        }

        func json(_ path: String) async throws -> JSON {
            let response = try await send(.get, path)
            return try JSON.parse(response.body)
        }

        var version: Int64? { service.context.operators.loop?.publisher.current?.version }

        /// Advances the virtual clock by one loop interval and waits (briefly, on real time) until
        /// the tick it triggers has published a version above `previous`. With `previous` nil it only
        /// waits: the loop ticks at once when nothing has been published, and advancing the clock before
        /// that tick was seen could trigger a second one (the first snapshot read as version 2 once, with
        /// both cores busy).
        func tick(after previous: Int64?) async throws -> Int64 {
            if previous != nil { clock.advance(by: 5) }
            for _ in 0..<2000 {
                if let version, version > previous ?? 0 {
                    // A tick can publish twice (make-before-break); wait for the whole tick.
                    await service.context.operators.loop?.checkpoint()
                    return self.version ?? version
                }
                try await Task.sleep(for: .milliseconds(5))
            }
            Issue.record("no tick published after version \(previous ?? 0)")
            return version ?? 0
        }

        func stop() async {
            await client.shutdown()
            await service.shutdown(gracePeriod: .seconds(1))
        }
    }

    static func launch(
        directory: String, policies: PolicySource = .embedded, at time: Double = start,
        readinessProbeSeconds: Double = 1, loopConfiguration: LoopConfiguration = LoopConfiguration()
    ) async throws -> Running {
        let clock = ManualClock(now: time)
        var configuration = ServeConfiguration(port: 0, dataDirectory: directory, policies: policies, dev: true)
        configuration.readinessProbeSeconds = readinessProbeSeconds
        let service = try await AllotService.start(
            configuration, clock: clock, logger: .disabled, loopConfiguration: loopConfiguration)
        return Running(service: service, client: try HTTPClient(), clock: clock)
    }

    static func temporaryDirectory() -> String {
        NSTemporaryDirectory() + "allot-service-loop-\(UUID().uuidString)"
    }

    static func telemetry(at time: Double, tenants: [String], count: Int) -> String {
        var events: [String] = []
        for index in 0..<count {
            for tenant in tenants {
                let ts = Int64((time - 30) * 1000) + Int64(index) * 100
                events.append(
                    #"{"ts":\#(ts),"gateway":"gw-1","tenant":"\#(tenant)","upstream":"openai/gpt-4o","outcome":"ok","#
                        + #""status":200,"latency_ms":800,"prompt_tokens":500,"completion_tokens":200}"#)
            }
        }
        return "[" + events.joined(separator: ",") + "]"
    }

    @Test func telemetryInSnapshotOutAndReadinessNeedsASnapshot() async throws {
        let running = try await Self.launch(directory: Self.temporaryDirectory())
        // Nothing was published before: the loop ticks at once, so the service is ready.
        let first = try await running.tick(after: nil)
        #expect(first == 1)
        let ready = try await running.json("/readyz")
        #expect(ready["status"] == "ready")
        #expect(ready["checks"]?["snapshot"]?["version"] == .int(first))

        let stored = try await running.send(
            .post, "/v1/telemetry",
            body: Self.telemetry(at: running.clock.now, tenants: ["acme", "globex"], count: 100))
        #expect(stored.status == .ok)
        let second = try await running.tick(after: first)
        let snapshot = try await running.send(.get, "/v1/snapshot?gateway=gw-1")
        #expect(snapshot.status == .ok)
        #expect(snapshot.headers["ETag"] == "\"\(second)\"")
        let body = try JSON.parse(snapshot.body)
        let tenants = body["tenants"]?.arrayValue ?? []
        #expect(Set(tenants.compactMap { $0["id"]?.stringValue }) == ["acme", "globex"])
        for tenant in tenants {
            #expect(tenant["upstream"] == "openai/gpt-4o")
            #expect((tenant["rpm"]?["rate"]?.doubleValue ?? 0) > 0)
        }
        // The conditional request for the same version is a 304.
        let unchanged = try await running.client.execute(
            HTTPClientRequest(
                method: .get, url: "http://127.0.0.1:\(running.service.port)/v1/snapshot?gateway=gw-1",
                headers: ["If-None-Match": "\"\(second)\""]))
        #expect(unchanged.status == .notModified)
        // The poll is recorded: the gateway is listed with its tenants.
        let gateways = try await running.json("/v1/gateways")
        #expect(gateways["gateways"]?.arrayValue?.first?["id"] == "gw-1")
        await running.stop()
    }

    @Test func drainPublishesAnExpiredLeaseAndARestartServesTheLastSnapshotAtOnce() async throws {
        let directory = Self.temporaryDirectory()
        let running = try await Self.launch(directory: directory)
        let first = try await running.tick(after: nil)
        let drained = try await running.send(.post, "/v1/drain")
        #expect(drained.status == .ok)
        let answer = try JSON.parse(drained.body)
        #expect(answer["drained"] == true)
        #expect(answer["version"] == .int(first + 1))
        #expect(answer["expires_at"] == answer["generated_at"])
        #expect(answer["already_drained"] == false)
        #expect(answer["since"] == answer["generated_at"])
        // Draining again changes nothing: the same version, the same start, nothing audited (round 22: a second
        // drain published another version and moved `since`).
        running.clock.advance(by: 2)
        let repeated = try JSON.parse(try await running.send(.post, "/v1/drain").body)
        #expect(repeated["version"] == .int(first + 1))
        #expect(repeated["already_drained"] == true)
        #expect(repeated["since"] == answer["since"])
        let snapshot = try await running.json("/v1/snapshot")
        #expect(snapshot["version"] == .int(first + 1))
        #expect(snapshot["expires_at"] == snapshot["generated_at"])
        // The end is a version of its own (still no lease), so that it is on disk when acknowledged.
        let resumed = try await running.send(.delete, "/v1/drain")
        #expect(try JSON.parse(resumed.body) == ["drained": false, "ended": true, "version": .int(first + 2)])
        // Both are audited (SPEC 8), as the acting token (`dev` here); ending no drain changes and audits nothing.
        let noDrain = try await running.send(.delete, "/v1/drain")
        #expect(noDrain.status == .ok)
        #expect(try JSON.parse(noDrain.body) == ["drained": false, "ended": false])
        let audited = try await running.json("/v1/audit?action=drain")["entries"]?.arrayValue ?? []
        #expect(audited.compactMap { $0["action"]?.stringValue } == ["drain.end", "drain.start"])
        #expect(audited.allSatisfy { $0["actor"] == "dev" && $0["actor_role"] == "admin" })
        #expect(audited.allSatisfy { $0["subject"] == "snapshot" })
        #expect(audited.last?["before"]?["version"] == .int(first))
        #expect(audited.last?["after"]?["version"] == .int(first + 1))
        #expect(audited.last?["after"]?["expires_at"] == answer["expires_at"])
        #expect(audited.first?["after"] == ["drained": false, "version": .int(first + 2)])
        let afterDrain = try await running.tick(after: first + 2)
        await running.stop()

        // Restarted: the last persisted snapshot is served before any tick, and the next version is above it.
        let again = try await Self.launch(directory: directory, at: Self.start + 60)
        #expect(again.version == afterDrain)
        let served = try await again.json("/v1/snapshot")
        #expect(served["version"] == .int(afterDrain))
        #expect(try await again.json("/readyz")["status"] == "ready")
        let next = try await again.tick(after: afterDrain)
        #expect(next > afterDrain)
        await again.stop()
    }

    /// A drain outlives a restart: the drained snapshot is served, ticks publish nothing, and `DELETE /v1/drain`
    /// ends it (audited) — before, the first tick after a restart published a normal lease.
    @Test func aDrainStaysInForceAcrossARestart() async throws {
        let directory = Self.temporaryDirectory()
        let running = try await Self.launch(directory: directory)
        let first = try await running.tick(after: nil)
        #expect(try await running.send(.post, "/v1/drain").status == .ok)
        await running.stop()

        let again = try await Self.launch(directory: directory, at: Self.start + 60)
        let loop = try #require(again.service.context.operators.loop)
        #expect(again.version == first + 1)
        #expect(await loop.publisher.drainedSince == Self.start)
        // Advanced again until a tick is seen: the loop may not have armed its timer yet when the clock first
        // moves (a full run on two busy cores missed the one advance and waited two minutes).
        let ticks = loop.view.tick
        for _ in 0..<200 where loop.view.tick == ticks {
            again.clock.advance(by: 5)
            for _ in 0..<100 where loop.view.tick == ticks { try await Task.sleep(for: .milliseconds(5)) }
        }
        #expect(loop.view.tick > ticks)
        let served = try await again.json("/v1/snapshot")
        #expect(served["version"] == .int(first + 1))
        #expect(served["expires_at"] == served["generated_at"])
        // It shows: readiness names it (still ready: a drain is a choice, not a fault), and an alert while it lasts.
        let ready = try await again.json("/readyz")
        #expect(ready["status"] == "ready")
        let since = JSON.string(RFC3339.format(Self.start))
        #expect(ready["checks"]?["drain"] == ["ok": true, "in_force": true, "since": since])
        let alerts = try await again.json("/v1/alerts?kind=drain")["alerts"]?.arrayValue ?? []
        #expect(alerts.count == 1)
        #expect(alerts.first?["severity"] == "warning")
        #expect(alerts.first?["since"] == .string(RFC3339.format(Self.start)))
        let resumed = try await again.send(.delete, "/v1/drain")
        #expect(try JSON.parse(resumed.body)["version"] == .int(first + 2))
        let audited = try await again.json("/v1/audit?action=drain.end")["entries"]?.arrayValue ?? []
        #expect(audited.count == 1)
        let next = try await again.tick(after: first + 2)
        #expect(next > first + 2)
        #expect(try await again.json("/v1/snapshot")["expires_at"] != served["expires_at"])
        #expect(try await again.json("/readyz")["checks"]?["drain"] == ["ok": true, "in_force": false])
        #expect(try await again.json("/v1/alerts?kind=drain")["alerts"]?.arrayValue?.isEmpty == true)
        await again.stop()
    }

    /// An acknowledged end of a drain outlives a restart that comes before the next tick (outside evaluation round
    /// 38: only an in-memory flag was cleared, and the restarted service restored the drain from the last stored
    /// version, leaving every gateway on its fallback floors); and an end that cannot be persisted is refused, the
    /// drain kept.
    @Test func theEndOfADrainOutlivesARestartBeforeTheNextTick() async throws {
        let directory = Self.temporaryDirectory()
        let running = try await Self.launch(directory: directory)
        let first = try await running.tick(after: nil)
        #expect(try await running.send(.post, "/v1/drain").status == .ok)
        // A database that refuses writes: the end is refused with 503 and the drain stays in force.
        let writer = running.service.context.pool.writer
        try await writer.access { try $0.execute("PRAGMA query_only = 1") }
        let refused = try await running.send(.delete, "/v1/drain")
        #expect(refused.status == .serviceUnavailable)
        #expect(try JSON.parse(refused.body)["error"]?["code"] == "database_unavailable")
        #expect(try await running.json("/readyz")["checks"]?["drain"]?["in_force"] == true)
        #expect(try await running.json("/v1/audit?action=drain.end")["entries"]?.arrayValue?.isEmpty == true)
        try await writer.access { try $0.execute("PRAGMA query_only = 0") }
        // (The refused write took a version number: a failed write may have reached the disk, and a number is never
        // served with two contents.)
        let resumed = try JSON.parse(try await running.send(.delete, "/v1/drain").body)
        #expect(resumed["ended"] == true)
        let ended = try #require(resumed["version"]?.int64Value)
        #expect(ended == first + 3)
        await running.stop()

        let again = try await Self.launch(directory: directory, at: Self.start + 60)
        #expect(again.version == ended)
        #expect(await again.service.context.operators.loop?.publisher.drainedSince == nil)
        #expect(try await again.json("/readyz")["checks"]?["drain"] == ["ok": true, "in_force": false])
        let next = try await again.tick(after: ended)
        #expect(next > ended)
        let served = try await again.json("/v1/snapshot")
        #expect(served["expires_at"] != served["generated_at"])  // a lease again: the drain did not come back
        await again.stop()
    }

    /// A drain ended by a release before 2026-11-30, which recorded the end only in the audit log (`drain.end`, no
    /// version of its own), is not restored after an upgrade (outside evaluation round 39, M3: the drain came back,
    /// every gateway on its fallback floors); a drain started after the last end still is.
    @Test func aDrainEndedOnlyInTheAuditLogIsNotRestored() async throws {
        let directory = Self.temporaryDirectory()
        let running = try await Self.launch(directory: directory)
        let first = try await running.tick(after: nil)
        #expect(try await running.send(.post, "/v1/drain").status == .ok)
        // What an older release's `DELETE /v1/drain` left behind.
        try await AuditLog(pool: running.service.context.pool).append(
            AuditEntry(
                atMs: EpochTime.milliseconds(fromSeconds: running.clock.now + 5), actor: "dev", actorRole: "admin",
                action: "drain.end", subject: "snapshot"))
        await running.stop()

        let again = try await Self.launch(directory: directory, at: Self.start + 60)
        #expect(again.version == first + 1)
        #expect(await again.service.context.operators.loop?.publisher.drainedSince == nil)
        #expect(try await again.json("/readyz")["checks"]?["drain"] == ["ok": true, "in_force": false])
        let next = try await again.tick(after: first + 1)
        #expect(next > first + 1)
        let drainedAgain = again.clock.now
        #expect(try await again.send(.post, "/v1/drain").status == .ok)
        await again.stop()

        let third = try await Self.launch(directory: directory, at: drainedAgain + 60)
        #expect(await third.service.context.operators.loop?.publisher.drainedSince == drainedAgain)
        await third.stop()
    }

    /// A write-ahead log set aside when the database was replaced under a running service is named at every start
    /// until it is removed: its transactions belong to the file replaced (review of round 40's fix).
    @Test func aLogSetAsideIsNamedAtStart() async throws {
        let directory = Self.temporaryDirectory()
        let first = try await Self.launch(directory: directory)
        await first.stop()
        let aside = directory + "/allot.sqlite-wal.of-replaced-1795000000000"
        try Data("pages of another file".utf8).write(to: URL(fileURLWithPath: aside))
        let sink = CapturingLogSink()
        let service = try await AllotService.start(
            ServeConfiguration(port: 0, dataDirectory: directory, policies: .embedded, dev: true),
            clock: ManualClock(now: Self.start + 60), logger: Logger(label: "test", sink: sink))
        await service.shutdown(gracePeriod: .seconds(1))
        let warnings = sink.lines.filter { $0.contains("a write-ahead log set aside") }
        #expect(warnings.count == 1)
        #expect(warnings.first?.contains("\"file\":\"\(aside)\"") == true, "\(warnings)")
    }

    /// A database that refuses writes fails readiness, though it still reads (round 13: another process holding
    /// the write lock failed every ingest with 503 while `/readyz` said the database was ok). A full disk here:
    /// `max_page_count` at the file's size makes every write fail with SQLITE_FULL at once.
    @Test func aDatabaseThatRefusesWritesFailsReadiness() async throws {
        let running = try await Self.launch(directory: Self.temporaryDirectory())
        let first = try await running.tick(after: nil)
        #expect(try await running.json("/readyz")["status"] == "ready")
        let writer = running.service.context.pool.writer
        let pages = try await writer.access { try $0.queryValue("PRAGMA page_count")?.int64 ?? 0 }
        try await writer.access { try $0.execute("PRAGMA max_page_count = \(pages)") }
        let refused = try await running.send(
            .post, "/v1/telemetry", body: Self.telemetry(at: running.clock.now, tenants: ["acme"], count: 2000))
        #expect(refused.status == .serviceUnavailable)
        let full = try await running.send(.get, "/readyz")
        #expect(full.status == .serviceUnavailable)
        let checks = try JSON.parse(full.body)["checks"]
        #expect(checks?["database"]?["ok"] == false)
        let error = checks?["database"]?["error"]?.stringValue ?? ""
        #expect(error.contains("SQLITE_FULL"), "\(error)")
        // The last snapshot is still served.
        #expect(try await running.json("/v1/snapshot")["version"] == .int(first))
        // Room again: the next write commits and readiness comes back.
        try await writer.access { try $0.execute("PRAGMA max_page_count = 1073741823") }
        let stored = try await running.send(
            .post, "/v1/telemetry", body: Self.telemetry(at: running.clock.now, tenants: ["acme"], count: 10))
        #expect(stored.status == .ok)
        #expect(try await running.json("/readyz")["status"] == "ready")
        await running.stop()
    }

    /// A stalled database (a frozen filesystem: reads block inside SQLite) fails readiness within the probe's
    /// deadline instead of hanging it, and the last snapshot is still served (outside evaluation round 40: `/readyz`
    /// and every authenticated request hung for the whole stall).
    @Test func aStalledDatabaseFailsReadinessWithoutHangingIt() async throws {
        let running = try await Self.launch(directory: Self.temporaryDirectory(), readinessProbeSeconds: 0.05)
        let first = try await running.tick(after: nil)
        let release = DispatchSemaphore(value: 0)
        let stall = await stallReads(of: running.service.context.pool, until: release)
        let stalled = try await running.send(.get, "/readyz")
        #expect(stalled.status == .serviceUnavailable)
        #expect(
            try JSON.parse(stalled.body)["checks"]?["database"]
                == ["ok": false, "error": "the database has not answered a read for 0.05 s (a stalled disk?)"])
        #expect(try await running.json("/v1/snapshot")["version"] == .int(first))
        release.signal()
        await stall.value
        // Ready again — once a probe is answered within its 0.05 s, which a machine busy with the rest of the suite
        // can take longer than (seen once): asked again until then.
        var status: JSON?
        for _ in 0..<200 where status != "ready" {
            status = try await running.json("/readyz")["status"]
        }
        #expect(status == "ready")
        await running.stop()
    }

    /// A loop that has stopped ticking fails readiness, naming the loop, while the last snapshot is still served
    /// (round 11: a loop stuck in a tick left `/readyz` "ready"). Stopped here the plain way: shut down.
    @Test func readinessFailsWhenTheLoopStopsTicking() async throws {
        let running = try await Self.launch(directory: Self.temporaryDirectory())
        let first = try await running.tick(after: nil)
        let ready = try await running.json("/readyz")
        #expect(ready["status"] == "ready")
        #expect(ready["checks"]?["loop"]?["ok"] == true)
        let loop = try #require(running.service.context.operators.loop)
        await loop.shutdown()
        running.clock.advance(by: 31)
        let stalled = try await running.send(.get, "/readyz")
        #expect(stalled.status == .serviceUnavailable)
        let body = try JSON.parse(stalled.body)
        #expect(body["status"] == "not_ready")
        #expect(body["checks"]?["loop"]?["ok"] == false)
        #expect(body["checks"]?["loop"]?["error"] == "no tick has completed for 31 s (loop.interval_s 5)")
        #expect(try await running.json("/v1/snapshot")["version"] == .int(first))
        await running.stop()
    }

    /// A loop whose timer only waits for a wall clock stepped back to reach its next tick's time again is ready (the
    /// snapshot in force is served; gateways run its lease on Allot's clock), said under the `loop` check and by a
    /// `loop_stalled` warning, until the tick comes. Until 2026-12-01 the wait failed readiness, and a probe taking the
    /// service out of its load balancer would have cut the gateways off for the step. A loop nobody drives any more
    /// (shut down here) is not waiting for its clock, whatever the clocks read: not ready, and the alert is critical.
    @Test func aLoopWaitingForASteppedBackClockIsReadyAndAlerted() async throws {
        let steady = SteadySeconds(1_000)
        let running = try await Self.launch(
            directory: Self.temporaryDirectory(), loopConfiguration: LoopConfiguration(steadyClock: { steady.value }))
        let first = try await running.tick(after: nil)
        let loop = try #require(running.service.context.operators.loop)
        let next = try #require(loop.view.lastTickAt) + 5
        // Allot's clock steps back an hour; the timer notices it and waits. 40 s pass.
        running.clock.stepBack(by: 3_600)
        await running.clock.waitForSleepers(1)
        running.clock.advance(by: 40)
        steady.value += 40
        await running.clock.waitForSleepers(1)
        let waiting = try await running.send(.get, "/readyz")
        #expect(waiting.status == .ok)
        let check = try JSON.parse(waiting.body)["checks"]?["loop"]
        #expect(check?["ok"] == true)
        #expect(
            check?["waiting"]
                == .string(
                    "no tick has completed for 40 s (loop.interval_s 5); the wall clock stepped back 3600 s since the "
                        + "last tick, and the loop waits until it reaches the next tick's time again"))
        var alerts = try await running.json("/v1/alerts?kind=loop_stalled")["alerts"]
        #expect(alerts?[0]?["severity"] == "warning")
        #expect(alerts?[0]?["since"] == .string(RFC3339.format(running.clock.now - 40 + 30)))
        // Frozen for longer than a lease (300 s): still ready, but critical.
        running.clock.advance(by: 300)
        steady.value += 300
        await running.clock.waitForSleepers(1)
        #expect(try await running.send(.get, "/readyz").status == .ok)
        alerts = try await running.json("/v1/alerts?kind=loop_stalled")["alerts"]
        #expect(alerts?[0]?["severity"] == "critical")
        // The wall clock reaches the next tick's time: the loop ticks, and all is as before.
        running.clock.advance(to: next)
        steady.value += 3_260
        let second = try await running.tick(after: first)
        #expect(second > first)
        #expect(try await running.json("/readyz")["checks"]?["loop"] == ["ok": true, "tick": 2])
        #expect(try await running.json("/v1/alerts?kind=loop_stalled")["alerts"] == [])
        // Shut down, then a step back: nobody waits for the clock.
        await loop.shutdown()
        running.clock.stepBack(by: 3_600)
        steady.value += 40
        let stopped = try await running.send(.get, "/readyz")
        #expect(stopped.status == .serviceUnavailable)
        #expect(try JSON.parse(stopped.body)["checks"]?["loop"]?["ok"] == false)
        alerts = try await running.json("/v1/alerts?kind=loop_stalled")["alerts"]
        #expect(alerts?[0]?["severity"] == "critical")
        await running.stop()
    }

    /// The words `/readyz` uses for a stall, and for one whose wall clock stepped back (the loop's own tests measure
    /// the stall on the steady clock; the service's loop always uses the real one, so the step is checked here).
    @Test func aStallNamesAWallClockThatSteppedBack() {
        #expect(
            ServiceRoutes.stallMessage(seconds: 40.7, intervalSeconds: 2.5, wallClockBehind: nil)
                == "no tick has completed for 40 s (loop.interval_s 2.5)")
        #expect(
            ServiceRoutes.stallMessage(seconds: 40, intervalSeconds: 5, wallClockBehind: 3599.6)
                == "no tick has completed for 40 s (loop.interval_s 5); the wall clock stepped back 3600 s since the "
                + "last tick, and the loop waits until it reaches the next tick's time again")
    }

    @Test func aRejectedPolicyKeepsTheOldOneAndAValidOneReachesTheLoop() async throws {
        let policies = Self.temporaryDirectory() + "-policies"
        try FileManager.default.createDirectory(atPath: policies, withIntermediateDirectories: true)
        for file in AllotAssets.defaultPolicies {
            try Data(file.bytes).write(to: URL(fileURLWithPath: policies + "/" + file.name))
        }
        let running = try await Self.launch(directory: Self.temporaryDirectory(), policies: .directory(policies))
        let first = try await running.tick(after: nil)
        let original = running.service.context.policy.version
        #expect(running.service.context.operators.loop?.view.policyVersion == original)

        // A broken file: rejected, the old policy stays in force, readiness fails naming the policy.
        let engine = policies + "/engine.json"
        let good = try String(contentsOfFile: engine, encoding: .utf8)
        try Data(#"{"loop": {"interval_s": -1}}"#.utf8).write(to: URL(fileURLWithPath: engine))
        running.clock.advance(by: 1)
        var notReady = JSON.null
        for _ in 0..<2000 {
            notReady = try await running.json("/readyz")
            if notReady["status"] == "not_ready" { break }
            try await Task.sleep(for: .milliseconds(5))
        }
        #expect(notReady["status"] == "not_ready")
        #expect(notReady["checks"]?["policy"]?["ok"] == false)
        #expect(running.service.context.policy.version == original)
        #expect(running.service.context.operators.loop?.view.alerts.contains { $0.kind == "policy_error" } == true)
        // The snapshot keeps being served.
        #expect(try await running.json("/v1/snapshot")["version"] == .int(first))

        // Reverted to the policy in force: ready again, and the alert goes (it stayed until another policy).
        try Data(good.utf8).write(to: URL(fileURLWithPath: engine))
        running.clock.advance(by: 1)
        for _ in 0..<2000 {
            if try await running.json("/readyz")["status"] == "ready",
                running.service.context.operators.loop?.view.alerts.contains(where: { $0.kind == "policy_error" })
                    == false
            {
                break
            }
            try await Task.sleep(for: .milliseconds(5))
        }
        #expect(try await running.json("/readyz")["status"] == "ready")
        #expect(running.service.context.operators.loop?.view.alerts.contains { $0.kind == "policy_error" } == false)
        #expect(running.service.context.policy.version == original)

        // A valid change: swapped in, and the loop publishes under the new policy version.
        let changed = good.replacingOccurrences(of: "\"safety_margin\": 0.02", with: "\"safety_margin\": 0.1")
        #expect(changed != good)
        try Data(changed.utf8).write(to: URL(fileURLWithPath: engine))
        running.clock.advance(by: 1)
        for _ in 0..<2000 {
            if running.service.context.policy.version != original { break }
            try await Task.sleep(for: .milliseconds(5))
        }
        let reloaded = running.service.context.policy.version
        #expect(reloaded != original)
        #expect(running.service.context.operators.loop?.view.policyVersion == reloaded)
        #expect(running.service.context.operators.loop?.view.alerts.contains { $0.kind == "policy_error" } == false)
        _ = try await running.tick(after: first)
        #expect(try await running.json("/v1/snapshot")["policy_version"] == .string(reloaded))
        await running.stop()
    }

    /// `--policies FILE`, or a directory that is not there: the service does not start, and says which path and what it
    /// expected, not "(NSCocoaErrorDomain error 256.)".
    @Test func aPolicyPathThatIsNotADirectoryIsRefusedNamingThePath() async throws {
        let file = Self.temporaryDirectory() + "-tiers.json"
        let tiers = try #require(AllotAssets.defaultPolicies.first { $0.name == "tiers.json" })
        try Data(tiers.bytes).write(to: URL(fileURLWithPath: file))
        defer { try? FileManager.default.removeItem(atPath: file) }
        let expected =
            " (expected a directory holding the policy's *.json files: tiers.json, engine.json, "
            + "upstreams.json, tenants.json, …)"
        let cases = [(file, "it is a file, not a directory"), (file + "-none", "there is no such directory")]
        for (path, problem) in cases {
            let data = Self.temporaryDirectory()
            do {
                let running = try await Self.launch(directory: data, policies: .directory(path))
                await running.stop()
                Issue.record("started with the policies at \(path)")
            } catch let error as ServiceStartError {
                #expect(error.message == "cannot read policy directory \(path): \(problem)\(expected)")
            }
            // The policies are read first: a start refused for them leaves no data directory behind.
            #expect(!FileManager.default.fileExists(atPath: data))
        }
    }

    /// The address is logged and reported as `--listen` takes it: an IPv6 literal in brackets.
    @Test func anIPv6AddressIsWrittenInBrackets() {
        func address(_ host: String) -> String {
            ServeConfiguration(host: host, port: 1, dataDirectory: "d", policies: .embedded).address(port: 8080)
        }
        #expect(address("::1") == "[::1]:8080")
        #expect(address("127.0.0.1") == "127.0.0.1:8080")
        #expect(address("localhost") == "localhost:8080")
    }

    /// A second service on a data directory in use is refused before it opens anything, and the first keeps
    /// publishing alone (outside evaluation round 38: both ran, each its own loop, with interleaved versions); once
    /// the first stops, the directory is free.
    @Test func aSecondServiceOnTheSameDataDirectoryIsRefused() async throws {
        let directory = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let first = try await Self.launch(directory: directory)
        let version = try await first.tick(after: nil)
        do {
            let second = try await AllotService.start(
                ServeConfiguration(port: 0, dataDirectory: directory, policies: .embedded),
                clock: ManualClock(now: Self.start), logger: .disabled)
            await second.shutdown(gracePeriod: .zero)
            Issue.record("a second service started on \(directory)")
        } catch {
            #expect(
                error.message
                    == "data directory \(directory) is in use by another allot serve or migrate (process \(getpid()) "
                    + "holds \(directory)/serve.lock): stop it first, or give this one another --data")
        }
        #expect(try await first.json("/v1/snapshot")["version"] == .int(version))
        #expect(try await first.json("/readyz")["status"] == "ready")
        await first.stop()
        let again = try await Self.launch(directory: directory, at: Self.start + 60)
        #expect(again.version == version)
        await again.stop()
    }

    /// A start that cannot listen (the port is taken) announces no admin token and writes no token file: the first
    /// token is created once the service runs, so the next start that does run still announces it.
    @Test func aStartThatCannotListenAnnouncesNoAdminToken() async throws {
        let directory = Self.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let first = try await Self.launch(directory: Self.temporaryDirectory())
        let announced = Locked<[String]>([])
        do {
            let second = try await AllotService.start(
                ServeConfiguration(port: first.service.port, dataDirectory: directory, policies: .embedded),
                clock: ManualClock(now: Self.start), logger: .disabled,
                announce: { line in announced.value.append(line) })
            await second.shutdown(gracePeriod: .zero)
            Issue.record("started on a port in use")
        } catch {
            #expect(error.message.hasPrefix("cannot listen on 127.0.0.1:\(first.service.port): "))
        }
        #expect(announced.value.isEmpty)
        #expect(!FileManager.default.fileExists(atPath: directory + "/admin-token"))
        await first.stop()

        let running = try await AllotService.start(
            ServeConfiguration(port: 0, dataDirectory: directory, policies: .embedded),
            clock: ManualClock(now: Self.start), logger: .disabled, announce: { line in announced.value.append(line) })
        #expect(announced.value.count == 1)
        #expect(announced.value.first?.hasPrefix("allot: created the first admin token (shown once): ") == true)
        #expect(FileManager.default.fileExists(atPath: directory + "/admin-token"))
        await running.shutdown(gracePeriod: .zero)
    }
}

/// Seconds on a stand-in for the never-stepped clock, read from the service's threads.
private final class SteadySeconds: @unchecked Sendable {
    // `@unchecked Sendable`: `seconds` is only touched under `lock`.
    private let lock = NSLock()
    private var seconds: Double
    init(_ seconds: Double) { self.seconds = seconds }
    var value: Double {
        get { lock.withLock { seconds } }
        set { lock.withLock { seconds = newValue } }
    }
}
