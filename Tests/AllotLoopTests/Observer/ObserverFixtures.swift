import AllotCore
import AllotSignals
import AllotStore

@testable import AllotLoop

/// Builds telemetry deltas the way the loop reads them: interned refs, row ids in order.
struct TelemetryScript {
    private(set) var names = TelemetryNames()
    private var nextRow: Int64 = 1
    private var refs: [String: Int64] = [:]

    /// A stable ref per name (refs are shared across kinds, like distinct tables would not be; harmless).
    private mutating func ref(_ name: String) -> Int64 {
        if let ref = refs[name] { return ref }
        let ref = Int64(refs.count + 1)
        refs[name] = ref
        return ref
    }

    /// One event; `at` in seconds since the epoch.
    mutating func event(
        at: Double, tenant: String = "acme", upstream: String = "openai/gpt-4o", gateway: String = "gw-1",
        outcome: Outcome = .ok, taskClass: TaskClass = .interactive, status: Int? = nil, latencyMs: Double? = nil,
        queueMs: Double? = nil, prompt: Int64? = nil, completion: Int64? = nil, estimated: Int64? = nil,
        retry: Int? = nil, taskID: String? = nil, modelVersion: String? = nil, errorType: String? = nil,
        signals: EventSignals = EventSignals(), unparseableHeaders: Int = 0
    ) -> StoredEvent {
        let tenantRef = ref("tenant:" + tenant)
        let upstreamRef = ref("upstream:" + upstream)
        let gatewayRef = ref("gateway:" + gateway)
        let ms = Int64((at * 1000).rounded())
        names.tenants[tenantRef] = TenantRecord(
            ref: tenantRef, id: tenant, tier: "standard", firstSeenMs: ms, lastSeenMs: ms)
        names.upstreams[upstreamRef] = NamedRecord(ref: upstreamRef, id: upstream, firstSeenMs: ms, lastSeenMs: ms)
        names.gateways[gatewayRef] = NamedRecord(ref: gatewayRef, id: gateway, firstSeenMs: ms, lastSeenMs: ms)
        var versionRef: Int64?
        if let modelVersion {
            let ref = ref("model:" + modelVersion)
            names.modelVersions[ref] = NamedRecord(ref: ref, id: modelVersion, firstSeenMs: ms, lastSeenMs: nil)
            versionRef = ref
        }
        defer { nextRow += 1 }
        return StoredEvent(
            id: nextRow, timestampMs: ms, tenant: tenantRef, upstream: upstreamRef, gateway: gatewayRef,
            outcome: outcome, taskClass: taskClass, status: status, latencyMs: latencyMs, queueMs: queueMs,
            promptTokens: prompt, completionTokens: completion, estimatedTokens: estimated, retry: retry,
            taskID: taskID, modelVersion: versionRef, errorType: errorType, signals: signals,
            unparseableHeaders: unparseableHeaders)
    }

    /// `count` events spread evenly over `[from, to)`, built by `make(time)`.
    mutating func spread(
        _ count: Int, from: Double, to: Double, _ make: (inout TelemetryScript, Double) -> StoredEvent
    ) -> [StoredEvent] {
        (0..<count).map { index in make(&self, from + (to - from) * Double(index) / Double(count)) }
    }

    /// The delta of the events `build` makes (names included: `delta(make(&script))` would read the
    /// names before `make` added its own).
    mutating func delta(_ build: (inout TelemetryScript) -> [StoredEvent]) -> TelemetryDelta {
        let events = build(&self)
        return delta(events)
    }

    /// The delta of `events`, with the names known so far.
    func delta(_ events: [StoredEvent]) -> TelemetryDelta {
        TelemetryDelta(events: events, names: names, lastEventID: events.map(\.id).max() ?? 0)
    }
}

enum ObserverFixtures {
    /// 2027-01-15T08:00:00Z: a whole minute (and 5 s slice) boundary, so windows are exact.
    static let t0 = 1_800_000_000.0
    static let pool = "openai/gpt-4o"

    /// A policy declaring `pool` with the given capacity.
    static func policy(rpm: Double? = nil, tpm: Double? = nil, observer: ObserverSettings = ObserverSettings())
        -> Policy
    {
        var policy = Policy(observer: observer)
        if rpm != nil || tpm != nil {
            policy.setUpstream(UpstreamPolicy(id: pool, capacity: PerDimension(rpm: rpm, tpm: tpm)))
        }
        return policy
    }

    /// OpenAI-style limits and remaining amounts.
    static func openAI(
        limitRequests: Int64 = 1000, remainingRequests: Int64? = nil, limitTokens: Int64 = 200_000,
        remainingTokens: Int64? = nil, resetMs: Int64? = nil
    ) -> EventSignals {
        EventSignals(
            family: .openai, limitRequests: limitRequests, remainingRequests: remainingRequests,
            resetRequestsMs: remainingRequests == nil ? nil : resetMs, limitTokens: limitTokens,
            remainingTokens: remainingTokens, resetTokensMs: remainingTokens == nil ? nil : resetMs)
    }

    static func status(_ report: ObserverReport, _ upstream: String = pool) -> UpstreamStatus? {
        report.upstreams.first { $0.upstream == upstream }
    }

    static func alerts(_ report: ObserverReport, kind: String) -> [LoopAlert] {
        report.alerts.filter { $0.kind == kind }
    }
}
