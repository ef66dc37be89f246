import AllotCore
import AllotSQLite
import AllotSignals
import Testing

@testable import AllotStore

/// The write path's speed-ups keep every value: multi-row inserts with unbound (NULL) absent values,
/// the per-block time bounds that replace the `ts_ms` index, and the lookups built on them.
@Suite struct WritePathTests {
    typealias F = TelemetryFixtures

    /// Events whose optional fields are present or absent at random, so that a row without a value
    /// follows rows with one inside the same multi-row INSERT and across statements.
    static func randomEvents(_ count: Int, rng: inout SeededGenerator, baseMs: Int64 = F.nowMs - 60_000)
        -> [TelemetryEvent]
    {
        func maybe<T>(_ value: @autoclosure () -> T) -> T? { Bool.random(using: &rng) ? value() : nil }
        return (0..<count).map { index in
            var signals = EventSignals(family: maybe(HeaderFamily.allCases.randomElement(using: &rng)!))
            if Bool.random(using: &rng) {
                signals.limitRequests = Int64.random(in: 0...10_000, using: &rng)
                signals.remainingTokens = maybe(Int64.random(in: 0...1_000_000, using: &rng))
                signals.resetTokensMs = maybe(Int64.random(in: 0...60_000, using: &rng))
                signals.retryAfterMs = maybe(Int64.random(in: 0...60_000, using: &rng))
                signals.utilization = maybe(Double.random(in: 0...1, using: &rng))
            }
            return TelemetryEvent(
                timestampMs: baseMs + Int64.random(in: -5_000...5_000, using: &rng),
                gateway: "gw-\(Int.random(in: 0..<3, using: &rng))",
                tenant: "tenant-\(Int.random(in: 0..<20, using: &rng))",
                upstream: ["openai/gpt-4o", "anthropic/claude-sonnet-4-20250514"].randomElement(using: &rng)!,
                outcome: Outcome.allCases.randomElement(using: &rng)!,
                status: maybe(Int.random(in: 100...599, using: &rng)),
                latencyMs: maybe(Double(Int.random(in: 0...90_000, using: &rng)) / 4),
                queueMs: maybe(Double(Int.random(in: 0...400, using: &rng)) / 8),
                promptTokens: maybe(Int64.random(in: 0...9_000, using: &rng)),
                completionTokens: maybe(Int64.random(in: 0...9_000, using: &rng)),
                estimatedTokens: maybe(Int64.random(in: 0...9_000, using: &rng)),
                taskClass: TaskClass.allCases.randomElement(using: &rng)!, taskID: maybe("task-\(index)"),
                modelVersion: maybe(["gpt-4o-2024-08-06", "claude-sonnet-4-20250514"].randomElement(using: &rng)!),
                retry: maybe(Int.random(in: 0...3, using: &rng)), errorType: maybe("rate_limit_exceeded"),
                signals: signals, unparseableHeaders: Int.random(in: 0...2, using: &rng))
        }
    }

    /// A stored event with its refs turned back into names, comparable with what was ingested.
    static func ingested(_ stored: StoredEvent, _ names: TelemetryNames) -> TelemetryEvent {
        TelemetryEvent(
            timestampMs: stored.timestampMs, gateway: names.gateway(stored.gateway) ?? "?",
            tenant: names.tenant(stored.tenant) ?? "?", upstream: names.upstream(stored.upstream) ?? "?",
            outcome: stored.outcome, status: stored.status, latencyMs: stored.latencyMs, queueMs: stored.queueMs,
            promptTokens: stored.promptTokens, completionTokens: stored.completionTokens,
            estimatedTokens: stored.estimatedTokens, taskClass: stored.taskClass, taskID: stored.taskID,
            modelVersion: stored.modelVersion.flatMap { names.modelVersion($0) }, retry: stored.retry,
            errorType: stored.errorType, signals: stored.signals, unparseableHeaders: stored.unparseableHeaders)
    }

