/// A compact binary form of `Codable` values for the loop's checkpoints (``StateCodec``).
///
/// Why not Foundation's `JSONEncoder`: the estimators' state at 10,000 tenants is tens of megabytes,
/// and `JSONEncoder` first builds a tree of the whole document, then serialises it (measured: 5 s
/// and hundreds of megabytes of transient memory). This writer streams: every value goes straight
/// into one byte buffer, so encoding costs one pass and the buffer.
///
/// The format, little-endian, is self-describing so that keyed decoding (`decodeIfPresent`, custom
/// `init(from:)`, dictionaries) works without a schema:
///
/// | tag | value |
/// |---|---|
/// | 0 | nil |
/// | 1, 2 | false, true |
/// | 3 | signed integer, 8 bytes |
/// | 4 | unsigned integer, 8 bytes |
/// | 5 | double, 8 bytes (any bit pattern: infinities and NaN survive) |
/// | 6 | string: LEB128 length, UTF-8 bytes |
/// | 7 | keyed container: 4-byte byte length, then entries (LEB128 key length, key, value) |
/// | 8 | unkeyed container: 4-byte byte length, then values |
///
/// Container lengths are back-patched when the container closes, which is possible because
/// `Encodable` implementations use containers strictly nested (a value's encoding finishes before
/// its parent writes the next entry); a reader can therefore skip any value in O(1).
enum BinaryStateCoder {
    enum Tag: UInt8 {
        case null = 0
        case `false` = 1
        case `true` = 2
        case int = 3
        case uint = 4
        case double = 5
        case string = 6
        case keyed = 7
        case unkeyed = 8
    }

    static let magic: [UInt8] = Array("ABS1".utf8)

    static func encode(_ value: some Encodable) throws -> [UInt8] {
        let writer = Writer()
        writer.bytes.append(contentsOf: magic)
        try value.encode(to: ValueEncoder(writer: writer, depth: 0))
        if writer.bytes.count == magic.count { _ = writer.openKeyed() }
        writer.close(toDepth: 0)
        return writer.bytes
    }

    static func decode<T: Decodable>(_ type: T.Type, from bytes: [UInt8]) throws -> T {
        guard bytes.count > magic.count, Array(bytes.prefix(magic.count)) == magic else {
            throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "not a binary state (bad magic)"))
        }
        let reader = Reader(bytes)
        let end = try reader.skip(magic.count)
        guard end == bytes.count else {
            throw DecodingError.dataCorrupted(.init(codingPath: [], debugDescription: "trailing bytes"))
        }
        return try T(from: ValueDecoder(reader: reader, offset: magic.count, codingPath: []))
    }
}

// MARK: Writing

extension BinaryStateCoder {
    /// The output buffer and the stack of open containers (offsets of their length fields).
    ///
    /// Exclusivity is not checked at run time on these two (`@exclusivity(unchecked)`): every value
    /// of a checkpoint appends to them, and the dynamic checks of a class's stored properties cost
    /// more than the appends (40 % of a checkpoint's instructions). One encoding owns its writer and
    /// never touches them re-entrantly (each access is a single append or read).
    final class Writer {
        @exclusivity(unchecked) var bytes: [UInt8] = []
        @exclusivity(unchecked) private var open: [Int] = []

        init() {
            bytes.reserveCapacity(1 << 16)
        }

        var depth: Int { open.count }

        /// Closes containers deeper than `depth`, patching their lengths.
        @inline(__always)
        func close(toDepth depth: Int) {
            while open.count > depth {
                let lengthAt = open.removeLast()
                let length = UInt32(truncatingIfNeeded: bytes.count - lengthAt - 4)
                bytes[lengthAt] = UInt8(truncatingIfNeeded: length)
                bytes[lengthAt + 1] = UInt8(truncatingIfNeeded: length >> 8)
                bytes[lengthAt + 2] = UInt8(truncatingIfNeeded: length >> 16)
                bytes[lengthAt + 3] = UInt8(truncatingIfNeeded: length >> 24)
            }
        }

        /// Opens a keyed container; returns its depth.
        func openKeyed() -> Int { openContainer(.keyed) }

        func openUnkeyed() -> Int { openContainer(.unkeyed) }

        private func openContainer(_ tag: Tag) -> Int {
            bytes.append(tag.rawValue)
            open.append(bytes.count)
            for _ in 0..<4 { bytes.append(0) }
            return open.count
        }

