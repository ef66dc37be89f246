import AllotCore
import AllotLoop
import AllotProtocol
import AllotSQLite
import AllotStore
import AllotTime
import Foundation
import Testing

@Suite struct PublisherTests {
    @Test func nothingIsServedBeforeTheFirstSnapshot() async throws {
        let harness = try LoopHarness()
        try await harness.open()
        #expect(harness.publisher.current == nil)
        guard case .unavailable = await harness.publisher.poll(gateway: "gw-1", condition: .none, wait: 0) else {
            Issue.record("expected unavailable")
            return
        }
        await harness.close()
    }

    /// A gateway holding a version a little above the newest stored (the database lost its newest versions: a
    /// damaged log's tail, a restore from a backup) moves the sequence above it, so no number is issued twice with
    /// other contents (outside evaluation round 40: 8 and 9 were issued again); a version far above is no history of
    /// this service and moves nothing.
    @Test func versionsContinueAboveOneAGatewayHoldsThatTheStoreLost() async throws {
        let harness = try LoopHarness()
        try await harness.open()
        await harness.classifier.setDemand("acme", rpm: 30, tpm: 20_000, shares: ["gw-1": 1])
        #expect(await harness.tick().published == [1])
        #expect(await harness.tick().published == [2])
        let held = await harness.publisher.poll(gateway: "gw-1", condition: SnapshotCondition.parse("\"9\""), wait: 0)
        guard case .modified(let answered, _) = held else {
            Issue.record("expected the newest stored version")
            return
        }
        #expect(answered.version == 2)
        #expect(await harness.tick().published == [10])
        // Far above (a gateway of another deployment, a buggy client), and from no gateway's own poll: nothing moves.
        _ = await harness.publisher.poll(gateway: "gw-1", condition: SnapshotCondition.parse("\"200011\""), wait: 0)
        _ = await harness.publisher.poll(gateway: nil, condition: SnapshotCondition.parse("\"15\""), wait: 0)
        _ = await harness.publisher.poll(
            gateway: "gw-1", condition: SnapshotCondition.parse("\"16\""), wait: 0, registers: false)
        #expect(await harness.tick().published == [11])
        await harness.close()
    }

