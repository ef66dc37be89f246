import CSQLite

/// One SQLite database connection (`sqlite3*`).
///
/// Not `Sendable`, by design: a connection is opened with `SQLITE_OPEN_NOMUTEX` (SQLite's
/// "multi-thread" mode, no per-call mutex) and must only be used by one owner at a time. In the
/// service that owner is a ``DatabaseQueue`` actor, which runs every use on its own serial
/// dispatch queue; tests and command-line tools may use a connection directly.
///
/// Opening configures the connection for Allot (see ``init(path:configuration:)``). Statements
/// are prepared once and kept by SQL text (``cachedStatement(_:)``), so running the same SQL
/// again only binds and steps.
///
/// Every failure throws a ``SQLiteError``; after ``close()`` every call throws one with
/// `SQLITE_MISUSE` ("the database connection is closed").
///
/// SQLite documentation: <https://www.sqlite.org/c3ref/sqlite3.html>
public final class SQLiteConnection {
    /// The path given at open (`:memory:` for a private in-memory database).
    public let path: String
    /// The configuration the connection was opened with.
    public let configuration: SQLiteConfiguration

    let handle: ConnectionHandle
    private var cache: StatementCache
    /// How many `transaction` calls are running (1 = the outer transaction, more = savepoints).
    var transactionDepth = 0
    /// A ROLLBACK failed and left a transaction open: roll it back before the next one begins.
    var needsRollback = false
    /// The write-ahead log this connection last committed to (device and inode of `path-wal`): the one it owns, which
    /// ``setAsideLogOfReplacedDatabase()`` alone may move.
    var committedLog: (device: UInt64, inode: UInt64)?
    /// Where ``setAsideLogOfReplacedDatabase()`` moved that log, once it has.
    var logSetAside: String?
    /// A nested savepoint could not be rolled back: the outer transaction must not commit.
    var transactionPoisoned = false

    /// The special path of a private, in-memory database.
    public static let memoryPath = ":memory:"

    /// Opens (and by default creates) the database at `path` and configures it.
    ///
    /// Configuration, in order:
    /// - extended result codes on, so errors carry the precise reason (`SQLITE_CONSTRAINT_FOREIGNKEY`,
    ///   `SQLITE_READONLY_DBMOVED`, `SQLITE_IOERR_FSYNC`, …) rather than only the primary code;
    /// - `busy_timeout`, so a locked database fails after a bounded wait instead of at once or never;
    /// - `journal_mode=WAL` (writer connections on files): readers do not block the writer and the
    ///   writer does not block readers, so the loop can read while ingest writes. Fails if the
    ///   file system cannot do WAL, since the service's concurrency depends on it;
    /// - `synchronous` (``SQLiteConfiguration/synchronous``, `FULL` by default: an acknowledged
    ///   commit is on disk, SPEC section 3 and section 13);
    /// - `foreign_keys=ON` (off by default in SQLite, for backward compatibility only);
    /// - `temp_store=MEMORY`: sorts and temporary indexes never touch the disk.
    ///
    /// The work happens on the calling thread: open connections at start-up, or on the
    /// owner's queue (``DatabaseQueue/open(path:configuration:label:)``).
    ///
    /// SQLite documentation: <https://www.sqlite.org/c3ref/open.html>, <https://www.sqlite.org/wal.html>
    public init(path: String, configuration: SQLiteConfiguration = SQLiteConfiguration()) throws(SQLiteError) {
        _ = Self.libraryConfiguration
        var flags = SQLITE_OPEN_NOMUTEX | SQLITE_OPEN_EXRESCODE
        if configuration.readOnly {
            flags |= SQLITE_OPEN_READONLY
        } else {
            flags |= SQLITE_OPEN_READWRITE
            if configuration.create { flags |= SQLITE_OPEN_CREATE }
        }
        var db: OpaquePointer?
        let result = sqlite3_open_v2(path, &db, flags, nil)
        guard result == SQLITE_OK, let db else {
            // On failure SQLite usually still allocates a handle that carries the message and
            // must be closed; with no handle (out of memory) the code alone describes it.
            let error = SQLiteError.from(result, db: db, sql: nil)
            sqlite3_close_v2(db)
            throw SQLiteError(code: error.extendedCode, message: "cannot open \(path): \(error.message)")
        }
        self.path = path
        self.configuration = configuration
        self.handle = ConnectionHandle(db: db)
        self.cache = StatementCache(capacity: configuration.statementCacheCapacity)
        do {
            try configure()
        } catch {
            close()
            throw SQLiteError(
                code: error.extendedCode, message: "cannot open \(path): \(error.message)", sql: error.sql)
        }
    }