        @inline(__always)
        func tag(_ tag: Tag) { bytes.append(tag.rawValue) }

        @inline(__always)
        func length(_ value: Int) {
            var rest = UInt64(value)
            repeat {
                let byte = UInt8(rest & 0x7F)
                rest >>= 7
                bytes.append(rest == 0 ? byte : byte | 0x80)
            } while rest != 0
        }

        @inline(__always)
        func word(_ value: UInt64) {
            withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
        }

        func key(_ key: String) {
            var key = key
            key.withUTF8 { utf8 in
                length(utf8.count)
                bytes.append(contentsOf: utf8)
            }
        }

        func null() { tag(.null) }
        func bool(_ value: Bool) { tag(value ? .true : .false) }
        func int(_ value: Int64) {
            tag(.int)
            word(UInt64(bitPattern: value))
        }
        func uint(_ value: UInt64) {
            tag(.uint)
            word(value)
        }
        func double(_ value: Double) {
            tag(.double)
            word(value.bitPattern)
        }
        func string(_ value: String) {
            tag(.string)
            key(value)
        }

        /// Encodes a nested value: its own encoder at the current depth.
        func value(_ value: some Encodable, depth: Int) throws {
            let before = bytes.count
            try value.encode(to: ValueEncoder(writer: self, depth: depth))
            // A value that encoded nothing at all is an empty keyed container, as JSON writes `{}`.
            if bytes.count == before { _ = openKeyed() }
            close(toDepth: depth)
        }
    }

    /// The encoder of one value, at a depth of the container stack.
    struct ValueEncoder: Encoder {
        let writer: Writer
        let depth: Int
        var codingPath: [any CodingKey] { [] }
        var userInfo: [CodingUserInfoKey: Any] { [:] }

        func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
            writer.close(toDepth: depth)
            return KeyedEncodingContainer(KeyedWriter<Key>(writer: writer, depth: writer.openKeyed()))
        }

        func unkeyedContainer() -> any UnkeyedEncodingContainer {
            writer.close(toDepth: depth)
            return UnkeyedWriter(writer: writer, depth: writer.openUnkeyed())
        }

