import AllotCore
import AllotLoop
import Foundation
import Testing

@Suite struct StateCodecTests {
    struct Inner: Codable, Equatable {
        var name: String
        var weights: [Double]
        var optional: Int?
    }

    enum Mode: String, Codable { case fast, slow }

    struct Outer: Codable, Equatable {
        var id: Int64
        var count: UInt64
        var small: Int8
        var flag: Bool
        var mode: Mode
        var nothing: String?
        var something: String?
        var inner: Inner
        var list: [Inner]
        var nested: [[Int]]
        var byName: [String: Inner]
        var byKey: [AllocationKey: PerDimension<Double>]
        var byWindow: [BudgetWindow: Double]
        var empty: [String]
        var emptyMap: [String: Int]
    }

    static func sample(entries: Int) -> Outer {
        Outer(
            id: .min, count: .max, small: -128, flag: true, mode: .slow, nothing: nil, something: "é ✓ \u{0}",
            inner: Inner(
                name: "", weights: [0, -0.0, 1.5, .greatestFiniteMagnitude, .leastNonzeroMagnitude], optional: 7),
            list: (0..<3).map { Inner(name: "n\($0)", weights: [Double($0)], optional: $0 == 1 ? nil : $0) },
            nested: [[], [1], [2, 3]],
            byName: Dictionary(
                uniqueKeysWithValues: (0..<entries).map {
                    ("tenant-\($0)", Inner(name: "t", weights: [], optional: nil))
                }
            ),
            byKey: [
                AllocationKey(tenant: "a", upstream: "u"): PerDimension(rpm: 1, tpm: 2),
                AllocationKey(tenant: "b", upstream: "u"): PerDimension(rpm: .infinity, tpm: -.infinity),
            ],
            byWindow: [.hour: 1.25, .month: 99], empty: [], emptyMap: [:])
    }

    @Test(arguments: [0, 5, 40])
    func roundTripsEveryShape(entries: Int) throws {
        let value = Self.sample(entries: entries)
        let bytes = try StateCodec.encode(value)
        #expect(try StateCodec.decode(Outer.self, from: bytes, component: "test") == value)
    }

    /// SIMD vectors (the observer's per-slice outcome counters) decode only when the unkeyed
    /// container reports its element count.
    @Test func simdVectorsAndEmptyArraysRoundTrip() throws {
        struct Counters: Codable, Equatable {
            var outcomes: SIMD8<Int32>
            var empty: [SIMD4<Double>]
            var nested: [[Int]]
        }
        let value = Counters(
            outcomes: SIMD8(1, -2, 3, 4, 5, 6, 7, Int32.max), empty: [], nested: [[], [1, 2], [3]])
        let bytes = try StateCodec.encode(value)
        #expect(try StateCodec.decode(Counters.self, from: bytes, component: "test") == value)
        let wrong = try StateCodec.encode(["outcomes": [1, 2, 3]])
        #expect(throws: LoopStateError.self) { try StateCodec.decode(Counters.self, from: wrong, component: "test") }
    }

    @Test func nanAndTheSignOfZeroSurvive() throws {
        let bytes = try StateCodec.encode([Double.nan, -0.0, Double.signalingNaN])
        let decoded = try StateCodec.decode([Double].self, from: bytes, component: "test")
        #expect(decoded[0].isNaN)
        #expect(decoded[1].bitPattern == (-0.0).bitPattern)
        #expect(decoded[2].isNaN)
    }

    @Test func typeAndKeyErrorsNameTheComponent() throws {
        let bytes = try StateCodec.encode(Inner(name: "x", weights: [1], optional: nil))
        #expect(throws: LoopStateError.self) { try StateCodec.decode(Outer.self, from: bytes, component: "engine") }
        do {
            _ = try StateCodec.decode([Int].self, from: bytes, component: "engine")
            Issue.record("expected an error")
        } catch {
            #expect(error.component == "engine")
        }
        // An integer that does not fit is an error, not a trap.
        let big = try StateCodec.encode(Int64.max)
        #expect(throws: LoopStateError.self) { try StateCodec.decode(Int8.self, from: big, component: "x") }
    }

    @Test func damagedBytesNeverTrap() throws {
        let bytes = try StateCodec.encode(Self.sample(entries: 20))
        #expect(throws: LoopStateError.self) { try StateCodec.decode(Outer.self, from: [], component: "x") }
        #expect(throws: LoopStateError.self) {
            try StateCodec.decode(Outer.self, from: Array("{\"json\":1}".utf8), component: "x")
        }
        for cut in stride(from: 4, to: bytes.count, by: 7) {
            #expect(throws: LoopStateError.self) {
                try StateCodec.decode(Outer.self, from: Array(bytes.prefix(cut)), component: "x")
            }
        }
        var random = SeededGenerator(seed: 11)
        for _ in 0..<2000 {
            var damaged = bytes
            for _ in 0..<Int.random(in: 1...4, using: &random) {
                damaged[Int.random(in: 4..<damaged.count, using: &random)] = UInt8.random(in: 0...255, using: &random)
            }
            _ = try? StateCodec.decode(Outer.self, from: damaged, component: "x")
        }
    }

    @Test func engineStateRoundTripsAfterRealDecisions() throws {
        var state = EngineState()
        let policy = loopPolicy()
        for tick in 0..<5 {
            _ = PolicyEngine.decide(
                DecisionInput(
                    now: 1_800_000_000 + Double(tick) * 5, policy: policy,
                    tenants: (0..<30).map {
                        TenantObservation(
                            tenant: "t\($0)", upstream: pool4o,
                            demand: PerDimension(rpm: Double($0 + tick), tpm: 1000))
                    }), state: &state)
        }
        let bytes = try StateCodec.encode(state)
        #expect(try StateCodec.decode(EngineState.self, from: bytes, component: "engine") == state)
    }
}
