import AllotCore
import AllotProtocol
import AllotSignals
import AllotStore
import Foundation
import Testing

@testable import AllotLoop

/// The demand of agents (closed-loop clients): constrained tenants claim more than they are served,
/// sparse tenants keep their long-window rate, and the clump sizes the buckets.
@Suite("Consumption Classifier: demand of agents")
struct ClassifierAgentDemandTests {
    typealias F = ClassifierFixtures
    let t0 = ClassifierFixtures.t0
    /// 110 RPM allocated (the tenant fills it: 120 served), TPM far above what it uses.
    let allocation = PerDimension<Double>(rpm: 110, tpm: 1_000_000)

    /// Ten minutes of 5-s ticks (every window but the long one settled), `perTick` served requests in each
    /// (120 per minute by default), each having waited `queueMs`, plus what `extra` adds.
    private func run(
        queueMs: Double?, allocation: PerDimension<Double>? = nil, perTick: Int = 10, prompt: Int64 = 100,
        completion: Int64 = 50,
        extra: (inout TelemetryScript, Double, Double) -> [StoredEvent] = { _, _, _ in [] }
    ) throws -> (TenantObservation, TenantStatus) {
        var run = ClassifierRun(start: t0)
        var report: ClassifierReport?
        for _ in 0..<120 {
            report = run.tick(allocations: [F.acme: allocation ?? self.allocation]) { script, from, to in
                script.spread(perTick, from: from, to: to) { script, at in
                    script.event(at: at, queueMs: queueMs, prompt: prompt, completion: completion)
                } + extra(&script, from, to)
            }
        }
        let last = try #require(report)
        return (try #require(F.observation(last)), try #require(F.status(last)))
    }

    @Test func aTenantWaitingInGatewayQueuesClaimsWhatItIsServedPlusTheProbeWhereItFillsIt() throws {
        // 10 requests per 5-s tick each waiting 1 s: 2 requests waiting on average (≥ 0.5).
        let (observation, status) = try run(queueMs: 1_000)
        #expect(F.close(status.servedShort.rpm, 120, tolerance: 1e-3))
        #expect((status.servedShort.rpm + 1) / allocation.rpm >= 0.9)  // it fills its RPM allocation…
        // …so it claims what it was served (and one request) plus a quarter, less the engine's 20 % headroom:
        // the allocation that follows is its use plus a quarter — not its allocation plus a quarter, which a
        // clumpy tenant's waits would ratchet up tick after tick while it used less. (Through the level's
        // hysteresis: within its 10 % deadband of the claim.)
        let claim = (status.servedShort.rpm + 1) * 1.25 / 1.2
        #expect(abs(observation.demand.rpm - claim) <= 0.1 * observation.demand.rpm)
        #expect(observation.demand.rpm >= 120 * (1 - 1e-9))
        // TPM: served 18,000 of 1,000,000 — not the constraint: the measured demand stands.
        #expect(F.close(observation.demand.tpm, 120 * 150, tolerance: 1e-3))
        #expect(status.demand == observation.demand)
    }

    @Test func aTenantThatDoesNotWaitReportsWhatItWanted() throws {
        let (observation, status) = try run(queueMs: nil)
        #expect(F.close(observation.demand.rpm, 120, tolerance: 1e-3))
        #expect(F.close(observation.demand.rpm, status.servedShort.rpm, tolerance: 1e-3))
        // Waits too short to matter: 10 requests × 0.1 s per 5 s = 0.2 waiting on average (< 0.5).
        let (brief, _) = try run(queueMs: 100)
        #expect(F.close(brief.demand.rpm, 120, tolerance: 1e-3))
    }

    @Test func aTenantThatWaitsButLeavesItsAllocationUnusedClaimsNothing() throws {
        // The same traffic and waits against 140 RPM: 120 served is 86 % of it. Its waits are clumps meeting
        // its bucket, not a rate it lacks — more rate would sit idle.
        let (observation, _) = try run(queueMs: 1_000, allocation: PerDimension(rpm: 140, tpm: 1_000_000))
        #expect(F.close(observation.demand.rpm, 120, tolerance: 1e-3))
    }

    @Test func aTenantOfLargeCallsWithinOneCallOfItsTokensClaimsTokens() throws {
        // Two 30,000-token calls per 5-s tick (720,000 TPM) against 820,000 TPM: 88 % of it, 91 % once one
        // call's worth is counted — a 30k-token tenant cannot use the last 20,000 tokens of a minute. It
        // waits, so it claims TPM; its requests are far from their RPM.
        let tight = PerDimension<Double>(rpm: 1_000, tpm: 820_000)
        let (observation, status) = try run(
            queueMs: 2_000, allocation: tight, perTick: 2, prompt: 29_000, completion: 1_000)
        #expect(status.servedShort.tpm < 0.9 * tight.tpm)
        #expect((status.servedShort.tpm + 30_000) >= 0.9 * tight.tpm)
        let claim = (status.servedShort.tpm + 30_000) * 1.25 / 1.2
        #expect(claim > 0.9 * tight.tpm)
        #expect(abs(observation.demand.tpm - claim) <= 0.1 * observation.demand.tpm)
        #expect(F.close(observation.demand.rpm, 24, tolerance: 1e-3))
    }

    /// Denials (or waits) that name the concurrency cap raise `concurrency_bound` once they are a tenth of what the
    /// tenant wants: more rate would not reach it (round 10's 40-s answers). They claim nothing (not pressing).
    @Test func aTenantHeldByItsConcurrencyCapIsAlerted() throws {
        func alerts(_ errorType: String, perTick: Int) throws -> (TenantObservation, [LoopAlert]) {
            var run = ClassifierRun(start: t0)
            var report: ClassifierReport?
            var firstRaised: LoopAlert?
            for _ in 0..<120 {
                report = run.tick(allocations: [F.acme: allocation]) { script, from, to in
                    script.spread(10, from: from, to: to) { script, at in script.event(at: at) }
                        + script.spread(perTick, from: from, to: to) { script, at in
                            script.event(at: at, outcome: .deniedLocal, estimated: 150, errorType: errorType)
                        }
                }
                firstRaised = firstRaised ?? report?.alerts.first { $0.kind == "concurrency_bound" }
            }
            let last = try #require(report)
            let bound = last.alerts.filter { $0.kind == "concurrency_bound" }
            // Dated from the tick that raised it, not from every tick that keeps it.
            if let firstRaised { #expect(bound.map(\.since) == [firstRaised.since]) }
            return (try #require(F.observation(last)), bound)
        }
        // 36 a minute denied by the cap, of 156 wanted (23 %).
        let (observation, bound) = try alerts("concurrency", perTick: 3)
        let alert = try #require(bound.first)
        #expect(bound.count == 1)
        #expect(alert.since < t0 + 119 * 5)
        #expect(alert.severity == .warning)
        #expect(alert.tenant == F.acme.tenant)
        #expect(alert.message.hasPrefix("acme on openai/gpt-4o: 36 requests a minute denied or kept waiting by a "))
        #expect(alert.message.contains("of 156 wanted"))
        #expect(observation.pressing == PerDimension(false))
        // 12 a minute (9 % of 132): below a tenth; and denials by the RPM bucket are not the cap's.
        #expect(try alerts("concurrency", perTick: 1).1.isEmpty)
        #expect(try alerts("rpm", perTick: 3).1.isEmpty)
    }

    @Test func deniedDemandMakesATenantConstrainedToo() throws {
        // One more request per tick denied (its first attempt: wanted, 132 per minute): 9 % of its demand.
        let (observation, status) = try run(queueMs: nil) { script, from, _ in
            [script.event(at: from + 1, outcome: .deniedLocal, estimated: 150)]
        }
        // Not blocked (fewer than a tenth denied): it claims its use plus the probe, less the headroom, which
        // the 132 it wants (each request once) already covers.
        let claim = (status.servedShort.rpm + 1) * 1.25 / 1.2
        #expect(claim < 132)
        #expect(F.close(observation.demand.rpm, 132, tolerance: 1e-3))
        #expect(observation.pressing == PerDimension(false))
    }

    @Test func aBlockedTenantClaimsItsAllocationGrownUpToItsAttempts() throws {
        // Three requests per tick denied by its RPM bucket (36 per minute, over a tenth of what it wants):
        // blocked. Against 130 RPM (120 served: 93 %) it claims its allocation × 1.5 (195) — its served rate,
        // an average over the window, would lag every rise — but no more than its attempts (156 per minute)
        // plus the probe, less the engine's headroom: 162.5.
        let (observation, _) = try run(queueMs: nil, allocation: PerDimension(rpm: 130, tpm: 1_000_000)) {
            script, from, to in
            script.spread(3, from: from, to: to) { script, at in
                script.event(at: at, outcome: .deniedLocal, estimated: 150, errorType: "rpm")
            }
        }
        // (Through the level's hysteresis: within its 10 % deadband of the claim.)
        #expect(abs(observation.demand.rpm - 156 * 1.25 / 1.2) <= 0.1 * observation.demand.rpm)
        #expect(observation.demand.rpm >= 156)
        // Its TPM (far from its allocation, and not what its denials name) is what it asked for.
        let asked: Double = 13 * 12 * 150
        #expect(F.close(observation.demand.tpm, asked, tolerance: 1e-3))
        // Pressing in RPM (the engine's damper follows its rise at once), not in TPM.
        #expect(observation.pressing == PerDimension(rpm: true, tpm: false))
    }

    @Test func aTenantBlockedByItsRPMBucketClaimsRPMHoweverFullItsTokenAllocationLooks() throws {
        // As above, but its token allocation is 12,000 a minute while it is served 18,000 (tokens it borrowed, or an
        // allocation that lagged): tokens "used" at 151 %, requests at 93 %. Its denials all name `rpm`, so tokens
        // are not what holds it back and the request dimension is claimed (pressing). Compared with the token
        // usage, requests (under 75 % of it) were claimed in neither dimension.
        let (observation, _) = try run(queueMs: nil, allocation: PerDimension(rpm: 130, tpm: 12_000)) {
            script, from, to in
            script.spread(3, from: from, to: to) { script, at in
                script.event(at: at, outcome: .deniedLocal, estimated: 150, errorType: "rpm")
            }
        }
        #expect(observation.pressing == PerDimension(rpm: true, tpm: false))
        #expect(abs(observation.demand.rpm - 156 * 1.25 / 1.2) <= 0.1 * observation.demand.rpm)
    }

    @Test func requestsReportedWaitingOnTheRPMBucketBlockTheTenantAndCountOnceAsDemand() throws {
        // Per 5-s tick: 10 requests served at once, 3 reported `queued` on the RPM bucket after waiting (the
        // gateway's report of a batch request at 5 s: `retry` 0), and 3 earlier ones admitted after their wait
        // (reported again: `retry` 1). Wanted: 13 a tick (156 a minute), each request once; served: 156.
        let (observation, status) = try run(queueMs: nil, allocation: PerDimension(rpm: 160, tpm: 1_000_000)) {
            script, from, to in
            script.spread(3, from: from, to: to) { script, at in
                script.event(at: at, outcome: .queued, queueMs: 5_000, estimated: 150, retry: 0, errorType: "rpm")
            }
                + script.spread(3, from: from, to: to) { script, at in
                    script.event(at: at, queueMs: 30_000, prompt: 100, completion: 50, retry: 1)
                }
        }
        #expect(F.close(status.servedShort.rpm, 156, tolerance: 1e-3))
        #expect(F.close(status.queuedRPM, 36, tolerance: 1e-3))
        // 36 waiting a minute is over a tenth of what it wants: blocked in RPM, as by as many denials. It claims
        // its allocation × 1.5 (240), but no more than what arrives (156, the waiting requests at their arrival)
        // plus the probe, less the engine's headroom: 162.5.
        #expect(observation.pressing == PerDimension(rpm: true, tpm: false))
        #expect(abs(observation.demand.rpm - 156 * 1.25 / 1.2) <= 0.1 * observation.demand.rpm)
        #expect(observation.demand.rpm >= 156)
        // Its tokens: the 13 requests a tick wanted, the waiting ones at their estimate.
        let asked: Double = 12 * (10 * 150 + 3 * 150)
        #expect(F.close(observation.demand.tpm, asked, tolerance: 1e-3))
    }

    @Test func aBlockedTenantsJumpIsReadOverTheFastWindow() throws {
        // Ten minutes at 240 served per minute against 250 RPM, 3 requests per tick denied by the RPM bucket
        // (blocked: 276 attempts per minute, a claim of 287.5, which the allocation × 1.5 = 375 does not cap).
        // The claim of a blocked tenant's rise passes the level at once (evidence, not noise).
        let allocation = PerDimension<Double>(rpm: 250, tpm: 10_000_000)
        var run = ClassifierRun(start: t0)
        func tick(denied: Int) -> ClassifierReport {
            run.tick(allocations: [F.acme: allocation]) { script, from, to in
                F.served(&script, 20, from: from, to: to)
                    + script.spread(denied, from: from, to: to) { script, at in
                        script.event(at: at, outcome: .deniedLocal, estimated: 150, errorType: "rpm")
                    }
            }
        }
        var report = tick(denied: 3)
        for _ in 0..<119 { report = tick(denied: 3) }
        let steady = try #require(F.observation(report)?.demand.rpm)
        #expect(abs(steady - 276 * 1.25 / 1.2) <= 0.1 * steady)  // within the level's deadband
        // Its attempts jump to 720 per minute (40 denied a tick). One tick later the short window (60 s) has
        // moved 8 % of the way (312 per minute: a claim of 325); the fast window (10 s) 39 % (450: 469). The
        // claim follows the fast one, as far as the allocation's growth allows: 375.
        report = tick(denied: 40)
        let shortRate = 276 + (720 - 276) * F.weight(5, 60)
        #expect(shortRate * 1.25 / 1.2 < 330)
        let fastRate = 276 + (720 - 276) * F.weight(5, 10)
        #expect(fastRate * 1.25 / 1.2 > 375)
        #expect(F.close(F.observation(report)?.demand.rpm, 375, tolerance: 1e-6))
        #expect(F.observation(report)?.pressing.rpm == true)
    }

    @Test func aSparseTenantKeepsItsLongWindowRateBetweenTasks() throws {
        var run = ClassifierRun(start: t0)
        // A task of 10 calls, then three quiet minutes.
        _ = run.tick { script, from, to in F.served(&script, 10, from: from, to: to) }
        var report: ClassifierReport?
        for _ in 0..<36 { report = run.tick() }
        let last = try #require(report)
        let status = try #require(F.status(last))
        let observation = try #require(F.observation(last))
        // The short window read fewer than 20 requests: the long-window rate is the floor.
        #expect(status.servedShort.rpm < status.servedLong.rpm)
        #expect(observation.demand.rpm >= status.servedLong.rpm * (1 - 1e-9))
        #expect(observation.demand.tpm >= status.servedLong.tpm * (1 - 1e-9))
        #expect(observation.demand.rpm < 6)  // 5 % of the task's 120 per minute
    }

    @Test func aQuietSpellIsNotAStopUntilItOutlastsTwiceTheLongestSeenAndASparseTenantNeverStops() throws {
        // A tenant working in bursts: a minute at 144 requests a minute, then two minutes quiet, for half an hour.
        // Its short window holds more than a sparse tenant's 20 requests when it goes quiet.
        var bursts = ClassifierRun(start: t0)
        var report: ClassifierReport?
        for tick in 0..<360 {
            report = bursts.tick { script, from, to in tick % 36 < 12 ? F.served(&script, 12, from: from, to: to) : [] }
        }
        // 185 s after its last burst: a long quiet spell, not yet a stop (its longest, 125 s between bursts, has faded
        // over the long window to 96 s; twice that is 192 s). Sparse by now, it has the long-window rate as its
        // floor…
        for _ in 0..<13 { report = bursts.tick() }
        var last = try #require(report)
        var status = try #require(F.status(last))
        #expect(status.servedShort.rpm < 20)
        #expect(status.servedLong.rpm > 20)
        #expect(try #require(F.observation(last)).demand.rpm >= status.servedLong.rpm * (1 - 1e-9))
        // …and a minute after that it has stopped: its demand level has followed its short window down (it stays
        // apart from the level for `levelPersistSeconds` first), before it is idle (300 s).
        for _ in 0..<16 { report = bursts.tick() }
        last = try #require(report)
        status = try #require(F.status(last))
        #expect(status.tenantClass != .idle)
        #expect(try #require(F.observation(last)).demand.rpm < 0.5 * status.servedLong.rpm)

        // A tenant sparse while it works (a task of 10 calls every two minutes) is never stopped: four and a half
        // minutes after its last task the long-window rate is still its floor.
        var sparse = ClassifierRun(start: t0)
        for tick in 0..<360 {
            report = sparse.tick { script, from, to in tick % 24 == 0 ? F.served(&script, 10, from: from, to: to) : [] }
        }
        for _ in 0..<31 { report = sparse.tick() }
        last = try #require(report)
        status = try #require(F.status(last))
        #expect(status.tenantClass != .idle)
        #expect(status.servedLong.rpm > 2)
        #expect(try #require(F.observation(last)).demand.rpm >= status.servedLong.rpm * (1 - 1e-9))
    }

    @Test func theClumpIsTheMostDemandInOneTickDecayingOverTheLongWindow() throws {
        var run = ClassifierRun(start: t0)
        var report = run.tick { script, from, to in F.served(&script, 10, from: from, to: to) }
        var observation = try #require(F.observation(report))
        #expect(observation.clump.rpm == 10)
        #expect(observation.clump.tpm == 1_500)
        report = run.tick { script, from, to in F.served(&script, 2, from: from, to: to) }
        observation = try #require(F.observation(report))
        #expect(F.close(observation.clump.rpm, 10 * exp(-5.0 / 900)))
        #expect(F.close(observation.clump.tpm, 1_500 * exp(-5.0 / 900)))
    }

    @Test func aSliceKeepsRoomForOneMoreRequestWithinTheTenantsBucket() {
        let entry = TenantEntry(
            id: "acme", upstream: F.pool, tier: "free", priority: 3, rpm: Bucket(rate: 9, burst: 4),
            tpm: Bucket(rate: 10_800, burst: 4_800), queueWeight: 1, reason: Reasons(rpm: "demand", tpm: "demand"),
            maxConcurrency: 8)
        // A third of the tenant: 3 RPM; its bucket 4/3 + 1 request; TPM 1,600 + 1,200 tokens per request.
        let third = Share(entry: entry, rpm: 3, tpm: 3_600, gatewayCount: 3).apply(to: entry, rpm: 3, tpm: 3_600)
        #expect(abs(third.rpm.burst - (4.0 / 3 + 1)) < 1e-9)
        #expect(abs(third.tpm.burst - (1_600 + 1_200)) < 1e-9)
        // Never above the tenant's own bucket.
        let most = Share(entry: entry, rpm: 8, tpm: 9_600, gatewayCount: 2).apply(to: entry, rpm: 8, tpm: 9_600)
        #expect(most.rpm.burst == 4)
        #expect(most.tpm.burst == 4_800)
    }

    @Test func aSliceThatRefillsARequestMoreSlowlyThanEveryHalfMinuteKeepsRoomForTwo() {
        // A long-context tenant: 30k-token calls in clumps of eight (its buckets), 20 rpm allocated with headroom
        // (its rates read 12k tokens a request; its buckets, 30k).
        let entry = TenantEntry(
            id: "longdoc", upstream: F.pool, tier: "premium", priority: 1, rpm: Bucket(rate: 20, burst: 8),
            tpm: Bucket(rate: 240_000, burst: 240_000), queueWeight: 1, reason: Reasons(rpm: "demand", tpm: "demand"),
            maxConcurrency: 8)
        // One of 32 gateways: 0.625 rpm and 7,500 TPM, a request every 96 s. Room for two 30k-token calls: a
        // bucket of one (19.5k tokens, as before) was full more often than a call waited there.
        let small = Share(entry: entry, rpm: 0.625, tpm: 7_500, gatewayCount: 32)
            .apply(to: entry, rpm: 0.625, tpm: 7_500)
        #expect(abs(small.rpm.burst - (8.0 / 32 + 2)) < 1e-9)
        #expect(abs(small.tpm.burst - (7_500 + 2 * 30_000)) < 1e-6)
        // One of three: 6.7 rpm and 80k TPM, a request every 9 s or 23 s: room for one.
        let third = Share(entry: entry, rpm: 20.0 / 3, tpm: 80_000, gatewayCount: 3)
            .apply(to: entry, rpm: 20.0 / 3, tpm: 80_000)
        #expect(abs(third.rpm.burst - (8.0 / 3 + 1)) < 1e-9)
        #expect(abs(third.tpm.burst - (80_000 + 30_000)) < 1e-6)
        // A tenant whose whole allocation is 1.5 rpm is small itself, not by the split: room for one.
        let tiny = TenantEntry(
            id: "tiny", upstream: F.pool, tier: "free", priority: 3, rpm: Bucket(rate: 1.5, burst: 3),
            tpm: Bucket(rate: 3_000, burst: 6_000), queueWeight: 1, reason: Reasons(rpm: "demand", tpm: "demand"),
            maxConcurrency: 8)
        let tinyThird = Share(entry: tiny, rpm: 0.5, tpm: 1_000, gatewayCount: 3).apply(to: tiny, rpm: 0.5, tpm: 1_000)
        #expect(abs(tinyThird.rpm.burst - (1 + 1)) < 1e-9)
        #expect(abs(tinyThird.tpm.burst - (2_000 + 2_000)) < 1e-6)
    }
}
