/// A pull scanner over one JSON text: the caller walks the document token by token and builds its
/// own structure, instead of receiving a `JSON` tree.
///
/// Why it exists: telemetry ingest (SPEC section 3) decodes about 100,000 events per second, and
/// building a tree of `JSON` values (an object per event, a string per member name) and then
/// copying it into the event struct costs more than decoding straight into the struct. The
/// scanner applies exactly the rules of ``JSON/parse(_:maxDepth:)`` (it shares its code): strict
/// RFC 8259 grammar, valid UTF-8, no lone surrogates, bounded nesting, positions in errors.
///
/// A scanner reads from memory it does not own, so it only exists inside
/// ``scan(_:range:maxDepth:_:)``; do not let it escape the closure.
///
/// ```swift
/// try JSONScanner.scan(bytes) { scanner throws(JSONParseError) in
///     try scanner.beginObject()
///     while let key = try scanner.nextKey() {
///         if key == "name" { name = try scanner.readString() } else { try scanner.skipValue() }
///     }
///     try scanner.finish()
/// }
/// ```
public struct JSONScanner {
    /// The kind of the next value, judged from its first byte.
    public enum Kind: Sendable, Equatable {
        case object, array, string, number, bool, null
    }

    private var parser: JSONByteParser
    /// Set by ``beginObject()`` / ``beginArray()``: the next ``nextKey()`` / ``nextElement()`` is
    /// the container's first, so no `,` is expected before it. One flag is enough because a nested
    /// container is always read completely before its parent continues.
    private var atContainerStart = false
    private let record: Int?

    private init(buffer: UnsafeBufferPointer<UInt8>, range: Range<Int>, maxDepth: Int, record: Int?) {
        self.parser = JSONByteParser(buffer: buffer, start: range.lowerBound, end: range.upperBound, maxDepth: maxDepth)
        self.record = record
    }

    /// Runs `body` with a scanner over `buffer[range]` (all of `buffer` by default).
    ///
    /// - Parameters:
    ///   - buffer: The input; errors report offsets, lines and columns in the whole buffer.
    ///   - range: The part to scan, e.g. one NDJSON line.
    ///   - maxDepth: Nesting limit for arrays and objects, as in ``JSON/parse(_:maxDepth:)``.
    ///   - record: Copied into every ``JSONParseError/record`` the scanner throws (NDJSON line index).
    public static func scan<Result, Failure: Error>(
        _ buffer: UnsafeBufferPointer<UInt8>, range: Range<Int>? = nil, maxDepth: Int = 64, record: Int? = nil,
        _ body: (inout JSONScanner) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        var scanner = JSONScanner(
            buffer: buffer, range: range ?? 0..<buffer.count, maxDepth: maxDepth, record: record)
        return try body(&scanner)
    }

    /// The byte offset of the next unread byte in the whole buffer.
    public var offset: Int { parser.index }

    /// True when only whitespace is left (skips it).
    public mutating func isAtEnd() -> Bool {
        parser.skipWhitespace()
        return parser.index == parser.end
    }

    /// The kind of the next value (skipping whitespace), or nil at the end of input or before a byte
    /// that cannot start a value. Does not consume anything else.
    public mutating func peekKind() -> Kind? {
        parser.skipWhitespace()
        guard parser.index < parser.end else { return nil }
        switch parser.buffer[parser.index] {
        case UInt8(ascii: "{"): return .object
        case UInt8(ascii: "["): return .array
        case UInt8(ascii: "\""): return .string
        case UInt8(ascii: "t"), UInt8(ascii: "f"): return .bool
        case UInt8(ascii: "n"): return .null
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number
        default: return nil
        }
    }

    /// Consumes `{`. Then call ``nextKey()`` until it returns nil.
    public mutating func beginObject() throws(JSONParseError) {
        try expectOpening(UInt8(ascii: "{"), what: "an object")
    }

    /// Consumes `[`. Then call ``nextElement()`` until it returns false.
    public mutating func beginArray() throws(JSONParseError) {
        try expectOpening(UInt8(ascii: "["), what: "an array")
    }

    /// The next member name of the current object, with its `:` consumed (read or skip the value
    /// next); nil when the object ends (its `}` consumed).
    public mutating func nextKey() throws(JSONParseError) -> String? {
        guard try advanceToMember() else { return nil }
        let key = try Self.located(parser.buffer, record) { () throws(JSONFailure) in try parser.parseString() }
        try expectColon()
        return key
    }

    /// Like ``nextKey()``, but hands the decoded name's UTF-8 bytes to `match` instead of making a
    /// `String`: for matching names against a fixed set without allocating. The bytes are valid
    /// only during the call. Returns nil when the object ends.
    public mutating func nextKey<T>(_ match: (UnsafeBufferPointer<UInt8>) -> T) throws(JSONParseError) -> T? {
        guard try advanceToMember() else { return nil }
        let result = try Self.located(parser.buffer, record) { () throws(JSONFailure) in
            try parser.withStringBytes(match)
        }
        try expectColon()
        return result
    }

