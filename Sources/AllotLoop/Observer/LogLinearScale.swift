/// The bucket layout of a log-linear histogram: exact unit-wide buckets below `2^subBucketBits`,
/// then `2^subBucketBits` equal sub-buckets per power of two (HdrHistogram's layout at low precision).
///
/// Why: percentiles over a window (latency p95, completion tokens p95) must be cheap to update per
/// event and cheap to merge per tick, without keeping or sorting samples. With 16 sub-buckets a
/// bucket is at most 1/16 of its lower bound wide, so a percentile read at the bucket's middle is
/// within ±3.2 % of the true sample; with 8, within ±6.3 %. Values below the linear range's end are
/// exact (integers stay integers), which is what small token counts and millisecond latencies need.
struct LogLinearScale: Sendable, Hashable {
    /// log2 of the number of sub-buckets per power of two.
    let subBucketBits: Int
    /// Values at or above `2^maxExponent` land in the last bucket.
    let maxExponent: Int

    /// The number of buckets.
    var count: Int { (maxExponent - subBucketBits + 1) << subBucketBits }

    /// The bucket of `value` (negative and NaN values count as 0; huge ones clamp to the last).
    func bucket(of value: Double) -> Int {
        guard value >= 1 else { return 0 }
        let linear = 1 << subBucketBits
        guard value < Double(1 << maxExponent) else { return count - 1 }
        let whole = UInt64(value)
        if whole < UInt64(linear) { return Int(whole) }
        let exponent = 63 - whole.leadingZeroBitCount  // floor(log2(whole)) >= subBucketBits
        let shift = exponent - subBucketBits
        let sub = Int(whole >> UInt64(shift)) - linear  // 0 ..< linear
        return linear + (shift << subBucketBits) + sub
    }

    /// The lower bound and width of bucket `index`.
    func range(of index: Int) -> (lower: Double, width: Double) {
        let linear = 1 << subBucketBits
        if index < linear { return (Double(index), 1) }
        let shift = (index - linear) >> subBucketBits
        let sub = (index - linear) & (linear - 1)
        let width = Double(1 << shift)
        return (Double(linear + sub) * width, width)
    }

    /// The value reported for bucket `index`: its middle. For integer data (`integral`) the middle of
    /// the integers it holds, so a unit-wide bucket reports its exact value.
    func representative(of index: Int, integral: Bool) -> Double {
        let (lower, width) = range(of: index)
        return integral ? lower + (width - 1) / 2 : lower + width / 2
    }

    /// The nearest-rank `quantile` (0…1) of `counts` laid out on this scale from bucket `first` on (a histogram
    /// that stores only the range it uses), nil when empty: the smallest bucket whose cumulative count reaches
    /// ``rank(_:total:)``.
    func quantile<Count: BinaryFloatingPoint>(
        _ quantile: Double, of counts: [Count], total: Double, integral: Bool, first: Int = 0
    ) -> Double? {
        guard total > 0 else { return nil }
        let rank = Self.rank(quantile, total: total)
        var cumulative = 0.0
        var last: Int?
        for index in counts.indices where counts[index] > 0 {
            cumulative += Double(counts[index])
            last = index
            // A relative tolerance: decayed (floating) counts must not miss the rank by a rounding error.
            if cumulative >= rank * (1 - 1e-9) { return representative(of: first + index, integral: integral) }
        }
        return last.map { representative(of: first + $0, integral: integral) }
    }

    /// The nearest rank of `quantile` among samples weighing `total`: `⌈q · total⌉`, at least 1, at most `total`.
    /// Decayed weights are fractional: with one sample of weight 1.5, `⌈0.95 × 1.5⌉` = 2 was never reached, and the
    /// walk fell through to the scale's top bucket — a new tenant's completion p95 read 2,031,615.5 tokens while every
    /// call made 5 (outside evaluation round 32), and a gateway reserving at the p95 admitted one call at a time.
    static func rank(_ quantile: Double, total: Double) -> Double {
        min(total, max(1, (quantile * total).rounded(.up)))
    }

    /// Latencies in milliseconds: 16 sub-buckets, up to 2^24 ms (4.7 hours).
    static let latency = LogLinearScale(subBucketBits: 4, maxExponent: 24)
    /// Token counts and queue waits: 8 sub-buckets, up to 2^21.
    static let compact = LogLinearScale(subBucketBits: 3, maxExponent: 21)
}
