import AllotCore
import AllotLoop
import AllotProtocol
import AllotStore
import AllotTime
import Foundation
import Testing

/// Make-before-break (SPEC 7) through the loop: tenant `a` is served by gateway `gw-a` only,
/// tenant `b` by `gw-b` only, on a pool of 100 RPM.
@Suite struct TransitionTests {
    /// Opens the loop with `a` at 60 and `b` at 40 (the whole pool), both gateways enforcing v1.
    private func startFullPool() async throws -> LoopHarness {
        let harness = try LoopHarness()
        try await harness.open()
        await harness.classifier.setDemand("a", rpm: 60, tpm: 10_000, shares: ["gw-a": 1])
        await harness.classifier.setDemand("b", rpm: 40, tpm: 10_000, shares: ["gw-b": 1])
        await harness.tick()
        try await confirm(harness, "gw-a", version: 1)
        try await confirm(harness, "gw-b", version: 1)
        return harness
    }

    /// `gateway` polls saying it enforces `version`.
    private func confirm(_ harness: LoopHarness, _ gateway: String, version: Int64) async throws {
        _ = await harness.publisher.poll(gateway: gateway, condition: SnapshotCondition(versions: [version]), wait: 0)
    }

    /// Demand moves 20 RPM from `a` to `b`: the tick publishes the shrink (version 2), and the growth waits for
    /// `gw-a` to confirm it.
    private func moveTwentyFromAToB(_ harness: LoopHarness) async {
        await harness.classifier.setDemand("a", rpm: 40, tpm: 10_000, shares: ["gw-a": 1])
        await harness.classifier.setDemand("b", rpm: 60, tpm: 10_000, shares: ["gw-b": 1])
        #expect(await harness.tick().published == [2])
        #expect(harness.publisher.waitingGateways == ["gw-a"])
    }

    /// What a gateway enforces of `tenant` in `version` (its slice).
    private func enforced(_ harness: LoopHarness, version: Int64, gateway: String, tenant: String) async throws
        -> Double
    {
        let record = try #require(try await SnapshotStore(pool: harness.pool.value!).snapshot(version: version))
        let snapshot = try SnapshotContent(stored: record).snapshot
        #expect(snapshot.version == version)
        // Rebuild the gateway's slice the way the publisher serves it.
        if harness.publisher.current?.version == version {
            return try servedSnapshot(harness.publisher, gateway: gateway).tenant(tenant)?.rpm.rate ?? 0
        }
        return snapshot.tenant(tenant)?.rpm.rate ?? 0
    }

