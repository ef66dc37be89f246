import AllotCore
import AllotLog
import AllotLoop
import AllotMetrics
import AllotSQLite
import AllotStore
import AllotTime

/// What the operator API stands on (SPEC 8, 9): the operators' tables (tokens, audit, overrides,
/// proposals, burst requests), the telemetry store (registry of tenants, rollups for history and
/// costs), the policy in force, and the running loop (its latest reports and decision).
///
/// The loop is attached once it runs (``attach(_:)``); until then the API answers from the tables
/// and the policy alone (tenants known from telemetry and policy, declared capacities, no
/// allocations). The loop reads operator inputs through ``inputs``.
public final class OperatorConsole: Sendable {
    public let store: OperatorStore
    public let tokens: TokenStore
    public let issuer: TokenIssuer
    public let audit: AuditLog
    public let telemetry: TelemetryStore
    public let authenticator: TokenAuthenticator
    public let clock: any AllotClock
    public let logger: Logger
    public let metrics: MetricsRegistry
    /// The SQLite-backed operator inputs to give the loop (`LoopRunner.open(operators:)`).
    public let inputs: StoredOperatorInputs
    /// The policy in force and its version (hot-reloaded).
    let policy: @Sendable () -> (policy: Policy, version: String)
    /// The policy watcher's current rejection, if the files on disk are invalid.
    let policyError: @Sendable () async -> (message: String, at: Double)?
    private let loopSlot = Locked<LoopRunner?>(nil)
    let capacityHistory = Locked(CapacityHistory())
    let usageCache = Locked<UpstreamUsageCache?>(nil)
    /// The alerts in force that the loop's view does not hold (``serviceAlerts(now:)``), as last read: what the
    /// metrics collector, which cannot wait for the database, counts in `allot_alerts`.
    let lastServiceAlerts = Locked<[LoopAlert]>([])

    /// - Parameters:
    ///   - pool: The service's database (migrated).
    ///   - telemetry: The telemetry store on the same pool.
    ///   - policy: The policy in force and its version, read per request.
    ///   - policyError: The policy watcher's current rejection (for `/v1/alerts`).
    ///   - metrics: Where the operator and report metrics are registered.
    public init(
        pool: DatabasePool, telemetry: TelemetryStore, clock: any AllotClock, logger: Logger,
        metrics: MetricsRegistry, policy: @escaping @Sendable () -> (policy: Policy, version: String),
        policyError: @escaping @Sendable () async -> (message: String, at: Double)? = { nil }
    ) {
        store = OperatorStore(pool: pool)
        tokens = TokenStore(pool: pool)
        issuer = TokenIssuer(store: tokens)
        audit = AuditLog(pool: pool)
        self.telemetry = telemetry
        self.clock = clock
        self.logger = logger.labelled("operators")
        self.metrics = metrics
        self.policy = policy
        self.policyError = policyError
        authenticator = TokenAuthenticator(tokens: tokens, clock: clock, metrics: metrics, logger: logger)
        inputs = StoredOperatorInputs(store: store, logger: logger.labelled("operators"))
        OperatorMetrics.register(self)
    }

    /// Connects the running loop: its view feeds tenants, upstreams, alerts, gateways and metrics.
    public func attach(_ loop: LoopRunner) {
        loopSlot.value = loop
    }

    /// The attached loop, if any.
    public var loop: LoopRunner? { loopSlot.value }

    /// The loop's latest reports and decision, if a loop is attached.
    var view: LoopView? { loopSlot.value?.view }

    /// The alerts in force that the service, not the loop, raises: the policy watcher's rejection of the files on
    /// disk (`policy_error`, unless the loop's view has it) and every override proposal awaiting an SRE
    /// (`override_proposal`, with its pool, or none for a tenant-wide one). `GET /v1/alerts` lists them beside the
    /// loop's; `/metrics` counts them (outside evaluation round 21: `allot_alerts` left the proposals out).
    func serviceAlerts(now: Double) async throws -> [LoopAlert] {
        var alerts: [LoopAlert] = []
        // A loop that stopped ticking: critical, or a warning while its timer only waits for a wall clock stepped back
        // to reach the next tick's time, for at most a lease (allocations frozen longer than that are more than a
        // warning).
        if let loop, let stall = loop.stall(now: now) {
            let message = ServiceRoutes.stallMessage(
                seconds: stall.seconds, intervalSeconds: stall.intervalSeconds, wallClockBehind: stall.wallClockBehind)
            let lease = loop.view.policy.loop.leaseSeconds
            alerts.append(
                LoopAlert(
                    kind: "loop_stalled", severity: stall.waitsForClock && stall.seconds <= lease ? .warning : .critical,
                    message: message + "; allocations are frozen meanwhile, the snapshot in force is served",
                    since: now - stall.seconds + LoopRunner.stallThreshold(interval: stall.intervalSeconds)))
        }
        if let error = await policyError(), !(view?.alerts ?? []).contains(where: { $0.kind == "policy_error" }) {
            alerts.append(
                LoopAlert(
                    kind: "policy_error", severity: .critical,
                    message: "policy files rejected; the previous policy stays in force: \(error.message)",
                    since: error.at))
        }
        if let flood = await telemetry.registrationFlood(now: now) {
            let named = flood.gateways.prefix(5).map { "\($0.id) (\($0.tenants))" }.joined(separator: ", ")
            let more = flood.gateways.count > 5 ? " and \(flood.gateways.count - 5) more" : ""
            alerts.append(
                LoopAlert(
                    kind: "tenant_flood", severity: .warning,
                    message: "\(flood.tenants) new tenants registered by telemetry within "
                        + "\(Int(RegistrationWindow.seconds)) s (more than \(RegistrationWindow.threshold)), by "
                        + (flood.gateways.count == 1 ? "gateway " : "gateways ") + named + more
                        + ": each counts as an active tenant of its pool until it is idle (classifier.idle_after_s), "
                        + "their guessed demand sharing what the established tenants leave "
                        + "(classifier.cold_start_share); check what the gateway sends as `tenant`",
                    since: flood.since))
        }
        // What is known without the database first (for `/metrics`, which keeps the last reading when this read
        // fails: a loop stalled by the database is then still alerted), with the proposals known before.
        lastServiceAlerts.value = alerts + lastServiceAlerts.value.filter { $0.kind == "override_proposal" }
        for stored in try await store.pendingOverrideProposals(now: now) {
            let proposal = stored.proposal
            alerts.append(
                LoopAlert(
                    kind: "override_proposal", severity: .info,
                    upstream: proposal.upstream == "*" ? nil : proposal.upstream,
                    tenant: proposal.tenant, message: "proposal \(proposal.id) awaits an SRE: \(proposal.reason)",
                    since: proposal.filedAt))
        }
        lastServiceAlerts.value = alerts
        return alerts
    }

