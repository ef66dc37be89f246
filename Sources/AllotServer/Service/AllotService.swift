import AllotAssets
import AllotCore
import AllotHTTP
import AllotJSON
import AllotLog
import AllotLoop
import AllotMetrics
import AllotSQLite
import AllotStore
import AllotTime
import Foundation
import Synchronization

/// The running service: database, policies, ingest, loop and HTTP server wired together.
///
/// `allot serve` calls ``start(_:clock:logger:announce:)`` and, on SIGTERM/SIGINT,
/// ``shutdown(gracePeriod:)``. Tests start it the same way on an ephemeral port.
public final class AllotService: Sendable {
    public let configuration: ServeConfiguration
    /// The bound port (useful with port 0).
    public let port: Int
    public let context: ServiceContext
    /// Every route with its access rule (for the auth-matrix and OpenAPI tests).
    public let access: [HTTPRoute: Access]
    private let server: HTTPServer
    private let background: Locked<[Task<Void, Never>]>
    private let directoryLock: DataDirectoryLock

    private init(
        configuration: ServeConfiguration, port: Int, context: ServiceContext, access: [HTTPRoute: Access],
        server: HTTPServer, background: [Task<Void, Never>], directoryLock: DataDirectoryLock
    ) {
        self.configuration = configuration
        self.port = port
        self.context = context
        self.access = access
        self.server = server
        self.background = Locked(background)
        self.directoryLock = directoryLock
    }

    /// Loads the policies, opens the data directory and database (migrating it), starts the loop
    /// and the HTTP server. Throws a message fit for the operator on any failure.
    /// - Parameter announce: receives one-time notices meant for the person starting the service
    ///   (the first admin token).
    public static func start(
        _ configuration: ServeConfiguration, clock: any AllotClock = SystemClock(), logger: Logger,
        loopConfiguration: LoopConfiguration = LoopConfiguration(),
        announce: @escaping @Sendable (String) -> Void = { _ in }
    ) async throws(ServiceStartError) -> AllotService {
        if configuration.dev && !configuration.isLoopback {
            throw ServiceStartError(
                "--dev disables authentication and is refused on \(configuration.host); listen on a loopback address "
                    + "(127.0.0.1, ::1, localhost) or drop --dev")
        }
        let metrics = MetricsRegistry()
        try? ProcessMetrics.register(on: metrics)

        let policyBox = Locked<LoadedPolicy?>(nil)
        let reloadAudit = Locked<OperatorConsole?>(nil)
        // The loop opens after the watcher (it needs the first policy); reloads reach it through this slot.
        let loopSlot = Locked<LoopRunner?>(nil)
        let watcher: PolicyWatcher
        do {
            watcher = try PolicyWatcher(
                source: configuration.policies, logger: logger, metrics: metrics,
                onReject: { error in await loopSlot.value?.reportPolicyError(error.message) },
                onRestore: { await loopSlot.value?.clearPolicyError() }
            ) { old, new in
                policyBox.value = new
                await loopSlot.value?.apply(policy: new.policy, version: new.version)
                await reloadAudit.value?.recordPolicyReload(
                    source: configuration.policies.description, from: (old.version, old.files),
                    to: (new.version, new.files))
            }
        } catch {
            // A message about the directory itself names it already ("cannot read policy directory DIR: …").
            let source = configuration.policies.description
            throw ServiceStartError(error.message.contains(source) ? error.message : "\(source): \(error.message)")
        }
        // The policies are read before the data directory is touched: a bad --policies creates nothing.
        let directory = DataDirectory(path: configuration.dataDirectory)
        // One service per data directory: a second would run its own loop and publish interleaved versions. Taken
        // before the database opens; a start that fails after this drops it with the lock object.
        let directoryLock: DataDirectoryLock
        do {
            directoryLock = try DataDirectoryLock.acquire(directory)
        } catch {
            throw ServiceStartError(error.message)
        }
        let pool: DatabasePool
        do {
            let opened = try await directory.openDatabase(
                configuration: SQLiteConfiguration(synchronous: configuration.synchronous))
            pool = opened.pool
            for migration in opened.applied {
                logger.notice("migration applied", ["file": "\(migration.fileName)"])
            }
        } catch {
            throw ServiceStartError(error.message)
        }
        // A log set aside when the database was replaced under a running service: its transactions belong to the
        // file replaced, not to this one (said at every start until it is removed).
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        for name in names.sorted() where name.hasPrefix("allot.sqlite-wal.of-replaced-") {
            logger.warning(
                "a write-ahead log set aside when the database was replaced while open: it holds transactions of the "
                    + "file replaced, not of this one; keep it with that file, or remove it",
                ["file": .string(directory.path + "/" + name)])
        }

        let initialPolicy = await watcher.current
        policyBox.value = initialPolicy
        logger.notice(
            "policy loaded",
            ["source": "\(configuration.policies)", "version": "\(initialPolicy.version)",
             "files": "\(initialPolicy.files.joined(separator: ","))"])

        let telemetry = TelemetryStore(pool: pool, clock: clock)
        let context = ServiceContext(
            configuration: configuration, clock: clock, logger: logger, metrics: metrics, directory: directory,
            pool: pool, telemetry: telemetry, policyWatcher: watcher, policyBox: policyBox)
        reloadAudit.value = context.operators
        // The loop serves the last persisted snapshot from here on, before its first tick (SPEC 7).
        let loop: LoopRunner
        do {
            loop = try await LoopRunner.open(
                store: telemetry, policy: initialPolicy.policy, policyVersion: initialPolicy.version, clock: clock,
                estimators: .standard, operators: context.operators.inputs, configuration: loopConfiguration,
                metrics: metrics, logger: logger)
        } catch {
            await pool.close()
            throw ServiceStartError("cannot open the loop's state in \(configuration.dataDirectory): \(error)")
        }
        loopSlot.value = loop
        context.operators.attach(loop)

        let authenticator: any Authenticator = configuration.dev ? DevAuthenticator() : context.makeAuthenticator()
        var table = RouteTable(authenticator: authenticator)
        let shutdownSignal = ShutdownSignal()
        ServiceRoutes.register(in: &table, context: context, loop: loop, shutdownSignal: shutdownSignal)
        let httpMetrics = HTTPMetrics(registry: metrics, logger: logger)
        table.observe { httpMetrics.record($0) }

        let serverConfiguration = HTTPServerConfiguration(
            host: configuration.host, port: configuration.port, maxConnections: configuration.maxConnections,
            maxBodyBytes: configuration.maxBodyBytes,
            headerReadTimeout: .milliseconds(Int64(configuration.headerTimeoutSeconds * 1000)),
            idleTimeout: .milliseconds(Int64(configuration.idleTimeoutSeconds * 1000)),
            log: HTTPServerConfiguration.logging(to: logger.labelled("http")))
        let server = HTTPServer(
            configuration: serverConfiguration, responder: table.router, shutdownSignal: shutdownSignal)
        httpMetrics.registerServerGauges(server)
        let port: Int
        do {
            port = try await server.start()
        } catch {
            await loop.shutdown()
            await pool.close()
            throw ServiceStartError("cannot listen on \(configuration.address(port: configuration.port)): \(error)")
        }
        // The first admin token is created once the service can run: a start that fails (a port in use) does not
        // announce a token for a service that never answered.
        if !configuration.dev {
            do {
                try await context.operators.bootstrapAdminToken(directory: directory, announce: announce)
            } catch {
                await server.shutdown(gracePeriod: .zero)
                await loop.shutdown()
                await pool.close()
                throw ServiceStartError("cannot create the first admin token: \(error)")
            }
        }

        await loop.start()
        var tasks: [Task<Void, Never>] = []
        tasks.append(Task { await watcher.run(clock: clock) })
        let pruner = RetentionPruner(
            pool: pool,
            policy: RetentionPolicy(
                rawEvents: configuration.eventRetentionSeconds, rollups: configuration.rollupRetentionSeconds))
        tasks.append(
            Task {
                await pruner.run(clock: clock) { error in
                    logger.warning("retention pruning failed; retrying next interval", ["error": "\(error)"])
                }
            })
        logger.notice(
            "allot listening",
            ["address": .string(configuration.address(port: port)), "data": "\(configuration.dataDirectory)",
             "auth": configuration.dev ? "disabled (--dev)" : "bearer tokens"])
        return AllotService(
            configuration: configuration, port: port, context: context, access: table.access, server: server,
            background: tasks, directoryLock: directoryLock)
    }

