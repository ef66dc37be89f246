/// A validated batch with everything the write transaction needs computed in advance: the
/// batch's distinct names, each event's index into them, and the batch's rollup rows.
///
/// Built by ``TelemetryStore/ingest(_:defaultTier:now:)`` on the caller's task, before the batch
/// joins the write queue, so that the per-event hashing runs in parallel across requests and the
/// single writer thread only binds and steps statements (it looks names up once per distinct
/// name, never per event).
struct PreparedBatch: Sendable {
    /// When (in ms) a name was first and last seen in this batch.
    struct SeenRange: Sendable, Equatable {
        var first: Int64
        var last: Int64

        mutating func include(_ timestampMs: Int64) {
            first = min(first, timestampMs)
            last = max(last, timestampMs)
        }
    }

    /// A rollup row's key by the batch's local name indices.
    struct LocalRollupKey: Hashable, Sendable {
        var tenant: Int32
        var upstream: Int32
        var taskClass: Int32
        var minuteMs: Int64

        /// One word into the hasher (see ``RollupRowKey/hash(into:)``).
        func hash(into hasher: inout Hasher) {
            hasher.combine(
                (UInt64(UInt32(bitPattern: tenant)) << 32 | UInt64(UInt32(bitPattern: upstream)))
                    &* 0x9E37_79B9_7F4A_7C15 ^ UInt64(bitPattern: minuteMs) &* 0xC2B2_AE3D_27D4_EB4F
                    ^ UInt64(UInt32(bitPattern: taskClass)))
        }
    }

    var events: [TelemetryEvent]
    /// Distinct names in order of first appearance, with the time range they were seen in.
    var tenants: [(name: String, seen: SeenRange)] = []
    var upstreams: [(name: String, seen: SeenRange)] = []
    var gateways: [String] = []
    var models: [(name: String, firstSeen: Int64)] = []
    /// Per event, the index of its tenant, upstream, gateway and model version (-1: none) in the
    /// arrays above.
    var eventTenant: [Int32] = []
    var eventUpstream: [Int32] = []
    var eventGateway: [Int32] = []
    var eventModel: [Int32] = []
    /// The batch's rollup rows (sums per key).
    var rollups: [LocalRollupKey: MinuteCounters] = [:]
    /// The tier new tenants are registered with (the policy's default tier).
    var defaultTier: String
    /// The server's clock at ingest, for gateways' last contact.
    var receivedMs: Int64
    /// The gateway's idempotency key for the batch, if it sent one.
    var key: TelemetryBatchKey?

    init(_ events: [TelemetryEvent], defaultTier: String, receivedMs: Int64, key: TelemetryBatchKey? = nil) {
        self.key = key
        self.events = events
        self.defaultTier = defaultTier
        self.receivedMs = receivedMs
        // NameIndex rather than [String: Int32]: hashing every event's names with SipHash cost more
        // than the rest of this loop (see NameIndex).
        var tenantIndex = NameIndex(capacity: min(events.count, 4_096))
        var upstreamIndex = NameIndex()
        var gatewayIndex = NameIndex()
        var modelIndex = NameIndex()
        // Sized up front: growing a dictionary rehashes every key, which showed in profiles.
        rollups.reserveCapacity(events.count)
        eventTenant.reserveCapacity(events.count)
        eventUpstream.reserveCapacity(events.count)
        eventGateway.reserveCapacity(events.count)
        eventModel.reserveCapacity(events.count)
        for position in events.indices {
            let ts = events[position].timestampMs
            let (tenant, newTenant) = tenantIndex.index(of: events[position].tenant)
            if newTenant {
                tenants.append((events[position].tenant, SeenRange(first: ts, last: ts)))
            } else {
                tenants[Int(tenant)].seen.include(ts)
            }
            let (upstream, newUpstream) = upstreamIndex.index(of: events[position].upstream)
            if newUpstream {
                upstreams.append((events[position].upstream, SeenRange(first: ts, last: ts)))
            } else {
                upstreams[Int(upstream)].seen.include(ts)
            }
            let (gateway, newGateway) = gatewayIndex.index(of: events[position].gateway)
            if newGateway { gateways.append(events[position].gateway) }
            var model: Int32 = -1
            if let name = events[position].modelVersion {
                let (index, isNew) = modelIndex.index(of: name)
                model = index
                if isNew {
                    models.append((name, ts))
                } else {
                    models[Int(index)].firstSeen = min(models[Int(index)].firstSeen, ts)
                }
            }
            eventTenant.append(tenant)
            eventUpstream.append(upstream)
            eventGateway.append(gateway)
            eventModel.append(model)
            let key = LocalRollupKey(
                tenant: tenant, upstream: upstream, taskClass: Int32(events[position].taskClass.storageCode),
                minuteMs: minuteStart(ts))
            rollups[key, default: MinuteCounters()].add(events[position])
        }
    }
}
