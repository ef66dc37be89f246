/// How a ``SQLiteConnection`` is opened and configured.
///
/// The defaults are the service's: create the file if needed, write-ahead logging, `FULL`
/// synchronous commits, foreign keys enforced, a 5-second busy timeout.
public struct SQLiteConfiguration: Sendable, Equatable {
    /// `PRAGMA synchronous`: when SQLite waits for the disk.
    ///
    /// SQLite documentation: <https://www.sqlite.org/pragma.html#pragma_synchronous>
    public enum Synchronous: String, Sendable, Equatable {
        /// Every commit is fsynced before it returns, so an acknowledged write survives a power
        /// loss, not only a crash of the process. The default: SPEC section 3 promises that a `2xx`
        /// means the telemetry batch is durably committed.
        case full = "FULL"
        /// In WAL mode, commits survive a crash of the process (`kill -9`) but the last ones may be
        /// lost on power loss; the database stays consistent either way. Faster commits.
        case normal = "NORMAL"
        /// No fsync at all. Only for throwaway databases (simulations, tests); never for `serve`.
        case off = "OFF"
    }

    /// Open the connection read-only (`SQLITE_OPEN_READONLY`): used for reader connections,
    /// which then cannot take the write lock by mistake.
    public var readOnly: Bool
    /// Create the database file if it does not exist (ignored when ``readOnly``).
    public var create: Bool
    /// `PRAGMA synchronous` for writer connections.
    public var synchronous: Synchronous
    /// How long a statement waits for another connection's lock before failing with
    /// `SQLITE_BUSY`, in milliseconds (`sqlite3_busy_timeout`). Bounds every wait on a lock, so a
    /// locked database produces an error instead of a hang.
    public var busyTimeoutMilliseconds: Int32
    /// How many prepared statements the connection keeps, keyed by SQL text (least recently
    /// used evicted first). Statements that run once per tick or per batch stay prepared.
    public var statementCacheCapacity: Int

    /// - Parameters:
    ///   - readOnly: Open read-only. Default `false`.
    ///   - create: Create the file if missing. Default `true`.
    ///   - synchronous: Commit durability. Default ``Synchronous/full``.
    ///   - busyTimeoutMilliseconds: Lock wait bound. Default 5000.
    ///   - statementCacheCapacity: Prepared statements kept. Default 64.
    public init(
        readOnly: Bool = false,
        create: Bool = true,
        synchronous: Synchronous = .full,
        busyTimeoutMilliseconds: Int32 = 5000,
        statementCacheCapacity: Int = 64
    ) {
        self.readOnly = readOnly
        self.create = create
        self.synchronous = synchronous
        self.busyTimeoutMilliseconds = busyTimeoutMilliseconds
        self.statementCacheCapacity = statementCacheCapacity
    }
}
