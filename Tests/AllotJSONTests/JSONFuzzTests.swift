import Testing

@testable import AllotJSON

/// A small deterministic generator (SplitMix64) so fuzz runs are repeatable.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

@Suite struct JSONFuzzTests {
    static func randomValue(_ rng: inout SeededGenerator, depth: Int) -> JSON {
        let pick = Int.random(in: 0..<(depth > 4 ? 5 : 7), using: &rng)
        switch pick {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &rng))
        case 2: return .int(Int64.random(in: Int64.min...Int64.max, using: &rng))
        case 3:
            let value = Double(bitPattern: rng.next())
            return value.isFinite ? .double(value) : .double(Double.random(in: -1e6...1e6, using: &rng))
        case 4:
            let scalars: [Unicode.Scalar] = ["a", "\"", "\\", "\n", "\u{0}", "é", "中", "😀", "\u{1f}", "/", " "]
            var string = ""
            for _ in 0..<Int.random(in: 0..<12, using: &rng) { string.unicodeScalars.append(scalars.randomElement(using: &rng)!) }
            return .string(string)
        case 5:
            return .array((0..<Int.random(in: 0..<5, using: &rng)).map { _ in randomValue(&rng, depth: depth + 1) })
        default:
            var object = JSONObject()
            for index in 0..<Int.random(in: 0..<5, using: &rng) {
                object["k\(index)\(Int.random(in: 0..<3, using: &rng))"] = randomValue(&rng, depth: depth + 1)
            }
            return .object(object)
        }
    }

    @Test func randomTreesRoundTrip() throws {
        var rng = SeededGenerator(seed: 0xA110_7)
        for _ in 0..<2_000 {
            let value = Self.randomValue(&rng, depth: 0)
            let bytes = value.serialized()
            let parsed = try JSON.parse(bytes)
            #expect(parsed == value)
            #expect(parsed.serialized() == bytes)
            #expect(try JSON.parse(value.serializedString(pretty: true)) == value)
        }
    }

    @Test func mutatedInputNeverCrashes() {
        var rng = SeededGenerator(seed: 42)
        let alphabet = Array("{}[]\",:.-+eE0123456789tfnul \\/\n".utf8) + [0x00, 0xFF, 0xC3, 0xED]
        var accepted = 0
        for _ in 0..<20_000 {
            var bytes = Self.randomValue(&rng, depth: 0).serialized()
            for _ in 0..<Int.random(in: 1...4, using: &rng) {
                guard !bytes.isEmpty else { break }
                let position = Int.random(in: 0..<bytes.count, using: &rng)
                switch Int.random(in: 0..<3, using: &rng) {
                case 0: bytes[position] = alphabet.randomElement(using: &rng)!
                case 1: bytes.remove(at: position)
                default: bytes.insert(alphabet.randomElement(using: &rng)!, at: position)
                }
            }
            do {
                let value = try JSON.parse(bytes)
                // Whatever parses must serialize to something that parses to the same value.
                #expect(try JSON.parse(value.serialized()) == value)
                accepted += 1
            } catch {
                #expect(error.offset >= 0 && error.offset <= bytes.count)
                #expect(!error.message.isEmpty)
            }
        }
        #expect(accepted > 0)
    }
}

@Suite struct UTF8ValidationTests {
    /// Our validator must agree with the standard library's on every input.
    @Test func agreesWithStandardLibrary() {
        var rng = SeededGenerator(seed: 7)
        let interesting: [UInt8] = [0x00, 0x41, 0x7F, 0x80, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xA0, 0x9F, 0xED, 0xEF,
                                    0xF0, 0x90, 0x8F, 0xF4, 0xF5, 0xFF]
        for _ in 0..<50_000 {
            let length = Int.random(in: 0..<6, using: &rng)
            let bytes = (0..<length).map { _ in
                Bool.random(using: &rng) ? interesting.randomElement(using: &rng)! : UInt8.random(in: 0...255, using: &rng)
            }
            let ours = bytes.withUnsafeBufferPointer { UTF8Validation.isValid($0) }
            #expect(ours == (String(validating: bytes, as: UTF8.self) != nil), "bytes: \(bytes)")
        }
    }
}