    /// Opens a private in-memory database (gone when closed; no WAL, no second connection).
    /// For unit tests of code that needs one connection; see ``DatabasePool/temporary(configuration:)``
    /// for a writer and reader pair.
    public static func inMemory(configuration: SQLiteConfiguration = SQLiteConfiguration()) throws(SQLiteError)
        -> SQLiteConnection
    {
        try SQLiteConnection(path: memoryPath, configuration: configuration)
    }

    /// Process-wide SQLite settings, applied once before the first connection opens.
    ///
    /// Memory statistics off (`SQLITE_CONFIG_MEMSTATUS`): with them on, every allocation SQLite
    /// makes takes a global mutex to count it, which costs a third of bulk-insert throughput
    /// here, and nothing in Allot reads those statistics. `sqlite3_config` must run before SQLite
    /// initialises; a Swift `static let` runs this exactly once, and every connection passes
    /// through here before any other SQLite call. If SQLite was already initialised by someone
    /// else, the call fails harmlessly and the default stays.
    /// SQLite documentation: <https://www.sqlite.org/c3ref/c_config_covering_index_scan.html#sqliteconfigmemstatus>
    private static let libraryConfiguration: Void = {
        _ = allot_sqlite3_config_memstatus(0)
    }()

    deinit {
        // A backstop for owners that forget close(); close() is idempotent.
        close()
    }

    private func configure() throws(SQLiteError) {
        let db = try liveDB()
        sqlite3_extended_result_codes(db, 1)
        let timeout = sqlite3_busy_timeout(db, max(0, configuration.busyTimeoutMilliseconds))
        if timeout != SQLITE_OK { throw SQLiteError.from(timeout, db: db, sql: nil) }
        if !configuration.readOnly && !isInMemory {
            let mode = try queryValue("PRAGMA journal_mode = WAL")?.string
            guard mode?.lowercased() == "wal" else {
                throw SQLiteError(
                    code: SQLITE_ERROR,
                    message: "could not enable write-ahead logging (journal_mode is \(mode ?? "unknown"))",
                    sql: "PRAGMA journal_mode = WAL"
                )
            }
        }
        if !configuration.readOnly {
            try execute("PRAGMA synchronous = \(configuration.synchronous.rawValue)")
        }
        try execute("PRAGMA foreign_keys = ON")
        try execute("PRAGMA temp_store = MEMORY")
    }

    /// True for a private `:memory:` database (or SQLite's empty-path temporary database).
    public var isInMemory: Bool { path == Self.memoryPath || path.isEmpty }

    /// True until ``close()``.
    public var isOpen: Bool { handle.db != nil }

    /// Closes the connection (`sqlite3_close_v2`). Idempotent.
    ///
    /// Cached statements are finalized first. An open transaction is rolled back by SQLite.
    /// Statements still held elsewhere keep the handle alive as a "zombie" until they are
    /// released, and meanwhile throw the "connection is closed" error. When the last connection
    /// to a WAL database closes, SQLite checkpoints and removes the `-wal` file.
    ///
    /// SQLite documentation: <https://www.sqlite.org/c3ref/close.html>
    public func close() {
        guard let db = handle.db else { return }
        cache.removeAll()
        handle.db = nil
        // sqlite3_close_v2 returns SQLITE_OK whenever given a valid handle.
        sqlite3_close_v2(db)
    }

    @inline(__always)
    func liveDB(sql: String? = nil) throws(SQLiteError) -> OpaquePointer {
        guard let db = handle.db else { throw SQLiteError.closed(sql: sql) }
        return db
    }

    // MARK: Statements

