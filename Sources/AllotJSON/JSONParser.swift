/// Where and why a JSON text failed to parse.
public struct JSONParseError: Error, Sendable, Equatable, CustomStringConvertible {
    /// Byte offset of the problem in the whole input.
    public var offset: Int
    /// 1-based line of the problem in the whole input.
    public var line: Int
    /// 1-based column (in bytes) of the problem on its line.
    public var column: Int
    /// For NDJSON input: the 0-based index of the record (non-blank line) that failed; nil otherwise.
    public var record: Int?
    /// What is wrong, e.g. "unexpected character 'x'", "unterminated string", "nesting too deep".
    public var message: String
    /// Where in the document's structure, as members and indices from the root (`tenants[2].arrivals[0].at_s`; a
    /// name that is not a plain identifier is quoted, `["a b"]`): the value being read when the failure came, so a
    /// person editing a file learns the field and not only the column. Nil at the root.
    public var path: String?

    public init(offset: Int, line: Int, column: Int, record: Int? = nil, message: String, path: String? = nil) {
        self.offset = offset
        self.line = line
        self.column = column
        self.record = record
        self.message = message
        self.path = path
    }

    public var description: String {
        let at = path.map { ", at \($0)" } ?? ""
        if let record { return "record \(record) (line \(line), column \(column)\(at)): \(message)" }
        return "line \(line), column \(column)\(at): \(message)"
    }
}

extension JSON {
    /// Parses one JSON text (RFC 8259, strict: no trailing commas, no comments, no NaN or
    /// infinities, valid UTF-8, no lone surrogate escapes, nothing but whitespace after the value).
    /// - Parameter maxDepth: nesting limit for arrays and objects, so hostile input cannot exhaust the stack.
    public static func parse(_ bytes: some Collection<UInt8>, maxDepth: Int = 64) throws(JSONParseError) -> JSON {
        let result: Result<JSON, JSONParseError> =
            bytes.withContiguousStorageIfAvailable { buffer in
                Result { () throws(JSONParseError) in try parseDocument(buffer, maxDepth: maxDepth) }
            }
            ?? Array(bytes).withUnsafeBufferPointer { buffer in
                Result { () throws(JSONParseError) in try parseDocument(buffer, maxDepth: maxDepth) }
            }
        return try result.get()
    }

    public static func parse(_ text: String, maxDepth: Int = 64) throws(JSONParseError) -> JSON {
        try parse(Array(text.utf8), maxDepth: maxDepth)
    }

    /// Parses a JSON text read from a file a person edits (a policy, a scenario): as ``parse(_:maxDepth:)``, but a
    /// leading UTF-8 byte order mark is skipped — Windows editors write one, and RFC 8259 (section 8.1) lets a parser
    /// ignore it. Request bodies keep the strict ``parse(_:maxDepth:)``.
    public static func parseFile(_ bytes: [UInt8], maxDepth: Int = 64) throws(JSONParseError) -> JSON {
        try parse(withoutByteOrderMark(bytes), maxDepth: maxDepth)
    }

    /// What a request body that starts with a UTF-8 byte order mark is told: JSON text exchanged between systems
    /// carries none (RFC 8259 section 8.1), so request bodies are parsed strictly and say so, not "unexpected byte 0xEF".
    public static let byteOrderMarkInBody =
        "the body starts with a UTF-8 byte order mark (EF BB BF), which JSON sent over HTTP may not carry "
        + "(RFC 8259 section 8.1): send the body without it"

    /// Whether `bytes` start with a UTF-8 byte order mark.
    public static func startsWithByteOrderMark(_ bytes: [UInt8]) -> Bool { bytes.starts(with: [0xEF, 0xBB, 0xBF]) }

    /// A file's bytes without a leading UTF-8 byte order mark (``parseFile(_:maxDepth:)``), for a reader that hands
    /// them on to a parse of its own (`allot plan FILE`).
    public static func withoutByteOrderMark(_ bytes: [UInt8]) -> ArraySlice<UInt8> {
        bytes.starts(with: [0xEF, 0xBB, 0xBF]) ? bytes.dropFirst(3) : bytes[...]
    }

