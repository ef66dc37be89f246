import AllotCore
import AllotSignals
import AllotStore
import Foundation
import Testing

@testable import AllotLoop

@Suite("Consumption Classifier: classes, suspects, starvation (SPEC 5)")
struct ClassifierClassesTests {
    typealias F = ClassifierFixtures
    let t0 = ClassifierFixtures.t0

    @Test func coldStartBlendsTheTierPrior() throws {
        let policy = F.policy(
            coldStartSamples: 30,
            upstreams: [UpstreamPolicy(id: F.pool, capacity: PerDimension(rpm: 10_000, tpm: 1_000_000))])
        var run = ClassifierRun(policy: policy, start: t0)
        // One request in the first 5 s: 12 per minute (1,800 tokens) seen so far.
        var report = run.tick { script, from, to in F.served(&script, 1, from: from, to: to) }
        var observation = try #require(F.observation(report))
        // c = max(1 sample of 30, 5 s watched of two short windows, 120 s) = 1 / 24; the prior is 1 % of
        // C = capacity × (1 − 0.02): 98 per minute, 9,800 tokens.
        #expect(observation.tenantClass == .coldStart)
        #expect(observation.samples == 1)
        #expect(F.close(observation.confidence, 1.0 / 24))
        let first: (rpm: Double, tpm: Double) = (12.0 / 24 + 98.0 * 23 / 24, 1_800.0 / 24 + 9_800.0 * 23 / 24)
        #expect(F.close(observation.demand.rpm, first.rpm))
        #expect(F.close(observation.demand.tpm, first.tpm))

        // The Observer's estimate, where given, replaces the declared capacity for the prior.
        report = run.tick(capacities: [F.pool: PerDimension(rpm: 20_000, tpm: nil)]) { script, from, to in
            F.served(&script, 1, from: from, to: to)
        }
        observation = try #require(F.observation(report))
        // c = max(2 / 30, 10 / 120) = 1 / 12.
        let second: (rpm: Double, tpm: Double) = (
            12.0 / 12 + 196.0 * 11 / 12, 1_800.0 / 12 + 9_800.0 * 11 / 12
        )
        #expect(F.close(observation.demand.rpm, second.rpm))
        #expect(F.close(observation.demand.tpm, second.tpm))

        // The prior only raises a newcomer's demand: one that already shows more keeps what it shows.
        var busy = ClassifierRun(policy: policy, start: t0)
        report = busy.tick { script, from, to in F.served(&script, 10, from: from, to: to) }
        observation = try #require(F.observation(report))
        #expect(F.close(observation.demand.rpm, 120))  // not 120 / 3 + 98 × 2 / 3

        // A sparse tenant is judged by the time it has been watched too: after two short windows (24 ticks)
        // with 24 samples of the 30 it is no longer a newcomer — a tenant of two requests a minute would
        // otherwise keep its tier's prior for a quarter of an hour.
        report = run.serve(1, ticks: 21)
        observation = try #require(F.observation(report))
        #expect(observation.samples == 23)
        #expect(observation.tenantClass == .coldStart)
        #expect(F.close(observation.confidence, 115.0 / 120))
        report = run.tick { script, from, to in F.served(&script, 1, from: from, to: to) }
        observation = try #require(F.observation(report))
        #expect(observation.samples == 24)
        #expect(observation.tenantClass != .coldStart)
        #expect(observation.confidence == 1)
        #expect(F.close(observation.demand.rpm, 12))
    }

