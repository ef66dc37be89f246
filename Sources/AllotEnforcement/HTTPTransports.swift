import AllotHTTP
import AllotJSON
import AllotProtocol
import AllotTime
import Foundation

/// Fetches snapshots from `allot serve` (SPEC §7): `GET /v1/snapshot?gateway=ID&instance=RUN&wait=S` with
/// `If-None-Match: "<version>"` and `Authorization: Bearer <token>`; `200` carries a snapshot, `304` means the
/// version sent is still current.
///
/// The version is sent as a quoted entity tag (`If-None-Match: "42"`), as the `ETag` is; Allot reads a bare number
/// too. The response's `ETag` header is not needed (the version is in the body). The request timeout is the long-poll
/// wait plus ``timeoutMargin``, so a held poll is never cut short by the client.
public struct HTTPSnapshotTransport: SnapshotTransport {
    /// `http://host:port`, without a trailing slash.
    public let baseURL: String
    public let token: String?
    public let client: HTTPClient
    /// Seconds added to the long-poll wait for the request timeout. Default 10.
    public let timeoutMargin: Double
    /// The leave's request timeout, seconds (at most ``timeoutMargin``): short, so that a stop is not held by an
    /// Allot that does not answer. Default 2.
    public let leaveTimeout: Double
    /// The gateway's clock, sent with every poll as `Allot-Gateway-Time` (Allot shows and alerts on how far it is from
    /// its own).
    public let clock: any AllotClock

    /// - Parameters:
    ///   - baseURL: Allot's address, e.g. `http://127.0.0.1:8080`.
    ///   - token: a `gateway` role token (nil when Allot runs with `--dev`).
    ///   - client: the HTTP client (its connection pool is shared with the telemetry transport).
    ///   - timeoutMargin: seconds added to the wait for the request timeout.
    ///   - leaveTimeout: the leave's request timeout.
    ///   - clock: the gateway's clock, sent with each poll.
    public init(
        baseURL: String, token: String?, client: HTTPClient, timeoutMargin: Double = 10, leaveTimeout: Double = 2,
        clock: any AllotClock = SystemClock()
    ) {
        self.baseURL = HTTPTransportSupport.trimmed(baseURL)
        self.token = token
        self.client = client
        self.timeoutMargin = timeoutMargin
        self.leaveTimeout = leaveTimeout
        self.clock = clock
    }

    public func fetch(gateway: String, instance: String, knownVersion: Int64?, wait: Double)
        async throws(TransportError) -> SnapshotFetch
    {
        try await exchange(gateway: gateway, instance: instance, knownVersion: knownVersion, wait: wait).fetch
    }

    /// The fetch, with Allot's time from the answer's `Allot-Server-Time` field (RFC 3339; nil when absent or
    /// unreadable).
    public func exchange(gateway: String, instance: String, knownVersion: Int64?, wait: Double)
        async throws(TransportError) -> SnapshotExchange
    {
        var url = baseURL + "/v1/snapshot?gateway=" + HTTPTransportSupport.percentEncoded(gateway)
        url += "&instance=" + HTTPTransportSupport.percentEncoded(instance)
        if wait > 0 { url += "&wait=" + HTTPTransportSupport.seconds(wait) }
        var headers: HTTPHeaders = ["Accept": "application/json"]
        // A quoted entity tag, as the ETag is sent (RFC 9110); Allot reads a bare number too, a strict proxy may not.
        if let knownVersion { headers.add(name: "If-None-Match", value: "\"\(knownVersion)\"") }
        if let token { headers.add(name: "Authorization", value: "Bearer \(token)") }
        headers.add(name: Snapshot.gatewayTimeField, value: RFC3339.format(clock.now))
        let client = self.client
        let timeout = Duration.seconds(max(0, wait) + timeoutMargin)
        let response = try await HTTPTransportSupport.abandonOnCancel {
            [url, headers] () async throws(HTTPClientError) -> HTTPClientResponse in
            try await client.get(url, headers: headers, timeout: timeout)
        }
        let serverTime = response.headers[Snapshot.serverTimeField].flatMap { RFC3339.parse($0) }
        switch response.status.code {
        case 200:
            do {
                return SnapshotExchange(.snapshot(try Snapshot(decoding: response.body)), serverTime: serverTime)
            } catch {
                throw TransportError(.invalidResponse, "the snapshot does not decode: \(error)", status: 200)
            }
        case 304:
            return SnapshotExchange(.notModified, serverTime: serverTime)
        default:
            throw HTTPTransportSupport.statusError(response)
        }
    }