    /// True when the current array has another element (read or skip it next); false when the
    /// array ends (its `]` consumed).
    public mutating func nextElement() throws(JSONParseError) -> Bool {
        parser.skipWhitespace()
        guard parser.index < parser.end else { throw failure(at: parser.index, "unterminated array") }
        let byte = parser.buffer[parser.index]
        if byte == UInt8(ascii: "]") {
            parser.index += 1
            parser.depth -= 1
            atContainerStart = false
            return false
        }
        if atContainerStart {
            atContainerStart = false
        } else {
            guard byte == UInt8(ascii: ",") else {
                throw failure(at: parser.index, "unexpected \(parser.describe(byte)), expected ',' or ']'")
            }
            parser.index += 1
        }
        return true
    }

    /// Reads a string value.
    public mutating func readString() throws(JSONParseError) -> String {
        try expectKind(.string)
        return try Self.located(parser.buffer, record) { () throws(JSONFailure) in try parser.parseString() }
    }

    /// Reads a string value and hands its decoded UTF-8 bytes to `body` (valid only during the call).
    public mutating func readString<T>(_ body: (UnsafeBufferPointer<UInt8>) -> T) throws(JSONParseError) -> T {
        try expectKind(.string)
        return try Self.located(parser.buffer, record) { () throws(JSONFailure) in try parser.withStringBytes(body) }
    }

    /// Reads the next value of any kind as a `JSON` value (a whole tree for objects and arrays,
    /// within the remaining nesting budget). Numbers come back as `.int` or `.double` as in
    /// ``JSON/parse(_:maxDepth:)``.
    public mutating func readValue() throws(JSONParseError) -> JSON {
        parser.skipWhitespace()
        atContainerStart = false
        if parser.index < parser.end, let number = parser.fastNumber() { return number }
        return try Self.located(parser.buffer, record) { () throws(JSONFailure) in try parser.parseValue() }
    }

    /// Reads and discards the next value (still validating it).
    public mutating func skipValue() throws(JSONParseError) {
        _ = try readValue()
    }

    /// Checks that nothing but whitespace is left.
    public mutating func finish() throws(JSONParseError) {
        parser.skipWhitespace()
        guard parser.index == parser.end else {
            throw failure(
                at: parser.index, "unexpected \(parser.describe(parser.buffer[parser.index])) after the JSON value")
        }
    }

    /// An error at `offset` in the scanner's terms (line, column, record), for callers that find a
    /// problem with a value the scanner accepted.
    public func error(at offset: Int, _ message: String) -> JSONParseError {
        failure(at: offset, message)
    }

    // MARK: Internals

    private mutating func expectOpening(_ opening: UInt8, what: String) throws(JSONParseError) {
        parser.skipWhitespace()
        guard parser.index < parser.end else {
            throw failure(at: parser.index, "expected \(what), found end of input")
        }
        guard parser.buffer[parser.index] == opening else {
            throw failure(
                at: parser.index, "unexpected \(parser.describe(parser.buffer[parser.index])), expected \(what)")
        }
        try Self.located(parser.buffer, record) { () throws(JSONFailure) in try parser.enter() }
        parser.index += 1
        atContainerStart = true
    }

    /// Moves past `,` (or the opening `{`) to the next member name; false (with `}` consumed) at
    /// the end of the object.
    private mutating func advanceToMember() throws(JSONParseError) -> Bool {
        parser.skipWhitespace()
        guard parser.index < parser.end else { throw failure(at: parser.index, "unterminated object") }
        var byte = parser.buffer[parser.index]
        if byte == UInt8(ascii: "}") {
            parser.index += 1
            parser.depth -= 1
            atContainerStart = false
            return false
        }
        if atContainerStart {
            atContainerStart = false
        } else {
            guard byte == UInt8(ascii: ",") else {
                throw failure(at: parser.index, "unexpected \(parser.describe(byte)), expected ',' or '}'")
            }
            parser.index += 1
            parser.skipWhitespace()
            guard parser.index < parser.end else { throw failure(at: parser.index, "unterminated object") }
            byte = parser.buffer[parser.index]
        }
        guard byte == UInt8(ascii: "\"") else {
            throw failure(at: parser.index, "unexpected \(parser.describe(byte)), expected a member name string")
        }
        return true
    }

    private mutating func expectColon() throws(JSONParseError) {
        parser.skipWhitespace()
        guard parser.index < parser.end, parser.buffer[parser.index] == UInt8(ascii: ":") else {
            throw failure(at: parser.index, "expected ':' after member name")
        }
        parser.index += 1
        parser.skipWhitespace()
    }

    private mutating func expectKind(_ kind: Kind) throws(JSONParseError) {
        atContainerStart = false
        guard peekKind() == kind else {
            guard parser.index < parser.end else {
                throw failure(at: parser.index, "expected a JSON value, found end of input")
            }
            throw failure(at: parser.index, "expected a \(kind) value")
        }
    }