    /// Parses NDJSON: one JSON value per line; blank lines (only whitespace) are skipped.
    /// A failure names the record (0-based among non-blank lines) and its line in the input.
    public static func parseLines(_ bytes: some Collection<UInt8>, maxDepth: Int = 64) throws(JSONParseError) -> [JSON]
    {
        let result: Result<[JSON], JSONParseError> =
            bytes.withContiguousStorageIfAvailable { buffer in
                Result { () throws(JSONParseError) in try parseLineDocuments(buffer, maxDepth: maxDepth) }
            }
            ?? Array(bytes).withUnsafeBufferPointer { buffer in
                Result { () throws(JSONParseError) in try parseLineDocuments(buffer, maxDepth: maxDepth) }
            }
        return try result.get()
    }

    private static func parseDocument(_ buffer: UnsafeBufferPointer<UInt8>, maxDepth: Int) throws(JSONParseError)
        -> JSON
    {
        var parser = JSONByteParser(buffer: buffer, start: 0, end: buffer.count, maxDepth: maxDepth)
        do {
            return try parser.parseDocument()
        } catch let failure {
            throw failure.error(in: buffer, record: nil)
        }
    }

    private static func parseLineDocuments(_ buffer: UnsafeBufferPointer<UInt8>, maxDepth: Int) throws(JSONParseError)
        -> [JSON]
    {
        var values: [JSON] = []
        var lineStart = 0
        var record = 0
        while lineStart < buffer.count {
            var lineEnd = lineStart
            while lineEnd < buffer.count && buffer[lineEnd] != UInt8(ascii: "\n") { lineEnd += 1 }
            var parser = JSONByteParser(buffer: buffer, start: lineStart, end: lineEnd, maxDepth: maxDepth)
            if !parser.isBlank() {
                do {
                    values.append(try parser.parseDocument())
                } catch let failure {
                    throw failure.error(in: buffer, record: record)
                }
                record += 1
            }
            lineStart = lineEnd + 1
        }
        return values
    }
}

/// A parse failure before line and column are known (computed only when an error escapes).
@usableFromInline
struct JSONFailure: Error {
    /// A step of ``JSONParseError/path``.
    @usableFromInline
    enum Step: Sendable {
        case member(String)
        case index(Int)
    }

    @usableFromInline var offset: Int
    @usableFromInline var message: String
    /// The containers the failure unwound through, innermost first (each adds its step as the error passes).
    @usableFromInline var steps: [Step] = []

    @usableFromInline
    init(offset: Int, message: String) {
        self.offset = offset
        self.message = message
    }

    /// `steps` as a path from the root; nil when empty.
    var path: String? {
        guard !steps.isEmpty else { return nil }
        var path = ""
        for step in steps.reversed() {
            switch step {
            case .index(let index):
                path += "[\(index)]"
            case .member(let name):
                let plain =
                    !name.isEmpty && name.utf8.first.map { !(0x30...0x39).contains($0) } == true
                    && name.utf8.allSatisfy { byte in
                        (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
                            || byte == UInt8(ascii: "_") || byte == UInt8(ascii: "-")
                    }
                if plain {
                    path += path.isEmpty ? name : "." + name
                } else {
                    path += "[" + quotedName(name) + "]"
                }
            }
        }
        return path
    }

    @usableFromInline
    func error(in buffer: UnsafeBufferPointer<UInt8>, record: Int?) -> JSONParseError {
        var line = 1
        var lineStart = 0
        var index = 0
        while index < offset && index < buffer.count {
            if buffer[index] == UInt8(ascii: "\n") {
                line += 1
                lineStart = index + 1
            }
            index += 1
        }
        return JSONParseError(
            offset: offset, line: line, column: offset - lineStart + 1, record: record, message: message, path: path)
    }
}

/// A recursive-descent parser over a byte range. Recursion depth is bounded by `maxDepth`.
///
/// `@usableFromInline` (with its hot members `@inlinable`) because ``JSONScanner``'s inlinable
/// methods run on it in their callers' modules.
@usableFromInline
struct JSONByteParser {
    @usableFromInline let buffer: UnsafeBufferPointer<UInt8>
    @usableFromInline var index: Int
    @usableFromInline let end: Int
    @usableFromInline let maxDepth: Int
    @usableFromInline var depth = 0
    /// Scratch space reused for strings that contain escapes.
    @usableFromInline var scratch: [UInt8] = []

