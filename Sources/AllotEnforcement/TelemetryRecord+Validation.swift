/// Local checks that keep one malformed event from costing a whole batch.
///
/// Allot accepts a telemetry batch all or nothing (SPEC §3): a single event with a bad tenant id gets the whole
/// batch refused with a `400`. The reporter therefore checks each event when it is recorded, against the bounds
/// the ingest endpoint enforces: an event whose identifiers are unusable is dropped and counted
/// (``TelemetryStatistics/invalid``); optional fields that are out of bounds are left out or clamped instead.
extension TelemetryRecord {
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
    public func validated() -> TelemetryRecord? {
        guard ts.isFinite,
            Self.isIdentifier(tenant, Self.tenantBytes),
            Self.isIdentifier(gateway, Self.gatewayBytes),
            Self.isIdentifier(upstream, Self.upstreamBytes)
        else { return nil }
        var event = self
        if let value = status, !(100...599).contains(value) { event.status = nil }
        event.latency = Self.duration(latency)
        event.queueWait = Self.duration(queueWait)
        event.promptTokens = Self.tokens(promptTokens)
        event.completionTokens = Self.tokens(completionTokens)
        event.estimatedTokens = Self.tokens(estimatedTokens)
        event.retry = min(max(retry, 0), Self.maxRetry)
        if taskID != nil { event.taskID = Self.label(taskID) }
        if modelVersion != nil { event.modelVersion = Self.label(modelVersion) }
        if errorType != nil { event.errorType = Self.label(errorType) }
        if !headers.isEmpty && (headers.count > Self.maxHeaders || !headers.allSatisfy(Self.isValidHeader)) {
            event.headers = Array(headers.lazy.filter(Self.isValidHeader).prefix(Self.maxHeaders))
        }
        return event
    }

    /// Allowed bytes per identifier, one table lookup per byte: tenant `[A-Za-z0-9._:-]` (SPEC §3), gateway
    /// also `/`, upstream also `/@+`.
    static let tenantBytes = byteTable(extra: "._:-")
    static let gatewayBytes = byteTable(extra: "._:-/")
    static let upstreamBytes = byteTable(extra: "._:-/@+")
    /// RFC 9110 token characters, the only ones a header name may contain.
    static let tokenBytes = byteTable(extra: "!#$%&'*+-.^_`|~")

    private static func byteTable(extra: String) -> [Bool] {
        var allowed = [Bool](repeating: false, count: 256)
        for byte in UInt8(ascii: "a")...UInt8(ascii: "z") { allowed[Int(byte)] = true }
        for byte in UInt8(ascii: "A")...UInt8(ascii: "Z") { allowed[Int(byte)] = true }
        for byte in UInt8(ascii: "0")...UInt8(ascii: "9") { allowed[Int(byte)] = true }
        for byte in extra.utf8 { allowed[Int(byte)] = true }
        return allowed
    }

    static func isIdentifier(_ text: String, _ allowed: [Bool]) -> Bool {
        var text = text
        return text.withUTF8 { bytes in
            !bytes.isEmpty && bytes.count <= maxIdentifierBytes && bytes.allSatisfy { allowed[Int($0)] }
        }
    }

    private static func isValidHeader(_ header: ResponseHeader) -> Bool {
        var name = header.name
        var value = header.value
        let nameOK = name.withUTF8 { bytes in
            !bytes.isEmpty && bytes.count <= maxHeaderNameBytes && bytes.allSatisfy { tokenBytes[Int($0)] }
        }
        return nameOK
            && value.withUTF8 { bytes in bytes.count <= maxHeaderValueBytes && !bytes.contains(where: isControl) }
    }

    private static func duration(_ seconds: Double?) -> Double? {
        guard let seconds, seconds.isFinite else { return nil }
        return min(max(seconds, 0), maxDuration)
    }

    private static func tokens(_ count: Int?) -> Int? {
        count.map { min(max($0, 0), maxTokens) }
    }

    private static func label(_ text: String?) -> String? {
        guard var text else { return nil }
        let valid = text.withUTF8 { bytes in
            !bytes.isEmpty && bytes.count <= maxLabelBytes && !bytes.contains(where: isControl)
        }
        return valid ? text : nil
    }

    private static func isControl(_ byte: UInt8) -> Bool { byte < 0x20 || byte == 0x7F }
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
