import Glibc

/// Allot's HTTP/1.1 server: non-blocking sockets on one epoll event-loop thread, handlers as Swift
/// tasks.
///
/// ```swift
/// var router = Router()
/// router.get("/healthz") { _ in .text("ok") }
/// let server = HTTPServer(configuration: .init(port: 8080), responder: router)
/// let port = try await server.start()
/// // … on SIGTERM:
/// await server.shutdown(gracePeriod: .seconds(10))
/// ```
///
/// Why this shape: thousands of gateways hold long-polls (SPEC §7) and an idle or held connection
/// must cost a registration, not a thread. All socket work happens on the loop thread; each request's
/// handler runs as a task on the cooperative pool and its response comes back through the loop's
/// mailbox. See `HTTPServerConnection` for the per-connection rules and `HTTPServerConfiguration`
/// for the limits.
///
/// Graceful shutdown (`shutdown(gracePeriod:)`): stop accepting, trigger `shutdownSignal` (so the
/// application can answer held long-polls), close idle connections, let in-flight requests finish
/// (their connections close after the response), and after the grace period close whatever is
/// left, cancelling its handlers.
public actor HTTPServer {
    private enum Phase {
        case idle
        case running
        case stopping
        case stopped
    }

    public nonisolated let configuration: HTTPServerConfiguration
    /// Triggered when `shutdown` begins; long-poll handlers listen to it to answer at once.
    public nonisolated let shutdownSignal: ShutdownSignal
    private nonisolated let context: ServerContext
    private var phase = Phase.idle
    /// One listener per event loop (index-aligned).
    private var loops: [EventLoop] = []
    private var listeners: [HTTPListener] = []
    private let stopped = OneShotEvent()
    /// The port the server listens on once started.
    public private(set) var port: Int?

    /// - Parameters:
    ///   - configuration: address, limits and timeouts.
    ///   - responder: answers every request (usually a `Router`).
    ///   - shutdownSignal: the signal to trigger on shutdown; pass one to share it with other
    ///     components, or use the server's own.
    public init(
        configuration: HTTPServerConfiguration = HTTPServerConfiguration(), responder: some HTTPResponder,
        shutdownSignal: ShutdownSignal = ShutdownSignal()
    ) {
        self.configuration = configuration
        self.shutdownSignal = shutdownSignal
        self.context = ServerContext(
            configuration: configuration, responder: responder,
            maxConnections: Self.effectiveConnectionLimit(configuration.maxConnections))
    }

    deinit {
        for (loop, listener) in zip(loops, listeners) {
            loop.execute { listener.closeAll() }
            loop.stop(completion: {})
        }
    }

    /// Counters for metrics; cheap to read from any thread.
    public nonisolated var statistics: HTTPServerStatistics {
        context.statistics.withLock { $0 }
    }

    /// Binds, listens and starts serving. Returns the bound port (useful with port 0).
    public func start() async throws -> Int {
        guard phase == .idle else { throw HTTPServerStateError(message: "the server was already started") }
        let addresses = try SocketAddress.resolve(host: configuration.host, port: configuration.port, passive: true)
        guard let address = addresses.first else {
            throw AddressResolutionError(host: configuration.host, message: "no address")
        }
        let count = configuration.eventLoopCount
        var started: [(EventLoop, HTTPListener)] = []
        var bound: SocketAddress?
        do {
            for index in 0..<count {
                var target = address
                if let bound {
                    target = try SocketAddress.resolveNumeric(host: bound.host, port: bound.port)[0]
                }
                let fd = try SocketAddress.listen(
                    on: target, backlog: Int32(clamping: configuration.backlog), reusePort: count > 1)
                let loop: EventLoop
                do {
                    if bound == nil { bound = try SocketAddress.local(of: fd) }
                    loop = try EventLoop(name: "allot-http-\(index)")
                    try loop.start()
                } catch {
                    Posix.close(fd)
                    throw error
                }
                let listener = HTTPListener(fd: fd, loop: loop, context: context)
                started.append((loop, listener))
                try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                    loop.execute {
                        do {
                            try listener.start()
                            continuation.resume()
                        } catch {
                            Posix.close(fd)
                            continuation.resume(throwing: error)
                        }
                    }
                }
            }
        } catch {
            for (loop, listener) in started {
                loop.execute { listener.closeAll() }
                await loop.stop()
            }
            throw error
        }
        guard let bound else { throw AddressResolutionError(host: configuration.host, message: "no address") }
        self.loops = started.map(\.0)
        self.listeners = started.map(\.1)
        self.port = bound.port
        phase = .running
        let limit = context.maxConnections
        context.log(.info, "listening", [("address", bound.description), ("max_connections", "\(limit)")])
        if limit < configuration.maxConnections {
            var files = rlimit()
            _ = getrlimit(Int32(RLIMIT_NOFILE.rawValue), &files)
            context.log(
                .warning,
                "connection limit lowered to \(limit) by the open-file limit (\(files.rlim_cur), hard "
                    + "\(files.rlim_max)): raise it (ulimit -n, systemd LimitNOFILE) to allow "
                    + "\(configuration.maxConnections)", [])
        }
        return bound.port
    }

    /// Shuts down gracefully; returns when every connection is closed and the loop has stopped.
    /// Calling it again (or concurrently) waits for the same shutdown.
    public func shutdown(gracePeriod: Duration = .seconds(10)) async {
        switch phase {
        case .idle:
            phase = .stopped
            shutdownSignal.trigger()
            stopped.set()
            return
        case .stopping, .stopped:
            await stopped.wait()
            return
        case .running:
            phase = .stopping
        }
        context.beginDraining()
        shutdownSignal.trigger()
        let drained = OneShotEvent()
        let remaining = Locked(listeners.count)
        for (loop, listener) in zip(loops, listeners) {
            loop.execute {
                listener.beginDraining {
                    let last = remaining.withLock { count -> Bool in
                        count -= 1
                        return count == 0
                    }
                    if last { drained.set() }
                }
            }
        }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await drained.wait() }
            group.addTask { try? await Task.sleep(for: gracePeriod) }
            await group.next()
            group.cancelAll()
        }
        if !drained.isSet {
            context.log(.warning, "grace period over, closing remaining connections", [])
        }
        for (loop, listener) in zip(loops, listeners) {
            loop.execute { listener.closeAll() }
            await loop.stop()
        }
        loops = []
        listeners = []
        phase = .stopped
        context.log(.info, "stopped", [])
        stopped.set()
    }

    /// Descriptors kept back from connections for the database, logs and outgoing clients.
    static let descriptorReserve = 64

    /// Keeps the connection limit below the process's descriptor limit (less ``descriptorReserve``), so the limit
    /// answers 503 before `accept` fails with `EMFILE`. The soft descriptor limit is raised first, as far as the hard
    /// one allows, to what the configured limit needs (outside evaluation round 40: under systemd's default soft
    /// limit of 1,024, `--max-connections 10000` meant 960 with a hard limit of 20,000, and nothing said so;
    /// ``start()`` now logs a limit lowered).
    static func effectiveConnectionLimit(_ configured: Int) -> Int {
        var limit = rlimit()
        let resource = Int32(RLIMIT_NOFILE.rawValue)
        guard getrlimit(resource, &limit) == 0, limit.rlim_cur != rlim_t.max else { return configured }
        let wanted = raisedSoftLimit(for: configured, soft: limit.rlim_cur, hard: limit.rlim_max)
        if wanted > limit.rlim_cur {
            var raised = limit
            raised.rlim_cur = wanted
            if setrlimit(resource, &raised) == 0 { limit = raised }
        }
        return connectionLimit(configured, soft: limit.rlim_cur)
    }

    /// The soft open-file limit `configured` connections want (theirs and the reserve), as far as `hard` allows;
    /// `soft` when it is enough already.
    static func raisedSoftLimit(for configured: Int, soft: rlim_t, hard: rlim_t) -> rlim_t {
        let needed = rlim_t(clamping: configured + descriptorReserve)
        guard soft < needed else { return soft }
        return hard == rlim_t.max ? needed : max(soft, min(needed, hard))
    }

    /// The connection limit under a soft open-file limit of `soft`.
    static func connectionLimit(_ configured: Int, soft: rlim_t) -> Int {
        max(1, min(configured, Int(clamping: soft) - descriptorReserve))
    }
}

/// `HTTPServer.start()` called on a server that was already started (or shut down).
public struct HTTPServerStateError: Error, Sendable, Equatable {
    public var message: String
}
