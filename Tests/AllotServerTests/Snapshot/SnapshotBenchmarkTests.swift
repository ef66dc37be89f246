import AllotServer
import Foundation
import Testing

@Suite(.serialized) struct SnapshotBenchmarkTests {
    /// A tiny run over real sockets: every watcher is answered, every conditional request is a 304.
    /// (The figures themselves are never asserted: SPEC section 13.)
    @Test func smallRunsAnswerEveryWatcherAndCount304s() async throws {
        let configuration = SnapshotBenchmark.Configuration(
            watchers: 40, tenants: 200, runs: 1, connections: 4, seconds: 0.2, useWrk: false)
        let wake = try await SnapshotBenchmark.longPoll(configuration)
        #expect(wake.runs.count == 1)
        #expect(wake.runs.first?.answered == 40)
        #expect((wake.runs.first?.bodyBytes ?? 0) > 0)
        #expect(wake.text.contains("median of 1 runs"))
        let conditional = try await SnapshotBenchmark.conditional(configuration)
        #expect(conditional.runs.first?.failures == 0)
        #expect((conditional.runs.first?.requests ?? 0) > 0)
        #expect(conditional.text.contains("wrk -t2 -c4"))
    }

    /// The real benchmarks, when asked for:
    /// `ALLOT_BENCH=1 swift test -c release --filter SnapshotBenchmarkTests`.
    @Test(.enabled(if: ProcessInfo.processInfo.environment["ALLOT_BENCH"] != nil))
    func fullBenchmarks() async throws {
        let environment = ProcessInfo.processInfo.environment
        let configuration = SnapshotBenchmark.Configuration(
            watchers: Int(environment["ALLOT_BENCH_WATCHERS"] ?? "") ?? 5_000,
            tenants: Int(environment["ALLOT_BENCH_TENANTS"] ?? "") ?? 10_000,
            runs: Int(environment["ALLOT_BENCH_RUNS"] ?? "") ?? 5,
            connections: Int(environment["ALLOT_BENCH_CONNECTIONS"] ?? "") ?? 64,
            seconds: Double(environment["ALLOT_BENCH_SECONDS"] ?? "") ?? 5)
        let wake = try await SnapshotBenchmark.longPoll(configuration) { print($0) }
        print(wake.text)
        let conditional = try await SnapshotBenchmark.conditional(configuration) { print($0) }
        print(conditional.text)
    }
}
