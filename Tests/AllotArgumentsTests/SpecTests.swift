import AllotArguments
import Testing

@Suite("Spec validation")
struct SpecTests {
    @Test("the sample tree is valid")
    func sampleIsValid() {
        #expect(CommandParser.problems(in: SampleCommands.make()) == [])
    }

    @Test("every kind of spec mistake is reported with its command path")
    func problems() {
        let broken = CommandSpec(
            "allot", abstract: "Broken.",
            options: [
                OptionSpec("data", help: "", inherited: true),
                OptionSpec("Bad_Name", help: ""),
                OptionSpec("level", help: "", default: "loud", choices: ["quiet"]),
                OptionSpec("must", help: "", default: "x", required: true),
                OptionSpec("env", help: "", environment: "allot_lower"),
                OptionSpec("empty", value: "", help: ""),
            ],
            flags: [
                FlagSpec("data", help: ""), FlagSpec("quiet", short: "h", help: ""),
                FlagSpec("loud", short: "-", help: ""), FlagSpec("help", help: ""),
            ],
            subcommands: [
                CommandSpec(
                    "run", abstract: "",
                    options: [OptionSpec("data", help: ""), OptionSpec("x", short: "q", help: "")],
                    flags: [FlagSpec("y", short: "q", help: "")],
                    positionals: [
                        PositionalSpec("rest", help: "", arity: .variadic(minimum: 0)),
                        PositionalSpec("maybe", help: "", arity: .optional),
                        PositionalSpec("must", help: ""),
                        PositionalSpec("must", help: ""),
                    ]),
                CommandSpec("run", abstract: ""),
                CommandSpec("help", abstract: ""),
                CommandSpec(
                    "Group", abstract: "", positionals: [PositionalSpec("p", help: "")],
                    subcommands: [CommandSpec("leaf", abstract: "")]),
            ])
        #expect(
            CommandParser.problems(in: broken) == [
                "allot: option name 'Bad_Name' must match [a-z][a-z0-9-]*",
                "allot: --data is declared more than once (or clashes with --help or an inherited option)",
                "allot: -h is declared more than once (or clashes with -h or an inherited option)",
                "allot: short name '-' of --loud must be an ASCII letter or digit",
                "allot: --help is declared more than once (or clashes with --help or an inherited option)",
                "allot: default 'loud' of --level is not one of its choices",
                "allot: --must is required but has a default",
                "allot: environment variable 'allot_lower' of --env must match [A-Z_][A-Z0-9_]*",
                "allot: --empty needs a value placeholder",
                "allot run: --data is declared more than once (or clashes with --help or an inherited option)",
                "allot run: -q is declared more than once (or clashes with -h or an inherited option)",
                "allot run: variadic <rest> must be last",
                "allot run: positional <maybe> follows an optional or variadic one",
                "allot run: positional <must> follows an optional or variadic one",
                "allot run: positional <must> is declared more than once",
                "allot run: positional <must> follows an optional or variadic one",
                "allot: subcommand run is declared more than once",
                "allot: subcommand help is built in at the top level",
                "allot Group: command name 'Group' must match [a-z][a-z0-9-]*",
                "allot Group: a command with subcommands cannot take positional arguments",
            ])
    }
}

@Suite("HOST:PORT")
struct HostPortTests {
    @Test(
        "valid addresses",
        arguments: [
            ("127.0.0.1:8080", "127.0.0.1", 8080, true), ("localhost:0", "localhost", 0, true),
            ("0.0.0.0:65535", "0.0.0.0", 65535, false), ("[::1]:9000", "::1", 9000, true),
            ("[::]:80", "::", 80, false), ("allot-1.internal:443", "allot-1.internal", 443, false),
            ("127.8.9.10:1", "127.8.9.10", 1, true), ("[0:0:0:0:0:0:0:1]:1", "0:0:0:0:0:0:0:1", 1, true),
            ("LOCALHOST:1", "LOCALHOST", 1, true), ("128.0.0.1:1", "128.0.0.1", 1, false),
        ] as [(String, String, Int, Bool)])
    func valid(text: String, host: String, port: Int, loopback: Bool) throws {
        let value = try #require(HostPort(text))
        #expect(value.host == host)
        #expect(Int(value.port) == port)
        #expect(value.isLoopback == loopback)
        #expect(HostPort(value.description) == value)
    }

    @Test(
        "invalid addresses explain themselves",
        arguments: [
            ("", "missing :PORT"), ("8080", "missing :PORT"), (":8080", "missing host"),
            ("host:", "port '' is not a number"), ("host:http", "port 'http' is not a number"),
            ("host:65536", "port 65536 is out of range 0-65535"), ("host:-1", "port '-1' is not a number"),
            ("host:123456", "port '123456' is not a number"),
            ("::1:80", "IPv6 addresses need brackets, e.g. [::1]:8080"),
            ("[::1", "missing ']'"), ("[::1]80", "missing :PORT after ']'"), ("[]:80", "'' is not an IPv6 address"),
            ("[host]:80", "'host' is not an IPv6 address"), ("a b:80", "host 'a b' has invalid characters"),
            ("hôst:80", "host 'hôst' has invalid characters"), ("host:+80", "port '+80' is not a number"),
            ("host:٨٠", "port '٨٠' is not a number"),
        ])
    func invalid(text: String, reason: String) {
        #expect(HostPort.parse(text) == .failure(HostPortError(reason: reason)))
        #expect(HostPort(text) == nil)
    }
}
