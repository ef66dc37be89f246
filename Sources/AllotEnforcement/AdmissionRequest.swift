import AllotCore
import AllotSignals

/// A request a gateway wants to dispatch to an upstream, as it asks for admission.
public struct AdmissionRequest: Sendable, Equatable {
    /// The tenant (SPEC §3: 1–128 characters of `[A-Za-z0-9._:-]`).
    public var tenant: String
    /// The upstream pool, e.g. `openai/gpt-4o`.
    public var upstream: String
    public var taskClass: TaskClass
    /// The caller's estimate of the request's total tokens (prompt + completion), reserved from the TPM bucket
    /// before dispatch. When nil: `promptTokens` plus the snapshot's completion `token_estimate`, else plus
    /// ``GatewayConfiguration/defaultCompletionEstimate``.
    public var estimatedTokens: Int?
    /// The prompt's size when the caller knows it (used only when `estimatedTokens` is nil).
    public var promptTokens: Int?
    /// The agent task this call belongs to, for the runaway-task guard (`task_budget`) and telemetry.
    public var taskID: String?
    /// Attempt number (0 for the first), reported in telemetry.
    public var retry: Int
    /// When the agent task this call belongs to started its work (epoch seconds), the same for all its later
    /// calls and retries. Within one (tenant, upstream) and task class, the admission queue serves calls of
    /// tasks that started earlier first, so that under overload the gateway finishes the tasks it has started
    /// before it starts new ones: a task is worth something only once all its calls are done, and serving every
    /// task alike makes them all late.
    ///
    /// Pass the instant the task's first call was admitted (or its first answer came back), and nil until
    /// then: a task none of whose calls got through has not started, so its calls rank by arrival, like calls
    /// without task context, behind every started task. The instant the task was created works too, but under
    /// sustained overload it puts the tasks that waited longest first — those nearest their deadline, which a
    /// few more rounds of calls then take past it (the simulator's burst-vs-sustained: 56% of the premium tasks
    /// on time that way, 74% with the first admission). A start after the call's arrival counts as the arrival.
    /// It only reorders the tenant's own calls, never another tenant's.
    public var taskStartedAt: Double?
    /// When the agent task must be finished (epoch seconds). A call arriving or waiting after it cannot help
    /// the task make its deadline, so it does not take capacity from calls that still can:
    /// ``GatewayConfiguration/pastDeadline`` says whether it ranks behind them or is denied
    /// (`deadline_passed`). nil: no deadline (the call is never late).
    public var taskDeadline: Double?

    public init(
        tenant: String, upstream: String, taskClass: TaskClass = .interactive, estimatedTokens: Int? = nil,
        promptTokens: Int? = nil, taskID: String? = nil, retry: Int = 0, taskStartedAt: Double? = nil,
        taskDeadline: Double? = nil
    ) {
        self.tenant = tenant
        self.upstream = upstream
        self.taskClass = taskClass
        self.estimatedTokens = estimatedTokens
        self.promptTokens = promptTokens
        self.taskID = taskID
        self.retry = retry
        self.taskStartedAt = taskStartedAt
        self.taskDeadline = taskDeadline
    }

    /// Where the call ranks among its tenant's waiting calls of its task class, as of `now`.
    func lanePosition(at now: Double) -> LanePosition {
        let started = taskStartedAt.flatMap { $0.isFinite ? min($0, now) : nil } ?? now
        return LanePosition(late: isLate(at: now), started: started)
    }

    /// True once the task's deadline has passed (a deadline that is not a number never passes).
    func isLate(at now: Double) -> Bool {
        guard let taskDeadline, taskDeadline.isFinite else { return false }
        return now >= taskDeadline
    }
}

/// A call's rank among its tenant's waiting calls of one task class: calls of tasks whose deadline has not
/// passed first, then by the task's start, oldest first.
struct LanePosition: Sendable, Equatable {
    var late: Bool
    var started: Double

    /// True when a call at `self` goes before one at `other` (equal positions keep arrival order: a tie is
    /// not "before").
    func precedes(_ other: LanePosition) -> Bool {
        if late != other.late { return !late }
        return started < other.started
    }
}

