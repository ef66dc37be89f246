import Testing

@testable import AllotSimulation

@Suite struct MetricsTests {
    @Test func waterFillingGivesWeightedMaxMinShares() {
        // Capacity 100, weights 1:1:2, the first capped at 10: f = 90 / 3 = 30 → 10, 30, 60.
        #expect(WaterFill.shares(capacity: 100, weights: [1, 1, 2], limits: [10, 1000, 1000]) == [10, 30, 60])
        // Enough for everyone: everyone at their limit.
        #expect(WaterFill.shares(capacity: 100, weights: [1, 1], limits: [20, 30]) == [20, 30])
        #expect(WaterFill.shares(capacity: 100, weights: [], limits: []) == [])
    }

    /// Two tenants of one pool (true 100 rpm / 100,000 tpm), four 15-s intervals.
    static func trace(
        served: [(Double, Double)], allocations: [(Double?, Double?)], denials: Int = 1,
        demand: (Double, Double) = (80, 80), arrived: (Double, Double)? = nil
    ) -> SimulationTrace {
        let samples = served.indices.map { k in
            TraceSample(
                start: Double(k) * 15,
                pools: [
                    PoolSample(
                        trueRPM: 100, trueTPM: 100_000, demandRPM: demand.0 + demand.1,
                        demandTPM: (demand.0 + demand.1) * 1000,
                        servedRPM: served[k].0 + served[k].1, servedTPM: (served[k].0 + served[k].1) * 1000,
                        upstreamAttempts: 10, upstream429s: k == 0 ? 1 : 0, upstreamOverloaded: 0, estimatedRPM: nil,
                        estimatedTPM: nil)
                ],
                tenants: [
                    TenantSample(
                        demandRPM: demand.0, demandTPM: demand.0 * 1000, servedRPM: served[k].0,
                        servedTPM: served[k].0 * 1000,
                        allocationRPM: allocations[k].0, allocationTPM: allocations[k].0.map { $0 * 1000 },
                        denials: denials,
                        upstream429s: 0, arrivedRPM: arrived?.0, arrivedTPM: arrived.map { $0.0 * 1000 }),
                    TenantSample(
                        demandRPM: demand.1, demandTPM: demand.1 * 1000, servedRPM: served[k].1,
                        servedTPM: served[k].1 * 1000,
                        allocationRPM: allocations[k].1, allocationTPM: allocations[k].1.map { $0 * 1000 },
                        denials: denials,
                        upstream429s: 0, arrivedRPM: arrived?.1, arrivedTPM: arrived.map { $0.1 * 1000 }),
                ])
        }
        return SimulationTrace(
            scenario: "t", strategy: "s", seed: 1, durationSeconds: 60, sampleIntervalSeconds: 15,
            pools: [TracePool(id: "p", declaredRPM: 100, declaredTPM: 100_000)],
            tenants: ["a", "b"].map {
                TraceTenant(
                    id: $0, tier: "standard", pool: "p", weight: 1, floorRPM: 0, floorTPM: 0, ceilingRPM: nil,
                    ceilingTPM: nil, firstRequestAt: 0, firstAllocationAt: $0 == "a" ? 5 : 15)
            },
            samples: samples,
            tasks: [
                TaskOutcome(tenant: 0, taskClass: "batch", arrival: 0, deadline: 30, finished: 10),
                TaskOutcome(tenant: 0, taskClass: "batch", arrival: 0, deadline: 30, finished: 40),
                TaskOutcome(tenant: 1, taskClass: "batch", arrival: 0, deadline: 30, finished: nil),
                TaskOutcome(tenant: 1, taskClass: "batch", arrival: 0, deadline: 30, finished: 20),
                // Its deadline falls after the run: not judged.
                TaskOutcome(tenant: 1, taskClass: "batch", arrival: 50, deadline: 100, finished: nil),
            ],
            capacityChangeTimes: [])
    }

    @Test func fairRunIsNotStarvedAndFullyUsed() {
        let metrics = RunMetrics(
            trace: Self.trace(
                served: Array(repeating: (50, 50), count: 4), allocations: Array(repeating: (50, 50), count: 4)))
        #expect(metrics.utilisation == 1)
        #expect(metrics.upstream429Rate == 1.0 / 40)
        #expect(metrics.starvationTenantMinutes == 0)
        #expect(metrics.totalVariation == 0)
        #expect(metrics.timeToFirstAllocation == 10)  // (5 + 15) / 2
        let tier = metrics.tiers["standard"]!
        #expect(tier.tasks == 4)
        #expect(tier.sloAttainment == 0.5)
        #expect(tier.latencyP50 == 20)
        #expect(tier.latencyP95 == nil)  // the unfinished task is the slowest: "never"
        #expect(tier.jain == 1)
    }

