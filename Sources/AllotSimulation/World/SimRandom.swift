/// The simulator's only source of randomness: SplitMix64, seeded, so a run is a pure function of
/// its scenario, strategy and seed. Each component draws from its own stream
/// (``SimRandom/init(seed:stream:)``), so adding draws in one place does not shift another's.
public struct SimRandom: Sendable, Equatable {
    private var state: UInt64

    /// Each (seed, stream) starts at an unrelated point of the sequence: both are hashed (SplitMix64's own
    /// finaliser, a bijection). The state advances by a fixed increment each draw, so the linear seeding used
    /// until 2026-11-27 (`seed × increment + …`) made seed s + 1 exactly seed s one draw later: the tenants'
    /// arrivals of seeds 1 and 2 fell back into step after a few minutes, and the means over seeds 1–8 were
    /// nearly one draw's.
    public init(seed: UInt64, stream: UInt64 = 0) {
        state = Self.mix(Self.mix(seed &+ 0x2545_F491_4F6C_DD1D) ^ (stream &* 0xD1B5_4A32_D192_ED03))
        _ = next()
    }

    public mutating func next() -> UInt64 {
        state &+= Self.increment
        return Self.mix(state)
    }

    private static let increment: UInt64 = 0x9E37_79B9_7F4A_7C15

    private static func mix(_ value: UInt64) -> UInt64 {
        var z = value
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// Uniform in [0, 1).
    public mutating func unit() -> Double { Double(next() >> 11) * 0x1.0p-53 }

    /// Uniform integer in `range`.
    public mutating func int(in range: ClosedRange<Int>) -> Int {
        range.lowerBound + Int(next() % UInt64(range.count))
    }

    /// Exponential with the given mean.
    public mutating func exponential(mean: Double) -> Double {
        -mean * log1pNegative(unit())
    }

    /// Normal (Box–Muller).
    public mutating func normal(mean: Double, sd: Double) -> Double {
        guard sd > 0 else { return mean }
        let u1 = max(unit(), 1e-300)
        let u2 = unit()
        return mean + sd * (-2 * logarithm(u1)).squareRoot() * cosine(2 * Double.pi * u2)
    }

    public mutating func chance(_ probability: Double) -> Bool { probability > 0 && unit() < probability }
}

#if canImport(Glibc)
    import Glibc
    @inline(__always) func logarithm(_ x: Double) -> Double { Glibc.log(x) }
    @inline(__always) func cosine(_ x: Double) -> Double { Glibc.cos(x) }
    @inline(__always) func log1pNegative(_ x: Double) -> Double { Glibc.log1p(-x) }
#else
    import Foundation
    @inline(__always) func logarithm(_ x: Double) -> Double { Foundation.log(x) }
    @inline(__always) func cosine(_ x: Double) -> Double { Foundation.cos(x) }
    @inline(__always) func log1pNegative(_ x: Double) -> Double { Foundation.log1p(-x) }
#endif
