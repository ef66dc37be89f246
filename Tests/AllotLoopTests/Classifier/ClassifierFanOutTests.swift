import AllotCore
import AllotSignals
import AllotStore
import Testing

@testable import AllotLoop

/// The fan-out the engine detects a tenant mid-task from (SPEC 6.5): several calls to each task its first attempts
/// carry, over the short window.
@Suite("Classifier: task fan-out")
struct ClassifierFanOutTests {
    typealias F = ClassifierFixtures

    /// Twelve 5-s ticks of 12 served calls per tenant: `fan` in tasks of four calls, `solo` a task per call, `bare`
    /// without task ids, and `retrying` one first attempt per task and three retries of it.
    static func run() -> ClassifierReport {
        var run = ClassifierRun(start: F.t0)
        var report = run.tick()
        for tick in 0..<12 {
            report = run.tick { script, from, to in
                var events: [StoredEvent] = []
                for (tenant, task, retry) in [
                    ("fan", { (i: Int) in "fan-\(tick)-\(i / 4)" }, { (_: Int) in 0 }),
                    ("solo", { (i: Int) in "solo-\(tick)-\(i)" }, { (_: Int) in 0 }),
                    ("retrying", { (i: Int) in "retrying-\(tick)-\(i / 4)" }, { (i: Int) in i % 4 }),
                ] as [(String, (Int) -> String, (Int) -> Int)] {
                    var index = 0
                    events += script.spread(12, from: from, to: to) { script, at in
                        defer { index += 1 }
                        return script.event(
                            at: at, tenant: tenant, prompt: 100, completion: 50, retry: retry(index),
                            taskID: task(index))
                    }
                }
                return events + F.served(&script, 12, from: from, to: to, tenant: "bare")
            }
        }
        return report
    }

    @Test func tasksOfSeveralCallsFanOut() throws {
        let report = Self.run()
        func fansOut(_ tenant: String) throws -> Bool {
            try #require(F.observation(report, AllocationKey(tenant: tenant, upstream: F.pool))).fansOut
        }
        #expect(try fansOut("fan"))
        #expect(try !fansOut("solo"))
        #expect(try !fansOut("bare"))
        // Retries are the same call again: one call a task.
        #expect(try !fansOut("retrying"))
    }
}
