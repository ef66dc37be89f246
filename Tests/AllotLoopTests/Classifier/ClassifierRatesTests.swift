import AllotCore
import AllotSignals
import AllotStore
import Foundation
import Testing

@testable import AllotLoop

@Suite("Consumption Classifier: rates, demand, tokens, gateways (SPEC 5)")
struct ClassifierRatesTests {
    typealias F = ClassifierFixtures
    let t0 = ClassifierFixtures.t0

    @Test func exactTimeDecayEWMAsOverIrregularTicks() throws {
        var run = ClassifierRun(start: t0)
        // First tick: Δ is the loop interval (5 s); 10 served in it → 120 per minute.
        var report = run.tick { script, from, to in F.served(&script, 10, from: from, to: to) }
        var status = try #require(F.status(report))
        var short = 120 * F.weight(5, 60)
        var long = 120 * F.weight(5, 900)
        #expect(F.close(status.servedShort.rpm, short))
        // The long-window usage shown is read for the time the window has covered (the EWMA divided by the weight
        // it has gathered), as the demand level reads it: 120, not a 180th of it.
        #expect(F.close(status.servedLong.rpm, long / F.weight(5, 900)))
        #expect(F.close(status.servedLong.rpm, 120))
        #expect(F.close(status.servedShort.tpm, short * 150))
        // The demand the engine is given is the rate itself: a young track's EWMA is divided by the weight
        // it has had time to gather (`1 − e^(−5/60)` after one tick), not read as a twelfth of its rate.
        #expect(F.close(status.demand.rpm, 120))
        #expect(F.close(status.demand.tpm, 120 * 150))
        #expect(status.samples == 10)
        // Not a burst: both windows read 120 a minute for the time they cover (until 2026-11-30 the raw long window
        // read 0.67, and a new tenant's flat rate was `bursting` for ten minutes: outside evaluation round 38).
        #expect(status.tenantClass == .steady)
        #expect(F.close(status.trend, 0, tolerance: 1e-9))

        // An empty tick: pure decay.
        report = run.tick()
        status = try #require(F.status(report))
        short *= exp(-5.0 / 60)
        long *= exp(-5.0 / 900)
        #expect(F.close(status.servedShort.rpm, short))
        #expect(F.close(status.servedLong.rpm, long / F.weight(10, 900)))

        // A late tick (12 s): 6 events → 30 per minute over the tick.
        report = run.tick(after: 12) { script, from, to in F.served(&script, 6, from: from, to: to) }
        status = try #require(F.status(report))
        short = short * exp(-12.0 / 60) + 30 * F.weight(12, 60)
        long = long * exp(-12.0 / 900) + 30 * F.weight(12, 900)
        #expect(F.close(status.servedShort.rpm, short))
        #expect(F.close(status.servedLong.rpm, long / F.weight(22, 900)))
        #expect(F.close(status.tokensPerRequest, 150))
        #expect(F.close(status.trend, (short / F.weight(22, 60)) / (long / F.weight(22, 900)) - 1))
        #expect(status.samples == 16)
        #expect(status.lastActivityAt == t0 + 10 + 12 * 5 / 6)  // the last of 6 events spread over the tick

        // Observation and status agree (no cold start here).
        let observation = try #require(F.observation(report))
        #expect(observation.served == status.servedShort)
        #expect(observation.demand == status.demand)
        #expect(observation.confidence == 1)
        #expect(F.close(observation.inputTokenShare, 100.0 / 150))
    }

    @Test func aNewTenantsBackfilledMinuteReadsAsItsRateNotOneTicks() throws {
        // A gateway's first report carries a minute of backlog: 300 requests over [t0 − 55, t0 + 5), 300 per
        // minute. Folding them as one 5-second tick's would read 3600 per minute.
        var run = ClassifierRun(start: t0)
        var report = run.tick { script, _, to in F.served(&script, 300, from: to - 60, to: to) }
        var status = try #require(F.status(report))
        #expect(F.close(status.demand.rpm, 300, tolerance: 0.01))
        // The next ticks keep the pace (25 per 5 s): the rate stays 300, counted over all the time seen.
        for _ in 0..<3 {
            report = run.tick { script, from, to in F.served(&script, 25, from: from, to: to) }
        }
        status = try #require(F.status(report))
        #expect(F.close(status.demand.rpm, 300, tolerance: 0.01))
    }

