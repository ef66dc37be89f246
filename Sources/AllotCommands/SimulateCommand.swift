import AllotArguments
import AllotCore
import AllotServer
import AllotSimulation
import Foundation

/// `allot simulate --scenario NAME|FILE [--strategy S] [--seed N | --seeds LIST] [--out DIR] [--policy DIR]
/// [--gateways N]`,
/// `allot simulate --list`, `allot simulate --scenario NAME|FILE --check`.
enum SimulateCommand {
    static func run(_ command: ParsedCommand, output: CommandOutput) async throws -> Int32 {
        if command.flag("list") {
            // `--list --scenario x` listed and ignored the scenario (round 14): one or the other.
            if let given = command.optionsOnCommandLine.first {
                throw command.usageError("--list takes no other option (got --\(given))")
            }
            output.out(Scenario.builtinNames.joined(separator: "\n"))
            return 0
        }
        guard let name = command.string("scenario") else {
            output.err(
                "allot simulate: --scenario NAME|FILE is required (built-ins: \(Scenario.builtinNames.joined(separator: ", ")))"
            )
            return 2
        }
        var policy: Policy?
        // Named in the table, in report.json and by --check: which policy `allot` ran with, and its version
        // as `allot serve` would report it.
        let provenance: PolicyProvenance
        do throws(PolicyLoadError) {
            if let directory = command.string("policy") {
                let loaded = try PolicySource.directory(directory).load()
                policy = loaded.policy
                provenance = PolicyProvenance(source: directory, version: loaded.version)
            } else {
                // The built-in files, loaded once here for their version and handed to every run, as a --policy is
                // (what each run would otherwise load again: SimulationPolicy.defaultPolicy(), the same files).
                let loaded = try PolicySource.embedded.load()
                policy = loaded.policy
                provenance = PolicyProvenance(source: PolicyProvenance.builtIn, version: loaded.version)
            }
        } catch {
            output.err("allot simulate: \(error.message)")
            return 1
        }
        var scenario: Scenario
        do throws(ScenarioError) {
            scenario = try Scenario.load(name, tiers: policy.map { Set($0.tiers.map(\.name)) })
        } catch {
            // Every fault of the file, one per line.
            for line in error.description.split(separator: "\n") { output.err("allot simulate: \(line)") }
            return 1
        }
        if let gateways = try command.int("gateways", in: 1...32) {
            output.err(
                "allot simulate: \(scenario.name) with \(gateways) gateway\(gateways == 1 ? "" : "s") "
                    + "(the scenario has \(scenario.gateways))")
            scenario.gateways = gateways
        }
        // The seeds are read before `--check` returns: a check that says "ok" to `--seeds 5-1` misleads.
        let seed = UInt64(try command.int("seed", in: 0...Int.max) ?? 1)
        var seeds = [seed]
        if let list = command.string("seeds") {
            switch SimulationReport.parseSeeds(list) {
            case .success(let parsed): seeds = parsed
            case .failure(let error):
                output.err("allot simulate: --seeds: \(error.message)")
                return 2
            }
        }
        let policyWarnings = policy.map { scenario.policyWarnings(policy: $0) } ?? []
        if command.flag("check") {
            output.out(
                ([scenario.summary] + policyWarnings.map { "  warning: " + $0 }).joined(separator: "\n") + "\n  "
                    + provenance.line)
            return 0
        }
        for warning in scenario.warnings + policyWarnings { output.err("allot simulate: warning: \(warning)") }
        // The output directory is made ready before the run, not after minutes of simulation.
        if let directory = command.string("out"), let problem = Self.outputProblem(directory) {
            output.err("allot simulate: --out \(directory): \(problem)")
            return 1
        }
        let choice = command.string("strategy") ?? "all"
        let strategies: [SimulationStrategy] =
            choice == "all" ? SimulationStrategy.allCases : SimulationStrategy(rawValue: choice).map { [$0] } ?? []
        var report: SimulationReport
        if command.string("seeds") == nil {
            var traces: [SimulationTrace] = []
            for strategy in strategies {
                let started = Date()
                traces.append(try await Simulator.run(scenario, strategy: strategy, seed: seed, policy: policy))
                output.err(
                    "allot simulate: \(scenario.name) \(strategy.rawValue): \(Int(scenario.durationSeconds)) simulated s in "
                        + String(format: "%.1f", Date().timeIntervalSince(started)) + " s")
            }
            report = SimulationReport(scenario: scenario, seed: seed, traces: traces)
        } else {
            // Seeds run side by side (as many as there are cores), each keeping only its metrics: a trace
            // per seed and strategy would not fit. Every run is deterministic on its own, so the order in
            // which they finish changes nothing.
            let (seeds, policy, scenario) = (seeds, policy, scenario)
            let perSeed = try await withThrowingTaskGroup(of: (Int, [RunMetrics]).self) { group in
                var results = [[RunMetrics]](repeating: [], count: seeds.count)
                var next = 0
                func start(_ index: Int) {
                    let seed = seeds[index]
                    group.addTask {
                        let started = Date()
                        var runs: [RunMetrics] = []
                        for strategy in strategies {
                            let trace = try await Simulator.run(
                                scenario, strategy: strategy, seed: seed, policy: policy)
                            runs.append(RunMetrics(trace: trace))
                        }
                        output.err(
                            "allot simulate: \(scenario.name) seed \(seed): \(strategies.count) "
                                + "strateg\(strategies.count == 1 ? "y" : "ies") in "
                                + String(format: "%.1f", Date().timeIntervalSince(started)) + " s")
                        return (index, runs)
                    }
                }
                while next < min(seeds.count, max(1, ProcessInfo.processInfo.activeProcessorCount)) {
                    start(next)
                    next += 1
                }
                while let (index, runs) = try await group.next() {
                    results[index] = runs
                    if next < seeds.count {
                        start(next)
                        next += 1
                    }
                }
                return results
            }
            report = SimulationReport(scenario: scenario, seeds: seeds, perSeed: perSeed)
        }
        report.policy = provenance
        output.out(report.table())
        if let directory = command.string("out") {
            do {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
                var files = [
                    ("report.json", report.json()),
                    (
                        "results.md",
                        SimulationReport.markdownHeader + "\n" + report.markdownRows() + report.markdownPoolTable()
                    ),
                ]
                if !report.traces.isEmpty {
                    files += [
                        ("timeline.csv", report.timelineCSV()), ("timeline.svg", report.timelineSVG()),
                        ("tasks.csv", report.tasksCSV()), ("tenants.csv", report.tenantsCSV()),
                    ]
                }
                for (file, text) in files {
                    try Data(text.utf8).write(to: URL(fileURLWithPath: directory).appendingPathComponent(file))
                }
                if report.traces.isEmpty {
                    // Means over seeds have no timeline: one left from an earlier run here would sit beside this
                    // report as if it were its own (outside evaluation round 25). Only a file (or a link) goes.
                    for stale in ["timeline.csv", "timeline.svg", "tasks.csv", "tenants.csv"] {
                        let path = URL(fileURLWithPath: directory).appendingPathComponent(stale).path
                        let type =
                            (try? FileManager.default.attributesOfItem(atPath: path))?[.type] as? FileAttributeType
                        guard type == .typeRegular || type == .typeSymbolicLink else { continue }
                        try FileManager.default.removeItem(atPath: path)
                        output.err("allot simulate: removed \(path), an earlier run's (the means over seeds have none)")
                    }
                }
            } catch {
                output.err("allot simulate: cannot write to \(directory): \(error.localizedDescription)")
                return 1
            }
        }
        return 0
    }

    /// Why `directory` cannot take the run's files (created, with its parents, if missing), or nil when it can.
    static func outputProblem(_ directory: String) -> String? {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: directory, isDirectory: &isDirectory) {
            if !isDirectory.boolValue { return "exists and is not a directory" }
        } else {
            do {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            } catch {
                let code = ((error as NSError).userInfo[NSUnderlyingErrorKey] as? NSError)?.code ?? Int(errno)
                return "cannot create the directory (\(String(cString: strerror(Int32(code)))))"
            }
        }
        if access(directory, W_OK | X_OK) != 0 { return "not writable (\(String(cString: strerror(errno))))" }
        return nil
    }
}
