import CSQLite

/// SQLite's `SQLITE_TRANSIENT` destructor (`(sqlite3_destructor_type)-1`): tells `sqlite3_bind_*`
/// to copy the bytes before returning, because Swift's buffers are only valid during the call.
/// The C macro is a cast of -1 to a function pointer, which Swift cannot import.
let SQLITE_TRANSIENT = unsafeBitCast(OpaquePointer(bitPattern: -1), to: sqlite3_destructor_type.self)

/// The `sqlite3*` of one connection, shared with the statements it prepared.
///
/// Statements keep this (not the connection) so that a statement outliving
/// ``SQLiteConnection/close()`` sees `db == nil` and throws instead of touching a closed handle,
/// and so that statements in the connection's cache do not form a reference cycle with it.
final class ConnectionHandle {
    /// Unchecked exclusivity: read on every bind and step (the bulk-insert hot path), and never
    /// accessed concurrently because connections and statements are not `Sendable`.
    @exclusivity(unchecked) var db: OpaquePointer?

    init(db: OpaquePointer) {
        self.db = db
    }
}

/// A prepared statement (`sqlite3_stmt*`): bind parameters, step through rows, reset, repeat.
///
/// Obtained from ``SQLiteConnection/cachedStatement(_:)`` (kept prepared and re-used by SQL text)
/// or ``SQLiteConnection/makeStatement(_:)`` (finalized when released). Like its connection, a
/// statement is not `Sendable`: it is only used by the connection's owner.
///
/// Parameters are numbered from 1 and columns from 0, as in SQLite's C API.
///
/// The bulk-insert fast path is one cached statement, re-bound and re-run per row:
///
/// ```swift
/// let insert = try connection.cachedStatement("INSERT INTO t(a, b) VALUES (?, ?)")
/// for item in items {
///     insert.reset()
///     try insert.bind(item.a, at: 1)
///     try insert.bind(item.b, at: 2)
///     try insert.step()
/// }
/// ```
///
/// SQLite documentation: <https://www.sqlite.org/c3ref/stmt.html>
public final class SQLiteStatement {
    /// The SQL text this statement was prepared from.
    public let sql: String
    /// The number of result columns (0 for statements that return no rows).
    public let columnCount: Int
    /// The number of parameters (`?`, `?NNN`, `:name`, `@name`, `$name`); the largest index.
    public let parameterCount: Int

    let handle: ConnectionHandle
    /// Unchecked exclusivity for the same reason as ``ConnectionHandle/db``: hot, single-threaded.
    @exclusivity(unchecked) private(set) var pointer: OpaquePointer?
    private var columnIndexes: [String: Int]?
    /// Set while the connection runs this statement on the caller's behalf (``SQLiteConnection/query``),
    /// so that a nested use of the same SQL prepares a second statement instead of resetting this one.
    var isInUse = false

    init(sql: String, pointer: OpaquePointer, handle: ConnectionHandle) {
        self.sql = sql
        self.pointer = pointer
        self.handle = handle
        self.columnCount = Int(sqlite3_column_count(pointer))
        self.parameterCount = Int(sqlite3_bind_parameter_count(pointer))
    }

    deinit {
        // Finalizing after `sqlite3_close_v2` is allowed: the connection lingers as a "zombie"
        // until its last statement is finalized. sqlite3_finalize(NULL) is a no-op.
        sqlite3_finalize(pointer)
    }

    /// Releases the `sqlite3_stmt`. Afterwards every operation throws the "closed" error.
    func finalize() {
        sqlite3_finalize(pointer)
        pointer = nil
    }

    /// The statement pointer, if both it and its connection are still open.
    @inline(__always)
    private func livePointer() throws(SQLiteError) -> OpaquePointer {
        guard let pointer, handle.db != nil else { throw SQLiteError.closed(sql: sql) }
        return pointer
    }

    @inline(__always)
    private func check(_ result: Int32) throws(SQLiteError) {
        if result != SQLITE_OK { throw SQLiteError.from(result, db: handle.db, sql: sql) }
    }

    // MARK: Running

    /// Runs the statement to its next row: `true` when a row is available (read it with ``row``),
    /// `false` when the statement has finished.
    ///
    /// After `false`, or after an error, call ``reset()`` before running the statement again.
    @discardableResult
    public func step() throws(SQLiteError) -> Bool {
        let pointer = try livePointer()
        switch sqlite3_step(pointer) {
        case SQLITE_ROW: return true
        case SQLITE_DONE: return false
        case let result: throw SQLiteError.from(result, db: handle.db, sql: sql)
        }
    }

