import Testing

@testable import AllotCore

@Suite("Pool allocation: fair share, surplus, idle, degraded mode (SPEC 6.1–6.4)")
struct PoolAllocationTests {
    private static let bare = AllocationSettings(safetyMargin: 0, demandHeadroom: 0, surplus: .hold, burstReserve: 0)

    private static func compute(
        _ capacity: Double, _ claims: [AllocationClaim], settings: AllocationSettings = bare
    ) -> PoolAllocation {
        PoolAllocation.compute(capacityEstimate: capacity, settings: settings, claims: claims)
    }

    @Test func equalWeightsGetFairShares() {
        let result = Self.compute(90, [AllocationClaim(), AllocationClaim(), AllocationClaim()])
        #expect(result.allocations == [30, 30, 30])
        #expect(result.reasons == [.fairShare, .fairShare, .fairShare])
        #expect(result.level == 30)
        #expect(result.unallocated == 0)
        #expect(!result.degraded)
    }

    @Test func safetyMarginShrinksCapacity() {
        var settings = Self.bare
        settings.safetyMargin = 0.1
        let result = Self.compute(100, [AllocationClaim(), AllocationClaim(weight: 2)], settings: settings)
        #expect(result.capacity == 90)
        #expect(result.allocations == [30, 60])
    }

    @Test func floorsAndCeilingsBind() {
        let result = Self.compute(
            100,
            [AllocationClaim(floor: 50), AllocationClaim(ceiling: 10), AllocationClaim(), AllocationClaim()])
        // Tenant 0 holds its floor 50; tenant 1 is capped at 10; the other two share 40.
        #expect(result.allocations == [50, 10, 20, 20])
        #expect(result.reasons == [.floor, .ceiling, .fairShare, .fairShare])
        #expect(result.level == 20)
    }

    /// A floor that resolves above the ceiling (263 rpm against "20%" of C = 980, 196 rpm: only known at run time)
    /// wins: `hi = max(lo, min(ce, …))`, and no surplus goes above it (policies/README.md, *Floor above ceiling*).
    /// In degraded mode the floor is honoured up to the ceiling first, its remainder only once every demand is met.
    @Test func aFloorAboveTheCeilingWins() {
        var settings = Self.bare
        settings.surplus = .distribute
        let claims = [AllocationClaim(floor: 263, ceiling: 196, demand: 1000), AllocationClaim(demand: 100)]
        let result = Self.compute(980, claims, settings: settings)
        #expect(result.allocations == [263, 717])
        #expect(result.reasons == [.floor, .surplus])
        let degraded = Self.compute(250, claims, settings: settings)
        #expect(degraded.degraded)
        #expect(degraded.allocations == [196, 54])
    }

    @Test func demandBelowFairShareIsMetAndTheRestShared() {
        var settings = Self.bare
        settings.demandHeadroom = 0.2
        let result = Self.compute(
            100, [AllocationClaim(demand: 10), AllocationClaim(demand: 500), AllocationClaim(demand: 500)],
            settings: settings)
        // hi_0 = 10 · 1.2 = 12; the others split 88.
        #expect(result.allocations == [12, 44, 44])
        #expect(result.reasons == [.demand, .fairShare, .fairShare])
        #expect(result.upperBounds[0] == 12)
    }

    @Test func aTenantsSwingRaisesItsUpperBound() {
        var settings = Self.bare
        settings.demandHeadroom = 0.2
        settings.demandDeviations = 2
        // Tenant 0 swings by 20 a minute around 100: two deviations (40) exceed its headroom (20) by 20, and
        // the pool's total swing (2 · √(20² + 5²) ≈ 41.2) covers that in full: hi_0 = 120 + 20. Tenant 1's
        // swing (2 · 5) is within its headroom (20): hi_1 = 120. The insatiable tenant takes the rest.
        let claims = [
            AllocationClaim(demand: 100, spread: 20), AllocationClaim(demand: 100, spread: 5),
            AllocationClaim(demand: .infinity),
        ]
        let result = Self.compute(1000, claims, settings: settings)
        #expect(result.upperBounds[0] == 140)
        #expect(result.upperBounds[1] == 120)
        #expect(result.allocations == [140, 120, 740])
        #expect(result.reasons == [.demand, .demand, .fairShare])

        // Off: SPEC 6.1's formula exactly.
        settings.demandDeviations = 0
        let plain = Self.compute(1000, claims, settings: settings)
        #expect(plain.allocations == [120, 120, 760])
    }

