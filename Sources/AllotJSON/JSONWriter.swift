/// A fast, append-only JSON writer for hot paths that must not build a `JSON` tree first
/// (snapshot bodies, telemetry replies, log lines).
///
/// Commas are placed automatically: call `key(_:)` before each member value inside an object,
/// and values directly inside arrays. The writer does not check that the calls form valid
/// JSON beyond that; the tests do.
public struct JSONWriter: Sendable {
    public private(set) var bytes: [UInt8]
    /// One entry per open container: whether a value was already written in it.
    private var hasValue: [Bool] = []
    /// True between `key(_:)` and the member's value.
    private var afterKey = false

    public init(capacity: Int = 1024) {
        bytes = []
        bytes.reserveCapacity(capacity)
    }

    /// The bytes written so far as a string.
    public var string: String { String(decoding: bytes, as: UTF8.self) }

    @inline(__always)
    private mutating func separate() {
        if afterKey {
            afterKey = false
            return
        }
        if let last = hasValue.last {
            if last { bytes.append(UInt8(ascii: ",")) }
            hasValue[hasValue.count - 1] = true
        }
    }

    public mutating func beginObject() {
        separate()
        bytes.append(UInt8(ascii: "{"))
        hasValue.append(false)
    }

    public mutating func endObject() {
        hasValue.removeLast()
        bytes.append(UInt8(ascii: "}"))
    }

    public mutating func beginArray() {
        separate()
        bytes.append(UInt8(ascii: "["))
        hasValue.append(false)
    }

    public mutating func endArray() {
        hasValue.removeLast()
        bytes.append(UInt8(ascii: "]"))
    }

    /// Writes a member name inside an object; the next value call writes its value.
    public mutating func key(_ name: String) {
        separate()
        Self.appendString(name, to: &bytes)
        bytes.append(UInt8(ascii: ":"))
        afterKey = true
    }

    public mutating func value(_ string: String) {
        separate()
        Self.appendString(string, to: &bytes)
    }

    public mutating func value(_ number: Int64) {
        separate()
        Self.appendInteger(number, to: &bytes)
    }

    public mutating func value(_ number: Int) { value(Int64(number)) }

    /// Doubles use Swift's shortest round-trip form; non-finite values are written as null.
    public mutating func value(_ number: Double) {
        separate()
        Self.appendDouble(number, to: &bytes)
    }

    public mutating func value(_ flag: Bool) {
        separate()
        bytes.append(contentsOf: flag ? Self.trueBytes : Self.falseBytes)
    }

    public mutating func valueNull() {
        separate()
        bytes.append(contentsOf: Self.nullBytes)
    }

    public mutating func value(_ json: JSON) {
        separate()
        Self.append(json, to: &bytes, sortedKeys: false)
    }

    /// Writes an already-encoded JSON value verbatim.
    public mutating func raw(_ encoded: [UInt8]) {
        separate()
        bytes.append(contentsOf: encoded)
    }

    public mutating func field(_ name: String, _ string: String) {
        key(name)
        value(string)
    }

    public mutating func field(_ name: String, _ number: Int64) {
        key(name)
        value(number)
    }

    public mutating func field(_ name: String, _ number: Int) {
        key(name)
        value(number)
    }

    public mutating func field(_ name: String, _ number: Double) {
        key(name)
        value(number)
    }

    public mutating func field(_ name: String, _ flag: Bool) {
        key(name)
        value(flag)
    }

    public mutating func field(_ name: String, _ json: JSON) {
        key(name)
        value(json)
    }

    /// Writes `name: string` or `name: null`.
    public mutating func field(_ name: String, _ string: String?) {
        key(name)
        if let string { value(string) } else { valueNull() }
    }

    /// Writes `name: number` or `name: null`.
    public mutating func field(_ name: String, _ number: Double?) {
        key(name)
        if let number { value(number) } else { valueNull() }
    }

    // MARK: Encoding primitives

    static let trueBytes: [UInt8] = Array("true".utf8)
    static let falseBytes: [UInt8] = Array("false".utf8)
    static let nullBytes: [UInt8] = Array("null".utf8)
    private static let hexDigits: [UInt8] = Array("0123456789abcdef".utf8)

