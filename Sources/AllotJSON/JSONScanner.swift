/// A pull scanner over one JSON text: the caller walks the document token by token and builds its
/// own structure, instead of receiving a `JSON` tree.
///
/// Why it exists: telemetry ingest (SPEC section 3) decodes about 100,000 events per second, and
/// building a tree of `JSON` values (an object per event, a string per member name) and then
/// copying it into the event struct costs more than decoding straight into the struct. The
/// scanner applies exactly the rules of ``JSON/parse(_:maxDepth:)`` (it shares its code): strict
/// RFC 8259 grammar, valid UTF-8, no lone surrogates, bounded nesting, positions in errors.
///
/// **Inlining.** The hot methods are `@inlinable` (their internals `@usableFromInline`), so that a
/// caller in another module, such as the telemetry decoder, gets them specialised for its match
/// closures and inlined into its loop, instead of calling a generic, unspecialised entry point per
/// token; error paths stay out of line (`@inline(never)`) to keep the inlined code small. Measured
/// on the ingest benchmark, this halves the instructions spent per telemetry event in the scanner.
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

    @usableFromInline var parser: JSONByteParser
    /// Set by ``beginObject()`` / ``beginArray()``: the next ``nextKey()`` / ``nextElement()`` is
    /// the container's first, so no `,` is expected before it. One flag is enough because a nested
    /// container is always read completely before its parent continues.
    @usableFromInline var atContainerStart = false
    @usableFromInline let record: Int?

    @usableFromInline
    init(buffer: UnsafeBufferPointer<UInt8>, range: Range<Int>, maxDepth: Int, record: Int?) {
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
    @inlinable
    public static func scan<Result, Failure: Error>(
        _ buffer: UnsafeBufferPointer<UInt8>, range: Range<Int>? = nil, maxDepth: Int = 64, record: Int? = nil,
        _ body: (inout JSONScanner) throws(Failure) -> Result
    ) throws(Failure) -> Result {
        var scanner = JSONScanner(
            buffer: buffer, range: range ?? 0..<buffer.count, maxDepth: maxDepth, record: record)
        return try body(&scanner)
    }

    /// The byte offset of the next unread byte in the whole buffer.
    @inlinable
    public var offset: Int { parser.index }

    /// True when only whitespace is left (skips it).
    @inlinable
    public mutating func isAtEnd() -> Bool {
        parser.skipWhitespace()
        return parser.index == parser.end
    }

    /// The kind of the next value (skipping whitespace), or nil at the end of input or before a byte
    /// that cannot start a value. Does not consume anything else.
    @inlinable @inline(__always)
    public mutating func peekKind() -> Kind? {
        parser.skipWhitespace()
        guard parser.index < parser.end else { return nil }
        switch parser.buffer[parser.index] {
        case UInt8(ascii: "\""): return .string
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number
        case UInt8(ascii: "{"): return .object
        case UInt8(ascii: "["): return .array
        case UInt8(ascii: "t"), UInt8(ascii: "f"): return .bool
        case UInt8(ascii: "n"): return .null
        default: return nil
        }
    }

    /// Consumes `{`. Then call ``nextKey()`` until it returns nil.
    @inlinable
    public mutating func beginObject() throws(JSONParseError) {
        try expectOpening(UInt8(ascii: "{"), what: "an object")
    }

    /// Consumes `[`. Then call ``nextElement()`` until it returns false.
    @inlinable
    public mutating func beginArray() throws(JSONParseError) {
        try expectOpening(UInt8(ascii: "["), what: "an array")
    }

    /// The next member name of the current object, with its `:` consumed (read or skip the value
    /// next); nil when the object ends (its `}` consumed).
    @inlinable
    public mutating func nextKey() throws(JSONParseError) -> String? {
        try nextKey { String(decoding: $0, as: UTF8.self) }
    }

    /// Like ``nextKey()``, but hands the decoded name's UTF-8 bytes to `match` instead of making a
    /// `String`: for matching names against a fixed set without allocating. The bytes are valid
    /// only during the call. Returns nil when the object ends.
    @inlinable
    public mutating func nextKey<T>(_ match: (UnsafeBufferPointer<UInt8>) -> T) throws(JSONParseError) -> T? {
        guard try advanceToMember() else { return nil }
        let result: T
        do {
            result = try parser.withStringBytes(match)
        } catch {
            throw located(error)
        }
        try expectColon()
        return result
    }

    /// True when the current array has another element (read or skip it next); false when the
    /// array ends (its `]` consumed).
    @inlinable @inline(__always)
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
            guard byte == UInt8(ascii: ",") else { throw unexpected(byte, expected: "',' or ']'") }
            parser.index += 1
        }
        return true
    }

    /// Reads a string value.
    @inlinable
    public mutating func readString() throws(JSONParseError) -> String {
        try readString { String(decoding: $0, as: UTF8.self) }
    }

    /// Reads a string value and hands its decoded UTF-8 bytes to `body` (valid only during the call).
    @inlinable
    public mutating func readString<T>(_ body: (UnsafeBufferPointer<UInt8>) -> T) throws(JSONParseError) -> T {
        atContainerStart = false
        parser.skipWhitespace()
        guard parser.index < parser.end, parser.buffer[parser.index] == UInt8(ascii: "\"") else {
            throw kindMismatch(.string)
        }
        do {
            return try parser.withStringBytes(body)
        } catch {
            throw located(error)
        }
    }

    /// Reads the next value of any kind as a `JSON` value (a whole tree for objects and arrays,
    /// within the remaining nesting budget). Numbers come back as `.int` or `.double` as in
    /// ``JSON/parse(_:maxDepth:)``.
    @inlinable
    public mutating func readValue() throws(JSONParseError) -> JSON {
        parser.skipWhitespace()
        atContainerStart = false
        if parser.index < parser.end, let number = parser.fastNumber() { return number }
        return try readValueSlowly()
    }

    /// Reads and discards the next value (still validating it).
    @inlinable
    public mutating func skipValue() throws(JSONParseError) {
        _ = try readValue()
    }

    /// Checks that nothing but whitespace is left.
    @inlinable
    public mutating func finish() throws(JSONParseError) {
        parser.skipWhitespace()
        guard parser.index == parser.end else { throw trailingBytes() }
    }

    /// An error at `offset` in the scanner's terms (line, column, record), for callers that find a
    /// problem with a value the scanner accepted.
    public func error(at offset: Int, _ message: String) -> JSONParseError {
        failure(at: offset, message)
    }

    // MARK: Internals

    @inlinable
    mutating func expectOpening(_ opening: UInt8, what: StaticString) throws(JSONParseError) {
        parser.skipWhitespace()
        guard parser.index < parser.end, parser.buffer[parser.index] == opening else {
            throw openingMismatch(what: what)
        }
        do {
            try parser.enter()
        } catch {
            throw located(error)
        }
        parser.index += 1
        atContainerStart = true
    }

    /// Moves past `,` (or the opening `{`) to the next member name; false (with `}` consumed) at
    /// the end of the object.
    @inlinable @inline(__always)
    mutating func advanceToMember() throws(JSONParseError) -> Bool {
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
            guard byte == UInt8(ascii: ",") else { throw unexpected(byte, expected: "',' or '}'") }
            parser.index += 1
            parser.skipWhitespace()
            guard parser.index < parser.end else { throw failure(at: parser.index, "unterminated object") }
            byte = parser.buffer[parser.index]
        }
        guard byte == UInt8(ascii: "\"") else { throw unexpected(byte, expected: "a member name string") }
        return true
    }

    @inlinable @inline(__always)
    mutating func expectColon() throws(JSONParseError) {
        parser.skipWhitespace()
        guard parser.index < parser.end, parser.buffer[parser.index] == UInt8(ascii: ":") else {
            throw failure(at: parser.index, "expected ':' after member name")
        }
        parser.index += 1
        parser.skipWhitespace()
    }

    // Error paths: out of line, so that the inlined hot paths stay small.

    @usableFromInline @inline(never)
    mutating func readValueSlowly() throws(JSONParseError) -> JSON {
        do {
            return try parser.parseValue()
        } catch {
            throw located(error)
        }
    }

    @usableFromInline @inline(never)
    func failure(at offset: Int, _ message: String) -> JSONParseError {
        JSONFailure(offset: offset, message: message).error(in: parser.buffer, record: record)
    }

    @usableFromInline @inline(never)
    func located(_ failure: JSONFailure) -> JSONParseError {
        failure.error(in: parser.buffer, record: record)
    }

    @usableFromInline @inline(never)
    func unexpected(_ byte: UInt8, expected: StaticString) -> JSONParseError {
        failure(at: parser.index, "unexpected \(parser.describe(byte)), expected \(expected)")
    }

    @usableFromInline @inline(never)
    func openingMismatch(what: StaticString) -> JSONParseError {
        guard parser.index < parser.end else { return failure(at: parser.index, "expected \(what), found end of input") }
        return failure(at: parser.index, "unexpected \(parser.describe(parser.buffer[parser.index])), expected \(what)")
    }

    @usableFromInline @inline(never)
    mutating func kindMismatch(_ kind: Kind) -> JSONParseError {
        guard parser.index < parser.end else {
            return failure(at: parser.index, "expected a JSON value, found end of input")
        }
        return failure(at: parser.index, "expected a \(kind) value")
    }

    @usableFromInline @inline(never)
    func trailingBytes() -> JSONParseError {
        failure(at: parser.index, "unexpected \(parser.describe(parser.buffer[parser.index])) after the JSON value")
    }
}

