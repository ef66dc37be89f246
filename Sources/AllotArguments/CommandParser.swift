/// What the command line asked for.
public enum ParseResult: Sendable {
    /// Run this command.
    case command(ParsedCommand)
    /// Print this help text to standard output and exit 0 (`--help`, `-h` or `allot help …`).
    case help(String)
}

/// Parses an argument vector against a tree of `CommandSpec`s.
///
/// Pure: it reads only its arguments (the command line *without* the program name, and the
/// environment as a dictionary), so every behaviour is testable without a process.
///
/// Grammar, in order of precedence:
/// - `--` ends option parsing; everything after it is positional.
/// - `--help` / `-h` anywhere before `--` asks for the help of the command reached so far, and
///   wins over any other mistake on the line except an unknown command name.
/// - `--name=VALUE` and `--name VALUE` set an option; the separate form does not take a next
///   argument that looks like an option (`--data --dev` is "missing value", use `--data=--dev`),
///   but does take `-`, negative numbers and other words whose dash a digit follows (`-1-2`).
/// - `--flag` turns a flag on; `--flag=BOOL` sets it explicitly.
/// - `-x VALUE` / `-x` are short aliases; bundling (`-abc`) is not supported.
/// - `-` and any other word is a positional, or, for a command with subcommands, a command name;
///   `help` as the first word of the root asks for help (`allot help tokens create`).
/// - Values resolve command line > environment (`ALLOT_*`) > default.
public struct CommandParser: Sendable {
    /// The root command (its name is the program name).
    public let root: CommandSpec

    /// A parser for `root`. The spec must be valid (see `problems(in:)`); an invalid spec is a
    /// programming error and stops the process with the list of problems.
    public init(root: CommandSpec) {
        let problems = CommandParser.problems(in: root)
        precondition(problems.isEmpty, "invalid command spec:\n" + problems.joined(separator: "\n"))
        self.root = root
    }

    /// Parses `arguments` (without the program name) with `environment` as the fallback source.
    public func parse(_ arguments: [String], environment: [String: String] = [:]) throws(UsageError) -> ParseResult {
        var state = ParseState(root: root, arguments: arguments, environment: environment)
        do {
            return try state.run()
        } catch {
            // A request for help beats a mistake elsewhere on the line (`allot serve --bogus -h`),
            // except an unknown command, whose "did you mean" is more useful than the parent's help.
            if !error.isUnknownCommand, state.helpRequestedLater {
                return .help(HelpFormatter.help(for: state.chain))
            }
            throw error.error
        }
    }

    /// The help page for a command path after the program name (`["tokens", "create"]`), or nil
    /// if there is no such command.
    public func help(for path: [String]) -> String? {
        var chain = [root]
        for name in path {
            guard let next = chain[chain.count - 1].subcommand(named: name) else { return nil }
            chain.append(next)
        }
        return HelpFormatter.help(for: chain)
    }

    /// Everything wrong with a spec tree, one message per problem (empty when valid).
    ///
    /// Checked: name syntax; unique command, option, flag and short names across each command
    /// and what it inherits (including the built-in `help`/`-h`); environment variable syntax;
    /// defaults among the choices; no required option with a default; positionals ordered
    /// required, optional, variadic (at most one, last); no positionals beside subcommands.
    public static func problems(in root: CommandSpec) -> [String] {
        var problems: [String] = []
        check(root, ancestors: [], problems: &problems)
        return problems
    }

