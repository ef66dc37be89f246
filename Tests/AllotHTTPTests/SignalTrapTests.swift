import Glibc
import Testing

@testable import AllotHTTP

@Suite struct SignalTrapTests {
    @Test func deliversATrappedSignalToWaitersAndHandlers() async throws {
        let trap = await SignalTrap(signals: [SIGUSR2])
        defer { trap.cancel() }
        let seen = Locked<[Int32]>([])
        trap.onSignal { number in seen.withLock { $0.append(number) } }
        #expect(trap.received == nil)
        kill(getpid(), SIGUSR2)
        let number = try await withDeadline(seconds: 60) { await trap.wait() }
        #expect(number == SIGUSR2)
        #expect(trap.received == SIGUSR2)
        #expect(await trap.wait() == SIGUSR2)  // later waiters return at once
        for _ in 0..<200 where seen.withLock({ $0.isEmpty }) {
            try await Task.sleep(for: .milliseconds(5))
        }
        #expect(seen.withLock { $0 } == [SIGUSR2])
    }

    @Test func waitingIsCancellable() async throws {
        let trap = await SignalTrap(signals: [SIGUSR1])
        defer { trap.cancel() }
        let waiter = Task { await trap.wait() }
        waiter.cancel()
        #expect(await waiter.value == nil)
    }
}
