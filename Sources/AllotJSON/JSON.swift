/// A JSON value (RFC 8259).
///
/// Allot parses and writes JSON itself rather than through Foundation's coders: telemetry ingest
/// and snapshot serving are hot paths (SPEC section 13 asks for 100,000 events/s), and policy and
/// plan validation need exact JSON paths and types for their error messages.
///
/// Numbers keep the distinction the text made: a number written without fraction or exponent
/// that fits `Int64` is `.int`, any other number is `.double`. Accessors such as `doubleValue`
/// and `int64Value` bridge the two, so callers rarely need to care.
public enum JSON: Sendable, Hashable {
    case null
    case bool(Bool)
    case int(Int64)
    case double(Double)
    case string(String)
    case array([JSON])
    case object(JSONObject)
}

extension JSON {
    /// The member `key` of an object; nil for a missing key or a value that is not an object.
    public subscript(key: String) -> JSON? {
        if case .object(let object) = self { return object[key] }
        return nil
    }

    /// The element at `index` of an array; nil when out of range or not an array.
    public subscript(index: Int) -> JSON? {
        if case .array(let array) = self, array.indices.contains(index) { return array[index] }
        return nil
    }

    public var isNull: Bool {
        if case .null = self { return true }
        return false
    }

    public var boolValue: Bool? {
        if case .bool(let value) = self { return value }
        return nil
    }

    /// The number as a `Double`, whether it was written as an integer or not.
    public var doubleValue: Double? {
        switch self {
        case .int(let value): return Double(value)
        case .double(let value): return value
        default: return nil
        }
    }

    /// The number as an `Int64` when it is integral and in range (`5` and `5.0` both give 5).
    public var int64Value: Int64? {
        switch self {
        case .int(let value):
            return value
        case .double(let value):
            guard value.isFinite, value >= -9_223_372_036_854_775_808.0, value < 9_223_372_036_854_775_808.0
            else { return nil }
            let integer = Int64(value)  // truncates; exact only when the value is integral
            return Double(integer) == value ? integer : nil
        default:
            return nil
        }
    }

    public var intValue: Int? { int64Value.flatMap { Int(exactly: $0) } }

    public var stringValue: String? {
        if case .string(let value) = self { return value }
        return nil
    }

    public var arrayValue: [JSON]? {
        if case .array(let value) = self { return value }
        return nil
    }

    public var objectValue: JSONObject? {
        if case .object(let value) = self { return value }
        return nil
    }

    /// The JSON type's name, for error messages: "null", "boolean", "number", "string", "array", "object".
    public var typeName: String {
        switch self {
        case .null: return "null"
        case .bool: return "boolean"
        case .int, .double: return "number"
        case .string: return "string"
        case .array: return "array"
        case .object: return "object"
        }
    }
}

// MARK: - Equality

extension JSON {
    /// Numbers compare by value (`.int(1) == .double(1.0)`); objects compare as unordered maps.
    public static func == (lhs: JSON, rhs: JSON) -> Bool {
        switch (lhs, rhs) {
        case (.null, .null): return true
        case (.bool(let a), .bool(let b)): return a == b
        case (.int(let a), .int(let b)): return a == b
        case (.double(let a), .double(let b)): return a == b
        case (.int(let a), .double(let b)), (.double(let b), .int(let a)):
            return Double(a) == b && JSON.double(b).int64Value == a
        case (.string(let a), .string(let b)): return a == b
        case (.array(let a), .array(let b)): return a == b
        case (.object(let a), .object(let b)): return a == b
        default: return false
        }
    }

    public func hash(into hasher: inout Hasher) {
        switch self {
        case .null:
            hasher.combine(0)
        case .bool(let value):
            hasher.combine(1)
            hasher.combine(value)
        case .int, .double:
            // Equal numbers must hash alike whichever case holds them.
            hasher.combine(2)
            if let integer = int64Value { hasher.combine(integer) } else { hasher.combine(doubleValue ?? 0) }
        case .string(let value):
            hasher.combine(3)
            hasher.combine(value)
        case .array(let value):
            hasher.combine(4)
            hasher.combine(value)
        case .object(let value):
            hasher.combine(5)
            hasher.combine(value)
        }
    }
}

// MARK: - Literals

extension JSON: ExpressibleByNilLiteral, ExpressibleByBooleanLiteral, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByStringLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral
{
    public init(nilLiteral: ()) { self = .null }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(stringLiteral value: String) { self = .string(value) }
    public init(arrayLiteral elements: JSON...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSON)...) { self = .object(JSONObject(elements)) }
}

extension JSON: CustomStringConvertible {
    /// The compact serialization.
    public var description: String { serializedString() }
}
