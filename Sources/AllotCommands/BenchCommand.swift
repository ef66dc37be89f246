import AllotArguments
import AllotCore
import AllotLoop
import AllotServer

/// `allot bench allocation|ingest|tick|longpoll|snapshot|memory`: the benchmarks behind SPEC 13's
/// speed and memory goals, each printing its figures (medians of its runs) and the goal beside
/// them. Meant for a release build (`swift build -c release`); a debug build says so first.
enum BenchCommand {
    static func run(_ command: ParsedCommand, output: CommandOutput) async throws -> Int32 {
        #if DEBUG
            output.err(
                "allot bench: this is a debug build; figures are much slower than release (swift build -c release)")
        #endif
        let log: @Sendable (String) -> Void = { line in output.err(line) }
        switch command.path.last {
        case "allocation":
            let runs = try command.int("runs", in: 1...1000) ?? 7
            output.out("one allocation of one pool, RPM and TPM (median of \(runs) runs after a warm-up):")
            for result in AllocationBenchmark.run(repetitions: runs) {
                output.out(line(tenants: result.tenants, result: result, goal: result.tenants == 100_000 ? 50 : nil))
            }
            output.out("one engine decision (PolicyEngine.decide, steady state):")
            for result in AllocationBenchmark.runDecision(repetitions: runs) {
                output.out(line(tenants: result.tenants, result: result, goal: nil))
            }
        case "ingest":
            let configuration = IngestBenchmark.Configuration(
                clients: try command.int("clients", in: 1...256) ?? 8,
                duration: try command.double("seconds", in: 0.05...3600) ?? 5,
                runs: try command.int("runs", in: 1...100) ?? 3, idempotencyKeys: command.flag("idempotency-keys"))
            let report = try await IngestBenchmark.run(configuration, progress: log)
            output.out(report.text)
            output.out(verdict(report.eventsPerSecond >= 100_000, "≥ 100,000 events/s through HTTP"))
        case "tick", "memory":
            let memoryOnly = command.path.last == "memory"
            let tenants = try command.int("tenants", in: 1...10_000_000) ?? 10_000
            let configuration = LoopBenchmark.Configuration(
                tenants: tenants,
                windowEvents: memoryOnly
                    ? 100 * tenants : (try command.int("events", in: 0...100_000_000) ?? 1_000_000),
                runs: memoryOnly ? 2 : (try command.int("runs", in: 1...1000) ?? 5))
            let report = try await LoopBenchmark.tick(configuration, estimators: .standard, log: log)
            output.out(report.text)
            if memoryOnly {
                // The peak (the catch-up ticks' included), in decimal megabytes: the verdict judged the resident size
                // after the checkpoint in MiB, and printed PASS beside a peak of 279 MiB (2026-11-30).
                let megabytes = report.peakResidentBytes / 1_000_000
                output.out(
                    verdict(megabytes <= 256 || tenants > 10_000, "peak resident ≤ 256 MB at 10,000 tenants"))
            } else {
                output.out(verdict(report.median(.total) <= 0.250, "tick ≤ 250 ms"))
            }
        case "longpoll":
            let configuration = SnapshotBenchmark.Configuration(
                watchers: try command.int("watchers", in: 1...100_000) ?? 5_000,
                runs: try command.int("runs", in: 1...1000) ?? 5)
            let report = try await SnapshotBenchmark.longPoll(configuration, log: log)
            output.out(report.text)
            output.out(
                verdict(
                    report.everyWatcherAnswered && report.medianMax <= 0.100,
                    "every watcher answered within 100 ms of the publish (median of runs' slowest)"))
        case "snapshot":
            let configuration = SnapshotBenchmark.Configuration(
                connections: try command.int("connections", in: 1...10_000) ?? 64,
                seconds: try command.double("seconds", in: 0.05...3600) ?? 5)
            let report = try await SnapshotBenchmark.conditional(configuration, log: log)
            output.out(report.text)
            output.out(
                verdict(
                    report.medianPerSecond >= 20_000,
                    "≥ 20,000 conditional requests/s (\(report.wrk.isEmpty ? "in-process client" : "wrk"))"))
        default:
            output.err("allot bench: unknown benchmark \(command.path.joined(separator: " "))")
            return 2
        }
        return 0
    }

    private static func line(tenants: Int, result: AllocationBenchmark.Result, goal: Double?) -> String {
        let runs = result.runsMilliseconds
        let figure =
            "  \(tenants) tenants: median \(format(result.medianMilliseconds)) ms "
            + "(min \(format(runs.min() ?? 0)), max \(format(runs.max() ?? 0)))"
        guard let goal else { return figure }
        return figure + " — goal < \(Int(goal)) ms: " + (result.medianMilliseconds < goal ? "PASS" : "MISS")
    }

    private static func verdict(_ pass: Bool, _ goal: String) -> String {
        "goal \(goal): \(pass ? "PASS" : "MISS")"
    }

    private static func format(_ value: Double) -> String {
        String((value * 100).rounded() / 100)
    }
}