    /// `DELETE /v1/gateways/{id}?instance=RUN`, with a short timeout (at most 2 s: it runs as the gateway stops,
    /// within a termination grace period). A 404 (Allot never heard from it, or already forgot it) and a 409 (a
    /// replacement polls under that id now, and stays) are success: this instance is not known either way. A
    /// server older than `instance=` refuses it (`400`, `field: instance`): the leave is sent again without it.
    public func leave(gateway: String, instance: String) async throws(TransportError) {
        let url = baseURL + "/v1/gateways/" + HTTPTransportSupport.percentEncoded(gateway)
        var response = try await delete(url + "?instance=" + HTTPTransportSupport.percentEncoded(instance))
        if response.status.code == 400, (try? JSON.parse(response.body))?["error"]?["field"] == "instance" {
            response = try await delete(url)
        }
        guard [200, 404, 409].contains(response.status.code) else {
            throw HTTPTransportSupport.statusError(response)
        }
    }

    private func delete(_ url: String) async throws(TransportError) -> HTTPClientResponse {
        var headers: HTTPHeaders = ["Accept": "application/json"]
        if let token { headers.add(name: "Authorization", value: "Bearer \(token)") }
        let client = self.client
        let timeout = Duration.seconds(min(timeoutMargin, leaveTimeout))
        return try await HTTPTransportSupport.abandonOnCancel {
            [url, headers] () async throws(HTTPClientError) -> HTTPClientResponse in
            try await client.execute(HTTPClientRequest(method: .delete, url: url, headers: headers), timeout: timeout)
        }
    }
}

/// Posts telemetry batches to `allot serve`'s `POST /v1/telemetry` as a JSON array
/// (`Content-Type: application/json`, SPEC §3), with `Authorization: Bearer <token>`.
///
/// When Allot refuses a batch it names the event at fault in its error's `field` (`[3].tenant`); that index is
/// passed on as ``TransportError/rejectedIndex`` so the reporter can drop just that event.
public struct HTTPTelemetryTransport: TelemetryTransport {
    public let baseURL: String
    public let token: String?
    public let client: HTTPClient
    /// Request timeout, seconds. Default 30.
    public let timeout: Double

    public init(baseURL: String, token: String?, client: HTTPClient, timeout: Double = 30) {
        self.baseURL = HTTPTransportSupport.trimmed(baseURL)
        self.token = token
        self.client = client
        self.timeout = timeout
    }

    public func send(_ events: [TelemetryRecord]) async throws(TransportError) {
        try await post(events, idempotencyKey: nil)
    }

    /// Posts the batch with `Idempotency-Key: <key>` (1–128 characters of `[A-Za-z0-9._:-]`).
    public func send(_ events: [TelemetryRecord], idempotencyKey: String) async throws(TransportError) {
        try await post(events, idempotencyKey: idempotencyKey)
    }

    private func post(_ events: [TelemetryRecord], idempotencyKey: String?) async throws(TransportError) {
        var headers: HTTPHeaders = ["Content-Type": "application/json", "Accept": "application/json"]
        if let token { headers.add(name: "Authorization", value: "Bearer \(token)") }
        if let idempotencyKey { headers.add(name: "Idempotency-Key", value: idempotencyKey) }
        let client = self.client
        let url = baseURL + "/v1/telemetry"
        let body = TelemetryRecord.encodeBatch(events)
        let timeout = Duration.seconds(self.timeout)
        let response = try await HTTPTransportSupport.abandonOnCancel {
            [headers] () async throws(HTTPClientError) -> HTTPClientResponse in
            try await client.post(url, body: body, headers: headers, timeout: timeout)
        }
        guard (200..<300).contains(response.status.code) else {
            throw HTTPTransportSupport.statusError(response)
        }
    }
}