    /// Batch sizes around the rows per INSERT: single-row statements only, exactly one multi-row
    /// statement, and multi-row statements followed by single rows.
    @Test(arguments: [1, 31, 32, 33, 70])
    func everyFieldRoundTripsAndAbsentValuesStayNull(count: Int) async throws {
        #expect(TelemetryWriter.rowsPerInsert == 32)
        var rng = SeededGenerator(seed: 0xB1D5 + UInt64(count))
        let store = try await F.makeStore()
        var expected: [TelemetryEvent] = []
        for _ in 0..<2 {
            let events = Self.randomEvents(count, rng: &rng)
            let result = try await store.ingest(TelemetryBatch(events: events), defaultTier: "standard", now: F.now)
            #expect(result.stored == count)
            #expect(result.lastID - result.firstID + 1 == Int64(count))
            expected += events
        }
        let names = try await store.names()
        let stored = try await store.events(afterID: 0, limit: 1_000)
        #expect(stored.map(\.id) == Array(1...Int64(2 * count)))
        let roundTripped = stored.map { Self.ingested($0, names) }
        for (index, (event, back)) in zip(expected, roundTripped).enumerated() {
            var withoutDerived = event
            withoutDerived.outcomeWasClassified = false
            #expect(back == withoutDerived, "event \(index)")
        }
    }

    /// Block bounds as the table holds them and as the events say.
    static func blockBounds(_ pool: DatabasePool) async throws -> (table: [[Int64]], events: [[Int64]]) {
        try await pool.read { connection in
            let table = try connection.queryAll("SELECT block, min_ts_ms, max_ts_ms FROM event_blocks ORDER BY block") {
                [$0.int64(0), $0.int64(1), $0.int64(2)]
            }
            let events = try connection.queryAll(
                "SELECT id >> 12, min(ts_ms), max(ts_ms) FROM events GROUP BY id >> 12 ORDER BY 1"
            ) { [$0.int64(0), $0.int64(1), $0.int64(2)] }
            return (table, events)
        }
    }

    @Test func eachBlockOfIdsKnowsTheRangeOfItsTimes() async throws {
        var rng = SeededGenerator(seed: 0x7B10C)
        let store = try await F.makeStore()
        // 4,200 events in one batch span blocks 0 (ids 1-4095) and 1; the next batch extends block 1.
        for count in [4_200, 300] {
            let events = Self.randomEvents(count, rng: &rng)
            _ = try await store.ingest(TelemetryBatch(events: events), defaultTier: "standard", now: F.now)
        }
        let bounds = try await Self.blockBounds(store.pool)
        #expect(bounds.table.map { $0[0] } == [0, 1])
        #expect(bounds.table == bounds.events)
    }

    @Test func theFirstEventAtOrAfterAnInstantMatchesAFullScan() async throws {
        var rng = SeededGenerator(seed: 0xF125)
        let store = try await F.makeStore()
        // Times rise batch by batch, with late deliveries mixed in (ts is not monotonic in id).
        for batch in 0..<6 {
            var events = Self.randomEvents(750, rng: &rng, baseMs: F.nowMs - 3_600_000 + Int64(batch) * 600_000)
            for index in stride(from: 0, to: events.count, by: 97) { events[index].timestampMs -= 2_400_000 }
            _ = try await store.ingest(TelemetryBatch(events: events), defaultTier: "standard", now: F.now)
        }
        let instants: [Int64] =
            [0, F.nowMs - 7_200_000, F.nowMs - 3_000_000, F.nowMs - 1_000, F.nowMs + 1]
            + (0..<20).map { _ in F.nowMs - Int64.random(in: 0...6_500_000, using: &rng) }
        for instant in instants {
            let scanned = try await store.pool.read { connection in
                try connection.queryOne("SELECT min(id) FROM events WHERE ts_ms >= ?", instant) { $0.optionalInt64(0) }
                    ?? nil
            }
            #expect(try await store.firstEventID(atOrAfterMs: instant) == scanned, "at \(instant)")
        }
    }

    @Test func pruningFindsLateOldEventsAndKeepsBlockBoundsExact() async throws {
        var rng = SeededGenerator(seed: 0x9A7E)
        let store = try await F.makeStore()
        let hour: Int64 = 3_600_000
        // Old events fill block 0 (ids 1-4095) and start block 1; recent events carrying late old
        // ones follow in block 1.
        _ = try await store.ingest(
            TelemetryBatch(events: Self.randomEvents(4_200, rng: &rng, baseMs: F.nowMs - 30 * hour)),
            defaultTier: "standard", now: F.now)
        var recent = Self.randomEvents(600, rng: &rng, baseMs: F.nowMs - hour)
        let late = [10, 300, 500]  // ids 4,211, 4,501 and 4,701
        for index in late { recent[index].timestampMs = F.nowMs - 26 * hour }
        let result = try await store.ingest(TelemetryBatch(events: recent), defaultTier: "standard", now: F.now)
        try await store.flushRollups()

        let report = try await RetentionPruner(pool: store.pool, policy: RetentionPolicy(chunkRows: 1_500))
            .prune(now: F.now)
        #expect(report.eventsDeleted == 4_200 + late.count)
        #expect(report.chunks == 3 + 1 + 1)  // 1,500 + 1,500 + 1,203 events, then the rollups' one and the keys' one
        let left = try await store.events(afterID: 0, limit: 10_000)
        #expect(left.count == 600 - late.count)
        #expect(left.allSatisfy { $0.timestampMs > F.nowMs - 24 * hour })
        #expect(left.first?.id == result.firstID)
        let bounds = try await Self.blockBounds(store.pool)
        #expect(bounds.table == bounds.events)  // block 0 emptied and gone, the others exact
        #expect(bounds.table.first?[0] == 1)
    }

