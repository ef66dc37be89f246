import AllotCore
import AllotHTTP
import AllotJSON
import AllotLog
import AllotLoop
import AllotStore
import AllotTime

/// `GET /v1/gateways` (SPEC sections 7 and 9): every gateway that polled for snapshots, with the
/// version it enforces, how far behind it is, its last contact and the tenants it receives slices of.
///
/// ```json
/// {"version": 42, "gateways": [{"id": "gw-1", "state": "current", "enforced_version": 42,
///   "lag_versions": 0, "lag_s": 0, "first_contact": "…", "last_contact": "…", "since_contact_s": 1.2,
///   "polls": 310, "instance": "9f2c41d07ab35e18", "tenant_count": 2, "tenants": ["acme", "globex"]}]}
/// ```
///
/// `state` is `current`, `behind`, `lagging` (by the policy's `gateway_lag_versions` for at least one
/// refresh: alerted), `silent` (no poll for `gateway_lag_s`: alerted) or `unknown` (it never sent
/// `If-None-Match`). `instance` is the run of the gateway process its last poll named (`instance=`), null when
/// none. `tenants` lists at most ``maxTenantsListed`` ids (`tenants_truncated` is then true).
public struct GatewaysRoute: Sendable {
    public let publisher: AllocationPublisher
    /// The policy in force (lag thresholds, interval), read per request.
    public var policy: @Sendable () -> Policy
    public var clock: any AllotClock

    public static let path = "/v1/gateways"
    public static let maxTenantsListed = 1000

    public init(publisher: AllocationPublisher, policy: @escaping @Sendable () -> Policy, clock: any AllotClock) {
        self.publisher = publisher
        self.policy = policy
        self.clock = clock
    }

    public func respond(to request: HTTPRequest) async -> HTTPResponse {
        let statuses = publisher.gatewayStatuses(now: clock.now, policy: policy())
        var writer = JSONWriter(capacity: 256 + statuses.count * 256)
        writer.beginObject()
        if let version = publisher.current?.version {
            writer.field("version", version)
        } else {
            writer.key("version"); writer.valueNull()
        }
        writer.key("gateways")
        writer.beginArray()
        for status in statuses {
            writer.beginObject()
            writer.field("id", status.id)
            writer.field("state", status.state.rawValue)
            writer.key("enforced_version")
            if let version = status.enforcedVersion { writer.value(version) } else { writer.valueNull() }
            writer.key("lag_versions")
            if let lag = status.lagVersions { writer.value(lag) } else { writer.valueNull() }
            writer.field("lag_s", status.lagSeconds)
            writer.field("first_contact", RFC3339.format(status.firstContact))
            writer.field("last_contact", RFC3339.format(status.lastContact))
            writer.field("since_contact_s", status.sinceContactSeconds)
            writer.field("polls", status.polls)
            writer.key("instance")
            if let instance = status.instance { writer.value(instance) } else { writer.valueNull() }
            writer.field("clock_offset_s", status.clockOffsetSeconds)
            writer.field("tenant_count", status.tenants.count)
            writer.key("tenants")
            writer.beginArray()
            for tenant in status.tenants.prefix(Self.maxTenantsListed) { writer.value(tenant) }
            writer.endArray()
            if status.tenants.count > Self.maxTenantsListed { writer.field("tenants_truncated", true) }
            writer.endObject()
        }
        writer.endArray()
        writer.endObject()
        return .json(bytes: writer.bytes)
    }
}

/// `POST /v1/drain` and `DELETE /v1/drain` (admin; SPEC 7, `allot drain`): drain publishes the
/// current allocation with a lease that has already expired, so every gateway moves to its
/// `fallback` floors (before maintenance), and holds tick publishing until the drain is ended
/// (`DELETE`), across restarts too (the drain snapshot is persisted).
///
/// `POST` answers `{"drained": true, "version": N, "generated_at": "…", "expires_at": "…", "since": "…",
/// "already_drained": B}` — a drain already in force is answered as it stands (its version and `since`; nothing
/// published, nothing audited); 409 `no_snapshot` when nothing was published yet; 503 `database_unavailable` when the
/// drain version cannot be persisted. `DELETE` answers `{"drained": false, "ended": true, "version": N}` — the end is
/// persisted as version N (the drained content, still without a lease: gateways stay on their fallback floors until
/// the next tick), so a restart keeps it — or `{"drained": false, "ended": false}` when no drain was in force
/// (nothing changed, nothing audited); 503 `database_unavailable` when the end cannot be persisted (the drain stays).
///
/// Both are audited (SPEC 8: every mutation) as `drain.start` and `drain.end`, with the acting token's
/// name and role, once the change is made: a drain with the version it published, an end only when a
/// drain was in force (a repeated drain or ending no drain changes nothing). The drain version is persisted by the
/// publisher, so its audit record follows in a second write, as a policy reload's does; if that write
/// fails the drain stands and the failure is logged.
public struct DrainRoute: Sendable {
    public let publisher: AllocationPublisher
    public var clock: any AllotClock
    /// Where drains are audited; nil audits nothing (tests of the publishing alone).
    public var audit: AuditLog?
    public var logger: Logger

