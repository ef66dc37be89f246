import AllotJSON
import AllotSQLite
import AllotSignals
import Foundation
import Testing

@testable import AllotStore

@Suite struct TelemetryStoreTests {
    typealias F = TelemetryFixtures

    @Test func storesABatchAndRegistersUnknownNames() async throws {
        let store = try await F.makeStore()
        let events = [
            F.event(["tenant": "acme", "gateway": "gw-1"]),
            F.event(["tenant": "beta", "upstream": "anthropic/claude", "gateway": "gw-2", "model_version": nil]),
            F.event(["tenant": "acme", "outcome": nil, "status": 429, "error_type": "rate_limit_exceeded"]),
        ]
        let result = try await store.ingest(F.array(events))
        #expect(result.stored == 3)
        #expect(result.lastID - result.firstID == 2)
        #expect(result.registeredTenants == ["acme", "beta"])
        try await store.flushRollups()
        #expect(
            try await F.counts(store.pool) == [
                "events": 3, "tenants": 2, "upstreams": 2, "gateways": 3, "model_versions": 1, "rollups_minute": 2,
            ])

        let names = try await store.names()
        #expect(Set(names.tenants.values.map(\.id)) == ["acme", "beta"])
        #expect(names.tenants.values.allSatisfy { $0.tier == "standard" })
        #expect(names.tenants.values.allSatisfy { $0.lastSeenMs == F.nowMs - 1_000 })
        #expect(names.gateways.values.allSatisfy { $0.lastSeenMs == F.nowMs })  // last contact, server clock

