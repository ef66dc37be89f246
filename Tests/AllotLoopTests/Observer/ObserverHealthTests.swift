import AllotCore
import AllotSignals
import AllotStore
import Foundation
import Testing

@testable import AllotLoop

@Suite("Capacity Observer: health, latency, versions, persistence (SPEC 4)")
struct ObserverHealthTests {
    typealias F = ObserverFixtures
    let t0 = ObserverFixtures.t0

    /// 30 attempts over `[t0 − 10, t0)`, every third (or every other, `severe`; or every `every`-th) overloaded.
    static func overload(
        _ script: inout TelemetryScript, t0: Double, severe: Bool = false, every: Int? = nil
    ) -> [StoredEvent] {
        let period = every ?? (severe ? 2 : 3)
        return script.spread(30, from: t0 - 10, to: t0) { script, at in
            let index = Int(((at - (t0 - 10)) * 3).rounded())
            let overloaded = index % period == period - 1
            return overloaded
                ? script.event(at: at, outcome: .overloaded, status: 529, errorType: "overloaded_error")
                : script.event(at: at, latencyMs: 800)
        }
    }

    /// The circuit's phase by its signal: `open`, `half-open`, or nil (closed).
    static func phase(_ report: ObserverReport) -> String? {
        guard let signals = F.status(report)?.signals else { return nil }
        if signals.contains(where: { $0.contains("; circuit open, shedding") }) { return "open" }
        if signals.contains(where: { $0.contains("; circuit half-open (probing), shedding") }) { return "half-open" }
        return nil
    }

