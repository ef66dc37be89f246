import Testing

@testable import AllotServer

/// Shutdown waits for the loop a bounded time: a loop stuck in a tick is left, not waited for forever (round 11:
/// SIGTERM hung until kill -9).
@Suite struct ShutdownWaitTests {
    @Test func workThatFinishesInTimeIsWaitedFor() async {
        let counter = Locked(0)
        let finished = await AllotService.finishes(within: 60) { counter.withLock { $0 += 1 } }
        #expect(finished)
        #expect(counter.value == 1)
    }

    @Test func workThatDoesNotFinishIsLeftAfterTheWait() async {
        let finished = await AllotService.finishes(within: 0.01) { try? await Task.sleep(for: .seconds(3600)) }
        #expect(!finished)
    }
}
