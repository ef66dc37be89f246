import AllotHTTP
import AllotJSON
import AllotProtocol
import AllotTime
import Foundation

@testable import AllotEnforcement

/// A stand-in for `allot serve` over real sockets, implementing the gateway protocol's two endpoints as SPEC
/// §7 and §3 define them: `GET /v1/snapshot` (ETag = version, `If-None-Match` → `304`, `wait=` long-poll held
/// until a newer version or the wait ends) and `POST /v1/telemetry` (a JSON array; bearer token; an event with
/// `task_id` `poison` is refused with a `400` naming its index, like Allot's validation).
final class AllotStub: @unchecked Sendable {
    struct SnapshotRequest: Equatable {
        var gateway: String?
        var wait: String?
        var ifNoneMatch: String?
        var authorization: String?
        var status: Int
        /// The poll's `Allot-Gateway-Time`.
        var gatewayTime: String? = nil
    }

    // `@unchecked Sendable`: all mutable fields are only touched under `lock`.
    private let lock = NSLock()
    private var current: Snapshot?
    private var generation = 0
    private var seen: [SnapshotRequest] = []
    private var received: [JSON] = []
    private var contentTypes: [String?] = []
    private var idempotencyKeys: [String?] = []
    private var leaveAnswers: [(status: Int, field: String?)] = []
    private var leaves: [String] = []
    private var clockOffset: Double?
    let token: String

    init(token: String = "gw-secret") {
        self.token = token
    }

    func publish(_ snapshot: Snapshot) {
        lock.withLock {
            current = snapshot
            generation += 1
        }
    }

    /// With a value, every snapshot answer carries `Allot-Server-Time`: the system clock plus `offset` seconds (a
    /// server whose clock is that far ahead of the gateway's); nil: no such field (a release before it).
    func sendServerTime(offset: Double?) { lock.withLock { clockOffset = offset } }

    private var serverTimeHeaders: HTTPHeaders {
        guard let offset = lock.withLock({ clockOffset }) else { return [:] }
        return [Snapshot.serverTimeField: RFC3339.format(SystemClock().now + offset)]
    }

    var snapshotRequests: [SnapshotRequest] { lock.withLock { seen } }
    var telemetry: [JSON] { lock.withLock { received } }
    var telemetryContentTypes: [String?] { lock.withLock { contentTypes } }
    /// The `Idempotency-Key` of every telemetry post, in order.
    var telemetryKeys: [String?] { lock.withLock { idempotencyKeys } }
    /// The paths and queries of the `DELETE /v1/gateways/{id}` requests, in order.
    var leaveRequests: [String] { lock.withLock { leaves } }
    /// The statuses (and error fields) the next leaves are answered with; `200` once they run out.
    func answerLeaves(_ answers: [(status: Int, field: String?)]) { lock.withLock { leaveAnswers = answers } }

    func router(shutdown: ShutdownSignal) -> Router {
        var router = Router()
        router.get("/v1/snapshot") { request in await self.snapshot(request, shutdown: shutdown) }
        router.post("/v1/telemetry") { request in self.ingest(request) }
        router.delete("/v1/gateways/{id}") { request in self.leave(request) }
        return router
    }

    private func leave(_ request: HTTPRequest) -> HTTPResponse {
        let answer: (status: Int, field: String?) = lock.withLock {
            leaves.append(request.target)
            return leaveAnswers.isEmpty ? (200, nil) : leaveAnswers.removeFirst()
        }
        guard answer.status != 200 else { return .json(["left": true]) }
        return HTTPError(HTTPStatus(code: answer.status), code: "stub", message: "stub", field: answer.field).response
    }

    private func unauthorized(_ request: HTTPRequest) -> HTTPResponse? {
        guard request.headers["Authorization"] != "Bearer \(token)" else { return nil }
        return .json(
            ["error": ["code": "unauthorized", "message": "missing or invalid bearer token"]], status: .unauthorized)
    }

