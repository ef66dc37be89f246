import AllotCommands
import Testing

/// Every `allot bench` subcommand runs end to end with tiny parameters and prints its figures and
/// goal (speed itself is never asserted: the suite runs on loaded machines).
@Suite struct BenchCommandTests {
    @Test func allocationPrintsEverySizeAndTheGoal() async {
        let result = await runCLI(["bench", "allocation", "--runs", "1"])
        #expect(result.code == 0, "\(result.err)")
        #expect(result.out.contains("  1000 tenants: median "))
        #expect(result.out.contains("  100000 tenants: median "))
        #expect(result.out.contains("goal < 50 ms: "))
        #expect(result.out.contains("one engine decision"))
    }

    @Test func ingestTickMemoryLongPollAndSnapshotRunSmall() async {
        let ingest = await runCLI(["bench", "ingest", "--seconds", "0.2", "--clients", "2", "--runs", "1"])
        #expect(ingest.code == 0, "\(ingest.err)")
        #expect(ingest.out.contains("goal ≥ 100,000 events/s through HTTP: "))
        let tick = await runCLI(["bench", "tick", "--tenants", "40", "--events", "2000", "--runs", "1"])
        #expect(tick.code == 0, "\(tick.err)")
        #expect(tick.out.contains("tick over 40 tenants, 2000 events in the window"))
        #expect(tick.out.contains("goal tick ≤ 250 ms: "))
        let memory = await runCLI(["bench", "memory", "--tenants", "40"])
        #expect(memory.code == 0, "\(memory.err)")
        #expect(memory.out.contains("resident memory: "))
        let longPoll = await runCLI(["bench", "longpoll", "--watchers", "20", "--runs", "1"])
        #expect(longPoll.code == 0, "\(longPoll.err)")
        #expect(longPoll.out.contains("long-poll wake-up: 20 watchers"))
        #expect(longPoll.out.contains("goal every watcher answered within 100 ms of the publish"))
        let snapshot = await runCLI(["bench", "snapshot", "--seconds", "0.2", "--connections", "2"])
        #expect(snapshot.code == 0, "\(snapshot.err)")
        #expect(snapshot.out.contains("conditional snapshot requests"))
        #expect(snapshot.out.contains("goal ≥ 20,000 conditional requests/s"))
    }

    @Test func badValuesAreUsageErrors() async {
        let result = await runCLI(["bench", "tick", "--runs", "0"])
        #expect(result.code == 2)
        #expect(result.err.contains("--runs"))
        let bare = await runCLI(["bench"])
        #expect(bare.code == 2)
        #expect((bare.out + bare.err).contains("allocation"))
    }
}