    @Test func aTickPublishesTheSnapshotShapeOfSPEC7() async throws {
        let harness = try LoopHarness()
        let policy = loopPolicy()
        try await harness.open(policy: policy)
        await harness.classifier.setDemand("acme", rpm: 30, tpm: 20_000, shares: ["gw-1": 1])
        await harness.classifier.setDemand("globex", rpm: 50, tpm: 50_000, shares: ["gw-1": 1])
        let report = await harness.tick()
        #expect(report.succeeded)
        #expect(report.published == [1])

        let current = try #require(harness.publisher.current)
        #expect(current.etag == "\"1\"")
        let snapshot = try servedSnapshot(harness.publisher)
        #expect(snapshot.version == 1)
        #expect(snapshot.generatedAt == harness.clock.now)
        #expect(snapshot.expiresAt == harness.clock.now + 300)
        #expect(snapshot.refreshMs == 5000)
        #expect(snapshot.policyVersion == LoopRunner.policyVersion(of: policy))
        #expect(snapshot.gateway == nil)
        #expect(
            snapshot.upstreams == [
                UpstreamEntry(id: pool4o, state: "healthy", capacity: DimensionValues(rpm: 100, tpm: 100_000))
            ])
        let acme = try #require(snapshot.tenant("acme"))
        #expect(acme.tier == "standard")
        #expect(acme.priority == 2)
        #expect(acme.rpm == Bucket(rate: 30, burst: 5))
        #expect(acme.tpm.rate == 20_000)
        #expect(abs(acme.tpm.burst - 20_000.0 * 10 / 60) < 1e-9)
        #expect(acme.reason == Reasons(rpm: "demand", tpm: "demand"))
        #expect(acme.mode == "enforce")
        #expect(acme.maxConcurrency == 256)
        #expect(acme.tokenEstimate == TokenEstimate(p50: 120, p95: 480))
        #expect(acme.burstCredit == nil)
        #expect(acme.deny == nil)
        #expect(snapshot.tenant("globex")?.rpm.rate == 50)
        #expect(snapshot.taskBudgets == ["batch": TaskBudget(maxCalls: 500, maxTokens: 5_000_000)])
        // `default`: the default tier's starvation guard (1 request, 1,000 tokens per minute).
        #expect(
            snapshot.defaultLimits
                == RateLimits(rpm: Bucket(rate: 1, burst: 1), tpm: Bucket(rate: 1000, burst: 1000.0 * 10 / 60)))
        // `fallback`: floors only; this tier has none.
        #expect(snapshot.fallback.tenants.isEmpty)
        #expect(
            snapshot.fallback.defaultLimits
                == RateLimits(rpm: Bucket(rate: 0, burst: 0), tpm: Bucket(rate: 0, burst: 0)))

        let text = String(decoding: current.body, as: UTF8.self)
        for key in [
            "\"version\":1", "\"generated_at\":", "\"expires_at\":", "\"refresh_ms\":5000", "\"policy_version\":",
            "\"max_concurrency\":256", "\"token_estimate\":{", "\"queue_weight\":", "\"default\":{", "\"fallback\":{",
            "\"task_budget\":{", "\"burst_credit\":null", "\"mode\":\"enforce\"",
        ] {
            #expect(text.contains(key), "missing \(key)")
        }
        await harness.close()
    }

    /// A tenant's ceiling reaches the gateways (`ceiling`), each its part in the proportion of its slice, so that they
    /// lend it idle allocation only up to it; a dimension without one is unbounded, a tenant without any has none.
    @Test func aTenantsCeilingIsPublishedAndSlicedLikeItsRate() async throws {
        let harness = try LoopHarness()
        let capped = TenantPolicy(
            id: "globex", tier: "standard", ceiling: PerDimension(rpm: .absolute(60), tpm: nil))
        try await harness.open(policy: loopPolicy(tenants: [capped]))
        await harness.classifier.setDemand("acme", rpm: 30, tpm: 20_000, shares: ["gw-1": 1])
        await harness.classifier.setDemand("globex", rpm: 50, tpm: 50_000, shares: ["gw-1": 0.75, "gw-2": 0.25])
        #expect(await harness.tick().succeeded)
        let global = try servedSnapshot(harness.publisher)
        let globex = try #require(global.tenant("globex"))
        #expect(globex.rpm.rate == 50)  // its demand: the ceiling is above it
        #expect(globex.ceiling == DimensionValues(rpm: 60, tpm: .infinity))
        #expect(global.tenant("acme")?.ceiling == nil)
        var parts = 0.0
        for gateway in ["gw-1", "gw-2"] {
            let slice = try #require(try servedSnapshot(harness.publisher, gateway: gateway).tenant("globex"))
            let ceiling = try #require(slice.ceiling)
            #expect(abs(ceiling.rpm - 60 * slice.rpm.rate / 50) < 1e-9)
            #expect(ceiling.tpm == .infinity)
            parts += ceiling.rpm
        }
        #expect(abs(parts - 60) < 1e-9)
        await harness.close()
    }

    /// A tenant throttled to land on its spend budget has its token cap published as its TPM ceiling, so that the
    /// gateways do not lend it what the budget forbids; its RPM, which the budget does not cap, stays unbounded.
    @Test func aBudgetThrottledTenantsCapIsItsCeiling() async throws {
        let harness = try LoopHarness()
        var tier = Tier(name: "standard", priority: 2)
        tier.budgets = [SpendBudget(window: .day, amount: 100)]
        try await harness.open(policy: loopPolicy(tiers: [tier]))
        await harness.classifier.setDemand("acme", rpm: 30, tpm: 20_000)
        await harness.classifier.setDemand("globex", rpm: 30, tpm: 20_000)
        #expect(await harness.tick().succeeded)
        #expect(try servedSnapshot(harness.publisher).tenant("acme")?.ceiling == nil)

        // Spent 90 of 100 and burning fast: throttled to what is left over the rest of the day.
        await harness.classifier.setSpend([TenantSpend(tenant: "acme", window: .day, spent: 90, burnRatePerSecond: 1)])
        #expect(await harness.tick().succeeded)
        let snapshot = try servedSnapshot(harness.publisher)
        let acme = try #require(snapshot.tenant("acme"))
        #expect(acme.reason.tpm == "budget")
        #expect(acme.tpm.rate < 20_000)
        #expect(acme.ceiling == DimensionValues(rpm: .infinity, tpm: acme.tpm.rate))
        #expect(snapshot.tenant("globex")?.ceiling == nil)
        await harness.close()
    }

    /// On a pool the policy does not declare (published unlimited, `no_capacity`), a tenant cut to zero by its budget
    /// is cut there too: rates 0, `deny`, reason `budget`, a zero ceiling (outside evaluation round 20: 10¹²).
    @Test func aBudgetCutReachesAPoolWithoutCapacity() async throws {
        let harness = try LoopHarness()
        var tier = Tier(name: "standard", priority: 2)
        tier.budgets = [SpendBudget(window: .day, amount: 100, hardAction: .zero)]
        try await harness.open(policy: loopPolicy(tiers: [tier]))
        await harness.classifier.setDemand("acme", upstream: "new/pool", rpm: 30, tpm: 20_000)
        #expect(await harness.tick().succeeded)
        let before = try #require(try servedSnapshot(harness.publisher).tenant("acme", upstream: "new/pool"))
        #expect(before.rpm.rate == SnapshotContent.unlimited)
        #expect(before.reason.rpm == SnapshotAssembler.noCapacityReason)
        await harness.classifier.setSpend([TenantSpend(tenant: "acme", window: .day, spent: 100, burnRatePerSecond: 0)])
        #expect(await harness.tick().succeeded)
        let cut = try #require(try servedSnapshot(harness.publisher).tenant("acme", upstream: "new/pool"))
        #expect(cut.rpm == Bucket(rate: 0, burst: 0) && cut.tpm == Bucket(rate: 0, burst: 0))
        #expect(cut.deny == "budget_exhausted")
        #expect(cut.reason == Reasons(rpm: "budget", tpm: "budget"))
        #expect(cut.ceiling == DimensionValues(rpm: 0, tpm: 0))
        await harness.close()
    }

    @Test func versionsArePersistedAndRestartsServeTheLastOneAtOnce() async throws {
        let harness = try LoopHarness()
        try await harness.open()
        await harness.classifier.setDemand("acme", rpm: 30, tpm: 20_000)
        await harness.tick()
        await harness.tick()
        let before = try servedSnapshot(harness.publisher)
        #expect(before.version == 2)
        let stored = try #require(try await SnapshotStore(pool: harness.pool.value!).latest())
        #expect(stored.version == 2)
        #expect(try SnapshotContent(stored: stored) == harness.publisher.current?.content)
        let bytes = try #require(harness.publisher.current?.body)
        await harness.close()

        // Restart: served before any tick, byte for byte.
        try await harness.open()
        let restored = try #require(harness.publisher.current)
        #expect(restored.version == 2)
        #expect(try servedSnapshot(harness.publisher) == before)
        #expect(restored.body == bytes)  // byte for byte
        guard
            case .notModified(let same) = await harness.publisher.poll(
                gateway: "gw-1", condition: SnapshotCondition.parse("\"2\""), wait: 0)
        else {
            Issue.record("expected 304 for the restored version")
            return
        }
        #expect(same.version == 2)
        let report = await harness.tick()
        #expect(report.published == [3])
        await harness.close()
    }

    @Test func longPollIsWokenByAPublish() async throws {
        let harness = try LoopHarness()
        try await harness.open()
        await harness.classifier.setDemand("acme", rpm: 30, tpm: 20_000)
        await harness.tick()
        let publisher = harness.publisher
        let poll = Task { await publisher.poll(gateway: "gw-1", condition: SnapshotCondition.parse("\"1\""), wait: 30) }
        // The poll parks.
        await waitForWatchers(publisher, 1)
        #expect(publisher.watcherCount == 1)
        await harness.classifier.setDemand("acme", rpm: 40, tpm: 20_000)
        await harness.tick(by: 1)
        guard case .modified(let snapshot, let body) = await poll.value else {
            Issue.record("expected the new version")
            return
        }
        #expect(snapshot.version == 2)
        #expect(isClose(try Snapshot(decoding: body).tenant("acme")?.rpm.rate, 40))  // its slice: all of it
        #expect(publisher.watcherCount == 0)
        await harness.close()
    }

    /// A gateway waiting in a long-poll is not silent however long ago the poll began (outside evaluation round 40:
    /// after the service was stopped for 45 s, a gateway held in a long-poll across the stop was alerted as silent for
    /// "45.11 s"); answered, its silence counts from its last poll again (a gateway that crashed while waiting).
    @Test func aGatewayWaitingInALongPollIsNotSilent() async throws {
        let harness = try LoopHarness()
        try await harness.open()
        await harness.tick()
        let publisher = harness.publisher
        let policy = loopPolicy()
        let asked = harness.clock.now
        let poll = Task { await publisher.poll(gateway: "gw-1", condition: SnapshotCondition.parse("\"1\""), wait: 60) }
        await waitForWatchers(publisher, 1)
        await harness.clock.waitForSleepers(1)
        // Looked at as from 100 s on (longer than gateway_lag_s 30 since the poll began): still waiting, not silent.
        let waiting = try #require(publisher.gatewayStatuses(now: asked + 100, policy: policy).first)
        #expect(waiting.sinceContactSeconds == 0)
        #expect(waiting.state == .current)
        harness.clock.advance(by: 60)
        guard case .notModified = await poll.value else {
            Issue.record("expected 304")
            return
        }
        // Answered at 60 s, and not back: silent since its poll.
        let answered = try #require(publisher.gatewayStatuses(now: asked + 100, policy: policy).first)
        #expect(answered.lastContact == asked)
        #expect(answered.sinceContactSeconds == 100)
        #expect(answered.state == .silent)
        await harness.close()
    }

    /// A gateway's poll says what its clock reads (`Allot-Gateway-Time`): shown as its clock minus ours, alerted
    /// beyond 30 s (`gateway_clock`), forgotten by a poll that says nothing.
    @Test func aGatewaysClockFarFromOursIsShownAndAlerted() async throws {
        let harness = try LoopHarness()
        try await harness.open()
        await harness.tick()
        let publisher = harness.publisher
        let policy = loopPolicy()
        let now = harness.clock.now
        _ = await publisher.poll(gateway: "gw-1", condition: .none, wait: 0, gatewayClock: now + 612.5)
        _ = await publisher.poll(gateway: "gw-2", condition: .none, wait: 0, gatewayClock: now - 29.5)
        _ = await publisher.poll(gateway: "gw-3", condition: .none, wait: 0)
        let offsets = publisher.gatewayStatuses(now: now, policy: policy).map(\.clockOffsetSeconds)
        #expect(offsets == [612.5, -29.5, nil])
        await harness.tick()
        let alerts = harness.runner.view.alerts.filter { $0.kind == "gateway_clock" }
        #expect(alerts.map(\.gateway) == ["gw-1"])
        #expect(
            alerts.first?.message
                == "gateway gw-1's clock is 612.5 s ahead of Allot's (its last poll's Allot-Gateway-Time); "
                + "AllotEnforcement runs leases and telemetry on Allot's clock, a gateway that judges expires_at on "
                + "its own does not: one of the two clocks is wrong (all gateways at once: Allot's); put both on NTP")
        #expect(alerts.first?.since == now)
        // Still so at the next poll: the alert is as old as the first poll that said so.
        harness.clock.advance(by: 5)
        _ = await publisher.poll(gateway: "gw-1", condition: .none, wait: 0, gatewayClock: harness.clock.now + 612.5)
        await harness.tick()
        #expect(harness.runner.view.alerts.first { $0.kind == "gateway_clock" }?.since == now)
        _ = await publisher.poll(gateway: "gw-1", condition: .none, wait: 0)
        #expect(publisher.gatewayStatuses(now: now, policy: policy).first?.clockOffsetSeconds == nil)
        await harness.tick()
        #expect(!harness.runner.view.alerts.contains { $0.kind == "gateway_clock" })
        await harness.close()
    }

    @Test func longPollTimesOutWithNotModified() async throws {
        let harness = try LoopHarness()
        try await harness.open()
        await harness.tick()
        let publisher = harness.publisher
        let poll = Task { await publisher.poll(gateway: "gw-1", condition: SnapshotCondition.parse("1"), wait: 10) }
        await waitForWatchers(publisher, 1)
        await harness.clock.waitForSleepers(1)
        harness.clock.advance(by: 9.9)
        #expect(publisher.watcherCount == 1)
        harness.clock.advance(by: 0.1)
        guard case .notModified(let snapshot) = await poll.value else {
            Issue.record("expected 304")
            return
        }
        #expect(snapshot.version == 1)
        #expect(publisher.watcherCount == 0)
        await harness.close()
    }

    @Test func longPollDeadlinesExpireInOrderAndCancelledPollsLeave() async throws {
        let harness = try LoopHarness()
        try await harness.open()
        await harness.tick()
        let publisher = harness.publisher
        let condition = SnapshotCondition(versions: [1])
        let ten = Task { await publisher.poll(gateway: "gw-10", condition: condition, wait: 10) }
        await waitForWatchers(publisher, 1)
        let five = Task { await publisher.poll(gateway: "gw-5", condition: condition, wait: 5) }
        await waitForWatchers(publisher, 2)
        let twenty = Task { await publisher.poll(gateway: "gw-20", condition: condition, wait: 20) }
        await waitForWatchers(publisher, 3)
        let cancelled = Task { await publisher.poll(gateway: "gw-x", condition: condition, wait: 15) }
        await waitForWatchers(publisher, 4)
        cancelled.cancel()
        guard case .notModified = await cancelled.value else {
            Issue.record("a cancelled poll ends with 304")
            return
        }
        #expect(publisher.watcherCount == 3)
        // One sweeper sleeps for all of them, until the earliest deadline.
        await harness.clock.waitForSleepers(1)
        #expect(harness.clock.sleeperCount == 1)
        #expect(harness.clock.nextDeadline == harness.clock.now + 5)
        harness.clock.advance(by: 5)
        guard case .notModified = await five.value else {
            Issue.record("expected 304")
            return
        }
        await harness.clock.waitForSleepers(1)
        #expect(publisher.watcherCount == 2)
        harness.clock.advance(by: 5)
        guard case .notModified = await ten.value else {
            Issue.record("expected 304")
            return
        }
        await harness.clock.waitForSleepers(1)
        #expect(publisher.watcherCount == 1)
        harness.clock.advance(by: 10)
        guard case .notModified = await twenty.value else {
            Issue.record("expected 304")
            return
        }
        #expect(publisher.watcherCount == 0)
        await harness.close()
        #expect(harness.clock.sleeperCount == 0)
    }

    @Test func shutdownAnswersLongPollsAtOnce() async throws {
        let harness = try LoopHarness()
        try await harness.open()
        await harness.tick()
        let publisher = harness.publisher
        let polls = (0..<3).map { index in
            Task { await publisher.poll(gateway: "gw-\(index)", condition: SnapshotCondition.parse("\"1\""), wait: 60) }
        }
        await waitForWatchers(publisher, 3)
        publisher.shutDown()
        for poll in polls {
            guard case .notModified(let snapshot) = await poll.value else {
                Issue.record("expected 304 on shutdown")
                continue
            }
            #expect(snapshot.version == 1)
        }
        // Later long-polls are answered at once too.
        guard
            case .notModified = await publisher.poll(
                gateway: "gw-9", condition: SnapshotCondition.parse("\"1\""), wait: 60)
        else {
            Issue.record("expected an immediate 304 after shutdown")
            return
        }
        await harness.close()
    }

    @Test func conditionalPollsRecordEnforcedVersionsAndLag() async throws {
        let harness = try LoopHarness()
        try await harness.open()
        await harness.classifier.setDemand("acme", rpm: 30, tpm: 20_000, shares: ["gw-a": 0.5, "gw-b": 0.5])
        await harness.tick()
        let publisher = harness.publisher
        // gw-a has nothing yet; gw-b says it enforces version 1.
        guard case .modified(let first, _) = await publisher.poll(gateway: "gw-a", condition: .none, wait: 0) else {
            Issue.record("expected 200")
            return
        }
        #expect(first.version == 1)
        guard
            case .notModified = await publisher.poll(
                gateway: "gw-b", condition: SnapshotCondition.parse("W/\"1\""), wait: 0)
        else {
            Issue.record("expected 304")
            return
        }
        for _ in 0..<4 { await harness.tick() }
        let policy = loopPolicy()
        let statuses = publisher.gatewayStatuses(now: harness.clock.now, policy: policy)
        #expect(statuses.map(\.id) == ["gw-a", "gw-b"])
        let a = statuses[0]
        let b = statuses[1]
        #expect(a.enforcedVersion == nil)
        #expect(a.state == .unknown)
        #expect(b.enforcedVersion == 1)
        #expect(b.lagVersions == 4)
        #expect(b.lagSeconds == 15)  // version 2 was published 15 s ago
        #expect(b.sinceContactSeconds == 20)
        #expect(b.state == .lagging)
        #expect(b.tenants == ["acme"])
        #expect(harness.runner.view.alerts.contains { $0.kind == "gateway_lag" && $0.gateway == "gw-b" })
        // A version never published (the newest is 5) is not believed: gw-b still enforces 1 and lags 4.
        _ = await publisher.poll(gateway: "gw-b", condition: SnapshotCondition.parse("\"99999999\""), wait: 0)
        let claimed = publisher.gatewayStatuses(now: harness.clock.now, policy: policy)[1]
        #expect(claimed.enforcedVersion == 1)
        #expect(claimed.lagVersions == 4)
        #expect(claimed.state == .lagging)
        // Current, then back to an older one (restarted from an older snapshot): the lag is shown again.
        _ = await publisher.poll(gateway: "gw-b", condition: SnapshotCondition.parse("\"5\""), wait: 0)
        #expect(publisher.gatewayStatuses(now: harness.clock.now, policy: policy)[1].state == .current)
        _ = await publisher.poll(gateway: "gw-b", condition: SnapshotCondition.parse("\"3\""), wait: 0)
        let older = publisher.gatewayStatuses(now: harness.clock.now, policy: policy)[1]
        #expect(older.enforcedVersion == 3)
        #expect(older.lagVersions == 2)

        // A gateway whose first poll names version 1 (superseded 20 s before): lagging since Allot heard from it,
        // not since before it existed (round 21: "behind for 144 s" on its first poll).
        let firstContact = harness.clock.now
        _ = await publisher.poll(gateway: "gw-c", condition: SnapshotCondition.parse("\"1\""), wait: 0)
        await harness.tick()
        let lag = try #require(harness.runner.view.alerts.first { $0.kind == "gateway_lag" && $0.gateway == "gw-c" })
        #expect(lag.since == firstContact)
        let c = try #require(
            publisher.gatewayStatuses(now: harness.clock.now, policy: policy).first { $0.id == "gw-c" })
        #expect(c.lagSeconds == 5)  // as the API and the metric show it
        #expect(lag.message == "gateway gw-c enforces version 1, 5 versions behind for 5 s")
        await harness.close()
    }

    /// A lagging gateway's `lag_s` counts from when its version was superseded across a restart (and past the 512
    /// versions the Publisher remembers): the contact keeps that time. Before, every restart started it from zero
    /// (outside evaluation round 22: 869 s reported for a gateway 1,336 s behind).
    @Test func aGatewaysLagSurvivesARestart() async throws {
        let harness = try LoopHarness()
        try await harness.open()
        await harness.classifier.setDemand("acme", rpm: 30, tpm: 20_000, shares: ["gw-a": 1])
        await harness.tick()
        _ = await harness.publisher.poll(gateway: "gw-b", condition: SnapshotCondition.parse("\"1\""), wait: 0)
        await harness.tick()
        let superseded = harness.clock.now  // version 2
        for _ in 0..<3 { await harness.tick() }
        let before = try #require(
            harness.publisher.gatewayStatuses(now: harness.clock.now, policy: loopPolicy()).first { $0.id == "gw-b" })
        #expect(before.lagSeconds == harness.clock.now - superseded)
        #expect(before.state == .lagging)
        await harness.close()

        harness.clock.advance(by: 100)
        try await harness.open()
        let after = try #require(
            harness.publisher.gatewayStatuses(now: harness.clock.now, policy: loopPolicy()).first { $0.id == "gw-b" })
        #expect(after.enforcedVersion == 1)
        #expect(after.lagSeconds == harness.clock.now - superseded)
        // A poll naming another version starts over: current now.
        _ = await harness.publisher.poll(
            gateway: "gw-b", condition: SnapshotCondition.parse("\"\(harness.publisher.current?.version ?? 0)\""),
            wait: 0)
        let current = try #require(
            harness.publisher.gatewayStatuses(now: harness.clock.now, policy: loopPolicy()).first { $0.id == "gw-b" })
        #expect(current.state == .current)
        #expect(current.lagSeconds == 0)
        await harness.close()
    }

    /// A loop that checkpoints every tick, with acme's demand shared by gw-a and gw-b, one tick and its checkpoint in.
    static func acmeOnTwoGateways() async throws -> LoopHarness {
        let harness = try LoopHarness()
        try await harness.open(configuration: LoopConfiguration(checkpointEveryTicks: 1))
        await harness.classifier.setDemand("acme", rpm: 30, tpm: 20_000, shares: ["gw-a": 0.5, "gw-b": 0.5])
        await harness.tick()
        await harness.runner.awaitCheckpoint()
        return harness
    }

    /// A gateway holding a version is not answered with a later version that does not list it yet: one whose split
    /// was cut before its poll registered it (the growth half of a make-before-break pair from an earlier tick, or
    /// a tick already under way). Its long-poll waits for a version that lists it (outside evaluation round 22: a
    /// gateway back from a leave got such a version 9 times of 9, and its tenants fell to `default`, 901 → 2 rpm).
    @Test func aLongPollSkipsVersionsThatDoNotListItsGateway() async throws {
        let harness = try await Self.acmeOnTwoGateways()
        let publisher = harness.publisher
        _ = await publisher.poll(gateway: "gw-a", condition: .none, wait: 0)
        await harness.tick()
        let withoutB = try #require(publisher.current)
        #expect(!withoutB.plans("gw-b"))
        _ = await publisher.poll(gateway: "gw-b", condition: .none, wait: 0)
        await harness.tick()
        let held = try #require(publisher.current)
        #expect(held.plans("gw-b"))

        let poll = Task {
            await publisher.poll(gateway: "gw-b", condition: SnapshotCondition.parse("\"\(held.version)\""), wait: 30)
        }
        await waitForWatchers(publisher, 1)
        // A version cut without gw-b is published while it waits: not its answer.
        _ = try await publisher.publish(withoutB.content, now: harness.clock.now)
        let skipped = try #require(publisher.current?.version)
        #expect(skipped > held.version)
        // Still waiting (bounded: answered with the skipped version, it would wait for nobody).
        for _ in 0..<100_000 where publisher.watcherCount < 1 { await Task.yield() }
        _ = await publisher.poll(gateway: "gw-a", condition: .none, wait: 0)
        await harness.tick()
        guard case .modified(let answer, let body) = await poll.value else {
            Issue.record("expected a version that lists gw-b")
            return
        }
        #expect(answer.version > skipped)
        #expect(answer.plans("gw-b"))
        #expect(isClose(try Snapshot(decoding: body).tenant("acme")?.rpm.rate, 15))
        // Until the wait ends without one, it keeps what it holds (304), as a poll without `wait` is told.
        _ = try await publisher.publish(withoutB.content, now: harness.clock.now)
        let short = Task {
            await publisher.poll(gateway: "gw-b", condition: SnapshotCondition.parse("\"\(answer.version)\""), wait: 1)
        }
        await waitForWatchers(publisher, 1)
        harness.clock.advance(by: 2)
        guard case .notModified = await short.value else {
            Issue.record("expected 304 when no version listing gw-b came within the wait")
            return
        }
        await harness.close()
    }

    /// A poll that is not recorded (a late poll of an instance that left) is never listed, so it is not held back for
    /// one that lists it: it gets the next version, as before (review: held, it would have sat on 304s until its
    /// lease ran out).
    @Test func anUnrecordedPollIsNotHeldForAVersionThatListsIt() async throws {
        let harness = try await Self.acmeOnTwoGateways()
        let publisher = harness.publisher
        _ = await publisher.poll(gateway: "gw-a", condition: .none, wait: 0)
        _ = await publisher.poll(gateway: "gw-b", instance: "run-1", condition: .none, wait: 0)
        await harness.tick()
        let held = try #require(publisher.current)
        #expect(held.plans("gw-b"))
        _ = publisher.leave(gateway: "gw-b", instance: "run-1", now: harness.clock.now)
        let late = Task {
            await publisher.poll(
                gateway: "gw-b", instance: "run-1", condition: SnapshotCondition.parse("\"\(held.version)\""),
                wait: 30)
        }
        await waitForWatchers(publisher, 1)
        _ = await publisher.poll(gateway: "gw-a", condition: .none, wait: 0)
        await harness.tick()
        guard case .modified(let next, _) = await late.value else {
            Issue.record("expected the next version")
            return
        }
        #expect(!next.plans("gw-b"))
        #expect(next.version > held.version)
        await harness.close()
    }

    /// A publisher on a wall clock with a steady clock of its own beside it, as in the service.
    static func publisherWithASteadyClock() async throws -> (
        wall: ManualClock, steady: ManualClock, publisher: AllocationPublisher
    ) {
        let wall = ManualClock(now: 1_800_000_000)
        let steady = ManualClock(now: 0)
        let publisher = AllocationPublisher(
            store: SnapshotStore(pool: try await StoreDatabase.temporary()), clock: wall, waitClock: steady)
        return (wall, steady, publisher)
    }

    /// With a wait clock of its own (the monotonic clock in the service), a gateway's silence is measured on it: a step
    /// of Allot's wall clock is no silence (outside evaluation round 42, F-B: after the clock stepped back two minutes
    /// and forward again, gateways that had polled all along read as silent for the step, were left out of the next
    /// versions' split and fell to their floors; a step forward left every gateway out until it polled again).
    @Test func aStepOfTheWallClockIsNoSilenceOfAGateway() async throws {
        let (wall, steady, publisher) = try await Self.publisherWithASteadyClock()
        let policy = loopPolicy()
        _ = await publisher.poll(gateway: "gw-a", condition: .none, wait: 0)
        _ = await publisher.poll(gateway: "gw-b", condition: .none, wait: 0)
        // Allot's clock steps back two minutes; gw-a polls every 10 s for 90 s, gw-b stops; the clock steps forward.
        wall.stepBack(by: 120)
        for _ in 0..<9 {
            wall.advance(by: 10)
            steady.advance(by: 10)
            _ = await publisher.poll(gateway: "gw-a", condition: .none, wait: 0)
        }
        wall.advance(by: 120)
        let set = publisher.gatewaySet(now: wall.now, policy: policy)
        #expect(set.active == ["gw-a"])
        #expect(set.gone == ["gw-b"])
        let statuses = publisher.gatewayStatuses(now: wall.now, policy: policy)
        #expect(statuses.map(\.sinceContactSeconds) == [0, 90])
        #expect(statuses.map(\.state) == [.unknown, .silent])
        // A step forward of ten minutes: gw-a, which polled a moment ago, is no more silent than that.
        steady.advance(by: 5)
        wall.advance(by: 600)
        #expect(publisher.gatewaySet(now: wall.now, policy: policy).active == ["gw-a"])
        let alerts = await publisher.review(statuses: [], allowance: [:], policy: policy, now: wall.now)
        #expect(alerts.map(\.gateway) == ["gw-b"])
        #expect(alerts.first?.message == "gateway gw-b has not polled for 95 s")
        // Silent since 30 s after its last poll, read on Allot's clock as it is now.
        #expect(alerts.first?.since == wall.now - 95 + 30)
        // Nor is it forgotten for a step of more than `forget_after_s`.
        wall.advance(by: policy.loop.forgetAfterSeconds)
        _ = await publisher.review(statuses: [], allowance: [:], policy: policy, now: wall.now)
        #expect(publisher.gatewayStatuses(now: wall.now, policy: policy).map(\.id) == ["gw-a", "gw-b"])
        // It is once `forget_after_s` has passed on the steady clock (gw-a polled meanwhile).
        steady.advance(by: policy.loop.forgetAfterSeconds - 96)
        wall.advance(by: policy.loop.forgetAfterSeconds - 96)
        _ = await publisher.poll(gateway: "gw-a", condition: .none, wait: 0)
        _ = await publisher.review(statuses: [], allowance: [:], policy: policy, now: wall.now)
        #expect(publisher.gatewayStatuses(now: wall.now, policy: policy).map(\.id) == ["gw-a", "gw-b"])
        steady.advance(by: 2)
        wall.advance(by: 2)
        _ = await publisher.review(statuses: [], allowance: [:], policy: policy, now: wall.now)
        #expect(publisher.gatewayStatuses(now: wall.now, policy: policy).map(\.id) == ["gw-a"])
    }

    /// A gateway's clock offset is read less any step of Allot's own wall clock since it was measured (outside
    /// evaluation round 42, F-C): a poll held across the correction of a step back of Allot's clock said the gateway
    /// was 120 s ahead, and `gateway_clock` was raised after Allot's clock was right again. A step of Allot's clock
    /// after a measure that agreed makes the gateway's clock as far from Allot's as the step.
    @Test func aGatewayClockOffsetFollowsAStepOfAllotsOwnClock() async throws {
        let (wall, steady, publisher) = try await Self.publisherWithASteadyClock()
        let policy = loopPolicy()
        let gatewayTime = wall.now
        // Allot's clock stepped back 120 s; the gateway's poll says its own (right) time.
        wall.stepBack(by: 120)
        _ = await publisher.poll(gateway: "gw-a", condition: .none, wait: 0, gatewayClock: gatewayTime)
        #expect(publisher.gatewayStatuses(now: wall.now, policy: policy).first?.clockOffsetSeconds == 120)
        // Allot's clock is put right 5 s later, before the gateway polls again.
        steady.advance(by: 5)
        wall.advance(by: 125)
        #expect(publisher.gatewayStatuses(now: wall.now, policy: policy).first?.clockOffsetSeconds == 0)
        var alerts = await publisher.review(statuses: [], allowance: [:], policy: policy, now: wall.now)
        #expect(alerts.filter { $0.kind == "gateway_clock" }.isEmpty)
        // A poll that agrees. Read at a tick's start 5 s ago (the tick's persist took that long), the offset is still 0
        // (review M1: the steady clock read after the persist made it 5).
        _ = await publisher.poll(gateway: "gw-a", condition: .none, wait: 0, gatewayClock: wall.now)
        steady.advance(by: 5)
        wall.advance(by: 5)
        #expect(publisher.gatewayStatuses(now: wall.now - 5, policy: policy).first?.clockOffsetSeconds == 0)
        // Then a step back of Allot's clock: the gateway's clock is 300 s ahead of Allot's now.
        wall.stepBack(by: 300)
        #expect(publisher.gatewayStatuses(now: wall.now, policy: policy).first?.clockOffsetSeconds == 300)
        alerts = await publisher.review(statuses: [], allowance: [:], policy: policy, now: wall.now)
        #expect(alerts.filter { $0.kind == "gateway_clock" }.map(\.gateway) == ["gw-a"])
    }

    /// A gateway back from a silence long enough to be left out of the split holds the version it last enforced:
    /// it is told nothing is newer for it (and its long-poll waits for the next version, which splits with it)
    /// rather than handed a slice with none of its tenants, which would hold them all to `default` for a tick
    /// (outside evaluation round 20: a 36-s blip, inside the 300-s lease). A gateway holding nothing still gets
    /// the version at once.
    @Test func aGatewayBackFromSilenceKeepsItsSnapshotUntilASliceIncludesIt() async throws {
        let harness = try await Self.acmeOnTwoGateways()
        let publisher = harness.publisher
        _ = await publisher.poll(gateway: "gw-a", condition: .none, wait: 0)
        _ = await publisher.poll(gateway: "gw-b", condition: .none, wait: 0)
        await harness.tick()
        let held = try #require(publisher.current?.version)
        #expect(isClose(try servedSnapshot(publisher, gateway: "gw-b").tenant("acme")?.rpm.rate, 15))
        // gw-b is silent for 40 s: the split leaves it out.
        for _ in 0..<8 {
            _ = await publisher.poll(gateway: "gw-a", condition: .none, wait: 0)
            await harness.tick()
        }
        #expect(publisher.gatewaySet(now: harness.clock.now, policy: loopPolicy()).gone == ["gw-b"])
        let current = try #require(publisher.current)
        #expect(!current.plans("gw-b"))
        #expect(try servedSnapshot(publisher, gateway: "gw-b").tenants.isEmpty)

        // Back, holding its version: not modified, not an empty slice.
        let back = await publisher.poll(gateway: "gw-b", condition: SnapshotCondition.parse("\"\(held)\""), wait: 0)
        guard case .notModified(let same) = back else {
            Issue.record("expected 304 for a gateway the current version has no slice for, got \(back)")
            return
        }
        #expect(same.version == current.version)
        // Its long-poll is answered by the next version, which has its slice again.
        let poll = Task {
            await publisher.poll(gateway: "gw-b", condition: SnapshotCondition.parse("\"\(held)\""), wait: 30)
        }
        await waitForWatchers(publisher, 1)
        _ = await publisher.poll(gateway: "gw-a", condition: .none, wait: 0)
        await harness.tick()
        guard case .modified(let next, let body) = await poll.value else {
            Issue.record("expected the next version")
            return
        }
        #expect(next.version == current.version + 1)
        #expect(try Snapshot(decoding: body).tenant("acme") != nil)
        // A gateway holding nothing (no If-None-Match) gets the version at once, `default` and all.
        guard case .modified(_, let fresh) = await publisher.poll(gateway: "gw-new", condition: .none, wait: 30) else {
            Issue.record("expected a snapshot for a new gateway")
            return
        }
        #expect(try Snapshot(decoding: fresh).tenants.isEmpty)
        // Before the drain, one holding a version and left out of the split is told to keep it; a drain's
        // version, whose lease has run out, is for every gateway to take.
        let ghost = SnapshotCondition.parse("\"\(held)\"")
        guard case .notModified = await publisher.poll(gateway: "gw-ghost", condition: ghost, wait: 0) else {
            Issue.record("expected 304 before the drain")
            return
        }
        _ = try await publisher.drain(now: harness.clock.now)
        guard case .modified(let drained, _) = await publisher.poll(gateway: "gw-ghost", condition: ghost, wait: 0)
        else {
            Issue.record("expected the drained version")
            return
        }
        #expect(drained.expiresAt <= harness.clock.now)
        // Also once Allot's clock has stepped back (second review of round 42, L-6: the drain read as live on the wall
        // clock, and a gateway holding a version was told to keep it).
        harness.clock.stepBack(by: 120)
        guard case .modified(let still, _) = await publisher.poll(gateway: "gw-ghost", condition: ghost, wait: 0)
        else {
            Issue.record("expected the drained version after a step back")
            return
        }
        #expect(still.version == drained.version)
        await harness.close()
    }

    /// A gateway that leaves (`DELETE /v1/gateways/{id}`) is forgotten at once: no `gateway_lag` alert, not listed,
    /// its tenants' slices go to the others at the next tick, its saved contact is marked left at the next
    /// checkpoint (a restart, whose restored demand shares still name it, keeps it gone), and a poll from it later
    /// registers it again.
    @Test func aGatewayThatLeavesIsForgottenAndItsSlicesGoToTheOthers() async throws {
        let harness = try await Self.acmeOnTwoGateways()
        var publisher = harness.publisher
        _ = await publisher.poll(gateway: "gw-a", condition: .none, wait: 0)
        _ = await publisher.poll(gateway: "gw-b", condition: .none, wait: 0)
        await harness.tick()
        await harness.runner.awaitCheckpoint()
        var store = LoopStateStore(pool: harness.pool.value!)
        #expect(try await store.contacts().map(\.id) == ["gw-a", "gw-b"])
        #expect(isClose(try servedSnapshot(publisher, gateway: "gw-a").tenant("acme")?.rpm.rate, 15))

        let left = try #require(publisher.leave(gateway: "gw-b", now: harness.clock.now).contact)
        #expect(left.polls == 1)
        #expect(publisher.leave(gateway: "gw-b", now: harness.clock.now) == .unknown)
        #expect(publisher.leave(gateway: "gw-never", now: harness.clock.now) == .unknown)
        #expect(publisher.gatewaySet(now: harness.clock.now, policy: loopPolicy()).gone == ["gw-b"])
        // The next tick gives gw-a the whole allocation.
        _ = await publisher.poll(gateway: "gw-a", condition: .none, wait: 0)
        await harness.tick()
        #expect(try servedSnapshot(publisher).tenant("acme")?.rpm.rate == 30)
        #expect(isClose(try servedSnapshot(publisher, gateway: "gw-a").tenant("acme")?.rpm.rate, 30))
        // gw-a keeps polling; gw-b says nothing for a minute: no alert, not listed.
        for _ in 0..<12 {
            _ = await publisher.poll(gateway: "gw-a", condition: .none, wait: 0)
            await harness.tick()
            await harness.runner.awaitCheckpoint()
        }
        #expect(publisher.gatewayStatuses(now: harness.clock.now, policy: loopPolicy()).map(\.id) == ["gw-a"])
        #expect(!harness.runner.view.alerts.contains { $0.kind == "gateway_lag" })
        #expect(try await store.contacts().map { "\($0.id) \($0.leftMs != nil)" } == ["gw-a false", "gw-b true"])

        // A restart: gw-b is still gone (the restored shares still name it), and not listed.
        await harness.close()
        try await harness.open(configuration: LoopConfiguration(checkpointEveryTicks: 1))
        await harness.classifier.setDemand("acme", rpm: 30, tpm: 20_000, shares: ["gw-a": 0.5, "gw-b": 0.5])
        publisher = harness.publisher
        store = LoopStateStore(pool: harness.pool.value!)
        #expect(publisher.gatewaySet(now: harness.clock.now, policy: loopPolicy()).gone == ["gw-b"])
        #expect(publisher.gatewayStatuses(now: harness.clock.now, policy: loopPolicy()).map(\.id) == ["gw-a"])
        _ = await publisher.poll(gateway: "gw-a", condition: .none, wait: 0)
        await harness.tick()
        await harness.runner.awaitCheckpoint()  // (a checkpoint still running skips the next)
        #expect(isClose(try servedSnapshot(publisher, gateway: "gw-a").tenant("acme")?.rpm.rate, 30))

        // Back: registered again, and saved as not left.
        _ = await publisher.poll(gateway: "gw-b", condition: .none, wait: 0)
        #expect(publisher.gatewayStatuses(now: harness.clock.now, policy: loopPolicy()).map(\.id) == ["gw-a", "gw-b"])
        #expect(publisher.gatewaySet(now: harness.clock.now, policy: loopPolicy()).gone.isEmpty)
        await harness.tick()
        await harness.runner.awaitCheckpoint()
        #expect(try await store.contacts().map { "\($0.id) \($0.leftMs != nil)" } == ["gw-a false", "gw-b false"])
        await harness.close()
    }

    /// A gateway that polls for the first time and leaves before the next checkpoint has no saved row to mark: the
    /// checkpoint saves one, marked left, so that a restart still knows it gone.
    @Test func aGatewayThatLeavesBeforeItWasFirstSavedIsSavedAsLeft() async throws {
        let harness = try await Self.acmeOnTwoGateways()
        let publisher = harness.publisher
        let store = LoopStateStore(pool: harness.pool.value!)
        _ = await publisher.poll(gateway: "gw-a", condition: .none, wait: 0)
        await harness.tick()
        await harness.runner.awaitCheckpoint()
        _ = await publisher.poll(gateway: "gw-b", condition: .none, wait: 0)
        #expect(publisher.leave(gateway: "gw-b", now: harness.clock.now).contact != nil)
        await harness.tick()
        await harness.runner.awaitCheckpoint()
        #expect(try await store.contacts().map { "\($0.id) \($0.leftMs != nil)" } == ["gw-a false", "gw-b true"])

        await harness.close()
        try await harness.open(configuration: LoopConfiguration(checkpointEveryTicks: 1))
        #expect(harness.publisher.gatewaySet(now: harness.clock.now, policy: loopPolicy()).gone == ["gw-b"])
        #expect(harness.publisher.gatewayStatuses(now: harness.clock.now, policy: loopPolicy()).map(\.id) == ["gw-a"])
        await harness.close()
    }
}

extension GatewayLeave {
    /// The contact of a gateway that left; nil when it did not.
    var contact: GatewayContact? {
        if case .left(let contact) = self { return contact }
        return nil
    }
}
