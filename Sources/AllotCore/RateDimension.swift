/// A rate dimension of an upstream pool.
///
/// Every pool is allocated per dimension independently (SPEC 6): requests per minute and tokens per
/// minute. All rates in Allot are per minute.
public enum RateDimension: String, CaseIterable, Sendable, Hashable, Codable, Comparable {
    /// Requests per minute.
    case rpm
    /// Tokens per minute (prompt + completion).
    case tpm

    public static func < (lhs: RateDimension, rhs: RateDimension) -> Bool {
        lhs.index < rhs.index
    }

    /// The position in `allCases`: `rpm` first, then `tpm` (the order of every JSON output).
    var index: Int {
        switch self {
        case .rpm: 0
        case .tpm: 1
        }
    }
}

/// One value per dimension: the shape of every per-dimension setting, estimate and result.
public struct PerDimension<Value> {
    /// The requests-per-minute value.
    public var rpm: Value
    /// The tokens-per-minute value.
    public var tpm: Value

    /// Creates a value with an entry for each dimension.
    public init(rpm: Value, tpm: Value) {
        self.rpm = rpm
        self.tpm = tpm
    }

    /// Creates a value with the same entry for both dimensions.
    public init(_ both: Value) {
        self.rpm = both
        self.tpm = both
    }

    /// Creates a value by computing each dimension's entry.
    public init(_ make: (RateDimension) throws -> Value) rethrows {
        self.rpm = try make(.rpm)
        self.tpm = try make(.tpm)
    }

    /// The entry for `dimension`.
    public subscript(dimension: RateDimension) -> Value {
        get {
            switch dimension {
            case .rpm: rpm
            case .tpm: tpm
            }
        }
        set {
            switch dimension {
            case .rpm: rpm = newValue
            case .tpm: tpm = newValue
            }
        }
        // In place: `entries[dimension].append(x)` on an array entry would otherwise copy the array.
        _modify {
            switch dimension {
            case .rpm: yield &rpm
            case .tpm: yield &tpm
            }
        }
    }

    /// Transforms each entry.
    public func map<T>(_ transform: (Value) throws -> T) rethrows -> PerDimension<T> {
        PerDimension<T>(rpm: try transform(rpm), tpm: try transform(tpm))
    }
}

extension PerDimension: Sendable where Value: Sendable {}
extension PerDimension: Equatable where Value: Equatable {}
extension PerDimension: Hashable where Value: Hashable {}
extension PerDimension: Codable where Value: Codable {}
