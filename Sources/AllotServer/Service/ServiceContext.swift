import AllotCore
import AllotHTTP
import AllotLog
import AllotMetrics
import AllotSQLite
import AllotStore
import AllotTime
import Synchronization

/// The service's components, shared by every route handler.
public final class ServiceContext: Sendable {
    public let configuration: ServeConfiguration
    public let clock: any AllotClock
    public let logger: Logger
    public let metrics: MetricsRegistry
    public let directory: DataDirectory
    public let pool: DatabasePool
    public let telemetry: TelemetryStore
    public let policyWatcher: PolicyWatcher
    /// Tokens, audit log, overrides, proposals and burst requests, and the operator API's view of
    /// the loop (SPEC 8, 9). Give `operators.inputs` to the loop and `attach` the loop to it.
    public let operators: OperatorConsole
    private let policyBox: Locked<LoadedPolicy?>
    /// `/readyz`'s database probe, one at a time.
    let readinessProbe = ReadinessProbe()

    init(
        configuration: ServeConfiguration, clock: any AllotClock, logger: Logger, metrics: MetricsRegistry,
        directory: DataDirectory, pool: DatabasePool, telemetry: TelemetryStore, policyWatcher: PolicyWatcher,
        policyBox: Locked<LoadedPolicy?>
    ) {
        self.configuration = configuration
        self.clock = clock
        self.logger = logger
        self.metrics = metrics
        self.directory = directory
        self.pool = pool
        self.telemetry = telemetry
        self.policyWatcher = policyWatcher
        self.policyBox = policyBox
        operators = OperatorConsole(
            pool: pool, telemetry: telemetry, clock: clock, logger: logger, metrics: metrics,
            policy: { (policyBox.value!.policy, policyBox.value!.version) },
            policyError: {
                guard let error = await policyWatcher.lastError else { return nil }
                return (error.message, await policyWatcher.lastErrorAt ?? clock.now)
            })
    }

    /// The policy in force (hot-reloaded). Read without awaiting, so hot paths can use it.
    public var policy: LoadedPolicy {
        // Set before the context is created and only ever replaced, never cleared.
        policyBox.value!
    }

    /// Token authentication for non-`--dev` servers: bearer tokens against `api_tokens` (SPEC 8).
    func makeAuthenticator() -> any Authenticator {
        operators.authenticator
    }
}

/// `/readyz`'s read of the database, one at a time: while the disk stalls, each call waits for the probe already
/// running instead of queueing another behind it (review of round 40).
final class ReadinessProbe: Sendable {
    private let running = Mutex<SharedResult<SQLiteError?>?>(nil)

    /// What a read on `reader` found — nil when the database answered, its error otherwise — or nil when it did not
    /// answer within `seconds` of real time.
    func result(on reader: DatabaseQueue, within seconds: Double) async -> SQLiteError?? {
        let (probe, started) = running.withLock { running -> (SharedResult<SQLiteError?>, Bool) in
            if let running { return (running, false) }
            let probe = SharedResult<SQLiteError?>()
            running = probe
            return (probe, true)
        }
        if started {
            Task { [self] in
                do throws(SQLiteError) {
                    try await reader.access { (connection) throws(SQLiteError) in try connection.probe() }
                    probe.finish(nil)
                } catch {
                    probe.finish(error)
                }
                running.withLock { running in
                    if running === probe { running = nil }
                }
            }
        }
        return await probe.wait(seconds: seconds)
    }
}