    @Test func shrinkIsPublishedFirstAndGrowthOnceTheShrinkIsConfirmed() async throws {
        let harness = try await startFullPool()
        let publisher = harness.publisher
        // gw-b long-polls on version 1.
        let gwB = Task { await publisher.poll(gateway: "gw-b", condition: SnapshotCondition(versions: [1]), wait: 60) }
        await waitForWatchers(publisher, 1)

        // Demand moves 20 RPM from a to b.
        await harness.classifier.setDemand("a", rpm: 40, tpm: 10_000, shares: ["gw-a": 1])
        await harness.classifier.setDemand("b", rpm: 60, tpm: 10_000, shares: ["gw-b": 1])
        let report = await harness.tick()
        #expect(report.published == [2])
        #expect(report.heldGrowth)
        #expect(publisher.current?.kind == .shrink)
        let shrunk = try servedSnapshot(publisher)
        #expect(shrunk.tenant("a")?.rpm.rate == 40)
        #expect(shrunk.tenant("b")?.rpm.rate == 40)
        #expect(publisher.waitingGateways == ["gw-a"])
        #expect(await publisher.isHoldingGrowth)
        // gw-b is woken by the shrink (it does not hold version 2) and gets b unchanged.
        guard case .modified(let seenByB, let bodyB) = await gwB.value else {
            Issue.record("gw-b should receive version 2")
            return
        }
        #expect(seenByB.version == 2)
        #expect(isClose(try Snapshot(decoding: bodyB).tenant("b")?.rpm.rate, 40))

        // While gw-a still enforces v1 (a at 60), nothing lets b grow: 60 + 40 ≤ 100.
        let aOld = try await enforced(harness, version: 1, gateway: "gw-a", tenant: "a")
        #expect(aOld + (try servedSnapshot(publisher, gateway: "gw-b").tenant("b")?.rpm.rate ?? 0) <= 100)

        // gw-b now long-polls on version 2; gw-a confirms version 2: the growth follows at once.
        let gwB2 = Task { await publisher.poll(gateway: "gw-b", condition: SnapshotCondition(versions: [2]), wait: 60) }
        await waitForWatchers(publisher, 1)
        try await confirm(harness, "gw-a", version: 2)
        guard case .modified(let grown, let bodyGrown) = await gwB2.value else {
            Issue.record("gw-b should receive the growth")
            return
        }
        #expect(grown.version == 3)
        #expect(grown.kind == .growth)
        #expect(isClose(try Snapshot(decoding: bodyGrown).tenant("b")?.rpm.rate, 60))
        #expect(try servedSnapshot(publisher).tenant("a")?.rpm.rate == 40)
        #expect(await publisher.isHoldingGrowth == false)
        // Every mix of versions the gateways can now hold fits: a ≤ 40 (v2 or v3), b ≤ 60.
        #expect(40 + 60 <= 100)
        let stored = try await SnapshotStore(pool: harness.pool.value!).versions()
        #expect(stored == [1, 2, 3])
        await harness.close()
    }

    /// What the simulator relies on to be deterministic: the confirming poll is answered with the
    /// version current when it arrived (the shrink), never with the growth its own confirmation
    /// set off in the background; a release asked for next returns once the growth is visible,
    /// whether or not that background release got there first.
    @Test func theConfirmingPollGetsTheShrinkAndAReleaseReturnsOnceTheGrowthIsVisible() async throws {
        let harness = try await startFullPool()
        let publisher = harness.publisher
        await moveTwentyFromAToB(harness)
        let answer = await publisher.poll(gateway: "gw-a", condition: SnapshotCondition(versions: [2]), wait: 0)
        guard case .notModified(let held) = answer else {
            Issue.record("the confirming poll should be answered with the shrink it holds")
            return
        }
        #expect(held.version == 2)
        try await publisher.releaseHeldGrowth(now: harness.clock.now)
        #expect(publisher.current?.version == 3)
        #expect(publisher.current?.kind == .growth)
        #expect(await publisher.isHoldingGrowth == false)
        guard
            case .modified(let grown, _) = await publisher.poll(
                gateway: "gw-a", condition: SnapshotCondition(versions: [2]), wait: 0)
        else {
            Issue.record("the next poll should get the growth")
            return
        }
        #expect(grown.version == 3)
        await harness.close()
    }

    /// A gateway the shrink waits for that leaves (scaled down) will never confirm: the growth follows at once,
    /// not after the refresh deadline.
    @Test func growthIsPublishedAtOnceWhenTheGatewayItWaitsForLeaves() async throws {
        let harness = try await startFullPool()
        let publisher = harness.publisher
        await moveTwentyFromAToB(harness)
        // gw-b long-polls on the shrink; gw-a leaves instead of confirming: the growth reaches gw-b at once.
        let gwB = Task { await publisher.poll(gateway: "gw-b", condition: SnapshotCondition(versions: [2]), wait: 60) }
        await waitForWatchers(publisher, 1)
        #expect(publisher.leave(gateway: "gw-a", now: harness.clock.now).contact != nil)
        #expect(publisher.waitingGateways.isEmpty)
        var turns = 0
        while publisher.current?.version != 3, turns < 10_000 {  // the release runs in a task of its own
            await Task.yield()
            turns += 1
        }
        #expect(publisher.current?.version == 3)
        harness.clock.advance(by: 60)  // ends gw-b's poll if the growth never came (a failure, not a hang)
        guard case .modified(let grown, let body) = await gwB.value else {
            Issue.record("gw-b should receive the growth")
            return
        }
        #expect(grown.version == 3)
        #expect(grown.kind == .growth)
        #expect(isClose(try Snapshot(decoding: body).tenant("b")?.rpm.rate, 60))
        await harness.close()
    }

