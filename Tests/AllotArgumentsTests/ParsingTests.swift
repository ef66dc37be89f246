import AllotArguments
import Testing

@Suite("Parsing commands, options, flags and positionals")
struct ParsingTests {
    @Test("defaults apply when neither the command line nor the environment gives a value")
    func defaults() throws {
        let serve = try parse(["serve"])
        #expect(serve.path == ["serve"])
        #expect(serve.commandPath == ["allot", "serve"])
        #expect(serve.string("listen") == "127.0.0.1:8080")
        #expect(serve.source(of: "listen") == .defaultValue)
        #expect(try serve.int("workers") == 2)
        #expect(try serve.double("ratio") == 0.9)
        #expect(serve.string("policies") == nil)
        #expect(serve.source(of: "policies") == nil)
        #expect(!serve.flag("dev"))
        #expect(serve.source(of: "dev") == nil)
        #expect(serve.string("data") == "./allot-data")  // inherited from the root
        #expect(serve.optionsOnCommandLine.isEmpty)  // defaults are not on the command line
        let given = try parse(["serve", "--workers", "3", "--listen=a:1"], environment: ["ALLOT_DATA": "/d"])
        #expect(given.optionsOnCommandLine == ["listen", "workers"])  // nor is the environment
    }

    @Test("precedence: command line > environment > default, for both option spellings")
    func precedence() throws {
        let environment = ["ALLOT_LISTEN": "0.0.0.0:9000", "ALLOT_DATA": "/env/data"]
        let fromEnvironment = try parse(["serve"], environment: environment)
        #expect(fromEnvironment.string("listen") == "0.0.0.0:9000")
        #expect(fromEnvironment.source(of: "listen") == .environment("ALLOT_LISTEN"))
        #expect(fromEnvironment.string("data") == "/env/data")

        for arguments in [["serve", "--listen", "127.0.0.1:1"], ["serve", "--listen=127.0.0.1:1"]] {
            let fromLine = try parse(arguments, environment: environment)
            #expect(fromLine.string("listen") == "127.0.0.1:1")
            #expect(fromLine.source(of: "listen") == .commandLine)
        }
        // An empty variable counts as unset.
        #expect(try parse(["serve"], environment: ["ALLOT_LISTEN": ""]).source(of: "listen") == .defaultValue)
    }

    @Test("--name=VALUE keeps everything after the first '=' and allows an empty value")
    func inlineValues() throws {
        #expect(try parse(["serve", "--policies=a=b=c"]).string("policies") == "a=b=c")
        #expect(try parse(["serve", "--policies="]).string("policies") == "")
        #expect(try parse(["serve", "--policies=--dev"]).string("policies") == "--dev")
    }

    @Test("flags: on from the command line, from the environment in several spellings, off by default")
    func flags() throws {
        #expect(try parse(["serve", "--dev"]).flag("dev"))
        for on in ["1", "true", "yes", "TRUE", "Yes"] {
            let command = try parse(["serve"], environment: ["ALLOT_DEV": on])
            #expect(command.flag("dev"), "\(on)")
            #expect(command.source(of: "dev") == .environment("ALLOT_DEV"))
        }
        for off in ["0", "false", "no", "NO", ""] {
            #expect(!(try parse(["serve"], environment: ["ALLOT_DEV": off])).flag("dev"), "\(off)")
        }
        // The command line can switch off what the environment switched on.
        let explicit = try parse(["serve", "--dev=false"], environment: ["ALLOT_DEV": "1"])
        #expect(!explicit.flag("dev"))
        #expect(explicit.source(of: "dev") == .commandLine)
        #expect(try parse(["serve", "--dev=yes"]).flag("dev"))
        #expect(try parse(["simulate", "--list"]).flag("list"))
    }

    @Test("short aliases")
    func shortAliases() throws {
        #expect(try parse(["serve", "-w", "4"]).int("workers") == 4)
        #expect(try parse(["simulate", "-o", "out"]).string("out") == "out")
        #expect(try parse(["tokens", "create", "-r", "sre", "bob"]).string("role") == "sre")
    }

