import AllotTime

/// A gateway's idempotency key for one telemetry batch (the `Idempotency-Key` request header of
/// `POST /v1/telemetry`) with the digest of the body it came with.
///
/// A gateway that times out waiting for an answer cannot know whether its batch committed; resending it
/// without a key stores every event twice. With a key, the store writes the key's row in the transaction
/// that stores the batch (`migrations/0007_telemetry_batch_keys.sql`), so a resend with the same key and
/// the same body is answered with the first attempt's result (`"duplicate": true`) and stores nothing,
/// and a different body under a key already used is refused (`422 idempotency_key_reused`): a key names
/// one batch. Keys are remembered as long as raw events are kept (24 hours by default).
public struct TelemetryBatchKey: Sendable, Equatable {
    /// The key as the gateway sent it (without the quotes of the structured-field form).
    public var key: String
    /// SHA-256 of the request body, lowercase hex.
    public var bodySHA256: String

    public init(key: String, bodySHA256: String) {
        self.key = key
        self.bodySHA256 = bodySHA256
    }

    /// The header's name.
    public static let header = "Idempotency-Key"

    /// Most characters of a key.
    public static let maxLength = 128

    /// The key of a request's `Idempotency-Key` field lines (`values`, in order): nil when there are none.
    ///
    /// A key is 1–128 characters of `[A-Za-z0-9._:-]` (a UUID, a ULID, a random prefix per process and a counter);
    /// the quoted form of the IETF draft's structured-field string (`"…"`) is accepted and the quotes dropped.
    ///
    /// - Throws: ``TelemetryRejection`` `400 invalid_idempotency_key`, field `Idempotency-Key`, for an empty,
    ///   too long or ill-formed key, or for more than one key (several field lines, or a comma-separated list).
    public static func key(fromHeaderValues values: [String]) throws(TelemetryRejection) -> String? {
        guard let raw = values.first else { return nil }
        // Field lines may also be combined into one, comma-separated (RFC 9110 5.3): several keys either way.
        let count = values.count > 1 ? values.count : raw.split(separator: ",", omittingEmptySubsequences: false).count
        guard count == 1 else { throw rejection("Idempotency-Key was sent \(count) times: send one key per batch") }
        var value = Substring(raw)
        while let first = value.first, first == " " || first == "\t" { value.removeFirst() }
        while let last = value.last, last == " " || last == "\t" { value.removeLast() }
        if value.count >= 2, value.first == "\"", value.last == "\"" { value = value.dropFirst().dropLast() }
        guard !value.isEmpty else { throw rejection("Idempotency-Key is empty") }
        guard value.utf8.count <= maxLength else {
            throw rejection("Idempotency-Key is \(value.utf8.count) characters long: at most \(maxLength)")
        }
        // The characters of a tenant id (SPEC 3), shared with the decoder.
        guard value.utf8.allSatisfy(IdentifierCharset.tenant.allows) else {
            throw rejection("Idempotency-Key '\(value)' must be characters of [A-Za-z0-9._:-] (a UUID, a ULID)")
        }
        return String(value)
    }

    private static func rejection(_ message: String) -> TelemetryRejection {
        TelemetryRejection(code: "invalid_idempotency_key", message: message, field: header)
    }
}

/// A key already used for a different batch (``TelemetryBatchKey``): nothing of the new batch was stored.
public struct TelemetryKeyConflict: Sendable, Equatable {
    public var key: String
    /// When the key's batch arrived (ms since the epoch, the server's clock; it committed moments later) and how
    /// many events it stored.
    public var committedMs: Int64
    public var stored: Int

    /// The refusal: 422 `idempotency_key_reused`, field `Idempotency-Key`.
    public var rejection: TelemetryRejection {
        let events = stored == 1 ? "1 event" : "\(stored) events"
        return TelemetryRejection(
            code: "idempotency_key_reused",
            message: "Idempotency-Key '\(key)' was used for a different batch (\(events) stored at "
                + "\(RFC3339.format(Double(committedMs) / 1_000))): a retry must resend the same body; a new batch "
                + "needs a new key",
            field: TelemetryBatchKey.header, status: 422)
    }
}
