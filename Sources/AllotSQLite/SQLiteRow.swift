import CSQLite

/// The current row of a statement: typed access to its columns, by 0-based index or by name.
///
/// A row is a view, not a copy: it is valid only until its statement steps again or is reset
/// (in practice, inside the closure that received it). Copy the values out, don't keep the row.
///
/// Reading by index is the fast path (one C call per value). An index outside
/// `0..<count` is a programming error and traps, as an array subscript does. Reading by name
/// looks the name up first and throws a ``SQLiteError`` (`SQLITE_RANGE`) naming a column that
/// does not exist, because names are typed by hand and a typo should be an error, not a crash.
///
/// Conversions follow SQLite's rules (<https://www.sqlite.org/c3ref/column_blob.html>): NULL
/// reads as 0 / 0.0 from the numeric accessors (use ``isNull(_:)`` or the `optional…`
/// accessors to tell), while ``string(_:)`` and ``blob(_:)`` return nil for NULL.
public struct SQLiteRow {
    let statement: SQLiteStatement

    /// The number of columns.
    public var count: Int { statement.columnCount }

    /// The name of column `index`.
    public func columnName(_ index: Int) -> String { statement.columnName(index) }

    /// The statement pointer for reading column `index`, or nil once the statement is finalized.
    @inline(__always)
    private func column(_ index: Int) -> OpaquePointer? {
        precondition(
            index >= 0 && index < statement.columnCount,
            "column index \(index) out of range 0..<\(statement.columnCount) in: \(statement.sql)"
        )
        return statement.pointer
    }

    // MARK: By index

    /// True when the value is SQL NULL.
    public func isNull(_ index: Int) -> Bool {
        guard let pointer = column(index) else { return true }
        return sqlite3_column_type(pointer, Int32(index)) == SQLITE_NULL
    }

    /// The value as a 64-bit integer (NULL reads 0).
    public func int64(_ index: Int) -> Int64 {
        guard let pointer = column(index) else { return 0 }
        return sqlite3_column_int64(pointer, Int32(index))
    }

    /// The value as an `Int` (NULL reads 0).
    public func int(_ index: Int) -> Int { Int(truncatingIfNeeded: int64(index)) }

    /// The value as a `Bool`: any non-zero integer is true (NULL reads false).
    public func bool(_ index: Int) -> Bool { int64(index) != 0 }

    /// The value as a double (NULL reads 0.0).
    public func double(_ index: Int) -> Double {
        guard let pointer = column(index) else { return 0 }
        return sqlite3_column_double(pointer, Int32(index))
    }

    /// The value as an integer, or nil for NULL.
    public func optionalInt64(_ index: Int) -> Int64? { isNull(index) ? nil : int64(index) }

    /// The value as a double, or nil for NULL.
    public func optionalDouble(_ index: Int) -> Double? { isNull(index) ? nil : double(index) }

    /// The value as UTF-8 text, or nil for NULL. Invalid UTF-8 is repaired with U+FFFD.
    public func string(_ index: Int) -> String? {
        guard let pointer = column(index) else { return nil }
        let column = Int32(index)
        guard sqlite3_column_type(pointer, column) != SQLITE_NULL else { return nil }
        // Text first, then its length, as the SQLite documentation recommends.
        guard let text = sqlite3_column_text(pointer, column) else { return "" }
        let count = Int(sqlite3_column_bytes(pointer, column))
        return String(decoding: UnsafeBufferPointer(start: text, count: count), as: UTF8.self)
    }

    /// The value's bytes, or nil for NULL. An empty blob reads `[]`.
    public func blob(_ index: Int) -> [UInt8]? {
        guard let pointer = column(index) else { return nil }
        let column = Int32(index)
        guard sqlite3_column_type(pointer, column) != SQLITE_NULL else { return nil }
        // sqlite3_column_blob returns NULL for a zero-length blob.
        guard let bytes = sqlite3_column_blob(pointer, column) else { return [] }
        let count = Int(sqlite3_column_bytes(pointer, column))
        return [UInt8](UnsafeRawBufferPointer(start: bytes, count: count))
    }

    /// The value in its SQLite storage class.
    public func value(_ index: Int) -> SQLiteValue {
        guard let pointer = column(index) else { return .null }
        switch sqlite3_column_type(pointer, Int32(index)) {
        case SQLITE_INTEGER: return .integer(int64(index))
        case SQLITE_FLOAT: return .real(double(index))
        case SQLITE_TEXT: return .text(string(index) ?? "")
        case SQLITE_BLOB: return .blob(blob(index) ?? [])
        default: return .null
        }
    }

    // MARK: By name

    /// The 0-based index of the column called `name`; throws `SQLITE_RANGE` when there is none.
    public func index(of name: String) throws(SQLiteError) -> Int {
        guard let index = statement.columnIndex(named: name) else {
            throw SQLiteError(code: SQLITE_RANGE, message: "no column named \(name)", sql: statement.sql)
        }
        return index
    }

    /// True when the column called `name` is NULL.
    public func isNull(_ name: String) throws(SQLiteError) -> Bool { isNull(try index(of: name)) }
    /// The column called `name` as a 64-bit integer (NULL reads 0).
    public func int64(_ name: String) throws(SQLiteError) -> Int64 { int64(try index(of: name)) }
    /// The column called `name` as an `Int` (NULL reads 0).
    public func int(_ name: String) throws(SQLiteError) -> Int { int(try index(of: name)) }
    /// The column called `name` as a `Bool` (non-zero is true).
    public func bool(_ name: String) throws(SQLiteError) -> Bool { bool(try index(of: name)) }
    /// The column called `name` as a double (NULL reads 0.0).
    public func double(_ name: String) throws(SQLiteError) -> Double { double(try index(of: name)) }
    /// The column called `name` as an integer, or nil for NULL.
    public func optionalInt64(_ name: String) throws(SQLiteError) -> Int64? { optionalInt64(try index(of: name)) }
    /// The column called `name` as a double, or nil for NULL.
    public func optionalDouble(_ name: String) throws(SQLiteError) -> Double? { optionalDouble(try index(of: name)) }
    /// The column called `name` as text, or nil for NULL.
    public func string(_ name: String) throws(SQLiteError) -> String? { string(try index(of: name)) }
    /// The column called `name` as bytes, or nil for NULL.
    public func blob(_ name: String) throws(SQLiteError) -> [UInt8]? { blob(try index(of: name)) }
    /// The column called `name` in its storage class.
    public func value(_ name: String) throws(SQLiteError) -> SQLiteValue { value(try index(of: name)) }
}