    /// Rewinds the statement so that it can run again. Bindings are kept (see ``clearBindings()``).
    ///
    /// `sqlite3_reset` repeats the error of a failed ``step()``, which has already been thrown,
    /// so its result is deliberately ignored.
    public func reset() {
        if let pointer { sqlite3_reset(pointer) }
    }

    /// Sets every parameter back to NULL.
    public func clearBindings() {
        if let pointer { sqlite3_clear_bindings(pointer) }
    }

    /// The current row, valid until the next ``step()`` or ``reset()``.
    public var row: SQLiteRow { SQLiteRow(statement: self) }

    /// Resets the statement, binds `bindings` to parameters 1…n and runs it to completion,
    /// ignoring any rows. For INSERT, UPDATE, DELETE and DDL.
    public func run(_ bindings: (any SQLiteBindable)?...) throws(SQLiteError) {
        try run(bindings: bindings)
    }

    /// Resets the statement, binds `bindings` to parameters 1…n and runs it to completion.
    public func run(bindings: [(any SQLiteBindable)?]) throws(SQLiteError) {
        reset()
        try bind(bindings)
        while try step() {}
    }

    /// Steps through every row, calling `body` with each. Resets the statement first, not the
    /// bindings: bind before calling. Throws what `body` throws, or a ``SQLiteError``.
    public func forEachRow(_ body: (SQLiteRow) throws -> Void) throws {
        reset()
        while try step() {
            try body(SQLiteRow(statement: self))
        }
    }

    // MARK: Binding by position

    /// Binds a 64-bit integer to the 1-based parameter `index`.
    public func bind(_ value: Int64, at index: Int) throws(SQLiteError) {
        try check(sqlite3_bind_int64(try livePointer(), try parameter(index), value))
    }

    /// Binds a double to the 1-based parameter `index`.
    public func bind(_ value: Double, at index: Int) throws(SQLiteError) {
        try check(sqlite3_bind_double(try livePointer(), try parameter(index), value))
    }

    /// Binds UTF-8 text to the 1-based parameter `index` (an empty string binds '', not NULL).
    public func bind(_ value: String, at index: Int) throws(SQLiteError) {
        let pointer = try livePointer()
        let parameter = try parameter(index)
        var text = value
        let result = text.withUTF8 { buffer -> Int32 in
            guard buffer.count <= Int(Int32.max) else { return SQLITE_TOOBIG }
            guard let base = buffer.baseAddress, buffer.count > 0 else {
                return sqlite3_bind_text(pointer, parameter, "", 0, SQLITE_TRANSIENT)
            }
            return base.withMemoryRebound(to: CChar.self, capacity: buffer.count) { chars in
                sqlite3_bind_text(pointer, parameter, chars, Int32(buffer.count), SQLITE_TRANSIENT)
            }
        }
        try check(result)
    }

    /// Binds bytes as a BLOB to the 1-based parameter `index` (an empty array binds an empty
    /// blob: `sqlite3_bind_blob` with no bytes would bind NULL).
    public func bind(blob value: [UInt8], at index: Int) throws(SQLiteError) {
        let pointer = try livePointer()
        let parameter = try parameter(index)
        let result = value.withUnsafeBytes { buffer -> Int32 in
            guard buffer.count <= Int(Int32.max) else { return SQLITE_TOOBIG }
            guard let base = buffer.baseAddress, buffer.count > 0 else {
                return sqlite3_bind_zeroblob(pointer, parameter, 0)
            }
            return sqlite3_bind_blob(pointer, parameter, base, Int32(buffer.count), SQLITE_TRANSIENT)
        }
        try check(result)
    }

    /// Binds SQL NULL to the 1-based parameter `index`.
    public func bindNull(at index: Int) throws(SQLiteError) {
        try check(sqlite3_bind_null(try livePointer(), try parameter(index)))
    }

    /// Binds any bindable value (including optionals: `nil` binds NULL) to the 1-based parameter `index`.
    public func bind(_ value: some SQLiteBindable, at index: Int) throws(SQLiteError) {
        try value.bind(to: self, at: index)
    }