    @Test func starvedTenantIsCountedOverTheTrailingMinute() {
        // Entitled 50 each; b gets 10 (< 0.7 × 50) while throttled, in the one full 60-s window.
        let metrics = RunMetrics(
            trace: Self.trace(
                served: Array(repeating: (90, 10), count: 4), allocations: Array(repeating: (90, 10), count: 4)))
        #expect(metrics.starvationTenantMinutes == 0.25)  // one 15-s interval with a full window behind it
        let jain = metrics.tiers["standard"]!.jain!
        #expect(abs(jain - (2.0 * 2.0) / (2 * (1.8 * 1.8 + 0.2 * 0.2))) < 1e-12)
        // Without throttling (no denial, no refusal, no long wait in a queue) a tenant that got little did not want
        // more: a call paced for a moment is no throttling (a clumpy tenant back from a lull) ...
        var queued = Self.trace(
            served: Array(repeating: (90, 10), count: 4), allocations: Array(repeating: (90, 10), count: 4),
            denials: 0)
        #expect(RunMetrics(trace: queued).starvationTenantMinutes == 0)
        // ... but a call that waited 5 s or more in a queue throttles as much as a denial (outside evaluation round
        // 33: fifo-backoff's calls waiting in its one queue never counted), in any interval of the minute ...
        queued.samples[0].tenants[1].longQueueWaits = 1
        #expect(RunMetrics(trace: queued).starvationTenantMinutes == 0.25)
        // ... while a tenant none of whose calls was held back in the interval got all it asked for there.
        queued.samples[3].tenants[1].heldBack = false
        #expect(RunMetrics(trace: queued).starvationTenantMinutes == 0)
        // Refused by the upstream as overloaded (503/529) is throttled too: a strategy that sends into the
        // refusals is not spared what one that sheds them locally is charged.
        var refused = Self.trace(
            served: Array(repeating: (90, 10), count: 4), allocations: Array(repeating: (90, 10), count: 4),
            denials: 0)
        for k in refused.samples.indices { refused.samples[k].tenants[1].upstreamOverloaded = 1 }
        #expect(RunMetrics(trace: refused).starvationTenantMinutes == 0.25)
        // Nothing of b's held back in the last interval (no call waiting in a queue or for a retry): it is getting
        // all it asks for there, whatever the trailing minute says.
        var lull = Self.trace(
            served: Array(repeating: (90, 10), count: 4), allocations: Array(repeating: (90, 10), count: 4))
        lull.samples[3].tenants[1].heldBack = false
        #expect(RunMetrics(trace: lull).starvationTenantMinutes == 0)
        lull.samples[2].tenants[1].heldBack = false
        lull.samples[3].tenants[1].heldBack = true
        #expect(RunMetrics(trace: lull).starvationTenantMinutes == 0.25)
    }

    @Test func aTenantIsChargedFromItsFirstRequest() {
        // Outside evaluation round 44, L6: a tenant first asking 1 s before the run's end was charged a whole
        // interval. b is starved in the last interval (45–60 s); first asking at 50 s, it is charged 10 s of it.
        var late = Self.trace(
            served: Array(repeating: (90, 10), count: 4), allocations: Array(repeating: (90, 10), count: 4))
        late.tenants[1].firstRequestAt = 50
        let metrics = RunMetrics(trace: late)
        #expect(metrics.starvationTenantMinutes == 10.0 / 60)
        #expect(metrics.starvedTenants == ["b": 10.0 / 60])
        // First asking before the interval, or at its start: the whole interval.
        for first in [40.0, 45] {
            late.tenants[1].firstRequestAt = first
            #expect(RunMetrics(trace: late).starvationTenantMinutes == 0.25, "\(first)")
        }
    }

    @Test func jainJudgesTheDimensionThatBinds() {
        // Both want 80 rpm of 100 and 100k tpm each of 100k (tokens bind: 2× against requests' 1.6×); each
        // is served 50 rpm, a 60k tpm and b 40k: a over its due in the tokens that bind, b under, while the
        // requests are even. Entitled 50 rpm and 50k tpm each.
        var trace = Self.trace(
            served: Array(repeating: (50, 50), count: 4), allocations: Array(repeating: (50, 50), count: 4))
        for k in trace.samples.indices {
            trace.samples[k].pools[0].demandTPM = 200_000
            trace.samples[k].tenants[0].demandTPM = 100_000
            trace.samples[k].tenants[1].demandTPM = 100_000
            trace.samples[k].tenants[0].servedTPM = 60_000
            trace.samples[k].tenants[1].servedTPM = 40_000
        }
        let jain = RunMetrics(trace: trace).tiers["standard"]!.jain!
        // Tokens alone: 1.2 and 0.8. Summed with the even requests it read (1.1, 0.9): 0.990.
        #expect(abs(jain - 4 / (2 * (1.2 * 1.2 + 0.8 * 0.8))) < 1e-12)
        // Where requests bind (the tokens wanted below capacity) the same service is even.
        for k in trace.samples.indices { trace.samples[k].pools[0].demandTPM = 90_000 }
        #expect(RunMetrics(trace: trace).tiers["standard"]!.jain == 1)
    }