        func singleValueContainer() -> any SingleValueEncodingContainer {
            SingleWriter(writer: writer, depth: depth)
        }
    }

    struct KeyedWriter<Key: CodingKey>: KeyedEncodingContainerProtocol {
        let writer: Writer
        let depth: Int
        var codingPath: [any CodingKey] { [] }

        @inline(__always)
        private func begin(_ key: Key) {
            writer.close(toDepth: depth)
            writer.key(key.stringValue)
        }

        mutating func encodeNil(forKey key: Key) throws {
            begin(key)
            writer.null()
        }
        mutating func encode(_ value: Bool, forKey key: Key) throws {
            begin(key)
            writer.bool(value)
        }
        mutating func encode(_ value: String, forKey key: Key) throws {
            begin(key)
            writer.string(value)
        }
        mutating func encode(_ value: Double, forKey key: Key) throws {
            begin(key)
            writer.double(value)
        }
        mutating func encode(_ value: Float, forKey key: Key) throws {
            begin(key)
            writer.double(Double(value))
        }
        mutating func encode(_ value: Int, forKey key: Key) throws {
            begin(key)
            writer.int(Int64(value))
        }
        mutating func encode(_ value: Int8, forKey key: Key) throws {
            begin(key)
            writer.int(Int64(value))
        }
        mutating func encode(_ value: Int16, forKey key: Key) throws {
            begin(key)
            writer.int(Int64(value))
        }
        mutating func encode(_ value: Int32, forKey key: Key) throws {
            begin(key)
            writer.int(Int64(value))
        }
        mutating func encode(_ value: Int64, forKey key: Key) throws {
            begin(key)
            writer.int(value)
        }
        mutating func encode(_ value: UInt, forKey key: Key) throws {
            begin(key)
            writer.uint(UInt64(value))
        }
        mutating func encode(_ value: UInt8, forKey key: Key) throws {
            begin(key)
            writer.uint(UInt64(value))
        }
        mutating func encode(_ value: UInt16, forKey key: Key) throws {
            begin(key)
            writer.uint(UInt64(value))
        }
        mutating func encode(_ value: UInt32, forKey key: Key) throws {
            begin(key)
            writer.uint(UInt64(value))
        }
        mutating func encode(_ value: UInt64, forKey key: Key) throws {
            begin(key)
            writer.uint(value)
        }
        mutating func encode(_ value: some Encodable, forKey key: Key) throws {
            begin(key)
            try writer.value(value, depth: depth)
        }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key)
            -> KeyedEncodingContainer<NestedKey>
        {
            begin(key)
            return KeyedEncodingContainer(KeyedWriter<NestedKey>(writer: writer, depth: writer.openKeyed()))
        }

        mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
            begin(key)
            return UnkeyedWriter(writer: writer, depth: writer.openUnkeyed())
        }

        mutating func superEncoder() -> any Encoder {
            writer.close(toDepth: depth)
            writer.key("super")
            return ValueEncoder(writer: writer, depth: depth)
        }

        mutating func superEncoder(forKey key: Key) -> any Encoder {
            begin(key)
            return ValueEncoder(writer: writer, depth: depth)
        }
    }

    struct UnkeyedWriter: UnkeyedEncodingContainer {
        let writer: Writer
        let depth: Int
        private(set) var count = 0
        var codingPath: [any CodingKey] { [] }

        init(writer: Writer, depth: Int) {
            self.writer = writer
            self.depth = depth
        }

        @inline(__always)
        private mutating func begin() {
            writer.close(toDepth: depth)
            count += 1
        }

        mutating func encodeNil() throws {
            begin()
            writer.null()
        }
        mutating func encode(_ value: Bool) throws {
            begin()
            writer.bool(value)
        }
        mutating func encode(_ value: String) throws {
            begin()
            writer.string(value)
        }
        mutating func encode(_ value: Double) throws {
            begin()
            writer.double(value)
        }
        mutating func encode(_ value: Float) throws {
            begin()
            writer.double(Double(value))
        }
        mutating func encode(_ value: Int) throws {
            begin()
            writer.int(Int64(value))
        }
        mutating func encode(_ value: Int8) throws {
            begin()
            writer.int(Int64(value))
        }
        mutating func encode(_ value: Int16) throws {
            begin()
            writer.int(Int64(value))
        }
        mutating func encode(_ value: Int32) throws {
            begin()
            writer.int(Int64(value))
        }
        mutating func encode(_ value: Int64) throws {
            begin()
            writer.int(value)
        }
        mutating func encode(_ value: UInt) throws {
            begin()
            writer.uint(UInt64(value))
        }
        mutating func encode(_ value: UInt8) throws {
            begin()
            writer.uint(UInt64(value))
        }
        mutating func encode(_ value: UInt16) throws {
            begin()
            writer.uint(UInt64(value))
        }
        mutating func encode(_ value: UInt32) throws {
            begin()
            writer.uint(UInt64(value))
        }
        mutating func encode(_ value: UInt64) throws {
            begin()
            writer.uint(value)
        }
        mutating func encode(_ value: some Encodable) throws {
            begin()
            try writer.value(value, depth: depth)
        }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type)
            -> KeyedEncodingContainer<NestedKey>
        {
            begin()
            return KeyedEncodingContainer(KeyedWriter<NestedKey>(writer: writer, depth: writer.openKeyed()))
        }

        mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer {
            begin()
            return UnkeyedWriter(writer: writer, depth: writer.openUnkeyed())
        }

        mutating func superEncoder() -> any Encoder {
            begin()
            return ValueEncoder(writer: writer, depth: depth)
        }
    }

    struct SingleWriter: SingleValueEncodingContainer {
        let writer: Writer
        let depth: Int
        var codingPath: [any CodingKey] { [] }

        @inline(__always)
        private func begin() { writer.close(toDepth: depth) }

        mutating func encodeNil() throws {
            begin()
            writer.null()
        }
        mutating func encode(_ value: Bool) throws {
            begin()
            writer.bool(value)
        }
        mutating func encode(_ value: String) throws {
            begin()
            writer.string(value)
        }
        mutating func encode(_ value: Double) throws {
            begin()
            writer.double(value)
        }
        mutating func encode(_ value: Float) throws {
            begin()
            writer.double(Double(value))
        }
        mutating func encode(_ value: Int) throws {
            begin()
            writer.int(Int64(value))
        }
        mutating func encode(_ value: Int8) throws {
            begin()
            writer.int(Int64(value))
        }
        mutating func encode(_ value: Int16) throws {
            begin()
            writer.int(Int64(value))
        }
        mutating func encode(_ value: Int32) throws {
            begin()
            writer.int(Int64(value))
        }
        mutating func encode(_ value: Int64) throws {
            begin()
            writer.int(value)
        }
        mutating func encode(_ value: UInt) throws {
            begin()
            writer.uint(UInt64(value))
        }
        mutating func encode(_ value: UInt8) throws {
            begin()
            writer.uint(UInt64(value))
        }
        mutating func encode(_ value: UInt16) throws {
            begin()
            writer.uint(UInt64(value))
        }
        mutating func encode(_ value: UInt32) throws {
            begin()
            writer.uint(UInt64(value))
        }
        mutating func encode(_ value: UInt64) throws {
            begin()
            writer.uint(value)
        }
        mutating func encode(_ value: some Encodable) throws {
            begin()
            try value.encode(to: ValueEncoder(writer: writer, depth: depth))
        }
    }
}

