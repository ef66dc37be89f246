import AllotCore
import AllotLoop
import AllotProtocol
import AllotSQLite
import AllotStore
import AllotTime
import Foundation
import Testing

/// Persists for real, then pauses (when armed) before returning: the moment between "on disk" and
/// "visible".
final class PausingPersistence: SnapshotPersistence {
    let inner: SnapshotStore
    let armed = Box(false)
    let parked = Box<CheckedContinuation<Void, Never>?>(nil)
    let reached: AsyncStream<Int64>
    private let signal: AsyncStream<Int64>.Continuation

    init(_ inner: SnapshotStore) {
        self.inner = inner
        (reached, signal) = AsyncStream.makeStream()
    }

    func save(_ record: SnapshotRecord, keep: Int) async throws {
        try await inner.save(record, keep: keep)
        guard armed.value else { return }
        await withCheckedContinuation { continuation in
            parked.value = continuation
            signal.yield(record.version)
        }
    }

    func resume() { parked.value?.resume() }
    func latest() async throws -> SnapshotRecord? { try await inner.latest() }
    func newestVersion() async throws -> Int64 { try await inner.newestVersion() }
}

/// Persists for real, then fails (when armed): a crash between persist and publish.
final class CrashingPersistence: SnapshotPersistence {
    struct SimulatedCrash: Error {}
    let inner: SnapshotStore
    let armed = Box(false)

    init(_ inner: SnapshotStore) { self.inner = inner }

    func save(_ record: SnapshotRecord, keep: Int) async throws {
        try await inner.save(record, keep: keep)
        if armed.value { throw SimulatedCrash() }
    }

    func latest() async throws -> SnapshotRecord? { try await inner.latest() }
    func newestVersion() async throws -> Int64 { try await inner.newestVersion() }
}

@Suite struct PersistenceTests {
    @Test func aVersionIsOnDiskBeforeAnyoneCanSeeIt() async throws {
        let harness = try LoopHarness()
        let persistence = Box<PausingPersistence?>(nil)
        try await harness.open(snapshots: { pool in
            let pausing = PausingPersistence(SnapshotStore(pool: pool))
            persistence.value = pausing
            return pausing
        })
        let pausing = try #require(persistence.value)
        await harness.classifier.setDemand("acme", rpm: 30, tpm: 20_000)
        await harness.tick()
        pausing.armed.value = true
        let runner = harness.runner
        harness.clock.advance(by: 5)
        let now = harness.clock.now
        let tick = Task { await runner.tick(now: now) }
        var iterator = pausing.reached.makeAsyncIterator()
        let persisted = await iterator.next()
        #expect(persisted == 2)
        // On disk, not yet visible.
        #expect(try await SnapshotStore(pool: harness.pool.value!).newestVersion() == 2)
        #expect(harness.publisher.current?.version == 1)
        guard
            case .notModified = await harness.publisher.poll(
                gateway: "gw", condition: SnapshotCondition(versions: [1]), wait: 0)
        else {
            Issue.record("version 2 must not be visible before it is persisted and published")
            return
        }
        pausing.armed.value = false
        pausing.resume()
        #expect(await tick.value.published == [2])
        #expect(harness.publisher.current?.version == 2)
        await harness.close()
    }

    @Test func aCrashBetweenPersistAndPublishNeverRegressesTheVersion() async throws {
        let harness = try LoopHarness()
        let crashing = Box<CrashingPersistence?>(nil)
        try await harness.open(snapshots: { pool in
            let persistence = CrashingPersistence(SnapshotStore(pool: pool))
            crashing.value = persistence
            return persistence
        })
        await harness.classifier.setDemand("acme", rpm: 30, tpm: 20_000)
        await harness.tick()
        crashing.value!.armed.value = true
        let failed = await harness.tick()
        #expect(failed.failure?.phase == .publish)
        #expect(failed.published.isEmpty)
        // Version 2 reached the disk but was never served; the tick failure is alerted.
        #expect(harness.publisher.current?.version == 1)
        #expect(try await SnapshotStore(pool: harness.pool.value!).newestVersion() == 2)
        #expect(harness.runner.view.alerts.contains { $0.kind == "tick_failed" && $0.severity == .critical })
        // The same process never reuses version 2.
        crashing.value!.armed.value = false
        #expect(await harness.tick().published == [3])
        #expect(!harness.runner.view.alerts.contains { $0.kind == "tick_failed" })

        // Another unseen version, then the process dies.
        crashing.value!.armed.value = true
        #expect(await harness.tick().published.isEmpty)
        await harness.crash()
        try await harness.open()
        // The restarted service serves the newest persisted version, then goes above it.
        #expect(harness.publisher.current?.version == 4)
        #expect(await harness.tick().published == [5])
        await harness.close()
    }