    @Test func aTiersAllocationAndServiceAreJudgedAgainstItsEntitlementAsAWhole() {
        // Both want 80 rpm of 100 (requests bind; entitled 50 each, 200 over the four intervals of the tier): a is
        // allocated 30 and served 40, b allocated 40 and served 50 → allocated 280 ÷ 400, served 360 ÷ 400.
        let trace = Self.trace(
            served: Array(repeating: (40, 50), count: 4), allocations: Array(repeating: (30, 40), count: 4))
        let tier = RunMetrics(trace: trace).tiers["standard"]!
        #expect(abs(tier.allocatedShare! - 0.7) < 1e-12)
        #expect(abs(tier.servedShare! - 0.9) < 1e-12)
        // A strategy that allocates nothing (fifo-backoff) has no allocated share; a tenant before its first
        // allocation holds none.
        let unallocated = Self.trace(
            served: Array(repeating: (40, 50), count: 4), allocations: Array(repeating: (nil, nil), count: 4))
        #expect(RunMetrics(trace: unallocated).tiers["standard"]!.allocatedShare == nil)
        #expect(RunMetrics(trace: unallocated).tiers["standard"]!.servedShare.map { abs($0 - 0.9) < 1e-12 } == true)
        var late = trace
        late.samples[0].tenants[0].allocationRPM = nil
        #expect(abs(RunMetrics(trace: late).tiers["standard"]!.allocatedShare! - 250.0 / 400) < 1e-12)
    }

    @Test func starvationIsJudgedAgainstTheDemandThatArrived() {
        // Both nominally want 80 of 100; a's tasks arrived at 1.5× that, b's at 30 rpm. Served 70 / 30.
        // Against the nominal rate b is entitled 50 and starved (30 < 0.7 × 50); against what arrived it
        // asked for 30 and got it.
        let served = Array(repeating: (70.0, 30.0), count: 4)
        let nominal = RunMetrics(trace: Self.trace(served: served, allocations: Array(repeating: (70, 30), count: 4)))
        #expect(nominal.starvationTenantMinutes == 0.25)
        let arrived = RunMetrics(
            trace: Self.trace(served: served, allocations: Array(repeating: (70, 30), count: 4), arrived: (120, 30)))
        #expect(arrived.starvationTenantMinutes == 0)
        #expect(arrived.tiers["standard"]!.jain == 1)  // served / entitled = 70/70 and 30/30
        // The other way round: a nominally wants 40 but its tasks arrived at 60; b wants (and sent) 80.
        // Nominal entitlements 40 / 60 leave a's 30 unstarved (≥ 28); arrived ones are 50 / 50, and 30 is
        // below 35.
        let served2 = Array(repeating: (30.0, 70.0), count: 4)
        let low = RunMetrics(
            trace: Self.trace(served: served2, allocations: Array(repeating: (30, 70), count: 4), demand: (40, 80)))
        #expect(low.starvationTenantMinutes == 0)
        let high = RunMetrics(
            trace: Self.trace(
                served: served2, allocations: Array(repeating: (30, 70), count: 4), demand: (40, 80), arrived: (60, 80))
        )
        #expect(high.starvationTenantMinutes == 0.25)
    }

