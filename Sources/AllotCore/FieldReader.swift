import AllotJSON

/// Typed reading of JSON input that records every problem with its JSON path instead of stopping at
/// the first: shared by the policy validator (which must report *all* errors, SPEC 10) and the plan
/// reader (which names the tenant and field, SPEC 6 "What-if plans").
struct FieldReader {
    /// One problem: where, what kind, and a message.
    struct Problem: Sendable, Hashable {
        var path: JSONPath
        var code: PolicyIssue.Code
        var message: String
    }

    /// How a number must be bounded.
    enum NumberRule {
        /// `>= 0` (rates, amounts, durations that may be zero).
        case nonNegative
        /// `> 0` (weights, intervals).
        case positive
        /// `[0, 1]`.
        case fraction
        /// `[0, 1)` (a safety margin of 1 would leave nothing).
        case fractionBelowOne
        /// `(0, 1]` (an EWMA weight of 0 would never move).
        case fractionAboveZero
        /// `[0.001, 1000]`: a share weight (tier, tenant, override, queue). The engine multiplies a tier's weight by
        /// the tenant's or the override's, so each is bounded for their product to stay finite and the
        /// water-filling exact: a weight of 1e308 overflowed to infinity and froze the loop (round 11). Priority,
        /// not weight, is what orders tiers absolutely.
        case weight
        /// `[0, 1e12]`: a rate per minute (a capacity, a floor, a ceiling, a demand). Larger is no real pool, and
        /// the engine sums them: floors of 1.7e308 summed to infinity and every tenant was allocated 0.
        case rate
        /// Any finite number: the caller checks its own range, and says it in one message for every value outside
        /// (`loop.interval_s` at 0 said "greater than 0" while 0.5 said "between 1 and 60 s").
        case finite
    }

    /// The largest ``NumberRule/rate``, per minute.
    static let maxRate = 1e12

    /// The range of ``NumberRule/weight``.
    static let weightRange = 0.001...1000.0

    private(set) var problems: [Problem] = []

    mutating func report(_ path: JSONPath, _ code: PolicyIssue.Code, _ message: String) {
        problems.append(Problem(path: path, code: code, message: message))
    }

    /// The value as an object, or a `wrong_type` problem.
    mutating func object(_ json: JSON?, at path: JSONPath) -> JSONObject? {
        guard let json else { return nil }
        if let object = json.objectValue { return object }
        report(path, .wrongType, "expected an object, got \(json.typeName)")
        return nil
    }

    /// Reports fields of `object` that are not in `known` (suggesting the nearest known name) and
    /// fields of `required` that are missing.
    mutating func checkFields(_ object: JSONObject, at path: JSONPath, known: [String], required: [String] = []) {
        for key in object.keys where !known.contains(key) {
            report(path.key(key), .unknownField, NameSuggestion.unknownMessage("field", key, known: known))
        }
        for key in required where object[key] == nil {
            report(path.key(key), .missingField, "missing required field \"\(key)\"")
        }
    }

    // Every reader takes an optional value and returns nil for an absent one without a problem:
    // optional fields read as `if let value = reader.number(object["key"], …) { … }`.

    /// A number obeying `rule`, or nil after reporting why not.
    mutating func number(_ json: JSON?, at path: JSONPath, _ rule: NumberRule) -> Double? {
        guard let json else { return nil }
        guard let value = json.doubleValue else {
            report(path, .wrongType, "expected a number, got \(json.typeName)")
            return nil
        }
        guard value.isFinite else {
            report(path, .outOfRange, "must be a finite number")
            return nil
        }
        switch rule {
        case .nonNegative where value < 0, .rate where value < 0:
            report(path, .negative, "must not be negative (got \(Quantity.format(value)))")
            return nil
        case .positive where value <= 0:
            report(path, value < 0 ? .negative : .outOfRange, "must be greater than 0 (got \(Quantity.format(value)))")
            return nil
        case .fraction where !(0...1).contains(value):
            report(path, .outOfRange, "must be between 0 and 1 (got \(Quantity.format(value)))")
            return nil
        case .fractionBelowOne where !(value >= 0 && value < 1):
            report(path, .outOfRange, "must be at least 0 and below 1 (got \(Quantity.format(value)))")
            return nil
        case .fractionAboveZero where !(value > 0 && value <= 1):
            report(path, .outOfRange, "must be above 0 and at most 1 (got \(Quantity.format(value)))")
            return nil
        case .rate where value > Self.maxRate:
            report(path, .outOfRange, "must be at most 1e12 per minute (got \(Quantity.format(value)))")
            return nil
        case .weight where !Self.weightRange.contains(value):
            report(
                path, value < 0 ? .negative : .outOfRange,
                "must be between 0.001 and 1000 (got \(Quantity.format(value)))")
            return nil
        default:
            return value
        }
    }

