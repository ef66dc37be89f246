import AllotSignals

/// The counters of one `rollups_minute` row: what one tenant sent to one upstream pool in one task
/// class during one UTC minute (SPEC section 3 "per-minute rollups per tenant and upstream").
///
/// Rollups are what showback (`GET /v1/costs`), spend windows and tenant history read (SPEC
/// section 6, cost governance), and they outlive the raw events (30 days against 24 hours).
/// Every field is additive except the maxima, so rows from several batches (or several minutes)
/// merge with ``merge(_:)``, exactly as the SQL upsert merges them.
public struct MinuteCounters: Sendable, Hashable {
    /// Events of any outcome: the demand (served + denied locally + queued + failed).
    public var requests: Int64 = 0
    public var ok: Int64 = 0
    public var quotaExhausted: Int64 = 0
    public var spendCap: Int64 = 0
    public var overloaded: Int64 = 0
    public var serverError: Int64 = 0
    public var timeout: Int64 = 0
    public var deniedLocal: Int64 = 0
    public var queued: Int64 = 0
    /// Events with `retry` > 0.
    public var retries: Int64 = 0
    /// Sums of the token counts events reported (an absent count adds 0).
    public var promptTokens: Int64 = 0
    public var completionTokens: Int64 = 0
    public var estimatedTokens: Int64 = 0
    /// Events that reported `latency_ms`, their sum and maximum.
    public var latencyCount: Int64 = 0
    public var latencySumMs: Double = 0
    public var latencyMaxMs: Double = 0
    /// Events that reported `queue_ms`, their sum and maximum.
    public var queueCount: Int64 = 0
    public var queueSumMs: Double = 0
    public var queueMaxMs: Double = 0
    /// Latency histogram: counts per bucket with the inclusive upper bounds of
    /// ``latencyBucketBoundsMs``, then one bucket for everything above the last bound.
    public var latencyBuckets: [Int64] = Array(repeating: 0, count: MinuteCounters.latencyBucketBoundsMs.count + 1)

    /// Upper bounds (inclusive, ms) of the histogram buckets: LLM calls take from a few hundred
    /// milliseconds to tens of seconds, so the buckets are coarse and spread over that range.
    public static let latencyBucketBoundsMs: [Double] = [250, 500, 1_000, 2_500, 5_000, 10_000, 30_000]

    public init() {}

    /// Adds one event.
    public mutating func add(_ event: TelemetryEvent) {
        requests += 1
        switch event.outcome {
        case .ok: ok += 1
        case .quotaExhausted: quotaExhausted += 1
        case .spendCap: spendCap += 1
        case .overloaded: overloaded += 1
        case .serverError: serverError += 1
        case .timeout: timeout += 1
        case .deniedLocal: deniedLocal += 1
        case .queued: queued += 1
        }
        if let retry = event.retry, retry > 0 { retries += 1 }
        promptTokens += event.promptTokens ?? 0
        completionTokens += event.completionTokens ?? 0
        estimatedTokens += event.estimatedTokens ?? 0
        if let latency = event.latencyMs {
            latencyCount += 1
            latencySumMs += latency
            latencyMaxMs = max(latencyMaxMs, latency)
            latencyBuckets[Self.bucket(latency)] += 1
        }
        if let queue = event.queueMs {
            queueCount += 1
            queueSumMs += queue
            queueMaxMs = max(queueMaxMs, queue)
        }
    }

    /// Adds another row's counters (sums add, maxima take the larger).
    public mutating func merge(_ other: MinuteCounters) {
        requests += other.requests
        ok += other.ok
        quotaExhausted += other.quotaExhausted
        spendCap += other.spendCap
        overloaded += other.overloaded
        serverError += other.serverError
        timeout += other.timeout
        deniedLocal += other.deniedLocal
        queued += other.queued
        retries += other.retries
        promptTokens += other.promptTokens
        completionTokens += other.completionTokens
        estimatedTokens += other.estimatedTokens
        latencyCount += other.latencyCount
        latencySumMs += other.latencySumMs
        latencyMaxMs = max(latencyMaxMs, other.latencyMaxMs)
        queueCount += other.queueCount
        queueSumMs += other.queueSumMs
        queueMaxMs = max(queueMaxMs, other.queueMaxMs)
        for index in latencyBuckets.indices { latencyBuckets[index] += other.latencyBuckets[index] }
    }

    /// The count for `outcome`.
    public subscript(outcome: Outcome) -> Int64 {
        switch outcome {
        case .ok: ok
        case .quotaExhausted: quotaExhausted
        case .spendCap: spendCap
        case .overloaded: overloaded
        case .serverError: serverError
        case .timeout: timeout
        case .deniedLocal: deniedLocal
        case .queued: queued
        }
    }

    static func bucket(_ latencyMs: Double) -> Int {
        for (index, bound) in latencyBucketBoundsMs.enumerated() where latencyMs <= bound { return index }
        return latencyBucketBoundsMs.count
    }
}

/// The key of a `rollups_minute` row, by names (before interning).
struct RollupKey: Hashable, Sendable {
    var tenant: String
    var upstream: String
    var taskClass: TaskClass
    var minuteMs: Int64
}

/// The UTC minute an instant falls in, as its first millisecond.
@inline(__always)
func minuteStart(_ timestampMs: Int64) -> Int64 {
    let minute: Int64 = 60_000
    let remainder = timestampMs % minute
    return timestampMs - (remainder < 0 ? remainder + minute : remainder)
}
