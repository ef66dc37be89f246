/// A monotonically increasing value: requests served, events ingested, seconds of CPU.
///
/// Obtain it once (from `MetricsRegistry.counter` or `CounterFamily.labels`) and keep the handle;
/// `increment` then takes only this series' own lock.
public final class Counter: @unchecked Sendable {
    // Safe to share: `total` is read and written only inside `lock`.
    private let lock = Lock()
    private var total: Double = 0

    init() {}

    /// Adds `amount`. Negative and NaN amounts are ignored: a counter never goes down, and a
    /// single bad observation must not poison the series forever.
    @inline(__always)
    public func increment(by amount: Double = 1) {
        guard amount >= 0 else { return }
        lock.withLock { total += amount }
    }

    /// Integer convenience for `increment(by:)`.
    public func increment(by amount: Int) {
        increment(by: Double(amount))
    }

    /// The current total.
    public var value: Double { lock.withLock { total } }
}

/// A counter with labels: one `Counter` per distinct label-value tuple.
public final class CounterFamily: Sendable {
    /// Name, help, type and label names.
    public let descriptor: MetricDescriptor
    let series: SeriesTable<Counter>

    init(descriptor: MetricDescriptor, limit: CardinalityLimit?) {
        self.descriptor = descriptor
        self.series = SeriesTable(labelCount: descriptor.labelNames.count, limit: limit, make: { Counter() })
    }

    /// The series for these label values (in `labelNames` order), created on first use.
    public func labels(_ values: String...) -> Counter { labels(values) }

    /// The series for these label values (in `labelNames` order), created on first use.
    public func labels(_ values: [String]) -> Counter { series.child(values, family: descriptor.name) }

    /// Drops a series from the exposition.
    public func remove(_ values: String...) { series.remove(values) }

    /// Drops every series.
    public func removeAll() { series.removeAll() }
}

extension CounterFamily: RenderableFamily {
    var limit: CardinalityLimit? { series.limit }
    var foldedLookups: UInt64 { series.folded }

    func render(into out: inout String) -> Bool {
        let all = series.sortedSeries()
        guard !all.isEmpty else { return false }
        Exposition.appendHeader(descriptor, to: &out)
        for (labels, counter) in all {
            Exposition.appendSample(
                name: descriptor.name, labelNames: descriptor.labelNames, labelValues: labels, value: counter.value,
                to: &out)
        }
        return true
    }
}
