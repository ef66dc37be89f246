import AllotCore
import AllotSignals
import AllotStore
import Testing

@testable import AllotLoop

/// A stated limit far below what the upstream serves, with no quota refusal, is not believed.
@Suite("Capacity Observer: statements the service contradicts")
struct ObserverContradictionTests {
    typealias F = ObserverFixtures
    let t0 = ObserverFixtures.t0

    /// 30 successes every 10 s over `[t0 - 60, t0)`, each stating `signals`, observed by ticks every 10 s up to `t0`.
    static func serve(
        _ estimation: inout CapacityEstimation, _ script: inout TelemetryScript, t0: Double,
        signals: EventSignals = EventSignals()
    ) -> ObserverReport {
        var reports: [ObserverReport] = []
        for tick in 0..<6 {
            let from = t0 - 60 + Double(tick) * 10
            let events = script.spread(30, from: from, to: from + 10) { script, at in
                script.event(at: at, latencyMs: 200, prompt: 100, completion: 20, signals: signals)
            }
            reports.append(estimation.observe(script.delta(events), now: from + 10))
        }
        return reports[5]
    }

    @Test func oneStatementFarBelowWhatIsServedIsNotBelievedAndIsAlerted() throws {
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy(rpm: 400))
        var report = Self.serve(&estimation, &script, t0: t0)
        #expect(F.status(report)?.estimate.rpm == 400)

        // One event states a limit of 1 request a minute (tokens 200,000: what is served, 21,600, fits it).
        let odd = script.event(
            at: t0 + 1, latencyMs: 200, prompt: 100, completion: 20, signals: F.openAI(limitRequests: 1))
        report = estimation.observe(script.delta([odd]), now: t0 + 10)
        let status = try #require(F.status(report))
        #expect(status.headerLimit == PerDimension(rpm: nil, tpm: 200_000))
        #expect(status.estimate == PerDimension(rpm: 400, tpm: 200_000))
        #expect(status.state == .healthy)
        let alert = try #require(F.alerts(report, kind: "upstream_limit_contradicted").first)
        #expect(alert.severity == .warning)
        #expect(alert.since == t0 + 10)
        #expect(
            alert.message
                == "openai/gpt-4o: the provider states 1 rpm while 151 requests were served in the last 60 s without a "
                + "quota refusal: not believed; the declared capacity, 400, stays in force (a proxy or a "
                + "misconfigured key may be rewriting the rate-limit headers)")
        #expect(status.signals.contains { $0.hasPrefix("the provider states 1 rpm while 151 requests were served") })

        // Still the only statement a tick later: still not believed, the alert keeps its start.
        report = estimation.observe(script.delta([]), now: t0 + 20)
        #expect(F.status(report)?.estimate.rpm == 400)
        #expect(F.alerts(report, kind: "upstream_limit_contradicted").first?.since == t0 + 10)
    }

    @Test func aLowStatementThatComesWithQuotaRefusalsIsBelieved() throws {
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy(rpm: 400))
        _ = Self.serve(&estimation, &script, t0: t0)
        let refused = script.event(
            at: t0 + 1, outcome: .quotaExhausted, status: 429, latencyMs: 20, signals: F.openAI(limitRequests: 50))
        let report = estimation.observe(script.delta([refused]), now: t0 + 10)
        #expect(F.status(report)?.headerLimit.rpm == 50)
        #expect(F.status(report)?.estimate.rpm == 50)
        #expect(F.alerts(report, kind: "upstream_limit_contradicted").isEmpty)
    }

    @Test func aContradictedChangeOfLimitLeavesTheLimitStatedBeforeInForce() throws {
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy())
        var report = Self.serve(&estimation, &script, t0: t0, signals: F.openAI(limitRequests: 400))
        #expect(F.status(report)?.estimate.rpm == 400)

        // Three clean statements agree on 10 rpm: a change of limit by the statements alone, which the 153
        // served in the window without a refusal contradict.
        let lower = (1...3).map { second in
            script.event(
                at: t0 + Double(second), latencyMs: 200, prompt: 100, completion: 20,
                signals: F.openAI(limitRequests: 10))
        }
        report = estimation.observe(script.delta(lower), now: t0 + 10)
        #expect(F.status(report)?.headerLimit.rpm == 400)
        #expect(F.status(report)?.estimate.rpm == 400)
        let alert = try #require(F.alerts(report, kind: "upstream_limit_contradicted").first)
        #expect(alert.message.contains("the provider states 10 rpm while 153 requests were served"))
        #expect(alert.message.contains("the limit stated before, 400, stays in force"))
    }

    @Test func aFewCallsInTheWindowsFirstSecondsContradictNothing() throws {
        var script = TelemetryScript()
        var estimation = CapacityEstimation(policy: F.policy(rpm: 400))
        // Three calls in a pool's first second, stating 2 rpm: as many as 2 a minute lets through, up to twice.
        let first = (0..<4).map { index in
            script.event(
                at: t0 - 2 + Double(index) / 4, latencyMs: 200, prompt: 100, completion: 20,
                signals: F.openAI(limitRequests: 2))
        }
        let report = estimation.observe(script.delta(first), now: t0)
        #expect(F.status(report)?.headerLimit.rpm == 2)
        #expect(F.alerts(report, kind: "upstream_limit_contradicted").isEmpty)
    }

    @Test func aLimitCountedOverADayIsNotJudgedByAMinutesRate() throws {
        var script = TelemetryScript()
        var policy = F.policy(rpm: 400)
        policy.setUpstream(
            UpstreamPolicy(
                id: F.pool, capacity: PerDimension(rpm: 400, tpm: nil),
                headerWindow: PerDimension(rpm: .day, tpm: .minute)))
        var estimation = CapacityEstimation(policy: policy)
        _ = Self.serve(&estimation, &script, t0: t0)
        // 14,400 a day is 10 a minute on average; 150 in a minute is within a daily quota.
        let daily = script.event(
            at: t0 + 1, latencyMs: 200, prompt: 100, completion: 20,
            signals: EventSignals(family: .openai, limitRequests: 14_400))
        let report = estimation.observe(script.delta([daily]), now: t0 + 10)
        #expect(F.status(report)?.headerLimit.rpm == 10)
        #expect(F.alerts(report, kind: "upstream_limit_contradicted").isEmpty)
    }
}
