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
    /// The same sums over served events (`ok`) alone: what the provider bills, which showback and spend price.
    /// (Rows written before migration 0008 hold every event's tokens here.)
    public var servedPromptTokens: Int64 = 0
    public var servedCompletionTokens: Int64 = 0
    /// Events that reported `latency_ms`, their sum and maximum.
    public var latencyCount: Int64 = 0
    public var latencySumMs: Double = 0
    public var latencyMaxMs: Double = 0
    /// Events that reported `queue_ms`, their sum and maximum.
    public var queueCount: Int64 = 0
    public var queueSumMs: Double = 0
    public var queueMaxMs: Double = 0
    /// Latency histogram: counts per bucket with the inclusive upper bounds of
    /// ``latencyBucketBoundsMs``, then one bucket for everything above the last bound (eight in all).
    public var latencyBuckets: [Int64] {
        get { [bucket0, bucket1, bucket2, bucket3, bucket4, bucket5, bucket6, bucket7] }
        set {
            precondition(newValue.count == 8, "eight latency buckets")
            (bucket0, bucket1, bucket2, bucket3) = (newValue[0], newValue[1], newValue[2], newValue[3])
            (bucket4, bucket5, bucket6, bucket7) = (newValue[4], newValue[5], newValue[6], newValue[7])
        }
    }
    /// Calls `body` with each bucket's index and count, in order, without making an array (the
    /// rollup flush binds them for every row it writes).
    func forEachLatencyBucket<E: Error>(_ body: (Int, Int64) throws(E) -> Void) throws(E) {
        try body(0, bucket0)
        try body(1, bucket1)
        try body(2, bucket2)
        try body(3, bucket3)
        try body(4, bucket4)
        try body(5, bucket5)
        try body(6, bucket6)
        try body(7, bucket7)
    }

    // Stored as fields, not an array: counters are built per rollup key per batch on the hot path,
    // and a fixed-size value needs no allocation.
    private var bucket0: Int64 = 0
    private var bucket1: Int64 = 0
    private var bucket2: Int64 = 0
    private var bucket3: Int64 = 0
    private var bucket4: Int64 = 0
    private var bucket5: Int64 = 0
    private var bucket6: Int64 = 0
    private var bucket7: Int64 = 0

    /// Upper bounds (inclusive, ms) of the histogram buckets: LLM calls take from a few hundred
    /// milliseconds to tens of seconds, so the buckets are coarse and spread over that range.
    /// (The same bounds are written out in ``add(_:)`` and in the rollup recovery SQL.)
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
        if event.outcome == .ok {
            servedPromptTokens += event.promptTokens ?? 0
            servedCompletionTokens += event.completionTokens ?? 0
        }
        if let latency = event.latencyMs {
            latencyCount += 1
            latencySumMs += latency
            latencyMaxMs = max(latencyMaxMs, latency)
            switch latency {
            case ...250: bucket0 += 1
            case ...500: bucket1 += 1
            case ...1_000: bucket2 += 1
            case ...2_500: bucket3 += 1
            case ...5_000: bucket4 += 1
            case ...10_000: bucket5 += 1
            case ...30_000: bucket6 += 1
            default: bucket7 += 1
            }
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
        servedPromptTokens += other.servedPromptTokens
        servedCompletionTokens += other.servedCompletionTokens
        latencyCount += other.latencyCount
        latencySumMs += other.latencySumMs
        latencyMaxMs = max(latencyMaxMs, other.latencyMaxMs)
        queueCount += other.queueCount
        queueSumMs += other.queueSumMs
        queueMaxMs = max(queueMaxMs, other.queueMaxMs)
        bucket0 += other.bucket0
        bucket1 += other.bucket1
        bucket2 += other.bucket2
        bucket3 += other.bucket3
        bucket4 += other.bucket4
        bucket5 += other.bucket5
        bucket6 += other.bucket6
        bucket7 += other.bucket7
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

}

/// The key of a `rollups_minute` row, by interned refs.
struct RollupRowKey: Hashable, Sendable {
    var tenant: Int64
    var upstream: Int64
    var taskClass: Int32
    var minuteMs: Int64

    /// One word into the hasher instead of four: every event's rollup row is looked up twice (per
    /// batch, then in the store's pending rows), and each word fed to `Hasher` costs a SipHash round.
    /// Equality still compares every field.
    func hash(into hasher: inout Hasher) {
        hasher.combine(
            UInt64(bitPattern: tenant) &* 0x9E37_79B9_7F4A_7C15 ^ UInt64(bitPattern: upstream) &* 0xC2B2_AE3D_27D4_EB4F
                ^ UInt64(bitPattern: minuteMs) &* 0x1656_67B1_9E37_79F9 ^ UInt64(UInt32(bitPattern: taskClass)))
    }
}

/// The UTC minute an instant falls in, as its first millisecond.
@inline(__always)
func minuteStart(_ timestampMs: Int64) -> Int64 {
    let minute: Int64 = 60_000
    let remainder = timestampMs % minute
    return timestampMs - (remainder < 0 ? remainder + minute : remainder)
}
