/// How many series a labelled family may hold, and what happens beyond that.
///
/// Label values such as tenant ids are unbounded; without a cap a misbehaving client could grow
/// `/metrics` (and our memory) without limit. Series are admitted first come, first served up to
/// `maxSeries`. After that, every new label set is *folded*: its lookup returns the one shared
/// overflow series whose label values are all `CardinalityLimit.overflowValue` ("other"), so
/// totals still add up. Folded lookups are counted in `metrics_label_sets_folded_total{family=…}`.
/// The overflow series does not count against the cap. A genuine label value "other" shares it.
public struct CardinalityLimit: Sendable, Equatable {
    /// The label value used for every label of the overflow series.
    public static let overflowValue = "other"

    /// Distinct label sets admitted before folding starts (at least 1).
    public var maxSeries: Int

    /// A cap of `maxSeries` distinct label sets.
    public init(maxSeries: Int) {
        self.maxSeries = maxSeries
    }
}

/// The series of one labelled family: label values → child, behind one per-family lock.
///
/// The lock is taken only to look a child up or create one; callers keep the child handle and
/// update it under the child's own lock, so hot paths never contend on the family.
final class SeriesTable<Child: AnyObject & Sendable>: @unchecked Sendable {
    // Safe to share: `entries`, `admitted` and `foldedLookups` are read and written only inside
    // `lock`; everything else is immutable after init.
    private struct Entry {
        let child: Child
        /// Whether this series holds one of the `maxSeries` places (the overflow series does not).
        let counted: Bool
    }

    private let lock = Lock()
    private var entries: [[String]: Entry] = [:]
    private var admitted = 0
    private var foldedLookups: UInt64 = 0
    let labelCount: Int
    let limit: CardinalityLimit?
    private let make: @Sendable () -> Child

    init(labelCount: Int, limit: CardinalityLimit?, make: @escaping @Sendable () -> Child) {
        self.labelCount = labelCount
        self.limit = limit
        self.make = make
    }

    /// The child for `values`, created on first use (or the overflow child once the cap is reached).
    ///
    /// A wrong number of label values is a programming error, like an index out of range.
    func child(_ values: [String], family: String) -> Child {
        precondition(
            values.count == labelCount,
            "\(family) takes \(labelCount) label value(s), got \(values.count): \(values)")
        return lock.withLock {
            if let existing = entries[values] { return existing.child }
            if let limit, admitted >= limit.maxSeries {
                foldedLookups += 1
                let overflow = [String](repeating: CardinalityLimit.overflowValue, count: labelCount)
                if let existing = entries[overflow] { return existing.child }
                let child = make()
                entries[overflow] = Entry(child: child, counted: false)
                return child
            }
            let child = make()
            entries[values] = Entry(child: child, counted: true)
            admitted += 1
            return child
        }
    }

    /// Forgets a series (e.g. a tenant that no longer exists), freeing its place under the cap.
    func remove(_ values: [String]) {
        lock.withLock {
            if let removed = entries.removeValue(forKey: values), removed.counted {
                admitted -= 1
            }
        }
    }

    /// Forgets every series.
    func removeAll() {
        lock.withLock {
            entries.removeAll()
            admitted = 0
        }
    }

    /// All series sorted by label values.
    func sortedSeries() -> [(labels: [String], child: Child)] {
        let all = lock.withLock { entries.map { (labels: $0.key, child: $0.value.child) } }
        return all.sorted { labelValuesPrecede($0.labels, $1.labels) }
    }

    /// How many lookups were folded into the overflow series so far.
    var folded: UInt64 { lock.withLock { foldedLookups } }
}