    /// An integer `>= minimum`, or nil after reporting why not.
    mutating func integer(_ json: JSON?, at path: JSONPath, minimum: Int) -> Int? {
        guard let json else { return nil }
        guard json.doubleValue != nil else {
            report(path, .wrongType, "expected an integer, got \(json.typeName)")
            return nil
        }
        guard let value = json.intValue else {
            report(path, .wrongType, "expected an integer, got \(json.serializedString())")
            return nil
        }
        guard value >= minimum else {
            report(path, value < 0 ? .negative : .outOfRange, "must be at least \(minimum) (got \(value))")
            return nil
        }
        return value
    }

    mutating func string(_ json: JSON?, at path: JSONPath) -> String? {
        guard let json else { return nil }
        if let value = json.stringValue { return value }
        report(path, .wrongType, "expected a string, got \(json.typeName)")
        return nil
    }

    mutating func bool(_ json: JSON?, at path: JSONPath) -> Bool? {
        guard let json else { return nil }
        if let value = json.boolValue { return value }
        report(path, .wrongType, "expected true or false, got \(json.typeName)")
        return nil
    }

    /// One of an enumeration's raw values.
    mutating func choice<Choice: RawRepresentable & CaseIterable>(
        _ json: JSON?, at path: JSONPath, _ type: Choice.Type
    ) -> Choice? where Choice.RawValue == String {
        guard let text = string(json, at: path) else { return nil }
        if let value = Choice(rawValue: text) { return value }
        let known = Choice.allCases.map(\.rawValue)
        report(path, .invalidValue, NameSuggestion.unknownMessage("value", text, known: known))
        return nil
    }

    /// A quantity: a number (absolute, `>= 0`), `"N%"` (0 to `percentLimit`) or, when allowed,
    /// `"unbounded"`.
    /// `rateOnly`: a rate (a plan's demand), where a percentage is refused by the caller: the error for a value of
    /// the wrong form does not offer one (outside evaluation round 38, L5).
    mutating func quantity(
        _ json: JSON?, at path: JSONPath, allowUnbounded: Bool = false, percentLimit: Double = 100,
        rateOnly: Bool = false
    ) -> Quantity? {
        guard let json else { return nil }
        let rateForms = allowUnbounded ? "a number or \"unbounded\"" : "a number"
        switch json {
        case .int, .double:
            return number(json, at: path, .rate).map { Quantity.absolute($0) }
        case .string(let text):
            guard let quantity = Quantity.parse(percentOrUnbounded: text) else {
                if text.hasPrefix("-"), Quantity.parse(percentOrUnbounded: String(text.dropFirst())) != nil {
                    report(path, .negative, "must not be negative (got \"\(text)\")")
                    return nil
                }
                let forms =
                    rateOnly
                    ? rateForms
                    : allowUnbounded
                        ? "a number, a percentage such as \"5%\" or \"unbounded\""
                        : "a number or a percentage such as \"5%\""
                // A near miss of a percentage ("2 %", "+2%", "2.%") says what the form is.
                let rule =
                    text.contains("%") && !rateOnly
                    ? " (a percentage is digits, an optional fraction, then %: no spaces or signs)" : ""
                report(path, .invalidValue, "expected \(forms)\(rule), got \"\(text)\"")
                return nil
            }
            switch quantity {
            case .absolute:
                guard allowUnbounded else {
                    report(path, .invalidValue, "\"unbounded\" is not allowed here; use a number or a percentage")
                    return nil
                }
            case .percent(let percent):
                if percent > percentLimit, !rateOnly {  // a rate's caller refuses any percentage itself
                    report(
                        path, .outOfRange,
                        "percentage out of range: \"\(text)\" (allowed 0% to \(Quantity.format(percentLimit))%)")
                    return nil
                }
            }
            return quantity
        default:
            let forms = rateOnly ? rateForms : "a number or a percentage string"
            report(path, .wrongType, "expected \(forms), got \(json.typeName)")
            return nil
        }
    }

    /// A per-dimension value: `{"rpm": Q, "tpm": Q}` (either may be left out) or a single Q for both.
    mutating func dimensions(
        _ json: JSON?, at path: JSONPath, allowUnbounded: Bool = false, rateOnly: Bool = false
    ) -> PerDimension<Quantity?>? {
        guard let json else { return nil }
        if json.objectValue == nil, json.doubleValue != nil || json.stringValue != nil {
            guard let both = quantity(json, at: path, allowUnbounded: allowUnbounded, rateOnly: rateOnly) else {
                return nil
            }
            return PerDimension(both)
        }
        guard let object = object(json, at: path) else { return nil }
        checkFields(object, at: path, known: RateDimension.allCases.map(\.rawValue))
        var result = PerDimension<Quantity?>(nil)
        for dimension in RateDimension.allCases {
            if let value = object[dimension.rawValue] {
                result[dimension] = quantity(
                    value, at: path.key(dimension.rawValue), allowUnbounded: allowUnbounded, rateOnly: rateOnly)
            }
        }
        return result
    }
}
