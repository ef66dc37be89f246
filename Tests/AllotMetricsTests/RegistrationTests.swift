import AllotMetrics
import Testing

@Suite("Registration and validation")
struct RegistrationTests {
    @Test(
        "valid metric names",
        arguments: ["a", "_", ":", "allot_http_requests_total", "job:rate5m", "A9_:z", "_0"])
    func validNames(name: String) {
        #expect(MetricDescriptor.isValidMetricName(name))
    }

    @Test(
        "invalid metric names",
        arguments: ["", "9a", "a-b", "a b", "a.b", "é", "a\n", "{a}", "a\"", "ａ"])
    func invalidNames(name: String) {
        #expect(!MetricDescriptor.isValidMetricName(name))
        #expect(
            throws: MetricsError(
                code: .invalidName, metric: name, message: "metric names must match [a-zA-Z_:][a-zA-Z0-9_:]*")
        ) {
            try MetricsRegistry().gauge(name, help: "h")
        }
    }

    @Test("label names: valid, invalid, reserved, repeated, le on histograms")
    func labelNames() {
        #expect(MetricDescriptor.isValidLabelName("tenant"))
        #expect(MetricDescriptor.isValidLabelName("_tier9"))
        for bad in ["", "9x", "a:b", "__name__", "__x", "a-b", "ü"] {
            #expect(!MetricDescriptor.isValidLabelName(bad), "\(bad)")
        }
        let registry = MetricsRegistry()
        #expect(
            throws: MetricsError(
                code: .invalidLabelName, metric: "g",
                message: "label name \"a:b\" must match [a-zA-Z_][a-zA-Z0-9_]* and not start with __")
        ) {
            try registry.gauge("g", help: "h", labelNames: ["a:b"])
        }
        #expect(throws: MetricsError(code: .invalidLabelName, metric: "g", message: "label \"t\" is repeated")) {
            try registry.gauge("g", help: "h", labelNames: ["t", "t"])
        }
        #expect(
            throws: MetricsError(
                code: .invalidLabelName, metric: "h", message: "label \"le\" is reserved for histogram buckets")
        ) {
            try registry.histogram("h", help: "h", labelNames: ["le"])
        }
        // `le` is an ordinary label on other types.
        #expect(throws: Never.self) { try registry.gauge("g2", help: "h", labelNames: ["le"]) }
    }

    @Test("counters must end in _total")
    func counterSuffix() {
        #expect(
            throws: MetricsError(code: .invalidName, metric: "requests", message: "counter names must end in _total")
        ) {
            try MetricsRegistry().counter("requests", help: "h")
        }
    }

    @Test("identical re-registration returns the same handle; a different definition is a duplicate")
    func duplicates() throws {
        let registry = MetricsRegistry()
        let first = try registry.counter("x_total", help: "X.")
        let again = try registry.counter("x_total", help: "X.")
        first.increment()
        #expect(again === first)
        #expect(again.value == 1)

        let family = try registry.gauge("g", help: "G.", labelNames: ["a"])
        #expect(try registry.gauge("g", help: "G.", labelNames: ["a"]) === family)

        let message = "already registered with a different type, help, labels, buckets or limit"
        #expect(throws: MetricsError(code: .duplicateName, metric: "x_total", message: message)) {
            try registry.counter("x_total", help: "Other help.")
        }
        #expect(throws: MetricsError(code: .duplicateName, metric: "g", message: message)) {
            try registry.gauge("g", help: "G.", labelNames: ["b"])
        }
        #expect(throws: MetricsError(code: .duplicateName, metric: "g", message: message)) {
            try registry.gauge("g", help: "G.", labelNames: ["a"], limit: CardinalityLimit(maxSeries: 5))
        }
        _ = try registry.histogram("h", help: "H.", buckets: [1])
        #expect(throws: MetricsError(code: .duplicateName, metric: "h", message: message)) {
            try registry.histogram("h", help: "H.", buckets: [2])
        }
        #expect(throws: MetricsError(code: .duplicateName, metric: "h", message: message)) {
            try registry.gauge("h", help: "H.")
        }
    }

    @Test("a histogram's _bucket/_sum/_count names cannot be reused, and vice versa")
    func sampleNameCollisions() throws {
        let registry = MetricsRegistry()
        _ = try registry.histogram("latency", help: "h")
        #expect(
            throws: MetricsError(
                code: .duplicateName, metric: "latency_count",
                message: "sample name latency_count is already used by latency")
        ) {
            try registry.gauge("latency_count", help: "h")
        }
        _ = try registry.gauge("size_sum", help: "h")
        #expect(
            throws: MetricsError(
                code: .duplicateName, metric: "size", message: "sample name size_sum is already used by size_sum")
        ) {
            try registry.histogram("size", help: "h")
        }
        #expect(throws: MetricsError.self) {
            try registry.counter(MetricsRegistry.foldedFamilyName, help: "reserved")
        }
    }

    @Test("a cardinality limit below one is rejected")
    func badLimit() {
        #expect(
            throws: MetricsError(
                code: .invalidParameter, metric: "g", message: "a cardinality limit needs maxSeries >= 1, got 0")
        ) {
            try MetricsRegistry().gauge("g", help: "h", labelNames: ["t"], limit: CardinalityLimit(maxSeries: 0))
        }
    }

    @Test("errors describe themselves")
    func errorDescription() {
        let error = MetricsError(code: .invalidName, metric: "9", message: "bad")
        #expect(error.description == "invalid_name: 9: bad")
    }
}
