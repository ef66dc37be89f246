import AllotCore
import AllotSignals
import AllotStore
import Foundation
import Testing

@testable import AllotLoop

/// The demand level the engine is given: what a tenant wants, measured once per request, moved only by
/// changes its own noise does not explain.
@Suite("Consumption Classifier: the demand level")
struct ClassifierLevelTests {
    typealias F = ClassifierFixtures
    let t0 = ClassifierFixtures.t0

    /// An agent's 120 calls per minute in clumps (tasks of many calls at once): 24, 0, 0, 12, 12, 24, 0, 48 and
    /// four empty ticks, every minute.
    static let clumps = [24, 0, 0, 12, 12, 24, 0, 48, 0, 0, 0, 0]

    @Test func aClumpyTenantsLevelHoldsWhileItsShortRateSwings() throws {
        var run = ClassifierRun(start: t0)
        var demands: [Double] = []
        var short: [Double] = []
        for tick in 0..<240 {
            let report = run.tick { script, from, to in F.served(&script, Self.clumps[tick % 12], from: from, to: to) }
            guard tick >= 120 else { continue }
            demands.append(try #require(F.observation(report)).demand.rpm)
            short.append(try #require(F.status(report)).servedShort.rpm)
        }
        // The short-window rate swings by a quarter around 120 (its EWMA over 60 s of clumps)…
        #expect(short.max()! - short.min()! > 30)
        // …the level does not move at all in these ten minutes, and it is within its deadband of 120.
        #expect(Set(demands).count == 1)
        #expect(abs(demands[0] - 120) <= 12)
    }

    @Test func theSpreadIsTheMinutesSwingOfRequestsThatComeInClumps() throws {
        // Ten calls every tick, each alone: a minute's count swings by √λ (dispersion 1).
        var steady = ClassifierRun(start: t0)
        var report = steady.tick { script, from, to in F.served(&script, 10, from: from, to: to) }
        for _ in 0..<119 { report = steady.tick { script, from, to in F.served(&script, 10, from: from, to: to) } }
        var observation = try #require(F.observation(report))
        #expect(F.close(observation.spread.rpm, observation.demand.rpm.squareRoot()))
        let tokensPerRequest = observation.demand.tpm / observation.demand.rpm
        #expect(F.close(observation.spread.tpm, observation.spread.rpm * tokensPerRequest))

        // The same 120 a minute in clumps (per tick: variance 212 over mean 10, dispersion 21.2 once settled): the
        // minute swings by √(I · λ), I learnt from the tick counts' mean and mean square over the long window
        // (15 min, from the first tick's count).
        var clumpy = ClassifierRun(start: t0)
        let weight = 1 - exp(-5.0 / 900)
        var mean = Double(Self.clumps[0])
        var square = mean * mean
        for tick in 0..<360 {
            let count = Double(Self.clumps[tick % 12])
            if tick > 0 {
                mean += weight * (count - mean)
                square += weight * (count * count - square)
            }
            report = clumpy.tick { script, from, to in F.served(&script, Self.clumps[tick % 12], from: from, to: to) }
            guard tick == 119 || tick == 359 else { continue }
            observation = try #require(F.observation(report))
            let dispersion = (square - mean * mean) / mean
            #expect(F.close(observation.spread.rpm, (dispersion * observation.demand.rpm).squareRoot()))
            #expect(dispersion > (tick == 119 ? 8.9 : 17.4))  // 2.98² and 4.18² of the steady tenant's swing
        }
    }

    @Test func aStepBeyondTheNoiseIsFollowedAtOnce() throws {
        var run = ClassifierRun(start: t0)
        var report = run.tick { script, from, to in F.served(&script, 10, from: from, to: to) }
        for _ in 0..<119 { report = run.tick { script, from, to in F.served(&script, 10, from: from, to: to) } }
        #expect(F.close(F.observation(report)?.demand.rpm, 120, tolerance: 1e-6))
        // Three times the rate: beyond three times the noise (a regular tenant: σ² ≈ 120 · 30 / 60) within four
        // ticks.
        var followedAt: Int?
        for tick in 1...6 {
            report = run.tick { script, from, to in F.served(&script, 30, from: from, to: to) }
            if followedAt == nil, try #require(F.observation(report)).demand.rpm > 160 { followedAt = tick }
        }
        #expect(followedAt == 4)
        // A jump goes to what the short window reads then, and holds while that stays within its band.
        let level = try #require(F.observation(report)).demand.rpm
        #expect(level < 360)
    }

    @Test func afterAStepTheLevelNeverFallsBackToTheLaggingLongWindow() throws {
        var run = ClassifierRun(start: t0)
        var report = run.tick { script, from, to in F.served(&script, 10, from: from, to: to) }
        for _ in 0..<119 { report = run.tick { script, from, to in F.served(&script, 10, from: from, to: to) } }
        // 120 → 360 rpm for six minutes. The long window (15 min) is still far below at the end; the level climbs
        // to 360 and never moves back towards it (the rule that moves a level to the long-window rate, meant for
        // a level set off the mean by noise, took it down to the long rate a minute after each rise).
        var levels: [Double] = []
        for _ in 1...72 {
            report = run.tick { script, from, to in F.served(&script, 30, from: from, to: to) }
            levels.append(try #require(F.observation(report)).demand.rpm)
        }
        // (The long window, read for the 16 minutes it covers, still remembers the ten at 120: 241.)
        #expect(try #require(F.status(report)).servedLong.rpm < 250)
        #expect(zip(levels, levels.dropFirst()).allSatisfy { $0 <= $1 })
        // Up to within 15 %: nobody refuses it, and an unrefused rise persists only beyond twice its modelled noise
        // (27 at 360) and the deadband (32 at 322), which the short window, closing on 360, leaves late.
        #expect(abs(levels.last! - 360) <= 0.15 * 360)
    }

    @Test func aClumpyTenantsLevelAfterAStepDoesNotFallBackToTheLaggingLongWindow() throws {
        var run = ClassifierRun(start: t0)
        // Ten minutes at 12 calls a minute, then the clumps of 120 a minute (tasks of many calls at once) for
        // twelve minutes: the long window (15 min) lags far below all along.
        var report = run.tick { script, from, to in F.served(&script, 1, from: from, to: to) }
        for _ in 0..<119 { report = run.tick { script, from, to in F.served(&script, 1, from: from, to: to) } }
        var levels: [Double] = []
        for tick in 0..<144 {
            report = run.tick { script, from, to in F.served(&script, Self.clumps[tick % 12], from: from, to: to) }
            levels.append(try #require(F.observation(report)).demand.rpm)
        }
        #expect(try #require(F.status(report)).servedLong.rpm < 100)
        // Once up (within three minutes: 34, 76, then 97, where its short rate, swinging by a quarter around 120,
        // last jumped), the level holds: the short rate agrees with it, so the long window's distance is an earlier
        // regime, not the level's noise. (Three times the modelled noise of these clumps hid that distance: the
        // level fell to the long rate every other minute and climbed back the next — 97, 47, 105, 61, 106, 72 …)
        // (Unrefused, the last step up waits until the rate has been beyond twice its modelled noise for a minute:
        // 94 here, where any minute beyond the deadband used to take it to 97.)
        let settled = levels.dropFirst(36)
        #expect(settled.min()! >= 0.75 * 120)
        #expect(settled.allSatisfy { $0 == settled.first! })
    }

    @Test func aSmallChangeThatPersistsIsFollowedWithinAMinute() throws {
        var run = ClassifierRun(start: t0)
        var report = run.tick { script, from, to in F.served(&script, 10, from: from, to: to) }
        for _ in 0..<119 { report = run.tick { script, from, to in F.served(&script, 10, from: from, to: to) } }
        // +20 %: inside the noise, beyond the 10 % deadband once the short window has moved halfway (45 s).
        var movedAt: Int?
        for tick in 1...40 {
            report = run.tick { script, from, to in F.served(&script, 12, from: from, to: to) }
            let demand = try #require(F.observation(report)).demand.rpm
            if movedAt == nil, abs(demand - 120) > 1 { movedAt = tick }
        }
        let moved = try #require(movedAt)
        // Not before the short window leaves the 10 % deadband (nine ticks) and twice the tenant's modelled noise
        // (an unrefused rise: 2σ ≈ 17 at 144, crossed at tick 13); a minute (twelve ticks) after that. This tenant
        // is perfectly regular (tick counts of dispersion 1): three times its noise (25.5) is never crossed by a
        // +20 % change; the minute beyond twice it moves the level, at tick 25. (Any minute beyond the deadband
        // moved it at tick 20, and moved agents' levels with their noise: tasks of ten calls swing by a fifth.)
        #expect(moved >= 9)
        #expect(moved <= 26)
        #expect(moved == 25)
        #expect(abs(try #require(F.observation(report)).demand.rpm - 144) <= 0.1 * 144)
    }

    @Test func aBlockedTenantsClaimIsEvidenceNotNoise() throws {
        var run = ClassifierRun(start: t0)
        let allocation = [F.acme: PerDimension<Double>(rpm: 100, tpm: 1_000_000)]
        var report = run.tick(allocations: allocation) { script, from, to in F.served(&script, 8, from: from, to: to) }
        for _ in 0..<119 {
            report = run.tick(allocations: allocation) { script, from, to in F.served(&script, 8, from: from, to: to) }
        }
        #expect(F.close(F.observation(report)?.demand.rpm, 96, tolerance: 1e-6))
        // It now gets all of its 100 and is denied 6 more requests a tick by its RPM bucket: blocked once the
        // denials reach a tenth of what it wants (the second tick). Its claim passes at once — not after the
        // noise band or a minute beyond the deadband: its allocation × 1.5, but never more than its attempts
        // plus the probe, less the engine's headroom — read over the fast window (10 s), which has caught up
        // with the 180 a minute it now sends far more than the short one (60 s).
        // It now gets all of its 100 and is denied 6 more requests a tick by its RPM bucket: blocked once the
        // denials reach a tenth of what it wants (the second tick). Its claim passes at once — not after the
        // noise band or a minute beyond the deadband: its allocation plus a quarter, but never more than its
        // attempts (a short-window average, still catching up with the 180 a minute it now sends) plus the
        // probe, less the engine's headroom.
        var demands: [Double] = []
        for _ in 0..<4 {
            report = run.tick(allocations: allocation) { script, from, to in
                F.served(&script, 9, from: from, to: to)
                    + script.spread(6, from: from, to: to) { script, at in
                        script.event(at: at, outcome: .deniedLocal, estimated: 150, errorType: "rpm")
                    }
            }
            demands.append(try #require(F.observation(report)).demand.rpm)
        }
        #expect(demands[0] < 110)
        // The second tick: the fast window's attempts are 96 + 84 · (1 − e^(−10/10)) = 149 a minute (the short
        // window's 109), a cap of 155 — above the allocation × 1.5, which binds.
        let fast = 96 + 84 * F.weight(10, 10)
        let slow = 96 + 84 * F.weight(10, 60)
        #expect(slow * 1.25 / 1.2 < 115)
        #expect(fast * 1.25 / 1.2 > 150)
        #expect(F.close(demands[1], 150, tolerance: 1e-6))
        #expect(F.close(demands[3], 150, tolerance: 1e-6))
    }
}
