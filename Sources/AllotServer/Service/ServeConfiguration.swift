import AllotSQLite

/// Everything `allot serve` is configured with (flags and `ALLOT_*` variables; SPEC 13).
public struct ServeConfiguration: Sendable {
    /// Address to listen on. Default `127.0.0.1:8080`.
    public var host: String
    public var port: Int
    /// Holds the SQLite database and the admin token file. Default `./allot-data`.
    public var dataDirectory: String
    /// Where policies come from (see ``PolicySource/resolve(_:currentDirectory:)``).
    public var policies: PolicySource
    /// Disables authentication; refused unless `host` is a loopback address.
    public var dev: Bool
    /// Require a token (any role) for `GET /metrics`.
    public var metricsRequireToken: Bool
    /// Largest request body (413 beyond). Default 16 MiB: a 1,000-event telemetry batch with
    /// headers is about 0.5 MB, so this leaves room for big batches without unbounded memory.
    public var maxBodyBytes: Int
    public var maxConnections: Int
    public var idleTimeoutSeconds: Double
    public var headerTimeoutSeconds: Double
    /// Raw events are kept this long (seconds). Default 24 h.
    public var eventRetentionSeconds: Double
    /// Per-minute rollups are kept this long (seconds). Default 30 days.
    public var rollupRetentionSeconds: Double
    /// SQLite durability of acknowledged writes.
    public var synchronous: SQLiteConfiguration.Synchronous
    /// How long `GET /readyz` waits for the database to answer a read before it reports it stalled, seconds of real
    /// time (not a flag: tests shorten it). Not 1 s: the probe queues on the reader connection behind the loop's
    /// reads, and a catch-up read of 250,000 events takes longer than a second on a slow machine (review of round 40).
    public var readinessProbeSeconds = 5.0

    public init(
        host: String = "127.0.0.1", port: Int = 8080, dataDirectory: String = "./allot-data",
        policies: PolicySource = .embedded, dev: Bool = false, metricsRequireToken: Bool = false,
        maxBodyBytes: Int = 16 << 20, maxConnections: Int = 10_000, idleTimeoutSeconds: Double = 75,
        headerTimeoutSeconds: Double = 10, eventRetentionSeconds: Double = 86_400,
        rollupRetentionSeconds: Double = 30 * 86_400, synchronous: SQLiteConfiguration.Synchronous = .full
    ) {
        self.host = host
        self.port = port
        self.dataDirectory = dataDirectory
        self.policies = policies
        self.dev = dev
        self.metricsRequireToken = metricsRequireToken
        self.maxBodyBytes = maxBodyBytes
        self.maxConnections = maxConnections
        self.idleTimeoutSeconds = idleTimeoutSeconds
        self.headerTimeoutSeconds = headerTimeoutSeconds
        self.eventRetentionSeconds = eventRetentionSeconds
        self.rollupRetentionSeconds = rollupRetentionSeconds
        self.synchronous = synchronous
    }

    /// True for `127.0.0.0/8`, `::1` and `localhost`: the only places `--dev` may listen.
    public var isLoopback: Bool {
        let lowered = host.lowercased()
        return lowered == "localhost" || lowered == "::1" || lowered == "[::1]" || lowered.hasPrefix("127.")
    }

    /// `host:port` as `--listen` takes it: an IPv6 literal in brackets (`[::1]:8080`, not `::1:8080`).
    public func address(port: Int) -> String {
        host.contains(":") && !host.hasPrefix("[") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }
}

/// The service could not start; the message says why (printed by `allot serve`, exit 1).
public struct ServiceStartError: Error, Sendable, CustomStringConvertible {
    public var message: String

    public init(_ message: String) {
        self.message = message
    }

    public var description: String { message }
}
