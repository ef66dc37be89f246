import AllotCrypto
import AllotHTTP
import AllotJSON
import AllotMetrics
import AllotStore
import AllotTime

/// `POST /v1/telemetry` (SPEC sections 3 and 9): turns the request into a ``AllotStore/TelemetryStore``
/// ingest and the outcome into the response.
///
/// | outcome | status | body |
/// |---|---|---|
/// | committed | 200 | `{"stored":N,"first_id":…,"last_id":…}`, plus `registered_tenants`, `ignored_fields`, `unparseable_headers` when non-empty |
/// | a retry of a batch its `Idempotency-Key` stored before | 200 | the first answer's `stored`, `first_id`, `last_id`, and `"duplicate":true`; nothing stored |
/// | an `Idempotency-Key` that is empty, longer than 128, not `[A-Za-z0-9._:-]`, or sent twice | 400 | `invalid_idempotency_key`, field `Idempotency-Key` |
/// | an `Idempotency-Key` already used for a different body | 422 | `idempotency_key_reused`, field `Idempotency-Key` |
/// | content type other than JSON / NDJSON, or a `Content-Encoding` other than `identity` | 415 | `unsupported_media_type` |
/// | body larger than ``maxBodyBytes`` (the server's own body limit applies first) | 413 | `body_too_large` |
/// | more events than the decoder allows | 413 | `too_many_events` |
/// | invalid JSON, invalid event, empty batch | 400 | `invalid_json` / `invalid_event` / `empty_batch`, with `field` such as `[3].tenant` |
/// | an event of a gateway outside the token's `gateway_scope` | 403 | `gateway_out_of_scope`, `field` `[1].gateway` |
/// | the database failed (busy, full, gone) | 503 + `Retry-After: 1` | `database_unavailable` |
///
/// 200 rather than 202: 202 would say "accepted for later processing", while this response is only
/// sent after the batch's transaction has committed (durably, with `synchronous=FULL`). A gateway
/// may drop its copy of the batch on 200, must fix the batch on 4xx (resending it cannot help), and
/// should retry the same batch on 503 (nothing of it was stored, so a retry cannot duplicate). A gateway
/// that got no answer at all (a timeout, a reset connection) cannot know whether the batch committed: sent
/// with an `Idempotency-Key` (``AllotStore/TelemetryBatchKey``), the same batch can be resent safely.
///
/// Authentication, metrics and the route's registration are the server's; this is the handler.
public struct TelemetryRoute: Sendable {
    public let store: TelemetryStore
    public var decoder: TelemetryDecoder
    /// The tier new tenants are registered with: the current policy's default tier, read per
    /// request because policies hot-reload.
    public var defaultTier: @Sendable () -> String
    /// `now` for validation (future skew) and gateways' last contact.
    public var clock: any AllotClock
    /// A body limit of the route's own, below the server's (nil: the server's limit only).
    public var maxBodyBytes: Int?
    /// `allot_telemetry_batches_total{result}` (`stored`, `duplicate`, or the refusal's code) and
    /// `allot_telemetry_events_stored_total`, when a registry was given.
    private let batches: CounterFamily?
    private let eventsStored: Counter?

    /// - Parameters:
    ///   - store: Where batches are stored.
    ///   - decoder: Validation bounds. Default ``AllotStore/TelemetryDecoder/init(validation:)``.
    ///   - defaultTier: The policy's default tier, read per request.
    ///   - clock: Default ``AllotTime/SystemClock``.
    ///   - maxBodyBytes: Route-specific body limit. Default nil.
    ///   - metrics: Registers the route's counters when given.
    public init(
        store: TelemetryStore, decoder: TelemetryDecoder = TelemetryDecoder(),
        defaultTier: @escaping @Sendable () -> String, clock: any AllotClock = SystemClock(), maxBodyBytes: Int? = nil,
        metrics: MetricsRegistry? = nil
    ) {
        batches = try? metrics?.counter(
            "allot_telemetry_batches_total",
            help: "Telemetry batches answered, by result: stored, duplicate (its Idempotency-Key had stored it), or "
                + "the refusal's code (invalid_event, idempotency_key_reused, database_unavailable, ...).",
            labelNames: ["result"])
        eventsStored = try? metrics?.counter(
            "allot_telemetry_events_stored_total", help: "Telemetry events stored (duplicates not counted again).")
        self.store = store
        self.decoder = decoder
        self.defaultTier = defaultTier
        self.clock = clock
        self.maxBodyBytes = maxBodyBytes
    }