    @Test func overloadOpensTheCircuitShedsAndRecovers() throws {
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy(rpm: 1000))
        var report = estimation.observe(script.delta { Self.overload(&$0, t0: t0) }, now: t0)
        var status = try #require(F.status(report))
        #expect(status.state == .overloaded)
        #expect(status.circuitOpen)
        // Below the severe share only `background` is shed: the rest meet the provider's refusals and back off.
        #expect(status.shed == ["background"])
        #expect(status.estimate.rpm == 1000)  // overload is not quota: capacity unchanged
        #expect(report.pools.first?.state == .overloaded)
        #expect(
            status.signals.contains(
                "overloaded: 10 of 30 attempts (33.3%) in the last 60 s; circuit open, shedding background"))
        #expect(F.alerts(report, kind: "circuit_open").map(\.since) == [t0])

        // Still open 4.7 s after the last overload error…
        report = estimation.observe(script.delta([]), now: t0 + 4)
        #expect(Self.phase(report) == "open")
        // …half-open (probing) once 5 s pass without one: the overload is over…
        report = estimation.observe(script.delta([]), now: t0 + 5)
        status = try #require(F.status(report))
        #expect(status.state == .overloaded)
        #expect(status.circuitOpen)
        #expect(Self.phase(report) == "half-open")
        #expect(status.shed == ["background"])
        #expect(F.alerts(report, kind: "circuit_open").map(\.since) == [t0])
        // …and closed after another quiet period.
        report = estimation.observe(script.delta([]), now: t0 + 60)
        status = try #require(F.status(report))
        #expect(status.state == .healthy)
        #expect(!status.circuitOpen)
        #expect(status.shed.isEmpty)
        #expect(F.alerts(report, kind: "circuit_open").isEmpty)
    }

    /// With `circuit_severe_ratio` 0.5: half the attempts refused is severe.
    @Test func severeOverloadShedsInteractiveAndHalfOpenReopens() throws {
        var script = TelemetryScript()
        let settings = ObserverSettings(circuitSevereRatio: 0.5)
        var estimation = CapacityEstimation(policy: F.policy(rpm: 1000, observer: settings))
        var report = estimation.observe(script.delta { Self.overload(&$0, t0: t0, severe: true) }, now: t0)
        #expect(F.status(report)?.shed == ["background", "batch", "interactive"])
        report = estimation.observe(script.delta([]), now: t0 + 30)
        #expect(Self.phase(report) == "half-open")
        #expect(F.status(report)?.shed == ["background"])
        // An overload answer while half-open, with the short window's share still severe (16 of 31),
        // reopens the circuit at once.
        let probe = [script.event(at: t0 + 32, outcome: .overloaded, status: 503)]
        report = estimation.observe(script.delta(probe), now: t0 + 35)
        #expect(Self.phase(report) == "open")
        #expect(F.status(report)?.shed == ["background", "batch", "interactive"])
    }

    /// The default `circuit_severe_ratio` (1): half the attempts refused sheds only `background`, the circuit
    /// half-opens after `circuit_quiet_s` and answers while half-open do not reopen it; a provider refusing
    /// every attempt sheds `batch` and `interactive` too.
    @Test func byDefaultOnlyAProviderRefusingEveryAttemptIsSevere() throws {
        #expect(ObserverSettings().circuitSevereRatio == 1)
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy(rpm: 1000))
        var report = estimation.observe(script.delta { Self.overload(&$0, t0: t0, severe: true) }, now: t0)
        #expect(F.status(report)?.shed == ["background"])
        var phases: [String?] = []
        for step in 1...6 {
            let end = t0 + Double(step) * 10
            report = estimation.observe(script.delta { Self.overload(&$0, t0: end, severe: true) }, now: end)
            phases.append(Self.phase(report))
            #expect(F.status(report)?.shed == ["background"])
        }
        // Open for `circuit_quiet_s` (30 s), then half-open although half the attempts are still refused.
        #expect(phases == ["open", "open", "half-open", "half-open", "half-open", "half-open"])
        // A provider refusing every attempt of the short window: severe.
        var outage = TelemetryScript()
        var dead = CapacityEstimation(policy: F.policy(rpm: 1000))
        let refused = outage.spread(30, from: t0 - 10, to: t0) { script, at in
            script.event(at: at, outcome: .overloaded, status: 529, errorType: "overloaded_error")
        }
        report = dead.observe(outage.delta(refused), now: t0)
        #expect(F.status(report)?.shed == ["background", "batch", "interactive"])
    }

    /// A third of 30 attempts overloaded at `t0` (the circuit opens), then 30 attempts every 10 s for `ticks`
    /// ticks, every `every`-th overloaded: the circuit's phase after each, and the last report.
    static func phasesAfterABlip(
        _ estimation: inout CapacityEstimation, _ script: inout TelemetryScript, ticks: Int, every: Int
    ) -> ([String?], ObserverReport) {
        var report = estimation.observe(script.delta { Self.overload(&$0, t0: F.t0) }, now: F.t0)
        #expect(Self.phase(report) == "open")
        var phases: [String?] = []
        for step in 1...ticks {
            let end = F.t0 + Double(step) * 10
            report = estimation.observe(script.delta { Self.overload(&$0, t0: end, every: every) }, now: end)
            phases.append(Self.phase(report))
        }
        return (phases, report)
    }

    @Test func aSustainedPartialOverloadHalfOpensAfterTheQuietPeriod() throws {
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy(rpm: 1000))
        // A third of the attempts overloaded, for two minutes: 30 attempts every 10 s.
        let (phases, last) = Self.phasesAfterABlip(&estimation, &script, ticks: 12, every: 3)
        var report = last
        // Open for `circuit_quiet_s` (30 s), then half-open although overload errors keep coming: below the
        // severe share the upstream still serves two thirds. It stays half-open while the partial overload lasts.
        #expect(phases[0...1].allSatisfy { $0 == "open" })
        #expect(phases[2...].allSatisfy { $0 == "half-open" })
        #expect(F.status(report)?.state == .overloaded)
        #expect(F.status(report)?.shed == ["background"])
        // Closed 30 s after the last overload error.
        report = estimation.observe(script.delta([]), now: t0 + 149)
        #expect(F.status(report)?.shed == ["background"])
        report = estimation.observe(script.delta([]), now: t0 + 150)
        #expect(F.status(report)?.shed == [])
        #expect(F.status(report)?.state == .healthy)
    }

    /// A blip opens the circuit; a chronic fifteenth of the attempts refused after it (one every 5 s) is below
    /// the opening share: the circuit closes `circuit_quiet_s` after it half-opened, errors and all (a third keeps
    /// it half-open: ``aSustainedPartialOverloadHalfOpensAfterTheQuietPeriod()``).
    @Test func aChronicErrorRateBelowTheOpeningShareClosesAHalfOpenCircuit() throws {
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy(rpm: 1000))
        let (phases, report) = Self.phasesAfterABlip(&estimation, &script, ticks: 9, every: 15)
        // Open 30 s (the errors never stop for 10 s), half-open 30 s, then closed: the last minute's share is
        // 6.7 %, and it stays closed (it would take 20 % to open again).
        #expect(phases == ["open", "open", "half-open", "half-open", "half-open", nil, nil, nil, nil])
        let status = try #require(F.status(report))
        #expect(status.shed.isEmpty)
        #expect(status.state == .healthy)
        #expect(status.outcomes["overloaded"] == 12)
    }

    /// 90 attempts over `[t0 − 30, t0)`, every one refused as overloaded: a total outage.
    static func totalOutage(_ script: inout TelemetryScript, t0: Double) -> [StoredEvent] {
        script.spread(90, from: t0 - 30, to: t0) { script, at in
            script.event(at: at, outcome: .overloaded, status: 529, errorType: "overloaded_error")
        }
    }

    /// A 30-s outage (every attempt refused), then a healthy provider: the circuit half-opens after 5 quiet
    /// seconds and closes `circuit_quiet_s` later, and stays closed although the last minute still holds a fifth
    /// and more of refusals — all of them older than the overload's end. (It reopened on them 5 s after closing,
    /// shedding `background` for another 70 s, after every outage of outside evaluation round 16.)
    @Test func aClosedCircuitDoesNotReopenOnRefusalsFromBeforeTheOverloadEnded() throws {
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy(rpm: 1000))
        let outage = Self.totalOutage(&script, t0: t0)
        var report = estimation.observe(script.delta(outage), now: t0)
        #expect(F.status(report)?.shed == ["background", "batch", "interactive"])
        var phases: [String?] = []
        for step in 1...16 {
            let end = t0 + Double(step) * 5
            report = estimation.observe(
                script.delta { $0.spread(15, from: end - 5, to: end) { script, at in script.event(at: at) } }, now: end)
            phases.append(Self.phase(report))
        }
        #expect(phases == Array(repeating: "half-open", count: 6) + Array(repeating: nil, count: 10))
        #expect(F.status(report)?.shed.isEmpty == true)
    }

    /// After the same outage's circuit has closed: one stray overload error does not reopen it (the share is judged
    /// on the attempts since it closed, not on the window that still holds the outage), a fresh overload does.
    @Test func aFreshOverloadReopensAClosedCircuitAndAStrayErrorDoesNot() throws {
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy(rpm: 1000))
        let outage = Self.totalOutage(&script, t0: t0)
        var report = estimation.observe(script.delta(outage), now: t0)
        /// 15 attempts over the 5 s before `end`, the last `refused` of them overloaded.
        func step(_ end: Double, refused: Int) -> String? {
            let events = script.spread(15, from: end - 5, to: end) { script, at in
                at > end - Double(refused) / 3 - 0.01
                    ? script.event(at: at, outcome: .overloaded, status: 529, errorType: "overloaded_error")
                    : script.event(at: at)
            }
            report = estimation.observe(script.delta(events), now: end)
            return Self.phase(report)
        }
        let closing = (1...7).map { step(t0 + Double($0) * 5, refused: 0) }
        #expect(closing == Array(repeating: "half-open", count: 6) + [nil])
        #expect(step(t0 + 40, refused: 1) == nil)  // the window's share is a third; since the close, 1 of about 15
        #expect(step(t0 + 45, refused: 10) == "open")  // since the close, 11 of about 30
        #expect(F.alerts(report, kind: "circuit_open").map(\.since) == [t0 + 45])
    }

    /// The same outage on a pool with a latency baseline (100 ms at 180 rpm), its backlog answered at 300 ms after
    /// it at the same load: the latency is the overload's backlog while the circuit sheds and for a short window after
    /// it closed, never lost capacity. (At the tick it closed, the same p95 cut the estimate to 80% for a minute.)
    @Test func theBacklogAfterAnOutageIsNotReadAsLostCapacityWhenTheCircuitCloses() throws {
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy(rpm: 1000, tpm: 10_000_000))
        var events = script.spread(2520, from: t0 - 900, to: t0 - 60) { script, at in
            script.event(at: at, latencyMs: 100)
        }
        events += Self.totalOutage(&script, t0: t0)
        var report = estimation.observe(script.delta(events), now: t0)
        var phases: [String?] = []
        for step in 1...16 {
            let end = t0 + Double(step) * 5
            let backlog = script.spread(15, from: end - 5, to: end) { script, at in
                script.event(at: at, latencyMs: 300)
            }
            report = estimation.observe(script.delta(backlog), now: end)
            phases.append(Self.phase(report))
            let status = try #require(F.status(report))
            #expect(status.estimate.rpm == 1000, "at t0 + \(step * 5)")
            #expect(F.alerts(report, kind: "upstream_degrading").isEmpty, "at t0 + \(step * 5)")
        }
        #expect(phases == Array(repeating: "half-open", count: 6) + Array(repeating: nil, count: 10))
        #expect(
            F.status(report)?.signals.contains {
                $0.hasSuffix("just after an overload (the circuit closed 45 s ago): its backlog, not lost capacity")
            } == true)
    }

    @Test func fewAttemptsDoNotOpenTheCircuit() throws {
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy(rpm: 1000))
        let events = [script.event(at: t0 - 1, outcome: .overloaded), script.event(at: t0 - 1)]
        let report = estimation.observe(script.delta(events), now: t0)
        #expect(F.status(report)?.state == .healthy)
        #expect(F.status(report)?.circuitOpen == false)
    }

    @Test func serverErrorsMarkTheUpstreamDegradingWithAnAlert() throws {
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy(rpm: 1000))
        let events = script.spread(40, from: t0 - 20, to: t0) { script, at in
            Int(((at - (t0 - 20)) * 2).rounded()) % 10 == 0
                ? script.event(at: at, outcome: .serverError, status: 500) : script.event(at: at)
        }
        let report = estimation.observe(script.delta(events), now: t0)
        let status = try #require(F.status(report))
        #expect(status.state == .degrading)
        #expect(status.estimate.rpm == 1000)  // errors alone do not lower the safe capacity
        #expect(F.alerts(report, kind: "upstream_errors").count == 1)
        #expect(status.signals.contains("server errors and timeouts: 4 of 40 attempts (10%) in the last 60 s"))
    }

    /// 420 served at 100 ms over `[t0 − 900, t0 − 60)`, then 30 at `recent` ms over the last minute: the
    /// same load (30 per minute) throughout.
    static func latencyRise(_ script: inout TelemetryScript, t0: Double, recent: Double) -> [StoredEvent] {
        script.spread(420, from: t0 - 900, to: t0 - 60) { script, at in script.event(at: at, latencyMs: 100) }
            + script.spread(30, from: t0 - 60, to: t0) { script, at in script.event(at: at, latencyMs: recent) }
    }

    @Test func latencyRisingWithOurOwnLoadIsNotDegradation() throws {
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy(rpm: 1000, tpm: 100_000))
        // 84 served over 14 minutes (6 per minute), then 30 in the last minute (×5 the load) at ×3 the latency.
        let events =
            script.spread(84, from: t0 - 900, to: t0 - 60) { script, at in script.event(at: at, latencyMs: 100) }
            + script.spread(30, from: t0 - 60, to: t0) { script, at in script.event(at: at, latencyMs: 300) }
        let report = estimation.observe(script.delta(events), now: t0)
        let status = try #require(F.status(report))
        #expect(status.state == .healthy)
        #expect(status.estimate == PerDimension(rpm: 1000, tpm: 100_000))
        #expect(F.alerts(report, kind: "upstream_degrading").isEmpty)
        #expect(
            status.signals.contains(
                "short-window p95 296 ms vs baseline p95 102 ms (×2.9) while served attempts rose 6 → 30 per minute: "
                    + "our own load, not degradation"))
    }

    @Test func risingLatencyDegradesBeforeAny429AndLowersSafeCapacity() throws {
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy(rpm: 1000, tpm: 100_000))
        var report = estimation.observe(script.delta { Self.latencyRise(&$0, t0: t0, recent: 300) }, now: t0)
        var status = try #require(F.status(report))
        #expect(status.state == .degrading)
        #expect(status.outcomes == ["ok": 30])  // the short window's attempts: no 429 at all
        // 100 ms lands in [100, 104) and 300 ms in [288, 304): reported at the buckets' middles.
        #expect(status.latencyShort == LatencyPercentiles(p50: 296, p95: 296, p99: 296, samples: 30))
        #expect(status.latencyLong == LatencyPercentiles(p50: 102, p95: 296, p99: 296, samples: 450))
        #expect(status.signals.contains("short-window p95 296 ms vs baseline p95 102 ms (×2.9)"))
        #expect(status.estimate == PerDimension(rpm: 800, tpm: 80_000))
        #expect(report.pools.first?.capacity == PerDimension(rpm: 800, tpm: 80_000))
        #expect(F.alerts(report, kind: "upstream_degrading").map(\.since) == [t0])
        #expect(F.alerts(report, kind: "upstream_throttled").isEmpty)

        // Latency back to normal: once the short window holds only 100 ms answers it recovers.
        for tick in 1...12 {
            let now = t0 + Double(tick) * 5
            let events = script.spread(3, from: now - 5, to: now) { script, at in script.event(at: at, latencyMs: 100) }
            report = estimation.observe(script.delta(events), now: now)
        }
        status = try #require(F.status(report))
        #expect(status.state == .healthy)
        #expect(status.estimate == PerDimension(rpm: 1000, tpm: 100_000))
    }

    /// A lasting rise is a warning, then the pool's new normal (outside evaluation round 28, L1; documented in
    /// policies/README, `latency_ratio`): the slow answers enter the baseline as they leave the short window, and
    /// once they are a twentieth of its samples they are its p95.
    @Test func aLastingLatencyRiseBecomesTheBaseline() throws {
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy(rpm: 1000, tpm: 100_000))
        var report = estimation.observe(script.delta { Self.latencyRise(&$0, t0: t0, recent: 300) }, now: t0)
        #expect(try #require(F.status(report)).state == .degrading)
        // The same even load (30 a minute) stays at 300 ms.
        var states: [(Double, UpstreamState)] = []
        for tick in 1...60 {
            let now = t0 + Double(tick) * 5
            let events = script.spread(3, from: now - 5, to: now) { script, at in script.event(at: at, latencyMs: 300) }
            report = estimation.observe(script.delta(events), now: now)
            states.append((now - t0, try #require(F.status(report)).state))
        }
        // The rise began at t0 − 60 (a short window of slow answers): two minutes later, when that first minute
        // of them is in the baseline (30 of 450 samples), the pool is healthy at its new latency.
        let healthyAt = try #require(states.first { $0.1 == .healthy }?.0)
        #expect(healthyAt == 60)
        #expect(states.allSatisfy { $0.0 < healthyAt ? $0.1 == .degrading : $0.1 == .healthy })
        let status = try #require(F.status(report))
        #expect(status.estimate == PerDimension(rpm: 1000, tpm: 100_000))
        #expect(status.latencyShort.p95 == 296)
    }

    @Test func latencyRisingWhileTheUpstreamRefusesIsSaturationNotDegradation() throws {
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy(rpm: 1000, tpm: 100_000))
        // The same rise at the same load, but two answers of the last minute were 429s: the upstream is at its
        // limit and its queue grows — the quota errors judge that; the safe capacity is not lowered on top.
        var events = Self.latencyRise(&script, t0: t0, recent: 300)
        events += [
            script.event(at: t0 - 40, outcome: .quotaExhausted, status: 429),
            script.event(at: t0 - 20, outcome: .quotaExhausted, status: 429),
        ]
        let report = estimation.observe(script.delta(events), now: t0)
        let status = try #require(F.status(report))
        #expect(status.state == .throttled)
        #expect(F.alerts(report, kind: "upstream_degrading").isEmpty)
        #expect(
            status.signals.contains(
                "short-window p95 296 ms vs baseline p95 102 ms (×2.9) while the upstream answers 429: saturation, "
                    + "not degradation"))
        // The quota errors cut the estimate (by decrease_factor: two refusals in two slices are no measurement, though
        // they were a third of those slices' attempts); the engine gets that estimate, not × 0.8 of it as well.
        #expect(status.estimate.rpm == 950)
        #expect(report.pools.first?.capacity.rpm == 950)
        #expect(!status.signals.contains { $0.hasPrefix("safe capacity lowered") })
    }

    @Test func aStatedDropExplainsTheLatencyWarningBeforeIt() throws {
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy(rpm: 1000, tpm: 100_000))
        // The warning: latency ×3 at the same load, no 429 — degrading, safe capacity 80%.
        var report = estimation.observe(script.delta { Self.latencyRise(&$0, t0: t0, recent: 300) }, now: t0)
        #expect(F.status(report)?.estimate == PerDimension(rpm: 800, tpm: 80_000))
        // Then the provider states the drop it warned of (1000 → 600 rpm). The estimate is the stated limit, not
        // 80% of it: the slow answers still in the short window were the warning of this very drop.
        let stated = script.spread(3, from: t0, to: t0 + 5) { script, at in
            script.event(
                at: at, latencyMs: 300,
                signals: F.openAI(limitRequests: 600, limitTokens: 100_000))
        }
        report = estimation.observe(script.delta(stated), now: t0 + 5)
        var status = try #require(F.status(report))
        #expect(status.estimate == PerDimension(rpm: 600, tpm: 100_000))
        #expect(status.state != .degrading)
        #expect(F.alerts(report, kind: "upstream_degrading").isEmpty)
        #expect(!status.signals.contains { $0.hasPrefix("safe capacity lowered") })
        // For the short window after the statement the same latency does not degrade again…
        let slow = script.spread(3, from: t0 + 5, to: t0 + 10) { script, at in
            script.event(
                at: at, latencyMs: 300,
                signals: F.openAI(limitRequests: 600, limitTokens: 100_000))
        }
        report = estimation.observe(script.delta(slow), now: t0 + 10)
        status = try #require(F.status(report))
        #expect(status.estimate.rpm == 600)
        #expect(
            status.signals.contains(
                "short-window p95 296 ms vs baseline p95 102 ms (×2.9) after the provider stated a lower limit: "
                    + "latency that goes with that drop, already in the estimate"))
    }

    /// Fourteen minutes at 100 ms under a stated 1,000 rpm, then a minute under a stated 100 (an incident's quota).
    static func quotaCut(_ script: inout TelemetryScript, t0: Double) -> [StoredEvent] {
        script.spread(420, from: t0 - 900, to: t0 - 60) { script, at in
            script.event(at: at, latencyMs: 100, signals: F.openAI(limitRequests: 1000, limitTokens: 100_000))
        }
            + script.spread(6, from: t0 - 60, to: t0) { script, at in
                script.event(at: at, latencyMs: 100, signals: F.openAI(limitRequests: 100, limitTokens: 100_000))
            }
    }

    /// A quota back from an incident: the calls held back under the lower limit arrive at once, and their latency is
    /// that backlog's (outside evaluation round 35: a stated 75 → 1,500 rpm return read as degradation at 18 %
    /// utilisation, the safe capacity cut to 1,200 for 50 s).
    @Test func theBacklogReadmittedWhenTheProviderRaisesItsLimitIsNotDegradation() throws {
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy(rpm: 1000, tpm: 100_000))
        let before = Self.quotaCut(&script, t0: t0)
        var report = estimation.observe(script.delta(before), now: t0)
        #expect(F.status(report)?.estimate.rpm == 100)
        // The limit is back: the calls held back answer three times slower, at no more than the old load.
        let back = script.spread(20, from: t0, to: t0 + 5) { script, at in
            script.event(at: at, latencyMs: 300, signals: F.openAI(limitRequests: 1000, limitTokens: 100_000))
        }
        // The raise is read after the latency in its tick: the degradation that latency started ends there.
        report = estimation.observe(script.delta(back), now: t0 + 5)
        var status = try #require(F.status(report))
        #expect(status.estimate.rpm == 1000)
        #expect(status.state != .degrading)
        #expect(report.pools.first?.capacity.rpm == 1000)
        #expect(F.alerts(report, kind: "upstream_degrading").isEmpty)
        // And for the short window after it, the backlog's latency does not start it again…
        let more = script.spread(10, from: t0 + 5, to: t0 + 10) { script, at in
            script.event(at: at, latencyMs: 300, signals: F.openAI(limitRequests: 1000, limitTokens: 100_000))
        }
        report = estimation.observe(script.delta(more), now: t0 + 10)
        status = try #require(F.status(report))
        #expect(status.state != .degrading)
        #expect(report.pools.first?.capacity.rpm == 1000)
        #expect(
            status.signals.contains {
                $0.hasSuffix("just after the provider raised its limit: the backlog readmitted, not lost capacity")
            }, "\(status.signals)")
        // …but once it is over (two short windows from the raise), a rise is degradation again: against a baseline
        // that now holds the backlog's answers (its p95 ~300 ms), a second rise to 1 s.
        let later = script.spread(20, from: t0 + 126, to: t0 + 131) { script, at in
            script.event(at: at, latencyMs: 1000, signals: F.openAI(limitRequests: 1000, limitTokens: 100_000))
        }
        report = estimation.observe(script.delta(later), now: t0 + 131)
        status = try #require(F.status(report))
        #expect(status.state == .degrading, "\(status.signals)")
        #expect(report.pools.first?.capacity.rpm == 800)
    }

    /// A backlog whose slow answers last most of the minute after the raise: they stay in the short window for the
    /// minute after that, and do not degrade the pool then either (review: with a window of one short window from the
    /// raise the pool went `degrading` at 65 s, on the backlog's own answers).
    @Test func theBacklogsAnswersDoNotDegradeThePoolWhileTheyRemainInTheShortWindow() throws {
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy(rpm: 1000, tpm: 100_000))
        let before = Self.quotaCut(&script, t0: t0)
        _ = estimation.observe(script.delta(before), now: t0)
        var degraded: [Double] = []
        for t in stride(from: t0, to: t0 + 150, by: 5) {
            let slow =
                t < t0 + 50
                ? script.spread(3, from: t, to: t + 5) { script, at in
                    script.event(at: at, latencyMs: 300, signals: F.openAI(limitRequests: 1000, limitTokens: 100_000))
                } : []
            let report = estimation.observe(script.delta(slow), now: t + 5)
            if F.status(report)?.state == .degrading { degraded.append(t + 5 - t0) }
        }
        #expect(degraded.isEmpty, "degrading at \(degraded) s")
    }

    /// A degradation that began before the provider raised its limit is real: the raise does not end it (review of
    /// the rule above: any raise of a quarter ended any degradation, and blinded the check for a minute).
    @Test func aRaiseDoesNotEndADegradationThatBeganBeforeIt() throws {
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy(rpm: 1000, tpm: 100_000))
        let stated = F.openAI(limitRequests: 1000, limitTokens: 100_000)
        let rise =
            script.spread(420, from: t0 - 900, to: t0 - 60) { script, at in
                script.event(at: at, latencyMs: 100, signals: stated)
            }
            + script.spread(30, from: t0 - 60, to: t0) { script, at in
                script.event(at: at, latencyMs: 300, signals: stated)
            }
        var report = estimation.observe(script.delta(rise), now: t0)
        #expect(F.status(report)?.state == .degrading)
        // Five seconds later the provider states 1,300 rpm, a quarter more: the degradation stays, safe capacity 80 %.
        let raised = script.spread(3, from: t0, to: t0 + 5) { script, at in
            script.event(at: at, latencyMs: 300, signals: F.openAI(limitRequests: 1300, limitTokens: 100_000))
        }
        report = estimation.observe(script.delta(raised), now: t0 + 5)
        let status = try #require(F.status(report))
        #expect(status.state == .degrading, "\(status.signals)")
        #expect(report.pools.first?.capacity.rpm == 1040)
        #expect(F.alerts(report, kind: "upstream_degrading").count == 1)
    }

    @Test func latencyRisingWhileTheCircuitShedsForOverloadIsNotLostCapacity() throws {
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy(rpm: 1000, tpm: 100_000))
        // The latency rise of `risingLatencyDegradesBeforeAny429AndLowersSafeCapacity`, with overload errors in
        // the same minute: the circuit opens and sheds; the safe capacity stays the estimate.
        var events = Self.latencyRise(&script, t0: t0, recent: 300)
        events += (0..<10).map { script.event(at: t0 - 30 + Double($0), outcome: .overloaded, status: 529) }
        let report = estimation.observe(script.delta(events), now: t0)
        let status = try #require(F.status(report))
        #expect(status.circuitOpen)
        #expect(status.shed == ["background"])
        #expect(status.estimate == PerDimension(rpm: 1000, tpm: 100_000))
        #expect(F.alerts(report, kind: "upstream_degrading").isEmpty)
        #expect(
            status.signals.contains(
                "short-window p95 296 ms vs baseline p95 102 ms (×2.9) while the upstream is overloaded: the circuit's, "
                    + "not lost capacity"))
    }

    @Test func latencyNeedsEnoughSamples() throws {
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy(rpm: 1000))
        let events =
            script.spread(84, from: t0 - 900, to: t0 - 60) { script, at in script.event(at: at, latencyMs: 100) }
            + script.spread(19, from: t0 - 60, to: t0) { script, at in script.event(at: at, latencyMs: 900) }
        let report = estimation.observe(script.delta(events), now: t0)
        #expect(F.status(report)?.state == .healthy)
        #expect(F.status(report)?.estimate.rpm == 1000)
    }

    @Test func modelVersionChangeLowersConfidenceAndRestartsProbing() throws {
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy())
        var events = script.spread(10, from: t0 - 10, to: t0 - 5) { script, at in
            script.event(at: at, modelVersion: "gpt-4o-2024-08-06", signals: F.openAI(limitRequests: 1000))
        }
        var report = estimation.observe(script.delta(events), now: t0)
        #expect(F.status(report)?.confidence == 1)
        #expect(F.status(report)?.modelVersion == "gpt-4o-2024-08-06")

        events = ObserverEstimateTests.cutTo600(&script, t0: t0 + 10)
        report = estimation.observe(script.delta(events), now: t0 + 11)
        #expect(F.status(report)?.estimate.rpm == 600)
        #expect(F.status(report)?.confidence == 0.75)

        // One event's version is no roll-out (a stray, a canary's test call): nothing restarts.
        events = [script.event(at: t0 + 12, modelVersion: "gpt-4o-2024-11-20")]
        report = estimation.observe(script.delta(events), now: t0 + 13)
        #expect(F.status(report)?.modelVersion == "gpt-4o-2024-08-06")
        #expect(F.status(report)?.estimate.rpm == 600)
        #expect(F.status(report)?.confidence == 0.75)
        // Nor do two, mixed with the version in force; the third is a change.
        events = [
            script.event(at: t0 + 13, modelVersion: "gpt-4o-2024-08-06"),
            script.event(at: t0 + 13.5, modelVersion: "gpt-4o-2024-11-20"),
        ]
        report = estimation.observe(script.delta(events), now: t0 + 14)
        #expect(F.status(report)?.estimate.rpm == 600)
        events = [script.event(at: t0 + 14, modelVersion: "gpt-4o-2024-11-20")]
        report = estimation.observe(script.delta(events), now: t0 + 15)
        let status = try #require(F.status(report))
        #expect(status.modelVersion == "gpt-4o-2024-11-20")
        #expect(status.confidence == 0.5)
        #expect(status.estimate.rpm == 1000)  // restarted from the header limit
        #expect(status.signals.contains("model version changed to gpt-4o-2024-11-20: probing restarted"))

        // A mixed roll-out (an old version answering again) is not another change.
        events = [script.event(at: t0 + 16, modelVersion: "gpt-4o-2024-08-06")]
        report = estimation.observe(script.delta(events), now: t0 + 20)
        #expect(F.status(report)?.estimate.rpm == 1000)
        #expect(F.status(report)?.confidence == 0.5)
        // The change weighs on the confidence for the long window.
        report = estimation.observe(script.delta([]), now: t0 + 14 + 901)
        #expect(F.status(report)?.confidence == 0.3)  // headers stale, nothing declared
    }

    @Test func stateRoundTripsThroughCodableWithIdenticalReports() throws {
        var script = TelemetryScript()
        var original = CapacityEstimation(policy: F.policy(rpm: 1000, tpm: 100_000))
        _ = original.observe(script.delta { Self.latencyRise(&$0, t0: t0 - 30, recent: 300) }, now: t0 - 30)
        _ = original.observe(script.delta { ObserverEstimateTests.storm(&$0, t0: t0) }, now: t0)
        _ = original.observe(script.delta { Self.overload(&$0, t0: t0 + 5) }, now: t0 + 5)

        let data = try JSONEncoder().encode(original.state)
        let decoded = try JSONDecoder().decode(ObserverState.self, from: data)
        #expect(decoded == original.state)
        var restored = CapacityEstimation(policy: F.policy(rpm: 1000, tpm: 100_000), state: decoded)

        for tick in 2...40 {
            let now = t0 + Double(tick) * 5
            let events = ObserverEstimateTests.traffic(&script, perSlice: tick % 7 == 0 ? 0 : 40, from: now - 5)
            let a = original.observe(script.delta(events), now: now)
            let b = restored.observe(script.delta(events), now: now)
            #expect(a.upstreams == b.upstreams, "tick \(tick)")
            #expect(a.pools == b.pools)
            #expect(a.alerts == b.alerts)
        }
        #expect(original.state == restored.state)
    }

    @Test func actorWrapsTheMaths() async throws {
        var script = TelemetryScript()
        let observer = CapacityObserver(policy: F.policy(rpm: 1000))
        let report = await observer.observe(script.delta { ObserverEstimateTests.storm(&$0, t0: t0) }, now: t0)
        #expect(F.status(report)?.estimate.rpm == 300)
        let state = await observer.state()
        #expect(state.estimates[F.pool]?.rpm == 300)
        await observer.apply(policy: F.policy(rpm: 2000))
        let again = await observer.observe(script.delta([]), now: t0 + 5)
        // A cut within the long window: the new declared capacity does not undo it.
        #expect(F.status(again)?.declared.rpm == 2000)
        #expect(F.status(again)?.estimate.rpm == 300)
    }

    @Test func policyDeclaresObserverSettings() throws {
        let json = #"{"observer": {"decrease_factor": 0.8, "probe_step": 0.1, "latency_min_samples": 5}}"#
        let tiers = #"{"tiers": {"standard": {"priority": 2}}}"#
        let policy = try Policy.load(files: [
            PolicyFile(name: "engine.json", bytes: Array(json.utf8)),
            PolicyFile(name: "tiers.json", bytes: Array(tiers.utf8)),
        ])
        #expect(policy.observer.decreaseFactor == 0.8)
        #expect(policy.observer.probeStep == 0.1)
        #expect(policy.observer.latencyMinSamples == 5)
        #expect(policy.observer.shortWindowSeconds == 60)
        let reloaded = try Policy.load(files: [PolicyFile(name: "canonical.json", bytes: policy.canonicalBytes)])
        #expect(reloaded.observer == policy.observer)

        let bad =
            #"{"observer": {"latency_ratio": 1, "circuit_open_ratio": 0.6, "circuit_severe_ratio": 0.5, "#
            + #""probe_stp": 1}}"#
        let issues = Policy.validate(files: [
            PolicyFile(name: "engine.json", bytes: Array(bad.utf8)),
            PolicyFile(name: "tiers.json", bytes: Array(tiers.utf8)),
        ])
        let messages = issues.map { "\($0.path): \($0.message)" }
        #expect(messages.contains { $0.hasPrefix("$.observer.latency_ratio: must be above 1") })
        #expect(
            messages.contains(
                "$.observer.circuit_severe_ratio: circuit_severe_ratio (0.5) is below circuit_open_ratio (0.6)"))
        #expect(messages.contains { $0.hasPrefix("$.observer.probe_stp: unknown field") && $0.contains("probe_step") })
    }
}
