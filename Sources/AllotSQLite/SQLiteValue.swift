/// One SQLite value, in SQLite's five storage classes.
///
/// Used where the type of a value is only known at run time (``SQLiteRow/value(_:)``, generic
/// tooling, tests). Typed code binds and reads `Int64`, `Double`, `String` and `[UInt8]` directly,
/// which avoids building this enum on hot paths.
///
/// SQLite documentation: <https://www.sqlite.org/datatype3.html>
public enum SQLiteValue: Sendable, Hashable {
    case null
    case integer(Int64)
    case real(Double)
    case text(String)
    case blob([UInt8])

    /// The integer, or nil for any other storage class.
    public var int64: Int64? {
        if case .integer(let value) = self { return value }
        return nil
    }

    /// The number (integer or real) as a double, or nil for any other storage class.
    public var double: Double? {
        switch self {
        case .integer(let value): return Double(value)
        case .real(let value): return value
        default: return nil
        }
    }

    /// The text, or nil for any other storage class.
    public var string: String? {
        if case .text(let value) = self { return value }
        return nil
    }

    /// The bytes, or nil for any other storage class.
    public var blob: [UInt8]? {
        if case .blob(let value) = self { return value }
        return nil
    }

    /// True for SQL NULL.
    public var isNull: Bool { self == .null }
}

/// A Swift value that can be bound to a statement parameter.
///
/// Conformances: `Int`, `Int64`, `Int32`, `Double`, `Bool` (as 0/1), `String`, `[UInt8]` (a blob),
/// ``SQLiteValue``, and `Optional` of any of these (`nil` binds SQL NULL).
public protocol SQLiteBindable {
    /// Binds `self` to the 1-based parameter `index` of `statement`.
    func bind(to statement: SQLiteStatement, at index: Int) throws(SQLiteError)
}

extension Int64: SQLiteBindable {
    public func bind(to statement: SQLiteStatement, at index: Int) throws(SQLiteError) {
        try statement.bind(self, at: index)
    }
}

extension Int: SQLiteBindable {
    public func bind(to statement: SQLiteStatement, at index: Int) throws(SQLiteError) {
        try statement.bind(Int64(self), at: index)
    }
}

extension Int32: SQLiteBindable {
    public func bind(to statement: SQLiteStatement, at index: Int) throws(SQLiteError) {
        try statement.bind(Int64(self), at: index)
    }
}

extension Bool: SQLiteBindable {
    /// SQLite has no boolean type: `true` is stored as 1 and `false` as 0.
    public func bind(to statement: SQLiteStatement, at index: Int) throws(SQLiteError) {
        try statement.bind(Int64(self ? 1 : 0), at: index)
    }
}

extension Double: SQLiteBindable {
    public func bind(to statement: SQLiteStatement, at index: Int) throws(SQLiteError) {
        try statement.bind(self, at: index)
    }
}

extension String: SQLiteBindable {
    public func bind(to statement: SQLiteStatement, at index: Int) throws(SQLiteError) {
        try statement.bind(self, at: index)
    }
}

extension Array: SQLiteBindable where Element == UInt8 {
    /// Binds the bytes as a BLOB (an empty array binds an empty blob, not NULL).
    public func bind(to statement: SQLiteStatement, at index: Int) throws(SQLiteError) {
        try statement.bind(blob: self, at: index)
    }
}

extension SQLiteValue: SQLiteBindable {
    public func bind(to statement: SQLiteStatement, at index: Int) throws(SQLiteError) {
        switch self {
        case .null: try statement.bindNull(at: index)
        case .integer(let value): try statement.bind(value, at: index)
        case .real(let value): try statement.bind(value, at: index)
        case .text(let value): try statement.bind(value, at: index)
        case .blob(let value): try statement.bind(blob: value, at: index)
        }
    }
}

extension Optional: SQLiteBindable where Wrapped: SQLiteBindable {
    /// `nil` binds SQL NULL.
    public func bind(to statement: SQLiteStatement, at index: Int) throws(SQLiteError) {
        switch self {
        case .none: try statement.bindNull(at: index)
        case .some(let value): try value.bind(to: statement, at: index)
        }
    }
}
