/// The declaration of one command of the `allot` executable: its name, documentation, options,
/// flags, positional arguments and subcommands.
///
/// Specs are plain values written once in the commands module; `CommandParser` turns an argument
/// vector plus an environment into a `ParsedCommand` against them, and renders help from them, so
/// `allot --help` and `allot COMMAND --help` are complete by construction (SPEC section 13).
///
/// A command either has subcommands (a group, like `tokens`, which cannot run by itself) or
/// positional arguments, never both: a bare word after a group is always a command name.
public struct CommandSpec: Sendable {
    /// The word that selects this command (for the root: the program name, `allot`).
    public var name: String
    /// One line shown in the parent's command list and at the top of this command's help.
    public var abstract: String
    /// Longer explanation shown in this command's help, paragraphs separated by blank lines.
    public var discussion: String
    /// Options taking a value (`--listen HOST:PORT`).
    public var options: [OptionSpec]
    /// Boolean switches (`--dev`).
    public var flags: [FlagSpec]
    /// Positional arguments, in order.
    public var positionals: [PositionalSpec]
    /// Nested commands (`tokens create`).
    public var subcommands: [CommandSpec]

    /// Declares a command.
    /// - Parameters:
    ///   - name: the word that selects it; lowercase letters, digits and `-`.
    ///   - abstract: one line, no final period needed.
    ///   - discussion: free text for the help page; wrapped to 80 columns.
    ///   - options: options taking a value.
    ///   - flags: boolean switches.
    ///   - positionals: positional arguments; required ones first, then optional, then at most one variadic.
    ///   - subcommands: nested commands; a command with subcommands takes no positionals.
    public init(
        _ name: String, abstract: String, discussion: String = "", options: [OptionSpec] = [],
        flags: [FlagSpec] = [], positionals: [PositionalSpec] = [], subcommands: [CommandSpec] = []
    ) {
        self.name = name
        self.abstract = abstract
        self.discussion = discussion
        self.options = options
        self.flags = flags
        self.positionals = positionals
        self.subcommands = subcommands
    }

    /// The direct subcommand called `name`.
    public func subcommand(named name: String) -> CommandSpec? {
        subcommands.first { $0.name == name }
    }
}

/// An option that takes a value: `--name VALUE` or `--name=VALUE` (or `-n VALUE`).
///
/// The value is resolved with the precedence SPEC section 13 implies for configuration: the
/// command line, then the environment variable (`ALLOT_*`), then the default.
public struct OptionSpec: Sendable {
    /// Long name without dashes (`listen` for `--listen`).
    public var name: String
    /// Optional one-character alias (`o` for `-o`); `h` is reserved for help.
    public var short: Character?
    /// Placeholder for the value in usage and help (`HOST:PORT`, `DIR`).
    public var valueName: String
    /// One or two sentences for the help page.
    public var help: String
    /// Used when neither the command line nor the environment gives a value; shown in help.
    public var defaultValue: String?
    /// Environment variable consulted when the command line has no value; shown in help.
    /// An empty value counts as unset.
    public var environment: String?
    /// If not empty, the only accepted values (checked while parsing, listed in help).
    public var choices: [String]
    /// Whether the option may be given several times (values are collected in order).
    /// A non-repeatable option given twice is an error rather than "last one wins", so a
    /// mistaken duplicate in a script is noticed.
    public var isRepeatable: Bool
    /// Whether parsing fails when no value comes from any source.
    public var isRequired: Bool
    /// Whether subcommands accept this option too (listed under "Global options" in their help).
    public var isInherited: Bool

    /// Declares an option.
    public init(
        _ name: String, short: Character? = nil, value valueName: String = "VALUE", help: String,
        default defaultValue: String? = nil, environment: String? = nil, choices: [String] = [],
        repeatable: Bool = false, required: Bool = false, inherited: Bool = false
    ) {
        self.name = name
        self.short = short
        self.valueName = valueName
        self.help = help
        self.defaultValue = defaultValue
        self.environment = environment
        self.choices = choices
        self.isRepeatable = repeatable
        self.isRequired = required
        self.isInherited = inherited
    }
}

/// A boolean switch: `--dev` turns it on; `--dev=false` turns it off explicitly (useful to
/// override the environment). Off unless the command line or the environment says otherwise.
public struct FlagSpec: Sendable {
    /// Long name without dashes.
    public var name: String
    /// Optional one-character alias; `h` is reserved for help.
    public var short: Character?
    /// One or two sentences for the help page.
    public var help: String
    /// Environment variable consulted when the command line does not mention the flag. Accepts
    /// `1`, `true`, `yes` and `0`, `false`, `no` in any case; empty counts as unset; anything else
    /// is a usage error naming the variable.
    public var environment: String?
    /// Whether subcommands accept this flag too.
    public var isInherited: Bool

    /// Declares a flag.
    public init(
        _ name: String, short: Character? = nil, help: String, environment: String? = nil, inherited: Bool = false
    ) {
        self.name = name
        self.short = short
        self.help = help
        self.environment = environment
        self.isInherited = inherited
    }
}

/// A positional argument. `-` is an ordinary value (by convention: standard input), and every
/// argument after `--` is positional even if it starts with a dash.
public struct PositionalSpec: Sendable {
    /// How many values the argument takes.
    public enum Arity: Sendable, Equatable {
        /// Exactly one.
        case required
        /// Zero or one.
        case optional
        /// Any number from `minimum` on; only the last positional may be variadic.
        case variadic(minimum: Int)
    }

    /// Name shown as `<name>` in usage and used to read the value.
    public var name: String
    /// One or two sentences for the help page.
    public var help: String
    /// How many values it takes.
    public var arity: Arity

    /// Declares a positional argument.
    public init(_ name: String, help: String, arity: Arity = .required) {
        self.name = name
        self.help = help
        self.arity = arity
    }
}
