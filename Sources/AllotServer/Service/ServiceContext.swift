import AllotCore
import AllotHTTP
import AllotLog
import AllotMetrics
import AllotSQLite
import AllotStore
import AllotTime

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
    private let policyBox: Locked<LoadedPolicy?>

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
    }

    /// The policy in force (hot-reloaded). Read without awaiting, so hot paths can use it.
    public var policy: LoadedPolicy {
        // Set before the context is created and only ever replaced, never cleared.
        policyBox.value!
    }

    /// Token authentication for non-`--dev` servers.
    func makeAuthenticator() -> any Authenticator {
        RefusingAuthenticator()
    }
}

/// Until API tokens exist, every authenticated route answers 401.
struct RefusingAuthenticator: Authenticator {
    func authenticate(_ request: HTTPRequest) async throws(HTTPError) -> Principal {
        throw HTTPError.unauthorized("authentication required: send Authorization: Bearer TOKEN")
    }
}