    @Test func arrivedDemandScalesTheNominalShapeOverACentredFiveMinutes() {
        // 60 intervals of 10 s, nominal 80 throughout; arrivals 160 in the first five minutes, 80 after.
        // Sample k's demand is 80 × arrived ÷ expected over samples k−15…k+15 (clipped to the run).
        let samples = (0..<60).map { k in
            TraceSample(
                start: Double(k) * 10,
                pools: [
                    PoolSample(
                        trueRPM: 1000, trueTPM: 1_000_000, demandRPM: 80, demandTPM: 80_000, servedRPM: 20,
                        servedTPM: 20_000, upstreamAttempts: 10, upstream429s: 0, upstreamOverloaded: 0,
                        estimatedRPM: nil, estimatedTPM: nil)
                ],
                tenants: [
                    TenantSample(
                        demandRPM: 80, demandTPM: 80_000, servedRPM: 20, servedTPM: 20_000, allocationRPM: nil,
                        allocationTPM: nil, denials: 1, upstream429s: 0, arrivedRPM: k < 30 ? 160 : 80,
                        arrivedTPM: k < 30 ? 160_000 : 80_000)
                ])
        }
        let trace = SimulationTrace(
            scenario: "t", strategy: "s", seed: 1, durationSeconds: 600, sampleIntervalSeconds: 10,
            pools: [TracePool(id: "p", declaredRPM: 1000, declaredTPM: 1_000_000)],
            tenants: [
                TraceTenant(
                    id: "a", tier: "standard", pool: "p", weight: 1, floorRPM: 0, floorTPM: 0, ceilingRPM: nil,
                    ceilingTPM: nil, firstRequestAt: 0, firstAllocationAt: nil)
            ],
            samples: samples, tasks: [], capacityChangeTimes: [])
        let demand = RunMetrics.arrivedDemand(trace: trace)
        #expect(demand.rpm[0][0] == 160)  // samples 0…15 all arrived at 160
        #expect(demand.rpm[14][0] == 160)  // 0…29
        #expect(abs(demand.rpm[30][0] - 80 * (15 * 160 + 16 * 80) / (31 * 80)) < 1e-9)  // 15…45
        #expect(demand.rpm[45][0] == 80)  // 30…59
        #expect(abs(demand.tpm[30][0] - 1000 * demand.rpm[30][0]) < 1e-6)
        // Entitled its arrived demand (capacity is ample), served 20 while throttled: starved throughout
        // from the first full minute on.
        #expect(abs(RunMetrics(trace: trace).starvationTenantMinutes - 55.0 / 6) < 1e-9)
    }

    /// The tenants of a group with arrived demand in an interval share their weight in the entitlement, as the engine
    /// shares it among its active ones, max-min among themselves: `g1` and `g2` one customer, `b` another, all
    /// standard, on a 900-rpm pool.
    @Test func aGroupsTenantsWithDemandShareItsWeightInTheEntitlement() {
        func tenant(_ id: String, group: String?) -> TraceTenant {
            TraceTenant(
                id: id, tier: "standard", pool: "p", weight: 2, floorRPM: 0, floorTPM: 0, ceilingRPM: nil,
                ceilingTPM: nil, firstRequestAt: 0, firstAllocationAt: nil, group: group)
        }
        let pool = PoolSample(
            trueRPM: 900, trueTPM: 900_000, demandRPM: 3000, demandTPM: 3_000_000, servedRPM: 900, servedTPM: 900_000,
            upstreamAttempts: 10, upstream429s: 0, upstreamOverloaded: 0, estimatedRPM: nil, estimatedTPM: nil)
        let sample = TenantSample(
            demandRPM: 1000, demandTPM: 1_000_000, servedRPM: 300, servedTPM: 300_000, allocationRPM: nil,
            allocationTPM: nil, denials: 0, upstream429s: 0)
        let trace = SimulationTrace(
            scenario: "t", strategy: "s", seed: 1, durationSeconds: 30, sampleIntervalSeconds: 10,
            pools: [TracePool(id: "p", declaredRPM: 900, declaredTPM: 900_000)],
            tenants: [tenant("g1", group: "g"), tenant("g2", group: "g"), tenant("b", group: nil)],
            samples: [0, 10, 20].map { TraceSample(start: $0, pools: [pool], tenants: [sample, sample, sample]) },
            tasks: [], capacityChangeTimes: [])
        // Interval 0: all three want 1,000; interval 1: `g2` wants nothing; interval 2: `g2` wants 50, and leaves the
        // rest of the group's half to `g1` (divided evenly, `g1` was entitled to 283.3 and `b` to 566.7: a review of
        // 2026-12-01).
        let arrived = [[1000.0, 1000, 1000], [1000, 0, 1000], [1000, 50, 1000]]
        let entitled = RunMetrics.entitlements(trace: trace, arrived: (arrived, arrived.map { $0.map { $0 * 1000 } }))
        #expect(entitled.rpm[0] == [225, 225, 450])
        #expect(entitled.rpm[1] == [450, 0, 450])
        #expect(entitled.rpm[2] == [400, 50, 450])
        #expect(entitled.tpm[0] == [225_000, 225_000, 450_000])
    }

    /// One tenant of a 100-rpm pool wanting 80 and throttled throughout, served `served[k]` in 10-s
    /// intervals; the other idle.
    static func starvationTrace(served: [Double]) -> SimulationTrace {
        onePoolTrace(served: served, trueRPM: { _ in 100 }, demandRPM: 80, denials: 1, changes: [])
    }

