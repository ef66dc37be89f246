/// The bounds a telemetry batch is validated against (SPEC section 3). Everything a gateway sends
/// is bounded so that one hostile or buggy batch costs a bounded amount of memory, time and disk.
///
/// The defaults are generous for real gateways (an LLM call never uses a billion tokens, nor takes
/// a day) and tight enough to catch unit mistakes, such as epoch seconds sent as milliseconds.
public struct TelemetryValidation: Sendable, Equatable {
    /// Most events in one batch; more → 413 `too_many_events`. Gateways send batches of ~1,000.
    public var maxEvents: Int
    /// How far in the future `ts` may be, in seconds, against the server's `now`: gateway clocks
    /// drift, but an event from next week is a bug and would sit at the head of every time range.
    public var maxFutureSkew: Double
    /// The earliest acceptable `ts`, in seconds since the epoch (2000-01-01T00:00:00Z by default).
    /// Catches `ts` sent in seconds where milliseconds are expected (which lands in January 1970).
    public var earliestTimestamp: Double
    /// Bound for `prompt_tokens`, `completion_tokens` and `estimated_tokens`.
    public var maxTokens: Int64
    /// Bound for `latency_ms` and `queue_ms` (one day by default).
    public var maxDurationMs: Double
    /// Bound for `retry`.
    public var maxRetry: Int
    /// Most members in one event object, known or not: unknown members are ignored, but a
    /// hostile event with thousands of them must still cost bounded work.
    public var maxMembers: Int
    /// Most entries in one event's `headers` object.
    public var maxHeaders: Int
    /// Longest header name, in bytes.
    public var maxHeaderNameBytes: Int
    /// Longest header value, in bytes.
    public var maxHeaderValueBytes: Int
    /// Longest `error_body` as sent (JSON text of the object, or the string), in bytes.
    public var maxErrorBodyBytes: Int
    /// Longest `task_id`, in bytes.
    public var maxTaskIDBytes: Int
    /// Longest `model_version` and `error_type`, in bytes.
    public var maxLabelBytes: Int
    /// Nesting limit of the JSON text (the event's own object and `error_body` sit inside it).
    public var maxDepth: Int
    /// How many distinct ignored member names a batch reports back (all are counted).
    public var maxReportedIgnoredFields: Int

    /// - Parameters:
    ///   - maxEvents: Events per batch. Default 10,000.
    ///   - maxFutureSkew: Seconds `ts` may be ahead of `now`. Default 300.
    ///   - earliestTimestamp: Earliest `ts`. Default 2000-01-01T00:00:00Z.
    ///   - maxTokens: Token count bound. Default 1,000,000,000.
    ///   - maxDurationMs: Latency/queue bound. Default 86,400,000 (one day).
    ///   - maxRetry: Attempt number bound. Default 1,000.
    ///   - maxMembers: Members per event object. Default 64.
    ///   - maxHeaders: Headers per event. Default 64.
    ///   - maxHeaderNameBytes: Default 256.
    ///   - maxHeaderValueBytes: Default 1,024.
    ///   - maxErrorBodyBytes: Default 16,384.
    ///   - maxTaskIDBytes: Default 256.
    ///   - maxLabelBytes: Default 256.
    ///   - maxDepth: Default 16.
    ///   - maxReportedIgnoredFields: Default 16.
    public init(
        maxEvents: Int = 10_000,
        maxFutureSkew: Double = 300,
        earliestTimestamp: Double = 946_684_800,
        maxTokens: Int64 = 1_000_000_000,
        maxDurationMs: Double = 86_400_000,
        maxRetry: Int = 1_000,
        maxMembers: Int = 64,
        maxHeaders: Int = 64,
        maxHeaderNameBytes: Int = 256,
        maxHeaderValueBytes: Int = 1_024,
        maxErrorBodyBytes: Int = 16_384,
        maxTaskIDBytes: Int = 256,
        maxLabelBytes: Int = 256,
        maxDepth: Int = 16,
        maxReportedIgnoredFields: Int = 16
    ) {
        self.maxEvents = maxEvents
        self.maxFutureSkew = maxFutureSkew
        self.earliestTimestamp = earliestTimestamp
        self.maxTokens = maxTokens
        self.maxDurationMs = maxDurationMs
        self.maxRetry = maxRetry
        self.maxMembers = maxMembers
        self.maxHeaders = maxHeaders
        self.maxHeaderNameBytes = maxHeaderNameBytes
        self.maxHeaderValueBytes = maxHeaderValueBytes
        self.maxErrorBodyBytes = maxErrorBodyBytes
        self.maxTaskIDBytes = maxTaskIDBytes
        self.maxLabelBytes = maxLabelBytes
        self.maxDepth = maxDepth
        self.maxReportedIgnoredFields = maxReportedIgnoredFields
    }

    /// Longest `tenant`, `gateway` and `upstream` identifier (SPEC section 3 fixes 128 for tenants).
    public static let maxIdentifierLength = 128
}

/// Why a telemetry batch was refused. Nothing of a refused batch is stored.
///
/// Renders at the HTTP edge as `{"error":{"code","message","field"}}` with ``status``.
public struct TelemetryRejection: Error, Sendable, Equatable, CustomStringConvertible {
    /// A stable machine-readable code: `invalid_json`, `invalid_event`, `empty_batch`,
    /// `too_many_events`, `unsupported_media_type`, `gateway_out_of_scope`.
    public var code: String
    /// A sentence for humans, naming the event index and field when there is one, e.g.
    /// `event 3: field 'tenant': must be 1-128 characters of [A-Za-z0-9._:-]`.
    public var message: String
    /// The JSON path at fault, e.g. `[3].tenant` or `[0].headers.retry-after`; nil for the whole body.
    public var field: String?
    /// The 0-based index of the offending event, when one is at fault.
    public var eventIndex: Int?
    /// The HTTP status: 400 for invalid bodies, 413 for too many events, 415 for a content type
    /// other than JSON or NDJSON, 403 for an event of a gateway the sender's token may not speak for.
    public var status: Int

    public init(code: String, message: String, field: String? = nil, eventIndex: Int? = nil, status: Int = 400) {
        self.code = code
        self.message = message
        self.field = field
        self.eventIndex = eventIndex
        self.status = status
    }

    public var description: String { "\(status) \(code): \(message)" }

    /// An invalid field of event `index`.
    static func invalidField(_ index: Int, _ name: String, _ reason: String) -> TelemetryRejection {
        TelemetryRejection(
            code: "invalid_event", message: "event \(index): field '\(name)': \(reason)", field: "[\(index)].\(name)",
            eventIndex: index)
    }
}