    /// A flood of newcomers shares what the pool's established tenants leave for what it guesses (outside evaluation
    /// round 28: 600 tenants registered by one batch held 929 of a 980-rpm pool, a critical tenant cut to its
    /// guardrail minimum): what each showed, weighed by the confidence in it, stands.
    @Test func newcomersShareWhatEstablishedTenantsLeaveForTheirGuesses() throws {
        let policy = F.policy(
            coldStartSamples: 30,
            upstreams: [UpstreamPolicy(id: F.pool, capacity: PerDimension(rpm: 1000, tpm: 1_000_000))])
        var run = ClassifierRun(policy: policy, start: t0)
        // acme: 600 a minute for 125 s, watched for two short windows — established.
        var report = run.serve(50, ticks: 25)
        let acme = try #require(F.observation(report))
        #expect(acme.tenantClass != .coldStart)
        let newcomers = (0..<400).map { "n\($0)" }
        report = run.tick { script, from, to in
            var events = F.served(&script, 50, from: from, to: to)
            for tenant in newcomers { events += F.served(&script, 1, from: from, to: to, tenant: tenant) }
            return events
        }
        let wanted = try #require(F.observation(report)).demand
        // Each newcomer: one request in its first 5 s reads 12 a minute (1,800 tokens); c = 5 s of 120 = 1 / 24, so
        // 0.5 (75 tokens) is evidence and the rest a guess — 11.5 of its own reading, and in tokens 9,391.7 of the
        // prior (1 % of C = 9,800 tokens, above its reading). 400 guesses of 4,600 rpm and 3.76M tokens share the
        // room C = 980 (980,000) leaves with the 20 % headroom — C / 1.2 — less acme's demand and what the
        // newcomers showed, at least a quarter of C.
        let capacity = PerDimension<Double>(rpm: 980, tpm: 980_000)
        let evidence = PerDimension<Double>(rpm: 0.5, tpm: 75)
        let allowed = PerDimension<Double> {
            max(0.25 * capacity[$0], capacity[$0] / 1.2 - wanted[$0] - 400 * evidence[$0])
        }
        let guess = PerDimension<Double>(rpm: 11.5, tpm: 9_800.0 * 23 / 24)
        for tenant in newcomers {
            let observation = try #require(F.observation(report, AllocationKey(tenant: tenant, upstream: F.pool)))
            #expect(observation.tenantClass == .coldStart)
            for dimension in RateDimension.allCases {
                let expected = evidence[dimension] + guess[dimension] * allowed[dimension] / (400 * guess[dimension])
                #expect(F.close(observation.demand[dimension], expected, tolerance: 1e-6))
            }
        }
        let summed = report.tenants.filter { $0.tenant != "acme" }.reduce(0) { $0 + $1.demand.rpm }
        #expect(F.close(summed, 400 * 0.5 + allowed.rpm, tolerance: 1e-6))
        // The established tenant's own demand is untouched.
        #expect(F.close(wanted.rpm, acme.demand.rpm, tolerance: 0.05))

        // A whole pool starting cold has nobody established, no evidence to protect: its newcomers are read as they
        // showed and guess, 4,600 rpm of guesses or not.
        var cold = ClassifierRun(policy: policy, start: t0)
        report = cold.tick { script, from, to in
            var events: [StoredEvent] = []
            for tenant in newcomers { events += F.served(&script, 1, from: from, to: to, tenant: tenant) }
            return events
        }
        #expect(report.tenants.count == 400)
        #expect(report.tenants.allSatisfy { F.close($0.demand.rpm, 12) })
        #expect(report.tenants.allSatisfy { F.close($0.demand.tpm, 75 + 9_800 * 23 / 24) })
    }

    /// The newcomers share the room by weight, each at most its own guess (review of session 49, L8): a critical
    /// newcomer arriving with a flood of standard ones keeps its guess, where a scaling alike cut it as theirs.
    @Test func newcomersShareTheRoomByWeight() throws {
        var policy = F.policy(
            coldStartSamples: 30,
            upstreams: [UpstreamPolicy(id: F.pool, capacity: PerDimension(rpm: 1000, tpm: 1_000_000))])
        policy.setTier(Tier(name: "critical", priority: 0, weight: 50))
        policy.setTenant(TenantPolicy(id: "crit", tier: "critical"))
        var run = ClassifierRun(policy: policy, start: t0)
        _ = run.serve(50, ticks: 25)
        let newcomers = (0..<400).map { "n\($0)" }
        let report = run.tick { script, from, to in
            var events = F.served(&script, 50, from: from, to: to)
            for tenant in newcomers + ["crit"] { events += F.served(&script, 1, from: from, to: to, tenant: tenant) }
            return events
        }
        let wanted = try #require(F.observation(report)).demand
        // As above (one request each: evidence 0.5 rpm and 75 tokens, guesses 11.5 rpm and 23/24 of the 9,800-token
        // prior), with 401 newcomers.
        let capacity = PerDimension<Double>(rpm: 980, tpm: 980_000)
        let evidence = PerDimension<Double>(rpm: 0.5, tpm: 75)
        let guess = PerDimension<Double>(rpm: 11.5, tpm: 9_800.0 * 23 / 24)
        let allowed = PerDimension<Double> {
            max(0.25 * capacity[$0], capacity[$0] / 1.2 - wanted[$0] - 401 * evidence[$0])
        }
        // The weighted level: 400 standard newcomers at (allowed − 11.5) / 400 each, under a fiftieth of crit's
        // guess, so crit's 50 × that covers its whole guess.
        let crit = try #require(F.observation(report, AllocationKey(tenant: "crit", upstream: F.pool)))
        #expect(crit.tenantClass == .coldStart)
        for dimension in RateDimension.allCases {
            let level = (allowed[dimension] - guess[dimension]) / 400
            #expect(50 * level > guess[dimension])
            #expect(F.close(crit.demand[dimension], evidence[dimension] + guess[dimension], tolerance: 1e-6))
            for tenant in newcomers.prefix(3) {
                let observation = try #require(F.observation(report, AllocationKey(tenant: tenant, upstream: F.pool)))
                #expect(F.close(observation.demand[dimension], evidence[dimension] + level, tolerance: 1e-6))
            }
        }
        let summed = report.tenants.filter { $0.tenant != "acme" }.reduce(0) { $0 + $1.demand.rpm }
        #expect(F.close(summed, 401 * 0.5 + allowed.rpm, tolerance: 1e-6))
    }

