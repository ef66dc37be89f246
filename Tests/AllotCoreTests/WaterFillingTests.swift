import Testing

@testable import AllotCore

@Suite("Water-filling (SPEC 6.2)")
struct WaterFillingTests {
    @Test func equalWeightsShareEqually() {
        let result = WaterFilling.fill(
            capacity: 90, weights: [1, 1, 1], lower: [0, 0, 0], upper: [.infinity, .infinity, .infinity])
        #expect(result.allocations == [30, 30, 30])
        #expect(result.level == 30)
    }

    @Test func unequalWeightsShareByWeight() {
        let result = WaterFilling.fill(capacity: 100, weights: [1, 3], lower: [0, 0], upper: [.infinity, .infinity])
        #expect(result.allocations == [25, 75])
        #expect(result.level == 25)
    }

    @Test func bindingFloorRaisesOneAndTheOthersShareTheRest() {
        let result = WaterFilling.fill(
            capacity: 100, weights: [1, 1, 1], lower: [50, 0, 0], upper: [.infinity, .infinity, .infinity])
        #expect(result.allocations == [50, 25, 25])
        #expect(result.level == 25)
    }

    @Test func bindingCeilingHandsItsShareToTheOthers() {
        let result = WaterFilling.fill(
            capacity: 100, weights: [1, 1, 1], lower: [0, 0, 0], upper: [10, .infinity, .infinity])
        #expect(result.allocations == [10, 45, 45])
        #expect(result.level == 45)
    }

    @Test func everyoneSatisfiedGivesTheSmallestSatisfyingLevel() {
        let result = WaterFilling.fill(capacity: 100, weights: [1, 2, 1], lower: [0, 0, 5], upper: [10, 20, 5])
        #expect(result.allocations == [10, 20, 5])
        // Tenant 2 has no room (lo = hi), so only 10/1 and 20/2 count.
        #expect(result.level == 10)
    }

    @Test func zeroCapacityGivesZero() {
        let result = WaterFilling.fill(capacity: 0, weights: [1, 2], lower: [0, 0], upper: [5, .infinity])
        #expect(result.allocations == [0, 0])
        #expect(result.level == 0)
    }

    @Test func floorsUsingEverythingGiveFloors() {
        let result = WaterFilling.fill(capacity: 30, weights: [1, 1], lower: [10, 20], upper: [50, 50])
        #expect(result.allocations == [10, 20])
        #expect(result.level == 0)
    }

    @Test func oneTenantTakesAll() {
        let result = WaterFilling.fill(capacity: 50, weights: [3], lower: [0], upper: [.infinity])
        #expect(result.allocations == [50])
        #expect(result.level == 50.0 / 3)
    }

    @Test func noTenants() {
        let result = WaterFilling.fill(capacity: 50, weights: [], lower: [], upper: [])
        #expect(result.allocations.isEmpty)
        #expect(result.level == 0)
    }

    @Test func equalBreakpointsAreProcessedTogether() {
        // Four identical tenants whose breakpoints coincide, plus one that is capped at the same level.
        let result = WaterFilling.fill(
            capacity: 120, weights: [1, 1, 1, 1, 2], lower: [10, 10, 10, 10, 20], upper: [30, 30, 30, 30, 60])
        #expect(result.allocations == [20, 20, 20, 20, 40])
        #expect(result.level == 20)
    }

    @Test func extremeWeightsStayFiniteAndWithinCapacity() {
        let result = WaterFilling.fill(
            capacity: 100, weights: [1e-200, 1e200, 1], lower: [0, 0, 1], upper: [.infinity, .infinity, .infinity])
        #expect(result.allocations.allSatisfy { $0.isFinite && $0 >= 0 })
        #expect(result.allocations.reduce(0, +) <= 100)
        #expect(result.allocations[2] == 1)
        #expect(abs(result.allocations[1] - 99) < 1e-9)
    }

    @Test func infiniteUpperBoundsWithAFiniteOne() {
        let result = WaterFilling.fill(capacity: 10, weights: [1, 1], lower: [0, 0], upper: [2, .infinity])
        #expect(result.allocations == [2, 8])
        #expect(result.level == 8)
    }

    // MARK: Properties

