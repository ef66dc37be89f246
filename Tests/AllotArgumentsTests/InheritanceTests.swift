import AllotArguments
import Testing

@Suite("Inherited flags, short flags and programming errors")
struct InheritanceTests {
    static let tree = CommandSpec(
        "tool", abstract: "A tool.",
        flags: [FlagSpec("verbose", short: "v", help: "Say more.", environment: "TOOL_VERBOSE", inherited: true)],
        subcommands: [
            CommandSpec(
                "group", abstract: "A group.",
                options: [OptionSpec("zone", value: "ZONE", help: "Zone.", default: "eu", inherited: true)],
                subcommands: [
                    CommandSpec(
                        "leaf", abstract: "A leaf.", flags: [FlagSpec("force", short: "f", help: "Force it.")])
                ])
        ])

    @Test("inherited flags and options reach grandchildren and appear under Global options")
    func inherited() throws {
        let parser = CommandParser(root: Self.tree)
        guard case .command(let leaf) = try parser.parse(["group", "leaf", "-v", "-f", "--zone=us"]) else {
            Issue.record("expected a command")
            return
        }
        #expect(leaf.flag("verbose"))
        #expect(leaf.flag("force"))
        #expect(leaf.string("zone") == "us")
        guard
            case .command(let fromEnvironment) = try parser.parse(
                ["group", "leaf"], environment: ["TOOL_VERBOSE": "1"])
        else {
            Issue.record("expected a command")
            return
        }
        #expect(fromEnvironment.flag("verbose"))
        #expect(!fromEnvironment.flag("force"))
        guard case .command(let early) = try parser.parse(["-v", "group", "leaf"]) else {
            Issue.record("expected a command")
            return
        }
        #expect(early.flag("verbose"))

        #expect(
            parser.help(for: ["group", "leaf"]) == """
                A leaf.

                Usage: tool group leaf [options]

                Options:
                  -f, --force      Force it.
                  -h, --help       Show help for this command.

                Global options:
                      --zone ZONE  Zone. [default: eu]
                  -v, --verbose    Say more. [env: TOOL_VERBOSE]

                """)
    }

    @Test("an inherited option is not visible to the parent's siblings above its declaration")
    func scope() {
        let parser = CommandParser(root: Self.tree)
        #expect(
            throws: UsageError(
                message: "unknown option '--zone'",
                usage: "Usage: tool [options] <command>\n\nRun 'tool --help' for more information.\n",
                commandPath: ["tool"])
        ) {
            try parser.parse(["--zone", "x", "group", "leaf"])
        }
    }

    @Test("asking for an undeclared option is a programming error that stops the process")
    func undeclaredName() async {
        await #expect(processExitsWith: .failure) {
            let parser = CommandParser(root: CommandSpec("tool", abstract: ""))
            if case .command(let command) = try parser.parse([]) {
                _ = command.string("nope")
            }
        }
    }

    @Test("an invalid spec stops the process at parser creation")
    func invalidSpec() async {
        await #expect(processExitsWith: .failure) {
            _ = CommandParser(root: CommandSpec("Tool", abstract: ""))
        }
    }
}
