import AllotArguments
import Testing

@Suite("Help")
struct HelpTests {
    static let rootHelp = """
        Continuous per-tenant LLM quota renegotiation.

        Usage: allot [options] <command>

        Options:
              --data DIR  Directory holding the SQLite database and the admin token
                          file. [default: ./allot-data] [env: ALLOT_DATA]
          -h, --help      Show help for this command.

        Commands:
          serve           Run the control-plane server.
          tokens          Create, list and revoke API tokens.
          simulate        Run a scenario on a virtual clock.
          help            Show help for a command.

        Run 'allot <command> --help' for more about a command.

        """

    static let serveHelp = """
        Run the control-plane server.

        Usage: allot serve [options]

        Starts the loop and the HTTP API. On first start with an empty database an admin
        token is printed once and written to the data directory.

        Example:
          allot serve --listen 0.0.0.0:8080 --log-level debug

        Options:
              --listen HOST:PORT  Address to listen on. [default: 127.0.0.1:8080]
                                  [env: ALLOT_LISTEN]
              --policies DIR      Policy directory (default: ./policies when it exists,
                                  else built in). [env: ALLOT_POLICIES]
              --log-level LEVEL   Minimum level of log lines. [default: info]
                                  [env: ALLOT_LOG_LEVEL]
                                  [possible values: debug, info, warn, error]
          -w, --workers N         Worker threads. [default: 2]
              --ratio R           Safety margin. [default: 0.9]
              --dev               Disable authentication (refused on non-loopback
                                  addresses). [env: ALLOT_DEV]
          -h, --help              Show help for this command.

        Global options:
              --data DIR          Directory holding the SQLite database and the admin
                                  token file. [default: ./allot-data] [env: ALLOT_DATA]

        """

    static let tokensHelp = """
        Create, list and revoke API tokens.

        Usage: allot tokens [options] <command>

        Options:
          -h, --help      Show help for this command.

        Global options:
              --data DIR  Directory holding the SQLite database and the admin token
                          file. [default: ./allot-data] [env: ALLOT_DATA]

        Commands:
          create          Create a token and print it once.
          list            List tokens (never their secrets).
          revoke          Revoke tokens.

        Run 'allot tokens <command> --help' for more about a command.

        """

    static let createHelp = """
        Create a token and print it once.

        Usage: allot tokens create --role ROLE [options] <name>

        Arguments:
          <name>            Who the token is for.

        Options:
          -r, --role ROLE   What the token may do.
                            [possible values: gateway, operator, sre, admin] [required]
              --label TEXT  Free-text label. [repeatable]
          -h, --help        Show help for this command.

        Global options:
              --data DIR    Directory holding the SQLite database and the admin token
                            file. [default: ./allot-data] [env: ALLOT_DATA]

        """

    static let simulateHelp = """
        Run a scenario on a virtual clock.

        Usage: allot simulate [options] [<scenario>] [<extra>...]

        Arguments:
          [<scenario>]    Scenario name or file.
          [<extra>...]    Extra files.

        Options:
              --seed N    Random seed. [default: 1]
          -o, --out DIR   Where to write report.json, timeline.csv and timeline.svg.
              --list      Print the built-in scenario names, one per line.
          -h, --help      Show help for this command.

        Global options:
              --data DIR  Directory holding the SQLite database and the admin token
                          file. [default: ./allot-data] [env: ALLOT_DATA]

        """

    @Test("the help pages of the sample tree, verbatim")
    func verbatim() throws {
        #expect(try helpText(["--help"]) == Self.rootHelp)
        #expect(try helpText(["serve", "--help"]) == Self.serveHelp)
        #expect(try helpText(["tokens", "-h"]) == Self.tokensHelp)
        #expect(try helpText(["tokens", "create", "--help"]) == Self.createHelp)
        #expect(try helpText(["simulate", "-h"]) == Self.simulateHelp)
    }

    @Test("no help line is wider than 80 columns")
    func width() {
        for path in [
            [], ["serve"], ["tokens"], ["tokens", "create"], ["tokens", "list"], ["tokens", "revoke"], ["simulate"],
        ] {
            let text = SampleCommands.parser.help(for: path)!
            for line in text.split(separator: "\n") {
                #expect(line.count <= 80, "\(path): \(line)")
            }
        }
    }

    @Test("allot help COMMAND… equals COMMAND… --help")
    func helpCommand() throws {
        #expect(try helpText(["help"]) == Self.rootHelp)
        #expect(try helpText(["help", "serve"]) == Self.serveHelp)
        #expect(try helpText(["help", "tokens", "create"]) == Self.createHelp)
        #expect(SampleCommands.parser.help(for: ["tokens", "create"]) == Self.createHelp)
        #expect(SampleCommands.parser.help(for: ["nope"]) == nil)
    }

    @Test("help is found anywhere before --, and wins over other mistakes on the line")
    func helpAnywhere() throws {
        #expect(try helpText(["serve", "--listen", "x:1", "-h"]) == Self.serveHelp)
        #expect(try helpText(["serve", "--bogus", "--help"]) == Self.serveHelp)
        #expect(try helpText(["serve", "--listen", "--help"]) == Self.serveHelp)
        #expect(try helpText(["tokens", "create", "--help"]) == Self.createHelp)  // required option missing
        #expect(try helpText(["tokens", "create", "--role", "nobody", "-h"]) == Self.createHelp)
        #expect(try helpText(["--data", "/x", "tokens", "--help", "create"]) == Self.tokensHelp)
        // After `--`, `--help` is a positional.
        #expect(try parse(["simulate", "--", "--help"]).positional("scenario") == "--help")
        // An option value spelled inline is a value, not a help request.
        #expect(try parse(["serve", "--policies=--help"]).string("policies") == "--help")
    }

    @Test("an unknown command beats --help, because its suggestion is more useful")
    func unknownCommandBeatsHelp() {
        #expect(usageError(["serv", "--help"])?.message == "unknown command 'serv' (did you mean 'serve'?)")
    }
}
