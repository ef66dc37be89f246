import AllotCore
import AllotSignals

/// One validated telemetry event (SPEC section 3): one upstream attempt, or one request a gateway
/// denied or queued locally.
///
/// Only ``TelemetryDecoder`` makes these from request bodies, so every value is within the bounds
/// of ``TelemetryValidation``. Absent optional fields are nil (never 0), so "not reported" stays
/// distinguishable from "reported zero" in the database.
public struct TelemetryEvent: Sendable, Hashable {
    /// When the attempt ended (or the request was denied), milliseconds since the Unix epoch.
    public var timestampMs: Int64
    /// The reporting gateway instance.
    public var gateway: String
    public var tenant: String
    /// The upstream pool, e.g. `openai/gpt-4o`.
    public var upstream: String
    /// As reported, or classified from `status`, `error_type` and `error_body` (see
    /// ``outcomeWasClassified``).
    public var outcome: Outcome
    /// True when the gateway sent no `outcome` and ``AllotSignals/ErrorClassifier`` chose it.
    public var outcomeWasClassified: Bool
    /// The upstream's HTTP status; nil when no response arrived or the request never left.
    public var status: Int?
    public var latencyMs: Double?
    public var queueMs: Double?
    public var promptTokens: Int64?
    public var completionTokens: Int64?
    /// The gateway's estimate before the call (what denied and queued requests would have used).
    public var estimatedTokens: Int64?
    public var taskClass: TaskClass
    public var taskID: String?
    public var modelVersion: String?
    /// The attempt number (0 for the first attempt).
    public var retry: Int?
    /// The provider's error code/type, verbatim.
    public var errorType: String?
    /// What the upstream's rate-limit headers (and Google error body) said.
    public var signals: EventSignals
    /// Recognised rate-limit headers whose values could not be read (counted, never fatal).
    public var unparseableHeaders: Int

    public init(
        timestampMs: Int64, gateway: String, tenant: String, upstream: String, outcome: Outcome,
        outcomeWasClassified: Bool = false, status: Int? = nil, latencyMs: Double? = nil, queueMs: Double? = nil,
        promptTokens: Int64? = nil, completionTokens: Int64? = nil, estimatedTokens: Int64? = nil,
        taskClass: TaskClass = .interactive, taskID: String? = nil, modelVersion: String? = nil, retry: Int? = nil,
        errorType: String? = nil, signals: EventSignals = EventSignals(), unparseableHeaders: Int = 0
    ) {
        self.timestampMs = timestampMs
        self.gateway = gateway
        self.tenant = tenant
        self.upstream = upstream
        self.outcome = outcome
        self.outcomeWasClassified = outcomeWasClassified
        self.status = status
        self.latencyMs = latencyMs
        self.queueMs = queueMs
        self.promptTokens = promptTokens
        self.completionTokens = completionTokens
        self.estimatedTokens = estimatedTokens
        self.taskClass = taskClass
        self.taskID = taskID
        self.modelVersion = modelVersion
        self.retry = retry
        self.errorType = errorType
        self.signals = signals
        self.unparseableHeaders = unparseableHeaders
    }
}

/// A decoded, fully validated `POST /v1/telemetry` body: what ``TelemetryStore/ingest(_:)`` stores
/// all-or-nothing.
public struct TelemetryBatch: Sendable, Hashable {
    public var events: [TelemetryEvent]
    /// Sum of ``TelemetryEvent/unparseableHeaders`` over the batch.
    public var unparseableHeaders: Int
    /// How many events had no `outcome` and were classified.
    public var classifiedOutcomes: Int
    /// How many members with names this server does not know were ignored (see ``TelemetryDecoder``).
    public var ignoredFieldCount: Int
    /// The distinct ignored names, in order of appearance, at most
    /// ``TelemetryValidation/maxReportedIgnoredFields`` of them (echoed in the response so that a
    /// gateway developer sees a misspelt field).
    public var ignoredFields: [String]

    public init(
        events: [TelemetryEvent], unparseableHeaders: Int = 0, classifiedOutcomes: Int = 0,
        ignoredFieldCount: Int = 0, ignoredFields: [String] = []
    ) {
        self.events = events
        self.unparseableHeaders = unparseableHeaders
        self.classifiedOutcomes = classifiedOutcomes
        self.ignoredFieldCount = ignoredFieldCount
        self.ignoredFields = ignoredFields
    }
}