    public static let path = "/v1/drain"

    public init(
        publisher: AllocationPublisher, clock: any AllotClock, audit: AuditLog? = nil, logger: Logger = .disabled
    ) {
        self.publisher = publisher
        self.clock = clock
        self.audit = audit
        self.logger = logger
    }

    /// `POST`: drains now, audited as `principal`; a drain in force already is answered as it stands
    /// (`already_drained`, its `since`). It takes no parameters and no body members (an empty body or `{}`): anything
    /// else is refused, as on every operator route, rather than ignored.
    public func drain(_ request: HTTPRequest, by principal: Principal? = nil) async throws(HTTPError) -> HTTPResponse {
        try Self.refuseArguments(request)
        let outcome: AllocationPublisher.DrainOutcome
        do {
            outcome = try await publisher.startDrain(now: clock.now)
        } catch let error as PublisherError {
            throw HTTPError.conflict(error.message, code: error.code)
        } catch {
            throw HTTPError(
                .serviceUnavailable, code: "database_unavailable",
                message: "the drain could not be persisted: \(error)",
                headers: ["Retry-After": "1"])
        }
        let snapshot = outcome.snapshot
        let after: JSON = [
            "drained": true, "version": .int(snapshot.version),
            "generated_at": .string(RFC3339.format(snapshot.generatedAt)),
            "expires_at": .string(RFC3339.format(snapshot.expiresAt)),
        ]
        // A drain already in force stands as it is (same version, same start): nothing changes and nothing is
        // audited, as ending no drain audits nothing.
        if !outcome.alreadyDrained {
            let before: JSON = ["drained": false, "version": outcome.previousVersion.map(JSON.int) ?? .null]
            await record("drain.start", by: principal, before: before, after: after)
        }
        guard case .object(var answer) = after else { return .json(after) }
        answer["since"] = .string(RFC3339.format(outcome.since))
        answer["already_drained"] = .bool(outcome.alreadyDrained)
        return .json(.object(answer))
    }

    /// `DELETE`: ends the drain, persisted as a version of its own; the next tick publishes normally. Audited when a
    /// drain was in force. No parameters or body members either.
    public func resume(_ request: HTTPRequest, by principal: Principal? = nil) async throws(HTTPError) -> HTTPResponse {
        try Self.refuseArguments(request)
        let ended: AllocationPublisher.DrainEnd?
        do {
            ended = try await publisher.resume(now: clock.now)
        } catch {
            throw HTTPError(
                .serviceUnavailable, code: "database_unavailable",
                message: "the end of the drain could not be persisted, so the drain stays in force: \(error)",
                headers: ["Retry-After": "1"])
        }
        guard let ended else { return .json(["drained": false, "ended": false]) }
        let version = JSON.int(ended.snapshot.version)
        await record(
            "drain.end", by: principal, before: ["drained": true, "since": .string(RFC3339.format(ended.since))],
            after: ["drained": false, "version": version])
        return .json(["drained": false, "ended": true, "version": version])
    }

    private static func refuseArguments(_ request: HTTPRequest) throws(HTTPError) {
        _ = try OperatorQuery(request, allowed: [])
        try OperatorRequest.checkMembers(try OperatorRequest.optionalJSONObject(request), known: [])
    }

    private func record(_ action: String, by principal: Principal?, before: JSON, after: JSON) async {
        guard let audit else { return }
        let entry = AuditEntry(
            atMs: EpochTime.milliseconds(fromSeconds: clock.now), actor: principal?.name ?? "unknown",
            actorRole: principal?.role.rawValue, action: action, subject: "snapshot", before: before, after: after)
        await audit.appendAfterTheFact(
            entry, logger: logger, failure: "cannot audit a drain", fields: [("action", .string(action))])
    }
}