    /// Binds `values` to parameters 1…n. The count must equal ``parameterCount``: a forgotten
    /// argument would otherwise silently be NULL.
    public func bind(_ values: [(any SQLiteBindable)?]) throws(SQLiteError) {
        guard values.count == parameterCount else {
            throw SQLiteError(
                code: SQLITE_RANGE,
                message: "statement has \(parameterCount) parameter(s) but \(values.count) value(s) were given",
                sql: sql
            )
        }
        for index in values.indices {
            // Optional chaining binds the existential in place instead of copying it out.
            if try values[index]?.bind(to: self, at: index + 1) == nil {
                try bindNull(at: index + 1)
            }
        }
    }

    // MARK: Binding by name

    /// The 1-based index of the parameter called `name` (`:name`, `@name` or `$name`; the prefix
    /// may be omitted, `:` is then assumed), or nil.
    public func parameterIndex(named name: String) -> Int? {
        guard let pointer else { return nil }
        let candidates = name.first.map { ":@$".contains($0) } == true ? [name] : [":" + name, "@" + name, "$" + name]
        for candidate in candidates {
            let index = sqlite3_bind_parameter_index(pointer, candidate)
            if index > 0 { return Int(index) }
        }
        return nil
    }

    /// Binds `value` to the parameter called `name` (`:name`; the prefix may be omitted).
    public func bind(_ value: some SQLiteBindable, named name: String) throws(SQLiteError) {
        guard let index = parameterIndex(named: name) else {
            throw SQLiteError(code: SQLITE_RANGE, message: "no parameter named \(name)", sql: sql)
        }
        try value.bind(to: self, at: index)
    }

    /// Binds every named parameter from `values` (keys with or without the `:`/`@`/`$` prefix).
    /// Every parameter must be given and every key must name a parameter.
    public func bind(named values: [String: (any SQLiteBindable)?]) throws(SQLiteError) {
        let pointer = try livePointer()
        var matchedKeys = Set<String>()
        for index in 1..<(parameterCount + 1) {
            guard let cName = sqlite3_bind_parameter_name(pointer, Int32(index)) else {
                throw SQLiteError(
                    code: SQLITE_RANGE, message: "parameter \(index) is positional: bind it by index", sql: sql)
            }
            let fullName = String(cString: cName)
            let key = values.keys.contains(fullName) ? fullName : String(fullName.dropFirst())
            guard let value = values[key] else {
                throw SQLiteError(code: SQLITE_RANGE, message: "no value given for parameter \(fullName)", sql: sql)
            }
            matchedKeys.insert(key)
            if let value {
                try value.bind(to: self, at: index)
            } else {
                try bindNull(at: index)
            }
        }
        if matchedKeys.count != values.count {
            let unknown = values.keys.filter { !matchedKeys.contains($0) }.sorted()
            throw SQLiteError(
                code: SQLITE_RANGE, message: "no parameter named \(unknown.joined(separator: ", "))", sql: sql)
        }
    }

    // MARK: Columns

    /// The name of result column `index` (0-based), as SQLite reports it (`AS` alias if any).
    public func columnName(_ index: Int) -> String {
        guard let pointer, index >= 0, index < columnCount,
            let name = sqlite3_column_name(pointer, Int32(index))
        else { return "" }
        return String(cString: name)
    }

    /// The 0-based index of the result column called `name` (exact, case-sensitive match first,
    /// then case-insensitive like SQLite identifiers), or nil.
    public func columnIndex(named name: String) -> Int? {
        if columnIndexes == nil {
            var indexes: [String: Int] = [:]
            for index in 0..<columnCount {
                let columnName = columnName(index)
                if indexes[columnName] == nil { indexes[columnName] = index }
            }
            columnIndexes = indexes
        }
        if let index = columnIndexes?[name] { return index }
        let lowered = name.lowercased()
        return columnIndexes?.first { $0.key.lowercased() == lowered }?.value
    }

    @inline(__always)
    private func parameter(_ index: Int) throws(SQLiteError) -> Int32 {
        guard index >= 1, index <= parameterCount else {
            throw SQLiteError(
                code: SQLITE_RANGE,
                message: "parameter index \(index) is out of range 1...\(parameterCount)",
                sql: sql
            )
        }
        return Int32(truncatingIfNeeded: index)
    }
}