    private func snapshot(_ request: HTTPRequest, shutdown: ShutdownSignal) async -> HTTPResponse {
        let inm = request.headers["If-None-Match"]
        // Recorded on arrival with status 0 ("held"), and given its status when answered.
        let index = lock.withLock {
            seen.append(
                SnapshotRequest(
                    gateway: request.queryValue("gateway"), wait: request.queryValue("wait"), ifNoneMatch: inm,
                    authorization: request.headers["Authorization"], status: 0,
                    gatewayTime: request.headers[Snapshot.gatewayTimeField]))
            return seen.count - 1
        }
        var record = (status: 0, ())
        defer { lock.withLock { seen[index].status = record.status } }
        if let refusal = unauthorized(request) {
            record.status = 401
            return refusal
        }
        let known = inm.flatMap(Self.version(fromETag:))
        let wait = min(Double(request.queryValue("wait") ?? "0") ?? 0, 60)
        let deadline = MonotonicClock.now() + UInt64(wait * 1e9)
        while true {
            let snapshot = lock.withLock { current }
            if let snapshot, known == nil || snapshot.version > known! {
                record.status = 200
                var headers = serverTimeHeaders
                headers["ETag"] = "\"\(snapshot.version)\""
                return .json(bytes: snapshot.encoded(), headers: headers)
            }
            if MonotonicClock.now() >= deadline || shutdown.isTriggered || Task.isCancelled {
                record.status = 304
                var headers = serverTimeHeaders
                headers["ETag"] = "\"\(known ?? 0)\""
                return HTTPResponse(status: .notModified, headers: headers)
            }
            try? await Task.sleep(nanoseconds: 2_000_000)
        }
    }

    /// `42`, `"42"` and `W/"42"` all name version 42.
    static func version(fromETag text: String) -> Int64? {
        var value = text.trimmingCharacters(in: .whitespaces)
        if value.hasPrefix("W/") { value.removeFirst(2) }
        return Int64(value.trimmingCharacters(in: CharacterSet(charactersIn: "\"")))
    }

    private func ingest(_ request: HTTPRequest) -> HTTPResponse {
        if let refusal = unauthorized(request) { return refusal }
        guard let events = (try? JSON.parse(request.body))?.arrayValue else {
            return .json(["error": ["code": "invalid_json", "message": "expected an array"]], status: .badRequest)
        }
        for (index, event) in events.enumerated() where event["task_id"]?.stringValue == "poison" {
            return .json(
                [
                    "error": [
                        "code": "invalid_event", "message": .string("event \(index): field 'task_id': poisoned"),
                        "field": .string("[\(index)].task_id"),
                    ]
                ], status: .badRequest)
        }
        lock.withLock {
            received.append(contentsOf: events)
            contentTypes.append(request.headers["Content-Type"])
            idempotencyKeys.append(request.headers["Idempotency-Key"])
        }
        return .json(["accepted": .int(Int64(events.count))])
    }
}

/// A running stub server; `restart()` binds the same port again.
final class StubServer: @unchecked Sendable {
    let stub: AllotStub
    // `@unchecked Sendable`: `server` is only replaced under `lock`.
    private let lock = NSLock()
    private var server: HTTPServer?
    private(set) var port: Int = 0

    init(stub: AllotStub) {
        self.stub = stub
    }

    var baseURL: String { "http://127.0.0.1:\(port)" }

    func start() async throws {
        let shutdown = ShutdownSignal()
        let server = HTTPServer(
            configuration: HTTPServerConfiguration(host: "127.0.0.1", port: port),
            responder: stub.router(shutdown: shutdown), shutdownSignal: shutdown)
        port = try await server.start()
        lock.withLock { self.server = server }
    }

    func stop() async {
        let server = lock.withLock {
            defer { self.server = nil }
            return self.server
        }
        await server?.shutdown(gracePeriod: .milliseconds(200))
    }
}