    @usableFromInline
    init(buffer: UnsafeBufferPointer<UInt8>, start: Int, end: Int, maxDepth: Int) {
        self.buffer = buffer
        self.index = start
        self.end = end
        self.maxDepth = maxDepth
    }

    mutating func isBlank() -> Bool {
        let saved = index
        skipWhitespace()
        let blank = index == end
        index = saved
        return blank
    }

    mutating func parseDocument() throws(JSONFailure) -> JSON {
        skipWhitespace()
        guard index < end else {
            throw JSONFailure(offset: index, message: "expected a JSON value, found end of input")
        }
        let value = try parseValue()
        skipWhitespace()
        guard index == end else {
            throw JSONFailure(offset: index, message: "unexpected \(describe(buffer[index])) after the JSON value")
        }
        return value
    }

    @inlinable @inline(__always)
    mutating func skipWhitespace() {
        while index < end {
            let byte = buffer[index]
            // Most calls find no whitespace at all: one comparison decides that.
            guard byte <= 0x20, byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 else { return }
            index += 1
        }
    }

    @usableFromInline
    mutating func parseValue() throws(JSONFailure) -> JSON {
        guard index < end else {
            throw JSONFailure(offset: index, message: "expected a JSON value, found end of input")
        }
        switch buffer[index] {
        case UInt8(ascii: "{"): return try parseObject()
        case UInt8(ascii: "["): return try parseArray()
        case UInt8(ascii: "\""): return .string(try parseString())
        case UInt8(ascii: "t"): try expectLiteral("true"); return .bool(true)
        case UInt8(ascii: "f"): try expectLiteral("false"); return .bool(false)
        case UInt8(ascii: "n"): try expectLiteral("null"); return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try parseNumber()
        default:
            throw JSONFailure(offset: index, message: "unexpected \(describe(buffer[index])), expected a JSON value")
        }
    }

    mutating func expectLiteral(_ literal: StaticString) throws(JSONFailure) {
        let start = index
        let count = literal.utf8CodeUnitCount
        let pointer = literal.utf8Start
        for offset in 0..<count {
            guard index < end, buffer[index] == pointer[offset] else {
                throw JSONFailure(offset: start, message: "invalid literal, expected '\(literal)'")
            }
            index += 1
        }
    }

    @inlinable
    mutating func enter() throws(JSONFailure) {
        depth += 1
        if depth > maxDepth { throw tooDeep() }
    }

    @usableFromInline @inline(never)
    func tooDeep() -> JSONFailure {
        JSONFailure(offset: index, message: "nesting too deep (more than \(maxDepth) levels)")
    }

