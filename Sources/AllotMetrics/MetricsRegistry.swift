/// A family the registry can render.
protocol RenderableFamily: AnyObject, Sendable {
    var descriptor: MetricDescriptor { get }
    var limit: CardinalityLimit? { get }
    var foldedLookups: UInt64 { get }
    /// Appends HELP, TYPE and samples; returns false (and appends nothing) if there are no series.
    func render(into out: inout String) -> Bool
}

/// One sample produced by a collector at render time.
public struct CollectedSample: Sendable, Equatable {
    /// The family (declared when the collector was registered) this sample belongs to.
    public var family: String
    /// Label values in the family's `labelNames` order.
    public var labelValues: [String]
    /// The value.
    public var value: Double

    /// Creates a sample.
    public init(family: String, labelValues: [String] = [], value: Double) {
        self.family = family
        self.labelValues = labelValues
        self.value = value
    }
}

/// The set of metric families that `GET /metrics` renders (SPEC section 9).
///
/// Register families once at start-up and keep the returned handles: registration validates names
/// and takes the registry lock; an increment on a handle takes only that series' lock. Collectors
/// are callbacks evaluated on each `render()` for values that are cheaper to read than to track
/// (snapshot version, open connections, process memory).
///
/// Output order is deterministic: families sorted by name, series sorted by label values.
/// A family with labels but no series yet is left out until its first series exists.
public final class MetricsRegistry: @unchecked Sendable {
    // Safe to share: `families`, `collectors` and `takenSampleNames` are read and written only
    // inside `lock`. Families and collectors are themselves thread-safe, and `render()` calls them
    // after releasing `lock`, so a collector may use the registry without deadlocking.
    private let lock = Lock()
    private var families: [String: any RenderableFamily] = [:]
    private var collectors: [Collector] = []
    /// Every sample name in use (histograms take three) → the family that owns it.
    private var takenSampleNames: [String: String] = [
        MetricsRegistry.foldedFamilyName: MetricsRegistry.foldedFamilyName
    ]

    private struct Collector {
        let descriptors: [String: MetricDescriptor]
        let collect: @Sendable () -> [CollectedSample]
    }

    /// The `Content-Type` for the response body `render()` produces.
    public static let contentType = Exposition.contentType

    /// The family that counts lookups folded by a `CardinalityLimit`, present once any capped
    /// family exists; one series per capped family, labelled `family`.
    public static let foldedFamilyName = "metrics_label_sets_folded_total"

    /// An empty registry.
    public init() {}

    // MARK: Counters

    /// Registers an unlabelled counter and returns its handle.
    public func counter(_ name: String, help: String) throws(MetricsError) -> Counter {
        try counter(name, help: help, labelNames: []).labels([])
    }

    /// Registers a labelled counter family.
    ///
    /// Registering the same name again with an identical definition returns the existing family.
    public func counter(
        _ name: String, help: String, labelNames: [String], limit: CardinalityLimit? = nil
    ) throws(MetricsError) -> CounterFamily {
        let descriptor = try MetricDescriptor(name: name, help: help, type: .counter, labelNames: labelNames)
        return try register(descriptor, limit: limit, matches: { _ in true }) {
            CounterFamily(descriptor: descriptor, limit: limit)
        }
    }

    // MARK: Gauges

    /// Registers an unlabelled gauge and returns its handle.
    public func gauge(_ name: String, help: String) throws(MetricsError) -> Gauge {
        try gauge(name, help: help, labelNames: []).labels([])
    }

    /// Registers a labelled gauge family.
    public func gauge(
        _ name: String, help: String, labelNames: [String], limit: CardinalityLimit? = nil
    ) throws(MetricsError) -> GaugeFamily {
        let descriptor = try MetricDescriptor(name: name, help: help, type: .gauge, labelNames: labelNames)
        return try register(descriptor, limit: limit, matches: { _ in true }) {
            GaugeFamily(descriptor: descriptor, limit: limit)
        }
    }

    /// Registers a gauge whose value is read from `value` at every render.
    public func registerGauge(_ name: String, help: String, value: @escaping @Sendable () -> Double)
        throws(MetricsError)
    {
        let descriptor = try MetricDescriptor(name: name, help: help, type: .gauge)
        try registerCollector([descriptor]) { [CollectedSample(family: name, value: value())] }
    }

    // MARK: Histograms

    /// Registers an unlabelled histogram and returns its handle.
    public func histogram(
        _ name: String, help: String, buckets: [Double] = Histogram.defaultBuckets
    ) throws(MetricsError) -> Histogram {
        try histogram(name, help: help, labelNames: [], buckets: buckets).labels([])
    }

    /// Registers a labelled histogram family; `buckets` are the finite upper bounds (`+Inf` is added).
    public func histogram(
        _ name: String, help: String, labelNames: [String], buckets: [Double] = Histogram.defaultBuckets,
        limit: CardinalityLimit? = nil
    ) throws(MetricsError) -> HistogramFamily {
        let descriptor = try MetricDescriptor(name: name, help: help, type: .histogram, labelNames: labelNames)
        try Histogram.validate(buckets, metric: name)
        return try register(descriptor, limit: limit, matches: { $0.bounds == buckets }) {
            HistogramFamily(descriptor: descriptor, bounds: buckets, limit: limit)
        }
    }

