import AllotCore
import AllotSignals
import AllotStore
import Foundation
import Testing

@testable import AllotLoop

@Suite("Consumption Classifier: spend, runaway tasks, persistence (SPEC 5, 6)")
struct ClassifierCostTests {
    typealias F = ClassifierFixtures
    /// An hour boundary (and not a day boundary).
    let t0 = ClassifierFixtures.t0

    static let priced = UpstreamPolicy(
        id: ClassifierFixtures.pool, capacity: PerDimension(rpm: 1000, tpm: 1_000_000),
        price: Price(inputPerMillionTokens: 2.5, outputPerMillionTokens: 10))

    static func spend(_ report: ClassifierReport, _ tenant: String = "acme", _ window: BudgetWindow) -> TenantSpend? {
        report.spend.first { $0.tenant == tenant && $0.window == window }
    }

    @Test func spendPerWindowWithPricesAndTheUnpricedAlert() throws {
        var run = ClassifierRun(policy: F.policy(upstreams: [Self.priced]), start: t0 - 7)
        // 10 calls at 1,000 prompt + 500 completion tokens: 0.0025 + 0.005 each on the priced pool;
        // 2 calls on a pool without a price: the default 10 / 30 per million → 0.025 each.
        let report = run.tick(after: 10) { script, _, _ in
            script.spread(10, from: t0 - 5, to: t0 + 3) { script, at in
                script.event(at: at, prompt: 1000, completion: 500)
            } + [
                script.event(at: t0 + 1, upstream: "mystery/model", prompt: 1000, completion: 500),
                script.event(at: t0 + 2, upstream: "mystery/model", prompt: 1000, completion: 500),
            ]
        }
        // The tick ends at t0 + 3, in a new hour: the calls before t0 belong to the hour that ended.
        let hourly = try #require(Self.spend(report, "acme", .hour))
        let daily = try #require(Self.spend(report, "acme", .day))
        let monthly = try #require(Self.spend(report, "acme", .month))
        // Times t0 − 5 + 0.8 i: i ≥ 7 fall in the new hour (3 priced calls) plus both unpriced ones.
        #expect(F.close(hourly.spent, 3 * 0.0075 + 2 * 0.025))
        #expect(F.close(daily.spent, 10 * 0.0075 + 2 * 0.025))
        #expect(F.close(monthly.spent, daily.spent))
        // Burn: the first tick's Δ is the loop interval (5 s).
        #expect(F.close(daily.burnRatePerSecond, (10 * 0.0075 + 2 * 0.025) / 5 * F.weight(5, 900)))
        #expect(report.spend.count == 3)

        let unpriced = report.alerts.filter { $0.kind == "unpriced_upstream" }
        #expect(unpriced.map(\.upstream) == ["mystery/model"])
        #expect(
            unpriced.first?.message.contains("default price (10 / 30 USD per million input / output tokens)") == true)
        #expect(unpriced.first?.since == t0 + 3)
    }

    /// Usage reported late (a gateway flushing what it buffered while cut off) is spend, in the windows it falls in,
    /// but not the current burn rate: read as burning now, an hour-old flush projected an idle tenant past its day
    /// budget and throttled it (outside evaluation round 20). Older than the long window (900 s) is old.
    @Test func lateReportsAreSpendButNotTheCurrentBurn() throws {
        var run = ClassifierRun(policy: F.policy(upstreams: [Self.priced]), start: t0 + 3895)
        let report = run.tick { script, from, to in
            // Ten calls of 65 minutes ago (the previous hour), two now; 0.0075 each.
            script.spread(10, from: t0, to: t0 + 9) { script, at in
                script.event(at: at, prompt: 1000, completion: 500)
            }
                + script.spread(2, from: from, to: to) { script, at in
                    script.event(at: at, prompt: 1000, completion: 500)
                }
        }
        let daily = try #require(Self.spend(report, "acme", .day))
        #expect(F.close(daily.spent, 12 * 0.0075))
        #expect(F.close(Self.spend(report, "acme", .hour)?.spent, 2 * 0.0075))
        #expect(F.close(daily.burnRatePerSecond, 2 * 0.0075 / 5 * F.weight(5, 900)))

        // Just after a month turns, the last minute of the previous one is no spend of this one, but it is the
        // current rate (it was lost from the burn when it fell in no window in progress).
        let february = t0 + 16 * 86_400 + 16 * 3_600  // 2027-02-01T00:00:00Z
        var turn = ClassifierRun(policy: F.policy(upstreams: [Self.priced]), start: february + 5)
        let turned = turn.tick { script, _, _ in
            script.spread(10, from: february - 60, to: february - 51) { script, at in
                script.event(at: at, prompt: 1000, completion: 500)
            }
        }
        let month = try #require(Self.spend(turned, "acme", .month))
        #expect(month.spent == 0)
        #expect(F.close(month.burnRatePerSecond, 10 * 0.0075 / 5 * F.weight(5, 900)))
    }

    @Test func seededSpendCarriesOverAndWindowsRoll() throws {
        var run = ClassifierRun(policy: F.policy(upstreams: [Self.priced]), start: t0 + 10)
        run.classification.seedSpend(["acme": [.month: 12.5, .day: 2, .hour: 0.5]], now: t0 + 10)
        var report = run.tick { script, from, to in
            script.spread(4, from: from, to: to) { script, at in
                script.event(at: at, prompt: 1000, completion: 500)
            }
        }
        #expect(F.close(Self.spend(report, "acme", .month)?.spent, 12.5 + 0.03))
        #expect(F.close(Self.spend(report, "acme", .day)?.spent, 2 + 0.03))
        #expect(F.close(Self.spend(report, "acme", .hour)?.spent, 0.5 + 0.03))
        // The next hour starts from zero; the day and month carry on.
        report = run.tick(after: 3600)
        #expect(Self.spend(report, "acme", .hour)?.spent == 0)
        #expect(F.close(Self.spend(report, "acme", .day)?.spent, 2.03))
        // A tenant only seeded (no events yet) is reported too.
        run.classification.seedSpend(["quiet": [.month: 1]], now: run.now)
        report = run.tick()
        #expect(Self.spend(report, "quiet", .month)?.spent == 1)
    }

    @Test func runawayTaskAlertWithTheFanOutSeen() throws {
        let budgets: [TaskClass: TaskBudgetPolicy] = [.batch: TaskBudgetPolicy(maxCalls: 5, maxTokens: 10_000)]
        var run = ClassifierRun(policy: F.policy(taskBudgets: budgets), start: t0)
        var report = run.tick { script, from, _ in
            var events: [StoredEvent] = []
            for index in 0..<7 {
                let at = from + Double(index) * 0.5
                events.append(script.event(at: at, taskClass: .batch, prompt: 800, completion: 200, taskID: "job-1"))
            }
            for index in 0..<3 {
                let at = from + Double(index)
                events.append(script.event(at: at, taskClass: .batch, prompt: 800, completion: 200, taskID: "job-2"))
            }
            // Over on tokens, not calls.
            for index in 0..<2 {
                let at = from + Double(index)
                events.append(script.event(at: at, taskClass: .batch, prompt: 5000, completion: 1000, taskID: "job-3"))
            }
            // Reported out of time order (a gateway's batch): the 6th reported call is at +0.5 s, but six calls
            // were made only by +3 s, the latest of them.
            for index in (0..<7).reversed() {
                let at = from + Double(index) * 0.5
                events.append(script.event(at: at, taskClass: .batch, prompt: 800, completion: 200, taskID: "job-4"))
            }
            // Interactive tasks have no budget here.
            for index in 0..<9 {
                events.append(
                    script.event(at: from + Double(index) * 0.1, prompt: 10, completion: 10, taskID: "chat-1"))
            }
            return events
        }
        let alerts = report.alerts.filter { $0.kind == "runaway_task" }
        #expect(alerts.count == 3)
        #expect(alerts.first { $0.message.contains("job-4") }?.since == t0 + 3)
        let job1 = try #require(alerts.first { $0.message.contains("job-1") })
        #expect(job1.tenant == "acme")
        #expect(job1.upstream == F.pool)
        #expect(job1.since == t0 + 2.5)  // the 6th call
        #expect(
            job1.message
                == "task job-1 (batch) of acme fanned out into 7 calls and 7000 tokens (budget 5 calls, 10000 tokens)")
        #expect(alerts.contains { $0.message.contains("job-3") && $0.message.contains("12000 tokens") })

        // The task stops: the alert lasts while it ran within the short window…
        report = run.tick(after: 61)
        #expect(report.alerts.filter { $0.kind == "runaway_task" }.isEmpty)
        #expect(run.classification.state.tasks.count == 5)
        // …and the task is forgotten after the expiry.
        _ = run.tick(after: 3600)
        #expect(run.classification.state.tasks.isEmpty)
    }

    @Test func trackedTasksAreBounded() throws {
        let rules = ClassificationRules(maximumTrackedTasks: 100)
        var run = ClassifierRun(rules: rules, start: t0)
        _ = run.tick { script, from, to in
            script.spread(250, from: from, to: to) { script, at in
                script.event(at: at, prompt: 1, completion: 1, taskID: "task-\(Int(((at - from) * 50).rounded()))")
            }
        }
        let tasks = run.classification.state.tasks
        #expect(tasks.count == 100)
        // The most recently seen are kept.
        #expect(tasks.contains { $0.tenant == "acme" && $0.task == "task-249" })
        #expect(!tasks.contains { $0.task == "task-0" })
    }

    @Test func stateRoundTripsThroughCodableWithIdenticalReports() throws {
        let policy = F.policy(
            coldStartSamples: 30, taskBudgets: [.interactive: TaskBudgetPolicy(maxCalls: 3, maxTokens: 1_000_000)],
            upstreams: [Self.priced])
        var run = ClassifierRun(policy: policy, start: t0)
        func traffic(_ script: inout TelemetryScript, _ from: Double, _ to: Double, _ tick: Int) -> [StoredEvent] {
            F.served(&script, tick % 5 + 1, from: from, to: to, completion: Int64(tick % 40 + 1))
                + F.served(&script, 3, from: from, to: to, tenant: "beta", gateway: "gw-\(tick % 3)")
                + script.spread(tick % 4, from: from, to: to) { script, at in
                    script.event(at: at, outcome: .deniedLocal, queueMs: Double(tick), estimated: 80)
                }
                + [script.event(at: from + 1, prompt: 10, completion: 10, taskID: "t\(tick % 7)")]
        }
        let allocations = [F.acme: PerDimension<Double>(rpm: 20, tpm: 5000)]
        for tick in 1...30 { _ = run.tick(allocations: allocations) { traffic(&$0, $1, $2, tick) } }

        let data = try JSONEncoder().encode(run.classification.state)
        let decoded = try JSONDecoder().decode(ClassifierState.self, from: data)
        #expect(decoded == run.classification.state)
        var restored = run
        restored.classification = ConsumptionClassification(policy: policy, state: decoded)

        for tick in 31...90 {
            let a = run.tick(allocations: allocations) { traffic(&$0, $1, $2, tick) }
            let b = restored.tick(allocations: allocations) { traffic(&$0, $1, $2, tick) }
            #expect(a.statuses == b.statuses, "tick \(tick)")
            #expect(a.tenants == b.tenants)
            #expect(a.spend == b.spend)
            #expect(a.alerts == b.alerts)
        }
    }

    @Test func actorWrapsTheMaths() async throws {
        var script = TelemetryScript()
        let classifier = ConsumptionClassifier(policy: F.policy(upstreams: [Self.priced]))
        await classifier.seedSpend(["acme": [.day: 1]], now: t0)
        let events = F.served(&script, 10, from: t0, to: t0 + 5)
        let report = await classifier.classify(script.delta(events), allocations: [:], now: t0 + 5)
        #expect(F.status(report)?.samples == 10)
        let perCall: Double = (100 * 2.5 + 50 * 10) / 1e6
        #expect(F.close(Self.spend(report, "acme", .day)?.spent, 1 + 10 * perCall))
        let state = await classifier.state()
        #expect(state.demand[F.acme] == F.status(report)?.demand)
        await classifier.apply(policy: F.policy())
        let after = await classifier.classify(script.delta([]), allocations: [:], now: t0 + 10)
        #expect(after.statuses.count == 1)
    }
}