    @Test func demandCountsDeniedAndQueuedWithEstimatedTokens() throws {
        var run = ClassifierRun(start: t0)
        let report = run.tick { script, from, to in
            F.served(&script, 6, from: from, to: to)
                + script.spread(3, from: from, to: to) { script, at in
                    script.event(at: at, outcome: .deniedLocal, estimated: 200)
                }
                // A request reported while it waits: its wait so far is not a wait (its attempt reports the whole).
                + [script.event(at: from + 1, outcome: .queued, queueMs: 5_000, estimated: 300)]
                // A first attempt refused upstream is a request wanted too; a retry of any request is not.
                + [script.event(at: from + 2, outcome: .quotaExhausted, status: 429, estimated: 400)]
                + [script.event(at: from + 3, outcome: .deniedLocal, queueMs: 40, estimated: 200, retry: 1)]
        }
        let status = try #require(F.status(report))
        let w = F.weight(5, 60)
        // Each request once, at its first attempt: 6 + 3 + 1 + 1 in 5 s (the first tick: the rate itself).
        let tokens: Double = 6 * 150 + 3 * 200 + 300 + 400
        #expect(F.close(status.demand.rpm, 11.0 * 12))
        #expect(F.close(status.demand.tpm, tokens * 12))
        // The attempts themselves (what the starvation alert compares): served + denied + queued, retries too.
        let asked = status.servedShort.rpm + status.deniedRPM + status.queuedRPM
        #expect(F.close(asked, 11.0 * 12 * w))
        #expect(F.close(status.servedShort.rpm, 6 * 12 * w))
        #expect(F.close(status.deniedRPM, 4 * 12 * w))
        #expect(F.close(status.queuedRPM, 12 * w))
        #expect(status.samples == 11)
        #expect(status.queueWaitP95Ms == 42)  // the middle of the [40, 44) bucket
    }

    @Test func learnsCompletionTokenPercentiles() throws {
        var run = ClassifierRun(start: t0)
        let small = AllocationKey(tenant: "small", upstream: F.pool)
        let report = run.tick { script, from, to in
            script.spread(100, from: from, to: to) { script, at in
                let index = Int64(((at - from) * 20).rounded())
                return script.event(at: at, prompt: 1000, completion: index + 1)
            }
                + script.spread(40, from: from, to: to) { script, at in
                    script.event(at: at, tenant: "small", prompt: 20, completion: 5)
                }
        }
        // 1…100: the 50th value lies in [48, 52), the 95th in [88, 96); reported at their middles.
        #expect(F.status(report)?.completionTokensP50 == 49.5)
        #expect(F.status(report)?.completionTokensP95 == 91.5)
        // Small counts are exact.
        #expect(F.status(report, small)?.completionTokensP50 == 5)
        #expect(F.status(report, small)?.completionTokensP95 == 5)
    }

    @Test func completionPercentilesFollowRecentTraffic() throws {
        var run = ClassifierRun(start: t0)
        // 40 minutes of 1,000-token answers, then 10 minutes of 100-token answers: the old ones fade
        // (weight e^(−t/900)) below 50 % of the total, so the median moves to the new shape.
        for _ in 0..<480 {
            _ = run.tick { script, from, to in F.served(&script, 5, from: from, to: to, completion: 1000) }
        }
        var report = run.tick { script, from, to in F.served(&script, 5, from: from, to: to, completion: 1000) }
        #expect(F.status(report)?.completionTokensP50 == 991.5)  // [960, 1024)'s integral middle
        for _ in 0..<120 {
            report = run.tick { script, from, to in F.served(&script, 5, from: from, to: to, completion: 100) }
        }
        #expect(F.status(report)?.completionTokensP50 == 99.5)
        #expect(F.status(report)?.completionTokensP95 == 991.5)
    }

    @Test func aTenantIsYoungForItsFirstShortWindow() throws {
        // One request a tick, to gw-1, gw-2 and gw-3 in turn: always fewer than five per gateway seen.
        var run = ClassifierRun(start: t0)
        var ticks = 0
        func next() -> ClassifierReport {
            ticks += 1
            let gateway = "gw-\((ticks - 1) % 3 + 1)"
            return run.tick { script, from, to in F.served(&script, 1, from: from, to: to, gateway: gateway) }
        }
        var report = next()
        #expect(F.status(report)?.young == true)
        while F.status(report)?.young == true, ticks < 100 { report = next() }
        // 5-s ticks: young while less than the 60-s short window is folded; the 12th folds its last second.
        #expect(ticks == 12)
    }

    @Test func aTenantWhoseCallsKeepToOneGatewayIsNotYoungForLong() throws {
        var run = ClassifierRun(start: t0)
        var report = run.tick { script, from, to in F.served(&script, 2, from: from, to: to) }
        #expect(F.status(report)?.young == true)
        report = run.tick { script, from, to in F.served(&script, 2, from: from, to: to) }
        #expect(F.status(report)?.young == true)
        // The fifth request, still at gw-1.
        report = run.tick { script, from, to in F.served(&script, 1, from: from, to: to) }
        #expect(F.status(report)?.young == false)
    }

