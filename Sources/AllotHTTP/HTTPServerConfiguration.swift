import AllotLog

/// Everything an `HTTPServer` can be told, with defaults fit for Allot's control plane.
///
/// Limits exist so that malformed, oversized, slow or hostile requests get a clear error or a
/// closed connection and never exhaust the process (SPEC §13 "Reliability"). Timeouts are
/// `Duration`s so tests can use milliseconds.
public struct HTTPServerConfiguration: Sendable {
    /// The address to listen on. Default `127.0.0.1` (loopback only; expose deliberately).
    public var host: String
    /// The TCP port; 0 (default) picks an ephemeral port, which `HTTPServer.start()` returns.
    public var port: Int
    /// The `listen(2)` backlog (the kernel caps it at `net.core.somaxconn`). Default 1024.
    public var backlog: Int
    /// Open connections beyond which new ones are answered `503` and closed. Default 10,000;
    /// the effective limit is also kept below the process's file-descriptor limit.
    public var maxConnections: Int
    /// The whole request head (request line and fields). Beyond it: `431`. Default 16 KiB.
    public var maxHeaderBytes: Int
    /// The request line (method, target, version). Beyond it: `414`. Default 8 KiB.
    public var maxRequestLineBytes: Int
    /// The number of header fields. Beyond it: `431`. Default 100.
    public var maxHeaderCount: Int
    /// The request body (declared `Content-Length` or de-chunked size). Beyond it: `413`.
    /// Default 8 MiB (a telemetry batch is far smaller).
    public var maxBodyBytes: Int
    /// Time from a request's first byte to the end of its head. Beyond it: `408` and close, so a
    /// client dripping a header (slowloris) holds one descriptor for this long at most. Default 10 s.
    public var headerReadTimeout: Duration
    /// Time from the end of the head to the end of the body. Beyond it: `408` and close. Default 30 s.
    public var bodyReadTimeout: Duration
    /// Time a keep-alive connection may sit between requests before it is closed. Default 30 s.
    /// (Held long-polls are not idle: no timeout applies while a handler runs.)
    public var idleTimeout: Duration
    /// Time a response write may make no progress (a client that stopped reading). Default 30 s.
    public var writeTimeout: Duration
    /// After a response that ends the connection, how long unread input is drained before the
    /// socket is closed, so the response is not destroyed by a reset (RFC 9112 §9.6). Default 2 s.
    public var lingerTimeout: Duration
    /// Event-loop threads. Each has its own listening socket on the same port (`SO_REUSEPORT`, the
    /// kernel spreads connections) and serves its connections' I/O; handlers run on the shared
    /// cooperative pool either way. Default 1.
    public var eventLoopCount: Int
    /// Receives the server's own events (listening, accept failures, protocol errors, timeouts);
    /// the application forwards them to its logger (see `logging(to:)`). Default: none. Called on an
    /// event-loop thread: it must be quick and must not block.
    public var log: (@Sendable (HTTPServerLogEvent) -> Void)?