    private static func check(_ command: CommandSpec, ancestors: [CommandSpec], problems: inout [String]) {
        let path = (ancestors.map(\.name) + [command.name]).joined(separator: " ")
        func problem(_ text: String) { problems.append("\(path): \(text)") }

        if !isValidName(command.name) { problem("command name \(quoted(command.name)) must match [a-z][a-z0-9-]*") }
        let inheritedOptions = ancestors.flatMap { $0.options.filter(\.isInherited) }
        let inheritedFlags = ancestors.flatMap { $0.flags.filter(\.isInherited) }
        // Inherited names were checked against each other where they were declared; here the
        // command's own names must not clash with them, with each other or with the built-in help.
        var longNames = Set(["help"] + inheritedOptions.map(\.name) + inheritedFlags.map(\.name))
        var shortNames = Set(["h"] + inheritedOptions.compactMap(\.short) + inheritedFlags.compactMap(\.short))
        let own = command.options.map { ($0.name, $0.short) } + command.flags.map { ($0.name, $0.short) }
        for (name, short) in own {
            if !isValidName(name) { problem("option name \(quoted(name)) must match [a-z][a-z0-9-]*") }
            if !longNames.insert(name).inserted {
                problem("--\(name) is declared more than once (or clashes with --help or an inherited option)")
            }
            guard let short else { continue }
            if !(short.isASCII && (short.isLetter || short.isNumber)) {
                problem("short name \(quoted(String(short))) of --\(name) must be an ASCII letter or digit")
            }
            if !shortNames.insert(short).inserted {
                problem("-\(short) is declared more than once (or clashes with -h or an inherited option)")
            }
        }
        for option in command.options {
            if let variable = option.environment, !isValidEnvironmentName(variable) {
                problem("environment variable \(quoted(variable)) of --\(option.name) must match [A-Z_][A-Z0-9_]*")
            }
            if option.valueName.isEmpty { problem("--\(option.name) needs a value placeholder") }
            if option.isRequired && option.defaultValue != nil {
                problem("--\(option.name) is required but has a default")
            }
            if let value = option.defaultValue, !option.choices.isEmpty, !option.choices.contains(value) {
                problem("default \(quoted(value)) of --\(option.name) is not one of its choices")
            }
        }
        for flag in command.flags {
            if let variable = flag.environment, !isValidEnvironmentName(variable) {
                problem("environment variable \(quoted(variable)) of --\(flag.name) must match [A-Z_][A-Z0-9_]*")
            }
        }

        var positionalNames = Set<String>()
        var rank = 0  // 0 required, 1 optional, 2 variadic
        for (index, positional) in command.positionals.enumerated() {
            if !isValidName(positional.name) {
                problem("positional name \(quoted(positional.name)) must match [a-z][a-z0-9-]*")
            }
            if !positionalNames.insert(positional.name).inserted {
                problem("positional <\(positional.name)> is declared more than once")
            }
            let thisRank: Int
            switch positional.arity {
            case .required: thisRank = 0
            case .optional: thisRank = 1
            case .variadic(let minimum):
                thisRank = 2
                if minimum < 0 { problem("variadic <\(positional.name)> has a negative minimum") }
                if index != command.positionals.count - 1 { problem("variadic <\(positional.name)> must be last") }
            }
            if thisRank < rank { problem("positional <\(positional.name)> follows an optional or variadic one") }
            rank = max(rank, thisRank)
        }
        if !command.subcommands.isEmpty && !command.positionals.isEmpty {
            problem("a command with subcommands cannot take positional arguments")
        }
        var commandNames = Set<String>()
        for subcommand in command.subcommands {
            if !commandNames.insert(subcommand.name).inserted {
                problem("subcommand \(subcommand.name) is declared more than once")
            }
            if ancestors.isEmpty && subcommand.name == "help" {
                problem("subcommand help is built in at the top level")
            }
            check(subcommand, ancestors: ancestors + [command], problems: &problems)
        }
    }

    static func isValidName(_ name: String) -> Bool {
        guard let first = name.first, first.isASCII, first.isLowercase else { return false }
        return name.allSatisfy { $0.isASCII && ($0.isLowercase || $0.isNumber || $0 == "-") }
    }

    static func isValidEnvironmentName(_ name: String) -> Bool {
        guard let first = name.first, first.isASCII, first.isUppercase || first == "_" else { return false }
        return name.allSatisfy { $0.isASCII && ($0.isUppercase || $0.isNumber || $0 == "_") }
    }
}