// MARK: Reading

extension BinaryStateCoder {
    /// The input, with bounds-checked primitive reads.
    final class Reader {
        let bytes: [UInt8]

        init(_ bytes: [UInt8]) {
            self.bytes = bytes
        }

        func corrupt(_ message: String, _ path: [any CodingKey]) -> DecodingError {
            .dataCorrupted(.init(codingPath: path, debugDescription: message))
        }

        func tag(at offset: Int) throws -> Tag {
            guard offset < bytes.count, let tag = Tag(rawValue: bytes[offset]) else {
                throw corrupt("unknown or missing tag at byte \(offset)", [])
            }
            return tag
        }

        func word(at offset: Int) throws -> UInt64 {
            guard offset >= 0, bytes.count - offset >= 8 else { throw corrupt("truncated at byte \(offset)", []) }
            var value: UInt64 = 0
            for shift in 0..<8 { value |= UInt64(bytes[offset + shift]) << (8 * UInt64(shift)) }
            return value
        }

        func containerLength(at offset: Int) throws -> Int {
            guard offset >= 0, bytes.count - offset >= 4 else { throw corrupt("truncated at byte \(offset)", []) }
            var value = 0
            for shift in 0..<4 { value |= Int(bytes[offset + shift]) << (8 * shift) }
            guard value <= bytes.count - offset - 4 else { throw corrupt("container overruns the input", []) }
            return value
        }

        /// A LEB128 length at `offset`: (value, offset after it).
        func length(at offset: Int) throws -> (Int, Int) {
            var value = 0
            var shift = 0
            var position = offset
            while true {
                guard position < bytes.count, shift < 63 else { throw corrupt("bad length at byte \(offset)", []) }
                let byte = bytes[position]
                value |= Int(byte & 0x7F) << shift
                position += 1
                if byte & 0x80 == 0 { break }
                shift += 7
            }
            guard value >= 0, value <= bytes.count - position else { throw corrupt("length overruns the input", []) }
            return (value, position)
        }

        /// The string at `offset` (its length prefix): (string, offset after it).
        func text(at offset: Int) throws -> (String, Int) {
            let (count, start) = try length(at: offset)
            let string = bytes.withUnsafeBufferPointer {
                String(decoding: UnsafeBufferPointer(rebasing: $0[start..<(start + count)]), as: UTF8.self)
            }
            return (string, start + count)
        }

        /// The offset just after the value at `offset`.
        func skip(_ offset: Int) throws -> Int {
            switch try tag(at: offset) {
            case .null, .false, .true: return offset + 1
            case .int, .uint, .double:
                guard bytes.count - offset >= 9 else { throw corrupt("truncated at byte \(offset)", []) }
                return offset + 9
            case .string:
                let (count, start) = try length(at: offset + 1)
                return start + count
            case .keyed, .unkeyed: return offset + 5 + (try containerLength(at: offset + 1))
            }
        }
    }

    /// The decoder of the value at `offset`.
    struct ValueDecoder: Decoder {
        let reader: Reader
        let offset: Int
        let codingPath: [any CodingKey]
        var userInfo: [CodingUserInfoKey: Any] { [:] }