    /// - Parameters:
    ///   - host: listening address, default `127.0.0.1`.
    ///   - port: listening port, default 0 (ephemeral).
    ///   - backlog: `listen(2)` backlog, default 1024.
    ///   - maxConnections: open-connection limit (503 beyond), default 10,000.
    ///   - maxHeaderBytes: head size limit (431 beyond), default 16 KiB.
    ///   - maxRequestLineBytes: request-line limit (414 beyond), default 8 KiB.
    ///   - maxHeaderCount: header-field count limit (431 beyond), default 100.
    ///   - maxBodyBytes: body size limit (413 beyond), default 8 MiB.
    ///   - headerReadTimeout: first byte to end of head (408 beyond), default 10 s.
    ///   - bodyReadTimeout: end of head to end of body (408 beyond), default 30 s.
    ///   - idleTimeout: keep-alive idle time before closing, default 30 s.
    ///   - writeTimeout: longest write stall before closing, default 30 s.
    ///   - lingerTimeout: draining unread input before a close, default 2 s.
    ///   - eventLoopCount: event-loop threads, default 1.
    ///   - log: receiver of server events, default none.
    public init(
        host: String = "127.0.0.1",
        port: Int = 0,
        backlog: Int = 1024,
        maxConnections: Int = 10_000,
        maxHeaderBytes: Int = 16 * 1024,
        maxRequestLineBytes: Int = 8 * 1024,
        maxHeaderCount: Int = 100,
        maxBodyBytes: Int = 8 * 1024 * 1024,
        headerReadTimeout: Duration = .seconds(10),
        bodyReadTimeout: Duration = .seconds(30),
        idleTimeout: Duration = .seconds(30),
        writeTimeout: Duration = .seconds(30),
        lingerTimeout: Duration = .seconds(2),
        eventLoopCount: Int = 1,
        log: (@Sendable (HTTPServerLogEvent) -> Void)? = nil
    ) {
        self.host = host
        self.port = port
        self.backlog = backlog
        self.maxConnections = maxConnections
        self.maxHeaderBytes = maxHeaderBytes
        self.maxRequestLineBytes = maxRequestLineBytes
        self.maxHeaderCount = maxHeaderCount
        self.maxBodyBytes = maxBodyBytes
        self.headerReadTimeout = headerReadTimeout
        self.bodyReadTimeout = bodyReadTimeout
        self.idleTimeout = idleTimeout
        self.writeTimeout = writeTimeout
        self.lingerTimeout = lingerTimeout
        self.eventLoopCount = max(1, eventLoopCount)
        self.log = log
    }

    var limits: RequestLimits {
        RequestLimits(
            maxHeaderBytes: maxHeaderBytes, maxRequestLineBytes: min(maxRequestLineBytes, maxHeaderBytes),
            maxHeaderCount: maxHeaderCount, maxBodyBytes: maxBodyBytes)
    }
}

/// Something the server reports for the application's log.
public struct HTTPServerLogEvent: Sendable, CustomStringConvertible {
    public enum Level: String, Sendable, Comparable {
        case debug, info, warning, error

        private var rank: Int {
            switch self {
            case .debug: 0
            case .info: 1
            case .warning: 2
            case .error: 3
            }
        }

        public static func < (lhs: Level, rhs: Level) -> Bool { lhs.rank < rhs.rank }
    }

    public var level: Level
    /// A short stable description, e.g. `"request header timed out"`.
    public var message: String
    /// Context such as `remote`, `status`, `error`.
    public var fields: [(name: String, value: String)]

    public init(level: Level, message: String, fields: [(name: String, value: String)] = []) {
        self.level = level
        self.message = message
        self.fields = fields
    }

    public var description: String {
        ([level.rawValue, message] + fields.map { "\($0.name)=\($0.value)" }).joined(separator: " ")
    }
}

extension HTTPServerConfiguration {
    /// A `log` hook that writes server events to `logger` (AllotLog's JSON lines), with the event's
    /// fields as string fields.
    public static func logging(to logger: Logger) -> @Sendable (HTTPServerLogEvent) -> Void {
        { event in
            let level: LogLevel =
                switch event.level {
                case .debug: .debug
                case .info: .info
                case .warning: .warning
                case .error: .error
                }
            logger.log(level, event.message, fields: event.fields.map { ($0.name, LogValue($0.value)) })
        }
    }
}

extension Duration {
    /// Whole nanoseconds, saturating (for monotonic deadlines).
    var nanoseconds: UInt64 {
        let (seconds, attoseconds) = components
        guard seconds >= 0 else { return 0 }
        let (whole, overflow) = UInt64(seconds).multipliedReportingOverflow(by: 1_000_000_000)
        guard !overflow else { return UInt64.max / 2 }
        return whole + UInt64(attoseconds / 1_000_000_000)
    }
}