    /// Appends `string` as a JSON string literal: quotes, backslashes and control characters are
    /// escaped; everything else is written as UTF-8.
    public static func appendString(_ string: String, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        var string = string
        string.withUTF8 { utf8 in
            var runStart = 0
            for index in 0..<utf8.count {
                let byte = utf8[index]
                guard byte < 0x20 || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") else { continue }
                if runStart < index { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<index])) }
                runStart = index + 1
                bytes.append(UInt8(ascii: "\\"))
                switch byte {
                case UInt8(ascii: "\""): bytes.append(UInt8(ascii: "\""))
                case UInt8(ascii: "\\"): bytes.append(UInt8(ascii: "\\"))
                case 0x0A: bytes.append(UInt8(ascii: "n"))
                case 0x0D: bytes.append(UInt8(ascii: "r"))
                case 0x09: bytes.append(UInt8(ascii: "t"))
                case 0x08: bytes.append(UInt8(ascii: "b"))
                case 0x0C: bytes.append(UInt8(ascii: "f"))
                default:
                    bytes.append(contentsOf: [UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
                    bytes.append(hexDigits[Int(byte >> 4)])
                    bytes.append(hexDigits[Int(byte & 0xF)])
                }
            }
            if runStart < utf8.count { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart...])) }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    public static func appendInteger(_ number: Int64, to bytes: inout [UInt8]) {
        if number == 0 {
            bytes.append(UInt8(ascii: "0"))
            return
        }
        // Work with the negative magnitude so Int64.min needs no special case.
        var remaining = number < 0 ? number : -number
        var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 24 bytes of scratch, enough for 20 digits
        var count = 0
        withUnsafeMutableBytes(of: &digits) { scratch in
            while remaining != 0 {
                let quotient = remaining / 10
                scratch[count] = UInt8(ascii: "0") + UInt8(quotient * 10 - remaining)
                remaining = quotient
                count += 1
            }
            if number < 0 { bytes.append(UInt8(ascii: "-")) }
            while count > 0 {
                count -= 1
                bytes.append(scratch[count])
            }
        }
    }

    public static func appendDouble(_ number: Double, to bytes: inout [UInt8]) {
        guard number.isFinite else {
            bytes.append(contentsOf: nullBytes)
            return
        }
        bytes.append(contentsOf: number.description.utf8)
    }

    static func append(_ json: JSON, to bytes: inout [UInt8], sortedKeys: Bool) {
        switch json {
        case .null:
            bytes.append(contentsOf: nullBytes)
        case .bool(let flag):
            bytes.append(contentsOf: flag ? trueBytes : falseBytes)
        case .int(let number):
            appendInteger(number, to: &bytes)
        case .double(let number):
            appendDouble(number, to: &bytes)
        case .string(let string):
            appendString(string, to: &bytes)
        case .array(let array):
            bytes.append(UInt8(ascii: "["))
            for (index, element) in array.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                append(element, to: &bytes, sortedKeys: sortedKeys)
            }
            bytes.append(UInt8(ascii: "]"))
        case .object(let object):
            bytes.append(UInt8(ascii: "{"))
            var first = true
            let members = sortedKeys ? object.sorted { $0.key < $1.key } : Array(object)
            for (key, value) in members {
                if !first { bytes.append(UInt8(ascii: ",")) }
                first = false
                appendString(key, to: &bytes)
                bytes.append(UInt8(ascii: ":"))
                append(value, to: &bytes, sortedKeys: sortedKeys)
            }
            bytes.append(UInt8(ascii: "}"))
        }
    }
}

extension JSON {
    /// Compact serialization. Keys in stored order, or sorted (for canonical bytes, e.g. hashing).
    public func serialized(sortedKeys: Bool = false) -> [UInt8] {
        var bytes: [UInt8] = []
        JSONWriter.append(self, to: &bytes, sortedKeys: sortedKeys)
        return bytes
    }

    /// The serialization as a string; `pretty` indents with two spaces for people to read.
    public func serializedString(sortedKeys: Bool = false, pretty: Bool = false) -> String {
        guard pretty else { return String(decoding: serialized(sortedKeys: sortedKeys), as: UTF8.self) }
        var bytes: [UInt8] = []
        appendPretty(to: &bytes, indent: 0, sortedKeys: sortedKeys)
        return String(decoding: bytes, as: UTF8.self)
    }

    private func appendPretty(to bytes: inout [UInt8], indent: Int, sortedKeys: Bool) {
        func newline(_ level: Int) {
            bytes.append(0x0A)
            bytes.append(contentsOf: repeatElement(UInt8(ascii: " "), count: level * 2))
        }
        switch self {
        case .array(let array) where !array.isEmpty:
            bytes.append(UInt8(ascii: "["))
            for (index, element) in array.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                newline(indent + 1)
                element.appendPretty(to: &bytes, indent: indent + 1, sortedKeys: sortedKeys)
            }
            newline(indent)
            bytes.append(UInt8(ascii: "]"))
        case .object(let object) where !object.isEmpty:
            bytes.append(UInt8(ascii: "{"))
            let members = sortedKeys ? object.sorted { $0.key < $1.key } : Array(object)
            for (index, member) in members.enumerated() {
                if index > 0 { bytes.append(UInt8(ascii: ",")) }
                newline(indent + 1)
                JSONWriter.appendString(member.key, to: &bytes)
                bytes.append(contentsOf: [UInt8(ascii: ":"), UInt8(ascii: " ")])
                member.value.appendPretty(to: &bytes, indent: indent + 1, sortedKeys: sortedKeys)
            }
            newline(indent)
            bytes.append(UInt8(ascii: "}"))
        default:
            JSONWriter.append(self, to: &bytes, sortedKeys: sortedKeys)
        }
    }
}