    mutating func parseObject() throws(JSONFailure) -> JSON {
        try enter()
        index += 1  // {
        var object = JSONObject()
        skipWhitespace()
        if index < end && buffer[index] == UInt8(ascii: "}") {
            index += 1
            depth -= 1
            return .object(object)
        }
        while true {
            skipWhitespace()
            guard index < end else { throw JSONFailure(offset: index, message: "unterminated object") }
            guard buffer[index] == UInt8(ascii: "\"") else {
                throw JSONFailure(
                    offset: index, message: "unexpected \(describe(buffer[index])), expected a member name string")
            }
            let keyStart = index
            let key = try parseString()
            skipWhitespace()
            guard index < end, buffer[index] == UInt8(ascii: ":") else {
                throw JSONFailure(offset: index, message: "expected ':' after member name")
            }
            index += 1
            skipWhitespace()
            let value: JSON
            do {
                value = try parseValue()
            } catch var failure {
                failure.steps.append(.member(key))
                throw failure
            }
            // RFC 8259 leaves a repeated name's meaning open; readers disagree (first wins, last wins), so a
            // policy or request whose author meant one value could be read as the other. Refused, with the name.
            guard object.appendIfAbsent(key: key, value: value) else {
                throw JSONFailure(offset: keyStart, message: "duplicate member name \(quoted(key))")
            }
            skipWhitespace()
            guard index < end else { throw JSONFailure(offset: index, message: "unterminated object") }
            switch buffer[index] {
            case UInt8(ascii: ","):
                index += 1
            case UInt8(ascii: "}"):
                index += 1
                depth -= 1
                return .object(object)
            default:
                throw JSONFailure(offset: index, message: "unexpected \(describe(buffer[index])), expected ',' or '}'")
            }
        }
    }

    mutating func parseArray() throws(JSONFailure) -> JSON {
        try enter()
        index += 1  // [
        var array: [JSON] = []
        skipWhitespace()
        if index < end && buffer[index] == UInt8(ascii: "]") {
            index += 1
            depth -= 1
            return .array(array)
        }
        while true {
            skipWhitespace()
            do {
                array.append(try parseValue())
            } catch var failure {
                failure.steps.append(.index(array.count))
                throw failure
            }
            skipWhitespace()
            guard index < end else { throw JSONFailure(offset: index, message: "unterminated array") }
            switch buffer[index] {
            case UInt8(ascii: ","):
                index += 1
            case UInt8(ascii: "]"):
                index += 1
                depth -= 1
                return .array(array)
            default:
                throw JSONFailure(offset: index, message: "unexpected \(describe(buffer[index])), expected ',' or ']'")
            }
        }
    }

    /// Parses a string starting at its opening quote. Strings without escapes are decoded straight
    /// from the input bytes; UTF-8 is validated either way.
    @usableFromInline
    mutating func parseString() throws(JSONFailure) -> String {
        let open = index
        index += 1
        let start = index
        // Fast path: scan to the closing quote; bail out to the slow path at the first escape.
        while index < end {
            let byte = buffer[index]
            if byte == UInt8(ascii: "\"") {
                let slice = UnsafeBufferPointer(rebasing: buffer[start..<index])
                guard UTF8Validation.isValid(slice) else {
                    throw JSONFailure(offset: start, message: "invalid UTF-8 in string")
                }
                index += 1
                return String(decoding: slice, as: UTF8.self)
            }
            if byte == UInt8(ascii: "\\") { break }
            if byte < 0x20 { throw JSONFailure(offset: index, message: "unescaped control character in string") }
            index += 1
        }
        guard index < end else { throw JSONFailure(offset: open, message: "unterminated string") }
        scratch.removeAll(keepingCapacity: true)
        scratch.append(contentsOf: UnsafeBufferPointer(rebasing: buffer[start..<index]))
        while index < end {
            let byte = buffer[index]
            switch byte {
            case UInt8(ascii: "\""):
                index += 1
                let valid = scratch.withUnsafeBufferPointer { UTF8Validation.isValid($0) }
                guard valid else { throw JSONFailure(offset: start, message: "invalid UTF-8 in string") }
                return String(decoding: scratch, as: UTF8.self)
            case UInt8(ascii: "\\"):
                try parseEscape()
            case 0..<0x20:
                throw JSONFailure(offset: index, message: "unescaped control character in string")
            default:
                scratch.append(byte)
                index += 1
            }
        }
        throw JSONFailure(offset: open, message: "unterminated string")
    }