    // MARK: Collectors

    /// Registers a callback that produces samples for the declared families at every render.
    ///
    /// Samples naming an undeclared family or carrying the wrong number of label values are
    /// skipped (a collector must not be able to corrupt the exposition); if one label set appears
    /// twice, the last sample wins. Collectors run outside the registry lock, one after another,
    /// on the rendering thread: keep them cheap and non-blocking.
    public func registerCollector(
        _ descriptors: [MetricDescriptor], collect: @escaping @Sendable () -> [CollectedSample]
    ) throws(MetricsError) {
        for descriptor in descriptors where descriptor.type == .histogram {
            throw MetricsError(
                code: .invalidParameter, metric: descriptor.name,
                message: "collectors produce counters and gauges only; register a histogram instead")
        }
        let byName = Dictionary(descriptors.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        try lock.withLock { () throws(MetricsError) in
            var claimed = Set<String>()
            for descriptor in descriptors {
                for sample in descriptor.sampleNames
                where takenSampleNames[sample] != nil || !claimed.insert(sample).inserted {
                    throw MetricsError(
                        code: .duplicateName, metric: descriptor.name, message: "\(sample) is already registered")
                }
            }
            for descriptor in descriptors {
                for sample in descriptor.sampleNames { takenSampleNames[sample] = descriptor.name }
            }
            collectors.append(Collector(descriptors: byName, collect: collect))
        }
    }

    // MARK: Rendering

    /// The whole exposition in text format 0.0.4.
    public func render() -> String {
        let (families, collectors) = lock.withLock { (Array(self.families.values), self.collectors) }

        enum Item {
            case family(any RenderableFamily)
            case collected(MetricDescriptor, [(labels: [String], value: Double)])
        }
        var items: [(name: String, item: Item)] = families.map { ($0.descriptor.name, .family($0)) }

        for collector in collectors {
            var byFamily: [String: [[String]: Double]] = [:]
            for sample in collector.collect() {
                guard let descriptor = collector.descriptors[sample.family],
                    sample.labelValues.count == descriptor.labelNames.count
                else { continue }
                byFamily[sample.family, default: [:]][sample.labelValues] = sample.value
            }
            for (name, descriptor) in collector.descriptors {
                let samples = (byFamily[name] ?? [:]).map { (labels: $0.key, value: $0.value) }
                items.append((name, .collected(descriptor, samples)))
            }
        }

        let capped = families.filter { $0.limit != nil }
        if !capped.isEmpty {
            let descriptor = try! MetricDescriptor(
                name: MetricsRegistry.foldedFamilyName,
                help: "Label-set lookups folded into the \"other\" series by a series cap.",
                type: .counter, labelNames: ["family"])
            let samples = capped.map { (labels: [$0.descriptor.name], value: Double($0.foldedLookups)) }
            items.append((descriptor.name, .collected(descriptor, samples)))
        }

        items.sort { $0.name < $1.name }
        var out = ""
        out.reserveCapacity(4096)
        for (_, item) in items {
            switch item {
            case .family(let family):
                _ = family.render(into: &out)
            case .collected(let descriptor, let samples):
                guard !samples.isEmpty else { continue }
                Exposition.appendHeader(descriptor, to: &out)
                for sample in samples.sorted(by: { labelValuesPrecede($0.labels, $1.labels) }) {
                    Exposition.appendSample(
                        name: descriptor.name, labelNames: descriptor.labelNames, labelValues: sample.labels,
                        value: sample.value, to: &out)
                }
            }
        }
        return out
    }

    // MARK: Registration

    /// Registers a family, or returns the existing one if its definition is identical.
    private func register<Family: RenderableFamily>(
        _ descriptor: MetricDescriptor, limit: CardinalityLimit?, matches: (Family) -> Bool,
        make: () -> Family
    ) throws(MetricsError) -> Family {
        if let limit, limit.maxSeries < 1 {
            throw MetricsError(
                code: .invalidParameter, metric: descriptor.name,
                message: "a cardinality limit needs maxSeries >= 1, got \(limit.maxSeries)")
        }
        return try lock.withLock { () throws(MetricsError) -> Family in
            if let existing = families[descriptor.name] {
                if let same = existing as? Family, same.descriptor == descriptor, same.limit == limit, matches(same) {
                    return same
                }
                throw MetricsError(
                    code: .duplicateName, metric: descriptor.name,
                    message: "already registered with a different type, help, labels, buckets or limit")
            }
            for sample in descriptor.sampleNames {
                if let owner = takenSampleNames[sample] {
                    throw MetricsError(
                        code: .duplicateName, metric: descriptor.name,
                        message: "sample name \(sample) is already used by \(owner)")
                }
            }
            let family = make()
            families[descriptor.name] = family
            for sample in descriptor.sampleNames { takenSampleNames[sample] = descriptor.name }
            return family
        }
    }
}
