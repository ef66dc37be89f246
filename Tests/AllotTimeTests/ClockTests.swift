import Testing

@testable import AllotTime

/// Records the order in which sleepers woke.
private actor WakeLog {
    var order: [String] = []
    func append(_ name: String) { order.append(name) }
}

@Suite("Clocks")
struct ClockTests {
    @Test("ManualClock reads the time it was given until advanced; it never goes back")
    func manualTime() {
        let clock = ManualClock(now: 100)
        #expect(clock.now == 100)
        clock.advance(by: 2.5)
        #expect(clock.now == 102.5)
        clock.advance(to: 50)
        clock.advance(by: -10)
        clock.advance(by: .nan)
        #expect(clock.now == 102.5)
        #expect(clock.sleeperCount == 0)
        #expect(clock.nextDeadline == nil)
    }

    @Test("a deadline already reached returns without parking")
    func pastDeadline() async throws {
        let clock = ManualClock(now: 10)
        try await clock.sleep(until: 10)
        try await clock.sleep(until: 5)
        try await clock.sleep(for: 0)
        #expect(clock.sleeperCount == 0)
    }

    @Test("sleepers wake in deadline order and see a time at or past their deadline")
    func wakeOrder() async throws {
        let clock = ManualClock(now: 0)
        let log = WakeLog()
        let deadlines: [(String, Double)] = [("c", 30), ("a", 10), ("b", 20), ("late", 99)]
        var tasks: [Task<Double, any Error>] = []
        for (name, deadline) in deadlines {
            tasks.append(
                Task {
                    try await clock.sleep(until: deadline)
                    await log.append(name)
                    return clock.now
                })
            await clock.waitForSleepers(tasks.count)  // park one at a time, so registration order is known
        }
        #expect(clock.sleeperCount == 4)
        #expect(clock.nextDeadline == 10)

        clock.advance(to: 10)
        #expect(try await tasks[1].value == 10)
        #expect(clock.sleeperCount == 3)
        clock.advance(to: 35)
        #expect(try await tasks[2].value == 35)
        #expect(try await tasks[0].value == 35)
        #expect(clock.sleeperCount == 1)
        #expect(clock.nextDeadline == 99)
        #expect(await log.order.prefix(1) == ["a"])
        #expect(Set(await log.order) == ["a", "b", "c"])
        tasks[3].cancel()
        await #expect(throws: CancellationError.self) { try await tasks[3].value }
        #expect(clock.sleeperCount == 0)
    }

    @Test("sleepers sharing a deadline all wake on one advance; an earlier advance wakes none of them")
    func sharedDeadline() async throws {
        let clock = ManualClock(now: 0)
        let sleepers = (0..<5).map { _ in Task { try await clock.sleep(until: 5) } }
        await clock.waitForSleepers(5)
        clock.advance(to: 4.999)
        #expect(clock.sleeperCount == 5)
        clock.advance(to: 5)
        for sleeper in sleepers { try await sleeper.value }
        #expect(clock.sleeperCount == 0)
    }

    @Test("cancelling a parked sleeper throws CancellationError and removes it; others keep sleeping")
    func cancellation() async throws {
        let clock = ManualClock(now: 0)
        let doomed = Task { try await clock.sleep(until: 60) }
        let survivor = Task { try await clock.sleep(until: 60) }
        await clock.waitForSleepers(2)
        doomed.cancel()
        await #expect(throws: CancellationError.self) { try await doomed.value }
        #expect(clock.sleeperCount == 1)
        clock.advance(by: 60)
        try await survivor.value
        #expect(clock.sleeperCount == 0)
    }

    @Test("a task cancelled before it sleeps never parks")
    func cancelledBeforeSleeping() async {
        let clock = ManualClock(now: 0)
        let task = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await clock.sleep(until: 1_000)
        }
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(clock.sleeperCount == 0)
        let pastDeadline = Task {
            withUnsafeCurrentTask { $0?.cancel() }
            try await clock.sleep(until: 0)
        }
        await #expect(throws: CancellationError.self) { try await pastDeadline.value }
    }

    @Test("many sleepers racing cancellation and advancing never leak or double-resume")
    func cancellationRace() async {
        let clock = ManualClock(now: 0)
        var rng = SeededGenerator(seed: 99)
        var tasks: [(task: Task<Bool, Never>, cancelled: Bool)] = []
        for i in 0..<200 {
            let deadline = Double(Int.random(in: 1...50, using: &rng))
            let task = Task {
                do {
                    try await clock.sleep(until: deadline)
                    return true
                } catch {
                    return false
                }
            }
            if i % 3 == 0 { task.cancel() }
            tasks.append((task, i % 3 == 0))
        }
        for step in 1...50 {
            clock.advance(to: Double(step))
            await Task.yield()
        }
        for (task, cancelled) in tasks where !cancelled {
            #expect(await task.value, "an uncancelled sleeper must wake normally")
        }
        for (task, _) in tasks { _ = await task.value }  // every task finishes: nothing is left parked
        #expect(clock.sleeperCount == 0)
        #expect(clock.nextDeadline == nil)
    }

    @Test("SystemClock reads the wall clock and sleeps until a near deadline")
    func systemClock() async throws {
        let clock = SystemClock()
        let start = clock.now
        #expect(start > 1_700_000_000)
        let monoStart = MonotonicClock.now()
        try await clock.sleep(until: start + 0.005)
        #expect(clock.now >= start + 0.005)
        #expect(MonotonicClock.seconds(since: monoStart) >= 0.004)
        #expect(MonotonicClock.seconds(since: .max) == 0)
    }

    @Test("SystemClock's sleep throws when the task is cancelled")
    func systemClockCancellation() async {
        let clock = SystemClock()
        let task = Task { try await clock.sleep(until: clock.now + 3_600) }
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
    }
}