    /// The prepared statement for `sql`, from the connection's cache (prepared on first use).
    ///
    /// The statement is reset before it is returned but keeps its previous bindings; bind every
    /// parameter. It stays valid until the next use of the same SQL text on this connection.
    /// Call ``SQLiteStatement/reset()`` when done with a SELECT, because a statement left in the
    /// middle of its rows keeps its read transaction (and its snapshot of the data) open.
    public func cachedStatement(_ sql: String) throws(SQLiteError) -> SQLiteStatement {
        if let statement = cache.statement(for: sql), statement.pointer != nil {
            statement.reset()
            return statement
        }
        let statement = try prepare(sql, persistent: true)
        cache.insert(statement)
        return statement
    }

    /// Prepares `sql` outside the cache; the statement is finalized when released.
    /// For SQL that runs once.
    public func makeStatement(_ sql: String) throws(SQLiteError) -> SQLiteStatement {
        try prepare(sql, persistent: false)
    }

    /// The number of statements in the cache.
    public var cachedStatementCount: Int { cache.count }

    private func prepare(_ sql: String, persistent: Bool) throws(SQLiteError) -> SQLiteStatement {
        let db = try liveDB(sql: sql)
        let flags: UInt32 = persistent ? UInt32(SQLITE_PREPARE_PERSISTENT) : 0
        var statement: OpaquePointer?
        var extraStatement = false
        let result = sql.withCString { start -> Int32 in
            var tail: UnsafePointer<CChar>?
            let length = Int32(clamping: sql.utf8.count + 1)
            let result = sqlite3_prepare_v3(db, start, length, flags, &statement, &tail)
            guard result == SQLITE_OK, let tail else { return result }
            // Refuse trailing statements instead of silently ignoring them: `execute` runs scripts.
            var extra: OpaquePointer?
            let remaining = Int32(clamping: sql.utf8.count + 1 - (tail - start))
            if sqlite3_prepare_v2(db, tail, remaining, &extra, nil) == SQLITE_OK, extra != nil {
                extraStatement = true
            }
            sqlite3_finalize(extra)
            return result
        }
        guard result == SQLITE_OK else {
            sqlite3_finalize(statement)
            throw SQLiteError.from(result, db: db, sql: sql)
        }
        guard let statement else {
            throw SQLiteError(code: SQLITE_MISUSE, message: "no SQL statement to prepare", sql: sql)
        }
        if extraStatement {
            sqlite3_finalize(statement)
            throw SQLiteError(
                code: SQLITE_MISUSE,
                message: "more than one SQL statement given; use execute(_:) to run a script",
                sql: sql
            )
        }
        return SQLiteStatement(sql: sql, pointer: statement, handle: handle)
    }

    /// The cached statement for `sql`, reset and marked in use until ``checkIn(_:)``. If that
    /// statement is already in use (a nested use of the same SQL, e.g. a `run` inside the `query`
    /// body), a fresh statement is prepared for the nested use instead of disturbing it.
    private func checkOut(_ sql: String) throws(SQLiteError) -> SQLiteStatement {
        let statement: SQLiteStatement
        if let cached = cache.statement(for: sql), cached.pointer != nil {
            statement = cached.isInUse ? try makeStatement(sql) : cached
        } else {
            statement = try prepare(sql, persistent: true)
            cache.insert(statement)
        }
        statement.reset()
        statement.isInUse = true
        return statement
    }

    /// Resets a statement from ``checkOut(_:)`` so that no read transaction stays open.
    private func checkIn(_ statement: SQLiteStatement) {
        statement.isInUse = false
        statement.reset()
        // A cached statement otherwise keeps its bound values until its next use: SQLite's copies
        // of large blobs (the loop's checkpoint, tens of MB) stayed resident between checkpoints.
        statement.clearBindings()
    }

    // MARK: Running SQL

