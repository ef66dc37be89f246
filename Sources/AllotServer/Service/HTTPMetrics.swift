import AllotHTTP
import AllotLog
import AllotMetrics

/// HTTP metrics (SPEC 9, 13): requests by route pattern (never the raw path, which would let
/// clients create unbounded series), method and status; a duration histogram by route; open
/// connections and connection-limit rejections from the server; one debug log line per request.
final class HTTPMetrics: Sendable {
    private let requests: CounterFamily?
    private let durations: HistogramFamily?
    private let registry: MetricsRegistry
    private let logger: Logger

    init(registry: MetricsRegistry, logger: Logger) {
        self.registry = registry
        self.logger = logger.labelled("http")
        requests = try? registry.counter(
            "allot_http_requests_total", help: "HTTP requests by route pattern, method and status.",
            labelNames: ["route", "method", "status"], limit: CardinalityLimit(maxSeries: 2000))
        durations = try? registry.histogram(
            "allot_http_request_duration_seconds", help: "HTTP request handling time by route pattern.",
            labelNames: ["route"],
            buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60])
    }

    func record(_ observation: HTTPRouteObservation) {
        let route = observation.routePattern ?? "unmatched"
        let seconds = Double(observation.duration.components.seconds)
            + Double(observation.duration.components.attoseconds) / 1e18
        requests?.labels([route, observation.method.rawValue, String(observation.status.code)]).increment()
        durations?.labels([route]).observe(seconds)
        if let error = observation.errorDescription {
            logger.error(
                "request failed",
                ["route": "\(route)", "status": .int(Int64(observation.status.code)), "error": "\(error)"])
        }
        logger.debug(
            "request",
            [
                "method": "\(observation.method.rawValue)", "route": "\(route)",
                "status": .int(Int64(observation.status.code)),
                "duration_ms": .double((seconds * 1e6).rounded() / 1000),
                "remote": "\(observation.remoteAddress ?? "")",
            ])
    }

    func registerServerGauges(_ server: HTTPServer) {
        try? registry.registerGauge(
            "allot_http_open_connections", help: "Open HTTP connections.",
            value: { Double(server.statistics.openConnections) })
        let counters: [(String, String, @Sendable (HTTPServerStatistics) -> Int)] = [
            ("allot_http_connections_accepted_total", "Connections accepted.", { $0.acceptedConnections }),
            ("allot_http_connections_rejected_total", "Connections refused at the connection limit (503).",
             { $0.rejectedConnections }),
            ("allot_http_connections_timed_out_total", "Connections dropped for a header, body or write timeout.",
             { $0.timedOutConnections }),
        ]
        for (name, help, read) in counters {
            guard let descriptor = try? MetricDescriptor(name: name, help: help, type: .counter) else { continue }
            try? registry.registerCollector([descriptor]) {
                [CollectedSample(family: name, value: Double(read(server.statistics)))]
            }
        }
    }
}
