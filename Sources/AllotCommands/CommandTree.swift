import AllotArguments

/// Every command and option of the `allot` executable, in one place, so `allot --help` and
/// `allot COMMAND --help` are complete by construction (SPEC section 13).
enum CommandTree {
    static let dataOption = OptionSpec(
        "data", value: "DIR", help: "Directory holding the SQLite database and the admin token file.",
        default: "./allot-data", environment: "ALLOT_DATA")

    static let logLevelOption = OptionSpec(
        "log-level", value: "LEVEL", help: "Minimum level of the JSON-lines log written to stderr.",
        default: "info", environment: "ALLOT_LOG_LEVEL",
        choices: ["trace", "debug", "info", "notice", "warning", "error", "critical"])

    static let urlOption = OptionSpec(
        "url", value: "URL", help: "Base URL of a running `allot serve`.", default: "http://127.0.0.1:8080",
        environment: "ALLOT_URL")

    static let tokenOption = OptionSpec(
        "token", value: "TOKEN", help: "Bearer token for the running server: an admin token (none with --dev).",
        environment: "ALLOT_TOKEN")

    static let serve = CommandSpec(
        "serve", abstract: "Run the Allot service: ingest telemetry, run the loop, publish snapshots over HTTP",
        discussion: """
            Creates the data directory and its SQLite database on first start, applies the migrations, \
            loads the policies, serves the last persisted snapshot at once, and runs the feedback loop \
            every policy interval. When the database holds no admin token (first start, or only tokens \
            of other roles made with `allot tokens create`), it creates one, prints it once and writes it \
            to DIR/admin-token (mode 0600).

            SIGTERM or SIGINT shut down gracefully: stop accepting, answer held long-polls, finish \
            in-flight requests, close the database.
            """,
        options: [
            OptionSpec(
                "listen", value: "HOST:PORT", help: "Address to listen on.", default: "127.0.0.1:8080",
                environment: "ALLOT_LISTEN"),
            dataOption,
            OptionSpec(
                "policies", value: "DIR",
                help: "Directory of policy JSON files, re-read when they change. Default: ./policies when it "
                    + "exists, else the policies built into the binary.",
                environment: "ALLOT_POLICIES"),
            logLevelOption,
            OptionSpec(
                "max-body-bytes", value: "BYTES",
                help: "Largest request body accepted (larger: 413); from 1024 to 1073741824.",
                default: "16777216", environment: "ALLOT_MAX_BODY_BYTES"),
            OptionSpec(
                "max-connections", value: "N", help: "Open connections allowed (beyond: 503 and close).",
                default: "10000", environment: "ALLOT_MAX_CONNECTIONS"),
            OptionSpec(
                "idle-timeout", value: "SECONDS", help: "Keep-alive connections idle this long are closed.",
                default: "75", environment: "ALLOT_IDLE_TIMEOUT"),
            OptionSpec(
                "header-timeout", value: "SECONDS",
                help: "Time a client has to send a request's headers (a new connection silent this long is closed).",
                default: "10", environment: "ALLOT_HEADER_TIMEOUT"),
            OptionSpec(
                "event-retention", value: "HOURS", help: "How long raw telemetry events are kept.",
                default: "24", environment: "ALLOT_EVENT_RETENTION_HOURS"),
            OptionSpec(
                "rollup-retention", value: "DAYS", help: "How long per-minute rollups are kept.",
                default: "30", environment: "ALLOT_ROLLUP_RETENTION_DAYS"),
            OptionSpec(
                "synchronous", value: "MODE",
                help: "SQLite durability: full fsyncs every commit (no acknowledged write lost on power loss); "
                    + "normal survives process crashes only.",
                default: "full", environment: "ALLOT_SYNCHRONOUS", choices: ["full", "normal"]),
        ],
        flags: [
            FlagSpec(
                "dev", help: "Disable authentication (refused unless listening on a loopback address).",
                environment: "ALLOT_DEV"),
            FlagSpec(
                "metrics-auth", help: "Require a token (any role) for GET /metrics.", environment: "ALLOT_METRICS_AUTH"),
        ])

