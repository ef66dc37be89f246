import AllotArguments
import AllotCore
import AllotServer
import AllotSimulation
import Foundation

/// `allot simulate --scenario NAME|FILE [--strategy S] [--seed N] [--out DIR] [--policy DIR]`,
/// `allot simulate --list`.
enum SimulateCommand {
    static func run(_ command: ParsedCommand, output: CommandOutput) async throws -> Int32 {
        if command.flag("list") {
            output.out(Scenario.builtinNames.joined(separator: "\n"))
            return 0
        }
        guard let name = command.string("scenario") else {
            output.err("allot simulate: --scenario NAME|FILE is required (built-ins: \(Scenario.builtinNames.joined(separator: ", ")))")
            return 2
        }
        var policy: Policy?
        if let directory = command.string("policy") {
            do throws(PolicyLoadError) {
                policy = try PolicySource.directory(directory).load().policy
            } catch {
                output.err("allot simulate: \(error.message)")
                return 1
            }
        }
        let scenario: Scenario
        do throws(ScenarioError) {
            scenario = try Scenario.load(name, tiers: policy.map { Set($0.tiers.map(\.name)) })
        } catch {
            output.err("allot simulate: \(error)")
            return 1
        }
        let seed = UInt64(try command.int("seed", in: 0...Int.max) ?? 1)
        let choice = command.string("strategy") ?? "all"
        let strategies: [SimulationStrategy] =
            choice == "all" ? SimulationStrategy.allCases : SimulationStrategy(rawValue: choice).map { [$0] } ?? []
        var traces: [SimulationTrace] = []
        for strategy in strategies {
            let started = Date()
            traces.append(try await Simulator.run(scenario, strategy: strategy, seed: seed, policy: policy))
            output.err(
                "allot simulate: \(scenario.name) \(strategy.rawValue): \(Int(scenario.durationSeconds)) simulated s in "
                    + String(format: "%.1f", Date().timeIntervalSince(started)) + " s")
        }
        let report = SimulationReport(scenario: scenario, seed: seed, traces: traces)
        output.out(report.table())
        if let directory = command.string("out") {
            do {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
                let files = [
                    ("report.json", report.json()), ("timeline.csv", report.timelineCSV()),
                    ("timeline.svg", report.timelineSVG()),
                    ("results.md", SimulationReport.markdownHeader + "\n" + report.markdownRows()),
                ]
                for (file, text) in files {
                    try Data(text.utf8).write(to: URL(fileURLWithPath: directory).appendingPathComponent(file))
                }
            } catch {
                output.err("allot simulate: cannot write to \(directory): \(error.localizedDescription)")
                return 1
            }
        }
        return 0
    }
}
