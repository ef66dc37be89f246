import AllotCore
import AllotLog
import AllotLoop
import AllotMetrics
import AllotProtocol
import AllotStore
import AllotTime
import Foundation
import Testing

@Suite struct LoopControlTests {
    private static let goodFiles = [
        PolicyFile(
            name: "engine.json",
            bytes: Array(
                """
                {"loop": {"interval_s": 10, "lease_s": 120}, "default_tier": "standard",
                 "tiers": {"standard": {"priority": 2}},
                 "upstreams": {"openai/gpt-4o": {"capacity": {"rpm": 100, "tpm": 100000}}}}
                """.utf8))
    ]

    @Test func aRejectedPolicyKeepsThePolicyInForce() async throws {
        let harness = try LoopHarness()
        let policy = loopPolicy()
        try await harness.open(policy: policy)
        await harness.tick()
        let before = await harness.runner.policyInForce
        let bad = [PolicyFile(name: "engine.json", bytes: Array(#"{"loop": {"interval_s": -1}}"#.utf8))]
        await #expect(throws: PolicyError.self) { try await harness.runner.apply(files: bad) }
        let after = await harness.runner.policyInForce
        #expect(after.version == before.version)
        #expect(after.policy == policy)
        let alert = try #require(harness.runner.view.alerts.first { $0.kind == "policy_error" })
        #expect(alert.severity == .critical)
        #expect(alert.message.contains("engine.json"))
        await harness.tick()
        #expect(try servedSnapshot(harness.publisher).policyVersion == before.version)
        #expect(try servedSnapshot(harness.publisher).refreshMs == 5000)

        // A valid policy is applied: new version, new interval and lease in the next snapshot.
        let version = try await harness.runner.apply(files: Self.goodFiles)
        #expect(version != before.version)
        #expect(version.count == 16)
        #expect(!harness.runner.view.alerts.contains { $0.kind == "policy_error" })
        await harness.tick()
        let snapshot = try servedSnapshot(harness.publisher)
        #expect(snapshot.policyVersion == version)
        #expect(snapshot.refreshMs == 10_000)
        #expect(snapshot.expiresAt == snapshot.generatedAt + 120)
        await harness.close()
    }

    /// A loop that stops ticking — stuck in a tick, or every tick failing — is seen from outside the actor after
    /// three intervals (at least 30 s), from its opening until its first tick and from its last tick after
    /// (`/readyz`).
    @Test func aLoopThatStopsTickingIsStalledAfterThreeIntervals() async throws {
        let harness = try LoopHarness()
        try await harness.open(policy: loopPolicy(interval: 5))
        let opened = harness.runner.openedAt
        #expect(opened == harness.clock.now)
        #expect(harness.runner.stall(now: opened + 30) == nil)
        let never = try #require(harness.runner.stall(now: opened + 31))
        #expect(never.seconds == 31)
        #expect(never.intervalSeconds == 5)
        await harness.tick(by: 40)
        let ticked = harness.clock.now
        #expect(harness.runner.stall(now: ticked + 30) == nil)
        #expect(harness.runner.stall(now: ticked + 45)?.seconds == 45)
        await harness.close()
        // With a longer interval, three of them.
        let slow = try LoopHarness()
        try await slow.open(policy: loopPolicy(interval: 20))
        #expect(slow.runner.stall(now: slow.runner.openedAt + 59) == nil)
        #expect(slow.runner.stall(now: slow.runner.openedAt + 61)?.seconds == 61)
        await slow.close()
    }

    /// A wall clock stepped back leaves the loop waiting for its next tick's time to come round again (its times
    /// never go back), while `now - lastTickAt` reads negative: the stall is measured on the steady clock too, and
    /// says the wall clock fell behind.
    @Test func aWallClockSteppedBackIsAStallOnTheSteadyClock() async throws {
        let steady = Box(1_000.0)
        let harness = try LoopHarness()
        try await harness.open(
            policy: loopPolicy(interval: 5), configuration: LoopConfiguration(steadyClock: { steady.value }))
        await harness.tick()
        let ticked = harness.clock.now
        // Stepped back an hour, then 40 s passed.
        steady.value += 40
        let stall = try #require(harness.runner.stall(now: ticked - 3_600 + 40))
        #expect(stall.seconds == 40)
        #expect(stall.intervalSeconds == 5)
        #expect(stall.wallClockBehind == 3_600)
        // No timer waits for the clock here (the loop is driven by hand): a loop nobody drives is not waiting.
        #expect(!stall.waitsForClock)
        // 20 s only: no stall yet, whichever clock.
        steady.value -= 20
        #expect(harness.runner.stall(now: ticked - 3_600 + 20) == nil)
        // A tick resets both; a stall on the wall clock alone says nothing of a step.
        await harness.tick()
        let again = harness.clock.now
        let wallOnly = try #require(harness.runner.stall(now: again + 45))
        #expect(wallOnly.seconds == 45)
        #expect(wallOnly.wallClockBehind == nil)
        #expect(!wallOnly.waitsForClock)
        await harness.close()
    }

    /// A loop stuck in a tick when the wall clock steps back does not only wait for its clock: `/readyz` must not read
    /// it as ready.
    @Test func aLoopStuckInATickDoesNotOnlyWaitForItsClock() async throws {
        let steady = Box(1_000.0)
        let harness = try LoopHarness()
        let inputs = HeldOperatorInputs()
        try await harness.openWith(
            operators: inputs, policy: loopPolicy(interval: 5),
            configuration: LoopConfiguration(steadyClock: { steady.value }))
        await harness.tick()
        inputs.holding.value = true
        let stuck = Task { await harness.tick() }
        while !inputs.isHolding { await Task.yield() }
        harness.clock.stepBack(by: 3_600)
        steady.value += 40
        let stall = try #require(harness.runner.stall(now: harness.clock.now))
        #expect(stall.wallClockBehind != nil)
        #expect(!stall.waitsForClock)
        inputs.release()
        _ = await stuck.value
        await harness.close()
    }

    /// A loop whose ticks fail does not only wait for its clock when the wall clock then steps back, though its timer
    /// waits for it (review of session 57, H1: judged from the clocks alone, a loop failing for ten minutes read as
    /// ready for the hour of a step back).
    @Test func aLoopWhoseTicksFailDoesNotOnlyWaitForItsClock() async throws {
        let harness = try LoopHarness()
        let steady = Box(1_000.0)
        let crashing = Box<CrashingPersistence?>(nil)
        try await harness.open(
            configuration: LoopConfiguration(steadyClock: { steady.value }),
            snapshots: { pool in
                let persistence = CrashingPersistence(SnapshotStore(pool: pool))
                crashing.value = persistence
                return persistence
            })
        await harness.classifier.setDemand("acme", rpm: 30, tpm: 20_000)
        await harness.runner.start()
        await harness.clock.waitForSleepers(1)
        #expect(harness.publisher.current?.version == 1)
        crashing.value!.armed.value = true
        harness.clock.advance(by: 5)
        await harness.clock.waitForSleepers(1)
        #expect(harness.runner.view.alerts.contains { $0.kind == "tick_failed" })
        harness.clock.stepBack(by: 3_600)
        await harness.clock.waitForSleepers(1)
        steady.value += 40
        let stall = try #require(harness.runner.stall(now: harness.clock.now))
        #expect(!stall.waitsForClock)
        await harness.close()
    }

    /// The timer waits in steps of at most an interval: a step back is noticed and logged once, and no tick runs
    /// until the wall clock reaches the next tick's time again.
    @Test func theTimerWaitsOutAWallClockSteppedBackAndSaysSoOnce() async throws {
        let harness = try LoopHarness()
        let sink = CapturingLogSink()
        let steady = Box(1_000.0)
        try await harness.open(
            configuration: LoopConfiguration(steadyClock: { steady.value }),
            logger: Logger(label: "test", minimumLevel: .info, sink: sink, clock: harness.clock))
        await harness.runner.start()
        await harness.clock.waitForSleepers(1)
        #expect(harness.publisher.current?.version == 1)
        let next = harness.clock.now + 5
        harness.clock.stepBack(by: 3_600)
        await harness.clock.waitForSleepers(1)
        for _ in 0..<3 {
            harness.clock.advance(by: 5)
            await harness.clock.waitForSleepers(1)
        }
        #expect(harness.publisher.current?.version == 1)
        // Its timer waits for the clock: that is all that holds it (`/readyz` stays ready).
        steady.value += 40
        #expect(harness.runner.stall(now: harness.clock.now)?.waitsForClock == true)
        let warnings = sink.lines.filter { $0.contains("the wall clock stepped back") }
        #expect(warnings.count == 1)
        #expect(warnings.first?.contains("\"stepped_back_at_least_s\":3600") == true)
        #expect(warnings.first?.contains("\"next_tick_at\":\"\(RFC3339.format(next))\"") == true)
        // The wall clock reaches the tick's time again: the loop ticks.
        harness.clock.advance(to: next)
        await harness.clock.waitForSleepers(1)
        #expect(harness.publisher.current?.version == 2)
        #expect(harness.runner.stall(now: harness.clock.now) == nil)
        await harness.close()
        #expect(harness.clock.sleeperCount == 0)
    }

    /// Alerts of pools, gateways and the loop are logged when raised and when cleared, once each (SPEC 6.4: degraded
    /// mode is "logged, alerted and visible"; outside evaluation round 38 found it never logged); a tenant's are not.
    @Test func alertsAreLoggedWhenRaisedAndWhenCleared() async throws {
        let harness = try LoopHarness()
        let sink = CapturingLogSink()
        // A tick's duration is wall-clock time: on a loaded machine one took more than half the 5-s interval and
        // `tick_slow` was raised and cleared too (the full suite, 2026-11-30). Only the alerts the test causes count.
        try await harness.open(
            configuration: LoopConfiguration(slowTickFraction: 1_000),
            logger: Logger(label: "test", minimumLevel: .info, sink: sink, clock: harness.clock))
        await harness.classifier.setDemand("acme", rpm: 30, tpm: 20_000, shares: ["gw-1": 1])
        await harness.tick()
        harness.clock.advance(by: 1)
        _ = try await harness.publisher.startDrain(now: harness.clock.now)
        await harness.tick()
        await harness.tick()
        // (The harness's pool has no price: that alert is raised at the first tick, once.)
        let raised = sink.lines.filter { $0.contains("alert raised") }
        #expect(raised.count == 2)
        #expect(raised.first?.contains("\"kind\":\"unknown_price\"") == true)
        #expect(raised.last?.contains("\"kind\":\"drain\"") == true)
        #expect(raised.last?.contains("\"level\":\"warning\"") == true)
        _ = try await harness.publisher.resume(now: harness.clock.now)
        await harness.tick()
        let cleared = sink.lines.filter { $0.contains("alert cleared") }
        #expect(cleared.count == 1)
        #expect(cleared.first?.contains("\"kind\":\"drain\"") == true)
        await harness.close()
    }

    @Test func alertTransitionsLeaveOutTenantsAndCountAPoolsKindOnce() {
        func alert(_ kind: String, upstream: String? = nil, tenant: String? = nil) -> LoopAlert {
            LoopAlert(kind: kind, severity: .critical, upstream: upstream, tenant: tenant, message: kind, since: 0)
        }
        let before = [alert("degraded_mode", upstream: "a"), alert("starved", upstream: "a", tenant: "t")]
        let after = [
            alert("degraded_mode", upstream: "a"), alert("degraded_mode", upstream: "b"),
            alert("degraded_mode", upstream: "b"), alert("starved", upstream: "a", tenant: "u"),
        ]
        let (raised, cleared) = LoopAlert.transitions(from: before, to: after)
        #expect(raised.map(\.upstream) == ["b"])
        #expect(cleared.isEmpty)
        // A severity that changes is the old one cleared and the new one raised.
        var escalated = after
        escalated[0].severity = .warning
        let (raisedEscalated, clearedEscalated) = LoopAlert.transitions(from: after, to: escalated)
        #expect(raisedEscalated.map(\.severity) == [.warning])
        #expect(clearedEscalated.map(\.severity) == [.critical])
        let (raisedLater, clearedLater) = LoopAlert.transitions(from: after, to: [])
        #expect(raisedLater.isEmpty)
        #expect(clearedLater.map(\.upstream) == ["a", "b"])
    }

    @Test func policyVersionsAreStableAndDistinguishPolicies() throws {
        let a = try Policy.load(files: Self.goodFiles)
        let b = try Policy.load(files: Self.goodFiles)
        #expect(LoopRunner.policyVersion(of: a) == LoopRunner.policyVersion(of: b))
        #expect(LoopRunner.policyVersion(of: a) != LoopRunner.policyVersion(of: loopPolicy()))
    }

    @Test func theTimerTicksEveryIntervalOnTheLoopsClock() async throws {
        let harness = try LoopHarness()
        try await harness.open()
        await harness.runner.start()
        // Nothing published yet: the first tick runs at once.
        await harness.clock.waitForSleepers(1)
        #expect(harness.publisher.current?.version == 1)
        harness.clock.advance(by: 5)
        await harness.clock.waitForSleepers(1)
        #expect(harness.publisher.current?.version == 2)
        // A new interval applies from the next wait.
        await harness.runner.apply(policy: loopPolicy(interval: 2), version: "short")
        await harness.clock.waitForSleepers(1)
        harness.clock.advance(by: 2)
        await harness.clock.waitForSleepers(1)
        #expect(harness.publisher.current?.version == 3)
        #expect(try servedSnapshot(harness.publisher).policyVersion == "short")
        await harness.close()
        #expect(harness.clock.sleeperCount == 0)
    }

    @Test func operatorInputsReachTheEngineAndDecisionsAreRecorded() async throws {
        let harness = try LoopHarness()
        try await harness.open()
        await harness.classifier.setDemand("acme", rpm: 80, tpm: 20_000)
        await harness.classifier.setDemand("globex", rpm: 80, tpm: 20_000)
        await harness.operators.setOverride(
            Override(
                tenant: "acme", weight: 3, actor: "cs@example.com", reason: "contract", createdAt: harness.clock.now,
                expiresAt: harness.clock.now + 3600))
        await harness.operators.requestBurst(
            BurstRequest(
                id: "b1", tenant: "nobody", upstream: pool4o, calls: 10, tokens: 100, ttlSeconds: 60,
                requestedAt: harness.clock.now))
        await harness.tick()
        let snapshot = try servedSnapshot(harness.publisher)
        // Weight 3 against 1 on a 100 RPM pool both want 80 of: 75 and 25.
        #expect(isClose(snapshot.tenant("acme")?.rpm.rate, 75))
        #expect(isClose(snapshot.tenant("globex")?.rpm.rate, 25))
        #expect(snapshot.tenant("acme")?.reason.rpm == "override")
        let outcomes = await harness.operators.burstOutcomes()
        #expect(outcomes.map(\.requestID) == ["b1"])
        #expect(outcomes.first?.outcome == .unknown)
        // Decided requests are not handed over again.
        #expect(await harness.operators.inputs(now: harness.clock.now).burstRequests.isEmpty)
        await harness.close()
    }

    @Test func failingOperatorInputsKeepTheLastOverrides() async throws {
        let harness = try LoopHarness()
        let flaky = FlakyOperatorInputs()
        try await harness.openWith(operators: flaky)
        await harness.classifier.setDemand("acme", rpm: 80, tpm: 20_000)
        await harness.classifier.setDemand("globex", rpm: 80, tpm: 20_000)
        flaky.overrides.value = [
            Override(
                tenant: "acme", weight: 3, actor: "cs", reason: "contract", createdAt: harness.clock.now,
                expiresAt: harness.clock.now + 3600)
        ]
        await harness.tick()
        flaky.failing.value = true
        let report = await harness.tick()
        #expect(report.succeeded)
        #expect(isClose(try servedSnapshot(harness.publisher).tenant("acme")?.rpm.rate, 75))
        #expect(harness.runner.view.alerts.contains { $0.kind == "operator_inputs" })
        flaky.failing.value = false
        await harness.tick()
        #expect(!harness.runner.view.alerts.contains { $0.kind == "operator_inputs" })
        await harness.close()
    }

    @Test func ifNoneMatchForms() {
        #expect(SnapshotCondition.parse(nil) == .none)
        #expect(SnapshotCondition.parse("") == .none)
        #expect(SnapshotCondition.parse("\"42\"") == SnapshotCondition(versions: [42]))
        #expect(SnapshotCondition.parse("42") == SnapshotCondition(versions: [42]))
        #expect(SnapshotCondition.parse("W/\"42\"") == SnapshotCondition(versions: [42]))
        #expect(SnapshotCondition.parse(" \"41\" ,\t\"42\"") == SnapshotCondition(versions: [41, 42]))
        #expect(SnapshotCondition.parse("*") == SnapshotCondition(matchesAny: true))
        #expect(SnapshotCondition.parse("\"abc\", \"-1\", \"\", \"99999999999999999999\", \"4 2\"") == .none)
        #expect(SnapshotCondition.parse("\"41\", \"42\"").enforcedVersion == 42)
        #expect(SnapshotCondition.parse("*").enforcedVersion == nil)
        #expect(SnapshotCondition.parse("\"42\"").matches(42))
        #expect(!SnapshotCondition.parse("\"42\"").matches(43))
        #expect(SnapshotCondition.parse("*").matches(7))
        #expect(!SnapshotCondition.none.matches(1))
    }
}

/// Operator inputs that can be held: a tick reading them waits until released.
final class HeldOperatorInputs: OperatorInputs, @unchecked Sendable {
    let holding = Box(false)
    private let lock = NSLock()
    private var waiter: CheckedContinuation<Void, Never>?

    func inputs(now: Double) async throws -> OperatorInputBatch {
        if holding.value { await withCheckedContinuation { continuation in lock.withLock { waiter = continuation } } }
        return OperatorInputBatch()
    }

    var isHolding: Bool { lock.withLock { waiter != nil } }

    func release() {
        holding.value = false
        lock.withLock {
            waiter?.resume()
            waiter = nil
        }
    }

    func record(_ decision: Decision, now: Double) async {}
}

/// Operator inputs that can be made to fail.
final class FlakyOperatorInputs: OperatorInputs {
    struct Unavailable: Error, CustomStringConvertible {
        var description: String { "operators' tables are locked" }
    }

    let failing = Box(false)
    let overrides = Box<[Override]>([])

    func inputs(now: Double) async throws -> OperatorInputBatch {
        if failing.value { throw Unavailable() }
        return OperatorInputBatch(overrides: overrides.value)
    }

    func record(_ decision: Decision, now: Double) async {}
}

extension LoopHarness {
    /// Opens the loop with other operator inputs.
    func openWith(
        operators: any OperatorInputs, policy: Policy = loopPolicy(),
        configuration: LoopConfiguration = LoopConfiguration()
    ) async throws {
        let database = try await StoreDatabase.open(path: directory.databasePath)
        pool.value = database
        loop.value = try await LoopRunner.open(
            store: TelemetryStore(pool: database, clock: clock), policy: policy,
            policyVersion: LoopRunner.policyVersion(of: policy), clock: clock, estimators: estimators.factory,
            operators: operators, configuration: configuration)
    }
}

@Suite struct LoopObservabilityTests {
    /// On a dimension with no capacity the engine allocates nothing, but an absolute ceiling is published as the
    /// tenant's rate: gateways admitting past it are drift too (review of session 49: the allowance read the
    /// allocation only, so nothing was ever alerted there).
    @Test func driftIsAlertedAgainstACeilingWhereThePoolHasNoCapacity() async throws {
        let harness = try LoopHarness()
        var policy = loopPolicy(tenants: [
            TenantPolicy(id: "acme", tier: "standard", ceiling: PerDimension(rpm: nil, tpm: .absolute(8000)))
        ])
        var upstream = try #require(policy.upstream(pool4o))
        upstream.capacity.tpm = nil
        policy.setUpstream(upstream)
        try await harness.open(policy: policy)
        // Within it (6,000 tokens a minute), then the two gateways together admit 10,000 for a minute.
        await harness.classifier.setDemand(
            "acme", rpm: 30, tpm: 20_000, shares: ["gw-a": 0.5, "gw-b": 0.5],
            served: ["gw-a": PerDimension(rpm: 15, tpm: 3000), "gw-b": PerDimension(rpm: 15, tpm: 3000)])
        await harness.tick()
        await harness.classifier.setDemand(
            "acme", rpm: 30, tpm: 20_000, shares: ["gw-a": 0.5, "gw-b": 0.5],
            served: ["gw-a": PerDimension(rpm: 15, tpm: 5000), "gw-b": PerDimension(rpm: 15, tpm: 5000)])
        for _ in 0..<13 { await harness.tick() }
        let published = harness.runner.view.decision?.allocation(tenant: "acme", upstream: pool4o)?.published(.tpm)
        #expect(published?.rate == 8000 && published?.reason == .ceiling)
        let alert = try #require(harness.runner.view.alerts.first { $0.kind == "drift" })
        #expect(alert.tenant == "acme")
        #expect(alert.message.contains("admitted 10000 tpm"))
        await harness.close()
    }

    @Test func driftIsAlertedWhenGatewaysTogetherAdmitMoreThanTheAllocationForTheWindow() async throws {
        let harness = try LoopHarness()
        try await harness.open()
        // Allocated 30 RPM and admitted 30; then the two gateways together admit 36 (20 % over; the threshold is
        // 10 %). (A tenant first reviewed above its allowance — after a restart — starts from what was admitted.)
        await harness.classifier.setDemand(
            "acme", rpm: 30, tpm: 20_000, shares: ["gw-a": 0.5, "gw-b": 0.5],
            served: ["gw-a": PerDimension(rpm: 15, tpm: 5000), "gw-b": PerDimension(rpm: 15, tpm: 5000)])
        await harness.tick()
        await harness.classifier.setDemand(
            "acme", rpm: 30, tpm: 20_000, shares: ["gw-a": 0.5, "gw-b": 0.5],
            served: ["gw-a": PerDimension(rpm: 18, tpm: 5000), "gw-b": PerDimension(rpm: 18, tpm: 5000)])
        await harness.tick()
        for _ in 0..<11 { await harness.tick() }  // 55 s over: not yet
        #expect(!harness.runner.view.alerts.contains { $0.kind == "drift" })
        await harness.tick()  // 60 s (drift_window_s)
        let alert = try #require(harness.runner.view.alerts.first { $0.kind == "drift" })
        #expect(alert.tenant == "acme")
        #expect(alert.upstream == pool4o)
        #expect(alert.message.contains("admitted 36 rpm"))
        #expect(alert.message.contains("20% over"))
        #expect(alert.since == harness.clock.now - 60)
        // Back within the allocation: the alert ends.
        await harness.classifier.setDemand(
            "acme", rpm: 30, tpm: 20_000, shares: ["gw-a": 0.5, "gw-b": 0.5],
            served: ["gw-a": PerDimension(rpm: 15, tpm: 5000), "gw-b": PerDimension(rpm: 15, tpm: 5000)])
        await harness.tick()
        #expect(!harness.runner.view.alerts.contains { $0.kind == "drift" })
        await harness.close()
    }

    @Test func aTenantAboveItsAllocationOnIdleAllocationOfOthersIsNotDrift() async throws {
        let harness = try LoopHarness()
        try await harness.open()
        // acme is allocated 30 RPM and admitted 40; beta is allocated 30 and uses 10: the gateways lent acme
        // what beta left idle (the upstream admits 50 of 60), which is not drift.
        await harness.classifier.setDemand(
            "acme", rpm: 30, tpm: 20_000, shares: ["gw-a": 1],
            served: ["gw-a": PerDimension(rpm: 40, tpm: 10_000)])
        await harness.classifier.setDemand(
            "beta", rpm: 30, tpm: 20_000, shares: ["gw-a": 1],
            served: ["gw-a": PerDimension(rpm: 10, tpm: 5_000)])
        for _ in 0..<14 { await harness.tick() }  // 65 s
        #expect(!harness.runner.view.alerts.contains { $0.kind == "drift" })
        // beta comes back to its whole allocation: the upstream is now 17 % over (70 of 60; the threshold is
        // 10 %), and acme's excess is drift once it lasts the window.
        await harness.classifier.setDemand(
            "beta", rpm: 30, tpm: 20_000, shares: ["gw-a": 1],
            served: ["gw-a": PerDimension(rpm: 30, tpm: 5_000)])
        for _ in 0..<12 { await harness.tick() }
        #expect(!harness.runner.view.alerts.contains { $0.kind == "drift" })
        await harness.tick()
        let alert = try #require(harness.runner.view.alerts.first { $0.kind == "drift" })
        #expect(alert.tenant == "acme")
        #expect(alert.message.contains("admitted 40 rpm"))
        #expect(!harness.runner.view.alerts.contains { $0.kind == "drift" && $0.tenant == "beta" })
        await harness.close()
    }

    /// A tick after the lease of the version in force ran out logs it and counts it (outside evaluation round 40: a
    /// service stopped for longer than the lease left every gateway on its fallback floors, and nothing said so); a
    /// version published without a lease (a drain's end) is not a lapse.
    @Test func aLeaseThatRanOutBeforeTheNextTickIsLoggedAndCounted() async throws {
        let harness = try LoopHarness()
        let registry = MetricsRegistry()
        let sink = CapturingLogSink()
        let persistence = Box<CrashingPersistence?>(nil)
        try await harness.open(
            policy: loopPolicy(lease: 20), configuration: LoopConfiguration(slowTickFraction: 1_000),
            snapshots: { pool in
                let crashing = CrashingPersistence(SnapshotStore(pool: pool))
                persistence.value = crashing
                return crashing
            }, metrics: registry, logger: Logger(label: "test", minimumLevel: .info, sink: sink, clock: harness.clock))
        await harness.classifier.setDemand("acme", rpm: 30, tpm: 20_000)
        await harness.tick()
        await harness.tick()  // within the lease
        let expiry = try #require(harness.publisher.current?.content.snapshot.expiresAt)
        // Ticks that fail to publish after the lease ran out count nothing; the one that publishes counts once.
        persistence.value?.armed.value = true
        #expect(await harness.tick(by: 25).failure != nil)
        #expect(await harness.tick(by: 5).failure != nil)
        #expect(!registry.render().contains("allot_lease_lapses_total 1"))
        persistence.value?.armed.value = false
        await harness.tick(by: 20)  // 50 s after the last version, whose lease ran 20
        let late = harness.clock.now
        let lapses = sink.lines.filter { $0.contains("the lease of the snapshot in force ran out") }
        #expect(lapses.count == 1)
        #expect(lapses.first?.contains("\"version\":2") == true, "\(lapses)")  // the failed ticks' are not served
        #expect(late - expiry == 30)
        #expect(lapses.first?.contains("\"lapsed_s\":30.0") == true, "\(lapses)")
        #expect(lapses.first?.contains("\"expired_at\":\"\(RFC3339.format(expiry))\"") == true, "\(lapses)")
        #expect(registry.render().contains("allot_lease_lapses_total 1"))
        // A drain and its end publish versions without a lease: the tick after them is no lapse.
        _ = try await harness.publisher.startDrain(now: harness.clock.now)
        _ = try await harness.publisher.resume(now: harness.clock.now)
        await harness.tick()
        #expect(registry.render().contains("allot_lease_lapses_total 1"))
        await harness.close()
    }

    @Test func slowTicksAreAlertedAndEveryTickIsLoggedAndMeasured() async throws {
        let harness = try LoopHarness()
        let registry = MetricsRegistry()
        let sink = CapturingLogSink()
        let database = try await StoreDatabase.open(path: harness.directory.databasePath)
        harness.pool.value = database
        let policy = loopPolicy()
        harness.loop.value = try await LoopRunner.open(
            store: TelemetryStore(pool: database, clock: harness.clock), policy: policy, policyVersion: "v1",
            clock: harness.clock, estimators: harness.estimators.factory,
            configuration: LoopConfiguration(slowTickFraction: 0), metrics: registry,
            logger: Logger(label: "test", minimumLevel: .debug, sink: sink, clock: harness.clock))
        await harness.classifier.setDemand("acme", rpm: 30, tpm: 20_000)
        await harness.tick()
        _ = await harness.publisher.poll(gateway: "gw-1", condition: SnapshotCondition(versions: [1]), wait: 0)
        await harness.tick()
        // Every tick is "slow" against a threshold of 0 s.
        let slow = try #require(harness.runner.view.alerts.first { $0.kind == "tick_slow" })
        #expect(slow.message.contains("tick 2 took"))
        let lines = sink.lines
        let tickLines = lines.filter { $0.contains("\"msg\":\"slow tick\"") }
        #expect(tickLines.count == 2)
        #expect(tickLines.last?.contains("\"logger\":\"loop\"") == true)
        #expect(tickLines.last?.contains("\"tick\":2") == true)
        #expect(tickLines.last?.contains("\"versions\":\"2\"") == true)
        #expect(tickLines.last?.contains("\"total_ms\":") == true)
        #expect(tickLines.last?.contains("\"classify_ms\":") == true)

        let text = registry.render()
        #expect(text.contains("allot_tick_duration_seconds_count{phase=\"total\"} 2"))
        #expect(text.contains("allot_tick_duration_seconds_count{phase=\"publish\"} 2"))
        #expect(text.contains("allot_ticks_total{outcome=\"ok\"} 2"))
        #expect(text.contains("allot_snapshot_version 2"))
        #expect(text.contains("allot_snapshots_published_total{kind=\"tick\"} 2"))
        #expect(text.contains("allot_tick_last_timestamp_seconds \(Int(harness.clock.now))"))
        #expect(text.contains("allot_gateways{state=\"behind\"} 1"))
        #expect(text.contains("allot_gateway_lag_versions_max 1"))
        #expect(text.contains("allot_snapshot_watchers 0"))
        await harness.close()
    }
}