        let stored = try await store.events(afterID: 0, limit: 10)
        #expect(stored.map(\.id) == Array(result.firstID...result.lastID))
        #expect(stored.map { names.tenant($0.tenant) } == ["acme", "beta", "acme"])
        #expect(stored.map { names.upstream($0.upstream) } == ["openai/gpt-4o", "anthropic/claude", "openai/gpt-4o"])
        #expect(stored.map { names.gateway($0.gateway) } == ["gw-1", "gw-2", "gw-eu-1"])
        #expect(stored[2].outcome == .quotaExhausted)
        #expect(stored[2].errorType == "rate_limit_exceeded")
        let first = stored[0]
        #expect(first.timestampMs == F.nowMs - 1_000)
        #expect(first.status == 200)
        #expect(first.latencyMs == 812.5)
        #expect(first.queueMs == 3.25)
        #expect(first.promptTokens == 1_200)
        #expect(first.completionTokens == 350)
        #expect(first.estimatedTokens == 1_600)
        #expect(first.taskClass == .interactive)
        #expect(first.taskID == "task-1")
        #expect(first.retry == 0)
        #expect(first.modelVersion.flatMap { names.modelVersion($0) } == "gpt-4o-2024-08-06")
        #expect(stored[1].modelVersion == nil)
        #expect(
            first.signals
                == EventSignals(
                    family: .openai, limitRequests: 10_000, remainingRequests: 9_998, resetRequestsMs: 12,
                    limitTokens: 2_000_000, remainingTokens: 1_999_000, resetTokensMs: 179_560))
        #expect(try await store.lastEventID() == result.lastID)
        #expect(try await store.events(afterID: result.lastID, limit: 10).isEmpty)
        #expect(try await store.events(afterID: result.firstID, limit: 1).map(\.id) == [result.firstID + 1])
    }

    @Test func knownTenantsKeepTheirTierAndNamesAreInternedOnce() async throws {
        let store = try await F.makeStore()
        try await store.pool.write { connection in
            try connection.run(
                "INSERT INTO tenants (id, tier, first_seen_ms, last_seen_ms) VALUES ('vip', 'premium', 5, 5)")
        }
        let first = try await store.ingest(F.array([F.event(["tenant": "vip"]), F.event(["tenant": "new"])]))
        #expect(first.registeredTenants == ["new"])
        let second = try await store.ingest(
            F.array([F.event(["tenant": "vip"]), F.event(["tenant": "new"])]), now: F.now + 60)
        #expect(second.registeredTenants == [])
        #expect(second.firstID == first.lastID + 1)
        let names = try await store.names()
        let vip = try #require(names.tenants.values.first { $0.id == "vip" })
        #expect(vip.tier == "premium")
        #expect(vip.firstSeenMs == 5)
        #expect(vip.lastSeenMs == F.nowMs - 1_000)
        #expect(try await F.counts(store.pool)["tenants"] == 2)
        #expect(try await F.counts(store.pool)["gateways"] == 1)
        #expect(names.gateways.values.first?.lastSeenMs == F.nowMs + 60_000)
        #expect(names.gateways.values.first?.firstSeenMs == F.nowMs)
    }

    /// Every field with a bad value, through the store: refused with index and field, and no table
    /// changed.
    @Test(
        arguments: [
            ("ts", "noon"), ("gateway", "gw 1"), ("tenant", ""), ("upstream", 7), ("outcome", "great"), ("status", 42),
            ("latency_ms", -3), ("queue_ms", "x"), ("prompt_tokens", -1), ("completion_tokens", 0.5),
            ("estimated_tokens", true), ("task_class", "now"), ("task_id", ""), ("model_version", []),
            ("retry", -2), ("headers", 1), ("error_type", [:]), ("error_body", false),
        ] as [(String, JSON)])
    func aBatchWithOneInvalidEventStoresNothing(field: String, value: JSON) async throws {
        #expect(Set(TelemetryField.allCases.map(\.name)).contains(field))
        let store = try await F.makeStore()
        _ = try await store.ingest(F.array([F.event(["tenant": "before"])]))
        try await store.flushRollups()
        let before = try await F.counts(store.pool)
        let events = [F.event(["tenant": "new-1"]), F.event([field: value]), F.event(["tenant": "new-2"])]
        do {
            _ = try await store.ingest(F.array(events))
            Issue.record("accepted a bad \(field)")
        } catch {
            #expect(error.status == 400)
            #expect(error.code == "invalid_event")
            #expect(error.field == "[1].\(field)")
            #expect(error.message.hasPrefix("event 1: field '\(field)': "))
        }
        #expect(try await F.counts(store.pool) == before)
        #expect(await store.counters.batchesRejected == ["invalid_event": 1])
        #expect(await store.counters.batchesStored == 1)
    }

    /// The loop's read is sized for the rows there can be, not grown by doubling (a catch-up read of 250,000 events
    /// held the old and the new buffer at once), and a cursor below the first id reads from the start.
    @Test func eventsAreReadIntoAnArraySizedForTheRowsThereCanBe() async throws {
        let store = try await F.makeStore()
        let result = try await store.ingest(F.array((0..<600).map { F.event(["prompt_tokens": .int(Int64($0))]) }))
        let all = try await store.events(afterID: 0, limit: 250_000)
        #expect(all.count == 600)
        #expect(all.capacity < 700, "capacity \(all.capacity)")  // grown by doubling: 1,024
        let tail = try await store.events(afterID: result.lastID - 10, limit: 250_000)
        #expect(tail.map(\.id) == Array((result.lastID - 9)...result.lastID))
        #expect(tail.capacity < 20, "capacity \(tail.capacity)")
        #expect(try await store.events(afterID: .min, limit: 3).map(\.id) == Array(result.firstID...(result.firstID + 2)))
        #expect(try await store.events(afterID: .max, limit: 3).isEmpty)
    }

    @Test func ndjsonAndArrayStoreTheSameRows() async throws {
        let store = try await F.makeStore()
        let events = (0..<4).map { F.event(["tenant": .string("t\($0 % 2)"), "prompt_tokens": .int(Int64($0))]) }
        let array = try await store.ingest(F.array(events))
        let lines = try await store.ingest(F.ndjson(events), format: .ndjson)
        let stored = try await store.events(afterID: 0, limit: 100)
        #expect(stored.count == 8)
        func strip(_ event: StoredEvent) -> StoredEvent {
            var copy = event
            copy.id = 0
            return copy
        }
        #expect(stored[0..<4].map(strip) == stored[4..<8].map(strip))
        #expect(lines.firstID == array.lastID + 1)
    }

    @Test func aCommittedBatchSurvivesClosingAndReopening() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("allot-durable-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("allot.sqlite").path

        let pool = try await StoreDatabase.open(path: path)  // synchronous=FULL
        #expect(pool.writer.configuration.synchronous == .full)
        let store = TelemetryStore(pool: pool)
        let result = try await store.ingest(F.array((0..<50).map { F.event(["retry": .int(Int64($0 % 3))]) }))
        #expect(result.stored == 50)
        await pool.close()

        let reopened = try await StoreDatabase.open(path: path)
        #expect(try await StoreDatabase.migrate(reopened) == [])
        let again = TelemetryStore(pool: reopened)
        let events = try await again.events(afterID: 0, limit: 1_000)
        #expect(events.map(\.id) == Array(result.firstID...result.lastID))
        #expect(events.map(\.retry) == (0..<50).map { $0 % 3 })
        #expect(try await again.names().tenant(events[0].tenant) == "acme")
        // The reopened store appends after the old rows and finds the old names.
        let next = try await again.ingest(F.array([F.event()]))
        #expect(next.firstID == result.lastID + 1)
        #expect(next.registeredTenants.isEmpty)
        #expect(try await F.counts(reopened)["tenants"] == 1)
        await reopened.close()
    }

    @Test func rollupsSumEventsPerMinuteAcrossBatches() async throws {
        let store = try await F.makeStore()
        let minute: Int64 = 1_795_316_340_000  // 2026-11-22T02:59:00Z
        let events: [JSON] = [
            F.event(["latency_ms": 100, "prompt_tokens": 10, "completion_tokens": 1], tsMs: minute + 5_000),
            F.event(
                ["outcome": "quota_exhausted", "latency_ms": 3_000, "prompt_tokens": 20, "retry": 1],
                tsMs: minute + 59_999),
            F.event(
                [
                    "outcome": "denied_local", "latency_ms": nil, "queue_ms": nil, "prompt_tokens": nil,
                    "completion_tokens": nil, "estimated_tokens": 700,
                ],
                tsMs: minute + 30_000),
            F.event(["task_class": "batch", "latency_ms": 40_000], tsMs: minute + 10_000),
            F.event(["latency_ms": 700, "queue_ms": 9.5, "prompt_tokens": 5], tsMs: minute + 60_000),
        ]
        _ = try await store.ingest(F.array(events))
        let rows = try await store.rollups(fromMs: minute, toMs: minute + 120_000)
        #expect(
            rows.map { "\($0.minuteMs - minute) \($0.taskClass)" } == ["0 interactive", "0 batch", "60000 interactive"])
        let first = try #require(rows.first { $0.minuteMs == minute && $0.taskClass == .interactive })
        #expect(first.tenant == "acme")
        #expect(first.upstream == "openai/gpt-4o")
        var expected = MinuteCounters()
        expected.requests = 3
        expected.ok = 1
        expected.quotaExhausted = 1
        expected.deniedLocal = 1
        expected.retries = 1
        expected.promptTokens = 30
        expected.completionTokens = 1 + 350
        expected.estimatedTokens = 1_600 + 1_600 + 700
        // Served tokens: the `ok` event's alone (the 429's 20 prompt and 350 completion tokens are not billed).
        expected.servedPromptTokens = 10
        expected.servedCompletionTokens = 1
        expected.latencyCount = 2
        expected.latencySumMs = 3_100
        expected.latencyMaxMs = 3_000
        expected.queueCount = 2
        expected.queueSumMs = 6.5
        expected.queueMaxMs = 3.25
        expected.latencyBuckets = [1, 0, 0, 0, 1, 0, 0, 0]
        #expect(first.counters == expected)
        let batch = try #require(rows.first { $0.taskClass == .batch })
        #expect(batch.counters.latencyBuckets == [0, 0, 0, 0, 0, 0, 0, 1])
        let next = try #require(rows.first { $0.minuteMs == minute + 60_000 })
        #expect(next.counters.requests == 1)
        #expect(next.counters.queueMaxMs == 9.5)

        // A second batch in the same minute adds to the row; maxima take the larger.
        _ = try await store.ingest(F.array([F.event(["latency_ms": 5_000, "prompt_tokens": 1], tsMs: minute + 1)]))
        let merged = try await store.rollups(fromMs: minute, toMs: minute + 60_000, tenant: "acme")
        let updated = try #require(merged.first { $0.taskClass == .interactive })
        #expect(updated.counters.requests == 4)
        #expect(updated.counters.promptTokens == 31)
        #expect(updated.counters.servedPromptTokens == 11)
        #expect(updated.counters.latencyMaxMs == 5_000)
        #expect(updated.counters.latencyBuckets == [1, 0, 0, 0, 2, 0, 0, 0])
        #expect(try await F.counts(store.pool)["rollups_minute"] == 3)  // the read wrote them

        // Usage over [from, to) sums minutes per tenant, upstream and class.
        let usage = try await store.usage(fromMs: minute, toMs: minute + 120_000)
        #expect(
            usage.map { "\($0.tenant) \($0.upstream) \($0.taskClass)" } == [
                "acme openai/gpt-4o interactive", "acme openai/gpt-4o batch",
            ])
        let interactive = try #require(usage.first { $0.taskClass == .interactive })
        #expect(interactive.counters.requests == 5)
        #expect(interactive.counters.promptTokens == 36)
        #expect(interactive.counters.latencyMaxMs == 5_000)
        #expect(try await store.usage(fromMs: minute + 60_000, toMs: minute + 120_000).map(\.counters.requests) == [1])
        #expect(try await store.usage(fromMs: minute, toMs: minute + 120_000, tenant: "nobody").isEmpty)
    }

    @Test func aFullDatabaseRefusesTheBatchAndRecovers() async throws {
        let store = try await F.makeStore()
        _ = try await store.ingest(F.array([F.event()]))
        try await store.flushRollups()
        let before = try await F.counts(store.pool)
        // Cap the file at its current size: the next insert fails with SQLITE_FULL.
        try await store.pool.writer.access { connection in
            let pages = try connection.queryOne("PRAGMA page_count") { $0.int64(0) } ?? 0
            try connection.execute("PRAGMA max_page_count = \(pages)")
        }
        let big = F.array((0..<2_000).map { F.event(["tenant": .string("t\($0)")]) })
        do {
            _ = try await store.ingest(big)
            Issue.record("stored into a full database")
        } catch {
            #expect(error.status == 503)
            #expect(error.code == "database_unavailable")
            guard case .database(let failure) = error else { throw error }
            #expect(failure.sqlite?.isFull == true)
        }
        #expect(try await F.counts(store.pool) == before)
        #expect(await store.counters.batchesRejected == ["database_unavailable": 1])

        try await store.pool.writer.access { connection in try connection.execute("PRAGMA max_page_count = 1000000") }
        let result = try await store.ingest(big)
        #expect(result.stored == 2_000)
        #expect(result.registeredTenants.count == 2_000)
        let names = try await store.names()
        let events = try await store.events(afterID: before["events"] ?? 0, limit: 5_000)
        #expect(events.count == 2_000)
        #expect(events.allSatisfy { names.tenant($0.tenant) != nil })
    }

    @Test func aLockedDatabaseFailsAfterTheBusyTimeoutAndRecovers() async throws {
        let pool = try await StoreDatabase.temporary(
            configuration: SQLiteConfiguration(synchronous: .off, busyTimeoutMilliseconds: 20))
        let store = TelemetryStore(pool: pool)
        let blocker = try SQLiteConnection(path: pool.path)
        try blocker.execute("BEGIN IMMEDIATE")
        do {
            _ = try await store.ingest(F.array([F.event()]))
            Issue.record("stored while the database was locked")
        } catch {
            #expect(error.status == 503)
            guard case .database(let failure) = error else { throw error }
            #expect(failure.sqlite?.isBusy == true)
        }
        try blocker.execute("COMMIT")
        blocker.close()
        #expect(try await store.ingest(F.array([F.event()])).stored == 1)
        #expect(try await F.counts(pool)["events"] == 1)
    }

    @Test func concurrentBatchesAreEachAllOrNothingWithContiguousIDs() async throws {
        let store = try await F.makeStore()
        let results = try await withThrowingTaskGroup(of: IngestResult.self) { group in
            for batch in 0..<24 {
                group.addTask {
                    let events = (0..<(50 + batch)).map { F.event(["task_id": .string("b\(batch)-\($0)")]) }
                    return try await store.ingest(F.array(events))
                }
            }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        let total = results.map(\.stored).reduce(0, +)
        let sent = (0..<24).map { 50 + $0 }.reduce(0, +)
        #expect(total == sent)
        let sorted = results.sorted { $0.firstID < $1.firstID }
        for result in sorted { #expect(Int(result.lastID - result.firstID) + 1 == result.stored) }
        for (earlier, later) in zip(sorted, sorted.dropFirst()) { #expect(earlier.lastID + 1 == later.firstID) }
        // Each batch's rows are its own events, in order.
        let events = try await store.events(afterID: 0, limit: 10_000)
        for result in results {
            let rows = events.filter { (result.firstID...result.lastID).contains($0.id) }
            let prefix = rows.first?.taskID?.split(separator: "-").first.map(String.init)
            #expect(rows.map(\.taskID) == (0..<rows.count).map { "\(prefix ?? "?")-\($0)" })
        }
        let counters = await store.counters
        #expect(counters.batchesStored == 24)
        #expect(counters.transactions >= 1 && counters.transactions <= 24)
    }

    @Test func groupCommitCanBeTurnedOff() async throws {
        let store = try await F.makeStore(configuration: .init(maxBatchesPerTransaction: 1))
        try await withThrowingTaskGroup(of: Void.self) { group in
            for _ in 0..<8 { group.addTask { _ = try await store.ingest(F.array([F.event()])) } }
            try await group.waitForAll()
        }
        #expect(await store.counters.transactions == 8)
    }

    @Test func countersTrackWhatWasStoredAndIgnored() async throws {
        let store = try await F.makeStore()
        let events = [
            F.event(["outcome": nil, "status": 503, "vendor_note": "x"]),
            F.event(["headers": ["x-ratelimit-limit-requests": "many"]]),
        ]
        let result = try await store.ingest(F.array(events))
        #expect(result.ignoredFields == ["vendor_note"])
        #expect(result.unparseableHeaders == 1)
        _ = try? await store.ingest(Array("[]".utf8))
        let counters = await store.counters
        #expect(counters.eventsStored == 2)
        #expect(counters.classifiedOutcomes == 1)
        #expect(counters.ignoredFields == 1)
        #expect(counters.unparseableHeaders == 1)
        #expect(counters.tenantsRegistered == 1)
        #expect(counters.batchesRejected == ["empty_batch": 1])
    }
}

extension TelemetryStoreTests {
    /// What someone reading the database with the sqlite3 shell sees.
    @Test func theReadableViewShowsNamesAndWords() async throws {
        let store = try await F.makeStore()
        _ = try await store.ingest(
            F.array([F.event(["outcome": nil, "status": 529, "task_class": "batch", "ts": "2026-11-22T02:59:58.250Z"])])
        )
        let row = try await store.pool.read { connection in
            try connection.queryOne(
                "SELECT ts, gateway, tenant, upstream, outcome, task_class, model_version, header_family, "
                    + "limit_requests, reset_tokens_ms FROM events_readable"
            ) { row in
                (0..<10).map { row.isNull($0) ? "NULL" : (row.string($0) ?? "") }
            }
        }
        #expect(
            row == [
                "2026-11-22T02:59:58.250Z", "gw-eu-1", "acme", "openai/gpt-4o", "overloaded", "batch",
                "gpt-4o-2024-08-06", "openai", "10000", "179560",
            ])
    }
}