    /// Runs a script of zero or more `;`-separated statements, without parameters, ignoring rows.
    ///
    /// Each statement is prepared and run in turn; the first failure stops the script and the
    /// error carries the failing statement's SQL. Statements already run are not undone: wrap
    /// the call in ``transaction(_:_:)`` when the script must be all-or-nothing (migrations do).
    ///
    /// SQLite documentation: <https://www.sqlite.org/c3ref/prepare.html> (the `pzTail` loop).
    public func execute(_ sql: String) throws(SQLiteError) {
        let db = try liveDB(sql: sql)
        let failure: SQLiteError? = sql.withCString { start -> SQLiteError? in
            let end = start + sql.utf8.count
            var current = start
            while current < end {
                var statement: OpaquePointer?
                var tail: UnsafePointer<CChar>?
                let result = sqlite3_prepare_v2(db, current, Int32(clamping: end - current + 1), &statement, &tail)
                if result != SQLITE_OK {
                    sqlite3_finalize(statement)
                    return SQLiteError.from(result, db: db, sql: Self.firstStatement(of: String(cString: current)))
                }
                guard let statement else { break }  // only whitespace or comments remained
                defer { sqlite3_finalize(statement) }
                var step = sqlite3_step(statement)
                while step == SQLITE_ROW { step = sqlite3_step(statement) }
                if step != SQLITE_DONE {
                    let text = sqlite3_sql(statement).map { Self.trimmed(String(cString: $0)) }
                    return SQLiteError.from(step, db: db, sql: text)
                }
                guard let tail, tail > current else { break }
                current = tail
            }
            return nil
        }
        if let failure { throw failure }
    }

    /// The start of a script up to its first `;`, for naming a statement that failed to parse
    /// (SQLite does not say where it would have ended; a `;` inside a string or a trigger body
    /// only shortens the quote).
    private static func firstStatement(of script: String) -> String {
        guard let semicolon = script.firstIndex(of: ";") else { return trimmed(script) }
        return trimmed(String(script[...semicolon]))
    }

    /// `text` without leading and trailing whitespace: the statement as a reader would quote it.
    private static func trimmed(_ text: String) -> String {
        let start = text.firstIndex { !$0.isWhitespace } ?? text.endIndex
        let end = text.lastIndex { !$0.isWhitespace }.map { text.index(after: $0) } ?? start
        return start < end ? String(text[start..<end]) : ""
    }

    /// Runs one statement with positional parameters (`?`), ignoring any rows. Uses the cache.
    ///
    /// ```swift
    /// try connection.run("INSERT INTO tenant(id, tier) VALUES (?, ?)", "acme", "premium")
    /// ```
    public func run(_ sql: String, _ bindings: (any SQLiteBindable)?...) throws(SQLiteError) {
        try run(sql, bindings: bindings)
    }

    /// Runs one statement with positional parameters given as an array.
    public func run(_ sql: String, bindings: [(any SQLiteBindable)?]) throws(SQLiteError) {
        let statement = try checkOut(sql)
        defer { checkIn(statement) }
        try statement.run(bindings: bindings)
    }

    /// Runs one statement with named parameters (`:name`; keys with or without the prefix).
    public func run(_ sql: String, named bindings: [String: (any SQLiteBindable)?]) throws(SQLiteError) {
        let statement = try checkOut(sql)
        defer { checkIn(statement) }
        try statement.bind(named: bindings)
        while try statement.step() {}
    }

    /// Runs a query and calls `body` for each row. Uses the cache; the statement is reset
    /// afterwards, even when `body` throws. Throws what `body` throws, or a ``SQLiteError``.
    ///
    /// ```swift
    /// try connection.query("SELECT id, weight FROM tenant WHERE tier = ?", "premium") { row in
    ///     weights[row.string(0) ?? ""] = row.double(1)
    /// }
    /// ```
    public func query(
        _ sql: String,
        _ bindings: (any SQLiteBindable)?...,
        body: (SQLiteRow) throws -> Void
    ) throws {
        try query(sql, bindings: bindings, body: body)
    }

    /// Runs a query with positional parameters given as an array, calling `body` for each row.
    public func query(_ sql: String, bindings: [(any SQLiteBindable)?], body: (SQLiteRow) throws -> Void) throws {
        let statement = try checkOut(sql)
        defer { checkIn(statement) }
        try statement.bind(bindings)
        while try statement.step() { try body(statement.row) }
    }