    @Test func growthIsPublishedAfterOneRefreshWhenTheShrinkIsNotConfirmed() async throws {
        let harness = try await startFullPool()
        let publisher = harness.publisher
        await harness.classifier.setDemand("a", rpm: 40, tpm: 10_000, shares: ["gw-a": 1])
        await harness.classifier.setDemand("b", rpm: 60, tpm: 10_000, shares: ["gw-b": 1])
        await harness.tick()
        #expect(publisher.current?.version == 2)
        let watcher = Task {
            await publisher.poll(gateway: "gw-b", condition: SnapshotCondition(versions: [2]), wait: 60)
        }
        await waitForWatchers(publisher, 1)
        await harness.clock.waitForSleepers(2)  // the make-before-break deadline and the poll's
        harness.clock.advance(by: 4.9)
        #expect(publisher.current?.version == 2)
        harness.clock.advance(by: 0.1)  // refresh_ms = 5,000 after the shrink
        guard case .modified(let grown, _) = await watcher.value else {
            Issue.record("the growth should follow after one refresh")
            return
        }
        #expect(grown.version == 3)
        #expect(grown.generatedAt == harness.clock.now)
        #expect(try servedSnapshot(publisher).tenant("b")?.rpm.rate == 60)
        await harness.close()
    }

    @Test func capacityDropsArePublishedAtOnce() async throws {
        let harness = try await startFullPool()
        await harness.observer.set(pool4o, capacity: PerDimension(rpm: 50, tpm: 100_000))
        let report = await harness.tick()
        #expect(report.published == [2])
        #expect(!report.heldGrowth)
        let snapshot = try servedSnapshot(harness.publisher)
        #expect(harness.publisher.current?.kind == .tick)
        #expect(snapshot.upstreams.first?.capacity.rpm == 50)
        #expect(snapshot.tenant("a")?.rpm.rate == 25)
        #expect(snapshot.tenant("b")?.rpm.rate == 25)
        await harness.close()
    }

    @Test func aDropThatAlsoMovesCapacityCutsAtOnceAndHoldsTheGrowth() async throws {
        let harness = try await startFullPool()
        await harness.observer.set(pool4o, capacity: PerDimension(rpm: 80, tpm: 100_000))
        await harness.classifier.setDemand("a", rpm: 30, tpm: 10_000, shares: ["gw-a": 1])
        await harness.classifier.setDemand("b", rpm: 50, tpm: 10_000, shares: ["gw-b": 1])
        let report = await harness.tick()
        #expect(report.heldGrowth)
        let shrunk = try servedSnapshot(harness.publisher)
        #expect(shrunk.tenant("a")?.rpm.rate == 30)
        #expect(shrunk.tenant("b")?.rpm.rate == 40)
        #expect(shrunk.upstreams.first?.capacity.rpm == 80)
        await harness.close()
    }

    @Test func growthIntoFreeCapacityIsPublishedAtOnce() async throws {
        let harness = try LoopHarness()
        try await harness.open()
        await harness.classifier.setDemand("a", rpm: 30, tpm: 10_000, shares: ["gw-a": 1])
        await harness.classifier.setDemand("b", rpm: 20, tpm: 10_000, shares: ["gw-b": 1])
        await harness.tick()
        await harness.classifier.setDemand("a", rpm: 25, tpm: 10_000, shares: ["gw-a": 1])
        await harness.classifier.setDemand("b", rpm: 45, tpm: 10_000, shares: ["gw-b": 1])
        let report = await harness.tick()
        #expect(report.published == [2])
        #expect(!report.heldGrowth)
        #expect(try servedSnapshot(harness.publisher).tenant("b")?.rpm.rate == 45)
        await harness.close()
    }
}
