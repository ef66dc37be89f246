import Testing

@testable import AllotSimulation

@Suite("Simulator randomness")
struct SimRandomTests {
    /// Seeds and streams are independent draws: no generator's first draws reappear in another's. With the
    /// linear seeding, seed 2 was seed 1 one draw later (its first 999 draws were seed 1's draws 2–1,000), so the
    /// runs of seeds 1–8 were nearly one run.
    @Test func seedsAndStreamsDrawUnrelatedSequences() {
        var seen: [UInt64: (seed: UInt64, stream: UInt64)] = [:]
        for seed: UInt64 in 1...8 {
            for stream: UInt64 in [0, 0x7E7E, 0x1000_0000, 0x1000_0001, 0x2000_0000, 0x5550_0000] {
                var random = SimRandom(seed: seed, stream: stream)
                for _ in 0..<1_000 {
                    let value = random.next()
                    if let other = seen[value] {
                        Issue.record(
                            "seed \(seed) stream \(stream) repeats a draw of seed \(other.seed) stream \(other.stream)")
                        return
                    }
                    seen[value] = (seed, stream)
                }
            }
        }
        #expect(seen.count == 48_000)
    }

    @Test func aSeedAndStreamAlwaysDrawTheSameSequence() {
        var first = SimRandom(seed: 7, stream: 3)
        var second = SimRandom(seed: 7, stream: 3)
        for _ in 0..<100 { #expect(first.next() == second.next()) }
        #expect(SimRandom(seed: 7, stream: 3) == SimRandom(seed: 7, stream: 3))
        #expect(SimRandom(seed: 7, stream: 3) != SimRandom(seed: 8, stream: 3))
    }

    /// A token shape's mean is that of its draws as the run makes them (normal, rounded, at least 1): the
    /// nominal mean when the spread is small, more when the clamp at 1 cuts off a wide spread's lower tail.
    @Test func aTokenShapesExpectedValueIsTheMeanOfItsDraws() {
        func drawn(_ shape: TokenShape) -> Double {
            var random = SimRandom(seed: 11)
            let count = 200_000
            var sum = 0.0
            for _ in 0..<count { sum += Double(max(1, Int(random.normal(mean: shape.mean, sd: shape.sd).rounded()))) }
            return sum / Double(count)
        }
        let wide = TokenShape(mean: 2_000, sd: 6_000)
        #expect(abs(wide.expected - 3_526) < 1)
        #expect(abs(drawn(wide) - wide.expected) < 0.01 * wide.expected)
        let narrow = TokenShape(mean: 900, sd: 180)
        #expect(abs(narrow.expected - 900) < 1e-4)
        #expect(abs(drawn(narrow) - 900) < 2)
        #expect(TokenShape(mean: 0.2, sd: 0).expected == 1)
    }
}
