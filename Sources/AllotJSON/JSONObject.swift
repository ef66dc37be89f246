/// A JSON object that keeps its members in document (insertion) order.
///
/// Order matters for output people read (API responses, `allot plan`) and for deterministic
/// bytes (snapshots, hashes). Members live in one array; small objects (the common case: a
/// telemetry event has about fifteen members) are searched linearly, which is faster than
/// hashing every key, and a key index is built only once an object grows past
/// `indexThreshold` members, so large objects (a policy's tenant map) stay O(1) per lookup.
public struct JSONObject: Sendable, Hashable, Sequence, ExpressibleByDictionaryLiteral {
    private var members: [Member]
    private var index: [String: Int]?

    /// Objects with more members than this get a hash index.
    static let indexThreshold = 16

    struct Member: Sendable {
        var key: String
        var value: JSON
    }

    public init() {
        members = []
    }

    /// Builds an object from pairs in order; a later duplicate key replaces the earlier value
    /// but keeps the earlier position.
    public init(_ pairs: [(String, JSON)]) {
        members = []
        members.reserveCapacity(pairs.count)
        for (key, value) in pairs { self[key] = value }
    }

    public init(dictionaryLiteral elements: (String, JSON)...) { self.init(elements) }

    /// Member names in order.
    public var keys: [String] { members.map(\.key) }
    public var count: Int { members.count }
    public var isEmpty: Bool { members.isEmpty }

    private func position(of key: String) -> Int? {
        if let index { return index[key] }
        for position in members.indices where members[position].key == key { return position }
        return nil
    }

    /// The value for `key`; assigning nil removes the member.
    public subscript(key: String) -> JSON? {
        get { position(of: key).map { members[$0].value } }
        set {
            if let newValue {
                if let position = position(of: key) {
                    members[position].value = newValue
                } else {
                    members.append(Member(key: key, value: newValue))
                    if index != nil {
                        index![key] = members.count - 1
                    } else if members.count > Self.indexThreshold {
                        rebuildIndex()
                    }
                }
            } else if let position = position(of: key) {
                members.remove(at: position)
                if index != nil { rebuildIndex() }
            }
        }
    }

    /// Appends a member unless `key` is present already (then returns false and changes nothing): the parser's one
    /// look-up per member.
    mutating func appendIfAbsent(key: String, value: JSON) -> Bool {
        guard position(of: key) == nil else { return false }
        appendUnchecked(key: key, value: value)
        return true
    }

    /// Appends a member known not to be present yet.
    mutating func appendUnchecked(key: String, value: JSON) {
        members.append(Member(key: key, value: value))
        if index != nil {
            index![key] = members.count - 1
        } else if members.count > Self.indexThreshold {
            rebuildIndex()
        }
    }

    private mutating func rebuildIndex() {
        var built = [String: Int](minimumCapacity: members.count * 2)
        for (position, member) in members.enumerated() { built[member.key] = position }
        index = built
    }

    public func makeIterator() -> IndexingIterator<[(key: String, value: JSON)]> {
        members.map { (key: $0.key, value: $0.value) }.makeIterator()
    }

    /// Calls `body` for each member in order without building an intermediate array.
    public func forEachMember(_ body: (String, JSON) throws -> Void) rethrows {
        for member in members { try body(member.key, member.value) }
    }

    /// Objects are equal when they have the same members, whatever their order (RFC 8259 semantics).
    public static func == (lhs: JSONObject, rhs: JSONObject) -> Bool {
        guard lhs.members.count == rhs.members.count else { return false }
        for member in lhs.members {
            guard let other = rhs[member.key], other == member.value else { return false }
        }
        return true
    }

    public func hash(into hasher: inout Hasher) {
        // Order-independent: combine per-member hashes commutatively.
        var combined = 0
        for member in members {
            var memberHasher = Hasher()
            memberHasher.combine(member.key)
            memberHasher.combine(member.value)
            combined ^= memberHasher.finalize()
        }
        hasher.combine(members.count)
        hasher.combine(combined)
    }
}
