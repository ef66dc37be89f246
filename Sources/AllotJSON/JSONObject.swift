/// A JSON object that keeps its members in document (insertion) order.
///
/// Order matters for output people read (API responses, `allot plan`) and for deterministic
/// bytes (snapshots, hashes); lookups stay O(1) through a dictionary beside the key list.
public struct JSONObject: Sendable, Hashable, Sequence, ExpressibleByDictionaryLiteral {
    public private(set) var keys: [String]
    private var values: [String: JSON]

    public init() {
        keys = []
        values = [:]
    }

    /// Builds an object from pairs in order; a later duplicate key replaces the earlier value
    /// but keeps the earlier position.
    public init(_ pairs: [(String, JSON)]) {
        keys = []
        keys.reserveCapacity(pairs.count)
        values = Dictionary(minimumCapacity: pairs.count)
        for (key, value) in pairs { self[key] = value }
    }

    public init(dictionaryLiteral elements: (String, JSON)...) { self.init(elements) }

    public var count: Int { keys.count }
    public var isEmpty: Bool { keys.isEmpty }

    /// The value for `key`; assigning nil removes the member.
    public subscript(key: String) -> JSON? {
        get { values[key] }
        set {
            if let newValue {
                if values.updateValue(newValue, forKey: key) == nil { keys.append(key) }
            } else if values.removeValue(forKey: key) != nil {
                keys.removeAll { $0 == key }
            }
        }
    }

    public func makeIterator() -> AnyIterator<(key: String, value: JSON)> {
        var index = 0
        let keys = self.keys
        let values = self.values
        return AnyIterator {
            guard index < keys.count else { return nil }
            defer { index += 1 }
            let key = keys[index]
            return (key, values[key] ?? .null)
        }
    }

    /// Objects are equal when they have the same members, whatever their order (RFC 8259 semantics).
    public static func == (lhs: JSONObject, rhs: JSONObject) -> Bool { lhs.values == rhs.values }

    public func hash(into hasher: inout Hasher) {
        // Order-independent: combine per-member hashes commutatively.
        var combined = 0
        for (key, value) in values {
            var member = Hasher()
            member.combine(key)
            member.combine(value)
            combined ^= member.finalize()
        }
        hasher.combine(values.count)
        hasher.combine(combined)
    }
}
