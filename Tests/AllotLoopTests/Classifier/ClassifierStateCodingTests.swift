import AllotCore
import AllotStore
import Foundation
import Testing

@testable import AllotLoop

@Suite("Consumption Classifier: persisted state (tasks as columns)")
struct ClassifierStateCodingTests {
    typealias F = ClassifierFixtures

    /// A state with tasks of two tenants on two upstreams, of two classes, some over their budget.
    static func state() -> ClassifierState {
        let policy = F.policy(taskBudgets: [.batch: TaskBudgetPolicy(maxCalls: 2, maxTokens: 1_000_000)])
        var run = ClassifierRun(policy: policy, start: F.t0)
        for tick in 0..<4 {
            _ = run.tick { script, from, _ -> [StoredEvent] in
                var events: [StoredEvent] = []
                for call in 0..<6 {
                    let tenant = call % 2 == 0 ? "acme" : "beta"
                    let upstream = call % 3 == 0 ? "anthropic/claude" : "openai/gpt-4o"
                    let taskClass: TaskClass = call % 2 == 0 ? .batch : .interactive
                    events.append(
                        script.event(
                            at: from + Double(call) * 0.5, tenant: tenant, upstream: upstream, taskClass: taskClass,
                            prompt: 10, completion: Int64(tick + 1), taskID: "job-\(call % 4)"))
                }
                return events
            }
        }
        return run.classification.state
    }

    /// `ClassifierState` as checkpoints wrote it before the columns: the tasks as an array of
    /// task objects (the synthesized `Codable` of the same fields).
    struct EarlierState: Encodable {
        var lastClassifyAt: Double?
        var tracks: [TenantTrack]
        var accounts: [SpendAccount]
        var tasks: [TaskTrack]
        var unpriced: [String: UnpricedUsage]
        var histogramEpoch: Double?

        init(_ state: ClassifierState) {
            lastClassifyAt = state.lastClassifyAt
            tracks = state.tracks
            accounts = state.accounts
            tasks = state.tasks
            unpriced = state.unpriced
            histogramEpoch = state.histogramEpoch
        }
    }

    @Test func tasksRoundTripAsColumnsThroughBothCoders() throws {
        let state = Self.state()
        #expect(state.tasks.count == 4)
        #expect(Set(state.tasks.map(\.upstream)).count == 2)
        #expect(state.tasks.contains { $0.exceededAt != nil } && state.tasks.contains { $0.exceededAt == nil })

        let binary = try StateCodec.decode(
            ClassifierState.self, from: StateCodec.encode(state), component: "classifier")
        #expect(binary == state)
        let json = try JSONDecoder().decode(ClassifierState.self, from: JSONEncoder().encode(state))
        #expect(json == state)
    }

    @Test func checkpointsWrittenBeforeTheColumnsStillRestore() throws {
        let state = Self.state()
        let earlier = try StateCodec.encode(EarlierState(state))
        let restored = try StateCodec.decode(ClassifierState.self, from: earlier, component: "classifier")
        #expect(restored == state)
        let json = try JSONDecoder().decode(ClassifierState.self, from: JSONEncoder().encode(EarlierState(state)))
        #expect(json == state)
    }

    @Test func theColumnsAreSmallerThanTaskObjects() throws {
        let state = Self.state()
        var many = state
        many.tasks = (0..<2_000).map { index in
            var task = state.tasks[index % state.tasks.count]
            task.task = "task-\(index)"
            return task
        }
        let columns = try StateCodec.encode(many).count
        let objects = try StateCodec.encode(EarlierState(many)).count
        #expect(columns * 2 < objects, "\(columns) bytes as columns, \(objects) as objects")
    }

    @Test func damagedColumnsAreRefused() throws {
        struct Columns: Encodable {
            var tenants = ["acme"]
            var upstreams = ["pool"]
            var classes = ["batch"]
            var key = [0, 1]  // 1 is out of range
            var task = ["a", "b"]
            var `class` = [0, 0]
            var calls = [1, 1]
            var tokens: [Int64] = [1, 1]
            var first_seen_at = [0.0, 0.0]
            var last_seen_at = [0.0, 0.0]
            var exceeded_at: [Double?] = [nil, nil]
        }
        let bytes = try StateCodec.encode(Columns())
        #expect(throws: LoopStateError.self) {
            _ = try StateCodec.decode(TaskColumns.self, from: bytes, component: "classifier")
        }
    }
}