    /// A newcomer sure of what it showed (30 samples in its first tick) guesses nothing, and what it wants leaves the
    /// others' guesses less room, as an established tenant's does.
    @Test func aBusyNewcomerLeavesTheGuessesLessRoom() throws {
        let policy = F.policy(
            coldStartSamples: 30,
            upstreams: [UpstreamPolicy(id: F.pool, capacity: PerDimension(rpm: 3000, tpm: 3_000_000))])
        var run = ClassifierRun(policy: policy, start: t0)
        _ = run.serve(50, ticks: 25)
        let newcomers = (0..<400).map { "n\($0)" }
        let report = run.tick { script, from, to in
            var events = F.served(&script, 50, from: from, to: to)
            events += F.served(&script, 30, from: from, to: to, tenant: "busy")
            for tenant in newcomers { events += F.served(&script, 1, from: from, to: to, tenant: tenant) }
            return events
        }
        let acme = try #require(F.observation(report)).demand.rpm
        let busy = try #require(F.observation(report, AllocationKey(tenant: "busy", upstream: F.pool)))
        #expect(busy.tenantClass != .coldStart)
        #expect(F.close(busy.demand.rpm, 360))
        // C = 2,940: the room is 2,940 / 1.2 less acme's 600, busy's 360 and the newcomers' 400 × 0.5 — 1,290, more
        // than a quarter of C. Their guesses (23/24 of the 29.4 prior each, 11,270 in all) are scaled to it.
        let allowed = max(0.25 * 2940, 2940 / 1.2 - acme - busy.demand.rpm - 400 * 0.5)
        #expect(allowed > 1000 && allowed < 1300)
        let summed = report.tenants.filter { $0.tenant.hasPrefix("n") }.reduce(0) { $0 + $1.demand.rpm }
        #expect(F.close(summed, 400 * 0.5 + allowed, tolerance: 1e-6))
    }

    @Test func idleAfterNoDemandForIdleAfter() throws {
        var run = ClassifierRun(start: t0)
        _ = run.tick { script, from, _ in [script.event(at: from + 4, prompt: 10, completion: 10)] }  // t0 + 4
        var report = run.tick(after: 299)  // t0 + 304: 300 s since the last demand
        #expect(F.status(report)?.tenantClass == .idle)
        // Attempts that are not demand (a 429) do not wake it; a queued request does.
        report = run.tick { script, from, _ in [script.event(at: from + 1, outcome: .quotaExhausted)] }
        #expect(F.status(report)?.tenantClass == .idle)
        report = run.tick { script, from, _ in [script.event(at: from + 1, outcome: .queued, estimated: 50)] }
        #expect(F.status(report)?.tenantClass != .idle)
    }