extension JSONByteParser {
    /// Parses a string starting at its opening quote and hands the decoded UTF-8 bytes to `body`:
    /// a slice of the input when the string has no escapes, the scratch buffer otherwise.
    ///
    /// The common case (no escapes, ASCII) is scanned eight bytes at a time: a word is skipped when
    /// none of its bytes is a quote, a backslash or a control character (the "has zero byte" bit
    /// trick, which never misses one), the word holding the closing quote is entered at that quote,
    /// and UTF-8 validation is skipped when no byte had its high bit set. Strings are most of a
    /// telemetry body's bytes.
    @inlinable
    mutating func withStringBytes<T>(_ body: (UnsafeBufferPointer<UInt8>) -> T) throws(JSONFailure) -> T {
        let open = index
        index += 1
        let start = index
        var highBits: UInt64 = 0
        if let base = buffer.baseAddress {
            let ones: UInt64 = 0x0101_0101_0101_0101
            let highs: UInt64 = 0x8080_8080_8080_8080
            while index &+ 8 <= end {
                let word = UInt64(littleEndian: UnsafeRawPointer(base + index).loadUnaligned(as: UInt64.self))
                let quote = word ^ (ones &* 0x22)
                let backslash = word ^ (ones &* 0x5C)
                let special =
                    (((quote &- ones) & ~quote) | ((backslash &- ones) & ~backslash) | ((word &- ones &* 0x20) & ~word))
                    & highs
                if special != 0 {
                    // The lowest flagged byte is exact (the borrows that can flag a wrong byte only run
                    // upwards from a true match), so jump straight to it: it ends the string or needs the
                    // byte loop below. The bytes before it are plain and join the UTF-8 check.
                    let plain = special.trailingZeroBitCount &>> 3
                    highBits |= word & ((1 &<< UInt64(plain &* 8)) &- 1)
                    index &+= plain
                    break
                }
                highBits |= word
                index &+= 8
            }
        }
        while index < end {
            let byte = buffer[index]
            if byte == UInt8(ascii: "\"") {
                let slice = UnsafeBufferPointer(rebasing: buffer[start..<index])
                if highBits & 0x8080_8080_8080_8080 != 0 {
                    guard UTF8Validation.isValid(slice) else { throw invalidUTF8(at: start) }
                }
                index += 1
                return body(slice)
            }
            if byte == UInt8(ascii: "\\") { break }
            if byte < 0x20 { throw controlCharacter(at: index) }
            highBits |= UInt64(byte)
            index += 1
        }
        guard index < end else { throw unterminatedString(at: open) }
        // Escapes: let the general parser decode into `scratch`, then lend the scratch bytes.
        index = open
        _ = try parseString()
        return scratch.withUnsafeBufferPointer { body($0) }
    }