/// Permission to dispatch one request. Hand it back exactly once: ``Enforcer/complete(_:_:now:)`` after the
/// upstream answered (or failed), or ``Enforcer/release(_:now:)`` if the request was never sent. Until then it
/// holds one of the tenant's `max_concurrency` permits and its token reservation.
public struct Ticket: Sendable, Hashable {
    /// Unique within the enforcer that issued it.
    public let id: UInt64
    public let tenant: String
    public let upstream: String
    public let taskClass: TaskClass
    public let taskID: String?
    /// Tokens reserved from the TPM bucket (the estimate used for admission).
    public let reservedTokens: Int
    /// When the request was admitted: the attempt's telemetry `ts`.
    public let admittedAt: Double
    /// Seconds spent in the admission queue.
    public let waited: Double
    public let snapshotVersion: Int64?
    /// In `shadow` mode: the limit that would have denied this request (it was admitted anyway and not charged).
    public let shadowDenial: LimitKind?
    /// The attempt number its telemetry reports: the request's `retry`, one higher when the gateway reported it
    /// `queued` while it waited (``GatewayConfiguration/queuedReportAfter``), so that Allot counts it once.
    public let retry: Int

    init(
        id: UInt64, request: AdmissionRequest, reservedTokens: Int, admittedAt: Double, waited: Double,
        snapshotVersion: Int64?, shadowDenial: LimitKind?
    ) {
        self.id = id
        self.tenant = request.tenant
        self.upstream = request.upstream
        self.taskClass = request.taskClass
        self.taskID = request.taskID
        self.reservedTokens = reservedTokens
        self.admittedAt = admittedAt
        self.waited = waited
        self.snapshotVersion = snapshotVersion
        self.shadowDenial = shadowDenial
        self.retry = request.retry
    }
}

/// What happened to a dispatched request, as the gateway reports it on completion.
public struct AttemptResult: Sendable {
    /// The upstream's HTTP status; nil when no response arrived (connection failure, timeout).
    public var status: Int?
    /// Actual usage from the provider's response. When both are nil the reservation is kept as the usage,
    /// except for attempts the upstream refused (429, overload, errors): those used no tokens.
    public var promptTokens: Int?
    public var completionTokens: Int?
    /// Seconds from dispatch to the end of the response.
    public var latency: Double?
    /// The upstream's response header fields, all or some: the rate-limit ones are kept verbatim.
    public var headers: [(String, String)]
    /// The provider's error code or type (e.g. `rate_limit_exceeded`), verbatim.
    public var errorType: String?
    /// The provider's error body, when there was one: sharpens classification (Google reports quota
    /// exhaustion only there). Not sent in telemetry.
    public var errorBody: ProviderErrorBody?
    /// Overrides classification; nil lets `ErrorClassifier` decide from status, error type and body.
    public var outcome: Outcome?
    public var modelVersion: String?

    public init(
        status: Int?, promptTokens: Int? = nil, completionTokens: Int? = nil, latency: Double? = nil,
        headers: [(String, String)] = [], errorType: String? = nil, errorBody: ProviderErrorBody? = nil,
        outcome: Outcome? = nil, modelVersion: String? = nil
    ) {
        self.status = status
        self.promptTokens = promptTokens
        self.completionTokens = completionTokens
        self.latency = latency
        self.headers = headers
        self.errorType = errorType
        self.errorBody = errorBody
        self.outcome = outcome
        self.modelVersion = modelVersion
    }

    /// Prompt plus completion tokens, when either is known (``Int/saturatingTokenSum(_:_:)``).
    public var actualTokens: Int? {
        if promptTokens == nil && completionTokens == nil { return nil }
        return Int.saturatingTokenSum(promptTokens ?? 0, completionTokens ?? 0)
    }
}

extension Int {
    /// `a + b` of two token counts, negatives read as 0, saturating at `Int.max`: the counts come from callers
    /// and from providers' usage reports, and an absurd one must not trap the gateway.
    static func saturatingTokenSum(_ a: Int, _ b: Int) -> Int {
        let (sum, overflow) = Swift.max(0, a).addingReportingOverflow(Swift.max(0, b))
        return overflow ? .max : sum
    }
}
