/// A floor, ceiling, guard or allowance: either an absolute rate (per minute) or a percentage of the
/// pool's capacity `C` for that dimension (SPEC 6.1: "absolute, or a fraction of C").
///
/// In policy and plan JSON a quantity is written as a number (`250` — absolute, per minute), a
/// string with a percent sign (`"5%"` — 5 % of `C`, between `0%` and `100%`), or, where a value may
/// be unbounded (ceilings, `guard_max`), the string `"unbounded"`.
public enum Quantity: Sendable, Hashable {
    /// An absolute rate per minute (requests or tokens). `.infinity` means unbounded.
    case absolute(Double)
    /// A percentage of the pool's capacity `C` (after the safety margin), as written: `5` for `"5%"`.
    case percent(Double)

    /// No limit: the default ceiling and `guard_max`.
    public static let unbounded = Quantity.absolute(.infinity)
    /// Nothing: the default floor and `guard_min`.
    public static let zero = Quantity.absolute(0)

    /// The absolute per-minute value against a pool whose capacity is `capacity`.
    @inlinable
    public func resolved(capacity: Double) -> Double {
        switch self {
        case .absolute(let value): value
        case .percent(let percent): capacity * percent / 100
        }
    }

    /// Whether this is the unbounded value.
    public var isUnbounded: Bool { self == .unbounded }

    /// The JSON text form: a number, `"N%"` or `"unbounded"`.
    public var jsonText: String {
        switch self {
        case .absolute(let value) where value == .infinity: "unbounded"
        case .absolute(let value): Quantity.format(value)
        case .percent(let percent): Quantity.format(percent) + "%"
        }
    }

    /// Parses the string forms: `"unbounded"`, or a percentage written as digits, an optional fraction
    /// (`.` and at least one digit) and `%`, nothing else (`^[0-9]+(\.[0-9]+)?%$`: `"5%"`, `"12.5%"`).
    /// Returns nil for anything else — `"2 %"`, `" 2%"`, `"+2%"`, `"2.%"`, `"2% "`, `"-2%"`: a policy
    /// is read by people and by this parser, and a form one of them reads differently is refused. The
    /// range of a percentage is checked by the validator, which can name the field.
    public static func parse(percentOrUnbounded text: String) -> Quantity? {
        if text == "unbounded" { return .unbounded }
        guard text.hasSuffix("%") else { return nil }
        let number = text.utf8.dropLast()
        let parts = number.split(separator: UInt8(ascii: "."), maxSplits: 1, omittingEmptySubsequences: false)
        guard !parts.isEmpty, parts.count <= 2,
            parts.allSatisfy({ !$0.isEmpty && $0.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") } }),
            let value = Double(String(decoding: number, as: UTF8.self)), value.isFinite
        else { return nil }
        return .percent(value)
    }

    /// Formats a number the way the canonical policy form writes it: integers without a fraction.
    static func format(_ value: Double) -> String {
        if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
        return String(value)
    }

    /// A computed amount for a person to read (alerts, proposal reasons): at most six significant digits, so that
    /// floating-point dust does not show ("spent 1 of 5 USD", not 0.9999999999999999; outside evaluation round
    /// 20). What a person typed is echoed with ``format(_:)``, exactly.
    static func formatMeasured(_ value: Double) -> String {
        guard value.isFinite, value != 0, abs(value) < 1e15 else { return format(value) }
        let digits = 5 - value.exponentBase10
        guard digits <= 300 else { return format(value) }  // 10^digits would overflow
        guard digits > 0 else {
            let factor = Double.powerOfTen(-digits)
            return format((value / factor).rounded() * factor)
        }
        let factor = Double.powerOfTen(digits)
        return format((value * factor).rounded() / factor)
    }
}

extension Quantity: Codable {
    /// Encodes as in policy files: a number, `"N%"` or `"unbounded"` (never a non-finite number).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .absolute(let value) where value.isFinite: try container.encode(value)
        default: try container.encode(jsonText)
        }
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if let value = try? container.decode(Double.self) {
            self = .absolute(value)
            return
        }
        let text = try container.decode(String.self)
        guard let quantity = Quantity.parse(percentOrUnbounded: text) else {
            throw DecodingError.dataCorruptedError(
                in: container, debugDescription: "expected a number, \"N%\" or \"unbounded\", got \"\(text)\"")
        }
        self = quantity
    }
}

extension Double {
    /// 10 to the `exponent`, by repeated multiplication (division for a negative one), without Foundation.
    public static func powerOfTen(_ exponent: Int) -> Double {
        var value = 1.0
        if exponent >= 0 { for _ in 0..<exponent { value *= 10 } } else { for _ in 0..<(-exponent) { value /= 10 } }
        return value
    }

    /// floor(log10(|self|)) for a finite non-zero value, without Foundation.
    public var exponentBase10: Int {
        var exponent = 0
        var value = abs(self)
        while value >= 10 {
            value /= 10
            exponent += 1
        }
        while value < 1 {
            value *= 10
            exponent -= 1
        }
        return exponent
    }
}