    mutating func parseEscape() throws(JSONFailure) {
        let escapeStart = index
        index += 1
        guard index < end else { throw JSONFailure(offset: escapeStart, message: "unterminated escape sequence") }
        let byte = buffer[index]
        index += 1
        switch byte {
        case UInt8(ascii: "\""): scratch.append(UInt8(ascii: "\""))
        case UInt8(ascii: "\\"): scratch.append(UInt8(ascii: "\\"))
        case UInt8(ascii: "/"): scratch.append(UInt8(ascii: "/"))
        case UInt8(ascii: "b"): scratch.append(0x08)
        case UInt8(ascii: "f"): scratch.append(0x0C)
        case UInt8(ascii: "n"): scratch.append(0x0A)
        case UInt8(ascii: "r"): scratch.append(0x0D)
        case UInt8(ascii: "t"): scratch.append(0x09)
        case UInt8(ascii: "u"):
            var scalar = try parseHex4(escapeStart: escapeStart)
            if (0xD800...0xDBFF).contains(scalar) {
                // A high surrogate must be followed by an escaped low surrogate.
                guard index + 1 < end, buffer[index] == UInt8(ascii: "\\"), buffer[index + 1] == UInt8(ascii: "u")
                else {
                    throw JSONFailure(offset: escapeStart, message: "lone high surrogate in \\u escape")
                }
                index += 2
                let low = try parseHex4(escapeStart: escapeStart)
                guard (0xDC00...0xDFFF).contains(low) else {
                    throw JSONFailure(offset: escapeStart, message: "high surrogate not followed by a low surrogate")
                }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            } else if (0xDC00...0xDFFF).contains(scalar) {
                throw JSONFailure(offset: escapeStart, message: "lone low surrogate in \\u escape")
            }
            appendUTF8(scalar)
        default:
            throw JSONFailure(offset: escapeStart, message: "invalid escape sequence '\\\(describeRaw(byte))'")
        }
    }

    mutating func parseHex4(escapeStart: Int) throws(JSONFailure) -> UInt32 {
        guard index + 4 <= end else { throw JSONFailure(offset: escapeStart, message: "truncated \\u escape") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let byte = buffer[index]
            let digit: UInt32
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
            default: throw JSONFailure(offset: escapeStart, message: "invalid hex digit in \\u escape")
            }
            value = value << 4 | digit
            index += 1
        }
        return value
    }

    mutating func appendUTF8(_ scalar: UInt32) {
        switch scalar {
        case 0..<0x80:
            scratch.append(UInt8(scalar))
        case 0x80..<0x800:
            scratch.append(UInt8(0xC0 | (scalar >> 6)))
            scratch.append(UInt8(0x80 | (scalar & 0x3F)))
        case 0x800..<0x10000:
            scratch.append(UInt8(0xE0 | (scalar >> 12)))
            scratch.append(UInt8(0x80 | ((scalar >> 6) & 0x3F)))
            scratch.append(UInt8(0x80 | (scalar & 0x3F)))
        default:
            scratch.append(UInt8(0xF0 | (scalar >> 18)))
            scratch.append(UInt8(0x80 | ((scalar >> 12) & 0x3F)))
            scratch.append(UInt8(0x80 | ((scalar >> 6) & 0x3F)))
            scratch.append(UInt8(0x80 | (scalar & 0x3F)))
        }
    }