    @Test func storeRefusesVersionsThatDoNotIncreaseAndKeepsTheNewest() async throws {
        let pool = try await StoreDatabase.temporary()
        let store = SnapshotStore(pool: pool)
        func record(_ version: Int64) -> SnapshotRecord {
            SnapshotRecord(
                version: version, generatedMs: version * 1000, expiresMs: version * 1000 + 300_000, kind: .tick,
                policyVersion: "p", body: Array("{\"version\":\(version)}".utf8), slices: [1, 2, 3])
        }
        for version: Int64 in 1...5 { try await store.save(record(version), keep: 3) }
        #expect(try await store.versions() == [3, 4, 5])
        await #expect(throws: SnapshotVersionError(version: 5, newest: 5)) { try await store.save(record(5), keep: 3) }
        await #expect(throws: SnapshotVersionError(version: 2, newest: 5)) { try await store.save(record(2), keep: 3) }
        #expect(try await store.latest() == record(5))
        var pending = record(6)
        pending.kind = .shrink
        pending.pending = (Array("{}".utf8), [9])
        try await store.save(pending, keep: 1)
        #expect(try await store.versions() == [6])
        #expect(try await store.latest() == pending)
        await pool.close()
    }

    @Test func drainPublishesAnExpiredLeaseAndHoldsTicksUntilResumed() async throws {
        let harness = try LoopHarness()
        try await harness.open()
        await harness.classifier.setDemand("acme", rpm: 30, tpm: 20_000, shares: ["gw-1": 1])
        await harness.tick()
        harness.clock.advance(by: 1)
        let drained = try await harness.publisher.drain(now: harness.clock.now)
        #expect(drained.version == 2)
        #expect(drained.kind == .drain)
        let snapshot = try servedSnapshot(harness.publisher)
        #expect(snapshot.generatedAt == harness.clock.now)
        #expect(snapshot.expiresAt == snapshot.generatedAt)  // every gateway moves to fallback
        #expect(snapshot.tenant("acme")?.rpm.rate == 30)
        #expect(try servedSnapshot(harness.publisher, gateway: "gw-1").expiresAt == snapshot.generatedAt)
        #expect(await harness.publisher.drainedSince == harness.clock.now)
        // Ticks keep estimating but publish nothing while drained.
        #expect(await harness.tick().published.isEmpty)
        #expect(harness.publisher.current?.version == 2)
        // The end is persisted as a version of its own, still without a lease; the next tick publishes one.
        let ended = try #require(try await harness.publisher.resume(now: harness.clock.now))
        #expect(ended.snapshot.version == 3)
        #expect(ended.since == drained.generatedAt)
        #expect(try servedSnapshot(harness.publisher).expiresAt == harness.clock.now)
        #expect(try await harness.publisher.resume(now: harness.clock.now) == nil)
        let resumed = await harness.tick()
        #expect(resumed.published == [4])
        #expect(try servedSnapshot(harness.publisher).expiresAt == harness.clock.now + 300)
        await harness.close()
    }

