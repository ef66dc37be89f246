import AllotCore
import AllotSQLite
import AllotStore
import Foundation
import Testing

@testable import AllotLoop

/// A cold start seeds the Classifier's spend from the rollups, priced as the Classifier prices spend: served calls
/// only (outside evaluation round 27: the seed and showback priced refused and failed attempts too).
@Suite struct SpendSeedTests {
    @Test func aColdStartSeedsTheSpendOfServedCallsOnly() async throws {
        let harness = try LoopHarness()
        let now = harness.clock.now
        let ms = Int64(now * 1000) - 120_000
        // Before the loop's first start: one served call and three the provider refused or failed, each reporting
        // 1,000,000 prompt and 100,000 completion tokens.
        let database = try await StoreDatabase.open(
            path: harness.directory.databasePath, configuration: SQLiteConfiguration(synchronous: .off))
        let store = TelemetryStore(pool: database, clock: harness.clock)
        let lines = [#""status":200"#, #""status":429"#, #""outcome":"server_error""#, #""outcome":"timeout""#].map {
            #"{"ts":\#(ms),"gateway":"gw-1","tenant":"acme","upstream":"\#(pool4o)",\#($0),"#
                + #""prompt_tokens":1000000,"completion_tokens":100000}"#
        }
        _ = try await store.ingest(
            body: Array(lines.joined(separator: "\n").utf8), format: .ndjson, defaultTier: "standard", now: now)
        try await store.flushRollups()
        await database.close()

        var policy = loopPolicy(tiers: [
            Tier(name: "standard", priority: 2, budgets: [SpendBudget(window: .day, amount: 100)])
        ])
        policy.setUpstream(
            UpstreamPolicy(
                id: pool4o, capacity: PerDimension(rpm: 100, tpm: 100_000),
                price: Price(inputPerMillionTokens: 2.5, outputPerMillionTokens: 10, perRequest: 0.5)))
        try await harness.open(policy: policy)
        // 1M × 2.5 + 0.1M × 10 + 0.5 for the one served request.
        let seeded = await harness.classifier.state().seeded
        #expect(seeded["acme"]?[.day] == 4.0)
        await harness.close()
    }
}
