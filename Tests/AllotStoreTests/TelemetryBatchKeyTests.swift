import AllotJSON
import AllotSQLite
import Foundation
import Testing

@testable import AllotStore

/// Idempotency keys of telemetry batches in the store: one batch per key, in the transaction that stores it.
@Suite struct TelemetryBatchKeyTests {
    typealias F = TelemetryFixtures

    static func ingest(
        _ store: TelemetryStore, _ body: [UInt8], key: String, digest: String? = nil, now: Double = F.now
    )
        async throws(TelemetryIngestError) -> IngestResult
    {
        try await store.ingest(
            body: body, format: .jsonArray, defaultTier: "standard", now: now,
            key: TelemetryBatchKey(key: key, bodySHA256: digest ?? "digest-of-\(body.count)"))
    }

    @Test func batchesOfOneKeySentAtOnceAreStoredOnce() async throws {
        // Sixteen copies in flight together land in one group transaction: the first stores, the others find its row.
        let store = try await F.makeStore()
        let body = F.array([F.event(["tenant": "acme"]), F.event(["tenant": "beta"])])
        let results = try await withThrowingTaskGroup(of: IngestResult.self) { group in
            for _ in 0..<16 { group.addTask { try await Self.ingest(store, body, key: "gw-1:7") } }
            return try await group.reduce(into: []) { $0.append($1) }
        }
        #expect(results.filter { !$0.duplicate }.count == 1)
        #expect(Set(results.map { "\($0.stored) \($0.firstID) \($0.lastID)" }) == ["2 1 2"])
        #expect(results.filter { !$0.registeredTenants.isEmpty }.count == 1)
        try await store.flushRollups()
        let counts = try await F.counts(store.pool)
        #expect(counts["events"] == 2)
        #expect(counts["tenants"] == 2)
        // The rollups count the batch once: one request per tenant and minute.
        let requests = try await store.pool.read { connection in
            try connection.queryOne("SELECT sum(requests) FROM rollups_minute") { $0.int64(0) }
        }
        #expect(requests == 2)
        let counters = await store.counters
        #expect(counters.batchesStored == 1)
        #expect(counters.batchesDuplicate == 15)
    }

    @Test func aKeysSecondBatchInOneGroupTransactionIsFoundThere() async throws {
        // The writer itself, one transaction: were the key looked up only before the group, the second batch would
        // hit the key's primary key, fail the group and be retried alone (the test above could not tell).
        let store = try await F.makeStore()
        let events = try TelemetryDecoder().decode(F.array([F.event()]), format: .jsonArray, now: F.now).events
        let batches = [("d", "k"), ("d", "k"), ("e", "k")].map { digest, key in
            PreparedBatch(
                events, defaultTier: "standard", receivedMs: F.nowMs,
                key: TelemetryBatchKey(key: key, bodySHA256: digest))
        }
        let result = try await store.pool.write { connection in
            try TelemetryWriter.write(
                .init(batches: batches, recover: true, flush: nil, flushThrough: 0), cache: NameCache(),
                connection: connection)
        }
        guard result.batches.count == 3, case .stored(let rows) = result.batches[0] else {
            Issue.record("the first batch was not stored: \(result.batches)")
            return
        }
        if case .duplicate(let stored, let first, let last) = result.batches[1] {
            #expect(stored == 1 && first == rows.firstID && last == rows.lastID)
        } else {
            Issue.record("the second batch is not a duplicate: \(result.batches[1])")
        }
        if case .conflict(let conflict) = result.batches[2] {
            #expect(conflict == TelemetryKeyConflict(key: "k", committedMs: F.nowMs, stored: 1))
        } else {
            Issue.record("the third batch is not a conflict: \(result.batches[2])")
        }
        #expect(result.lastEventID == rows.lastID)
        #expect(try await F.counts(store.pool)["events"] == 1)
    }

    @Test func aResendOfAStoredBatchIsAnsweredEvenWhereItsBodyWouldNowBeRefused() async throws {
        // Review of 2026-11-29: the token's scope narrowed between the attempts; the resend was refused 403, and a
        // gateway library would have dropped the event named and stored the rest again under a new key.
        let store = try await F.makeStore()
        let body = F.array([F.event(["gateway": "gw-1"]), F.event(["gateway": "gw-2"])])
        let digest = "digest-of-\(body.count)"
        let first = try await Self.ingest(store, body, key: "s-1", digest: digest)
        let again = try await store.ingest(
            body: body, format: .jsonArray, defaultTier: "standard", now: F.now, gatewayScope: "gw-1",
            key: TelemetryBatchKey(key: "s-1", bodySHA256: digest))
        #expect(again == IngestResult(stored: 2, firstID: first.firstID, lastID: first.lastID, duplicate: true))
        // Another body under the key is judged first: out of scope is 403, not a conflict.
        await #expect(throws: TelemetryIngestError.self) {
            try await store.ingest(
                body: F.array([F.event(["gateway": "gw-2"])]), format: .jsonArray, defaultTier: "standard",
                now: F.now, gatewayScope: "gw-1", key: TelemetryBatchKey(key: "s-1", bodySHA256: "other"))
        }
        #expect(await store.counters.batchesRejected == ["gateway_out_of_scope": 1])
        #expect(try await F.counts(store.pool)["events"] == 2)
    }

    @Test func aKeyIsForgottenWithTheRawEvents() async throws {
        let store = try await F.makeStore()
        let body = F.array([F.event()])
        #expect(try await Self.ingest(store, body, key: "old").duplicate == false)
        let later = F.now + 3_600
        #expect(
            try await Self.ingest(store, F.array([F.event(tsMs: F.nowMs + 3_599_000)]), key: "new", now: later)
                .stored == 1)
        let pruner = RetentionPruner(pool: store.pool)
        let report = try await pruner.prune(now: F.now + 86_400 + 1)
        #expect(report.keysDeleted == 1)
        let kept = try await store.pool.read { connection in
            try connection.queryOne("SELECT group_concat(key) FROM telemetry_batch_keys") { $0.string(0) }
        }
        #expect(kept == "new")
        // Once forgotten, the key stores its batch again.
        #expect(try await Self.ingest(store, body, key: "old", now: F.now + 86_400 + 2).duplicate == false)
    }
}
