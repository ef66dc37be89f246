/// A validated batch with everything the write transaction needs computed in advance: the rollup
/// rows and the distinct names with their time ranges.
///
/// Built by ``TelemetryStore/ingest(_:defaultTier:now:)`` on the caller's task, before the batch
/// joins the write queue, so that this per-event work runs in parallel across requests and the
/// single writer thread only binds and steps statements.
struct PreparedBatch: Sendable {
    /// When (in ms) an interned name was first and last seen in this batch.
    struct SeenRange: Sendable {
        var first: Int64
        var last: Int64

        mutating func include(_ timestampMs: Int64) {
            first = min(first, timestampMs)
            last = max(last, timestampMs)
        }
    }

    var events: [TelemetryEvent]
    /// Rollup rows keyed by names; summed per key over the batch.
    var rollups: [(key: RollupKey, counters: MinuteCounters)]
    var tenants: [String: SeenRange]
    var upstreams: [String: SeenRange]
    var gateways: [String]
    var models: [String: Int64]
    /// The tier new tenants are registered with (the policy's default tier).
    var defaultTier: String
    /// The server's clock at ingest, for gateways' last contact.
    var receivedMs: Int64

    init(_ events: [TelemetryEvent], defaultTier: String, receivedMs: Int64) {
        self.events = events
        self.defaultTier = defaultTier
        self.receivedMs = receivedMs
        var rollupIndex: [RollupKey: Int] = [:]
        var rollups: [(key: RollupKey, counters: MinuteCounters)] = []
        var tenants: [String: SeenRange] = [:]
        var upstreams: [String: SeenRange] = [:]
        var gateways: Set<String> = []
        var models: [String: Int64] = [:]
        for event in events {
            let key = RollupKey(
                tenant: event.tenant, upstream: event.upstream, taskClass: event.taskClass,
                minuteMs: minuteStart(event.timestampMs))
            if let index = rollupIndex[key] {
                rollups[index].counters.add(event)
            } else {
                var counters = MinuteCounters()
                counters.add(event)
                rollupIndex[key] = rollups.count
                rollups.append((key, counters))
            }
            let ts = event.timestampMs
            tenants[event.tenant, default: SeenRange(first: ts, last: ts)].include(ts)
            upstreams[event.upstream, default: SeenRange(first: ts, last: ts)].include(ts)
            gateways.insert(event.gateway)
            if let model = event.modelVersion { models[model] = min(models[model] ?? ts, ts) }
        }
        self.rollups = rollups
        self.tenants = tenants
        self.upstreams = upstreams
        self.gateways = gateways.sorted()
        self.models = models
    }
}