    /// How long shutdown waits for the loop to stop (its tick in progress, then a checkpoint).
    static let loopStopSeconds = 30.0

    /// Runs `work` and waits for it at most `seconds` (wall clock): whether it finished in time. After a timeout the
    /// work goes on in the background: a task stuck in synchronous code cannot be interrupted, only left.
    static func finishes(within seconds: Double, _ work: @escaping @Sendable () async -> Void) async -> Bool {
        await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let answered = Locked(false)
            @Sendable func answer(_ value: Bool) {
                let first = answered.withLock { done in
                    defer { done = true }
                    return !done
                }
                if first { continuation.resume(returning: value) }
            }
            let timer = Task {
                try? await Task.sleep(for: .seconds(seconds))
                answer(false)
            }
            Task {
                await work()
                answer(true)
                timer.cancel()
            }
        }
    }

    /// Graceful shutdown (SPEC 13): stop accepting, answer held long-polls, let in-flight
    /// requests finish, stop the loop and background work, flush and close the database.
    public func shutdown(gracePeriod: Duration = .seconds(10)) async {
        context.logger.notice("shutting down")
        await server.shutdown(gracePeriod: gracePeriod)
        let tasks = background.withLock { tasks in
            defer { tasks.removeAll() }
            return tasks
        }
        for task in tasks { task.cancel() }
        for task in tasks { await task.value }
        // The loop's last checkpoint is written before the database closes. A loop stuck in a tick cannot be
        // interrupted (round 11: SIGTERM then hung until kill -9); after the wait, shutdown goes on without it: the
        // last checkpoint and the published snapshots are on disk already.
        if let loop = context.operators.loop {
            let stopped = await Self.finishes(within: Self.loopStopSeconds) { await loop.shutdown() }
            if !stopped {
                context.logger.error(
                    "the loop did not stop within \(Int(Self.loopStopSeconds)) s (stuck in a tick); stopping without "
                        + "its last checkpoint", ["tick": .int(loop.view.tick)])
            }
        }
        do {
            try await context.telemetry.close()
        } catch {
            context.logger.error("could not flush telemetry rollups at shutdown", ["error": "\(error)"])
        }
        await context.pool.close()
        directoryLock.release()
        context.logger.notice("stopped")
    }
}
