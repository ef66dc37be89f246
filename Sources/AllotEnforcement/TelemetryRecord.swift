import AllotCore
import AllotJSON
import AllotSignals
import AllotTime

/// One telemetry event as a gateway reports it to `POST /v1/telemetry` (SPEC §3): one per upstream attempt, and
/// one per request the gateway denied locally or that was abandoned while queued, so that unmet demand is
/// visible to Allot.
///
/// Every request that reaches the gateway is counted once as demand (Allot counts first attempts, `retry` 0):
/// an attempt (`ok`, `quota_exhausted`, …) carries the time it waited in `queue_ms`; a denial (`denied_local`,
/// possibly after waiting) carries it too. A request that waits ``GatewayConfiguration/queuedReportAfter``
/// (5 s) is reported `queued` then, stamped with the time it arrived, and its later attempt or denial carries
/// `retry` one higher; one whose caller gives up (is cancelled) before that is reported `queued` then.
public struct TelemetryRecord: Sendable, Equatable {
    /// When the attempt was dispatched (or the request denied), seconds since the epoch; sent as integer
    /// epoch milliseconds. An ``Enforcer`` reports it on Allot's clock: its own instant plus Allot's clock's offset
    /// from it, as the snapshot client last measured it, when that is beyond a second
    /// (``Enforcer/observeServerClock(_:now:)``).
    public var ts: Double
    public var gateway: String
    public var tenant: String
    public var upstream: String
    /// Always set by this library: given by the caller, else classified with `ErrorClassifier`.
    public var outcome: Outcome
    public var status: Int?
    /// Seconds (sent as `latency_ms`).
    public var latency: Double?
    /// Seconds the request waited in the gateway's admission queue (sent as `queue_ms`).
    public var queueWait: Double?
    public var promptTokens: Int?
    public var completionTokens: Int?
    public var estimatedTokens: Int?
    public var taskClass: TaskClass
    public var taskID: String?
    public var modelVersion: String?
    /// Attempt number, 0 for the first.
    public var retry: Int
    /// The upstream's rate-limit response headers, verbatim and in order (``RateLimitHeaders``).
    public var headers: [ResponseHeader]
    /// The provider's error code or type, verbatim; for a local denial, the limit that denied (`rpm`, `tpm`,
    /// `concurrency`, `budget_exhausted`, …).
    public var errorType: String?

    public init(
        ts: Double, gateway: String, tenant: String, upstream: String, outcome: Outcome, status: Int? = nil,
        latency: Double? = nil, queueWait: Double? = nil, promptTokens: Int? = nil, completionTokens: Int? = nil,
        estimatedTokens: Int? = nil, taskClass: TaskClass = .interactive, taskID: String? = nil,
        modelVersion: String? = nil, retry: Int = 0, headers: [ResponseHeader] = [], errorType: String? = nil
    ) {
        self.ts = ts
        self.gateway = gateway
        self.tenant = tenant
        self.upstream = upstream
        self.outcome = outcome
        self.status = status
        self.latency = latency
        self.queueWait = queueWait
        self.promptTokens = promptTokens
        self.completionTokens = completionTokens
        self.estimatedTokens = estimatedTokens
        self.taskClass = taskClass
        self.taskID = taskID
        self.modelVersion = modelVersion
        self.retry = retry
        self.headers = headers
        self.errorType = errorType
    }
}

/// One response header field, verbatim.
public struct ResponseHeader: Sendable, Hashable {
    public var name: String
    public var value: String

    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }
}

extension TelemetryRecord {
    /// Appends the event as a JSON object with the SPEC §3 field names; absent optionals are omitted.
    public func write(to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("ts", EpochTime.milliseconds(fromSeconds: ts))
        writer.field("gateway", gateway)
        writer.field("tenant", tenant)
        writer.field("upstream", upstream)
        writer.field("outcome", outcome.rawValue)
        if let status { writer.field("status", status) }
        if let latency { writer.field("latency_ms", Self.milliseconds(latency)) }
        if let queueWait { writer.field("queue_ms", Self.milliseconds(queueWait)) }
        if let promptTokens { writer.field("prompt_tokens", promptTokens) }
        if let completionTokens { writer.field("completion_tokens", completionTokens) }
        if let estimatedTokens { writer.field("estimated_tokens", estimatedTokens) }
        writer.field("task_class", taskClass.rawValue)
        if let taskID { writer.field("task_id", taskID) }
        if let modelVersion { writer.field("model_version", modelVersion) }
        writer.field("retry", retry)
        if !headers.isEmpty {
            writer.key("headers")
            writer.beginObject()
            for header in headers { writer.field(header.name, header.value) }
            writer.endObject()
        }
        if let errorType { writer.field("error_type", errorType) }
        writer.endObject()
    }

    /// Milliseconds rounded to the microsecond, so the JSON stays short.
    private static func milliseconds(_ seconds: Double) -> Double {
        (max(0, seconds) * 1_000_000).rounded() / 1_000
    }

    /// A batch as the JSON array `POST /v1/telemetry` takes with `Content-Type: application/json`.
    public static func encodeBatch(_ events: some Collection<TelemetryRecord>) -> [UInt8] {
        var writer = JSONWriter(capacity: 64 + events.count * 320)
        writer.beginArray()
        for event in events { event.write(to: &writer) }
        writer.endArray()
        return writer.bytes
    }
}