    /// One pool and one tenant in 10-s intervals (TPM × 1000 throughout), served `served[k]`.
    static func onePoolTrace(
        served: [Double], trueRPM: (Int) -> Double, demandRPM: Double, denials: Int, changes: [Double]
    ) -> SimulationTrace {
        let samples = served.indices.map { k in
            TraceSample(
                start: Double(k) * 10,
                pools: [
                    PoolSample(
                        trueRPM: trueRPM(k), trueTPM: trueRPM(k) * 1000, demandRPM: demandRPM,
                        demandTPM: demandRPM * 1000, servedRPM: served[k], servedTPM: served[k] * 1000,
                        upstreamAttempts: 10, upstream429s: 0, upstreamOverloaded: 0, estimatedRPM: nil,
                        estimatedTPM: nil)
                ],
                tenants: [
                    TenantSample(
                        demandRPM: demandRPM, demandTPM: demandRPM * 1000, servedRPM: served[k],
                        servedTPM: served[k] * 1000, allocationRPM: nil, allocationTPM: nil, denials: denials,
                        upstream429s: 0)
                ])
        }
        return SimulationTrace(
            scenario: "t", strategy: "s", seed: 1, durationSeconds: Double(served.count) * 10,
            sampleIntervalSeconds: 10, pools: [TracePool(id: "p", declaredRPM: 100, declaredTPM: 100_000)],
            tenants: [
                TraceTenant(
                    id: "a", tier: "standard", pool: "p", weight: 1, floorRPM: 0, floorTPM: 0, ceilingRPM: nil,
                    ceilingTPM: nil, firstRequestAt: 0, firstAllocationAt: nil)
            ],
            samples: samples, tasks: [], capacityChangeTimes: changes)
    }

    /// A run's short last interval counts for its length, not a whole interval (outside evaluation round 33, L3: a
    /// 605-s run counted its 600–605 s as 10 s of starvation).
    @Test func aShortLastIntervalCountsForItsLength() {
        var trace = Self.starvationTrace(served: Array(repeating: 20, count: 35))
        trace.durationSeconds = 345  // the last interval, 340–345 s, is 5 s long
        let metrics = RunMetrics(trace: trace)
        #expect(abs(metrics.starvationTenantMinutes - 295.0 / 60) < 1e-9)
        #expect(abs(metrics.sustainedStarvationTenantMinutes - 295.0 / 60) < 1e-9)
        #expect(abs(metrics.starvedTenants["a"]! - 295.0 / 60) < 1e-9)
    }

    /// Served exactly 70 % of the entitlement is not starvation, whatever the order the window's intervals were
    /// added in (round 33, L2: running sums with subtraction left such a tie to rounding).
    @Test func servedExactlySeventyPercentIsNotStarved() {
        // Entitled 80 each interval (demand 80 of 100); after eight intervals of other values, served 56 = 0.7 × 80.
        // Of the fifteen judged windows (ending at intervals 5…19) only the first is below 70 %; a running sum that
        // added and took away the first eight values was left a hair under 56 × 6 and counted the last seven too.
        // (Requests alone: no tokens are wanted, so the token dimension does not decide.)
        let served = [30.1, 3.1, 86.6, 47.3, 71.9, 87.9, 71.4, 92.1] + Array(repeating: 56.0, count: 12)
        var trace = Self.starvationTrace(served: served)
        for k in trace.samples.indices {
            trace.samples[k].tenants[0].demandTPM = 0
            trace.samples[k].tenants[0].arrivedTPM = 0
        }
        let metrics = RunMetrics(trace: trace)
        #expect(metrics.starvedTenants["a"] == 1.0 / 6)
    }

    @Test func onlyStarvedStretchesOfFiveMinutesAreSustainedStarvation() {
        // Entitled 80, served 20 (< 0.7 × 80): every interval with a full 60-s window behind it is
        // starved. 35 intervals give 30 of them (five minutes), 34 give 29 (one short).
        let dip = RunMetrics(trace: Self.starvationTrace(served: Array(repeating: 20, count: 35)))
        #expect(abs(dip.starvationTenantMinutes - 30.0 / 6) < 1e-9)  // intervals 5…34
        let short = RunMetrics(trace: Self.starvationTrace(served: Array(repeating: 20, count: 34)))
        #expect(abs(short.starvationTenantMinutes - 29.0 / 6) < 1e-9)
        #expect(short.sustainedStarvationTenantMinutes == 0)
        // Thirty starved intervals in a row count whole.
        #expect(abs(dip.sustainedStarvationTenantMinutes - 5) < 1e-9)
        // report.json names the tenant they belong to (and a run without starvation names none).
        #expect(dip.starvedTenants == ["a": dip.starvationTenantMinutes])
        #expect(RunMetrics(trace: Self.starvationTrace(served: Array(repeating: 80, count: 35))).starvedTenants == [:])
        // A stretch broken by a minute served in full is two dips, neither sustained: the well-served
        // intervals lift the trailing window above 0.7 × 80 for a while.
        let broken = RunMetrics(
            trace: Self.starvationTrace(
                served: Array(repeating: 20, count: 25) + Array(repeating: 80, count: 6)
                    + Array(repeating: 20, count: 25)))
        #expect(broken.starvationTenantMinutes > 5)
        #expect(broken.sustainedStarvationTenantMinutes == 0)
        #expect(broken.value(of: "sustained_starvation_tenant_minutes", tier: nil) == 0)
    }