/// URL building and error mapping shared by the HTTP transports.
enum HTTPTransportSupport {
    /// Runs `request` in a task of its own that is never cancelled, and stops waiting for it (throwing
    /// `cancelled`) when the calling task is cancelled; the abandoned request ends by its own timeout, or when
    /// the HTTP client is shut down (``Gateway/stop(timeout:)`` does that).
    ///
    /// Why not let cancellation reach `HTTPClient.execute`: as of this writing it can lose a request's answer
    /// when the task is cancelled just as the request starts (the cancellation completes the request on the
    /// event loop before the continuation's completion closure is installed), and the caller then waits
    /// forever. Gateways cancel exactly then: `stop()` often lands as a new long-poll begins.
    static func abandonOnCancel(
        _ request: @escaping @Sendable () async throws(HTTPClientError) -> HTTPClientResponse
    ) async throws(TransportError) -> HTTPClientResponse {
        let answer = OneShotAnswer()
        if Task.isCancelled { throw cancelled }
        Task {
            do throws(HTTPClientError) {
                answer.deliver(.success(try await request()))
            } catch {
                answer.deliver(.failure(transportError(error)))
            }
        }
        return try await withTaskCancellationHandler {
            await answer.wait()
        } onCancel: {
            answer.deliver(.failure(cancelled))
        }.get()
    }

    static let cancelled = TransportError(.unreachable, "cancelled")

    static func trimmed(_ baseURL: String) -> String {
        var url = baseURL
        while url.hasSuffix("/") { url.removeLast() }
        return url
    }

    /// RFC 3986 unreserved characters stay; everything else (including `/` in a gateway id) is `%XX`.
    static func percentEncoded(_ text: String) -> String {
        var result = ""
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"),
                UInt8(ascii: "~"):
                result.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = Array("0123456789ABCDEF".utf8)
                result.unicodeScalars.append("%")
                result.unicodeScalars.append(Unicode.Scalar(hex[Int(byte >> 4)]))
                result.unicodeScalars.append(Unicode.Scalar(hex[Int(byte & 0x0F)]))
            }
        }
        return result
    }

    /// Whole seconds as an integer (`30`), anything else with up to three decimals (`0.25`).
    static func seconds(_ value: Double) -> String {
        if value == value.rounded() && value < 1e9 { return String(Int(value)) }
        return String((value * 1_000).rounded() / 1_000)
    }

    static func transportError(_ error: HTTPClientError) -> TransportError {
        switch error.kind {
        case .timedOut:
            return TransportError(.timeout, error.message)
        case .malformedResponse, .responseTooLarge:
            return TransportError(.invalidResponse, error.message)
        default:
            return TransportError(.unreachable, "\(error.kind.rawValue): \(error.message)")
        }
    }

    /// An unexpected status, with Allot's error message (`{"error": {"code", "message", "field"}}`), its
    /// `Retry-After` in seconds, and the index of the telemetry event at fault when `field` names one.
    static func statusError(_ response: HTTPClientResponse) -> TransportError {
        let status = response.status.code
        var message = "HTTP \(status)"
        var rejectedIndex: Int?
        if let error = (try? JSON.parse(response.body))?["error"] {
            let code = error["code"]?.stringValue
            let text = error["message"]?.stringValue
            message = [code, text].compactMap { $0 }.joined(separator: ": ")
            if let field = error["field"]?.stringValue { rejectedIndex = eventIndex(field) }
            if rejectedIndex == nil, let index = error["index"]?.intValue { rejectedIndex = index }
        } else if !response.body.isEmpty {
            message = String(decoding: response.body.prefix(200), as: UTF8.self)
        }
        let retryAfter = response.headers["Retry-After"].flatMap { Double($0.trimmingSpaces) }
        return TransportError(
            .status, message, status: status, retryAfter: retryAfter.flatMap { $0.isFinite && $0 >= 0 ? $0 : nil },
            rejectedIndex: rejectedIndex)
    }

    /// `3` from a field path such as `[3].tenant` or `[3]`.
    static func eventIndex(_ field: String) -> Int? {
        guard field.hasPrefix("["), let close = field.firstIndex(of: "]") else { return nil }
        return Int(field[field.index(after: field.startIndex)..<close])
    }
}

