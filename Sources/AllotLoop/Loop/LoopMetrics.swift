import AllotMetrics

/// The loop's Prometheus series (SPEC 13 operations). Registered once per registry; a second
/// loop on the same registry shares the families.
struct LoopMetrics: Sendable {
    let tickDuration: HistogramFamily
    let ticks: CounterFamily
    let lastTick: Gauge
    let events: Counter
    let snapshotVersion: Gauge
    let published: CounterFamily
    let checkpointDuration: Histogram
    let checkpointBytes: Gauge
    let held: Gauge
    let leaseLapses: Counter

    init(registry: MetricsRegistry, publisher: AllocationPublisher) {
        let phaseBuckets = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]
        // The definitions are fixed and valid, so registration only fails for a name another
        // component registered differently; the loop then uses unregistered handles of its own.
        let fallback = MetricsRegistry()
        func family<T>(_ make: (MetricsRegistry) throws -> T) -> T {
            (try? make(registry)) ?? (try! make(fallback))
        }
        tickDuration = family {
            try $0.histogram(
                "allot_tick_duration_seconds",
                help: "Duration of the loop's ticks by phase (inputs, read, observe, classify, decide, assemble, "
                    + "publish, persist (part of publish), review, total)", labelNames: ["phase"], buckets: phaseBuckets
            )
        }
        ticks = family {
            try $0.counter("allot_ticks_total", help: "Ticks run, by outcome (ok, failed)", labelNames: ["outcome"])
        }
        lastTick = family {
            try $0.gauge("allot_tick_last_timestamp_seconds", help: "When the last tick that succeeded ran (Unix time)")
        }
        events = family {
            try $0.counter("allot_tick_events_total", help: "Telemetry events the loop has read")
        }
        snapshotVersion = family {
            try $0.gauge("allot_snapshot_version", help: "The snapshot version being served")
        }
        published = family {
            try $0.counter(
                "allot_snapshots_published_total",
                help: "Snapshot versions published, by kind (tick, shrink, growth, drain)", labelNames: ["kind"])
        }
        checkpointDuration = family {
            try $0.histogram(
                "allot_loop_checkpoint_seconds", help: "Time to encode and save the loop's estimator state",
                buckets: phaseBuckets)
        }
        checkpointBytes = family {
            try $0.gauge("allot_loop_checkpoint_bytes", help: "Size of the last saved estimator state")
        }
        held = family {
            try $0.gauge(
                "allot_snapshot_growth_held",
                help: "1 while make-before-break holds growth back until gateways confirm a shrink")
        }
        leaseLapses = family {
            try $0.counter(
                "allot_lease_lapses_total",
                help: "Ticks that published after the lease of the version in force had run out (every gateway on "
                    + "its fallback floors meanwhile: the service or its loop stopped, stalled or failed for a lease)")
        }
        try? registry.registerGauge(
            "allot_snapshot_watchers", help: "Long-polls waiting for the next snapshot version"
        ) { [publisher] in Double(publisher.watcherCount) }
    }
}