    @Test func totalVariationIsPercentOfCapacityMovedPerMinute() {
        // a: 50 → 70 → 50 → 50 and b: 50 → 30 → 50 → 50, both dimensions alike: 80 rpm moved over
        // capacity 100 in one minute = 80 %/min.
        let metrics = RunMetrics(
            trace: Self.trace(
                served: Array(repeating: (50, 50), count: 4), allocations: [(50, 50), (70, 30), (50, 50), (50, 50)]))
        #expect(abs(metrics.totalVariation! - 80) < 1e-9)
        let none = RunMetrics(
            trace: Self.trace(
                served: Array(repeating: (50, 50), count: 4), allocations: Array(repeating: (nil, nil), count: 4)))
        #expect(none.totalVariation == nil)
    }

    /// One pool whose true capacity goes from 100 to 150 rpm at 60 s (and TPM × 1000), its tenants' nominal
    /// demand 120 rpm throughout, served `served[k]` in the six 10-s intervals after the change.
    static func convergenceTrace(served: [Double]) -> SimulationTrace {
        onePoolTrace(
            served: Array(repeating: 100.0, count: 6) + served, trueRPM: { $0 < 6 ? 100 : 150 }, demandRPM: 120,
            denials: 0, changes: [60])
    }

    /// A backlog drained at the new capacity, above the nominal demand, has converged: served within
    /// [0.9 × min(true, demand), 1.1 × true] over trailing 30-s means. Judged within ±10 % of min(true, demand),
    /// serving 150 against a demand of 120 was "never".
    @Test func drainingABacklogAtTheCapacityHasConverged() {
        // 30-s means from the change's first interval: 100, 100, 116.7, 133.3, 150, 150 — within [108, 165]
        // from the third interval on (80–90 s), which ends 30 s after the change.
        let draining = RunMetrics(trace: Self.convergenceTrace(served: [100, 100, 150, 150, 150, 150]))
        #expect(draining.hasCapacityChange)
        #expect(draining.convergenceSeconds == 30)
        // Serving at the demand converges as before: within from the first interval on.
        let atDemand = RunMetrics(trace: Self.convergenceTrace(served: [120, 120, 120, 120, 120, 120]))
        #expect(atDemand.convergenceSeconds == 10)
        // Above 1.1 × the true capacity (165) is not settled: "never".
        let above = RunMetrics(trace: Self.convergenceTrace(served: [170, 170, 170, 170, 170, 170]))
        #expect(above.hasCapacityChange)
        #expect(above.convergenceSeconds == nil)
    }

    /// A change inside the run's last interval has no interval to be judged by: no change, not "never" (a change at
    /// 295 s of a 300-s run read "never" for every strategy).
    @Test func aChangeInsideTheLastIntervalIsNotJudged() {
        var trace = Self.convergenceTrace(served: [120, 120, 120, 120, 120, 120])
        trace.capacityChangeTimes = [115]  // the twelve intervals start at 0 … 110 s
        let late = RunMetrics(trace: trace)
        #expect(!late.hasCapacityChange)
        #expect(late.convergenceSeconds == nil)
        #expect(!late.neverReached.contains("convergence_s"))
        trace.capacityChangeTimes = [110]  // at the last interval's start: judged on that interval alone
        #expect(RunMetrics(trace: trace).hasCapacityChange)
        #expect(RunMetrics(trace: trace).convergenceSeconds == 10)
    }

    /// The interval the next change falls inside is no more judged than the one the change itself falls inside
    /// (outside evaluation round 33: a step at 455 s of 10-s samples made the 450-s interval, half at the next
    /// capacity, the last judged, and every strategy that followed the capacity read "never").
    @Test func theIntervalTheNextChangeFallsInsideIsNotJudged() {
        // Settled at 120 from the change at 60 s; the next change, at 105 s, falls inside the 100-s interval, in
        // which the strategy follows it (served 60), and it is settled again in the 110-s interval: 10 s after the
        // first change, 15 s after the second.
        var trace = Self.convergenceTrace(served: [120, 120, 120, 120, 60, 120])
        trace.capacityChangeTimes = [60, 105]
        let metrics = RunMetrics(trace: trace)
        #expect(metrics.convergenceSeconds == 15)
        #expect(!metrics.neverReached.contains("convergence_s"))
        // A change with no whole interval before the next one has none to be judged by: at 95 s, the next at 105 s
        // (the 100-s interval holds the next change; judged on it alone, "never").
        trace.capacityChangeTimes = [60, 95, 105]
        #expect(RunMetrics(trace: trace).convergenceSeconds == 15)
        #expect(RunMetrics(trace: trace).hasCapacityChange)
        // At 115 s (inside the run's last interval, not judged itself) the 100-s interval lies wholly before it and
        // is judged: not settled there.
        trace.capacityChangeTimes = [60, 115]
        #expect(RunMetrics(trace: trace).convergenceSeconds == nil)
        #expect(RunMetrics(trace: trace).neverReached.contains("convergence_s"))
    }