    static let migrate = CommandSpec(
        "migrate", abstract: "Apply pending database migrations and exit",
        discussion: """
            Applies the migrations built into this binary (from migrations/*.sql) that the database \
            does not have yet, each in its own transaction, and prints what it applied. A database \
            written by a newer Allot is refused. `allot serve` does the same at start.
            """,
        options: [dataOption],
        flags: [
            FlagSpec(
                "status",
                help: "Only list applied and pending migrations; change nothing (a missing database is not "
                    + "created: every migration is listed as pending). Exits 0 when nothing is pending, 3 when "
                    + "something is, 1 on an error, 2 on a usage error.")
        ])

    static let plan = CommandSpec(
        "plan", abstract: "Compute one what-if allocation from a JSON file and print it",
        discussion: """
            Reads a plan (capacity, settings, tenants; see README "What-if plans") from FILE or from \
            standard input with `-`, computes one allocation without history or dampening, and prints \
            the result as JSON. Bad input exits 1 with a message naming the tenant and field.
            """,
        options: [
            OptionSpec(
                "policy", value: "DIR",
                help: "Policy directory whose tiers and settings fill what the plan leaves out. Default: ./policies "
                    + "when it exists, else the policies built into the binary.",
                environment: "ALLOT_POLICIES")
        ],
        flags: [FlagSpec("pretty", help: "Indent the JSON output.")],
        positionals: [PositionalSpec("file", help: "Plan JSON file, or - for standard input.")])

    static let simulate = CommandSpec(
        "simulate", abstract: "Run a scenario on a virtual clock against the real loop and compare strategies",
        discussion: """
            Runs the real observer, classifier, engine and publisher (same SQLite schema and ingest \
            path) on a virtual clock against a simulated upstream and simulated gateways (using \
            AllotEnforcement), and prints a metrics table per strategy. With --out it also writes \
            report.json, timeline.csv, timeline.svg, tasks.csv, tenants.csv and results.md. \
            Deterministic for a seed. The \
            scenario format and the metrics are documented in docs/scenarios.md. On stderr, \
            ALLOT_SIM_DEBUG=1 prints what the observer concluded after every tick and the gateways' \
            local denials per tenant and pool at the end; ALLOT_SIM_TENANTS=a,b (or *) prints those \
            tenants' demand, fair-share level and published allocation after every tick (and names \
            any that are no tenant of the scenario).
            """,
        options: [
            OptionSpec(
                "scenario", value: "NAME|FILE", help: "Built-in scenario name (see --list) or a scenario JSON file."),
            OptionSpec(
                "strategy", value: "S", help: "Strategy to run.", default: "all",
                choices: ["allot", "static", "fifo-backoff", "equal-split", "all"]),
            OptionSpec("seed", value: "N", help: "Random seed.", default: "1"),
            OptionSpec(
                "seeds", value: "LIST",
                help:
                    "Run every seed of LIST (e.g. 1-8, or 1,4,9-12; at most 1000; replaces --seed) and print the means per strategy; "
                    + "--out then writes report.json (means and each seed's metrics) and results.md, no timelines "
                    + "(and removes an earlier run's timeline, tasks and tenants files there)."),
            OptionSpec(
                "out", value: "DIR",
                help: "Write report.json, timeline.csv, timeline.svg, tasks.csv, tenants.csv and results.md here."),
            OptionSpec(
                "policy", value: "DIR",
                help: "Run allot with this policy directory's tiers and settings (a candidate policy) instead of "
                    + "the policies built into the binary; the scenario still supplies pools and tenants. The "
                    + "yardstick moves with it: static's quotas and the metrics' entitlement use its weights and "
                    + "ceilings, and equal-split re-divides at its tick."),
            OptionSpec(
                "gateways", value: "N",
                help: "Run the scenario with N simulated gateways (1-32) instead of its own `gateways` (the "
                    + "built-ins have 3, fleet-hour 4): the more gateways, the smaller each tenant's slice at each "
                    + "(fifo-backoff's one global bucket stays at one)."),
        ],
        flags: [
            FlagSpec("list", help: "Print the built-in scenario names, one per line, and exit."),
            FlagSpec(
                "check",
                help: "Validate the scenario (and --policy), print what it describes (pools, tenants after count, "
                    + "headline) and exit without running it; exit 1 with the field at fault when it is invalid."),
        ])

