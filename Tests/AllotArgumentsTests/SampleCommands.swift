import AllotArguments

/// A command tree shaped like `allot`'s (SPEC section 13 fixes the `serve` settings), used as the
/// fixture for parsing and for the verbatim help tests.
enum SampleCommands {
    enum LogLevel: String, CaseIterable {
        case debug, info, warn, error
    }

    static func make() -> CommandSpec {
        CommandSpec(
            "allot", abstract: "Continuous per-tenant LLM quota renegotiation.",
            options: [
                OptionSpec(
                    "data", value: "DIR", help: "Directory holding the SQLite database and the admin token file.",
                    default: "./allot-data", environment: "ALLOT_DATA", inherited: true)
            ],
            subcommands: [serve, tokens, simulate])
    }

    static let serve = CommandSpec(
        "serve", abstract: "Run the control-plane server.",
        discussion: """
            Starts the loop and the HTTP API. On first start with an empty database an admin token \
            is printed once and written to the data directory.

            Example:
              allot serve --listen 0.0.0.0:8080 --log-level debug
            """,
        options: [
            OptionSpec(
                "listen", value: "HOST:PORT", help: "Address to listen on.", default: "127.0.0.1:8080",
                environment: "ALLOT_LISTEN"),
            OptionSpec(
                "policies", value: "DIR", help: "Policy directory (default: ./policies when it exists, else built in).",
                environment: "ALLOT_POLICIES"),
            OptionSpec(
                "log-level", value: "LEVEL", help: "Minimum level of log lines.", default: "info",
                environment: "ALLOT_LOG_LEVEL", choices: ["debug", "info", "warn", "error"]),
            OptionSpec("workers", short: "w", value: "N", help: "Worker threads.", default: "2"),
            OptionSpec("ratio", value: "R", help: "Safety margin.", default: "0.9"),
        ],
        flags: [
            FlagSpec(
                "dev", help: "Disable authentication (refused on non-loopback addresses).", environment: "ALLOT_DEV")
        ])

    static let tokens = CommandSpec(
        "tokens", abstract: "Create, list and revoke API tokens.",
        subcommands: [
            CommandSpec(
                "create", abstract: "Create a token and print it once.",
                options: [
                    OptionSpec(
                        "role", short: "r", value: "ROLE", help: "What the token may do.",
                        choices: ["gateway", "operator", "sre", "admin"], required: true),
                    OptionSpec("label", value: "TEXT", help: "Free-text label.", repeatable: true),
                ],
                positionals: [PositionalSpec("name", help: "Who the token is for.")]),
            CommandSpec("list", abstract: "List tokens (never their secrets)."),
            CommandSpec(
                "revoke", abstract: "Revoke tokens.",
                positionals: [
                    PositionalSpec("id", help: "Token ids, or - to read them from stdin.", arity: .variadic(minimum: 1))
                ]),
        ])

    static let simulate = CommandSpec(
        "simulate", abstract: "Run a scenario on a virtual clock.",
        options: [
            OptionSpec("seed", value: "N", help: "Random seed.", default: "1"),
            OptionSpec(
                "out", short: "o", value: "DIR", help: "Where to write report.json, timeline.csv and timeline.svg."),
        ],
        flags: [FlagSpec("list", help: "Print the built-in scenario names, one per line.")],
        positionals: [
            PositionalSpec("scenario", help: "Scenario name or file.", arity: .optional),
            PositionalSpec("extra", help: "Extra files.", arity: .variadic(minimum: 0)),
        ])

    static let parser = CommandParser(root: make())
}
