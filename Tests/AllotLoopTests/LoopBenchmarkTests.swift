import AllotLoop
import Foundation
import Testing

@Suite struct LoopBenchmarkTests {
    /// A small run of the tick benchmark: every stored event is folded, every tenant allocated and
    /// published. (The figures themselves are never asserted: SPEC section 13.)
    @Test func aSmallRunFoldsTheWindowAndAllocatesEveryTenant() async throws {
        let configuration = LoopBenchmark.Configuration(
            tenants: 200, gateways: 4, windowEvents: 20_000, tickEvents: 2_000, runs: 2)
        let report = try await LoopBenchmark.tick(configuration, estimators: .standard)
        #expect(report.ticks.count == 2)
        #expect(report.ticks.allSatisfy { $0.events == 2_000 && $0.succeeded })
        #expect(report.foldTicks >= 1)
        #expect(report.allocatedTenants == 200)
        #expect(report.snapshotBytes > 200 * 200)
        #expect(report.checkpointBytes > 0)
        #expect(report.residentBytes > 0)
        #expect(report.text.contains("median of 2 ticks"))
    }

    /// The real benchmark, when asked for:
    /// `ALLOT_BENCH=1 swift test -c release -Xswiftc -enable-testing --filter LoopBenchmarkTests`.
    @Test(.enabled(if: ProcessInfo.processInfo.environment["ALLOT_BENCH"] != nil))
    func fullBenchmark() async throws {
        let environment = ProcessInfo.processInfo.environment
        let configuration = LoopBenchmark.Configuration(
            tenants: Int(environment["ALLOT_BENCH_TENANTS"] ?? "") ?? 10_000,
            windowEvents: Int(environment["ALLOT_BENCH_WINDOW"] ?? "") ?? 1_000_000,
            tickEvents: Int(environment["ALLOT_BENCH_TICK_EVENTS"] ?? ""),
            runs: Int(environment["ALLOT_BENCH_RUNS"] ?? "") ?? 5)
        let report = try await LoopBenchmark.tick(configuration, estimators: .standard) { print($0) }
        print(report.text)
    }
}