    @Test("nested subcommands, required option, positional, inherited option before or after the command")
    func nested() throws {
        let create = try parse(["tokens", "create", "--role", "gateway", "gw-eu-1"])
        #expect(create.path == ["tokens", "create"])
        #expect(create.spec.name == "create")
        #expect(create.string("role") == "gateway")
        #expect(create.positional("name") == "gw-eu-1")
        #expect(create.strings("label") == [])

        #expect(try parse(["--data", "/a", "tokens", "list"]).string("data") == "/a")
        #expect(try parse(["tokens", "list", "--data=/b"]).string("data") == "/b")
        #expect(try parse(["tokens", "--data", "/c", "list"]).string("data") == "/c")
        // Options and positionals may come in any order.
        let mixed = try parse(["tokens", "create", "alice", "--role=sre"])
        #expect(mixed.positional("name") == "alice")
        #expect(mixed.string("role") == "sre")
    }

    @Test("repeatable options collect values in order; others refuse a second value")
    func repeatable() throws {
        let create = try parse(["tokens", "create", "--role", "sre", "--label", "a", "x", "--label=b"])
        #expect(create.strings("label") == ["a", "b"])
        #expect(create.string("label") == "b")
        let error = usageError(["serve", "--listen", "a:1", "--listen", "b:2"])
        #expect(error?.message == "--listen given more than once")
        // A flag too: `--dev --dev=false` has no answer a parser should guess.
        for twice in [["--dev", "--dev"], ["--dev", "--dev=false"], ["--dev=0", "--dev"]] {
            #expect(usageError(["serve"] + twice)?.message == "--dev given more than once", "\(twice)")
        }
    }

    @Test("-- ends options; - is a positional and a value")
    func terminatorAndDash() throws {
        let simulate = try parse(["simulate", "--", "--weird", "-x", "--help"])
        #expect(simulate.positional("scenario") == "--weird")
        #expect(simulate.positionals("extra") == ["-x", "--help"])
        #expect(try parse(["tokens", "revoke", "-"]).positionals("id") == ["-"])
        #expect(try parse(["simulate", "--out", "-"]).string("out") == "-")
        #expect(try parse(["simulate", "--", "--"]).positional("scenario") == "--")
    }

    @Test("optional and variadic positionals")
    func positionals() throws {
        let none = try parse(["simulate"])
        #expect(none.positional("scenario") == nil)
        #expect(none.positionals("extra") == [])
        let many = try parse(["simulate", "night", "a.json", "b.json"])
        #expect(many.positional("scenario") == "night")
        #expect(many.positionals("extra") == ["a.json", "b.json"])
        #expect(try parse(["tokens", "revoke", "t1", "t2", "t3"]).positionals("id") == ["t1", "t2", "t3"])
    }

    @Test("negative numbers are values and positionals, not options")
    func negativeNumbers() throws {
        #expect(try parse(["simulate", "--seed", "-5"]).int("seed") == -5)
        #expect(try parse(["simulate", "-5"]).positional("scenario") == "-5")
        #expect(try parse(["serve", "--ratio", "-0.5"]).double("ratio") == -0.5)
        // A dash a digit follows names no option: the value reaches the option's own check ("-1-2" is no range).
        #expect(try parse(["simulate", "--seed", "-1-2"]).string("seed") == "-1-2")
        #expect(try parse(["simulate", "-1-2"]).positional("scenario") == "-1-2")
    }

    @Test("unicode, empty and very long values pass through untouched")
    func unusualValues() throws {
        #expect(try parse(["tokens", "create", "--role", "sre", "Zoë 🚀"]).positional("name") == "Zoë 🚀")
        #expect(try parse(["tokens", "create", "--role", "sre", ""]).positional("name") == "")
        let long = String(repeating: "x", count: 200_000)
        #expect(try parse(["serve", "--policies", long]).string("policies") == long)
    }
}