        func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
            guard try reader.tag(at: offset) == .keyed else {
                throw DecodingError.typeMismatch(
                    [String: Any].self, .init(codingPath: codingPath, debugDescription: "expected a keyed container"))
            }
            return KeyedDecodingContainer(try KeyedReader<Key>(reader: reader, offset: offset, codingPath: codingPath))
        }

        func unkeyedContainer() throws -> any UnkeyedDecodingContainer {
            guard try reader.tag(at: offset) == .unkeyed else {
                throw DecodingError.typeMismatch(
                    [Any].self, .init(codingPath: codingPath, debugDescription: "expected an unkeyed container"))
            }
            return try UnkeyedReader(reader: reader, offset: offset, codingPath: codingPath)
        }

        func singleValueContainer() throws -> any SingleValueDecodingContainer {
            SingleReader(reader: reader, offset: offset, codingPath: codingPath)
        }
    }

    /// Primitive reads shared by the containers.
    struct Primitive {
        let reader: Reader
        let codingPath: [any CodingKey]

        func mismatch(_ type: Any.Type, _ tag: Tag) -> DecodingError {
            .typeMismatch(type, .init(codingPath: codingPath, debugDescription: "found tag \(tag)"))
        }

        func isNil(_ offset: Int) throws -> Bool { try reader.tag(at: offset) == .null }

        func bool(_ offset: Int) throws -> Bool {
            switch try reader.tag(at: offset) {
            case .true: return true
            case .false: return false
            case let tag: throw mismatch(Bool.self, tag)
            }
        }

        func string(_ offset: Int) throws -> String {
            let tag = try reader.tag(at: offset)
            guard tag == .string else { throw mismatch(String.self, tag) }
            return try reader.text(at: offset + 1).0
        }

        func double(_ offset: Int) throws -> Double {
            switch try reader.tag(at: offset) {
            case .double: return Double(bitPattern: try reader.word(at: offset + 1))
            case .int: return Double(Int64(bitPattern: try reader.word(at: offset + 1)))
            case .uint: return Double(try reader.word(at: offset + 1))
            case let tag: throw mismatch(Double.self, tag)
            }
        }

        func integer<T: FixedWidthInteger>(_ offset: Int, _ type: T.Type) throws -> T {
            let value: T?
            switch try reader.tag(at: offset) {
            case .int: value = T(exactly: Int64(bitPattern: try reader.word(at: offset + 1)))
            case .uint: value = T(exactly: try reader.word(at: offset + 1))
            case let tag: throw mismatch(T.self, tag)
            }
            guard let value else {
                throw DecodingError.dataCorrupted(
                    .init(codingPath: codingPath, debugDescription: "number does not fit \(T.self)"))
            }
            return value
        }
    }

    struct KeyedReader<Key: CodingKey>: KeyedDecodingContainerProtocol {
        let reader: Reader
        let codingPath: [any CodingKey]
        private let entries: [(key: String, offset: Int)]
        private let index: [String: Int]?
        private var primitive: Primitive { Primitive(reader: reader, codingPath: codingPath) }

        init(reader: Reader, offset: Int, codingPath: [any CodingKey]) throws {
            self.reader = reader
            self.codingPath = codingPath
            let end = offset + 5 + (try reader.containerLength(at: offset + 1))
            var entries: [(key: String, offset: Int)] = []
            var position = offset + 5
            while position < end {
                let (key, valueOffset) = try reader.text(at: position)
                entries.append((key, valueOffset))
                position = try reader.skip(valueOffset)
            }
            guard position == end else { throw reader.corrupt("keyed container misaligned", codingPath) }
            self.entries = entries
            // Small containers (struct fields) search linearly; large ones (dictionaries) hash.
            index =
                entries.count > 16
                ? Dictionary(
                    entries.enumerated().map { ($0.element.key, $0.element.offset) }, uniquingKeysWith: { a, _ in a })
                : nil
        }

        var allKeys: [Key] { entries.compactMap { Key(stringValue: $0.key) } }

        func contains(_ key: Key) -> Bool { offset(key) != nil }

        private func offset(_ key: Key) -> Int? {
            let name = key.stringValue
            if let index { return index[name] }
            return entries.first { $0.key == name }?.offset
        }

        private func require(_ key: Key) throws -> Int {
            guard let offset = offset(key) else {
                throw DecodingError.keyNotFound(key, .init(codingPath: codingPath, debugDescription: "missing"))
            }
            return offset
        }

        func decodeNil(forKey key: Key) throws -> Bool { try primitive.isNil(try require(key)) }
        func decode(_ type: Bool.Type, forKey key: Key) throws -> Bool { try primitive.bool(try require(key)) }
        func decode(_ type: String.Type, forKey key: Key) throws -> String { try primitive.string(try require(key)) }
        func decode(_ type: Double.Type, forKey key: Key) throws -> Double { try primitive.double(try require(key)) }
        func decode(_ type: Float.Type, forKey key: Key) throws -> Float {
            Float(try primitive.double(try require(key)))
        }
        func decode(_ type: Int.Type, forKey key: Key) throws -> Int { try primitive.integer(try require(key), type) }
        func decode(_ type: Int8.Type, forKey key: Key) throws -> Int8 { try primitive.integer(try require(key), type) }
        func decode(_ type: Int16.Type, forKey key: Key) throws -> Int16 {
            try primitive.integer(try require(key), type)
        }
        func decode(_ type: Int32.Type, forKey key: Key) throws -> Int32 {
            try primitive.integer(try require(key), type)
        }
        func decode(_ type: Int64.Type, forKey key: Key) throws -> Int64 {
            try primitive.integer(try require(key), type)
        }
        func decode(_ type: UInt.Type, forKey key: Key) throws -> UInt { try primitive.integer(try require(key), type) }
        func decode(_ type: UInt8.Type, forKey key: Key) throws -> UInt8 {
            try primitive.integer(try require(key), type)
        }
        func decode(_ type: UInt16.Type, forKey key: Key) throws -> UInt16 {
            try primitive.integer(try require(key), type)
        }
        func decode(_ type: UInt32.Type, forKey key: Key) throws -> UInt32 {
            try primitive.integer(try require(key), type)
        }
        func decode(_ type: UInt64.Type, forKey key: Key) throws -> UInt64 {
            try primitive.integer(try require(key), type)
        }
        func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
            try T(from: ValueDecoder(reader: reader, offset: try require(key), codingPath: codingPath + [key]))
        }

        func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type, forKey key: Key) throws
            -> KeyedDecodingContainer<NestedKey>
        {
            try ValueDecoder(reader: reader, offset: try require(key), codingPath: codingPath + [key])
                .container(keyedBy: type)
        }

        func nestedUnkeyedContainer(forKey key: Key) throws -> any UnkeyedDecodingContainer {
            try ValueDecoder(reader: reader, offset: try require(key), codingPath: codingPath + [key])
                .unkeyedContainer()
        }

        func superDecoder() throws -> any Decoder {
            guard let offset = entries.first(where: { $0.key == "super" })?.offset else {
                throw DecodingError.dataCorrupted(.init(codingPath: codingPath, debugDescription: "no super"))
            }
            return ValueDecoder(reader: reader, offset: offset, codingPath: codingPath)
        }

        func superDecoder(forKey key: Key) throws -> any Decoder {
            ValueDecoder(reader: reader, offset: try require(key), codingPath: codingPath + [key])
        }
    }

    struct UnkeyedReader: UnkeyedDecodingContainer {
        let reader: Reader
        let codingPath: [any CodingKey]
        private let end: Int
        private var position: Int
        private(set) var currentIndex = 0
        let count: Int?

        init(reader: Reader, offset: Int, codingPath: [any CodingKey]) throws {
            self.reader = reader
            self.codingPath = codingPath
            end = offset + 5 + (try reader.containerLength(at: offset + 1))
            position = offset + 5
            // The element count is not stored; some types need it (SIMD vectors refuse to decode
            // without `count == scalarCount`), so count the elements once by skipping over them.
            var elements = 0
            var cursor = position
            while cursor < end {
                cursor = try reader.skip(cursor)
                elements += 1
            }
            guard cursor == end else { throw reader.corrupt("unkeyed container misaligned", codingPath) }
            count = elements
        }

        var isAtEnd: Bool { position >= end }

        private mutating func next() throws -> Int {
            guard position < end else {
                throw DecodingError.valueNotFound(
                    Any.self, .init(codingPath: codingPath, debugDescription: "unkeyed container is at its end"))
            }
            let offset = position
            position = try reader.skip(position)
            guard position <= end else { throw reader.corrupt("unkeyed container misaligned", codingPath) }
            currentIndex += 1
            return offset
        }

        private var primitive: Primitive { Primitive(reader: reader, codingPath: codingPath) }

        mutating func decodeNil() throws -> Bool {
            guard position < end, try reader.tag(at: position) == .null else { return false }
            _ = try next()
            return true
        }
        mutating func decode(_ type: Bool.Type) throws -> Bool { try primitive.bool(try next()) }
        mutating func decode(_ type: String.Type) throws -> String { try primitive.string(try next()) }
        mutating func decode(_ type: Double.Type) throws -> Double { try primitive.double(try next()) }
        mutating func decode(_ type: Float.Type) throws -> Float { Float(try primitive.double(try next())) }
        mutating func decode(_ type: Int.Type) throws -> Int { try primitive.integer(try next(), type) }
        mutating func decode(_ type: Int8.Type) throws -> Int8 { try primitive.integer(try next(), type) }
        mutating func decode(_ type: Int16.Type) throws -> Int16 { try primitive.integer(try next(), type) }
        mutating func decode(_ type: Int32.Type) throws -> Int32 { try primitive.integer(try next(), type) }
        mutating func decode(_ type: Int64.Type) throws -> Int64 { try primitive.integer(try next(), type) }
        mutating func decode(_ type: UInt.Type) throws -> UInt { try primitive.integer(try next(), type) }
        mutating func decode(_ type: UInt8.Type) throws -> UInt8 { try primitive.integer(try next(), type) }
        mutating func decode(_ type: UInt16.Type) throws -> UInt16 { try primitive.integer(try next(), type) }
        mutating func decode(_ type: UInt32.Type) throws -> UInt32 { try primitive.integer(try next(), type) }
        mutating func decode(_ type: UInt64.Type) throws -> UInt64 { try primitive.integer(try next(), type) }
        mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
            try T(from: ValueDecoder(reader: reader, offset: try next(), codingPath: codingPath))
        }

        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy type: NestedKey.Type) throws
            -> KeyedDecodingContainer<NestedKey>
        {
            try ValueDecoder(reader: reader, offset: try next(), codingPath: codingPath).container(keyedBy: type)
        }

        mutating func nestedUnkeyedContainer() throws -> any UnkeyedDecodingContainer {
            try ValueDecoder(reader: reader, offset: try next(), codingPath: codingPath).unkeyedContainer()
        }

        mutating func superDecoder() throws -> any Decoder {
            ValueDecoder(reader: reader, offset: try next(), codingPath: codingPath)
        }
    }

    struct SingleReader: SingleValueDecodingContainer {
        let reader: Reader
        let offset: Int
        let codingPath: [any CodingKey]
        private var primitive: Primitive { Primitive(reader: reader, codingPath: codingPath) }

        func decodeNil() -> Bool { (try? primitive.isNil(offset)) ?? false }
        func decode(_ type: Bool.Type) throws -> Bool { try primitive.bool(offset) }
        func decode(_ type: String.Type) throws -> String { try primitive.string(offset) }
        func decode(_ type: Double.Type) throws -> Double { try primitive.double(offset) }
        func decode(_ type: Float.Type) throws -> Float { Float(try primitive.double(offset)) }
        func decode(_ type: Int.Type) throws -> Int { try primitive.integer(offset, type) }
        func decode(_ type: Int8.Type) throws -> Int8 { try primitive.integer(offset, type) }
        func decode(_ type: Int16.Type) throws -> Int16 { try primitive.integer(offset, type) }
        func decode(_ type: Int32.Type) throws -> Int32 { try primitive.integer(offset, type) }
        func decode(_ type: Int64.Type) throws -> Int64 { try primitive.integer(offset, type) }
        func decode(_ type: UInt.Type) throws -> UInt { try primitive.integer(offset, type) }
        func decode(_ type: UInt8.Type) throws -> UInt8 { try primitive.integer(offset, type) }
        func decode(_ type: UInt16.Type) throws -> UInt16 { try primitive.integer(offset, type) }
        func decode(_ type: UInt32.Type) throws -> UInt32 { try primitive.integer(offset, type) }
        func decode(_ type: UInt64.Type) throws -> UInt64 { try primitive.integer(offset, type) }
        func decode<T: Decodable>(_ type: T.Type) throws -> T {
            try T(from: ValueDecoder(reader: reader, offset: offset, codingPath: codingPath))
        }
    }
}
