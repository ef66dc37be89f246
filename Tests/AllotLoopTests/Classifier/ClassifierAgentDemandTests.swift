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
    /// 110 RPM allocated (the tenant fills it: ~104 served, within one request of 90 %), TPM far above what it
    /// uses.
    let allocation = PerDimension<Double>(rpm: 110, tpm: 1_000_000)

    /// 24 ticks of 5 s, 10 served requests each (120 per minute), each having waited `queueMs`.
    private func run(queueMs: Double?) throws -> (TenantObservation, TenantStatus) {
        var run = ClassifierRun(start: t0)
        var report: ClassifierReport?
        for _ in 0..<24 {
            report = run.tick(allocations: [F.acme: allocation]) { script, from, to in
                script.spread(10, from: from, to: to) { script, at in
                    script.event(at: at, queueMs: queueMs, prompt: 100, completion: 50)
                }
            }
        }
        let last = try #require(report)
        return (try #require(F.observation(last)), try #require(F.status(last)))
    }

    @Test func aTenantWaitingInGatewayQueuesClaimsItsAllocationPlusTheProbeWhereItFillsIt() throws {
        // 10 requests per 5-s tick each waiting 1 s: 2 requests waiting on average (≥ 0.5).
        let (observation, status) = try run(queueMs: 1_000)
        let served = 120 * F.weight(120, 60)  // 24 ticks of 5 s into the 60-s EWMA
        #expect(F.close(status.servedShort.rpm, served))
        #expect((served + 1) / allocation.rpm >= 0.9)  // it fills its RPM allocation…
        #expect(F.close(observation.demand.rpm, allocation.rpm * 1.25))  // …so it claims 137.5
        // TPM: served 18,000 of 1,000,000 — not the constraint: the measured demand stands.
        #expect(F.close(observation.demand.tpm, served * 150))
        #expect(status.demand == observation.demand)
    }

    @Test func aTenantThatDoesNotWaitReportsWhatItWanted() throws {
        let (observation, status) = try run(queueMs: nil)
        #expect(F.close(observation.demand.rpm, status.servedShort.rpm))
        #expect(observation.demand.rpm < allocation.rpm)
        // Waits too short to matter: 10 requests × 0.1 s per 5 s = 0.2 waiting on average (< 0.5).
        let (brief, _) = try run(queueMs: 100)
        #expect(F.close(brief.demand.rpm, status.servedShort.rpm))
    }

    @Test func aTenantThatWaitsButLeavesItsAllocationUnusedClaimsNothing() throws {
        // The same traffic and waits against 140 RPM: ~104 served is 75 % of it. Its waits are clumps meeting
        // its bucket, not a rate it lacks — more rate would sit idle.
        var run = ClassifierRun(start: t0)
        var report: ClassifierReport?
        for _ in 0..<24 {
            report = run.tick(allocations: [F.acme: PerDimension(rpm: 140, tpm: 1_000_000)]) { script, from, to in
                script.spread(10, from: from, to: to) { script, at in
                    script.event(at: at, queueMs: 1_000, prompt: 100, completion: 50)
                }
            }
        }
        let last = try #require(report)
        let observation = try #require(F.observation(last))
        let status = try #require(F.status(last))
        #expect(F.close(observation.demand.rpm, status.servedShort.rpm))
    }

    @Test func aTenantOfLargeCallsWithinOneCallOfItsTokensClaimsTokens() throws {
        // Two 30,000-token calls per 5-s tick (~720,000 TPM after the 60-s EWMA's 2 minutes: 623,000) against
        // 720,000 TPM: 87 % of it, 91 % once one call's worth is counted — a 30k-token tenant cannot use
        // the last 20,000 tokens of a minute. It waits, so it claims TPM; its requests are far from their RPM.
        var run = ClassifierRun(start: t0)
        var report: ClassifierReport?
        let tight = PerDimension<Double>(rpm: 1_000, tpm: 720_000)
        for _ in 0..<24 {
            report = run.tick(allocations: [F.acme: tight]) { script, from, to in
                script.spread(2, from: from, to: to) { script, at in
                    script.event(at: at, queueMs: 2_000, prompt: 29_000, completion: 1_000)
                }
            }
        }
        let last = try #require(report)
        let observation = try #require(F.observation(last))
        let status = try #require(F.status(last))
        #expect(status.servedShort.tpm < 0.9 * tight.tpm)
        #expect((status.servedShort.tpm + 30_000) >= 0.9 * tight.tpm)
        #expect(F.close(observation.demand.tpm, tight.tpm * 1.25))
        #expect(F.close(observation.demand.rpm, status.servedShort.rpm))
    }

    @Test func deniedDemandMakesATenantConstrainedToo() throws {
        var run = ClassifierRun(start: t0)
        var report: ClassifierReport?
        for _ in 0..<24 {
            report = run.tick(allocations: [F.acme: allocation]) { script, from, to in
                F.served(&script, 10, from: from, to: to)
                    + [script.event(at: from + 1, outcome: .deniedLocal, estimated: 150)]
            }
        }
        let last = try #require(report)
        let observation = try #require(F.observation(last))
        #expect(F.close(observation.demand.rpm, allocation.rpm * 1.25))
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
        #expect(F.close(observation.demand.rpm, status.servedLong.rpm))
        #expect(F.close(observation.demand.tpm, status.servedLong.tpm))
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
}
