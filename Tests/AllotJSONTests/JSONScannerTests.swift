import Testing

@testable import AllotJSON

@Suite struct JSONScannerTests {
    /// Rebuilds a tree with the scanner's token API only (never `readValue` for containers), so
    /// that comparing with `JSON.parse` checks the scanner's grammar.
    static func rebuild(_ scanner: inout JSONScanner) throws(JSONParseError) -> JSON {
        switch scanner.peekKind() {
        case .object:
            try scanner.beginObject()
            var object = JSONObject()
            while let key = try scanner.nextKey() { object[key] = try rebuild(&scanner) }
            return .object(object)
        case .array:
            try scanner.beginArray()
            var array: [JSON] = []
            while try scanner.nextElement() { array.append(try rebuild(&scanner)) }
            return .array(array)
        case .string:
            return .string(try scanner.readString())
        default:
            return try scanner.readValue()
        }
    }

    static func scanDocument(_ bytes: [UInt8], maxDepth: Int = 64) throws(JSONParseError) -> JSON {
        try bytes.withUnsafeBufferPointer { buffer throws(JSONParseError) in
            try JSONScanner.scan(buffer, maxDepth: maxDepth) { scanner throws(JSONParseError) in
                let value = try rebuild(&scanner)
                try scanner.finish()
                return value
            }
        }
    }