    /// Parses a number per the RFC 8259 grammar: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
    mutating func parseNumber() throws(JSONFailure) -> JSON {
        let start = index
        var negative = false
        if buffer[index] == UInt8(ascii: "-") {
            negative = true
            index += 1
        }
        guard index < end, isDigit(buffer[index]) else {
            throw JSONFailure(offset: start, message: "invalid number: expected a digit")
        }
        // Accumulate the integer part as a negative magnitude so Int64.min fits.
        var magnitude: Int64 = 0
        var integerOverflow = false
        if buffer[index] == UInt8(ascii: "0") {
            index += 1
            if index < end && isDigit(buffer[index]) {
                throw JSONFailure(offset: start, message: "invalid number: leading zeros are not allowed")
            }
        } else {
            while index < end && isDigit(buffer[index]) {
                let digit = Int64(buffer[index] - UInt8(ascii: "0"))
                if !integerOverflow {
                    let (times10, overflow1) = magnitude.multipliedReportingOverflow(by: 10)
                    let (next, overflow2) = times10.subtractingReportingOverflow(digit)
                    if overflow1 || overflow2 { integerOverflow = true } else { magnitude = next }
                }
                index += 1
            }
        }
        var isInteger = true
        if index < end && buffer[index] == UInt8(ascii: ".") {
            isInteger = false
            index += 1
            guard index < end, isDigit(buffer[index]) else {
                throw JSONFailure(offset: start, message: "invalid number: expected a digit after '.'")
            }
            while index < end && isDigit(buffer[index]) { index += 1 }
        }
        if index < end && (buffer[index] == UInt8(ascii: "e") || buffer[index] == UInt8(ascii: "E")) {
            isInteger = false
            index += 1
            if index < end && (buffer[index] == UInt8(ascii: "+") || buffer[index] == UInt8(ascii: "-")) { index += 1 }
            guard index < end, isDigit(buffer[index]) else {
                throw JSONFailure(offset: start, message: "invalid number: expected a digit in the exponent")
            }
            while index < end && isDigit(buffer[index]) { index += 1 }
        }
        if isInteger && !integerOverflow {
            if negative { return .int(magnitude) }
            if magnitude != Int64.min { return .int(-magnitude) }
        }
        let text = String(decoding: UnsafeBufferPointer(rebasing: buffer[start..<index]), as: UTF8.self)
        guard let value = Double(text), value.isFinite else {
            throw JSONFailure(offset: start, message: "number out of range")
        }
        return .double(value)
    }

    @inlinable
    func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

    @usableFromInline
    func describe(_ byte: UInt8) -> String {
        if byte >= 0x20 && byte < 0x7F { return "character '\(Character(Unicode.Scalar(byte)))'" }
        return "byte 0x\(String(byte, radix: 16, uppercase: true))"
    }

    func quoted(_ name: String) -> String { quotedName(name) }

    func describeRaw(_ byte: UInt8) -> String {
        if byte >= 0x20 && byte < 0x7F { return String(Character(Unicode.Scalar(byte))) }
        return "\\x\(String(byte, radix: 16, uppercase: true))"
    }
}

/// Strict UTF-8 validation (RFC 3629): no overlong forms, no surrogates, nothing above U+10FFFF.
///
/// Written out rather than using `String(validating:as:)`, whose generic entry point costs a
/// runtime metadata lookup per call — measurable when ingest decodes millions of strings.
@usableFromInline
enum UTF8Validation {
    @usableFromInline
    static func isValid(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        var index = 0
        let count = bytes.count
        while index < count {
            let lead = bytes[index]
            if lead < 0x80 {
                index += 1
                continue
            }
            let length: Int
            var lowest: UInt8 = 0x80
            var highest: UInt8 = 0xBF
            switch lead {
            case 0xC2...0xDF: length = 2
            case 0xE0: length = 3; lowest = 0xA0
            case 0xE1...0xEC, 0xEE...0xEF: length = 3
            case 0xED: length = 3; highest = 0x9F
            case 0xF0: length = 4; lowest = 0x90
            case 0xF1...0xF3: length = 4
            case 0xF4: length = 4; highest = 0x8F
            default: return false
            }
            guard index + length <= count else { return false }
            let second = bytes[index + 1]
            guard second >= lowest && second <= highest else { return false }
            for offset in 2..<max(2, length) where bytes[index + offset] & 0xC0 != 0x80 { return false }
            index += length
        }
        return true
    }
}

/// A member name for an error message: as JSON writes it (quoted, escaped), the first 64 characters.
private func quotedName(_ name: String) -> String {
    let shown = name.count > 64 ? String(name.prefix(64)) + "…" : name
    return JSON.string(shown).serializedString()
}
