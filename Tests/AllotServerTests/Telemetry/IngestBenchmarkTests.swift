import AllotSQLite
import AllotServer
import Foundation
import Testing

@Suite struct IngestBenchmarkTests {
    /// A tiny run over real sockets: every acknowledged event is found, the report adds up. (The
    /// figures themselves are never asserted: SPEC section 13.)
    @Test func aSmallRunVerifiesEveryAcknowledgedEvent() async throws {
        let report = try await IngestBenchmark.run(
            IngestBenchmark.Configuration(
                clients: 2, batchSize: 50, duration: 0.2, runs: 1, tenants: 20, distinctBatches: 4, synchronous: .off))
        #expect(report.verified)
        let run = try #require(report.runs.first)
        #expect(run.failures == 0)
        #expect(run.batches > 0)
        #expect(run.events == run.batches * 50)
        #expect(run.transactions >= 1)
        #expect(report.text.contains("all acknowledged events present"))
    }

    /// The real benchmark, when asked for: `ALLOT_BENCH=1 swift test -c release --filter IngestBenchmarkTests`.
    @Test(.enabled(if: ProcessInfo.processInfo.environment["ALLOT_BENCH"] != nil))
    func fullBenchmark() async throws {
        let environment = ProcessInfo.processInfo.environment
        let configuration = IngestBenchmark.Configuration(
            clients: Int(environment["ALLOT_BENCH_CLIENTS"] ?? "") ?? 4,
            duration: Double(environment["ALLOT_BENCH_SECONDS"] ?? "") ?? 5,
            runs: Int(environment["ALLOT_BENCH_RUNS"] ?? "") ?? 3,
            synchronous: environment["ALLOT_BENCH_SYNC"] == "normal" ? .normal : .full,
            maxBatchesPerTransaction: Int(environment["ALLOT_BENCH_GROUP"] ?? "") ?? 16,
            measureLayers: environment["ALLOT_BENCH_LAYERS"] != "0")
        let report = try await IngestBenchmark.run(configuration) { print($0) }
        print(report.text)
        #expect(report.verified)
    }
}