    /// A pool its tenants' ceilings hold below its capacity has settled where they hold it: the target is what the
    /// ceilings let its tenants be served of their demand (review of round 33: free tenants of 20 % each on a cut
    /// pool, held there by policy, read "never" while over-sending baselines "converged").
    @Test func convergenceIsJudgedAgainstWhatTheCeilingsLetThrough() {
        // After the change the pool has 150 rpm and the tenant wants 120, served 60.
        var trace = Self.convergenceTrace(served: [60, 60, 60, 60, 60, 60])
        #expect(RunMetrics(trace: trace).convergenceSeconds == nil)
        // Its ceiling is 40 % of the pool: 60 of 150, all it may be served.
        trace.tenants[0].ceilingShareRPM = 0.4
        #expect(RunMetrics(trace: trace).convergenceSeconds == 10)
        // An absolute ceiling of 100 lets it be served its whole demand: not settled at 60.
        trace.tenants[0].ceilingShareRPM = nil
        trace.tenants[0].ceilingRPM = 100
        #expect(RunMetrics(trace: trace).convergenceSeconds == nil)
    }

    /// A ceiling given as a share of the pool caps the entitlement at that share of the true capacity of each
    /// interval, as the engine resolves it against the capacity it allocates (round 33: against the declared
    /// capacity, `allot` was counted as starving tenants held to 20 % of a pool cut below its declaration).
    @Test func aCeilingShareIsResolvedAgainstTheTrueCapacity() {
        // Declared 1,000 rpm, true 100; a's ceiling 20 %, b's none; both want 80.
        var trace = Self.trace(
            served: Array(repeating: (20, 80), count: 4), allocations: Array(repeating: (20, 80), count: 4))
        trace.pools[0].declaredRPM = 1_000
        trace.tenants[0].ceilingShareRPM = 0.2
        let entitled = RunMetrics.entitlements(trace: trace)
        #expect(entitled.rpm.allSatisfy { $0 == [20, 80] })
        #expect(RunMetrics(trace: trace).starvationTenantMinutes == 0)
        // Half the capacity in the last interval: 10 and 40 there.
        for k in trace.samples.indices where k == 3 { trace.samples[k].pools[0].trueRPM = 50 }
        #expect(RunMetrics.entitlements(trace: trace).rpm[3] == [10, 40])
        // An absolute ceiling stays what it is; with both, the lower.
        trace.tenants[0].ceilingRPM = 15
        #expect(RunMetrics.entitlements(trace: trace).rpm[0] == [15, 80])
        #expect(RunMetrics.entitlements(trace: trace).rpm[3] == [10, 40])
    }

    /// Convergence after a change is judged until the next drop's latency warning begins, not until the drop: a loop
    /// that cuts on the warning is below the old capacity there, as it should be (round 10: "never").
    @Test func convergenceIsJudgedUntilTheNextDropsWarningBegins() {
        // Settled at 120 from 60 s, then cut to 60 over the last two intervals (100–120 s), where the warning of a
        // drop at 130 s (40 s of warning: from 90 s) has begun.
        var trace = Self.convergenceTrace(served: [120, 120, 120, 120, 60, 60])
        #expect(RunMetrics(trace: trace).convergenceSeconds == nil)
        trace.warningStartTimes = [90]
        #expect(RunMetrics(trace: trace).convergenceSeconds == 10)
        // A warning that began before the change belongs to it, not to the next one.
        trace.warningStartTimes = [20]
        #expect(RunMetrics(trace: trace).convergenceSeconds == nil)
        // And the scenario gives each drop's warning start, none for a rise, none before t = 0.
        var scenario = try! decode(scenarioJSON(duration: 600))
        scenario.pools[0].latencyWarningSeconds = 60
        scenario.pools[0].capacity = [
            CapacityStep(at: 0, rpm: 600, tpm: 1_000_000), CapacityStep(at: 30, rpm: 300, tpm: 1_000_000),
            CapacityStep(at: 200, rpm: 600, tpm: 1_000_000), CapacityStep(at: 400, rpm: 600, tpm: 500_000),
        ]
        #expect(scenario.warningStartTimes == [0, 340])
    }