    @Test func gatewaySharesGiveANewGatewayItsMinimum() throws {
        var run = ClassifierRun(start: t0)
        var report = run.tick { script, from, to in F.served(&script, 12, from: from, to: to) }
        #expect(F.status(report)?.gatewayShares == ["gw-1": 1])
        for _ in 0..<10 { report = run.tick { script, from, to in F.served(&script, 12, from: from, to: to) } }
        report = run.tick { script, from, to in
            F.served(&script, 12, from: from, to: to) + F.served(&script, 1, from: from, to: to, gateway: "gw-2")
        }
        let status = try #require(F.status(report))
        let one = try #require(status.gatewayServed["gw-1"]?.rpm)
        let two = try #require(status.gatewayServed["gw-2"]?.rpm)
        #expect(F.close(two, 12 * F.weight(5, 60)))
        let raw = two / (one + two)
        #expect(raw < 0.05)
        // Counted as 2 · (one + two) requests (the short window's EWMA as a count; dispersion 1): far beyond
        // chance, so the shares keep nearly all of the departure from an even split before the lift.
        let chiSquare = 2 * (one + two) * 2 * (raw - 0.5) * (raw - 0.5) / 0.5
        let kept = 1 - 1 / chiSquare
        #expect(kept > 0.99)
        let liftedTwo = max(0.05, 0.5 + kept * (raw - 0.5))
        let liftedOne = 0.5 + kept * (0.5 - raw)
        let expected = F.tilted(["gw-1": liftedOne, "gw-2": liftedTwo])
        #expect(F.close(status.gatewayShares["gw-2"], expected["gw-2"]!))
        #expect(F.close(status.gatewayShares.values.reduce(0, +), 1))

        // Both gateways carry equal traffic for long: equal shares, tilted ±2 %.
        for _ in 0..<200 {
            report = run.tick { script, from, to in
                F.served(&script, 6, from: from, to: to) + F.served(&script, 6, from: from, to: to, gateway: "gw-2")
            }
        }
        let even = F.tilted(["gw-1": 0.5, "gw-2": 0.5])
        #expect(F.close(F.status(report)?.gatewayShares["gw-1"], even["gw-1"]!, tolerance: 1e-6))
        // A gateway silent for the long window is dropped from the slices.
        for _ in 0..<181 { report = run.tick { script, from, to in F.served(&script, 6, from: from, to: to) } }
        #expect(F.status(report)?.gatewayShares.keys.sorted() == ["gw-1"])
    }

    /// What a gateway admitted, for drift, is every attempt it let through, whatever the upstream answered; its local
    /// denials are not (outside evaluation round 28: counted by served calls, a gateway ignoring its slice while the
    /// provider refused the excess read at a third of its rate).
    @Test func aGatewayAdmittedWhatItLetThroughWhateverTheUpstreamAnswered() throws {
        var run = ClassifierRun(start: t0)
        let report = run.tick { script, from, to in
            F.served(&script, 2, from: from, to: to)
                + script.spread(6, from: from, to: to) { script, at in
                    script.event(at: at, outcome: .quotaExhausted, status: 429, estimated: 400)
                }
                + script.spread(2, from: from, to: to) { script, at in
                    script.event(at: at, outcome: .serverError, status: 500, estimated: 400)
                }
                + script.spread(5, from: from, to: to) { script, at in
                    script.event(at: at, outcome: .deniedLocal, estimated: 400)
                }
        }
        let admitted = try #require(F.status(report)?.gatewayServed["gw-1"])
        // A 5-s tick: ten attempts are 120 a minute, folded into the 60-s window.
        #expect(F.close(admitted.rpm, 10 * 12 * F.weight(5, 60)))
        #expect(F.close(admitted.tpm, (2 * 150 + 8 * 400) * 12 * F.weight(5, 60)))
    }