    static let tokens = CommandSpec(
        "tokens", abstract: "Create, list and revoke API tokens (stored only as SHA-256 hashes)",
        subcommands: [
            CommandSpec(
                "create", abstract: "Create a token and print it once",
                options: [
                    OptionSpec(
                        "role", value: "ROLE", help: "What the token may do.",
                        choices: ["gateway", "operator", "sre", "admin"], required: true),
                    OptionSpec("name", value: "NAME", help: "Who or what the token is for.", required: true),
                    OptionSpec(
                        "gateway-scope", value: "SCOPE",
                        help: "A gateway token only: the gateway ids it may report, poll and leave as — one id, or a "
                            + "prefix ending in * (gw-eu-*). Default: any."),
                    dataOption,
                ]),
            CommandSpec("list", abstract: "List tokens (never the secrets)", options: [dataOption]),
            CommandSpec(
                "revoke", abstract: "Revoke a token by its id", options: [dataOption],
                positionals: [PositionalSpec("id", help: "Token id as printed by `allot tokens list`.")]),
        ])

    static let drain = CommandSpec(
        "drain", abstract: "Publish a snapshot whose lease has already expired (gateways move to fallback)",
        discussion: """
            Asks a running server to drain before maintenance: it publishes the current allocation as \
            a new version whose lease has already expired, so every gateway switches to its fallback \
            floors at once. The drain lasts until `allot drain --resume`, across restarts of the server too. \
            Needs an admin \
            token (none with a --dev server).
            """,
        options: [urlOption, tokenOption],
        flags: [FlagSpec("resume", help: "End the drain: the next tick publishes a normal snapshot.")])

    static let bench = CommandSpec(
        "bench", abstract: "Run a benchmark and print its figures (use a release build)",
        subcommands: [
            CommandSpec(
                "allocation", abstract: "Time one allocation for 1,000, 10,000 and 100,000 tenants",
                options: [OptionSpec("runs", value: "N", help: "Repetitions per size (median reported).", default: "7")]
            ),
            CommandSpec(
                "ingest", abstract: "Telemetry ingest through HTTP (events/s) against a plain bulk insert",
                options: [
                    OptionSpec("seconds", value: "S", help: "Duration of each run.", default: "5"),
                    OptionSpec("clients", value: "N", help: "Concurrent HTTP clients.", default: "8"),
                    OptionSpec("runs", value: "N", help: "Runs (median reported).", default: "3"),
                ],
                flags: [
                    FlagSpec(
                        "idempotency-keys",
                        help:
                            "Post every batch with its own Idempotency-Key (the cost of the body digest and the key row)."
                    )
                ]),
            CommandSpec(
                "tick", abstract: "One loop tick over 10,000 tenants with 1,000,000 events in the window",
                options: [
                    OptionSpec("tenants", value: "N", help: "Active tenants.", default: "10000"),
                    OptionSpec("events", value: "N", help: "Events in the window.", default: "1000000"),
                    OptionSpec("runs", value: "N", help: "Ticks measured (median reported).", default: "5"),
                ]),
            CommandSpec(
                "longpoll", abstract: "Wake N long-poll watchers with one publish; time until all are answered",
                options: [
                    OptionSpec("watchers", value: "N", help: "Concurrent long-poll connections.", default: "5000"),
                    OptionSpec("runs", value: "N", help: "Publishes measured (median reported).", default: "5"),
                ]),
            CommandSpec(
                "snapshot", abstract: "Conditional snapshot requests per second (If-None-Match → 304)",
                options: [
                    OptionSpec("seconds", value: "S", help: "Duration.", default: "5"),
                    OptionSpec("connections", value: "N", help: "Keep-alive connections.", default: "64"),
                ]),
            CommandSpec(
                "memory", abstract: "Resident memory of the loop and publisher at N tenants",
                options: [OptionSpec("tenants", value: "N", help: "Tenants.", default: "10000")]),
        ])

    static let root = CommandSpec(
        "allot", abstract: "Continuous per-tenant LLM quota renegotiation for multi-tenant agent platforms",
        discussion: """
            Allot reads gateway telemetry, estimates what each upstream really delivers and what each \
            tenant really needs, applies the priority policy, and publishes versioned allocation \
            snapshots that gateways hot-reload. See README.md.
            """,
        flags: [FlagSpec("version", help: "Print the version and the newest database migration it carries, and exit.")],
        subcommands: [serve, migrate, plan, simulate, tokens, drain, bench])
}