    @usableFromInline @inline(never)
    func invalidUTF8(at offset: Int) -> JSONFailure { JSONFailure(offset: offset, message: "invalid UTF-8 in string") }

    @usableFromInline @inline(never)
    func controlCharacter(at offset: Int) -> JSONFailure {
        JSONFailure(offset: offset, message: "unescaped control character in string")
    }

    @usableFromInline @inline(never)
    func unterminatedString(at offset: Int) -> JSONFailure { JSONFailure(offset: offset, message: "unterminated string") }
}

extension JSONByteParser {
    /// 10^exponent for 0 ≤ exponent ≤ 15, all exact doubles. A switch rather than a static array:
    /// it inlines into callers in other modules without a lazy-initialisation check.
    @inlinable
    static func exactPowerOfTen(_ exponent: Int) -> Double {
        switch exponent {
        case 0: 1
        case 1: 1e1
        case 2: 1e2
        case 3: 1e3
        case 4: 1e4
        case 5: 1e5
        case 6: 1e6
        case 7: 1e7
        case 8: 1e8
        case 9: 1e9
        case 10: 1e10
        case 11: 1e11
        case 12: 1e12
        case 13: 1e13
        case 14: 1e14
        default: 1e15
        }
    }

    /// A number at `index` in its common short form (`-?digits(.digits)?` with at most 15
    /// significant digits in all, no exponent), decoded without building a string: an integer, or a
    /// decimal whose digits form an exact integer `m < 2^53` divided by an exact power of ten, which
    /// one IEEE division rounds correctly (Clinger's fast path), so the result equals
    /// ``parseNumber()``'s. Anything else (exponents, long mantissas, malformed input) returns nil
    /// without consuming anything, and the general parser takes over.
    @inlinable
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
        let magnitude = Double(mantissa) / Self.exactPowerOfTen(fractionDigits)
        return .double(negative ? -magnitude : magnitude)
    }
}