    @Test func gatewaySharesStayEvenUnlessTheCountsDepartFromEvenByMoreThanChance() throws {
        // 30 and 29 requests a tick at two gateways (360 and 348 rpm): as a count, 2 · 708 requests in the short
        // window, whose 51/49 split gives Pearson's X² ≈ 0.4 against an even split, below its expectation 1.
        // (59 requests every tick throughout: an index of dispersion of 1.)
        var run = ClassifierRun(start: t0)
        func split(_ first: Int, _ script: inout TelemetryScript, _ from: Double, _ to: Double) -> [StoredEvent] {
            F.served(&script, first, from: from, to: to)
                + F.served(&script, 59 - first, from: from, to: to, gateway: "gw-2")
        }
        var report = run.tick { script, from, to in split(30, &script, from, to) }
        for _ in 0..<39 { report = run.tick { script, from, to in split(30, &script, from, to) } }
        let even = F.tilted(["gw-1": 0.5, "gw-2": 0.5])
        #expect(F.close(F.status(report)?.gatewayShares["gw-1"], even["gw-1"]!))
        #expect(F.close(F.status(report)?.gatewayShares["gw-2"], even["gw-2"]!))
        // 49 and 10 (sticky routing, or a weighted balancer): X² ≈ 620, and the shares follow the counts.
        for _ in 0..<200 { report = run.tick { script, from, to in split(49, &script, from, to) } }
        let status = try #require(F.status(report))
        let one = try #require(status.gatewayServed["gw-1"]?.rpm)
        let two = try #require(status.gatewayServed["gw-2"]?.rpm)
        let raw = one / (one + two)
        #expect(F.close(raw, 49.0 / 59, tolerance: 1e-6))
        let chiSquare = 2 * (one + two) * 2 * (raw - 0.5) * (raw - 0.5) / 0.5
        #expect(chiSquare > 600)
        let kept = 0.5 + (1 - 1 / chiSquare) * (raw - 0.5)
        #expect(F.close(status.gatewayShares["gw-1"], F.tilted(["gw-1": kept, "gw-2": 1 - kept])["gw-1"]!))
    }

    @Test func gatewayTiltsSpreadEvenlyAndRotateWithTheTenant() {
        // One gateway: no tilt. Two: −1 and +1. Three: −1, 0, +1, in name order rotated by the tenant.
        #expect(TenantTrack.tilts(of: ["gw-1"], tenant: "acme") == ["gw-1": 0])
        #expect(TenantTrack.tilts(of: [], tenant: "acme").isEmpty)
        let gateways = ["gw-3", "gw-1", "gw-2"]
        var sums = ["gw-1": 0.0, "gw-2": 0.0, "gw-3": 0.0]
        var rotations = Set<[Double]>()
        for index in 0..<300 {
            let tilts = TenantTrack.tilts(of: gateways, tenant: "tenant-\(index)")
            #expect(tilts.values.sorted() == [-1, 0, 1])
            // The same tenant always gets the same tilts, whatever order its gateways come in.
            #expect(TenantTrack.tilts(of: gateways.reversed(), tenant: "tenant-\(index)") == tilts)
            rotations.insert(["gw-1", "gw-2", "gw-3"].map { tilts[$0]! })
            for (gateway, tilt) in tilts { sums[gateway]! += tilt }
        }
        // Every rotation occurs, and over many tenants no gateway is always the short one.
        #expect(rotations.count == 3)
        for sum in sums.values { #expect(abs(sum) < 30) }
        #expect(TenantTrack.gatewayTilt == 0.02)
    }

    @Test func anEvenlyRoutedTenantsSlicesDifferFromGatewayToGateway() throws {
        // Three gateways each see 20 requests a tick: the shares are even but for the tilt, so that no two slices
        // refill at the same rate (equal slices retuned together admit in lockstep).
        var run = ClassifierRun(start: t0)
        func evenly(_ script: inout TelemetryScript, _ from: Double, _ to: Double) -> [StoredEvent] {
            F.served(&script, 20, from: from, to: to) + F.served(&script, 20, from: from, to: to, gateway: "gw-2")
                + F.served(&script, 20, from: from, to: to, gateway: "gw-3")
        }
        var report = run.tick { script, from, to in evenly(&script, from, to) }
        for _ in 0..<59 { report = run.tick { script, from, to in evenly(&script, from, to) } }
        let shares = try #require(F.status(report)?.gatewayShares)
        let expected = F.tilted(["gw-1": 1.0 / 3, "gw-2": 1.0 / 3, "gw-3": 1.0 / 3])
        for gateway in ["gw-1", "gw-2", "gw-3"] { #expect(F.close(shares[gateway], expected[gateway]!)) }
        #expect(Set(shares.values.map { ($0 * 3 * 1000).rounded() }) == [980, 1000, 1020])
    }

    @Test func lateAndFutureEventsCountInTheTickThatReadsThem() throws {
        var run = ClassifierRun(start: t0)
        _ = run.tick { script, from, to in F.served(&script, 12, from: from, to: to) }
        // Arrives now, stamped 20 s ago; and one stamped in the future (a gateway clock ahead).
        let report = run.tick { script, from, _ in
            [
                script.event(at: from - 20, prompt: 1, completion: 1),
                script.event(at: from + 60, prompt: 1, completion: 1),
            ]
        }
        let status = try #require(F.status(report))
        let w = F.weight(5, 60)
        #expect(F.close(status.servedShort.rpm, 144 * w * (1 - w) + 24 * w))
        #expect(status.lastActivityAt == t0 + 10)  // bounded by now
    }
}
