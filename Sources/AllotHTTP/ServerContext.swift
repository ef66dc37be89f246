/// What every connection of one server shares: configuration, responder, counters and whether the
/// server is draining. Immutable apart from the locked parts, so handler tasks may read it too.
final class ServerContext: Sendable {
    let configuration: HTTPServerConfiguration
    let limits: RequestLimits
    let responder: any HTTPResponder
    let statistics = Locked(HTTPServerStatistics())
    private let draining = Locked(false)
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

    func log(_ level: HTTPServerLogEvent.Level, _ message: String, _ fields: [(name: String, value: String)] = []) {
        configuration.log?(HTTPServerLogEvent(level: level, message: message, fields: fields))
    }
}
