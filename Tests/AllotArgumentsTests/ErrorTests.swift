import AllotArguments
import Testing

@Suite("Usage errors")
struct ErrorTests {
    @Test("a usage error carries exit code 2, the usage text and a complete formatted message")
    func shape() throws {
        let error = try #require(usageError(["serve", "--lisen", "x:1"]))
        #expect(error.exitCode == 2)
        #expect(UsageError.exitCode == 2)
        #expect(error.commandPath == ["allot", "serve"])
        #expect(error.message == "unknown option '--lisen' (did you mean '--listen'?)")
        #expect(error.description == "error: unknown option '--lisen' (did you mean '--listen'?)")
        #expect(
            error.formatted == """
                allot: error: unknown option '--lisen' (did you mean '--listen'?)

                Usage: allot serve [options]

                Run 'allot serve --help' for more information.

                """)
    }

    @Test(
        "messages name the flag or command and the bad value",
        arguments: [
            (["serv"], "unknown command 'serv' (did you mean 'serve'?)"),
            (["sreve"], "unknown command 'sreve' (did you mean 'serve'?)"),
            (["tokens", "crate"], "unknown command 'crate' for 'allot tokens' (did you mean 'create'?)"),
            (["launch"], "unknown command 'launch'"),
            (["serve", "--log-levle", "debug"], "unknown option '--log-levle' (did you mean '--log-level'?)"),
            (["serve", "--zzz"], "unknown option '--zzz'"),
            (["serve", "-listen", "x:1"], "unknown option '-listen' (did you mean '--listen'?)"),
            (["serve", "-x"], "unknown option '-x'"),
            (["serve", "-wv"], "unknown option '-wv'"),
            (["serve", "--listen"], "missing value for --listen HOST:PORT"),
            (["serve", "--listen", "--dev"], "missing value for --listen HOST:PORT"),
            (["serve", "-w"], "missing value for -w N"),
            (
                ["serve", "--log-level", "verbose"],
                "invalid value 'verbose' for --log-level: expected one of debug, info, warn, error"
            ),
            (
                ["serve", "--log-level", "debgu"],
                "invalid value 'debgu' for --log-level: expected one of debug, info, warn, error "
                    + "(did you mean 'debug'?)"
            ),
            (["serve", "--dev=maybe"], "invalid value 'maybe' for --dev: expected one of 1, true, yes, 0, false, no"),
            (["serve", "extra"], "unexpected argument 'extra'"),
            (["tokens", "create", "--role", "sre"], "missing argument <name>"),
            (["tokens", "create", "bob"], "missing required option --role ROLE"),
            (
                ["tokens", "create", "--role", "root", "bob"],
                "invalid value 'root' for --role: expected one of gateway, operator, sre, admin"
            ),
            (["tokens", "create", "--role", "sre", "a", "b"], "unexpected argument 'b'"),
            (["tokens", "revoke"], "<id>... needs at least 1 value(s), got 0"),
            (["tokens", "list", "--role", "sre"], "unknown option '--role'"),
            ([], "'allot' needs a command"),
            (["tokens"], "'allot tokens' needs a command"),
            (["help", "nope"], "unknown command 'nope'"),
            (["help", "tokens", "nope"], "unknown command 'nope' for 'allot tokens'"),
        ])
    func messages(arguments: [String], message: String) throws {
        #expect(usageError(arguments)?.message == message)
    }

    @Test("bad values from the environment name the variable")
    func environmentErrors() {
        #expect(
            usageError(["serve"], environment: ["ALLOT_DEV": "maybe"])?.message
                == "invalid value 'maybe' for ALLOT_DEV (--dev): expected one of 1, true, yes, 0, false, no")
        #expect(
            usageError(["serve"], environment: ["ALLOT_LOG_LEVEL": "loud"])?.message
                == "invalid value 'loud' for --log-level (from ALLOT_LOG_LEVEL): "
                + "expected one of debug, info, warn, error"
        )
        // The command line wins, so a bad variable it overrides is never looked at.
        #expect(throws: Never.self) {
            try parse(["serve", "--log-level=warn"], environment: ["ALLOT_LOG_LEVEL": "loud"])
        }
    }

    @Test("a missing command prints the group's full help as its usage")
    func missingCommandUsage() throws {
        let error = try #require(usageError(["tokens"]))
        #expect(error.usage == SampleCommands.parser.help(for: ["tokens"]))
        #expect(error.formatted.hasPrefix("allot: error: 'allot tokens' needs a command\n\nCreate, list and revoke"))
    }

    @Test(
        "hostile input gives clear errors, never a crash",
        arguments: [
            ([""], "unknown command ''"),
            (["--=x"], "unknown option '--=x'"),
            (["---x"], "unknown option '---x'"),
            (["serve", "---listen", "x:1"], "unknown option '---listen' (did you mean '--listen'?)"),
            (["serve", "--"], nil),
            (["-"], "unknown command '-'"),
            (["serve", "--\u{1B}[31mred"], "unknown option '--\\u{1B}[31mred'"),
            (["serve", "--li\nsten"], "unknown option '--li\\nsten' (did you mean '--listen'?)"),
            (["serve", "--lïsten", "x:1"], "unknown option '--lïsten' (did you mean '--listen'?)"),
            (["serve", "--\u{202E}drow"], "unknown option '--\\u{202E}drow'"),
            (["🚀"], "unknown command '🚀'"),
            (["serve", "--tokn=s3cr3t"], "unknown option '--tokn'"),
        ] as [([String], String?)])
    func hostile(arguments: [String], message: String?) throws {
        if let message {
            #expect(usageError(arguments)?.message == message)
        } else {
            _ = try parse(arguments)
        }
    }

    @Test("very long arguments are shortened in messages and get no suggestion")
    func longArguments() throws {
        let long = "--" + String(repeating: "l", count: 100_000)
        let message = try #require(usageError(["serve", long])?.message)
        #expect(
            message == "unknown option '--" + String(repeating: "l", count: 62) + "…'")
        let command = String(repeating: "é", count: 10_000)
        #expect(usageError([command])?.message == "unknown command '" + String(repeating: "é", count: 64) + "…'")
    }

    @Test("typed accessors name the option, the value and where it came from")
    func typedAccessorErrors() throws {
        let bad = try parse(["serve", "--workers", "many", "--ratio", "nan", "--listen", "localhost"])
        #expect(
            throws: UsageError(
                message: "invalid value 'many' for --workers: expected an integer",
                usage: bad.usage, commandPath: ["allot", "serve"])
        ) { try bad.int("workers") }
        #expect(
            throws: UsageError(
                message: "invalid value 'nan' for --ratio: expected a number",
                usage: bad.usage, commandPath: ["allot", "serve"])
        ) { try bad.double("ratio") }
        #expect(
            throws: UsageError(
                message: "invalid value 'localhost' for --listen: expected HOST:PORT (missing :PORT)",
                usage: bad.usage, commandPath: ["allot", "serve"])
        ) { try bad.hostPort("listen") }

        let ranged = try parse(["serve", "-w", "0", "--ratio", "1.5"])
        #expect(throws: UsageError.self) { try ranged.int("workers", in: 1...64) }
        #expect((try? ranged.int("workers", in: 0...64)) == 0)
        do {
            _ = try ranged.int("workers", in: 1...64)
        } catch {
            #expect(error.message == "invalid value '0' for --workers: expected an integer from 1 to 64")
        }
        do {
            _ = try ranged.double("ratio", in: 0...1)
        } catch {
            #expect(error.message == "invalid value '1.5' for --ratio: expected a number from 0 to 1")
        }

        let fromEnvironment = try parse(["serve"], environment: ["ALLOT_LISTEN": "[::1]"])
        do {
            _ = try fromEnvironment.hostPort("listen")
            Issue.record("expected an error")
        } catch {
            #expect(
                error.message
                    == "invalid value '[::1]' for --listen (from ALLOT_LISTEN): "
                    + "expected HOST:PORT (missing :PORT after ']')"
            )
        }
        for text in ["1e500", "inf", "0x10", "1_000", " 1", ""] {
            let command = try parse(["serve", "--ratio=\(text)"])
            #expect(throws: UsageError.self, "\(text)") { try command.double("ratio") }
        }
        for text in ["1.0", "9223372036854775808", "+", "", "٣"] {
            let command = try parse(["serve", "--workers=\(text)"])
            #expect(throws: UsageError.self, "\(text)") { try command.int("workers") }
        }
    }

    @Test("choice accessor maps to an enum")
    func choices() throws {
        #expect(
            try parse(["serve", "--log-level", "warn"]).choice("log-level", as: SampleCommands.LogLevel.self) == .warn)
        #expect(try parse(["serve"]).choice("log-level", as: SampleCommands.LogLevel.self) == .info)
        let unchecked = try parse(["tokens", "create", "--role", "admin", "x"])
        do {
            _ = try unchecked.choice("role", as: SampleCommands.LogLevel.self)
            Issue.record("expected an error")
        } catch {
            #expect(error.message == "invalid value 'admin' for --role: expected one of debug, info, warn, error")
        }
    }

    @Test("commands raise their own usage errors in the same format")
    func commandErrors() throws {
        let serve = try parse(["serve", "--dev", "--listen", "0.0.0.0:80"])
        let error = serve.usageError("--dev is refused on a non-loopback address (0.0.0.0:80)")
        #expect(error.exitCode == 2)
        #expect(
            error.formatted.hasPrefix(
                "allot: error: --dev is refused on a non-loopback address (0.0.0.0:80)\n\nUsage: allot serve"))
        let invalid = serve.invalidValue("listen", "0.0.0.0:80", expected: "a loopback address when --dev is set")
        #expect(
            invalid.message == "invalid value '0.0.0.0:80' for --listen: expected a loopback address when --dev is set")
    }
}
