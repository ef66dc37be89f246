/// A histogram on `LogLinearScale.compact` whose old samples fade over the long window: the learned
/// completion-token p50/p95 (the snapshot's `token_estimate`) and the queue-wait p95 per tenant.
///
/// Rather than decaying every bucket every tick, each tick's samples are added with the weight
/// `exp((now − epoch) / τ)` (shared by all histograms, see `ClassifierState.histogramEpoch`): only
/// ratios matter for a quantile, so growing new weights is the same as shrinking old ones, at the cost
/// of one rescale when the weights grow large. Quantiles are cached and recomputed only after new samples.
///
/// Only the buckets from the lowest to the highest one used are stored (`first` onwards): a
/// tenant's completions span a score of the scale's 152 buckets, and two full histograms per tenant
/// were the largest part of its track (6 MB at 10,000 tenants). The buckets outside are zero, which
/// adds nothing to a sum or a rank, so totals and quantiles are the same as over the whole scale.
struct DecayingHistogram: Sendable, Hashable, Codable {
    /// Weighted counts of the buckets `first ..< first + counts.count`; empty until the first sample.
    private(set) var counts: [Float] = []
    private(set) var first = 0
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
        include(bucket)
        counts[bucket - first] += weight
        stale = true
    }

    /// Widens the stored range to hold `bucket`.
    private mutating func include(_ bucket: Int) {
        if counts.isEmpty {
            counts = [0]
            first = bucket
        } else if bucket < first {
            counts.insert(contentsOf: repeatElement(0, count: first - bucket), at: 0)
            first = bucket
        } else if bucket >= first + counts.count {
            counts.append(contentsOf: repeatElement(0, count: bucket + 1 - first - counts.count))
        }
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
        p50 = quantile(0.5, total: total, integral: integral)
        p95 = quantile(0.95, total: total, integral: integral)
    }

    /// `LogLinearScale.quantile` over the stored range.
    private func quantile(_ quantile: Double, total: Double, integral: Bool) -> Double? {
        LogLinearScale.compact.quantile(quantile, of: counts, total: total, integral: integral, first: first)
    }

    /// Equal when every bucket's weight and the cached figures are (however wide the stored range).
    static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.p50 == rhs.p50 && lhs.p95 == rhs.p95 && lhs.refreshedAt == rhs.refreshedAt && lhs.stale == rhs.stale
            && lhs.weights.elementsEqual(rhs.weights, by: ==)
    }

    func hash(into hasher: inout Hasher) {
        for (bucket, weight) in weights { hasher.combine(bucket); hasher.combine(weight) }
        hasher.combine(p50)
        hasher.combine(p95)
        hasher.combine(refreshedAt)
        hasher.combine(stale)
    }

    /// The non-zero buckets and their weights, in bucket order.
    private var weights: some Sequence<(Int, Float)> {
        counts.indices.lazy.filter { counts[$0] != 0 }.map { (first + $0, counts[$0]) }
    }

    private enum CodingKeys: String, CodingKey {
        case buckets, p50, p95, refreshedAt = "refreshed_at", stale
    }

    /// Sparse: `[[bucket, weight], …]` (most of a tenant's buckets are empty).
    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let pairs = try container.decode([[Float]].self, forKey: .buckets)
        for pair in pairs where pair.count == 2 {
            // A damaged state can hold any Float (1e30, NaN): the bucket is checked before it is converted to Int,
            // which would trap.
            guard pair[0] >= 0, pair[0] < Float(LogLinearScale.compact.count), pair[1].isFinite, pair[1] > 0 else {
                continue
            }
            let index = Int(pair[0])
            include(index)
            counts[index - first] = pair[1]
        }
        p50 = try container.decodeIfPresent(Double.self, forKey: .p50)
        p95 = try container.decodeIfPresent(Double.self, forKey: .p95)
        refreshedAt = try container.decodeIfPresent(Double.self, forKey: .refreshedAt)
        stale = try container.decodeIfPresent(Bool.self, forKey: .stale) ?? false
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(
            counts.indices.filter { counts[$0] > 0 }.map { [Float(first + $0), counts[$0]] }, forKey: .buckets)
        try container.encodeIfPresent(p50, forKey: .p50)
        try container.encodeIfPresent(p95, forKey: .p95)
        try container.encodeIfPresent(refreshedAt, forKey: .refreshedAt)
        if stale { try container.encode(stale, forKey: .stale) }
    }
}
