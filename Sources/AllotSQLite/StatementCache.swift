/// Prepared statements kept by SQL text, bounded, least recently used evicted first.
///
/// Preparing is the expensive part of running a short statement (parsing and planning), and the
/// service runs the same few dozen statements every tick and every batch, so keeping them
/// prepared pays. The bound keeps ad-hoc SQL (tools, tests) from growing memory without limit.
/// Eviction scans the entries, which is cheap at the small capacities used here.
struct StatementCache {
    private struct Entry {
        let statement: SQLiteStatement
        var lastUse: UInt64
    }

    let capacity: Int
    private var entries: [String: Entry] = [:]
    private var clock: UInt64 = 0

    init(capacity: Int) {
        self.capacity = max(0, capacity)
    }

    var count: Int { entries.count }

    /// The cached statement for `sql`, marked as just used, or nil.
    mutating func statement(for sql: String) -> SQLiteStatement? {
        // One hash of the SQL text per lookup: `connection.run(sql, …)` in a loop does this per row.
        guard let index = entries.index(forKey: sql) else { return nil }
        clock &+= 1
        entries.values[index].lastUse = clock
        return entries.values[index].statement
    }

    /// Keeps `statement`, evicting the least recently used one when full. An evicted statement
    /// is finalized when its last user releases it.
    mutating func insert(_ statement: SQLiteStatement) {
        guard capacity > 0 else { return }
        if entries[statement.sql] == nil, entries.count >= capacity,
            let oldest = entries.min(by: { $0.value.lastUse < $1.value.lastUse })?.key
        {
            entries[oldest] = nil
        }
        clock &+= 1
        entries[statement.sql] = Entry(statement: statement, lastUse: clock)
    }

    /// Finalizes and forgets every statement (before the connection closes).
    mutating func removeAll() {
        for entry in entries.values { entry.statement.finalize() }
        entries.removeAll()
    }
}
