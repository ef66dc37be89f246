import AllotArguments
import AllotAssets
import AllotLog
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
        // The log's last lines (`stopped`, an error) wait in its queue: out before the process ends, unless the
        // reader is stuck.
        QueuedLogSink.standardError.flush(timeout: 2)
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
        case [] where command.flag("version"):
            output.out(AllotCLI.versionText)
            return 0
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

extension AllotCLI {
    /// The release, bumped with each tagged release.
    public static let version = "0.1.0"

    /// `allot --version`: the release and the newest database migration the binary carries (and applies).
    static var versionText: String {
        "allot \(version)\ndatabase schema: \(AllotAssets.migrations.map(\.name).max() ?? "none")"
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

    /// Lines to stdout and stderr, each written with one call and a final newline. Diagnostics quote what the user
    /// gave, so stderr shows control and bidirectional-formatting characters escaped (``printable(_:)``).
    public static let standard = CommandOutput(
        out: { text in FileHandle.standardOutput.write(Data((text.hasSuffix("\n") ? text : text + "\n").utf8)) },
        err: { text in
            let shown = printable(text)
            FileHandle.standardError.write(Data((shown.hasSuffix("\n") ? shown : shown + "\n").utf8))
        }
    )

    /// `text` with every control character but newline and tab, and every bidirectional-formatting character,
    /// written `\u{…}`: a tenant id holding a NUL or a right-to-left override (U+202E), echoed in an error, cut
    /// or reversed the rest of the terminal line (round 11).
    public static func printable(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isHidden) else { return text }
        var shown = ""
        shown.reserveCapacity(text.utf8.count + 16)
        for scalar in text.unicodeScalars {
            if isHidden(scalar) {
                shown += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
            } else {
                shown.unicodeScalars.append(scalar)
            }
        }
        return shown
    }

    private static func isHidden(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x0A, 0x09: false
        case 0x00...0x1F, 0x7F...0x9F: true
        case 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069: true
        default: false
        }
    }
}
