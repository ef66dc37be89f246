import AllotMetrics
import Foundation
import Testing

/// Figures for the report, not assertions on speed (tests never assert on wall-clock time).
/// Run with `ALLOT_BENCH=1 swift test -c release --filter AllotMetricsTests.ThroughputTests`.
@Suite("Throughput (ALLOT_BENCH=1)", .enabled(if: ProcessInfo.processInfo.environment["ALLOT_BENCH"] == "1"))
struct ThroughputTests {
    @Test("increments on a reused handle, one task and two contending tasks; render of 10,000 series")
    func increments() async throws {
        let registry = MetricsRegistry()
        let counter = try registry.counter("c_total", help: "h")
        let n = 10_000_000
        var start = DispatchTime.now().uptimeNanoseconds
        for _ in 0..<n { counter.increment() }
        let single = Double(DispatchTime.now().uptimeNanoseconds - start) / Double(n)

        start = DispatchTime.now().uptimeNanoseconds
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<2 { group.addTask { for _ in 0..<n / 2 { counter.increment() } } }
        }
        let contended = Double(DispatchTime.now().uptimeNanoseconds - start) / Double(n)

        let family = try registry.gauge("g", help: "h", labelNames: ["tenant", "tier"])
        for i in 0..<10_000 { family.labels("tenant-\(i)", "premium").set(Double(i)) }
        start = DispatchTime.now().uptimeNanoseconds
        let text = registry.render()
        let render = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6

        start = DispatchTime.now().uptimeNanoseconds
        for i in 0..<1_000_000 { family.labels("tenant-\(i % 10_000)", "premium").increment() }
        let lookup = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e6
        print(
            "metrics: increment \(single) ns single, \(contended) ns/op with 2 tasks; "
                + "render 10k series \(render) ms (\(text.utf8.count) bytes); labels() lookup+inc \(lookup) ns")
        #expect(counter.value == Double(2 * n))
    }
}
