import AllotJSON

/// The value of one field in a log record. Literals work directly: `["tenant": "acme", "events": 42]`.
public enum LogValue: Sendable, Hashable {
    case string(String)
    case int(Int64)
    /// Non-finite doubles are written as `null` (JSON has no NaN).
    case double(Double)
    case bool(Bool)
    case null
    /// Any JSON value, written as nested JSON (e.g. an error's details object).
    case json(JSON)

    public init(_ value: String) { self = .string(value) }
    public init(_ value: some BinaryInteger) { self = Int64(exactly: value).map(LogValue.int) ?? .string("\(value)") }
    public init(_ value: Double) { self = .double(value) }
    public init(_ value: Bool) { self = .bool(value) }
    public init(_ value: JSON) { self = .json(value) }

    /// Writes the value into a JSON writer positioned after a key.
    func write(to writer: inout JSONWriter) {
        switch self {
        case .string(let string): writer.value(string)
        case .int(let number): writer.value(number)
        case .double(let number): writer.value(number)
        case .bool(let flag): writer.value(flag)
        case .null: writer.valueNull()
        case .json(let json): writer.value(json)
        }
    }
}

extension LogValue: ExpressibleByStringLiteral, ExpressibleByStringInterpolation, ExpressibleByIntegerLiteral,
    ExpressibleByFloatLiteral, ExpressibleByBooleanLiteral, ExpressibleByNilLiteral
{
    public init(stringLiteral value: String) { self = .string(value) }
    public init(stringInterpolation: DefaultStringInterpolation) {
        self = .string(String(stringInterpolation: stringInterpolation))
    }
    public init(integerLiteral value: Int64) { self = .int(value) }
    public init(floatLiteral value: Double) { self = .double(value) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(nilLiteral: ()) { self = .null }
}
