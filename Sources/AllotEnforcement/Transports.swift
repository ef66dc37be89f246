import AllotProtocol

/// How a gateway fetches its snapshot: over HTTP from `allot serve` (``HTTPSnapshotTransport``), or in-process
/// straight from a publisher (a simulator).
public protocol SnapshotTransport: Sendable {
    /// Fetches the snapshot for `gateway`, whose run of the process is `instance`. With `knownVersion` (sent as
    /// `If-None-Match`) the server answers ``SnapshotFetch/notModified`` while that version is current; with
    /// `wait` > 0 it holds the request up to `wait` seconds for a newer version first (long-poll, SPEC §7).
    func fetch(gateway: String, instance: String, knownVersion: Int64?, wait: Double) async throws(TransportError)
        -> SnapshotFetch

    /// The same fetch, with Allot's clock as its answer gives it (``SnapshotExchange/serverTime``): what
    /// ``SnapshotClient`` calls. By default ``fetch(gateway:instance:knownVersion:wait:)``, with no time.
    func exchange(gateway: String, instance: String, knownVersion: Int64?, wait: Double) async throws(TransportError)
        -> SnapshotExchange

    /// Tells Allot that `gateway` (its run `instance`) is leaving (``Gateway/stop(timeout:)``), so its tenants' slices go to
    /// the other gateways at the next tick and it is not alerted on as silent (`DELETE /v1/gateways/{id}`).
    func leave(gateway: String, instance: String) async throws(TransportError)
}

extension SnapshotTransport {
    public func exchange(
        gateway: String, instance: String, knownVersion: Int64?, wait: Double
    ) async throws(TransportError) -> SnapshotExchange {
        SnapshotExchange(
            try await fetch(gateway: gateway, instance: instance, knownVersion: knownVersion, wait: wait),
            serverTime: nil)
    }

    /// Nothing to tell (an in-process transport whose publisher sees the gateway stop some other way).
    public func leave(gateway: String, instance: String) async throws(TransportError) {}
}

/// A snapshot fetch's answer and when Allot gave it.
public struct SnapshotExchange: Sendable, Equatable {
    public var fetch: SnapshotFetch
    /// Allot's clock when it answered, seconds since the epoch (the `Allot-Server-Time` response field); nil when
    /// the server sends none (an in-process transport, a release before 2026-12).
    public var serverTime: Double?

    public init(_ fetch: SnapshotFetch, serverTime: Double?) {
        self.fetch = fetch
        self.serverTime = serverTime
    }
}

/// The answer to a snapshot fetch.
public enum SnapshotFetch: Sendable, Equatable {
    /// A snapshot (normally newer than the known version; the client checks).
    case snapshot(Snapshot)
    /// The known version is still current (HTTP 304).
    case notModified
}

/// How a gateway delivers telemetry batches: over HTTP to `POST /v1/telemetry` (``HTTPTelemetryTransport``),
/// or in-process (a simulator).
public protocol TelemetryTransport: Sendable {
    /// Delivers one batch; returning means Allot committed it (SPEC §3: a `2xx` means durably stored).
    func send(_ events: [TelemetryRecord]) async throws(TransportError)

    /// Delivers one batch under an idempotency key (`Idempotency-Key`): Allot stores a batch once however often
    /// it is sent with its key, so a batch whose first post got no answer (a timeout) can be resent safely.
    /// ``TelemetryReporter`` sends every attempt of a batch with the same key. The default drops the key and
    /// calls ``send(_:)``.
    func send(_ events: [TelemetryRecord], idempotencyKey: String) async throws(TransportError)
}

extension TelemetryTransport {
    public func send(_ events: [TelemetryRecord], idempotencyKey: String) async throws(TransportError) {
        try await send(events)
    }
}

/// Why a transport call failed, and whether trying again can help.
public struct TransportError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable {
        /// No connection (refused, unresolvable, closed, shut down).
        case unreachable
        /// No answer within the timeout.
        case timeout
        /// The server answered with an unexpected status.
        case status
        /// The answer could not be understood (a snapshot that does not decode).
        case invalidResponse = "invalid_response"
    }

    public var kind: Kind
    public var message: String
    /// The HTTP status, for ``Kind/status``.
    public var status: Int?
    /// The server's `Retry-After`, seconds, when it gave one.
    public var retryAfter: Double?
    /// For a refused telemetry batch: the index of the event at fault, when the server named it.
    public var rejectedIndex: Int?

    public init(
        _ kind: Kind, _ message: String, status: Int? = nil, retryAfter: Double? = nil, rejectedIndex: Int? = nil
    ) {
        self.kind = kind
        self.message = message
        self.status = status
        self.retryAfter = retryAfter
        self.rejectedIndex = rejectedIndex
    }

    /// False when sending the same thing again cannot succeed: the server refused the content (400, 413, 415,
    /// 422). Everything else — network trouble, 5xx, 429, and also 401/403 (an operator can fix the token
    /// while the gateway keeps trying) — is retried with backoff.
    public var isRetryable: Bool {
        guard kind == .status, let status else { return true }
        return ![400, 404, 405, 413, 415, 422].contains(status)
    }

    public var description: String {
        var text = "\(kind.rawValue): \(message)"
        if let status { text += " (HTTP \(status))" }
        return text
    }
}
