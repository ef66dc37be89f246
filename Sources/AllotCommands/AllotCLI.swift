import AllotArguments
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Entry point of the `allot` executable: parses the command line and runs one command.
///
/// Exit codes: 0 success, 1 the command failed (the message says why), 2 usage error.
public enum AllotCLI {
    public static func main() async {
        let arguments = Array(CommandLine.arguments.dropFirst())
        MallocTuning.apply(environment: ProcessInfo.processInfo.environment)
        let code = await run(arguments: arguments, environment: ProcessInfo.processInfo.environment)
        exit(code)
    }

    /// Runs one command line; returns the process exit code. Separate from `main` for tests.
    public static func run(
        arguments: [String], environment: [String: String], output: CommandOutput = .standard
    ) async -> Int32 {
        let parser = CommandParser(root: CommandTree.root)
        let parsed: ParsedCommand
        do throws(UsageError) {
            switch try parser.parse(arguments, environment: environment) {
            case .help(let text):
                output.out(text)
                return 0
            case .command(let command):
                parsed = command
            }
        } catch {
            output.err(error.formatted)
            return error.exitCode
        }
        do {
            return try await dispatch(parsed, environment: environment, output: output)
        } catch let error as UsageError {
            output.err(error.formatted)
            return error.exitCode
        } catch {
            output.err("allot \(parsed.path.joined(separator: " ")): \(error)")
            return 1
        }
    }

    static func dispatch(_ command: ParsedCommand, environment: [String: String], output: CommandOutput) async throws
        -> Int32
    {
        switch command.path {
        case ["migrate"]:
            return try await MigrateCommand.run(command, output: output)
        case ["serve"]:
            return try await ServeCommand.run(command, output: output)
        case ["plan"]:
            return try await PlanCommand.run(command, output: output)
        case ["tokens", "create"], ["tokens", "list"], ["tokens", "revoke"]:
            return try await TokensCommand.run(command, output: output)
        case ["drain"]:
            return try await DrainCommand.run(command, output: output)
        case ["simulate"]:
            return try await SimulateCommand.run(command, output: output)
        case ["bench", "allocation"], ["bench", "ingest"], ["bench", "tick"], ["bench", "longpoll"],
            ["bench", "snapshot"], ["bench", "memory"]:
            return try await BenchCommand.run(command, output: output)
        default:
            // A group without a subcommand (`allot tokens`) or the bare program: show its help.
            let parser = CommandParser(root: CommandTree.root)
            output.err(parser.help(for: command.path) ?? "")
            return 2
        }
    }
}

/// Where commands write: standard output for results, standard error for diagnostics.
/// Tests substitute capturing closures.
public struct CommandOutput: Sendable {
    public var out: @Sendable (String) -> Void
    public var err: @Sendable (String) -> Void

    public init(out: @escaping @Sendable (String) -> Void, err: @escaping @Sendable (String) -> Void) {
        self.out = out
        self.err = err
    }

    /// Lines to stdout and stderr, each written with one call and a final newline.
    public static let standard = CommandOutput(
        out: { text in FileHandle.standardOutput.write(Data((text.hasSuffix("\n") ? text : text + "\n").utf8)) },
        err: { text in FileHandle.standardError.write(Data((text.hasSuffix("\n") ? text : text + "\n").utf8)) }
    )
}