    @Test func drainWithoutASnapshotIsRefused() async throws {
        let harness = try LoopHarness()
        try await harness.open()
        await #expect(
            throws: PublisherError(
                code: "no_snapshot", message: "nothing has been published yet: there is nothing to drain")
        ) {
            try await harness.publisher.drain(now: harness.clock.now)
        }
        await harness.close()
    }

    @Test func aFailedTickKeepsServingTheLastSnapshot() async throws {
        let harness = try LoopHarness()
        try await harness.open()
        await harness.tick()
        // The database goes away underneath the loop.
        await harness.pool.value?.close()
        let report = await harness.tick()
        #expect(report.failure?.phase == .read)
        #expect(harness.publisher.current?.version == 1)
        guard
            case .notModified = await harness.publisher.poll(
                gateway: "gw", condition: SnapshotCondition(versions: [1]), wait: 0)
        else {
            Issue.record("the last snapshot must keep being served")
            return
        }
        let alert = try #require(harness.runner.view.alerts.first { $0.kind == "tick_failed" })
        #expect(alert.message.contains("failed in read"))
        #expect(alert.message.contains("version 1"))
        #expect(harness.runner.view.lastReport?.failure?.phase == .read)
        await harness.runner.shutdown()
    }

    @Test func restartResumesEstimatorStateAndTheTelemetryCursor() async throws {
        let harness = try LoopHarness()
        try await harness.open(configuration: LoopConfiguration(checkpointEveryTicks: 2))
        await harness.classifier.setDemand("acme", rpm: 30, tpm: 20_000)
        try await ingest(harness, count: 3)
        await harness.tick()
        // A cold loop checkpoints after its first tick, in the background; one still being written when the next
        // is due makes that one skip (the test raced it on a busy machine).
        await harness.runner.awaitCheckpoint()
        try await ingest(harness, count: 2)
        await harness.tick()  // checkpoint: 5 events counted
        await harness.runner.awaitCheckpoint()
        #expect(try await LoopStateStore(pool: harness.pool.value!).checkpoint()?.tick == 2)
        try await ingest(harness, count: 4)
        await harness.tick()  // 9 counted, not checkpointed
        #expect(await harness.classifier.state().eventsSeen == 9)
        await harness.crash()

        try await harness.open(configuration: LoopConfiguration(checkpointEveryTicks: 2))
        // Resumed from the checkpoint of tick 2: its state, its cursor, its tick count.
        #expect(await harness.classifier.state().eventsSeen == 5)
        #expect(await harness.classifier.state().demands.map(\.tenant) == ["acme"])
        let report = await harness.tick()
        #expect(report.tick == 3)
        #expect(report.events == 4)  // the rows after the checkpoint, read again: none lost, none twice
        #expect(await harness.classifier.state().eventsSeen == 9)
        // The engine resumed too: its dampers remember what was published.
        let decision = try #require(harness.runner.view.decision)
        #expect(decision.allocation(tenant: "acme", upstream: pool4o)?.rpm?.explanation.previous == 30)
        // The classifier is handed the restored snapshot's allocation on the first tick.
        #expect(await harness.classifier.lastAllocations[AllocationKey(tenant: "acme", upstream: pool4o)]?.rpm == 30)
        await harness.close()

        // A clean shutdown saves a final checkpoint.
        try await harness.open()
        #expect(await harness.classifier.state().eventsSeen == 9)
        #expect(await harness.runner.telemetryCursor == 9)
        // Started, a restarted loop serves the persisted snapshot and waits an interval before it ticks: its
        // gateways have to poll again first, or a downtime beyond `gateway_lag_s` leaves them out of the split.
        let served = try #require(harness.publisher.current?.version)
        await harness.runner.start()
        await harness.clock.waitForSleepers(1)
        #expect(harness.publisher.current?.version == served)
        // Until then the views show the restored state, computed on throwaway copies: the loop's own classifier
        // (the factory's last instance) has folded nothing since the restart.
        #expect(harness.runner.view.lastTickAt == nil)
        #expect(harness.runner.view.decision?.allocation(tenant: "acme", upstream: pool4o)?.rpm?.rate == 30)
        #expect(await harness.classifier.lastAllocations.isEmpty)
        harness.clock.advance(by: 5)
        await harness.clock.waitForSleepers(1)
        #expect(harness.runner.view.lastTickAt != nil)
        #expect(harness.runner.view.decision?.allocation(tenant: "acme", upstream: pool4o) != nil)
        #expect(harness.publisher.current.map { $0.version > served } == true)
        await harness.close()
    }

    /// A loop opened without a checkpoint writes one after its first tick, not after `checkpointEveryTicks`: killed
    /// before that, every restart started blind at the newest event (round 13: a service killed within its first
    /// 30 s again and again never counted any of the 690k events it had acknowledged).
    @Test func aColdLoopCheckpointsAfterItsFirstTick() async throws {
        let harness = try LoopHarness()
        try await harness.open(configuration: LoopConfiguration(checkpointEveryTicks: 6))
        await harness.classifier.setDemand("acme", rpm: 30, tpm: 20_000)
        try await ingest(harness, count: 3)
        await harness.tick()
        await harness.runner.awaitCheckpoint()
        #expect(try await LoopStateStore(pool: harness.pool.value!).checkpoint()?.tick == 1)
        try await ingest(harness, count: 2)
        await harness.tick()  // not checkpointed: the next is at tick 6
        await harness.runner.awaitCheckpoint()
        #expect(try await LoopStateStore(pool: harness.pool.value!).checkpoint()?.tick == 1)
        await harness.crash()

        try await harness.open(configuration: LoopConfiguration(checkpointEveryTicks: 6))
        #expect(await harness.classifier.state().eventsSeen == 3)
        #expect(await harness.runner.telemetryCursor == 3)
        let report = await harness.tick()
        #expect(report.tick == 2)
        #expect(report.events == 2)  // the rows after the first tick's checkpoint, read again
        // A resumed loop checkpoints after its first tick too (round 40: under a crash loop shorter than six ticks
        // the cursor stayed at the first checkpoint's, and every restart folded all the events since again).
        await harness.runner.awaitCheckpoint()
        #expect(try await LoopStateStore(pool: harness.pool.value!).checkpoint()?.tick == 2)
        await harness.crash()
        try await harness.open(configuration: LoopConfiguration(checkpointEveryTicks: 6))
        #expect(await harness.runner.telemetryCursor == 5)
        await harness.close()
    }

    @Test func unreadableStateStartsThatComponentBlindWithAnAlert() async throws {
        let harness = try LoopHarness()
        try await harness.open()
        await harness.classifier.setDemand("acme", rpm: 30, tpm: 20_000)
        await harness.tick()
        await harness.close()
        // Damage the saved classifier state.
        try await harness.reopenDatabase { pool in
            try await pool.write { try $0.run("UPDATE loop_checkpoint SET classifier = ?", [UInt8]("not json".utf8)) }
        }
        try await harness.open()
        #expect(await harness.classifier.state() == ScriptedClassifier.State())
        let alert = try #require(harness.runner.view.alerts.first { $0.kind == "state_restore" })
        #expect(alert.message.contains("classifier"))
        #expect(harness.publisher.current?.version == 1)  // the snapshot is still served
        await harness.close()
    }

    // MARK: Helpers

    private func ingest(_ harness: LoopHarness, count: Int) async throws {
        let ms = EpochTime.milliseconds(fromSeconds: harness.clock.now)
        let events = (0..<count).map { _ in
            "{\"ts\":\(ms),\"gateway\":\"gw-1\",\"tenant\":\"acme\",\"upstream\":\"\(pool4o)\",\"outcome\":\"ok\","
                + "\"prompt_tokens\":100,\"completion_tokens\":50}"
        }
        _ = try await harness.store.ingest(
            body: Array("[\(events.joined(separator: ","))]".utf8), format: .jsonArray, defaultTier: "standard",
            now: harness.clock.now)
    }
}

extension LoopHarness {
    /// Opens the database alone, runs `body`, closes it.
    func reopenDatabase(_ body: (DatabasePool) async throws -> Void) async throws {
        let pool = try await StoreDatabase.open(path: directory.databasePath)
        try await body(pool)
        await pool.close()
    }
}
