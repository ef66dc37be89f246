import AllotJSON
import AllotSQLite
import AllotTime
import Testing

@testable import AllotStore

@Suite struct RetentionPrunerTests {
    typealias F = TelemetryFixtures
    static let hour: Double = 3_600
    static let day: Double = 86_400

    /// Ingests `count` events at `now - age` (the store's clock at ingest is the event time).
    static func ingest(_ store: TelemetryStore, count: Int, at seconds: Double, tenant: String = "acme") async throws {
        let tsMs = EpochTime.milliseconds(fromSeconds: seconds)
        let events = (0..<count).map { F.event(["tenant": .string(tenant), "task_id": .string("t\($0)")], tsMs: tsMs) }
        _ = try await store.ingest(F.array(events), now: seconds)
    }

    @Test func deletesOldEventsInChunksAndKeepsNewerOnes() async throws {
        let clock = ManualClock(now: F.now)
        let store = try await F.makeStore()
        try await Self.ingest(store, count: 23, at: clock.now - 25 * Self.hour)  // past 24 h
        try await Self.ingest(store, count: 7, at: clock.now - 23 * Self.hour)
        let pruner = RetentionPruner(pool: store.pool, policy: RetentionPolicy(chunkRows: 10))
        try await store.flushRollups()  // the pruner keeps events the rollups have not counted yet

        let report = try await pruner.prune(now: clock.now)
        #expect(report.eventsDeleted == 23)
        #expect(report.rollupsDeleted == 0)
        #expect(report.chunks == 3 + 1 + 1)  // 10 + 10 + 3 events, then one empty rollup chunk and one of keys
        let left = try await store.events(afterID: 0, limit: 100)
        #expect(left.count == 7)
        #expect(left.allSatisfy { $0.timestampMs == EpochTime.milliseconds(fromSeconds: clock.now - 23 * Self.hour) })

        // Two hours later the rest is past 24 h too, except the newest row, which always stays.
        clock.advance(by: 2 * Self.hour)
        try await store.flushRollups()
        let later = try await pruner.prune(now: clock.now)
        #expect(later.eventsDeleted == 6)
        let newest = try await store.events(afterID: 0, limit: 100)
        #expect(newest.map(\.id) == [try await store.lastEventID()])

        // Ids keep increasing after pruning: the loop's read position stays valid.
        let lastID = try await store.lastEventID()
        try await Self.ingest(store, count: 1, at: clock.now)
        #expect(try await store.events(afterID: lastID, limit: 10).map(\.id) == [lastID + 1])
    }

    @Test func deletesRollupsOlderThanThirtyDays() async throws {
        let now = F.now
        let store = try await F.makeStore()
        try await Self.ingest(store, count: 1, at: now - 31 * Self.day, tenant: "old-1")
        try await Self.ingest(store, count: 1, at: now - 30 * Self.day - 120, tenant: "old-2")
        try await Self.ingest(store, count: 1, at: now - 29 * Self.day, tenant: "recent")
        try await Self.ingest(store, count: 1, at: now - Self.hour, tenant: "today")
        try await store.flushRollups()
        #expect(try await F.counts(store.pool)["rollups_minute"] == 4)

        let report = try await RetentionPruner(pool: store.pool, policy: RetentionPolicy(chunkRows: 1))
            .prune(now: now)
        #expect(report.rollupsDeleted == 2)
        #expect(report.eventsDeleted == 3)
        let left = try await store.rollups(fromMs: 0, toMs: .max)
        #expect(left.map(\.tenant) == ["recent", "today"])
        // Tenants are kept: they are registrations, not telemetry.
        #expect(try await F.counts(store.pool)["tenants"] == 4)
    }

    @Test func retentionIsConfigurable() async throws {
        let store = try await F.makeStore()
        try await Self.ingest(store, count: 3, at: F.now - 2 * Self.hour)
        try await Self.ingest(store, count: 1, at: F.now)
        try await store.flushRollups()
        let pruner = RetentionPruner(
            pool: store.pool, policy: RetentionPolicy(rawEvents: Self.hour, rollups: Self.hour))
        let report = try await pruner.prune(now: F.now)
        #expect(report.eventsDeleted == 3)
        #expect(report.rollupsDeleted == 1)
    }

    @Test func runsOnTheClockUntilCancelled() async throws {
        let clock = ManualClock(now: F.now)
        let store = try await F.makeStore()
        try await Self.ingest(store, count: 5, at: clock.now - 25 * Self.hour)
        try await Self.ingest(store, count: 5, at: clock.now - 23.5 * Self.hour)
        try await Self.ingest(store, count: 1, at: clock.now)
        try await store.flushRollups()
        let pruner = RetentionPruner(pool: store.pool)
        let task = Task { await pruner.run(clock: clock, every: 60) }

        await clock.waitForSleepers(1)  // the first pass ran, then it sleeps 60 s
        #expect(try await F.counts(store.pool)["events"] == 6)
        clock.advance(by: 31 * 60)  // 31 virtual minutes: one more pass
        await clock.waitForSleepers(1)
        #expect(try await F.counts(store.pool)["events"] == 1)

        task.cancel()
        await task.value
        #expect(clock.sleeperCount == 0)
    }
}

extension RetentionPrunerTests {
    @Test func keepsEventsTheRollupsHaveNotCountedYet() async throws {
        let store = try await F.makeStore(configuration: .init(rollupFlushInterval: 3_600))
        try await Self.ingest(store, count: 4, at: F.now - 25 * Self.hour)
        try await Self.ingest(store, count: 1, at: F.now)
        let pruner = RetentionPruner(pool: store.pool)
        #expect(try await pruner.prune(now: F.now).eventsDeleted == 0)
        try await store.flushRollups()
        #expect(try await pruner.prune(now: F.now).eventsDeleted == 4)
    }
}
