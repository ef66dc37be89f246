/// Local checks that keep one malformed event from costing a whole batch.
///
/// Allot accepts a telemetry batch all or nothing (SPEC §3): a single event with a bad tenant id gets the whole
/// batch refused with a `400`. The reporter therefore checks each event when it is recorded, against the bounds
/// the ingest endpoint enforces: an event whose identifiers are unusable is dropped and counted
/// (``TelemetryStatistics/invalid``); optional fields that are out of bounds are left out or clamped instead.
extension TelemetryEvent {
    /// Longest identifier (`gateway`, `tenant`, `upstream`), in bytes.
    static let maxIdentifierBytes = 128
    /// Longest `task_id`, `model_version` or `error_type`, in bytes.
    static let maxLabelBytes = 256
    /// Most headers per event, longest header name and value, in bytes.
    static let maxHeaders = 64
    static let maxHeaderNameBytes = 256
    static let maxHeaderValueBytes = 1_024
    /// Largest token count, duration (seconds) and attempt number the endpoint accepts.
    static let maxTokens = 1_000_000_000
    static let maxDuration = 86_400.0
    static let maxRetry = 1_000

    /// The event as the ingest endpoint accepts it, or nil when an identifier is unusable (a `tenant` outside
    /// 1–128 characters of `[A-Za-z0-9._:-]`, a `gateway` outside `[A-Za-z0-9._:/-]`, an `upstream` outside
    /// `[A-Za-z0-9._:/@+-]`, or a `ts` that is not finite).
    public func validated() -> TelemetryEvent? {
        guard ts.isFinite,
            Self.isIdentifier(tenant, extra: "._:-"),
            Self.isIdentifier(gateway, extra: "._:-/"),
            Self.isIdentifier(upstream, extra: "._:-/@+")
        else { return nil }
        var event = self
        if let value = status, !(100...599).contains(value) { event.status = nil }
        event.latency = Self.duration(latency)
        event.queueWait = Self.duration(queueWait)
        event.promptTokens = Self.tokens(promptTokens)
        event.completionTokens = Self.tokens(completionTokens)
        event.estimatedTokens = Self.tokens(estimatedTokens)
        event.retry = min(max(retry, 0), Self.maxRetry)
        event.taskID = Self.label(taskID)
        event.modelVersion = Self.label(modelVersion)
        event.errorType = Self.label(errorType)
        if !headers.isEmpty {
            event.headers = Array(
                headers.lazy.filter { header in
                    !header.name.isEmpty && header.name.utf8.count <= Self.maxHeaderNameBytes
                        && header.value.utf8.count <= Self.maxHeaderValueBytes
                        && header.name.utf8.allSatisfy(Self.isTokenByte)
                        && !header.value.utf8.contains(where: Self.isControl)
                }
                .prefix(Self.maxHeaders))
        }
        return event
    }

    static func isIdentifier(_ text: String, extra: StaticString) -> Bool {
        let bytes = text.utf8
        guard !bytes.isEmpty, bytes.count <= maxIdentifierBytes else { return false }
        return bytes.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"):
                return true
            default:
                return extra.withUTF8Buffer { $0.contains(byte) }
            }
        }
    }

    private static func duration(_ seconds: Double?) -> Double? {
        guard let seconds, seconds.isFinite else { return nil }
        return min(max(seconds, 0), maxDuration)
    }

    private static func tokens(_ count: Int?) -> Int? {
        count.map { min(max($0, 0), maxTokens) }
    }

    private static func label(_ text: String?) -> String? {
        guard let text, !text.isEmpty, text.utf8.count <= maxLabelBytes, !text.utf8.contains(where: isControl)
        else { return nil }
        return text
    }

    private static func isControl(_ byte: UInt8) -> Bool { byte < 0x20 || byte == 0x7F }

    /// RFC 9110 token characters, the only ones a header name may contain.
    private static func isTokenByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        default:
            return "!#$%&'*+-.^_`|~".utf8.contains(byte)
        }
    }
}

/// Picks the rate-limit headers out of an upstream response, for telemetry's `headers` (SPEC §3: "the upstream's
/// rate-limit response headers, verbatim"; Allot parses them server-side with `AllotSignals`).
///
/// The selection is by name prefix, so that a header family `AllotSignals` learns later (a new
/// `anthropic-ratelimit-…` dimension) is forwarded without a gateway upgrade: `x-ratelimit-*`,
/// `anthropic-ratelimit-*`, `retry-after`, `retry-after-ms`, `azure-openai-*`, and the Azure markers that tell
/// the header family (`apim-request-id`, `x-ms-region`, `azureml-model-session`). Everything else a response
/// carries (cookies, request ids, content headers) stays out of telemetry.
public enum RateLimitHeaders {
    static let prefixes = ["x-ratelimit-", "anthropic-ratelimit-", "azure-openai-"]
    static let exactNames: Set<String> = [
        "retry-after", "retry-after-ms", "apim-request-id", "x-ms-region", "azureml-model-session",
    ]

    /// Whether `name` (any case) is a rate-limit header.
    public static func isRateLimitHeader(_ name: String) -> Bool {
        let lower = name.lowercased()
        return exactNames.contains(lower) || prefixes.contains { lower.hasPrefix($0) }
    }

    /// The rate-limit headers among `fields`, verbatim and in order.
    public static func select(from fields: some Sequence<(String, String)>) -> [ResponseHeader] {
        fields.compactMap { name, value in
            isRateLimitHeader(name) ? ResponseHeader(name: name, value: value) : nil
        }
    }
}
