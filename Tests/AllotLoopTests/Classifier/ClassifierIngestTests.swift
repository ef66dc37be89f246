import AllotCore
import AllotSignals
import AllotStore
import Testing

@testable import AllotLoop

@Suite("Consumption Classifier: ingest in chunks")
struct ClassifierIngestTests {
    typealias F = ClassifierFixtures

    /// A busy tick's events: 40 tenants on two upstreams through seven gateways (more than a tenant's
    /// four inline gateway counters), every outcome, queue waits, retries, tasks both new and
    /// continued, some over their budget.
    static func events(_ script: inout TelemetryScript, tick: Int, from: Double, to: Double) -> [StoredEvent] {
        let outcomes: [Outcome] = [.ok, .ok, .ok, .deniedLocal, .queued, .ok, .serverError, .ok]
        return script.spread(5_000, from: from, to: to) { script, at in
            let n = Int(((at - from) / (to - from) * 5_000).rounded()) + tick * 5_000
            let outcome = outcomes[n % outcomes.count]
            let served = outcome == .ok
            return script.event(
                at: at, tenant: "tenant-\(n % 40)", upstream: n % 3 == 0 ? "anthropic/claude" : "openai/gpt-4o",
                gateway: "gw-\(n % 7)", outcome: outcome, taskClass: n % 2 == 0 ? .batch : .interactive,
                queueMs: n % 5 == 0 ? Double(n % 900) : nil, prompt: served ? Int64(n % 700) : nil,
                completion: served ? Int64(n % 300) : nil, estimated: served ? nil : 400, retry: n % 11 == 0 ? 1 : nil,
                taskID: n % 4 == 0 ? nil : "task-\(n % 600)")
        }
    }

    @Test func chunksGiveTheSameReportsAndStateAsOneChunk() {
        let policy = F.policy(taskBudgets: [.batch: TaskBudgetPolicy(maxCalls: 8, maxTokens: 2_000)])
        var whole = ClassifierRun(policy: policy, start: F.t0)
        whole.classification.ingestChunk = .max
        var chunked = ClassifierRun(policy: policy, start: F.t0)
        chunked.classification.ingestChunk = 777
        for tick in 0..<3 {
            let allocations = [
                AllocationKey(tenant: "tenant-1", upstream: "openai/gpt-4o"): PerDimension<Double>(rpm: 10, tpm: 5_000)
            ]
            let a = whole.tick(allocations: allocations) { Self.events(&$0, tick: tick, from: $1, to: $2) }
            let b = chunked.tick(allocations: allocations) { Self.events(&$0, tick: tick, from: $1, to: $2) }
            #expect(a.statuses == b.statuses, "tick \(tick)")
            #expect(a.tenants == b.tenants)
            #expect(a.spend == b.spend)
            #expect(a.alerts == b.alerts)
            #expect(b.alerts.contains { $0.kind == "runaway_task" })
            #expect(b.statuses.contains { $0.gatewayShares.count > 4 })
        }
        #expect(whole.classification.state == chunked.classification.state)
    }
}