    /// A random instance: n tenants with weights over many orders of magnitude, some floors, some
    /// ceilings, some infinite upper bounds.
    private static func instance(_ random: inout SeededRandom) -> (c: Double, w: [Double], lo: [Double], hi: [Double]) {
        let count = Int.random(in: 1...12, using: &random)
        var weights: [Double] = []
        var lower: [Double] = []
        var upper: [Double] = []
        for _ in 0..<count {
            weights.append(random.chance(0.3) ? 1 : random.logUniform(1e-3, 1e3))
            let lo = random.chance(0.5) ? 0 : random.uniform(0...50)
            lower.append(lo)
            upper.append(random.chance(0.2) ? .infinity : lo + (random.chance(0.1) ? 0 : random.uniform(0...200)))
        }
        let sumLower = lower.reduce(0, +)
        let capacity = sumLower + (random.chance(0.1) ? 0 : random.uniform(0...600))
        return (capacity, weights, lower, upper)
    }

    @Test func randomInstancesAreFeasibleEfficientAndMaxMinFair() {
        var random = SeededRandom(seed: 0xA110_7001)
        for _ in 0..<5000 {
            let (capacity, weights, lower, upper) = Self.instance(&random)
            let result = WaterFilling.fill(capacity: capacity, weights: weights, lower: lower, upper: upper)
            let x = result.allocations
            let total = x.reduce(0, +)
            #expect(total <= capacity)
            let goal = min(capacity, upper.reduce(0, +))
            #expect(abs(total - goal) <= 1e-9 * max(1, goal))
            for i in x.indices {
                #expect(x[i] >= lower[i] && x[i] <= upper[i] + 1e-12)
            }
            // Max-min optimality: a tenant below its upper bound cannot be raised without lowering one
            // above its lower bound whose allocation per weight is not larger.
            for i in x.indices where x[i] < upper[i] - 1e-9 * max(1, upper[i]) {
                for j in x.indices where j != i && x[j] > lower[j] + 1e-9 * max(1, lower[j]) {
                    #expect(x[j] / weights[j] <= x[i] / weights[i] * (1 + 1e-9) + 1e-12)
                }
            }
        }
    }

    @Test func largeInstancesSatisfyTheDefinition() {
        // Many rounds of bracketing: x_i = clamp(f · w_i, lo_i, hi_i) with Σ x = min(C, Σ hi).
        var random = SeededRandom(seed: 0xA110_7006)
        for _ in 0..<60 {
            let count = Int.random(in: 100...3000, using: &random)
            var weights: [Double] = []
            var lower: [Double] = []
            var upper: [Double] = []
            for _ in 0..<count {
                weights.append(Double(Int.random(in: 1...8, using: &random)))
                let lo = random.chance(0.7) ? 0 : random.uniform(0...5)
                lower.append(lo)
                upper.append(random.chance(0.1) ? .infinity : lo + random.logUniform(0.01, 500))
            }
            let capacity = lower.reduce(0, +) + random.uniform(0...Double(count) * 40)
            let result = WaterFilling.fill(capacity: capacity, weights: weights, lower: lower, upper: upper)
            let goal = min(capacity, upper.reduce(0, +))
            let total = result.allocations.reduce(0, +)
            #expect(total <= capacity)
            #expect(abs(total - goal) <= 1e-9 * goal)
            for i in 0..<count {
                let expected = min(max(result.level * weights[i], lower[i]), upper[i])
                #expect(abs(result.allocations[i] - expected) <= 1e-9 * max(1, expected))
            }
        }
    }

    @Test func raisingCapacityNeverLowersAnyone() {
        var random = SeededRandom(seed: 0xA110_7002)
        for _ in 0..<3000 {
            let (capacity, weights, lower, upper) = Self.instance(&random)
            let before = WaterFilling.fill(capacity: capacity, weights: weights, lower: lower, upper: upper)
            let more = capacity + random.uniform(0...100)
            let after = WaterFilling.fill(capacity: more, weights: weights, lower: lower, upper: upper)
            for i in weights.indices {
                #expect(after.allocations[i] >= before.allocations[i] * (1 - 1e-12) - 1e-12)
            }
        }
    }
}