    /// The version of the snapshot being served, if any.
    var snapshotVersion: Int64? { snapshot?.version }

    /// The snapshot being served, if any.
    var snapshot: PublishedSnapshot? { loopSlot.value?.publisher.current }

    /// First start (SPEC 8): creates the admin token when the database holds no admin token (other
    /// roles' tokens do not count), writes it to `DIR/admin-token` (mode 0600, never overwritten) and
    /// hands a notice for the person starting the service to `announce` (printed once, on stderr).
    /// Does nothing when an admin token exists, even a revoked one.
    public func bootstrapAdminToken(
        directory: DataDirectory, announce: @Sendable (String) -> Void
    ) async throws {
        guard
            let outcome = try await issuer.bootstrapAdmin(tokenFile: directory.adminTokenPath, now: clock.now)
        else { return }
        var notice = "allot: created the first admin token (shown once): \(outcome.issued.secret)\n"
        if outcome.wroteFile {
            notice += "allot: it is also in \(directory.adminTokenPath) (mode 0600)."
        } else {
            notice += "allot: it was NOT written to a file: \(outcome.fileError ?? "unknown error"); keep it now."
        }
        // With this server's data directory: without `--data` the CLI writes to ./allot-data, which a server started
        // elsewhere does not read (outside evaluation round 36: a token created as told was refused, 401).
        // Absolute: the CLI may be run from another directory (review: `./allot-data` reproduced the 401).
        let absolute = directory.absolutePath
        let data = absolute.allSatisfy { $0.isLetter || $0.isNumber || "/._-+:@%".contains($0) }
            ? absolute : "'" + absolute.replacingOccurrences(of: "'", with: #"'\''"#) + "'"
        notice += " Create more with `allot tokens create --role ROLE --name NAME --data \(data)`."
        announce(notice)
        logger.notice(
            "first admin token created",
            ["token_id": .string(outcome.issued.record.id), "file_written": .bool(outcome.wroteFile)])
    }

    /// Appends the audit record of a policy reload (SPEC 8: policy reloads are audited).
    public func recordPolicyReload(
        source: String, from old: (version: String, files: [String]), to new: (version: String, files: [String])
    ) async {
        let entry = AuditEntry(
            atMs: EpochTime.milliseconds(fromSeconds: clock.now), actor: "policy-watcher", action: "policy.reload",
            subject: source,
            before: ["version": .string(old.version), "files": .array(old.files.map { .string($0) })],
            after: ["version": .string(new.version), "files": .array(new.files.map { .string($0) })],
            reason: "policy files changed")
        await audit.appendAfterTheFact(entry, logger: logger, failure: "cannot audit a policy reload")
    }
}

extension AuditLog {
    /// Appends the record of a change already made and persisted elsewhere (a policy reload, a drain): its failure
    /// cannot undo the change, so it is logged (`failure`, with `fields` and the error), not thrown.
    func appendAfterTheFact(
        _ entry: AuditEntry, logger: Logger, failure: String, fields: [(String, LogValue)] = []
    ) async {
        do {
            _ = try await append(entry)
        } catch {
            logger.log(.error, failure, fields: fields + [("error", .string("\(error)"))])
        }
    }
}

/// The loop's operator inputs, read from and recorded to the operators' tables (SPEC 6.5, 6.7,
/// 6.8): overrides in force, SREs' resolutions of engine proposals, pending burst requests.
public struct StoredOperatorInputs: OperatorInputs {
    public let store: OperatorStore
    let logger: Logger

    public init(store: OperatorStore, logger: Logger = .disabled) {
        self.store = store
        self.logger = logger
    }

    public func inputs(now: Double) async throws -> OperatorInputBatch {
        let read = try await store.inputs(now: now)
        return OperatorInputBatch(
            overrides: read.overrides, resolutions: read.resolutions, burstRequests: read.burstRequests)
    }

    /// Records the decision; a failure is logged and the inputs are offered again next tick
    /// (at-least-once: the engine ignores a resolution it already applied).
    public func record(_ decision: Decision, now: Double) async {
        do {
            try await store.record(decision, now: now)
        } catch {
            logger.error("cannot record the operators' side of a decision", ["error": .string("\(error)")])
        }
    }
}
