import AllotArguments
import Testing

/// Parses with the sample tree and expects a command (not help).
func parse(_ arguments: [String], environment: [String: String] = [:]) throws -> ParsedCommand {
    switch try SampleCommands.parser.parse(arguments, environment: environment) {
    case .command(let command): return command
    case .help(let text): throw HelpInstead(text: text)
    }
}

/// Parses with the sample tree and expects help text.
func helpText(_ arguments: [String], environment: [String: String] = [:]) throws -> String {
    switch try SampleCommands.parser.parse(arguments, environment: environment) {
    case .command(let command): throw CommandInstead(path: command.path)
    case .help(let text): return text
    }
}

/// Parses with the sample tree and returns the usage error it must raise.
func usageError(
    _ arguments: [String], environment: [String: String] = [:], sourceLocation: SourceLocation = #_sourceLocation
) -> UsageError? {
    #expect(throws: UsageError.self, sourceLocation: sourceLocation) {
        try SampleCommands.parser.parse(arguments, environment: environment)
    }
}

struct HelpInstead: Error { let text: String }
struct CommandInstead: Error { let path: [String] }