    /// Runs a query with named parameters, calling `body` for each row.
    public func query(
        _ sql: String,
        named bindings: [String: (any SQLiteBindable)?],
        body: (SQLiteRow) throws -> Void
    ) throws {
        let statement = try checkOut(sql)
        defer { checkIn(statement) }
        try statement.bind(named: bindings)
        while try statement.step() { try body(statement.row) }
    }

    /// Runs a query and maps its first row with `map`, or returns nil when there is no row.
    /// Throws what `map` throws, or a ``SQLiteError``.
    ///
    /// ```swift
    /// let count = try connection.queryOne("SELECT count(*) FROM tenant") { $0.int64(0) } ?? 0
    /// ```
    public func queryOne<T>(
        _ sql: String,
        _ bindings: (any SQLiteBindable)?...,
        map: (SQLiteRow) throws -> T
    ) throws -> T? {
        try queryOne(sql, bindings: bindings, map: map)
    }

    /// Runs a query with positional parameters given as an array and maps its first row.
    public func queryOne<T>(
        _ sql: String,
        bindings: [(any SQLiteBindable)?],
        map: (SQLiteRow) throws -> T
    ) throws -> T? {
        let statement = try checkOut(sql)
        defer { checkIn(statement) }
        try statement.bind(bindings)
        return try statement.step() ? try map(statement.row) : nil
    }

    /// Runs a query and maps every row with `map`.
    public func queryAll<T>(
        _ sql: String,
        _ bindings: (any SQLiteBindable)?...,
        reservingCapacity capacity: Int = 0,
        map: (SQLiteRow) throws -> T
    ) throws -> [T] {
        let statement = try checkOut(sql)
        defer { checkIn(statement) }
        try statement.bind(bindings)
        var values: [T] = []
        if capacity > 0 { values.reserveCapacity(capacity) }
        while try statement.step() { values.append(try map(statement.row)) }
        return values
    }

    /// The first column of the first row, or nil when there is no row. Typed: only SQLite errors.
    ///
    /// ```swift
    /// let newest = try connection.queryValue("SELECT max(id) FROM event")?.int64
    /// ```
    public func queryValue(_ sql: String, _ bindings: (any SQLiteBindable)?...) throws(SQLiteError) -> SQLiteValue? {
        try queryValues(sql, bindings: bindings, limit: 1).first
    }

    /// The first column of every row (at most `limit` rows). Typed: only SQLite errors.
    public func queryValues(
        _ sql: String,
        bindings: [(any SQLiteBindable)?] = [],
        limit: Int = Int.max
    ) throws(SQLiteError) -> [SQLiteValue] {
        let statement = try checkOut(sql)
        defer { checkIn(statement) }
        try statement.bind(bindings)
        guard statement.columnCount > 0 else {
            while try statement.step() {}
            return []
        }
        var values: [SQLiteValue] = []
        while values.count < limit, try statement.step() { values.append(statement.row.value(0)) }
        return values
    }

    // MARK: State

    /// The rowid of the most recent successful INSERT on this connection (0 if none).
    public var lastInsertRowID: Int64 {
        guard let db = handle.db else { return 0 }
        return sqlite3_last_insert_rowid(db)
    }

    /// Rows changed by the most recent INSERT, UPDATE or DELETE (triggers excluded).
    public var changes: Int {
        guard let db = handle.db else { return 0 }
        return Int(sqlite3_changes64(db))
    }

    /// Rows changed since the connection opened.
    public var totalChanges: Int {
        guard let db = handle.db else { return 0 }
        return Int(sqlite3_total_changes64(db))
    }

    /// True while a transaction is open (SQLite is not in autocommit mode).
    ///
    /// After `SQLITE_FULL`, `SQLITE_IOERR`, `SQLITE_BUSY` or `SQLITE_NOMEM` SQLite may have rolled
    /// the transaction back by itself; this is how to tell.
    /// SQLite documentation: <https://www.sqlite.org/c3ref/get_autocommit.html>
    public var isInTransaction: Bool {
        guard let db = handle.db else { return false }
        return sqlite3_get_autocommit(db) == 0
    }
}