    @Test func walksAnObjectWithoutBuildingATree() throws {
        let bytes = Array(#" {"tenant": "acme", "n": [1, 2.5, true, null], "skip": {"x": [{}]}, "e": "a\nb"} "#.utf8)
        var tenant: String?
        var numbers: [JSON] = []
        var escaped: [UInt8] = []
        try bytes.withUnsafeBufferPointer { buffer throws(JSONParseError) in
            try JSONScanner.scan(buffer) { scanner throws(JSONParseError) in
                try scanner.beginObject()
                while let key = try scanner.nextKey({ String(decoding: $0, as: UTF8.self) }) {
                    switch key {
                    case "tenant": tenant = try scanner.readString()
                    case "n":
                        try scanner.beginArray()
                        while try scanner.nextElement() { numbers.append(try scanner.readValue()) }
                    case "e": escaped = try scanner.readString { Array($0) }
                    default: try scanner.skipValue()
                    }
                }
                try scanner.finish()
                let atEnd = scanner.isAtEnd()
                #expect(atEnd)
            }
        }
        #expect(tenant == "acme")
        #expect(numbers == [.int(1), .double(2.5), .bool(true), .null])
        #expect(escaped == Array("a\nb".utf8))
    }

    @Test func escapedKeysAreDecodedBeforeMatching() throws {
        let bytes = Array(#"{"ten\u0061nt":1}"#.utf8)
        let key = try bytes.withUnsafeBufferPointer { buffer throws(JSONParseError) in
            try JSONScanner.scan(buffer) { scanner throws(JSONParseError) in
                try scanner.beginObject()
                return try scanner.nextKey { String(decoding: $0, as: UTF8.self) }
            }
        }
        #expect(key == "tenant")
    }

    @Test(arguments: [
        (#"{"a":1,}"#, 7, "unexpected character '}', expected a member name string"),
        (#"{"a" 1}"#, 5, "expected ':' after member name"),
        (#"{"a":1 "b":2}"#, 7, "unexpected character '\"', expected ',' or '}'"),
        ("[1,]", 3, "unexpected character ']', expected a JSON value"),
        ("[1 2]", 3, "unexpected character '2', expected ',' or ']'"),
        (#"{"a":1"#, 6, "unterminated object"),
        ("[1", 2, "unterminated array"),
        ("{} x", 3, "unexpected character 'x' after the JSON value"),
        (#"{"a":"\ud800"}"#, 6, "lone high surrogate in \\u escape"),
    ])
    func rejectsWhatTheParserRejects(input: String, offset: Int, message: String) {
        #expect(throws: JSONParseError.self) { try JSON.parse(input) }
        do {
            _ = try Self.scanDocument(Array(input.utf8))
            Issue.record("accepted \(input)")
        } catch {
            #expect(error.offset == offset)
            #expect(error.message == message)
        }
    }

    @Test func typedReadsNameTheExpectedKind() {
        let bytes = Array(#"{"a": 5}"#.utf8)
        do {
            try bytes.withUnsafeBufferPointer { buffer throws(JSONParseError) in
                try JSONScanner.scan(buffer, record: 7) { scanner throws(JSONParseError) in
                    try scanner.beginObject()
                    _ = try scanner.nextKey()
                    _ = try scanner.readString()
                }
            }
            Issue.record("a number was read as a string")
        } catch {
            #expect(error.message == "expected a string value")
            #expect(error.offset == 6)
            #expect(error.record == 7)
        }
    }

    @Test func nestingIsBoundedLikeTheParser() {
        let deep = Array(repeating: UInt8(ascii: "["), count: 65) + Array(repeating: UInt8(ascii: "]"), count: 65)
        #expect(throws: JSONParseError.self) { try Self.scanDocument(deep) }
        let fine = Array(repeating: UInt8(ascii: "["), count: 64) + Array(repeating: UInt8(ascii: "]"), count: 64)
        #expect(throws: Never.self) { try Self.scanDocument(fine) }
    }

    /// Short decimals take a fast path that must round exactly like the general parser.
    @Test func shortNumbersDecodeExactlyLikeTheParser() throws {
        var rng = SeededGenerator(seed: 0xD0D0)
        var texts = [
            "0", "-0", "-0.0", "0.1", "0.3", "2.675", "812.5", "1e3", "123456789012345", "1234567890123456",
            "999999999999999.9", "0.000000000000001", "9007199254740993", "-12.25", "1.", "01", "-", "1.5E-3",
        ]
        for _ in 0..<20_000 {
            let integer = String(Int64.random(in: 0..<1_000_000_000, using: &rng))
            let fraction = String(Int64.random(in: 0..<1_000_000, using: &rng))
            let sign = Bool.random(using: &rng) ? "-" : ""
            texts.append(Bool.random(using: &rng) ? "\(sign)\(integer).\(fraction)" : "\(sign)\(integer)")
        }
        for text in texts {
            let parsed = Result { () throws(JSONParseError) in try JSON.parse(text) }
            let scanned = Result { () throws(JSONParseError) in try Self.scanDocument(Array(text.utf8)) }
            switch (parsed, scanned) {
            case (.success(let a), .success(let b)):
                #expect(a == b, "\(text)")
                if case .double(let x) = a, case .double(let y) = b { #expect(x.bitPattern == y.bitPattern, "\(text)") }
            case (.failure, .failure): break
            default: Issue.record("parser and scanner disagree on \(text)")
            }
        }
    }

    @Test func agreesWithTheParserOnRandomAndMutatedDocuments() throws {
        var rng = SeededGenerator(seed: 0x5CA7)
        let alphabet = Array("{}[]\",:.-+eE0123456789tfnul \\/\n".utf8) + [0x00, 0xFF, 0xC3, 0xED]
        for round in 0..<10_000 {
            var bytes = JSONFuzzTests.randomValue(&rng, depth: 0).serialized()
            if round % 2 == 1 {
                for _ in 0..<Int.random(in: 1...3, using: &rng) where !bytes.isEmpty {
                    let position = Int.random(in: 0..<bytes.count, using: &rng)
                    switch Int.random(in: 0..<3, using: &rng) {
                    case 0: bytes[position] = alphabet.randomElement(using: &rng)!
                    case 1: bytes.remove(at: position)
                    default: bytes.insert(alphabet.randomElement(using: &rng)!, at: position)
                    }
                }
            }
            let parsed = Result { () throws(JSONParseError) in try JSON.parse(bytes) }
            let scanned = Result { () throws(JSONParseError) in try Self.scanDocument(bytes) }
            switch (parsed, scanned) {
            case (.success(let a), .success(let b)): #expect(a == b)
            case (.failure, .failure): break
            default: Issue.record("parser and scanner disagree on \(String(decoding: bytes, as: UTF8.self))")
            }
        }
    }

    /// Strings are scanned eight bytes at a time and entered at the first special byte of a word:
    /// a quote, backslash, control byte or non-ASCII byte at every position of the first words must
    /// give the parser's result (value or error, with its offset).
    @Test func specialBytesAtEveryPositionOfAWord() {
        let specials: [[UInt8]] = [
            Array(#"\""#.utf8), Array(#"\\"#.utf8), Array(#"\u00e9"#.utf8), [0x1F], [0x7F], Array("é".utf8),
            [0xC3], [0xFF], [0x22],
        ]
        for length in 0..<20 {
            for position in 0...length {
                for special in specials {
                    var content = Array(repeating: UInt8(ascii: "a"), count: length)
                    content.insert(contentsOf: special, at: position)
                    let bytes = Array("{\"k\":\"".utf8) + content + Array("\",\"n\":1}".utf8)
                    let parsed = Result { () throws(JSONParseError) in try JSON.parse(bytes) }
                    let scanned = Result { () throws(JSONParseError) in try Self.scanDocument(bytes) }
                    switch (parsed, scanned) {
                    case (.success(let a), .success(let b)): #expect(a == b)
                    case (.failure(let a), .failure(let b)): #expect(a.offset == b.offset && a.message == b.message)
                    default: Issue.record("parser and scanner disagree on \(String(decoding: bytes, as: UTF8.self))")
                    }
                }
            }
        }
    }
}
