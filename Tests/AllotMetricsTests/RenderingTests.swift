import AllotMetrics
import Testing

@Suite("Rendering the text exposition")
struct RenderingTests {
    @Test("counters, gauges and histograms with labels render exactly")
    func exactText() throws {
        let registry = MetricsRegistry()
        // Registered out of name order on purpose: output is sorted by family name.
        let latency = try registry.histogram("allot_tick_seconds", help: "Tick duration.", buckets: [0.1, 0.5, 1])
        let version = try registry.gauge("allot_snapshot_version", help: "Latest published snapshot version.")
        let requests = try registry.counter(
            "allot_http_requests_total", help: "HTTP requests served.", labelNames: ["method", "status"])
        requests.labels("POST", "400").increment()
        requests.labels("GET", "404").increment()
        requests.labels("GET", "200").increment(by: 3)
        version.set(42)
        latency.observe(0.1)
        latency.observe(0.3)
        latency.observe(2)

        #expect(
            registry.render() == """
                # HELP allot_http_requests_total HTTP requests served.
                # TYPE allot_http_requests_total counter
                allot_http_requests_total{method="GET",status="200"} 3
                allot_http_requests_total{method="GET",status="404"} 1
                allot_http_requests_total{method="POST",status="400"} 1
                # HELP allot_snapshot_version Latest published snapshot version.
                # TYPE allot_snapshot_version gauge
                allot_snapshot_version 42
                # HELP allot_tick_seconds Tick duration.
                # TYPE allot_tick_seconds histogram
                allot_tick_seconds_bucket{le="0.1"} 1
                allot_tick_seconds_bucket{le="0.5"} 2
                allot_tick_seconds_bucket{le="1"} 2
                allot_tick_seconds_bucket{le="+Inf"} 3
                allot_tick_seconds_sum 2.4
                allot_tick_seconds_count 3

                """)
        #expect(MetricsRegistry.contentType == "text/plain; version=0.0.4; charset=utf-8")
    }

    @Test("a labelled histogram puts le after the family's labels")
    func labelledHistogram() throws {
        let registry = MetricsRegistry()
        let batches = try registry.histogram(
            "allot_ingest_batch_events", help: "Events per telemetry batch.", labelNames: ["gateway"],
            buckets: [10, 100])
        batches.labels("gw-2").observe(100)
        batches.labels("gw-1").observe(5)
        batches.labels("gw-1").observe(500)
        #expect(
            registry.render() == """
                # HELP allot_ingest_batch_events Events per telemetry batch.
                # TYPE allot_ingest_batch_events histogram
                allot_ingest_batch_events_bucket{gateway="gw-1",le="10"} 1
                allot_ingest_batch_events_bucket{gateway="gw-1",le="100"} 1
                allot_ingest_batch_events_bucket{gateway="gw-1",le="+Inf"} 2
                allot_ingest_batch_events_sum{gateway="gw-1"} 505
                allot_ingest_batch_events_count{gateway="gw-1"} 2
                allot_ingest_batch_events_bucket{gateway="gw-2",le="10"} 0
                allot_ingest_batch_events_bucket{gateway="gw-2",le="100"} 1
                allot_ingest_batch_events_bucket{gateway="gw-2",le="+Inf"} 1
                allot_ingest_batch_events_sum{gateway="gw-2"} 100
                allot_ingest_batch_events_count{gateway="gw-2"} 1

                """)
    }

    @Test("label values escape backslash, double quote and newline; HELP escapes backslash and newline")
    func escaping() throws {
        let registry = MetricsRegistry()
        let family = try registry.gauge(
            "allot_tenant_allocation_rpm", help: "Allocation\nper tenant, in \"RPM\" \\ minute.", labelNames: ["tenant"]
        )
        family.labels("a\\b\"c\nd").set(1)
        family.labels("ünïcødé ✓").set(2)
        family.labels("").set(3)
        let text = registry.render()
        #expect(
            text == """
                # HELP allot_tenant_allocation_rpm Allocation\\nper tenant, in "RPM" \\\\ minute.
                # TYPE allot_tenant_allocation_rpm gauge
                allot_tenant_allocation_rpm{tenant=""} 3
                allot_tenant_allocation_rpm{tenant="a\\\\b\\"c\\nd"} 1
                allot_tenant_allocation_rpm{tenant="ünïcødé ✓"} 2

                """)
        let parsed = try ExpositionParser.parse(text)
        #expect(parsed[0].help == "Allocation\nper tenant, in \"RPM\" \\ minute.")
        #expect(parsed[0].samples.map { $0.labels["tenant"] } == ["", "a\\b\"c\nd", "ünïcødé ✓"])
    }

    @Test(
        "values render as Go-parsable floats",
        arguments: [
            (0.0, "0"), (1.0, "1"), (-1.0, "-1"), (0.5, "0.5"), (0.005, "0.005"), (1e-05, "1e-05"),
            (123_456_789.0, "123456789"), (9_007_199_254_740_992.0, "9007199254740992"), (1e300, "1e+300"),
            (Double.infinity, "+Inf"), (-Double.infinity, "-Inf"), (Double.nan, "NaN"), (-0.0, "0"),
        ])
    func valueFormat(value: Double, text: String) throws {
        let registry = MetricsRegistry()
        try registry.gauge("g", help: "h").set(value)
        #expect(registry.render() == "# HELP g h\n# TYPE g gauge\ng \(text)\n")
    }

    @Test("empty registry renders nothing; a labelled family without series is omitted")
    func emptyFamilies() throws {
        let registry = MetricsRegistry()
        #expect(registry.render() == "")
        _ = try registry.counter("allot_things_total", help: "Things.", labelNames: ["kind"])
        #expect(registry.render() == "")
        _ = try registry.counter("allot_other_total", help: "Unlabelled counters start at zero.")
        #expect(
            registry.render()
                == "# HELP allot_other_total Unlabelled counters start at zero.\n"
                + "# TYPE allot_other_total counter\nallot_other_total 0\n")
    }

    @Test("series are sorted by label values, element by element")
    func seriesOrder() throws {
        let registry = MetricsRegistry()
        let family = try registry.counter("c_total", help: "h", labelNames: ["a", "b"])
        for (a, b) in [("b", "1"), ("a", "2"), ("a", "10"), ("B", "0"), ("a", "1")] {
            family.labels(a, b).increment()
        }
        let lines = registry.render().split(separator: "\n").dropFirst(2)
        #expect(
            Array(lines) == [
                #"c_total{a="B",b="0"} 1"#, #"c_total{a="a",b="1"} 1"#, #"c_total{a="a",b="10"} 1"#,
                #"c_total{a="a",b="2"} 1"#, #"c_total{a="b",b="1"} 1"#,
            ])
    }

    @Test("remove and removeAll drop series")
    func removal() throws {
        let registry = MetricsRegistry()
        let family = try registry.gauge("g", help: "h", labelNames: ["tenant"])
        family.labels("t1").set(1)
        family.labels("t2").set(2)
        family.remove("t1")
        #expect(registry.render() == "# HELP g h\n# TYPE g gauge\ng{tenant=\"t2\"} 2\n")
        family.removeAll()
        #expect(registry.render() == "")
    }

    @Test("a large mixed exposition passes the independent format parser")
    func parserRoundTrip() throws {
        let registry = MetricsRegistry()
        var random = SplitMix(seed: 99)
        let counters = try registry.counter("allot_events_total", help: "Events.", labelNames: ["tenant", "kind"])
        let gauges = try registry.gauge("allot_queue_depth", help: "Queue depth.", labelNames: ["queue"])
        let histograms = try registry.histogram(
            "allot_wait_seconds", help: "Wait.", labelNames: ["tier"],
            buckets: Histogram.exponentialBuckets(start: 0.001, factor: 4, count: 8))
        var expectedTotals: [String: Double] = [:]
        for _ in 0..<2000 {
            let tenant = "t\(random.next() % 50)"
            let kind = ["ok", "429", "err\"q", "x\ny"][Int(random.next() % 4)]
            let amount = Double(random.next() % 10)
            counters.labels(tenant, kind).increment(by: amount)
            expectedTotals[tenant + "/" + kind, default: 0] += amount
            gauges.labels("q\(random.next() % 5)").set(Double(random.next() % 1000) - 500)
            histograms.labels(["free", "premium"][Int(random.next() % 2)]).observe(
                Double(random.next() % 10_000) / 1000)
        }
        let families = try ExpositionParser.parse(registry.render())
        #expect(families.map(\.name) == ["allot_events_total", "allot_queue_depth", "allot_wait_seconds"])
        for sample in families[0].samples {
            #expect(expectedTotals[sample.labels["tenant"]! + "/" + sample.labels["kind"]!] == sample.value)
        }
        #expect(families[0].samples.count == expectedTotals.count)
        let counts = families[2].samples.filter { $0.name == "allot_wait_seconds_count" }.map(\.value)
        #expect(counts.reduce(0, +) == 2000)
    }
}

/// SplitMix64, for seeded property tests.
struct SplitMix: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        var z = state
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }
}