/// A usage error plus whether it is about an unknown command (which `--help` does not override).
struct ParseFailure: Error {
    let error: UsageError
    let isUnknownCommand: Bool
}

/// The mutable walk over one argument vector.
struct ParseState {
    let arguments: [String]
    let environment: [String: String]
    private(set) var chain: [CommandSpec]
    private var index = 0
    private var optionValues: [String: [String]] = [:]
    private var flagValues: [String: Bool] = [:]
    private var positionals: [String] = []
    private var afterTerminator = false

    init(root: CommandSpec, arguments: [String], environment: [String: String]) {
        self.chain = [root]
        self.arguments = arguments
        self.environment = environment
    }

    /// Whether `--help`/`-h` appears from the current position on (before any `--`).
    var helpRequestedLater: Bool {
        for argument in arguments[min(index, arguments.count)...] {
            if argument == "--" { return false }
            if argument == "--help" || argument == "-h" { return true }
        }
        return false
    }

    private var command: CommandSpec { chain[chain.count - 1] }

    private var visibleOptions: [OptionSpec] {
        command.options + HelpFormatter.inheritedEntries(for: chain).options
    }

    private var visibleFlags: [FlagSpec] {
        command.flags + HelpFormatter.inheritedEntries(for: chain).flags
    }

    mutating func run() throws(ParseFailure) -> ParseResult {
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            if afterTerminator {
                positionals.append(argument)
            } else if argument == "--" {
                afterTerminator = true
            } else if argument == "--help" || argument == "-h" {
                return .help(HelpFormatter.help(for: chain))
            } else if argument.hasPrefix("--") {
                try longOption(argument)
            } else if argument.hasPrefix("-") && argument != "-" && !isDashedValue(argument) {
                try shortOption(argument)
            } else if !command.subcommands.isEmpty {
                if let help = try commandWord(argument) { return .help(help) }
            } else {
                positionals.append(argument)
            }
        }
        // A group's own (not inherited) flag, `allot --version`, is a command of its own; without one the group
        // needs a command.
        if !command.subcommands.isEmpty,
            !command.flags.contains(where: { !$0.isInherited && flagValues[$0.name] == true })
        {
            let path = chain.map(\.name).joined(separator: " ")
            throw ParseFailure(
                error: UsageError(
                    message: "'\(path)' needs a command", usage: HelpFormatter.help(for: chain),
                    commandPath: chain.map(\.name)),
                isUnknownCommand: false)
        }
        return .command(try resolve())
    }

    // MARK: Words

    /// Selects a subcommand; returns help text for `help …` at the top level.
    private mutating func commandWord(_ word: String) throws(ParseFailure) -> String? {
        if let next = command.subcommand(named: word) {
            // A group's own flag stands alone: `allot --version serve` started the server.
            if let flag = command.flags.first(where: { !$0.isInherited && flagValues[$0.name] == true }) {
                throw failure("--\(flag.name) takes no command (got '\(word)')")
            }
            chain.append(next)
            return nil
        }
        if word == "help" && chain.count == 1 {
            var target = chain
            for name in arguments[index...] where !name.hasPrefix("-") {
                guard let next = target[target.count - 1].subcommand(named: name) else {
                    throw unknownCommand(name, in: target)
                }
                target.append(next)
            }
            return HelpFormatter.help(for: target)
        }
        throw unknownCommand(word, in: chain)
    }

    private func unknownCommand(_ word: String, in chain: [CommandSpec]) -> ParseFailure {
        let command = chain[chain.count - 1]
        var names = command.subcommands.map(\.name)
        if chain.count == 1 { names.append("help") }
        var message = "unknown command \(quoted(word))"
        if chain.count > 1 { message += " for '\(chain.map(\.name).joined(separator: " "))'" }
        if let suggestion = Suggestion.nearest(to: word, in: names) { message += " (did you mean '\(suggestion)'?)" }
        return ParseFailure(
            error: UsageError(message: message, usage: HelpFormatter.help(for: chain), commandPath: chain.map(\.name)),
            isUnknownCommand: true)
    }

    // MARK: Options

    private mutating func longOption(_ argument: String) throws(ParseFailure) {
        let body = argument.dropFirst(2)
        let name: Substring
        let inline: String?
        if let equals = body.firstIndex(of: "=") {
            name = body[..<equals]
            inline = String(body[body.index(after: equals)...])
        } else {
            name = body
            inline = nil
        }
        if let option = visibleOptions.first(where: { $0.name == name }) {
            try setOption(option, inline: inline, spelled: "--\(name)")
        } else if let flag = visibleFlags.first(where: { $0.name == name }) {
            guard let inline else { return try setFlag(flag, true) }
            guard let value = parseBool(inline) else {
                throw failure(
                    "invalid value \(quoted(inline)) for --\(flag.name): expected one of 1, true, yes, 0, false, no")
            }
            try setFlag(flag, value)
        } else {
            // The value after `=` is left out of the message: it may be a secret (`--tokn=…`).
            var message = "unknown option \(quoted(name.isEmpty ? argument : String(argument.prefix { $0 != "=" })))"
            let names = visibleOptions.map(\.name) + visibleFlags.map(\.name) + ["help"]
            if !name.isEmpty, let suggestion = Suggestion.nearest(to: String(name), in: names) {
                message += " (did you mean '--\(suggestion)'?)"
            }
            throw failure(message)
        }
    }

    private mutating func shortOption(_ argument: String) throws(ParseFailure) {
        let letter = argument.dropFirst()
        if letter.count == 1, let short = letter.first {
            if let option = visibleOptions.first(where: { $0.short == short }) {
                return try setOption(option, inline: nil, spelled: argument)
            }
            if let flag = visibleFlags.first(where: { $0.short == short }) { return try setFlag(flag, true) }
        }
        var message = "unknown option \(quoted(argument))"
        // `-listen` for `--listen` is a common slip.
        let names = visibleOptions.map(\.name) + visibleFlags.map(\.name) + ["help"]
        if letter.count > 1 {
            let word = String(letter.prefix { $0 != "=" })
            if let suggestion = names.first(where: { $0 == word }) ?? Suggestion.nearest(to: word, in: names) {
                message += " (did you mean '--\(suggestion)'?)"
            }
        }
        throw failure(message)
    }

    /// A flag given twice (`--dev --dev`, `--dev --dev=false`) is refused as an option given twice is: which one a
    /// script meant is not for the parser to guess.
    private mutating func setFlag(_ flag: FlagSpec, _ value: Bool) throws(ParseFailure) {
        if flagValues[flag.name] != nil { throw failure("--\(flag.name) given more than once") }
        flagValues[flag.name] = value
    }

    private mutating func setOption(_ option: OptionSpec, inline: String?, spelled: String) throws(ParseFailure) {
        let value: String
        if let inline {
            value = inline
        } else if index < arguments.count, isValue(arguments[index]) {
            value = arguments[index]
            index += 1
        } else {
            throw failure("missing value for \(spelled) \(option.valueName)")
        }
        if !option.choices.isEmpty && !option.choices.contains(value) {
            let choices = option.choices.joined(separator: ", ")
            var message = "invalid value \(quoted(value)) for --\(option.name): expected one of \(choices)"
            if let suggestion = Suggestion.nearest(to: value, in: option.choices) {
                message += " (did you mean '\(suggestion)'?)"
            }
            throw failure(message)
        }
        if optionValues[option.name] != nil && !option.isRepeatable {
            throw failure("--\(option.name) given more than once")
        }
        optionValues[option.name, default: []].append(value)
    }

    /// Whether a separate argument may serve as an option's value: anything but an option
    /// (`-`, negative numbers and anything else whose dash a digit follows — no option is named so — are values,
    /// so that `--seeds -1-2` reaches the option's own check; `--` is not).
    private func isValue(_ argument: String) -> Bool {
        !argument.hasPrefix("-") || argument == "-" || isDashedValue(argument)
    }

    /// A word that starts with a dash but names no option: a negative number, or a dash a digit follows.
    private func isDashedValue(_ argument: String) -> Bool {
        isNegativeNumber(argument) || argument.dropFirst().first.map { $0.isASCII && $0.isNumber } == true
    }

    private func isNegativeNumber(_ argument: String) -> Bool {
        argument.count > 1 && argument.hasPrefix("-")
            && argument.dropFirst().allSatisfy { $0.isASCII && ($0.isNumber || $0 == ".") }
            && argument.dropFirst().contains(where: \.isNumber)
    }

    // MARK: Resolution

    private func resolve() throws(ParseFailure) -> ParsedCommand {
        var options: [String: ParsedCommand.ResolvedOption] = [:]
        for option in visibleOptions {
            if let values = optionValues[option.name] {
                options[option.name] = .init(spec: option, values: values, source: .commandLine)
            } else if let variable = option.environment, let value = environment[variable], !value.isEmpty {
                if !option.choices.isEmpty && !option.choices.contains(value) {
                    let choices = option.choices.joined(separator: ", ")
                    throw failure(
                        "invalid value \(quoted(value)) for --\(option.name) (from \(variable)): "
                            + "expected one of \(choices)")
                }
                options[option.name] = .init(spec: option, values: [value], source: .environment(variable))
            } else if let value = option.defaultValue {
                options[option.name] = .init(spec: option, values: [value], source: .defaultValue)
            } else if option.isRequired {
                var message = "missing required option --\(option.name) \(option.valueName)"
                if let variable = option.environment { message += " (or set \(variable))" }
                throw failure(message)
            } else {
                options[option.name] = .init(spec: option, values: [], source: nil)
            }
        }

        var flags: [String: ParsedCommand.ResolvedFlag] = [:]
        for flag in visibleFlags {
            if let value = flagValues[flag.name] {
                flags[flag.name] = .init(value: value, source: .commandLine)
            } else if let variable = flag.environment, let text = environment[variable], !text.isEmpty {
                guard let value = parseBool(text) else {
                    throw failure(
                        "invalid value \(quoted(text)) for \(variable) (--\(flag.name)): "
                            + "expected one of 1, true, yes, 0, false, no")
                }
                flags[flag.name] = .init(value: value, source: .environment(variable))
            } else {
                flags[flag.name] = .init(value: false, source: nil)
            }
        }

        var remaining = positionals[...]
        var values: [String: [String]] = [:]
        for positional in command.positionals {
            switch positional.arity {
            case .required:
                guard let value = remaining.popFirst() else {
                    throw failure("missing argument \(HelpFormatter.positionalUsage(positional))")
                }
                values[positional.name] = [value]
            case .optional:
                values[positional.name] = remaining.popFirst().map { [$0] } ?? []
            case .variadic(let minimum):
                guard remaining.count >= minimum else {
                    let name = HelpFormatter.positionalUsage(positional)
                    throw failure("\(name) needs at least \(minimum) value(s), got \(remaining.count)")
                }
                values[positional.name] = Array(remaining)
                remaining = []
            }
        }
        if let extra = remaining.first {
            throw failure("unexpected argument \(quoted(extra))")
        }

        return ParsedCommand(
            path: chain.dropFirst().map(\.name), commandPath: chain.map(\.name), spec: command,
            usage: HelpFormatter.shortUsage(for: chain), options: options, flags: flags, positionalValues: values)
    }

    private func failure(_ message: String) -> ParseFailure {
        ParseFailure(
            error: UsageError(
                message: message, usage: HelpFormatter.shortUsage(for: chain), commandPath: chain.map(\.name)),
            isUnknownCommand: false)
    }
}

/// `1`/`true`/`yes` and `0`/`false`/`no`, in any case.
func parseBool(_ text: String) -> Bool? {
    switch text.lowercased() {
    case "1", "true", "yes": return true
    case "0", "false", "no": return false
    default: return nil
    }
}
