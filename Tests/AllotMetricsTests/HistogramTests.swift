import AllotMetrics
import Testing

@Suite("Histogram semantics")
struct HistogramTests {
    @Test("an observation equal to a bound counts in that bucket; cumulative counts; +Inf; sum; count")
    func bucketBoundaries() throws {
        let registry = MetricsRegistry()
        let histogram = try registry.histogram("h", help: "h", buckets: [1, 2, 5])
        for value in [0.5, 1, 1.0000001, 2, 5, 5.5, -3] { histogram.observe(value) }
        let snapshot = histogram.snapshot
        #expect(snapshot.bounds == [1, 2, 5])
        // <=1: 0.5, 1, -3 · <=2: + 1.0000001, 2 · <=5: + 5 · +Inf: + 5.5
        #expect(snapshot.cumulativeCounts == [3, 5, 6, 7])
        #expect(snapshot.count == 7)
        #expect(snapshot.sum == 0.5 + 1 + 1.0000001 + 2 + 5 + 5.5 - 3)
    }

    @Test("NaN is ignored, infinities land in the outer buckets")
    func specialValues() throws {
        let histogram = try MetricsRegistry().histogram("h", help: "h", buckets: [1])
        histogram.observe(.nan)
        #expect(histogram.snapshot.count == 0)
        histogram.observe(.infinity)
        histogram.observe(-.infinity)
        #expect(histogram.snapshot.cumulativeCounts == [1, 2])
    }

    @Test("default buckets are Prometheus' defaults")
    func defaultBuckets() throws {
        let histogram = try MetricsRegistry().histogram("h", help: "h")
        #expect(histogram.bounds == [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10])
    }

    @Test("bucket generators")
    func generators() {
        #expect(Histogram.exponentialBuckets(start: 1, factor: 2, count: 4) == [1, 2, 4, 8])
        #expect(Histogram.linearBuckets(start: 0, width: 0.5, count: 3) == [0, 0.5, 1])
    }

    @Test(
        "invalid buckets are rejected at registration",
        arguments: [
            ([], "a histogram needs at least one bucket"),
            ([1, 1], "bucket bounds must be strictly increasing, got 1.0 then 1.0"),
            ([2, 1], "bucket bounds must be strictly increasing, got 2.0 then 1.0"),
            ([1, .infinity], "bucket bounds must be finite (+Inf is added automatically), got inf"),
            ([.nan], "bucket bounds must be finite (+Inf is added automatically), got nan"),
        ] as [([Double], String)])
    func invalidBuckets(bounds: [Double], message: String) {
        #expect(throws: MetricsError(code: .invalidBuckets, metric: "h", message: message)) {
            try MetricsRegistry().histogram("h", help: "h", buckets: bounds)
        }
    }
}