extension String {
    fileprivate var trimmingSpaces: Substring {
        var slice = self[...]
        while slice.first == " " || slice.first == "\t" { slice.removeFirst() }
        while slice.last == " " || slice.last == "\t" { slice.removeLast() }
        return slice
    }
}

extension Gateway {
    /// A gateway talking to `allot serve` at `baseURL` over HTTP: snapshots by long-poll, telemetry in
    /// batches, one HTTP client shared by both (shut down by ``stop(timeout:)``).
    ///
    /// - Parameters:
    ///   - baseURL: e.g. `http://127.0.0.1:8080`.
    ///   - token: a `gateway` role token (nil with `allot serve --dev`).
    ///   - configuration: identity, queueing, defaults.
    ///   - clock: the source of time (``SystemClock`` in production).
    ///   - clientConfiguration: long-poll wait and backoff.
    ///   - reporterConfiguration: telemetry buffer, batch, interval, backoff.
    ///   - http: the HTTP client's limits (connect timeout, largest response, connections).
    ///   - telemetryTimeout: seconds a telemetry post may take (``HTTPTelemetryTransport/timeout``).
    ///   - snapshotTimeoutMargin: seconds a snapshot poll may take beyond its long-poll wait
    ///     (``HTTPSnapshotTransport/timeoutMargin``).
    /// - Throws: if the HTTP client's event loop cannot start.
    public static func connect(
        to baseURL: String, token: String?, configuration: GatewayConfiguration,
        clock: any AllotClock = SystemClock(endsSleepOnStepBack: true),
        clientConfiguration: SnapshotClient.Configuration = SnapshotClient.Configuration(),
        reporterConfiguration: TelemetryReporter.Configuration = TelemetryReporter.Configuration(),
        http: AllotHTTPClientConfiguration = AllotHTTPClientConfiguration(), telemetryTimeout: Double = 30,
        snapshotTimeoutMargin: Double = 10
    ) throws -> Gateway {
        let client = try HTTPClient(configuration: http)
        return Gateway(
            configuration: configuration, clock: clock,
            snapshotTransport: HTTPSnapshotTransport(
                baseURL: baseURL, token: token, client: client,
                timeoutMargin: snapshotTimeoutMargin.isFinite ? max(0, snapshotTimeoutMargin) : 10, clock: clock),
            telemetryTransport: HTTPTelemetryTransport(
                baseURL: baseURL, token: token, client: client,
                timeout: telemetryTimeout.isFinite && telemetryTimeout > 0 ? telemetryTimeout : 30),
            clientConfiguration: clientConfiguration, reporterConfiguration: reporterConfiguration,
            onStop: { await client.shutdown() })
    }
}

/// The first of several possible answers, delivered to one waiter whichever comes first (the answer or the
/// waiter).
///
/// `@unchecked Sendable`: `result` and `waiter` are only touched while holding `lock`, and the continuation is
/// resumed after it is released.
private final class OneShotAnswer: @unchecked Sendable {
    private let lock = NSLock()
    private var result: Result<HTTPClientResponse, TransportError>?
    private var waiter: CheckedContinuation<Result<HTTPClientResponse, TransportError>, Never>?

    func deliver(_ answer: Result<HTTPClientResponse, TransportError>) {
        let continuation: CheckedContinuation<Result<HTTPClientResponse, TransportError>, Never>? = lock.withLock {
            guard result == nil else { return nil }
            result = answer
            defer { waiter = nil }
            return waiter
        }
        continuation?.resume(returning: answer)
    }

    func wait() async -> Result<HTTPClientResponse, TransportError> {
        await withCheckedContinuation { continuation in
            let ready: Result<HTTPClientResponse, TransportError>? = lock.withLock {
                if let result { return result }
                waiter = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}
