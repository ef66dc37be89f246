import AllotJSON
import AllotSQLite
import AllotTime
import Testing

@testable import AllotStore

/// Rollups are summed in memory and written about once a second; after a crash a new store must
/// count the uncounted events from the raw rows, with exactly the same result.
@Suite struct RollupRecoveryTests {
    typealias F = TelemetryFixtures

    static func randomBatches(seed: UInt64, batches: Int, size: Int) -> [[UInt8]] {
        var rng = SeededGenerator(seed: seed)
        let outcomes: [JSON] = [
            "ok", "quota_exhausted", "spend_cap", "overloaded", "server_error", "timeout",
            "denied_local", "queued",
        ]
        let classes: [JSON] = ["realtime", "interactive", "batch", "background"]
        return (0..<batches).map { _ in
            F.array(
                (0..<size).map { _ in
                    let maybe = { (value: JSON) -> JSON? in Bool.random(using: &rng) ? value : nil }
                    return F.event(
                        [
                            "tenant": .string("t\(Int.random(in: 0..<5, using: &rng))"),
                            "upstream": .string("u\(Int.random(in: 0..<3, using: &rng))"),
                            "outcome": outcomes.randomElement(using: &rng)!,
                            "task_class": classes.randomElement(using: &rng)!,
                            "latency_ms": maybe(.double(Double(Int.random(in: 0..<160_000, using: &rng)) / 4)),
                            "queue_ms": maybe(.double(Double(Int.random(in: 0..<400, using: &rng)) / 4)),
                            "prompt_tokens": maybe(.int(Int64.random(in: 0..<10_000, using: &rng))),
                            "completion_tokens": maybe(.int(Int64.random(in: 0..<10_000, using: &rng))),
                            "estimated_tokens": maybe(.int(Int64.random(in: 0..<10_000, using: &rng))),
                            "retry": .int(Int64.random(in: 0..<3, using: &rng)),
                        ], tsMs: F.nowMs - Int64.random(in: 0..<(5 * 60_000), using: &rng))
                })
        }
    }

    /// The rollups computed directly from the decoded events.
    static func reference(_ bodies: [[UInt8]]) throws -> [String: MinuteCounters] {
        var rows: [String: MinuteCounters] = [:]
        for body in bodies {
            for event in try TelemetryDecoder().decode(body, format: .jsonArray, now: F.now).events {
                rows[
                    "\(event.tenant) \(event.upstream) \(event.taskClass) \(minuteStart(event.timestampMs))",
                    default: .init()
                ]
                .add(event)
            }
        }
        return rows
    }

    static func stored(_ store: TelemetryStore) async throws -> [String: MinuteCounters] {
        var rows: [String: MinuteCounters] = [:]
        for row in try await store.rollups(fromMs: 0, toMs: .max) {
            rows["\(row.tenant) \(row.upstream) \(row.taskClass) \(row.minuteMs)"] = row.counters
        }
        return rows
    }

    @Test(arguments: [0, 2, 5])
    func aNewStoreCountsWhatTheLastOneLeftInMemory(flushedBatches: Int) async throws {
        let bodies = Self.randomBatches(seed: UInt64(40 + flushedBatches), batches: 5, size: 80)
        let pool = try await StoreDatabase.temporary()
        let lazy = TelemetryStore(pool: pool, configuration: .init(rollupFlushInterval: 3_600))
        for (index, body) in bodies.enumerated() {
            _ = try await lazy.ingest(body)
            if index + 1 == flushedBatches { try await lazy.flushRollups() }
        }
        // The first store "crashes": whatever it had not written is gone with it.
        let successor = TelemetryStore(pool: pool)
        let recovered = try await Self.stored(successor)
        #expect(recovered == (try Self.reference(bodies)))
        #expect(recovered.values.map(\.requests).reduce(0, +) == 400)
        let mark = try await pool.read { try $0.queryOne("SELECT last_event_id FROM rollup_progress") { $0.int64(0) } }
        #expect(mark == 400)
    }

    @Test func inMemoryAndRecoveredRollupsAgree() async throws {
        let bodies = Self.randomBatches(seed: 7, batches: 4, size: 100)
        let normal = try await F.makeStore()
        for body in bodies { _ = try await normal.ingest(body) }
        let fromMemory = try await Self.stored(normal)

        let pool = try await StoreDatabase.temporary()
        let crashed = TelemetryStore(pool: pool, configuration: .init(rollupFlushInterval: 3_600))
        for body in bodies { _ = try await crashed.ingest(body) }
        let fromSQL = try await Self.stored(TelemetryStore(pool: pool))
        #expect(fromMemory == fromSQL)
        #expect(fromMemory == (try Self.reference(bodies)))
    }

    @Test func pendingRowsAreWrittenWhenTheQueueGoesIdle() async throws {
        let clock = ManualClock(now: F.now)
        let store = TelemetryStore(
            pool: try await StoreDatabase.temporary(), configuration: .init(rollupFlushInterval: 1), clock: clock)
        _ = try await store.ingest(F.array([F.event()]))
        await clock.waitForSleepers(1)  // the idle timer
        #expect(try await Self.rollupRows(store) == 0)
        clock.advance(by: 1)
        var written: Int64 = 0
        for _ in 0..<100_000 where written == 0 {
            await Task.yield()
            written = try await Self.rollupRows(store)
        }
        #expect(written == 1)
    }

    static func rollupRows(_ store: TelemetryStore) async throws -> Int64 {
        try await store.pool.read { try $0.queryOne("SELECT count(*) FROM rollups_minute") { $0.int64(0) } ?? 0 }
    }
}
