import CSQLite

/// A failure reported by SQLite, or by this layer in SQLite's terms.
///
/// Every failing call of `AllotSQLite` throws one of these, built from the connection's result
/// code and `sqlite3_errmsg` at the moment of failure, together with the SQL that was running.
/// Nothing in this module traps on a C result: a locked, full, deleted or corrupt database is
/// an error value the caller can act on (SPEC section 13, "Reliability": a database that is
/// locked, full or gone leaves the last snapshot served and `/readyz` failing).
///
/// Errors that this layer detects itself (a closed connection, an unknown column or parameter
/// name, a value too large to bind) reuse the closest SQLite code (`SQLITE_MISUSE`,
/// `SQLITE_RANGE`, `SQLITE_TOOBIG`) so that callers classify every failure the same way.
///
/// SQLite documentation: <https://www.sqlite.org/rescode.html>
public struct SQLiteError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The extended result code, e.g. `SQLITE_CONSTRAINT_UNIQUE` (2067) or `SQLITE_IOERR_FSYNC` (1034).
    ///
    /// Connections are opened with extended result codes enabled, so this is as precise as
    /// SQLite can be. Its low 8 bits are the primary code (``code``).
    public let extendedCode: Int32
    /// SQLite's message (`sqlite3_errmsg`), or this layer's explanation.
    public let message: String
    /// The SQL text that was being prepared or run, if any.
    public let sql: String?

    /// Creates an error from a result code and a message.
    ///
    /// - Parameters:
    ///   - code: A primary or extended SQLite result code.
    ///   - message: What went wrong; `sqlite3_errstr(code)` is used when nil.
    ///   - sql: The SQL being run, if any.
    public init(code: Int32, message: String? = nil, sql: String? = nil) {
        self.extendedCode = code
        self.message = message ?? SQLiteError.standardMessage(for: code)
        self.sql = sql
    }

    /// The primary result code (the low 8 bits of ``extendedCode``), e.g. `SQLITE_BUSY` (5).
    public var code: Int32 { extendedCode & 0xFF }

    /// The symbolic name of the primary code, e.g. `SQLITE_BUSY`.
    public var codeName: String { SQLiteError.primaryNames[code] ?? "SQLITE_\(code)" }

    /// Another connection or process holds a conflicting lock and `busy_timeout` has expired
    /// (`SQLITE_BUSY`), or a shared-cache table lock conflicts (`SQLITE_LOCKED`).
    /// Transient: retrying later may succeed.
    public var isBusy: Bool { code == SQLITE_BUSY || code == SQLITE_LOCKED }
    /// The disk, or the database's `max_page_count`, is full (`SQLITE_FULL`).
    public var isFull: Bool { code == SQLITE_FULL }
    /// A UNIQUE, NOT NULL, CHECK, FOREIGN KEY or PRIMARY KEY constraint failed.
    public var isConstraint: Bool { code == SQLITE_CONSTRAINT }
    /// The file is damaged (`SQLITE_CORRUPT`) or is not a database at all (`SQLITE_NOTADB`).
    public var isCorrupt: Bool { code == SQLITE_CORRUPT || code == SQLITE_NOTADB }
    /// The database could not be opened: missing directory, a directory in its place, no permission.
    public var isCannotOpen: Bool { code == SQLITE_CANTOPEN }
    /// The operating system reported an I/O error (`SQLITE_IOERR`), e.g. the disk went away.
    public var isIOError: Bool { code == SQLITE_IOERR }
    /// A write was attempted on a read-only connection, or the file was moved or deleted
    /// while open (`SQLITE_READONLY_DBMOVED`).
    public var isReadOnly: Bool { code == SQLITE_READONLY }
    /// The file was deleted, renamed or replaced while the connection had it open.
    public var isDatabaseMoved: Bool { extendedCode == SQLiteError.readOnlyDatabaseMoved }
    /// The API was used in a way SQLite or this layer does not allow (e.g. the connection is closed).
    public var isMisuse: Bool { code == SQLITE_MISUSE }
    /// The statement was stopped by `sqlite3_interrupt`.
    public var isInterrupted: Bool { code == SQLITE_INTERRUPT }
    /// The transaction was rolled back (by SQLite after an I/O, full or busy error) before it
    /// could commit.
    public var isAbort: Bool { code == SQLITE_ABORT }

    /// The database itself is unusable right now (locked, full, gone, corrupt, I/O failure),
    /// as opposed to a mistake in one statement. `/readyz` fails on these.
    public var isDatabaseUnavailable: Bool {
        isBusy || isFull || isCorrupt || isCannotOpen || isIOError || isDatabaseMoved
    }

    /// One line: code, name, message and the SQL, e.g.
    /// `SQLite error 19/2067 SQLITE_CONSTRAINT: UNIQUE constraint failed: t.id (in: INSERT INTO t …)`.
    public var description: String {
        var text = "SQLite error \(code)"
        if extendedCode != code { text += "/\(extendedCode)" }
        text += " \(codeName): \(message)"
        if let sql, !sql.isEmpty { text += " (in: \(SQLiteError.abbreviated(sql)))" }
        return text
    }

    /// `SQLITE_READONLY_DBMOVED` (`SQLITE_READONLY | 4 << 8`); Swift does not import the C macro.
    public static let readOnlyDatabaseMoved: Int32 = SQLITE_READONLY | (4 << 8)

    // MARK: Construction from a connection

    /// The error the connection `db` reports right now, after `result` was returned.
    ///
    /// `sqlite3_errmsg` describes the most recent failing call on this connection, which is the
    /// one that returned `result` because a connection is only ever used from one thread at a
    /// time. When the message refers to another code (which happens for a few non-error codes),
    /// the standard text for `result` is used instead.
    static func from(_ result: Int32, db: OpaquePointer?, sql: String?) -> SQLiteError {
        guard let db else { return SQLiteError(code: result, sql: sql) }
        let current = sqlite3_extended_errcode(db)
        let extended = (current & 0xFF) == (result & 0xFF) ? current : result
        let message: String
        if let text = sqlite3_errmsg(db), (current & 0xFF) == (result & 0xFF) {
            message = String(cString: text)
        } else {
            message = standardMessage(for: result)
        }
        return SQLiteError(code: extended, message: message, sql: sql)
    }

    /// Thrown by every operation on a connection after ``SQLiteConnection/close()``.
    static func closed(sql: String? = nil) -> SQLiteError {
        SQLiteError(code: SQLITE_MISUSE, message: "the database connection is closed", sql: sql)
    }

    static func standardMessage(for code: Int32) -> String {
        guard let text = sqlite3_errstr(code) else { return "unknown error" }
        return String(cString: text)
    }

    /// SQL collapsed to one line and cut to a readable length for messages and logs.
    static func abbreviated(_ sql: String, limit: Int = 200) -> String {
        var collapsed = ""
        var lastWasSpace = false
        for character in sql {
            if character.isWhitespace {
                if !lastWasSpace && !collapsed.isEmpty { collapsed.append(" ") }
                lastWasSpace = true
            } else {
                collapsed.append(character)
                lastWasSpace = false
            }
            if collapsed.count > limit { return String(collapsed.prefix(limit)) + "…" }
        }
        if collapsed.hasSuffix(" ") { collapsed.removeLast() }
        return collapsed
    }

    private static let primaryNames: [Int32: String] = [
        0: "SQLITE_OK", 1: "SQLITE_ERROR", 2: "SQLITE_INTERNAL", 3: "SQLITE_PERM", 4: "SQLITE_ABORT",
        5: "SQLITE_BUSY", 6: "SQLITE_LOCKED", 7: "SQLITE_NOMEM", 8: "SQLITE_READONLY", 9: "SQLITE_INTERRUPT",
        10: "SQLITE_IOERR", 11: "SQLITE_CORRUPT", 12: "SQLITE_NOTFOUND", 13: "SQLITE_FULL", 14: "SQLITE_CANTOPEN",
        15: "SQLITE_PROTOCOL", 16: "SQLITE_EMPTY", 17: "SQLITE_SCHEMA", 18: "SQLITE_TOOBIG",
        19: "SQLITE_CONSTRAINT", 20: "SQLITE_MISMATCH", 21: "SQLITE_MISUSE", 22: "SQLITE_NOLFS",
        23: "SQLITE_AUTH", 24: "SQLITE_FORMAT", 25: "SQLITE_RANGE", 26: "SQLITE_NOTADB", 27: "SQLITE_NOTICE",
        28: "SQLITE_WARNING", 100: "SQLITE_ROW", 101: "SQLITE_DONE",
    ]
}
