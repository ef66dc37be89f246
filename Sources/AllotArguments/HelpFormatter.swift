/// Renders help pages and usage lines from command specs.
///
/// Layout (fixed, tested verbatim): abstract; `Usage:` line; discussion; then the sections
/// `Arguments:`, `Options:`, `Global options:` (inherited from parent commands) and `Commands:`,
/// each a two-column list whose descriptions are wrapped to `width` columns and annotated with
/// `[default: …]`, `[env: …]`, `[possible values: …]`, `[repeatable]` and `[required]`.
enum HelpFormatter {
    static let width = 80
    /// The description column never starts further right than this; longer names push their
    /// description onto the next line.
    static let maxColumn = 32

    /// The full help page for the last command of `chain` (root first).
    static func help(for chain: [CommandSpec]) -> String {
        let command = chain[chain.count - 1]
        var out = ""
        if !command.abstract.isEmpty { out += wrap(words(command.abstract), indent: 0, firstIndent: 0) + "\n\n" }
        out += usageLine(for: chain) + "\n"
        if !command.discussion.isEmpty { out += "\n" + formatDiscussion(command.discussion) }

        var sections: [(title: String, rows: [(left: String, right: [String])])] = []
        if !command.positionals.isEmpty {
            sections.append(("Arguments", command.positionals.map { (positionalUsage($0), words($0.help)) }))
        }
        let inherited = inheritedEntries(for: chain)
        var optionRows = command.options.map(optionRow) + command.flags.map(flagRow)
        optionRows.append(("-h, --help", words("Show help for this command.")))
        sections.append(("Options", optionRows))
        if !inherited.options.isEmpty || !inherited.flags.isEmpty {
            let rows =
                inherited.options.map(optionRow) + inherited.flags.map(flagRow)
            sections.append(("Global options", rows))
        }
        if !command.subcommands.isEmpty {
            var rows = command.subcommands.map { (left: $0.name, right: words($0.abstract)) }
            if chain.count == 1 { rows.append(("help", words("Show help for a command."))) }
            sections.append(("Commands", rows))
        }

        let widest = sections.flatMap { $0.rows }.map { $0.left.count + 4 }.max() ?? 0
        let column = min(widest, maxColumn)
        for section in sections {
            out += "\n\(section.title):\n"
            for row in section.rows {
                out += formatRow(left: row.left, right: row.right, column: column)
            }
        }
        if !command.subcommands.isEmpty {
            let path = chain.map(\.name).joined(separator: " ")
            out += "\nRun '\(path) <command> --help' for more about a command.\n"
        }
        return out
    }

    /// `Usage: allot tokens create --role ROLE [options] <name>`
    static func usageLine(for chain: [CommandSpec]) -> String {
        let command = chain[chain.count - 1]
        var parts = ["Usage:"] + chain.map(\.name)
        for option in command.options where option.isRequired {
            parts.append("--\(option.name) \(option.valueName)")
        }
        parts.append("[options]")
        if !command.subcommands.isEmpty { parts.append("<command>") }
        parts += command.positionals.map(positionalUsage)
        return parts.joined(separator: " ")
    }

    /// The usage line and a pointer to the full help: what a usage error prints after its message.
    static func shortUsage(for chain: [CommandSpec]) -> String {
        let path = chain.map(\.name).joined(separator: " ")
        return usageLine(for: chain) + "\n\nRun '\(path) --help' for more information.\n"
    }

    static func positionalUsage(_ positional: PositionalSpec) -> String {
        switch positional.arity {
        case .required: return "<\(positional.name)>"
        case .optional: return "[<\(positional.name)>]"
        case .variadic(let minimum): return minimum == 0 ? "[<\(positional.name)>...]" : "<\(positional.name)>..."
        }
    }

    /// Options and flags declared `inherited` by the ancestors of the last command.
    static func inheritedEntries(for chain: [CommandSpec]) -> (options: [OptionSpec], flags: [FlagSpec]) {
        let ancestors = chain.dropLast()
        return (
            ancestors.flatMap { $0.options.filter(\.isInherited) },
            ancestors.flatMap { $0.flags.filter(\.isInherited) }
        )
    }

    /// Each annotation (`[env: ALLOT_LISTEN]`) is one unbreakable token so it never splits across lines.
    private static func optionRow(_ option: OptionSpec) -> (left: String, right: [String]) {
        var notes: [String] = []
        if let value = option.defaultValue { notes.append("[default: \(value.isEmpty ? "\"\"" : value)]") }
        if let variable = option.environment { notes.append("[env: \(variable)]") }
        if !option.choices.isEmpty { notes.append("[possible values: \(option.choices.joined(separator: ", "))]") }
        if option.isRepeatable { notes.append("[repeatable]") }
        if option.isRequired { notes.append("[required]") }
        let left = names(long: option.name, short: option.short) + " " + option.valueName
        return (left, words(option.help) + notes)
    }

    private static func flagRow(_ flag: FlagSpec) -> (left: String, right: [String]) {
        var right = words(flag.help)
        if let variable = flag.environment { right.append("[env: \(variable)]") }
        return (names(long: flag.name, short: flag.short), right)
    }

    /// `-o, --out` or `    --out`: `-h, --help` is always listed, so long-only names are
    /// indented to line up with the long names that have a short alias.
    private static func names(long: String, short: Character?) -> String {
        if let short { return "-\(short), --\(long)" }
        return "    --\(long)"
    }

    /// `  left    right…` with `right` wrapped and continued at `column`.
    private static func formatRow(left: String, right: [String], column: Int) -> String {
        let head = "  " + left
        if right.isEmpty { return head + "\n" }
        if head.count + 2 <= column {
            let padded = head + String(repeating: " ", count: column - head.count)
            return padded + wrap(right, indent: column, firstIndent: column).dropFirst(column) + "\n"
        }
        return head + "\n" + wrap(right, indent: column, firstIndent: column) + "\n"
    }

    /// Reflows plain paragraphs; lines that start with a space are kept as written (examples).
    private static func formatDiscussion(_ text: String) -> String {
        var out = ""
        var paragraph: [Substring] = []
        func flush() {
            if !paragraph.isEmpty {
                out += wrap(paragraph.flatMap(words), indent: 0, firstIndent: 0) + "\n"
                paragraph = []
            }
        }
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.allSatisfy({ $0 == " " }) {
                flush()
                if !out.isEmpty && !out.hasSuffix("\n\n") { out += "\n" }
            } else if line.hasPrefix(" ") {
                flush()
                out += line + "\n"
            } else {
                paragraph.append(line)
            }
        }
        flush()
        while out.hasSuffix("\n\n") { out.removeLast() }
        return out
    }

    static func words(_ text: Substring) -> [String] {
        text.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
    }

    static func words(_ text: String) -> [String] {
        words(text[...])
    }

    /// Greedy wrap of tokens to `width`; every line but the first starts at `indent`. Tokens
    /// longer than the line are not broken.
    static func wrap(_ tokens: [String], indent: Int, firstIndent: Int) -> String {
        var lines: [String] = []
        var line = String(repeating: " ", count: firstIndent)
        var lineHasWord = false
        for word in tokens {
            if lineHasWord && line.count + 1 + word.count > width {
                lines.append(line)
                line = String(repeating: " ", count: indent)
                lineHasWord = false
            }
            if lineHasWord { line += " " }
            line += word
            lineHasWord = true
        }
        lines.append(line)
        return lines.joined(separator: "\n")
    }
}
