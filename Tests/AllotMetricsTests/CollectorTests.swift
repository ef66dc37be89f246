import AllotMetrics
import Foundation
import Testing

/// A value a test changes between renders.
final class Box: @unchecked Sendable {
    // Safe to share: tests touch it from one task at a time, guarded by the lock anyway.
    private let lock = NSLock()
    private var stored: Double
    init(_ value: Double) { stored = value }
    var value: Double {
        get { lock.withLock { stored } }
        set { lock.withLock { stored = newValue } }
    }
}

@Suite("Collectors and process metrics")
struct CollectorTests {
    @Test("a callback gauge is evaluated at every render")
    func callbackGauge() throws {
        let registry = MetricsRegistry()
        let version = Box(7)
        try registry.registerGauge("allot_snapshot_version", help: "Latest snapshot version.") { version.value }
        #expect(registry.render().hasSuffix("allot_snapshot_version 7\n"))
        version.value = 8
        #expect(registry.render().hasSuffix("allot_snapshot_version 8\n"))
    }

    @Test("collector samples are sorted, validated, de-duplicated and merged into the name order")
    func collectorSamples() throws {
        let registry = MetricsRegistry()
        _ = try registry.counter("b_total", help: "B.")
        let connections = try MetricDescriptor(
            name: "allot_open_connections", help: "Open connections.", type: .gauge, labelNames: ["kind"])
        let polls = try MetricDescriptor(name: "z_polls_total", help: "Polls.", type: .counter)
        try registry.registerCollector([connections, polls]) {
            [
                CollectedSample(family: "allot_open_connections", labelValues: ["watch"], value: 5),
                CollectedSample(family: "allot_open_connections", labelValues: ["api"], value: 1),
                CollectedSample(family: "allot_open_connections", labelValues: ["api"], value: 2),  // last wins
                CollectedSample(family: "allot_open_connections", labelValues: [], value: 9),  // wrong arity
                CollectedSample(family: "undeclared", value: 1),  // not declared
                CollectedSample(family: "z_polls_total", value: 3),
            ]
        }
        #expect(
            registry.render() == """
                # HELP allot_open_connections Open connections.
                # TYPE allot_open_connections gauge
                allot_open_connections{kind="api"} 2
                allot_open_connections{kind="watch"} 5
                # HELP b_total B.
                # TYPE b_total counter
                b_total 0
                # HELP z_polls_total Polls.
                # TYPE z_polls_total counter
                z_polls_total 3

                """)
    }

    @Test("a collector may use the registry while it runs (no deadlock)")
    func reentrantCollector() throws {
        let registry = MetricsRegistry()
        let renders = try registry.counter("allot_renders_total", help: "Renders.")
        try registry.registerGauge("allot_render_count", help: "Renders so far.") {
            renders.increment()
            _ = try? registry.counter("allot_renders_total", help: "Renders.")
            return renders.value
        }
        #expect(registry.render().contains("allot_render_count 1\n"))
        #expect(registry.render().contains("allot_render_count 2\n"))
    }

    @Test("collector registration rejects histograms and taken names")
    func collectorRegistration() throws {
        let registry = MetricsRegistry()
        let histogram = try MetricDescriptor(name: "h", help: "h", type: .histogram)
        #expect(
            throws: MetricsError(
                code: .invalidParameter, metric: "h",
                message: "collectors produce counters and gauges only; register a histogram instead")
        ) {
            try registry.registerCollector([histogram]) { [] }
        }
        _ = try registry.gauge("taken", help: "h")
        #expect(throws: MetricsError(code: .duplicateName, metric: "taken", message: "taken is already registered")) {
            try registry.registerGauge("taken", help: "h") { 1 }
        }
        let twice = try MetricDescriptor(name: "twice", help: "h", type: .gauge)
        #expect(throws: MetricsError.self) { try registry.registerCollector([twice, twice]) { [] } }
        // A failed registration claims nothing.
        #expect(throws: Never.self) { try registry.registerGauge("twice", help: "h") { 1 } }
    }

    @Test("process metrics are present and plausible")
    func processMetrics() throws {
        let registry = MetricsRegistry()
        try ProcessMetrics.register(on: registry)
        let families = try ExpositionParser.parse(registry.render())
        var values: [String: Double] = [:]
        for family in families { values[family.name] = family.samples.first?.value }
        #expect(
            families.map(\.name) == [
                "process_cpu_seconds_total", "process_max_fds", "process_open_fds", "process_resident_memory_bytes",
                "process_start_time_seconds", "process_virtual_memory_bytes",
            ])
        let resident = try #require(values["process_resident_memory_bytes"])
        let virtual = try #require(values["process_virtual_memory_bytes"])
        #expect(resident > 1_000_000)  // A Swift test process maps several MB.
        #expect(virtual >= resident)
        #expect(try #require(values["process_cpu_seconds_total"]) >= 0)
        #expect(try #require(values["process_open_fds"]) >= 1)
        #expect(try #require(values["process_max_fds"]) >= values["process_open_fds"]!)
        let start = try #require(values["process_start_time_seconds"])
        let now = Date().timeIntervalSince1970
        #expect(start <= now + 1 && start > now - 86_400)
        #expect(families[0].help == "Total user and system CPU time spent in seconds.")
    }

    @Test("open file descriptors track files we open")
    func openFileDescriptors() throws {
        // Other tests run in parallel and open and close files too, so compare against a count
        // well above a test process's baseline rather than against a reading taken before.
        let handles = (0..<64).map { _ in FileHandle(forReadingAtPath: "/dev/null")! }
        let during = try #require(ProcessMetrics.read().openFileDescriptors)
        for handle in handles { try handle.close() }
        #expect(during >= 64)
    }

    @Test("/proc/self/stat parsing copes with awkward command names")
    func statParsing() throws {
        // 52 fields as on Linux 5.x; comm contains spaces and a ')'.
        let fields = (3...52).map { String($0) }
        var line = "1234 (my ) (proc) " + fields.joined(separator: " ") + "\n"
        let stat = try #require(ProcessStat(parsing: line))
        #expect(stat.userTicks == 14)
        #expect(stat.systemTicks == 15)
        #expect(stat.startTicks == 22)
        #expect(stat.virtualMemoryBytes == 23)
        #expect(stat.residentPages == 24)
        line = "1 (x) R 1 2 3"
        #expect(ProcessStat(parsing: line) == nil)
        #expect(ProcessStat(parsing: "") == nil)
        #expect(ProcessStat(parsing: "no parenthesis 1 2 3") == nil)
        let negative = "1 (x) " + fields.enumerated().map { $0.offset == 11 ? "-5" : $0.element }.joined(separator: " ")
        #expect(ProcessStat(parsing: negative) == nil)
    }

    @Test("/proc/stat btime and /proc/self/limits parsing")
    func otherProcFiles() {
        #expect(ProcessMetrics.parseBootTime("cpu  1 2 3\nbtime 1700000000\nprocesses 5\n") == 1_700_000_000)
        #expect(ProcessMetrics.parseBootTime("cpu 1\n") == nil)
        #expect(ProcessMetrics.parseBootTime("btime x\n") == nil)
        let limits = """
            Limit                     Soft Limit           Hard Limit           Units
            Max processes             127431               127431               processes
            Max open files            1024                 1048576              files
            """
        #expect(ProcessMetrics.parseMaxOpenFiles(limits) == 1024)
        #expect(
            ProcessMetrics.parseMaxOpenFiles("Max open files            unlimited            unlimited  files") == nil)
        #expect(ProcessMetrics.parseMaxOpenFiles("") == nil)
    }
}