    @Test func manySmallSwingsArePooled() {
        var settings = Self.bare
        settings.demandHeadroom = 0.2
        settings.demandDeviations = 2
        // Four tenants at 10 a minute, each swinging by 10: each asks 2 · 10 − 2 = 18 beyond its headroom, 72 in
        // all, but their total swings by only √(4 · 10²) = 20, so the pool gives 2 · 20 = 40 of the 72: each
        // gets 12 + 18 · 40/72 = 22, and the tenant above its fair share keeps 100 − 88 = 12 instead of 28.
        let small = AllocationClaim(demand: 10, spread: 10)
        let result = Self.compute(
            100, [small, small, small, small, AllocationClaim(weight: 0.5, demand: .infinity)], settings: settings)
        for index in 0..<4 { #expect(abs(result.allocations[index] - 22) < 1e-9) }
        #expect(abs(result.allocations[4] - 12) < 1e-9)
        #expect(result.reasons == [.demand, .demand, .demand, .demand, .fairShare])
        // An idle tenant's swing counts for nothing.
        var idle = AllocationClaim(demand: 0, isIdle: true, idleAllocation: 1)
        idle.spread = 50
        let withIdle = Self.compute(
            101, [small, small, small, small, AllocationClaim(weight: 0.5, demand: .infinity), idle],
            settings: settings)
        #expect(abs(withIdle.allocations[0] - 22) < 1e-9)
        #expect(withIdle.allocations[5] == 1)
    }

    @Test func floorAboveDemandIsStillHeld() {
        let result = Self.compute(100, [AllocationClaim(floor: 20, demand: 5), AllocationClaim(demand: 30)])
        #expect(result.allocations == [20, 30])
        #expect(result.reasons == [.floor, .demand])
        #expect(result.unallocated == 50)
    }

    @Test func surplusHoldVersusDistribute() {
        let claims = [AllocationClaim(demand: 10), AllocationClaim(weight: 2, demand: 20)]
        let held = Self.compute(100, claims)
        #expect(held.allocations == [10, 20])
        #expect(held.reasons == [.demand, .demand])
        #expect(held.level == 10)
        #expect(held.unallocated == 70)
        #expect(held.surplusLevel == nil)

        var settings = Self.bare
        settings.surplus = .distribute
        let shared = Self.compute(100, claims, settings: settings)
        // Surplus 70 by weight on top of the met demand: both end at level 100/3.
        #expect(abs(shared.allocations[0] - 100.0 / 3) < 1e-12)
        #expect(abs(shared.allocations[1] - 200.0 / 3) < 1e-12)
        #expect(shared.reasons == [.surplus, .surplus])
        #expect(shared.level == 10)
        #expect(shared.allocatedTotal <= 100)

        settings.burstReserve = 0.1
        let reserved = Self.compute(100, claims, settings: settings)
        // 10 % of the surplus (7) is held back for burst credits; 63 is distributed.
        #expect(reserved.allocations == [31, 62])
        #expect(reserved.burstReserve == 7)
        #expect(reserved.unallocated == 7)
    }

    @Test func surplusRespectsCeilingsGuardMaxAndDebt() {
        var settings = Self.bare
        settings.surplus = .distribute
        let result = Self.compute(
            100,
            [
                AllocationClaim(ceiling: 15, demand: 10),
                AllocationClaim(demand: 10, guardMax: 20),
                AllocationClaim(demand: 10, receivesSurplus: false),
                AllocationClaim(demand: 10),
            ], settings: settings)
        #expect(result.allocations == [15, 20, 10, 55])
        #expect(result.reasons == [.surplus, .surplus, .demand, .surplus])
        #expect(result.guardClamped == [false, false, false, false])
    }

    @Test func idleTenantsTakeTheirIdleAllocationFirst() {
        let result = Self.compute(
            100, [AllocationClaim(isIdle: true, idleAllocation: 4), AllocationClaim(), AllocationClaim(weight: 3)])
        #expect(result.allocations == [4, 24, 72])
        #expect(result.reasons == [.idle, .fairShare, .fairShare])
        #expect(result.idleTotal == 4)
    }

    /// A ceiling is the most a tenant holds, idle or not: an idle allocation above it is cut to it, and so is one
    /// above its budget cap (outside evaluation round 34: an idle free tenant published at 30 under a ceiling of 10).
    @Test func anIdleAllocationStaysWithinTheCeiling() {
        var settings = Self.bare
        settings.idleShare = 1
        let result = Self.compute(
            100,
            [
                AllocationClaim(ceiling: 10, isIdle: true, idleAllocation: 30),
                AllocationClaim(isIdle: true, idleAllocation: 30, budgetCap: 5),
                AllocationClaim(isIdle: true, idleAllocation: 30, guardMax: 7), AllocationClaim(),
            ], settings: settings)
        #expect(result.allocations == [10, 5, 7, 78])
        #expect(result.reasons == [.idle, .idle, .idle, .fairShare])
        #expect(result.idleTotal == 22)
    }

    @Test func idleAllocationsAboveCapacityAreScaled() {
        var settings = Self.bare
        settings.idleShare = 1
        let result = Self.compute(
            6,
            [
                AllocationClaim(isIdle: true, idleAllocation: 4), AllocationClaim(isIdle: true, idleAllocation: 8),
                AllocationClaim(),
            ], settings: settings)
        #expect(result.allocations == [2, 4, 0])
    }

    @Test func idleAllocationsTakeAtMostTheIdleShareTogether() {
        let claims = [
            AllocationClaim(isIdle: true, idleAllocation: 8), AllocationClaim(isIdle: true, idleAllocation: 12),
            AllocationClaim(),
        ]
        // 20 of 100 wanted by idle tenants; the default idle_share (a tenth) scales them to 4 and 6.
        let result = Self.compute(100, claims)
        #expect(result.allocations == [4, 6, 90])
        #expect(result.idleTotal == 10)
        #expect(result.reasons == [.idle, .idle, .fairShare])
        // At 1 they keep all of it (SPEC 6.1: taken from C first).
        var settings = Self.bare
        settings.idleShare = 1
        #expect(Self.compute(100, claims, settings: settings).allocations == [8, 12, 80])
    }

    @Test func degradedModeHonoursFloorsTierByTier() {
        let claims = [
            AllocationClaim(floor: 60, starvationGuard: 5, rank: 0),
            AllocationClaim(floor: 40, starvationGuard: 5, rank: 0),
            AllocationClaim(floor: 50, starvationGuard: 5, rank: 1),
            AllocationClaim(floor: 30, starvationGuard: 5, rank: 2),
        ]
        // Σ lo = 180 > 150: guards 20, then rank 0 in full (90 more), rank 1 gets the last 40.
        let result = Self.compute(150, claims)
        #expect(result.degraded)
        #expect(result.allocations == [60, 40, 45, 5])
        #expect(result.reasons == [.degraded, .degraded, .degraded, .degraded])
        #expect(result.level == 0)

        // Capacity runs out inside rank 0: it shares the 80 left over in proportion to its floors (SPEC 6.4),
        // 48 and 32 on top of the guards.
        let tight = Self.compute(100, claims)
        #expect(abs(tight.allocations[0] - 53) < 1e-12)
        #expect(abs(tight.allocations[1] - 37) < 1e-12)
        #expect(Array(tight.allocations[2...]) == [5, 5])
        #expect(tight.allocatedTotal <= 100)
    }

    /// In proportion to the floors, none beyond what it lacks: equal floors of 80, one tenant asking for 30,
    /// share the 80 left above the guards as 60 and 20 (round 13: shared by what each lacked, 70 and 20, they
    /// got 62.2 and 17.8 — the one asking for less got less than its demand though its floor was as large).
    @Test func theRankWhereCapacityRunsOutSharesInProportionToItsFloors() {
        let claims = [
            AllocationClaim(floor: 80, demand: 1000, starvationGuard: 10, rank: 0),
            AllocationClaim(floor: 80, demand: 30, starvationGuard: 10, rank: 0),
        ]
        let result = Self.compute(100, claims)
        #expect(result.degraded)
        for (value, want) in zip(result.allocations, [70.0, 30]) { #expect(abs(value - want) < 1e-9) }
        // Unequal floors of 30 and 10, guards of 5: the 18 left go 13.5 and 4.5.
        let unequal = Self.compute(
            28,
            [
                AllocationClaim(floor: 30, demand: 1000, starvationGuard: 5, rank: 0),
                AllocationClaim(floor: 10, demand: 1000, starvationGuard: 5, rank: 0),
            ])
        for (value, want) in zip(unequal.allocations, [18.5, 9.5]) { #expect(abs(value - want) < 1e-9) }
    }

    /// Two upper-tier tenants with floors of 40 and two lower-tier tenants without, guards of 1, asking
    /// for `demands` in that order.
    private static func floorsOfForty(demands: [Double]) -> [AllocationClaim] {
        demands.enumerated().map { index, demand in
            AllocationClaim(floor: index < 2 ? 40 : 0, demand: demand, starvationGuard: 1, rank: index < 2 ? 0 : 1)
        }
    }

    @Test func degradedModeHonoursAFloorUpToWhatItsTenantAsksFor() {
        // Two upper-tier tenants hold floors of 40 and ask for 10 and 50; two lower-tier tenants ask for
        // 30 each. Σ lo = 80 > 70: degraded. Guards 4; rank 0's floors up to demand, 10 and 40 (48 more);
        // the 18 left by weight over those values, up to demand: 10 + 40 + 2·f = 70 at f = 10.
        let result = Self.compute(70, Self.floorsOfForty(demands: [10, 50, 30, 30]))
        #expect(result.degraded)
        #expect(result.allocations == [10, 40, 10, 10])
        #expect(result.reasons == [.degraded, .degraded, .degraded, .degraded])

        // With every demand above the floors nothing changes: rank 0 shares the 66 above the guards in
        // proportion to its floors above them, the lower tier stays at its guard.
        #expect(Self.compute(70, Self.floorsOfForty(demands: [100, 100, 100, 100])).allocations == [34, 34, 1, 1])
    }

    @Test func degradedModeGivesTheFloorsAboveDemandWhatIsLeftOnceEveryDemandIsMet() {
        // Σ lo = 80 > 60 but the demand is 40: guards 4; floors up to demand, [10, 20, 1, 1]; demand,
        // [10, 20, 5, 5]; the 20 left goes to rank 0's floors above demand (30 and 20 lacking) in proportion
        // to the floors, 40 and 40: 10 each.
        let result = Self.compute(60, Self.floorsOfForty(demands: [10, 20, 5, 5]))
        #expect(result.degraded)
        let expected = [20.0, 30, 5, 5]
        for (value, want) in zip(result.allocations, expected) { #expect(abs(value - want) < 1e-9) }
    }

    @Test func degradedModeScalesGuardsThatExceedCapacity() {
        let claims = (0..<4).map { _ in AllocationClaim(floor: 10, starvationGuard: 5) }
        let result = Self.compute(10, claims)
        #expect(result.degraded)
        #expect(result.allocations == [2.5, 2.5, 2.5, 2.5])
    }

    @Test func guardrailsClampAndKeepTheUnclampedValue() {
        // Fair shares would be 100/3 each; tenant 0 may not exceed 30 and tenant 1 may not be squeezed below 40.
        let result = Self.compute(
            100, [AllocationClaim(guardMax: 30), AllocationClaim(guardMin: 40), AllocationClaim()])
        #expect(result.unclamped.map { ($0 * 3).rounded() } == [100, 100, 100])
        #expect(result.allocations == [30, 40, 30])
        #expect(result.guardClamped == [true, true, false])
        #expect(result.reasons == [.guardrailClamped, .guardrailClamped, .fairShare])
    }

    @Test func guardMinDoesNotHoldCapacityATenantDoesNotWant() {
        let result = Self.compute(100, [AllocationClaim(demand: 10, guardMin: 20), AllocationClaim(demand: 40)])
        #expect(result.allocations == [10, 40])
        #expect(result.guardClamped == [false, false])
        #expect(result.reasons == [.demand, .demand])
    }

    @Test func infeasibleGuardMinsYieldToCapacity() {
        // Two tenants each guarded at 60 of 100: the guards cannot all hold, so neither is clamped.
        let result = Self.compute(100, [AllocationClaim(guardMin: 60), AllocationClaim(guardMin: 60)])
        #expect(result.allocations == [50, 50])
        #expect(result.guardClamped == [false, false])
    }

    @Test func budgetCapBindsOverFloor() {
        let result = Self.compute(100, [AllocationClaim(floor: 40, budgetCap: 15), AllocationClaim()])
        #expect(result.allocations == [15, 85])
        #expect(result.reasons == [.budget, .fairShare])
    }

    @Test func zeroCapacity() {
        let result = Self.compute(0, [AllocationClaim(), AllocationClaim(demand: 3)])
        #expect(result.allocations == [0, 0])
        #expect(!result.degraded)
    }

    // MARK: Properties

    private static func randomClaims(_ random: inout SeededRandom, count: Int, ranks: Int) -> [AllocationClaim] {
        (0..<count).map { _ in
            let floor = random.chance(0.4) ? 0 : random.uniform(0...40)
            return AllocationClaim(
                weight: random.chance(0.3) ? 1 : random.logUniform(0.01, 100),
                floor: floor,
                ceiling: random.chance(0.5) ? .infinity : floor + random.uniform(0...150),
                demand: random.chance(0.2) ? .infinity : random.uniform(0...200),
                starvationGuard: random.uniform(0.1...3),
                rank: Int.random(in: 0..<ranks, using: &random),
                isIdle: random.chance(0.1),
                idleAllocation: random.uniform(0...2))
        }
    }

    @Test func randomPoolsNeverExceedCapacityAndRespectBounds() {
        var random = SeededRandom(seed: 0xA110_7003)
        for _ in 0..<3000 {
            let claims = Self.randomClaims(&random, count: Int.random(in: 1...15, using: &random), ranks: 4)
            var settings = AllocationSettings(
                safetyMargin: random.uniform(0...0.3), demandHeadroom: random.uniform(0...0.5),
                surplus: random.chance(0.5) ? .hold : .distribute, burstReserve: random.uniform(0...0.3))
            if random.chance(0.2) { settings.burstReserve = 0 }
            let capacity = random.uniform(0...800)
            let result = PoolAllocation.compute(capacityEstimate: capacity, settings: settings, claims: claims)
            #expect(result.allocatedTotal <= result.capacity)
            #expect(result.allocations.allSatisfy { $0 >= 0 && $0.isFinite })
            if !result.degraded {
                for (i, claim) in claims.enumerated() where !claim.isIdle {
                    #expect(result.allocations[i] >= min(claim.floor, claim.ceiling) * (1 - 1e-12) - 1e-12)
                    #expect(result.allocations[i] <= max(claim.floor, claim.ceiling) * (1 + 1e-12) + 1e-12)
                }
            }
        }
    }

    @Test func raisingCapacityNeverLowersAnyoneOutsideDegradedMode() {
        var random = SeededRandom(seed: 0xA110_7004)
        var compared = 0
        for _ in 0..<3000 {
            let claims = Self.randomClaims(&random, count: Int.random(in: 1...10, using: &random), ranks: 3)
            let settings = AllocationSettings(
                safetyMargin: 0, demandHeadroom: random.uniform(0...0.3),
                surplus: random.chance(0.5) ? .hold : .distribute, burstReserve: 0)
            let capacity = random.uniform(0...600)
            let before = PoolAllocation.compute(capacityEstimate: capacity, settings: settings, claims: claims)
            let after = PoolAllocation.compute(
                capacityEstimate: capacity + random.uniform(0...200), settings: settings, claims: claims)
            guard !before.degraded, !after.degraded else { continue }
            compared += 1
            for i in claims.indices {
                #expect(after.allocations[i] >= before.allocations[i] * (1 - 1e-9) - 1e-9)
            }
        }
        #expect(compared > 1000)
    }

    @Test func degradedModeKeepsTierOrderAndStarvesNobody() {
        var random = SeededRandom(seed: 0xA110_7005)
        var degradedCases = 0
        for _ in 0..<3000 {
            var claims = Self.randomClaims(&random, count: Int.random(in: 2...15, using: &random), ranks: 4)
            for i in claims.indices {
                claims[i].isIdle = false
                claims[i].floor = random.uniform(1...60)
                claims[i].ceiling = .infinity
            }
            let floors = claims.reduce(0) { $0 + $1.floor }
            let capacity = random.uniform(0...floors)
            let result = PoolAllocation.compute(capacityEstimate: capacity, settings: Self.bare, claims: claims)
            guard result.degraded else { continue }
            degradedCases += 1
            #expect(result.allocatedTotal <= capacity * (1 + 1e-12))
            #expect(result.allocations.allSatisfy { $0 > 0 })
            // If any tenant of a rank got more than its guard, every tenant of a better rank holds its floor,
            // or as much of it as it asks for.
            func held(_ claim: AllocationClaim) -> Double {
                min(claim.floor, max(claim.starvationGuard, claim.demand))
            }
            for (i, claim) in claims.enumerated() where result.allocations[i] > claim.starvationGuard * (1 + 1e-9) {
                for (j, better) in claims.enumerated() where better.rank < claim.rank {
                    #expect(result.allocations[j] >= held(better) * (1 - 1e-9))
                }
            }
            // Nothing is held back (the floors alone exceed the pool), and a floor above its tenant's
            // demand is honoured only once every demand is met.
            #expect(result.allocatedTotal >= capacity * (1 - 1e-9))
            let unmet = claims.indices.contains { result.allocations[$0] < claims[$0].demand * (1 - 1e-9) }
            if unmet {
                for (i, claim) in claims.enumerated() {
                    #expect(result.allocations[i] <= max(claim.starvationGuard, claim.demand) * (1 + 1e-9))
                }
            }
        }
        #expect(degradedCases > 1000)
    }
}
