import AllotJSON

/// The limit behind a local denial (SPEC §7, §6 cost governance), as a gateway reports it to its caller.
public enum LimitKind: String, Sendable, Hashable, CaseIterable {
    /// The tenant's requests-per-minute bucket is empty.
    case rpm
    /// The tenant's tokens-per-minute bucket holds fewer tokens than the request's estimate.
    case tpm
    /// The tenant's `max_concurrency` requests are in flight (or the gateway's own per-upstream cap).
    case concurrency
    /// The snapshot denies the tenant outright (`deny`, e.g. `budget_exhausted`: the cost circuit breaker).
    case budget
    /// The upstream's circuit is open and the request's task class is shed.
    case circuit
    /// The request's `task_id` has used its task class's `task_budget` (a runaway agent loop).
    case taskBudget = "task_budget"
    /// The gateway has not received a first snapshot yet and has no bootstrap limits.
    case noSnapshot = "no_snapshot"
    /// The call's task deadline (``AdmissionRequest/taskDeadline``) has passed and the gateway denies late
    /// calls (``PastDeadlinePolicy/deny``).
    case deadline

    /// Whether waiting can help: bucket refill, a completion or a first snapshot may admit the request later.
    /// Budget, circuit and task budget denials are final for the current snapshot and are never queued.
    public var isWaitable: Bool {
        switch self {
        case .rpm, .tpm, .concurrency, .noSnapshot: true
        case .budget, .circuit, .taskBudget, .deadline: false
        }
    }
}

/// Why the gateway did not dispatch a request, with what its caller needs to act: fall back to a smaller model,
/// retry after ``retryAfter``, or fail fast.
public struct Denial: Sendable, Equatable, CustomStringConvertible {
    public var limit: LimitKind
    /// A stable code: `rate_limited` (rpm/tpm), `gateway_rate_limited` (rpm/tpm: the gateway's own cap,
    /// ``GatewayConfiguration/capWindow``), `concurrency_limited`, `gateway_concurrency_limited`,
    /// `gateway_stopping`,
    /// `max_wait_exceeded`, `queue_full` (also for a waiter displaced from a full queue by a call of an older
    /// task of its tenant), `zero_allocation`, `circuit_open`, `task_budget_exceeded`, `deadline_passed`,
    /// `no_snapshot`, `cancelled`, or for ``LimitKind/budget`` the snapshot's `deny` value verbatim
    /// (e.g. `budget_exhausted`).
    public var code: String
    /// A sentence for logs and the gateway's error body.
    public var message: String
    /// Seconds after which the same request may succeed, computed from the bucket's refill rate (rpm/tpm);
    /// the snapshot's refresh interval when only a new snapshot can help (budget, circuit, zero allocation);
    /// nil when retrying the same request cannot help (task budget, deadline passed).
    public var retryAfter: Double?
    /// The snapshot version that denied (nil before the first snapshot).
    public var snapshotVersion: Int64?
    /// True when that version's lease had expired and the gateway was enforcing `fallback` floors.
    public var fallback: Bool
    /// Seconds the request waited in the admission queue before this denial.
    public var waited: Double
    public var tenant: String
    public var upstream: String
    public var taskClass: TaskClass

    public init(
        limit: LimitKind, code: String, message: String, retryAfter: Double?, snapshotVersion: Int64?,
        fallback: Bool = false, waited: Double = 0, tenant: String, upstream: String, taskClass: TaskClass
    ) {
        self.limit = limit
        self.code = code
        self.message = message
        self.retryAfter = retryAfter
        self.snapshotVersion = snapshotVersion
        self.fallback = fallback
        self.waited = waited
        self.tenant = tenant
        self.upstream = upstream
        self.taskClass = taskClass
    }

    public var description: String { "\(limit.rawValue) (\(code)): \(message)" }

    /// The `Retry-After` header value: whole seconds, rounded up, at least 1; nil when retrying cannot help.
    public var retryAfterHeader: String? {
        guard let retryAfter, retryAfter.isFinite else { return nil }
        // A bucket refilled at a sliver of a rate (10⁻³⁰⁰ RPM) is centuries from a request: past Int.max the
        // conversion would trap, so the header says at most 10⁹ s (31 years), which a 32-bit parser also reads.
        return String(Int(min(max(retryAfter, 1), 1e9).rounded(.up)))
    }

    /// The status a gateway should answer with: 503 when the upstream or the gateway itself cannot serve
    /// (circuit open, no snapshot yet), 429 for every limit of the tenant's own.
    public var suggestedStatus: Int {
        switch limit {
        case .circuit, .noSnapshot: 503
        default: 429
        }
    }

    /// A JSON error body in Allot's error shape, for the gateway's response:
    /// `{"error": {"code", "message", "limit", "retry_after_s", "snapshot_version", "fallback"}}`.
    public func jsonBody() -> [UInt8] {
        var writer = JSONWriter(capacity: 256)
        writer.beginObject()
        writer.key("error")
        writer.beginObject()
        writer.field("code", code)
        writer.field("message", message)
        writer.field("limit", limit.rawValue)
        writer.field("retry_after_s", retryAfter)
        writer.key("snapshot_version")
        if let snapshotVersion { writer.value(snapshotVersion) } else { writer.valueNull() }
        writer.field("fallback", fallback)
        writer.endObject()
        writer.endObject()
        return writer.bytes
    }
}

/// The answer to an admission request: a ticket to dispatch with, or a denial.
public enum Admission: Sendable, Equatable {
    case admitted(Ticket)
    case denied(Denial)

    public var ticket: Ticket? {
        if case .admitted(let ticket) = self { return ticket }
        return nil
    }

    public var denial: Denial? {
        if case .denied(let denial) = self { return denial }
        return nil
    }
}
