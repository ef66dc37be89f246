/// HTTP header fields in received order, looked up case-insensitively (RFC 9110 §5.1).
///
/// A list rather than a dictionary: order and repeated fields are kept, and with the handful of
/// fields a request carries a linear scan is faster than hashing lowercased names.
public struct HTTPHeaders: Sendable, Equatable, Sequence, ExpressibleByDictionaryLiteral {
    public typealias Element = (name: String, value: String)

    private var fields: [Element]

    public init() { fields = [] }

    public init(_ fields: [(String, String)]) {
        self.fields = fields.map { (name: $0.0, value: $0.1) }
    }

    public init(dictionaryLiteral elements: (String, String)...) {
        self.init(elements)
    }

    public var count: Int { fields.count }
    public var isEmpty: Bool { fields.isEmpty }

    public func makeIterator() -> IndexingIterator<[Element]> { fields.makeIterator() }

    /// The first value of the field `name` (case-insensitive); setting replaces every field of that
    /// name, and setting `nil` removes them.
    public subscript(name: String) -> String? {
        get { fields.first { Self.equalNames($0.name, name) }?.value }
        set {
            if let newValue {
                replaceOrAdd(name: name, value: newValue)
            } else {
                remove(name: name)
            }
        }
    }

    /// Every value of the field `name`, in order.
    public func values(for name: String) -> [String] {
        fields.filter { Self.equalNames($0.name, name) }.map(\.value)
    }

    public func contains(_ name: String) -> Bool {
        fields.contains { Self.equalNames($0.name, name) }
    }

    /// Appends a field (keeping any existing ones of the same name).
    public mutating func add(name: String, value: String) {
        fields.append((name: name, value: value))
    }

    /// Sets the first field named `name` to `value` and removes any later ones, or appends it.
    public mutating func replaceOrAdd(name: String, value: String) {
        guard let index = fields.firstIndex(where: { Self.equalNames($0.name, name) }) else {
            fields.append((name: name, value: value))
            return
        }
        fields[index].value = value
        var position = 0
        fields.removeAll { field in
            defer { position += 1 }
            return position > index && Self.equalNames(field.name, name)
        }
    }

    public mutating func remove(name: String) {
        fields.removeAll { Self.equalNames($0.name, name) }
    }

    /// Whether the comma-separated list in field `name` contains `token` (case-insensitive), as used
    /// by `Connection: close` (RFC 9110 §7.6.1).
    public func containsToken(_ token: String, in name: String) -> Bool {
        for field in fields where Self.equalNames(field.name, name) {
            for element in field.value.split(separator: ",") {
                if Self.equalNames(element.trimmingOWS(), token) { return true }
            }
        }
        return false
    }

    public static func == (lhs: HTTPHeaders, rhs: HTTPHeaders) -> Bool {
        lhs.fields.count == rhs.fields.count
            && zip(lhs.fields, rhs.fields).allSatisfy { $0.name == $1.name && $0.value == $1.value }
    }

    /// ASCII case-insensitive comparison (header names are ASCII tokens).
    static func equalNames<A: StringProtocol, B: StringProtocol>(_ a: A, _ b: B) -> Bool {
        let a = a.utf8
        let b = b.utf8
        guard a.count == b.count else { return false }
        for (x, y) in zip(a, b) where x != y {
            guard ASCII.lowercased(x) == ASCII.lowercased(y) else { return false }
        }
        return true
    }
}

extension StringProtocol {
    /// Drops optional whitespace (SP and HTAB, RFC 9110 §5.6.3) at both ends.
    func trimmingOWS() -> Substring {
        let text = Substring(self)
        guard let start = text.firstIndex(where: { $0 != " " && $0 != "\t" }) else { return "" }
        let end = text.lastIndex(where: { $0 != " " && $0 != "\t" })!
        return text[start...end]
    }
}

/// Byte classes from RFC 9110 §5.6.2 and RFC 9112.
enum ASCII {
    static let cr: UInt8 = 0x0D
    static let lf: UInt8 = 0x0A
    static let space: UInt8 = 0x20
    static let tab: UInt8 = 0x09
    static let colon: UInt8 = 0x3A

    @inline(__always)
    static func lowercased(_ byte: UInt8) -> UInt8 {
        byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte
    }

    /// `tchar`: the characters of a token (method names, header field names).
    static let isTokenTable: [Bool] = (0..<256).map { value in
        let byte = UInt8(value)
        switch byte {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: return true
        default: return "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }

    @inline(__always)
    static func isToken(_ byte: UInt8) -> Bool { isTokenTable[Int(byte)] }

    /// Bytes allowed in a field value: HTAB, SP, VCHAR and obs-text (RFC 9110 §5.5). No NUL, no CTLs.
    @inline(__always)
    static func isFieldValue(_ byte: UInt8) -> Bool {
        byte == tab || (byte >= 0x20 && byte != 0x7F)
    }

    /// Bytes allowed in a request target: visible ASCII only (RFC 9112 §3.2; no spaces, no CTLs).
    @inline(__always)
    static func isTargetByte(_ byte: UInt8) -> Bool { byte > 0x20 && byte < 0x7F }
}
