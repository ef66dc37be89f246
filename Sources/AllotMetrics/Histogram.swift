/// A distribution of observations in cumulative buckets: latencies, batch sizes, tick durations.
///
/// An observation `v` lands in the first bucket whose upper bound satisfies `v <= bound`
/// (Prometheus buckets are "less than or equal"), or in `+Inf`. The exposition writes each
/// bucket as the cumulative count of observations `<=` its bound, then `_sum` and `_count`.
public final class Histogram: @unchecked Sendable {
    /// Prometheus' default bounds, in seconds, suited to request latencies.
    public static let defaultBuckets: [Double] = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

    /// `count` bounds starting at `start`, each `factor` times the previous.
    public static func exponentialBuckets(start: Double, factor: Double, count: Int) -> [Double] {
        precondition(
            start > 0 && factor > 1 && count >= 1, "exponentialBuckets needs start > 0, factor > 1, count >= 1")
        var bounds: [Double] = []
        var bound = start
        for _ in 0..<count {
            bounds.append(bound)
            bound *= factor
        }
        return bounds
    }

    /// `count` bounds starting at `start`, `width` apart.
    public static func linearBuckets(start: Double, width: Double, count: Int) -> [Double] {
        precondition(width > 0 && count >= 1, "linearBuckets needs width > 0, count >= 1")
        return (0..<count).map { start + Double($0) * width }
    }

    /// Finite, strictly increasing upper bounds; `+Inf` is implicit.
    public let bounds: [Double]
    // Safe to share: `counts`, `sum` and `count` are read and written only inside `lock`;
    // `bounds` is immutable.
    private let lock = Lock()
    /// Non-cumulative counts per bucket; the last element is the `+Inf` bucket.
    private var counts: [UInt64]
    private var sum: Double = 0
    private var count: UInt64 = 0

    init(bounds: [Double]) {
        self.bounds = bounds
        self.counts = [UInt64](repeating: 0, count: bounds.count + 1)
    }

    /// Records one observation. NaN is ignored (it would make `_sum` NaN forever).
    public func observe(_ value: Double) {
        guard !value.isNaN else { return }
        // Binary search for the first bound >= value.
        var low = 0
        var high = bounds.count
        while low < high {
            let mid = (low + high) / 2
            if value <= bounds[mid] { high = mid } else { low = mid + 1 }
        }
        lock.withLock {
            counts[low] += 1
            sum += value
            count += 1
        }
    }

    /// A consistent copy of the current state.
    public var snapshot: HistogramSnapshot {
        let (counts, sum, count) = lock.withLock { (self.counts, self.sum, self.count) }
        var cumulative: [UInt64] = []
        cumulative.reserveCapacity(counts.count)
        var running: UInt64 = 0
        for bucket in counts {
            running += bucket
            cumulative.append(running)
        }
        return HistogramSnapshot(bounds: bounds, cumulativeCounts: cumulative, sum: sum, count: count)
    }

    /// Checks bounds for registration.
    static func validate(_ bounds: [Double], metric: String) throws(MetricsError) {
        guard !bounds.isEmpty else {
            throw MetricsError(code: .invalidBuckets, metric: metric, message: "a histogram needs at least one bucket")
        }
        for (index, bound) in bounds.enumerated() {
            guard bound.isFinite else {
                throw MetricsError(
                    code: .invalidBuckets, metric: metric,
                    message: "bucket bounds must be finite (+Inf is added automatically), got \(bound)")
            }
            if index > 0 && bound <= bounds[index - 1] {
                throw MetricsError(
                    code: .invalidBuckets, metric: metric,
                    message: "bucket bounds must be strictly increasing, got \(bounds[index - 1]) then \(bound)")
            }
        }
    }
}

/// A point-in-time copy of a histogram.
public struct HistogramSnapshot: Sendable, Equatable {
    /// The finite upper bounds.
    public let bounds: [Double]
    /// Observations `<=` each bound, then the `+Inf` total (`bounds.count + 1` elements).
    public let cumulativeCounts: [UInt64]
    /// Sum of all observations.
    public let sum: Double
    /// Number of observations.
    public let count: UInt64
}

/// A histogram with labels: one `Histogram` per distinct label-value tuple, all with the same buckets.
public final class HistogramFamily: Sendable {
    /// Name, help, type and label names.
    public let descriptor: MetricDescriptor
    /// The finite bucket bounds shared by every series.
    public let bounds: [Double]
    let series: SeriesTable<Histogram>

    init(descriptor: MetricDescriptor, bounds: [Double], limit: CardinalityLimit?) {
        self.descriptor = descriptor
        self.bounds = bounds
        self.series = SeriesTable(
            labelCount: descriptor.labelNames.count, limit: limit, make: { Histogram(bounds: bounds) })
    }

    /// The series for these label values (in `labelNames` order), created on first use.
    public func labels(_ values: String...) -> Histogram { labels(values) }

    /// The series for these label values (in `labelNames` order), created on first use.
    public func labels(_ values: [String]) -> Histogram { series.child(values, family: descriptor.name) }

    /// Drops a series from the exposition.
    public func remove(_ values: String...) { series.remove(values) }

    /// Drops every series.
    public func removeAll() { series.removeAll() }
}

extension HistogramFamily: RenderableFamily {
    var limit: CardinalityLimit? { series.limit }
    var foldedLookups: UInt64 { series.folded }

    func render(into out: inout String) -> Bool {
        let all = series.sortedSeries()
        guard !all.isEmpty else { return false }
        Exposition.appendHeader(descriptor, to: &out)
        let bucketName = descriptor.name + "_bucket"
        let sumName = descriptor.name + "_sum"
        let countName = descriptor.name + "_count"
        let leValues = bounds.map(Exposition.format) + ["+Inf"]
        for (labels, histogram) in all {
            let snapshot = histogram.snapshot
            for (le, cumulative) in zip(leValues, snapshot.cumulativeCounts) {
                Exposition.appendSample(
                    name: bucketName, labelNames: descriptor.labelNames, labelValues: labels, extra: ("le", le),
                    value: Double(cumulative), to: &out)
            }
            Exposition.appendSample(
                name: sumName, labelNames: descriptor.labelNames, labelValues: labels, value: snapshot.sum, to: &out)
            Exposition.appendSample(
                name: countName, labelNames: descriptor.labelNames, labelValues: labels,
                value: Double(snapshot.count), to: &out)
        }
        return true
    }
}