    /// Convergence after a change judges the pools that changed then: a pool beside it whose capacity never moved
    /// has nothing to converge to, whatever it serves.
    @Test func convergenceJudgesOnlyThePoolWhoseCapacityChanged() {
        var trace = Self.convergenceTrace(served: [120, 120, 120, 120, 120, 120])
        trace.pools.append(TracePool(id: "q", declaredRPM: 200, declaredTPM: 200_000))
        for k in trace.samples.indices {
            // Unchanged at 200 rpm, served 50 of a nominal 120: outside any band around its demand.
            trace.samples[k].pools.append(
                PoolSample(
                    trueRPM: 200, trueTPM: 200_000, demandRPM: 120, demandTPM: 120_000, servedRPM: 50,
                    servedTPM: 50_000, upstreamAttempts: 5, upstream429s: 0, upstreamOverloaded: 0, estimatedRPM: nil,
                    estimatedTPM: nil))
        }
        // Judged over both pools, the unchanged one made it "never".
        #expect(RunMetrics(trace: trace).convergenceSeconds == 10)
    }

    /// `trace`'s pool "p" with a second pool "q" beside it (no tenants; true 200 rpm / 200,000 tpm, served 120),
    /// 20 attempts and 5 429s per interval, whose nominal demand is `qDemand[k]` rpm (× 1000 tpm).
    static func twoPoolTrace(served: [(Double, Double)], qDemand: [Double]) -> SimulationTrace {
        var trace = Self.trace(served: served, allocations: Array(repeating: (50, 50), count: served.count))
        trace.pools.append(TracePool(id: "q", declaredRPM: 200, declaredTPM: 200_000))
        for k in trace.samples.indices {
            trace.samples[k].pools.append(
                PoolSample(
                    trueRPM: 200, trueTPM: 200_000, demandRPM: qDemand[k], demandTPM: qDemand[k] * 1000,
                    servedRPM: qDemand[k] > 200 ? 200 : 120, servedTPM: qDemand[k] > 200 ? 200_000 : 120_000,
                    upstreamAttempts: 20, upstream429s: 5, upstreamOverloaded: 0, estimatedRPM: nil, estimatedTPM: nil))
        }
        return trace
    }

    /// Each pool's utilisation and 429 rate by the overall rules over that pool alone; the overall figures stay
    /// the whole scenario's: its utilisation the mean over every contended interval of every pool (not the mean of
    /// the pools' means), its 429 rate all 429s ÷ all attempts.
    @Test func eachPoolHasItsOwnUtilisationAndUpstream429Rate() {
        // p: 100 rpm, nominal demand 160, served 50, 75, 100, 25: utilisation (0.5 + 0.75 + 1 + 0.25) / 4; 1 429 in
        // 40 attempts. q: demand 120 of 200, never contended: no utilisation; 20 429s in 80 attempts.
        let served: [(Double, Double)] = [(25, 25), (37.5, 37.5), (50, 50), (12.5, 12.5)]
        let onePool = RunMetrics(trace: Self.trace(served: served, allocations: Array(repeating: (50, 50), count: 4)))
        let quiet = RunMetrics(trace: Self.twoPoolTrace(served: served, qDemand: [120, 120, 120, 120]))
        #expect(
            quiet.pools == [
                "p": PoolMetrics(utilisation: 0.625, upstream429Rate: 0.025, upstreamAttempts: 40, upstream429s: 1),
                "q": PoolMetrics(utilisation: nil, upstream429Rate: 0.25, upstreamAttempts: 80, upstream429s: 20),
            ])
        #expect(onePool.pools == ["p": quiet.pools["p"]!])
        // An uncontended pool leaves the overall utilisation as it was; its attempts count in the overall rate.
        #expect(quiet.utilisation == 0.625 && onePool.utilisation == 0.625)
        #expect(quiet.upstream429Rate == 21.0 / 120)
        #expect(quiet.upstreamAttempts == 120 && quiet.upstream429s == 21)
        // q contended (300 of 200) in the first two intervals, served 200 in them: its utilisation 1 over those
        // two; overall (0.5 + 1 + 0.75 + 1 + 1 + 0.25) / 6 = 0.75, where the mean of the pools' means is 0.8125.
        let busy = RunMetrics(trace: Self.twoPoolTrace(served: served, qDemand: [300, 300, 120, 120]))
        #expect(busy.pools["p"] == quiet.pools["p"])
        #expect(busy.pools["q"]?.utilisation == 1)
        #expect(busy.utilisation == 0.75)
    }

    @Test func utilisationIsMeasuredOnlyWhileDemandExceedsCapacity() {
        let metrics = RunMetrics(
            trace: Self.trace(
                served: Array(repeating: (20, 20), count: 4), allocations: Array(repeating: (50, 50), count: 4),
                demand: (20, 20)))
        #expect(metrics.utilisation == nil)
    }
}
