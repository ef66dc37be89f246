import AllotJSON

/// A provider's error response body, as far as the signals care: Google puts its rate-limit facts there
/// (SPEC §4), and every provider names its error type there.
public enum ProviderErrorBody: Sendable, Hashable {
    /// A body that parsed as JSON.
    case json(JSON)
    /// Anything else (HTML from a proxy, plain text), kept for message matching.
    case text(String)

    /// Parses `bytes` as JSON when they are JSON, else keeps them as (lossily decoded) text. Never fails.
    public init(bytes: some Collection<UInt8>) {
        if let json = try? JSON.parse(bytes) {
            self = .json(json)
        } else {
            self = .text(String(decoding: Array(bytes), as: UTF8.self))
        }
    }

    /// Parses `text` as JSON when it is JSON, else keeps it as text.
    public init(text: String) {
        if let json = try? JSON.parse(text) {
            self = .json(json)
        } else {
            self = .text(text)
        }
    }

    /// The provider's error object: `{"error": {...}}` (OpenAI, Anthropic, Azure, Google), or the first element
    /// of a JSON array of such objects (Google's streaming and Vertex endpoints wrap errors in an array).
    var errorObject: JSON? {
        guard case .json(let json) = self else { return nil }
        let root = json.arrayValue?.first ?? json
        if let error = root["error"], error.objectValue != nil { return error }
        return nil
    }

    /// The error codes and types the body names, in order of specificity: `error.code` (when a string; OpenAI's
    /// `insufficient_quota`, `rate_limit_exceeded`), `error.details.error_code` (Anthropic's
    /// `enforced_spend_limit_reached` under a `rate_limit_error`), `error.type` (Anthropic's
    /// `overloaded_error`), `error.status` (Google's `RESOURCE_EXHAUSTED`), then top-level `code`/`type` strings
    /// (OpenAI-compatible servers that do not nest).
    public var errorCodes: [String] {
        guard case .json(let json) = self else { return [] }
        var codes: [String] = []
        let root = json.arrayValue?.first ?? json
        if let error = root["error"], error.objectValue != nil {
            if let code = error["code"]?.stringValue { codes.append(code) }
            if let details = error["details"], details.objectValue != nil {
                if let code = details["error_code"]?.stringValue { codes.append(code) }
                if let code = details["code"]?.stringValue { codes.append(code) }
            }
            if let type = error["type"]?.stringValue { codes.append(type) }
            if let status = error["status"]?.stringValue { codes.append(status) }
        } else if root.objectValue != nil {
            if let code = root["code"]?.stringValue { codes.append(code) }
            if let type = root["type"]?.stringValue { codes.append(type) }
        }
        return codes
    }

    /// The human-readable message: `error.message`, a top-level `message`, or the whole text body.
    public var message: String? {
        switch self {
        case .text(let text):
            return text
        case .json(let json):
            let root = json.arrayValue?.first ?? json
            return root["error"]?["message"]?.stringValue ?? root["message"]?.stringValue
        }
    }
}

extension ProviderErrorBody {
    /// Google's rate-limit facts from `error.details`: `RetryInfo.retryDelay` and `QuotaFailure.violations`.
    struct GoogleDetails {
        var isGoogle = false
        var retryDelay: Double?
        var violations: [QuotaViolation] = []
        var unparseable: [String] = []
    }

    /// Reads Google's `google.rpc` details. `isGoogle` is set when the body has Google's error shape: a
    /// `details` array of typed `google.rpc.*` messages, or a numeric `code` with a canonical `status` name.
    func googleDetails() -> GoogleDetails {
        var result = GoogleDetails()
        guard let error = errorObject else { return result }
        if error["code"]?.int64Value != nil, error["status"]?.stringValue != nil { result.isGoogle = true }
        guard let details = error["details"]?.arrayValue else { return result }
        for detail in details {
            guard let type = detail["@type"]?.stringValue, type.contains("google.rpc.") else { continue }
            result.isGoogle = true
            if type.hasSuffix("google.rpc.RetryInfo") {
                guard let delay = detail["retryDelay"] else { continue }
                if let text = delay.stringValue, let seconds = GoDuration.parse(text) {
                    result.retryDelay = seconds
                } else if let seconds = delay["seconds"]?.doubleValue, seconds >= 0 {
                    // The protobuf object form {"seconds": 22, "nanos": 0} some client libraries re-serialise.
                    result.retryDelay = seconds + (delay["nanos"]?.doubleValue ?? 0) / 1e9
                } else {
                    result.unparseable.append("retryDelay")
                }
            } else if type.hasSuffix("google.rpc.QuotaFailure") {
                for violation in detail["violations"]?.arrayValue ?? [] {
                    result.violations.append(Self.violation(violation, unparseable: &result.unparseable))
                }
            }
        }
        return result
    }

    private static let tokenMarker = Array("token".utf8)
    private static let windowMarkers: [([UInt8], Double)] = [
        (Array("persecond".utf8), 1), (Array("perminute".utf8), 60), (Array("perhour".utf8), 3_600),
        (Array("perday".utf8), 86_400),
    ]

    private static func violation(_ json: JSON, unparseable: inout [String]) -> QuotaViolation {
        let metric = json["quotaMetric"]?.stringValue
        let id = json["quotaId"]?.stringValue
        var value: Int64?
        if let raw = json["quotaValue"] {
            if let text = raw.stringValue {
                value = ByteScan.withBytes(text) { ByteScan.integer(ByteScan.trimmed($0)) }
            } else if let number = raw.int64Value, number >= 0 {
                value = number
            }
            if value == nil { unparseable.append("quotaValue") }
        }
        let mentionsTokens = [metric, id].contains { name in
            name.map { ByteScan.withBytes($0) { ByteScan.containsLowercase($0, tokenMarker) } } ?? false
        }
        var window: Double?
        if let id {
            window = ByteScan.withBytes(id) { bytes in
                windowMarkers.first { ByteScan.containsLowercase(bytes, $0.0) }?.1
            }
        }
        return QuotaViolation(
            metric: metric, id: id, value: value, dimension: mentionsTokens ? .tokens : .requests, window: window)
    }
}
