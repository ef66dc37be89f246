/// A value that goes up and down: queue depth, open connections, current allocation.
public final class Gauge: @unchecked Sendable {
    // Safe to share: `current` is read and written only inside `lock`.
    private let lock = Lock()
    private var current: Double = 0

    init() {}

    /// Replaces the value.
    public func set(_ value: Double) {
        lock.withLock { current = value }
    }

    /// Adds `amount` (which may be negative).
    public func increment(by amount: Double = 1) {
        lock.withLock { current += amount }
    }

    /// Subtracts `amount`.
    public func decrement(by amount: Double = 1) {
        lock.withLock { current -= amount }
    }

    /// The current value.
    public var value: Double { lock.withLock { current } }
}

/// A gauge with labels: one `Gauge` per distinct label-value tuple.
public final class GaugeFamily: Sendable {
    /// Name, help, type and label names.
    public let descriptor: MetricDescriptor
    let series: SeriesTable<Gauge>

    init(descriptor: MetricDescriptor, limit: CardinalityLimit?) {
        self.descriptor = descriptor
        self.series = SeriesTable(labelCount: descriptor.labelNames.count, limit: limit, make: { Gauge() })
    }

    /// The series for these label values (in `labelNames` order), created on first use.
    public func labels(_ values: String...) -> Gauge { labels(values) }

    /// The series for these label values (in `labelNames` order), created on first use.
    public func labels(_ values: [String]) -> Gauge { series.child(values, family: descriptor.name) }

    /// Drops a series from the exposition (e.g. a tenant that went away).
    public func remove(_ values: String...) { series.remove(values) }

    /// Drops every series.
    public func removeAll() { series.removeAll() }
}

extension GaugeFamily: RenderableFamily {
    var limit: CardinalityLimit? { series.limit }
    var foldedLookups: UInt64 { series.folded }

    func render(into out: inout String) -> Bool {
        let all = series.sortedSeries()
        guard !all.isEmpty else { return false }
        Exposition.appendHeader(descriptor, to: &out)
        for (labels, gauge) in all {
            Exposition.appendSample(
                name: descriptor.name, labelNames: descriptor.labelNames, labelValues: labels, value: gauge.value,
                to: &out)
        }
        return true
    }
}
