/// The user typed something the command line does not accept.
///
/// The executable prints `formatted` to standard error and exits with `exitCode` (2, the
/// conventional status for command-line misuse, distinct from 1 for a failure of the work itself).
public struct UsageError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What is wrong, naming the option, variable or argument and the offending value,
    /// e.g. `unknown option '--lisen' (did you mean '--listen'?)`.
    public let message: String
    /// The relevant usage text: the command's usage line and a pointer to its help, or the whole
    /// help when the mistake is a missing command.
    public let usage: String
    /// The command the error belongs to, program name first (`["allot", "tokens", "create"]`).
    public let commandPath: [String]

    /// The process exit status for a usage error.
    public static let exitCode: Int32 = 2

    /// Creates a usage error.
    public init(message: String, usage: String, commandPath: [String]) {
        self.message = message
        self.usage = usage
        self.commandPath = commandPath
    }

    /// The process exit status for this error (always `UsageError.exitCode`).
    public var exitCode: Int32 { UsageError.exitCode }

    /// The complete text for standard error, ending in a newline:
    /// `allot: error: MESSAGE`, a blank line, then the usage text.
    public var formatted: String {
        "\(commandPath.first ?? "error"): error: \(message)\n\n\(usage)"
    }

    public var description: String { "error: \(message)" }
}

/// Quotes a user-supplied argument for an error message: single quotes, control characters escaped
/// (so a hostile argument cannot drive the terminal) and long values shortened.
func quoted(_ text: String, limit: Int = 64) -> String {
    var out = "'"
    var count = 0
    for scalar in text.unicodeScalars {
        if count == limit {
            out += "…"
            break
        }
        count += 1
        switch scalar.value {
        case 0x0a: out += "\\n"
        case 0x09: out += "\\t"
        case 0x0d: out += "\\r"
        case 0x00..<0x20, 0x7f..<0xa0, 0x2028, 0x2029, 0x202a...0x202e, 0x2066...0x2069:
            // C0/C1 controls, line separators and bidirectional overrides.
            out += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
        default: out.unicodeScalars.append(scalar)
        }
    }
    return out + "'"
}
