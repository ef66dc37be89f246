/// A histogram on `LogLinearScale.compact` whose old samples fade over the long window: the learned
/// completion-token p50/p95 (the snapshot's `token_estimate`) and the queue-wait p95 per tenant.
///
/// Rather than decaying every bucket every tick, each tick's samples are added with the weight
/// `exp((now − epoch) / τ)` (shared by all histograms, see `ClassifierState.histogramEpoch`): only
/// ratios matter for a quantile, so growing new weights is the same as shrinking old ones, at the cost
/// of one rescale when the weights grow large. Quantiles are cached and recomputed only after new samples.
struct DecayingHistogram: Sendable, Hashable, Codable {
    /// Weighted counts per bucket; empty until the first sample.
    private(set) var counts: [Float] = []
    private(set) var p50: Double?
    private(set) var p95: Double?
    /// When the quantiles were last computed (they are recomputed at most every `refreshSeconds`).
    private var refreshedAt: Double?
    private var stale = false

    /// The token estimate and queue-wait figures need no per-tick freshness; a scan per tenant per
    /// tick would cost more than all the rest of its tick.
    static let refreshSeconds = 15.0

    init() {}

    mutating func add(_ value: Double, weight: Float) {
        add(bucket: LogLinearScale.compact.bucket(of: value), weight: weight)
    }

    mutating func add(bucket: Int, weight: Float) {
        if counts.isEmpty { counts = Array(repeating: 0, count: LogLinearScale.compact.count) }
        counts[bucket] += weight
        stale = true
    }

    /// Multiplies every weight (when the shared epoch moves).
    mutating func rescale(_ factor: Float) {
        for index in counts.indices { counts[index] *= factor }
    }

    /// Recomputes the cached quantiles after new samples, at most every `refreshSeconds` once known.
    /// `integral`: the samples are whole numbers.
    mutating func refresh(integral: Bool, now: Double) {
        guard stale, p50 == nil || now - (refreshedAt ?? -Double.infinity) >= Self.refreshSeconds else { return }
        stale = false
        refreshedAt = now
        let total = counts.reduce(0.0) { $0 + Double($1) }
        p50 = LogLinearScale.compact.quantile(0.5, of: counts, total: total, integral: integral)
        p95 = LogLinearScale.compact.quantile(0.95, of: counts, total: total, integral: integral)
    }

    private enum CodingKeys: String, CodingKey {
        case buckets, p50, p95, refreshedAt = "refreshed_at", stale
    }

    /// Sparse: `[[bucket, weight], …]` (most of a tenant's buckets are empty).
    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let pairs = try container.decode([[Float]].self, forKey: .buckets)
        for pair in pairs where pair.count == 2 {
            let index = Int(pair[0])
            guard index >= 0, index < LogLinearScale.compact.count, pair[1].isFinite, pair[1] > 0 else { continue }
            if counts.isEmpty { counts = Array(repeating: 0, count: LogLinearScale.compact.count) }
            counts[index] = pair[1]
        }
        p50 = try container.decodeIfPresent(Double.self, forKey: .p50)
        p95 = try container.decodeIfPresent(Double.self, forKey: .p95)
        refreshedAt = try container.decodeIfPresent(Double.self, forKey: .refreshedAt)
        stale = try container.decodeIfPresent(Bool.self, forKey: .stale) ?? false
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(
            counts.indices.filter { counts[$0] > 0 }.map { [Float($0), counts[$0]] }, forKey: .buckets)
        try container.encodeIfPresent(p50, forKey: .p50)
        try container.encodeIfPresent(p95, forKey: .p95)
        try container.encodeIfPresent(refreshedAt, forKey: .refreshedAt)
        if stale { try container.encode(stale, forKey: .stale) }
    }
}