    @Test func pruningNeverDeletesTheNewestEventOrUncountedOnes() async throws {
        var rng = SeededGenerator(seed: 0x0DD)
        let store = try await F.makeStore(configuration: .init(rollupFlushInterval: 3_600))
        _ = try await store.ingest(
            TelemetryBatch(events: Self.randomEvents(50, rng: &rng, baseMs: F.nowMs - 90_000_000)),
            defaultTier: "standard", now: F.now)
        try await store.flushRollups()
        _ = try await store.ingest(
            TelemetryBatch(events: Self.randomEvents(10, rng: &rng, baseMs: F.nowMs - 90_000_000)),
            defaultTier: "standard", now: F.now)
        let pruner = RetentionPruner(pool: store.pool, policy: RetentionPolicy(chunkRows: 7))
        #expect(try await pruner.prune(now: F.now).eventsDeleted == 50)  // the last 10 are not counted yet
        try await store.flushRollups()
        #expect(try await pruner.prune(now: F.now).eventsDeleted == 9)  // all but the newest
        #expect(try await store.events(afterID: 0, limit: 100).map(\.id) == [60])
        let bounds = try await Self.blockBounds(store.pool)
        #expect(bounds.table == bounds.events)
    }
}

@Suite struct BatchLookupTests {
    static let names = (0..<3_000).map { index in
        index % 3 == 0 ? "tenant-\(index)" : "organisation-\(index)-with-a-long-name.example"
    }

    @Test(arguments: [false, true])
    func nameIndexAgreesWithADictionary(everythingCollides: Bool) {
        var index =
            everythingCollides ? NameIndex(hash: { _ in 42 }) : NameIndex(capacity: 4)
        var reference: [String: Int32] = [:]
        var rng = SeededGenerator(seed: everythingCollides ? 1 : 2)
        for _ in 0..<20_000 {
            let name = Self.names.randomElement(using: &rng)!
            let expected = reference[name]
            let (found, isNew) = index.index(of: name)
            #expect(isNew == (expected == nil))
            if let expected { #expect(found == expected) } else { reference[name] = found }
        }
        #expect(index.count == reference.count)
        #expect(index.names.count == reference.count)
        for (name, position) in reference { #expect(index.names[Int(position)] == name) }
    }

    @Test(arguments: [false, true])
    func internedStringsEqualTheirBytes(everythingCollides: Bool) {
        var strings = everythingCollides ? BatchStrings(hash: { _ in 7 }) : BatchStrings()
        var rng = SeededGenerator(seed: 3)
        for _ in 0..<10_000 {
            var name = Self.names.randomElement(using: &rng)!
            let interned = name.withUTF8 { strings.intern($0) }
            #expect(interned == name)
        }
        // Long names are made once; short ones are never stored (a short String costs no allocation).
        #expect(strings.count <= Self.names.count * 2 / 3 + 1)
    }

    @Test func repeatedLongNamesShareOneString() {
        var strings = BatchStrings()
        var first = "anthropic/claude-sonnet-4-20250514"
        var second = String("anthropic/claude-sonnet-4-20250514".reversed().reversed())
        var a = first.withUTF8 { strings.intern($0) }
        var b = second.withUTF8 { strings.intern($0) }
        #expect(a == b)
        let shared = a.withUTF8 { pointerA in b.withUTF8 { pointerB in pointerA.baseAddress == pointerB.baseAddress } }
        #expect(shared)
        #expect(strings.count == 1)
    }

    @Test func hashesSpreadNamesThatDifferOnlyInTheirLastBytes() {
        // Slot = low bits: names sharing a long prefix must still land in different slots.
        var slots = Set<UInt64>()
        for index in 0..<1_000 {
            var name = "tenant-\(index)"
            slots.insert(name.withUTF8 { BatchStrings.hash($0) } & 2_047)
        }
        #expect(slots.count > 700)
    }
}