    @Test func aTenantBackFromIdleClaimsWhatItWantedBeforeFadingOverAShortWindow() throws {
        var run = ClassifierRun(start: t0)
        // 120 requests a minute for five minutes: its level settles there.
        var report = run.serve(10, ticks: 60)
        let before = try #require(F.observation(report)).demand.rpm
        #expect(before > 100)
        // Ten minutes without a request: idle, its idle allocation only.
        report = run.tick(after: 600)
        #expect(F.status(report)?.tenantClass == .idle)
        // Back: its first tick claims what it wanted before (its own short rate starts from nothing)…
        report = run.tick { script, from, to in F.served(&script, 1, from: from, to: to) }
        var observation = try #require(F.observation(report))
        #expect(observation.tenantClass != .idle)
        // (The remembered level, 119.5: it eased down with the long window's weight on the last ticks before.)
        #expect(abs(observation.demand.rpm - before) < 0.01 * before)
        // …fading over the short window: half of it 30 s later (its measured demand is still below that; the
        // remembered level keeps easing toward the level it shows now)…
        report = run.serve(1, ticks: 6)
        observation = try #require(F.observation(report))
        #expect(observation.demand.rpm > 0.47 * before && observation.demand.rpm < 0.5 * before)
        // …and gone after 60 s: what it shows now is all it gets (a sparse tenant's long-window rate, which still
        // remembers some of the 120).
        report = run.serve(1, ticks: 6)
        observation = try #require(F.observation(report))
        #expect(observation.demand.rpm < 0.25 * before)
    }