    /// The route's path.
    public static let path = "/v1/telemetry"

    /// Adds `POST /v1/telemetry` to `router`.
    public func register(in router: inout Router) {
        router.post(Self.path) { request in await respond(to: request) }
    }

    /// Handles one request; never throws (every failure is a JSON error response). `gatewayScope`: the gateway
    /// ids the sender's token may speak for (nil: any); an event of another gateway is `403 gateway_out_of_scope`.
    public func respond(to request: HTTPRequest, gatewayScope: String? = nil) async -> HTTPResponse {
        let format: TelemetryFormat
        let key: String?
        do {
            format = try TelemetryFormat(contentType: request.headers["Content-Type"])
            try TelemetryFormat.checkContentEncoding(request.headers.contentEncoding)
            key = try TelemetryBatchKey.key(fromHeaderValues: request.headers.values(for: TelemetryBatchKey.header))
        } catch {
            await store.countRejected(code: error.code)
            batches?.labels(error.code).increment()
            return Self.errorResponse(
                status: error.status, code: error.code, message: error.message, field: error.field)
        }
        if let maxBodyBytes, request.body.count > maxBodyBytes {
            await store.countRejected(code: "body_too_large")
            batches?.labels("body_too_large").increment()
            return Self.errorResponse(
                status: 413, code: "body_too_large",
                message: "request body exceeds the limit of \(maxBodyBytes) bytes", field: "Content-Length")
        }
        do {
            let result = try await store.ingest(
                body: request.body, format: format, decoder: decoder, defaultTier: defaultTier(), now: clock.now,
                gatewayScope: gatewayScope,
                key: key.map { TelemetryBatchKey(key: $0, bodySHA256: SHA256.hash(request.body).hex) })
            batches?.labels(result.duplicate ? "duplicate" : "stored").increment()
            if !result.duplicate { eventsStored?.increment(by: result.stored) }
            return .json(bytes: Self.encode(result))
        } catch {
            batches?.labels(error.code).increment()
            var response = Self.errorResponse(
                status: error.status, code: error.code, message: error.message, field: error.field)
            if case .database = error { response.headers.replaceOrAdd(name: "Retry-After", value: "1") }
            return response
        }
    }

    static func errorResponse(status: Int, code: String, message: String, field: String?) -> HTTPResponse {
        HTTPError(HTTPStatus(code: status), code: code, message: message, field: field).response
    }

    static func encode(_ result: IngestResult) -> [UInt8] {
        var writer = JSONWriter(capacity: 128)
        writer.beginObject()
        writer.key("stored")
        writer.value(result.stored)
        writer.key("first_id")
        writer.value(result.firstID)
        writer.key("last_id")
        writer.value(result.lastID)
        if !result.registeredTenants.isEmpty {
            writer.key("registered_tenants")
            writer.beginArray()
            for tenant in result.registeredTenants { writer.value(tenant) }
            writer.endArray()
        }
        if !result.ignoredFields.isEmpty {
            writer.key("ignored_fields")
            writer.beginArray()
            for field in result.ignoredFields { writer.value(field) }
            writer.endArray()
        }
        if result.unparseableHeaders > 0 {
            writer.key("unparseable_headers")
            writer.value(result.unparseableHeaders)
        }
        if result.duplicate {
            writer.key("duplicate")
            writer.value(true)
        }
        writer.endObject()
        return writer.bytes
    }
}