    private func failure(at offset: Int, _ message: String) -> JSONParseError {
        JSONFailure(offset: offset, message: message).error(in: parser.buffer, record: record)
    }

    /// Runs `body` and turns its offset-only failure into a located ``JSONParseError``.
    private static func located<T>(
        _ buffer: UnsafeBufferPointer<UInt8>, _ record: Int?, _ body: () throws(JSONFailure) -> T
    ) throws(JSONParseError) -> T {
        do {
            return try body()
        } catch let failure {
            throw failure.error(in: buffer, record: record)
        }
    }
}

extension JSONByteParser {
    /// Parses a string starting at its opening quote and hands the decoded UTF-8 bytes to `body`:
    /// a slice of the input when the string has no escapes, the scratch buffer otherwise.
    ///
    /// The common case (no escapes, ASCII) is scanned eight bytes at a time: a word is skipped when
    /// none of its bytes is a quote, a backslash or a control character (the "has zero byte" bit
    /// trick, which never misses one), and UTF-8 validation is skipped when no byte had its high
    /// bit set. Strings are most of a telemetry body's bytes.
    mutating func withStringBytes<T>(_ body: (UnsafeBufferPointer<UInt8>) -> T) throws(JSONFailure) -> T {
        let open = index
        index += 1
        let start = index
        var highBits: UInt64 = 0
        if let base = buffer.baseAddress {
            let ones: UInt64 = 0x0101_0101_0101_0101
            let highs: UInt64 = 0x8080_8080_8080_8080
            while index &+ 8 <= end {
                let word = UnsafeRawPointer(base + index).loadUnaligned(as: UInt64.self)
                let quote = word ^ (ones &* 0x22)
                let backslash = word ^ (ones &* 0x5C)
                let special =
                    ((quote &- ones) & ~quote) | ((backslash &- ones) & ~backslash) | ((word &- ones &* 0x20) & ~word)
                if special & highs != 0 { break }
                highBits |= word
                index &+= 8
            }
        }
        while index < end {
            let byte = buffer[index]
            if byte == UInt8(ascii: "\"") {
                let slice = UnsafeBufferPointer(rebasing: buffer[start..<index])
                if highBits & 0x8080_8080_8080_8080 != 0 {
                    guard UTF8Validation.isValid(slice) else {
                        throw JSONFailure(offset: start, message: "invalid UTF-8 in string")
                    }
                }
                index += 1
                return body(slice)
            }
            if byte == UInt8(ascii: "\\") { break }
            if byte < 0x20 { throw JSONFailure(offset: index, message: "unescaped control character in string") }
            highBits |= UInt64(byte)
            index += 1
        }
        guard index < end else { throw JSONFailure(offset: open, message: "unterminated string") }
        // Escapes: let the general parser decode into `scratch`, then lend the scratch bytes.
        index = open
        _ = try parseString()
        return scratch.withUnsafeBufferPointer { body($0) }
    }
}

extension JSONByteParser {
    /// Powers of ten that are exact doubles (10^0 … 10^22).
    private static let exactPowersOfTen: [Double] = (0...22).map { exponent in
        var value = 1.0
        for _ in 0..<exponent { value *= 10 }
        return value
    }

    /// A number at `index` in its common short form (`-?digits(.digits)?` with at most 15
    /// significant digits in all, no exponent), decoded without building a string: an integer, or a
    /// decimal whose digits form an exact integer `m < 2^53` divided by an exact power of ten, which
    /// one IEEE division rounds correctly (Clinger's fast path), so the result equals
    /// ``parseNumber()``'s. Anything else (exponents, long mantissas, malformed input) returns nil
    /// without consuming anything, and the general parser takes over.
    mutating func fastNumber() -> JSON? {
        var position = index
        let negative = buffer[position] == UInt8(ascii: "-")
        if negative { position += 1 }
        let digitsStart = position
        var mantissa: Int64 = 0
        var digits = 0
        while position < end, isDigit(buffer[position]) {
            mantissa = mantissa &* 10 &+ Int64(buffer[position] &- UInt8(ascii: "0"))
            digits += 1
            position += 1
        }
        guard digits > 0, digits <= 15, !(digits > 1 && buffer[digitsStart] == UInt8(ascii: "0")) else { return nil }
        var fractionDigits = 0
        if position < end, buffer[position] == UInt8(ascii: ".") {
            position += 1
            while position < end, isDigit(buffer[position]) {
                mantissa = mantissa &* 10 &+ Int64(buffer[position] &- UInt8(ascii: "0"))
                fractionDigits += 1
                position += 1
            }
            guard fractionDigits > 0, digits + fractionDigits <= 15 else { return nil }
        }
        if position < end, buffer[position] == UInt8(ascii: "e") || buffer[position] == UInt8(ascii: "E") {
            return nil
        }
        index = position
        if fractionDigits == 0 { return .int(negative ? -mantissa : mantissa) }
        let magnitude = Double(mantissa) / Self.exactPowersOfTen[fractionDigits]
        return .double(negative ? -magnitude : magnitude)
    }
}