    @Test func aTenantThatStopsIsNotMeasuredOverItsLongWindowOnceItsShortOneIsSparse() throws {
        // 144 requests a minute for half an hour (its long window, 15 minutes, holds most of it), then nothing.
        var run = ClassifierRun(start: t0)
        var report = run.serve(12, ticks: 360)
        let before = try #require(F.observation(report)).demand.rpm
        #expect(before > 140)
        // Four minutes without a request (not yet idle): its short rate falls below a sparse tenant's (20
        // requests in the short window) after about two, while its long window still holds over half its rate.
        // Its demand falls with the short rate and never climbs back to the long window's.
        var demands: [Double] = []
        for _ in 0..<48 {
            report = run.tick()
            demands.append(try #require(F.observation(report)).demand.rpm)
        }
        #expect(F.status(report)?.tenantClass != .idle)
        #expect(try #require(F.status(report)).servedLong.rpm > 0.5 * before)
        for (earlier, later) in zip(demands, demands.dropFirst()) { #expect(later <= earlier) }
        #expect(demands.last! < 0.1 * before)
    }

    @Test func aTenantBackFromIdleAtTwiceItsRateIsMeasuredExactlyFromItsFirstTick() throws {
        var run = ClassifierRun(start: t0)
        var report = run.serve(10, ticks: 60)
        report = run.tick(after: 600)
        #expect(F.status(report)?.tenantClass == .idle)
        // Back at 240 a minute (20 a tick, the first at the tick's start): its exact rate since, not its short
        // EWMA (which reads a twelfth of it after one tick) nor the 120 it remembers.
        report = run.tick { script, from, to in F.served(&script, 20, from: from, to: to) }
        var observation = try #require(F.observation(report))
        #expect(F.close(observation.demand.rpm, 240))
        #expect(F.close(observation.demand.tpm, 240 * 150))
        // Still measured so within the short window…
        report = run.serve(20, ticks: 5)
        observation = try #require(F.observation(report))
        #expect(F.close(observation.demand.rpm, 240))
        // …and a return with fewer requests than a sparse tenant's short window holds (one task of 15 calls) is
        // not read so, or one task would claim 180 a minute: it claims the level it remembers (119.5, fading).
        var sparse = ClassifierRun(start: t0)
        report = sparse.serve(10, ticks: 60)
        report = sparse.tick(after: 600)
        report = sparse.tick { script, from, to in F.served(&script, 15, from: from, to: to) }
        observation = try #require(F.observation(report))
        #expect(observation.demand.rpm > 119 && observation.demand.rpm < 120)
    }

    /// After the exact rate's short window, and for two more, the short EWMA — restarted from what it decayed to
    /// while the tenant was idle — is read for what came since: without it the tenant back at 240 read 152 a short
    /// window after its return, and its level fell (outside evaluation round 17: a copilot's from 300 to 166).
    @Test func aTenantBackFromIdleIsStillReadAtItsRateAfterTheExactRatesWindow() throws {
        var run = ClassifierRun(start: t0)
        var report = run.serve(10, ticks: 60)
        report = run.tick(after: 600)
        #expect(F.status(report)?.tenantClass == .idle)
        var demands: [Double] = []
        for _ in 0..<40 {  // 200 s at 240 a minute
            report = run.serve(20, ticks: 1)
            demands.append(try #require(F.observation(report)).demand.rpm)
        }
        #expect(demands.allSatisfy { $0 > 0.97 * 240 }, "\(demands.map { Int($0) })")
    }

    /// A peak in a tenant's first seconds reads as the rate it was, as its long-window usage does (review of
    /// 2026-11-30, L8: the young short window's raw peak, divided by the fill of a later tick, read low). Its first
    /// 30 s came at 300 per minute, then a minute at 60: its peak is the 300 it sent, decayed over the 900-s long
    /// window for the minute since (280.6), not the 118 its short window held after 30 s (which, divided by the
    /// fill of the 60-s window 90 s in, read about its long-window rate: a ratio of 1.03).
    @Test func aPeakInATenantsFirstSecondsReadsAsTheRateItWas() throws {
        var run = ClassifierRun(start: t0)
        let allocation = [F.acme: PerDimension<Double>(rpm: 1000, tpm: 1_000_000)]
        var report = run.tick { _, _, _ in [] }
        for tick in 0..<18 {
            let calls = tick < 6 ? 25 : 5
            report = run.tick(allocations: allocation) { script, from, to in
                F.served(&script, calls, from: from, to: to)
            }
        }
        let status = try #require(F.status(report))
        #expect(F.close(status.peakToAverage * status.servedLong.rpm, 300 * exp(-60.0 / 900), tolerance: 1e-6))
        #expect(status.peakToAverage > 2)

        // A first report holding two minutes of backlog at 60 a minute, then 60 a minute: no peak (its first tick's
        // EWMA, corrected by five seconds' weight, read 24 times its rate; review of 2026-11-30).
        run = ClassifierRun(start: t0)
        report = run.tick { _, _, _ in [] }
        report = run.tick(allocations: allocation) { script, _, to in F.served(&script, 120, from: to - 120, to: to) }
        for _ in 0..<12 {
            report = run.tick(allocations: allocation) { script, from, to in F.served(&script, 5, from: from, to: to) }
        }
        let backlogged = try #require(F.status(report))
        #expect(backlogged.peakToAverage < 1.5, "\(backlogged.peakToAverage)")
    }

    @Test func steadyThenALegitimateBurstThatIsNotSuspect() throws {
        var run = ClassifierRun(start: t0)
        let allocation = [F.acme: PerDimension<Double>(rpm: 1000, tpm: 1_000_000)]
        var report = run.tick { _, _, _ in [] }
        for _ in 0..<240 {  // 20 minutes at 60 per minute
            report = run.tick(allocations: allocation) { script, from, to in F.served(&script, 5, from: from, to: to) }
        }
        var status = try #require(F.status(report))
        #expect(status.tenantClass == .steady)
        // From nothing, 20 minutes in: each window read for the time it has covered, both 60 — no trend (raw, the
        // long window had not caught up: trend 0.36, outside evaluation round 38).
        #expect(F.close(status.trend, 0, tolerance: 1e-9))
        #expect(F.close(status.peakToAverage, 1, tolerance: 1e-9))
        // 30 s at 300 per minute: short demand more than twice the long one.
        for _ in 0..<6 {
            report = run.tick(allocations: allocation) { script, from, to in F.served(&script, 25, from: from, to: to) }
        }
        status = try #require(F.status(report))
        #expect(status.tenantClass == .bursting)
        #expect(!status.suspect)
        #expect(status.peakToAverage > 2)
        // Back to normal: steady again once the short window forgets the burst.
        for _ in 0..<60 {
            report = run.tick(allocations: allocation) { script, from, to in F.served(&script, 5, from: from, to: to) }
        }
        #expect(F.status(report)?.tenantClass == .steady)
        #expect(F.status(report)?.suspect == false)
    }

    @Test func sustainedOverAfterSustainedOverSeconds() throws {
        var run = ClassifierRun(start: t0)
        let allocation = [F.acme: PerDimension<Double>(rpm: 30, tpm: 1_000_000)]
        var overFrom: Double?
        for tick in 1...120 {
            let report = run.tick(allocations: allocation) { script, from, to in
                F.served(&script, 3, from: from, to: to)
                    + script.spread(2, from: from, to: to) { script, at in
                        script.event(at: at, outcome: .deniedLocal, estimated: 100, retry: 1)
                    }
            }
            let status = try #require(F.status(report))
            // `sustained_over` compares what the tenant asks for: every attempt (served + denied), or the requests
            // wanted with `queued` reports (none here).
            let asked = status.servedShort.rpm + status.deniedRPM + status.queuedRPM
            if overFrom == nil, asked > 30 { overFrom = run.now }
            let sustained = overFrom.map { run.now - $0 >= 300 } ?? false
            #expect((status.tenantClass == .sustainedOver) == sustained, "tick \(tick)")
        }
        #expect(overFrom != nil)
    }

    @Test func requestsWaitingInGatewayQueuesMakeATenantSustainedOver() throws {
        // Per 5-s tick: 2 requests served and 1 reported `queued` (first attempts all): it wants 36 a minute, its
        // attempts (served + denied) are 24, under its allocation of 30. SPEC 5's demand counts the queued ones.
        var run = ClassifierRun(start: t0)
        let allocation = [F.acme: PerDimension<Double>(rpm: 30, tpm: 1_000_000)]
        var overFrom: Double?
        var sustainedTicks = 0
        for tick in 1...120 {
            let report = run.tick(allocations: allocation) { script, from, to in
                F.served(&script, 2, from: from, to: to)
                    + script.spread(1, from: from, to: to) { script, at in
                        script.event(at: at, outcome: .queued, queueMs: 5_000, estimated: 150, retry: 0)
                    }
            }
            let status = try #require(F.status(report))
            #expect(status.servedShort.rpm + status.deniedRPM < 30, "tick \(tick): attempts stay under the allocation")
            let wanted = status.servedShort.rpm + status.queuedRPM
            if overFrom == nil, wanted > 30 { overFrom = run.now }
            let sustained = overFrom.map { run.now - $0 >= 300 } ?? false
            #expect((status.tenantClass == .sustainedOver) == sustained, "tick \(tick), wanted \(wanted)")
            if status.tenantClass == .sustainedOver { sustainedTicks += 1 }
        }
        #expect(sustainedTicks > 0)
    }

    @Test func aRequestThatWaitedAndWasThenServedCountsOnceForSustainedOver() throws {
        // Per 5-s tick: 1 request served at once, 1 reported `queued`, and 1 earlier one served after its wait
        // (`retry` 1): 24 requests wanted a minute and 24 attempts, under the allocation of 30 — though attempts
        // plus queued reports would be 36.
        var run = ClassifierRun(start: t0)
        let allocation = [F.acme: PerDimension<Double>(rpm: 30, tpm: 1_000_000)]
        for tick in 1...120 {
            let report = run.tick(allocations: allocation) { script, from, to in
                F.served(&script, 1, from: from, to: to)
                    + script.spread(1, from: from, to: to) { script, at in
                        script.event(at: at, outcome: .queued, queueMs: 5_000, estimated: 150, retry: 0)
                    }
                    + script.spread(1, from: from, to: to) { script, at in
                        script.event(at: at, queueMs: 20_000, prompt: 100, completion: 50, retry: 1)
                    }
            }
            let status = try #require(F.status(report))
            #expect(status.tenantClass != .sustainedOver, "tick \(tick)")
            if tick == 120 {
                #expect(status.servedShort.rpm + status.queuedRPM > 30, "what counting the wait twice would read")
            }
        }
    }

    @Test func aTenantThatStoppedIsNotSustainedOver() throws {
        var run = ClassifierRun(start: t0)
        let allocation = [F.acme: PerDimension<Double>(rpm: 30, tpm: 1_000_000)]
        // Six times its allocation (36 served and 144 denied a minute) for 400 s: `sustained_over` from 300 s.
        var report = run.tick(allocations: allocation)
        for _ in 1...80 {
            report = run.tick(allocations: allocation) { script, from, to in
                F.served(&script, 3, from: from, to: to)
                    + script.spread(12, from: from, to: to) { script, at in
                        script.event(at: at, outcome: .deniedLocal, estimated: 100, retry: 1)
                    }
            }
        }
        #expect(try #require(F.status(report)).tenantClass == .sustainedOver)
        // Then nothing. Its short window asks above 30 for 60 × ln 6 ≈ 107 s; it has stopped once it has been
        // quiet for a short window (60 s, and twice its longest quiet spell, under 1 s).
        let lastEvent = run.now
        var stoppedAndStillAsking = 0
        for _ in 0..<30 {
            report = run.tick(allocations: allocation)
            let status = try #require(F.status(report))
            let asked = status.servedShort.rpm + status.deniedRPM + status.queuedRPM
            let quiet = run.now - lastEvent
            if quiet <= 55 {
                #expect(status.tenantClass == .sustainedOver, "quiet \(quiet) s")
            } else if quiet > 60 {
                #expect(status.tenantClass != .sustainedOver, "quiet \(quiet) s, asking \(asked)")
                if asked > 30 { stoppedAndStillAsking += 1 }
            }
        }
        // 65–105 s: stopped, its short window still above the allocation.
        #expect(stoppedAndStillAsking == 9)
    }

    @Test func starvationIsRaisedAfterExactlyTheWindowAndCleared() throws {
        var run = ClassifierRun(start: t0)
        let allocation = [F.acme: PerDimension<Double>(rpm: 120, tpm: 1_000_000)]
        // 60 served and 96 denied per minute: served < 0.7 × 120 while demand reaches 156 ≥ 120.
        var starvingFrom: Double?
        for tick in 1...120 {
            let report = run.tick(allocations: allocation) { script, from, to in
                F.served(&script, 5, from: from, to: to)
                    + script.spread(8, from: from, to: to) { script, at in
                        script.event(at: at, outcome: .deniedLocal, estimated: 100, retry: 1)
                    }
            }
            let status = try #require(F.status(report))
            // Starvation compares what the tenant asks for, every attempt: a blocked agent asks again and again.
            let asked = status.servedShort.rpm + status.deniedRPM + status.queuedRPM
            if starvingFrom == nil, asked >= 120 { starvingFrom = run.now }
            let expected = starvingFrom.map { run.now - $0 >= 300 } ?? false
            #expect(status.starved == expected, "tick \(tick)")
            let alerts = report.alerts.filter { $0.kind == "starved" }
            #expect(alerts.count == (expected ? 1 : 0))
            if expected {
                #expect(status.starvedSince == starvingFrom)
                #expect(alerts.first?.since == starvingFrom)
                #expect(alerts.first?.tenant == "acme")
                #expect(alerts.first?.severity == .critical)
            }
        }
        #expect(starvingFrom != nil)
        // Served recovers to 144 per minute: cleared at the first tick it is back above 0.7 × 120.
        var cleared = false
        for _ in 0..<40 {
            let report = run.tick(allocations: allocation) { script, from, to in
                F.served(&script, 12, from: from, to: to)
            }
            let status = try #require(F.status(report))
            let asked = status.servedShort.rpm + status.deniedRPM + status.queuedRPM
            if status.servedShort.rpm >= 84 || asked < 120 { cleared = true }
            #expect(status.starved == !cleared)
            #expect(report.alerts.contains { $0.kind == "starved" } == !cleared)
        }
        #expect(cleared)
    }

    /// Calls waiting in a gateway's queue are what the tenant wants too (SPEC 5: served + denied locally + queued):
    /// served 36 of 120 rpm while 96 more a minute are reported waiting, it starves as the same calls denied would
    /// (outside evaluation round 21: never, because only attempts counted).
    @Test func callsWaitingInGatewayQueuesCountAsWanted() throws {
        var run = ClassifierRun(start: t0)
        let allocation = [F.acme: PerDimension<Double>(rpm: 120, tpm: 1_000_000)]
        var status: TenantStatus?
        var alerts: [LoopAlert] = []
        for _ in 1...100 {
            let report = run.tick(allocations: allocation) { script, from, to in
                F.served(&script, 3, from: from, to: to)
                    + script.spread(8, from: from, to: to) { script, at in
                        script.event(at: at, outcome: .queued, queueMs: 5000, estimated: 100)
                    }
            }
            status = F.status(report)
            alerts = report.alerts.filter { $0.kind == "starved" }
        }
        let last = try #require(status)
        #expect(last.deniedRPM == 0, "\(last.servedShort) \(last.queuedRPM) \(last.demand)")
        #expect(last.starved)
        let message = try #require(alerts.first?.message)
        #expect(message.hasPrefix("acme on openai/gpt-4o is served 36 of its 120 rpm (30%) while it wants 132"))

        // Calls that wait and are then served are one request each: 72 a minute against 120, all reported waiting
        // before they go through, is not starvation (counted twice it read 144 wanted).
        var fine = ClassifierRun(start: t0)
        for _ in 1...100 {
            let report = fine.tick(allocations: allocation) { script, from, to in
                script.spread(6, from: from, to: to) { script, at in
                    script.event(at: at, outcome: .queued, queueMs: 5000, estimated: 100)
                }
                    + script.spread(6, from: from, to: to) { script, at in
                        script.event(at: at + 0.01, prompt: 80, completion: 20, retry: 1)
                    }
            }
            status = F.status(report)
            #expect(!report.alerts.contains { $0.kind == "starved" })
        }
        #expect(status?.starved == false)
    }

    @Test func suspectWhenDemandOnlyFollowsAllocationRises() throws {
        let gamer = AllocationKey(tenant: "gamer", upstream: F.pool)
        let honest = AllocationKey(tenant: "honest", upstream: F.pool)
        var run = ClassifierRun(start: t0)
        var allocation = 120.0
        var report = run.tick()
        var rises = 0
        var firstSuspected: LoopAlert?
        for tick in 1...300 {
            // After a 6-minute warm-up, surplus handed out every 2 minutes; the gamer's demand climbs to
            // 80 % of whatever it holds, the honest tenant keeps wanting 96 per minute.
            if tick >= 72, tick % 24 == 0 {
                allocation *= 1.25
                rises += 1
            }
            let perTick = Int((allocation * 0.8 / 12).rounded())
            let allocations = [
                gamer: PerDimension(rpm: allocation, tpm: 1e9), honest: PerDimension(rpm: allocation, tpm: 1e9),
            ]
            report = run.tick(allocations: allocations) { script, from, to in
                F.served(&script, perTick, from: from, to: to, tenant: "gamer")
                    + F.served(&script, 8, from: from, to: to, tenant: "honest")
            }
            let suspected = report.alerts.first { $0.kind == "suspect_tenant" && $0.tenant == "gamer" }
            if suspected == nil { firstSuspected = nil }
            firstSuspected = firstSuspected ?? suspected
        }
        // Dated from the tick that raised it (the last time it was raised), not from every tick that keeps it.
        let suspected = try #require(firstSuspected)
        #expect(suspected.since < run.now)
        #expect(
            report.alerts.filter { $0.kind == "suspect_tenant" && $0.tenant == "gamer" }.map(\.since)
                == [suspected.since])
        #expect(rises == 10)
        let status = try #require(F.status(report, gamer))
        #expect(status.suspect)
        #expect(status.suspectReasons.contains { $0.hasPrefix("demand rose after ") })
        #expect(report.alerts.contains { $0.kind == "suspect_tenant" && $0.tenant == "gamer" })
        #expect(F.observation(report, gamer)?.suspect == true)
        #expect(F.status(report, honest)?.suspect == false)
    }

    @Test func suspectOnDeniedFloodsNeverRetried() throws {
        var run = ClassifierRun(start: t0)
        var report = run.tick()
        for _ in 0..<120 {
            report = run.tick { script, from, to in
                F.served(&script, 1, from: from, to: to)
                    // The flood: denied, never retried.
                    + script.spread(10, from: from, to: to) { script, at in
                        script.event(at: at, outcome: .deniedLocal, estimated: 50)
                    }
                    // A legitimate tenant denied as often retries a third of them.
                    + F.served(&script, 1, from: from, to: to, tenant: "patient")
                    + script.spread(15, from: from, to: to) { script, at in
                        script.event(
                            at: at, tenant: "patient", outcome: .deniedLocal, estimated: 50,
                            retry: Int(((at - from) * 3).rounded()) % 3 == 0 ? 1 : 0)
                    }
            }
        }
        let status = try #require(F.status(report))
        #expect(status.suspect)
        #expect(status.suspectReasons.count == 1)
        #expect(status.suspectReasons.first?.hasPrefix("denied flood: ") == true)
        #expect(status.suspectReasons.first?.hasSuffix("(90.9% of demand), 0% retried") == true)
        let patient = try #require(F.status(report, AllocationKey(tenant: "patient", upstream: F.pool)))
        #expect(!patient.suspect)
        #expect(F.close(patient.retryRatio, 5.0 / 16, tolerance: 1e-6))
    }

    @Test func suspectOnNearEmptyRequests() throws {
        var run = ClassifierRun(start: t0)
        var report = run.tick()
        for _ in 0..<24 {
            report = run.tick { script, from, to in
                F.served(&script, 20, from: from, to: to, prompt: 3, completion: 2)
                    + F.served(&script, 20, from: from, to: to, tenant: "chatty", prompt: 30, completion: 20)
            }
        }
        let status = try #require(F.status(report))
        #expect(status.suspectReasons == ["near-empty requests: 100% of served requests carry at most 16 tokens"])
        #expect(F.status(report, AllocationKey(tenant: "chatty", upstream: F.pool))?.suspect == false)
    }
}
