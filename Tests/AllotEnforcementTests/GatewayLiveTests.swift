import AllotHTTP
import AllotJSON
import AllotProtocol
import AllotTime
import Foundation
import Testing

@testable import AllotEnforcement

/// The library over real sockets against a stand-in for `allot serve` (``AllotStub``) on the system clock,
/// with long-polls and backoff shortened to tenths of a second.
@Suite struct GatewayLiveTests {
    static let fast = SnapshotClient.Configuration(
        longPollWait: 0.2, backoff: Backoff(initial: 0.02, maximum: 0.1), defaultRefreshInterval: 0.05)

    static func snapshot(version: Int64, lease: Double, rpmBurst: Double = 100) -> Snapshot {
        let now = SystemClock().now
        return Snapshot.make(
            version: version, generatedAt: now, expiresAt: now + lease, refreshMs: 50,
            tenants: [TenantEntry.make(rpm: Bucket(rate: 6_000, burst: rpmBurst))],
            fallbackTenants: [
                FallbackEntry(
                    id: "acme", upstream: Snapshot.defaultUpstream, rpm: Bucket(rate: 6, burst: 1),
                    tpm: Bucket(rate: 6_000, burst: 1_000))
            ])
    }

    func makeGateway(_ server: StubServer, token: String? = "gw-secret", collector: EventCollector) throws -> Gateway {
        try Gateway.connect(
            to: server.baseURL + "/", token: token,
            configuration: GatewayConfiguration(gatewayID: "eu/gw-1", onEvent: { collector.note($0) }),
            clientConfiguration: Self.fast,
            reporterConfiguration: .init(
                batchSize: 2, flushInterval: 0.05, backoff: Backoff(initial: 0.02, maximum: 0.1)))
    }

    @Test func longPollDeliversNewVersionsAnd304sWhenTheWaitEnds() async throws {
        let server = StubServer(stub: AllotStub())
        try await server.start()
        server.stub.publish(Self.snapshot(version: 1, lease: 60))
        let gateway = try makeGateway(server, collector: EventCollector())
        gateway.start()
        #expect(await gateway.waitForSnapshot(timeout: 30))
        #expect(gateway.enforcer.enforcedVersion == 1)
        // The next poll is held with If-None-Match: "1" (a quoted entity tag) until version 2 is published.
        #expect(
            await eventually { server.stub.snapshotRequests.contains { $0.ifNoneMatch == #""1""# && $0.status == 0 } })
        server.stub.publish(Self.snapshot(version: 2, lease: 60))
        #expect(await eventually { gateway.enforcer.enforcedVersion == 2 })
        // With nothing new, held polls end in 304 and the client polls again with the same version.
        #expect(
            await eventually {
                server.stub.snapshotRequests.filter { $0.ifNoneMatch == #""2""# && $0.status == 304 }.count >= 2
            })
        let requests = server.stub.snapshotRequests.filter { $0.status != 0 }
        #expect(requests.first?.ifNoneMatch == nil)
        #expect(requests.first?.status == 200)
        #expect(requests.allSatisfy { $0.gateway == "eu/gw-1" && $0.wait == "0.2" })
        #expect(requests.allSatisfy { $0.authorization == "Bearer gw-secret" })
        #expect(requests.contains { $0.ifNoneMatch == #""1""# && $0.status == 200 })
        let status = await gateway.snapshotClient!.status
        #expect(status.consecutiveFailures == 0)
        #expect(status.received == 2)
        await gateway.stop()
        await server.stop()
    }

    /// Round 40 F10 over real sockets: Allot's clock runs 120 s behind the gateway's. A snapshot stamped on it with a
    /// 60-s lease had run out by the gateway's clock before it arrived; read on Allot's clock, from the answers'
    /// `Allot-Server-Time`, it is a lease.
    @Test func leasesRunOnAllotsClockAsItsAnswersGiveIt() async throws {
        let server = StubServer(stub: AllotStub())
        try await server.start()
        server.stub.sendServerTime(offset: -120)
        var snapshot = Self.snapshot(version: 1, lease: 60)
        snapshot.generatedAt -= 120
        snapshot.expiresAt -= 120
        server.stub.publish(snapshot)
        let collector = EventCollector()
        let gateway = try makeGateway(server, collector: collector)
        gateway.start()
        #expect(await eventually { gateway.enforcer.enforcedVersion == 1 })
        let status = gateway.enforcer.status(now: SystemClock().now)
        #expect(!status.inFallback)
        let offset = try #require(status.serverClockOffset)
        #expect(offset > -121 && offset < -119)
        #expect(collector.events.first == .serverClock(offset: offset))
        // Each poll says the gateway's clock as it sent it (Allot shows how far it is from its own).
        let sent = server.stub.snapshotRequests.map { $0.gatewayTime.flatMap { RFC3339.parse($0) } }
        #expect(!sent.isEmpty && sent.allSatisfy { $0.map { abs($0 - SystemClock().now) < 60 } == true })
        await gateway.stop()
        await server.stop()
    }

    @Test func serverStoppedKeepsTheLastGoodSnapshotUntilTheLeaseEndsThenFallback() async throws {
        let server = StubServer(stub: AllotStub())
        try await server.start()
        // A lease long enough that a loaded CI machine still checks the "before expiry" state in time.
        server.stub.publish(Self.snapshot(version: 1, lease: 6))
        let collector = EventCollector()
        let gateway = try makeGateway(server, collector: collector)
        gateway.start()
        #expect(await eventually { gateway.enforcer.enforcedVersion == 1 })
        await server.stop()
        #expect(await eventually { await gateway.snapshotClient!.status.consecutiveFailures >= 2 })
        // Allot is gone: the last good snapshot is still enforced, admission still answers from memory.
        // (Checked while the lease runs; a CI machine stalled past the lease skips this part.)
        let status = gateway.status
        #expect(status.version == 1)
        if let expiry = status.expiresAt, SystemClock().now < expiry - 0.5 {
            #expect(!status.inFallback)
            for _ in 0..<5 { #expect(gateway.tryAdmit(.make(tokens: 10)).ticket != nil) }
        }
        #expect(collector.events.contains { if case .pollFailed = $0 { true } else { false } })
        // The lease ends: the gateway switches to the fallback floors by itself.
        #expect(await eventually(timeout: 120) { gateway.status.inFallback })
        // (Events are delivered just after the switch, possibly on the queue timer's task.)
        // A failed expectation, not a crash of the whole test run, if a stalled machine got here otherwise.
        let expiry = try #require(gateway.enforcer.snapshot).expiresAt
        #expect(await eventually { collector.events.contains(.leaseExpired(version: 1, expiresAt: expiry)) })
        let limits = gateway.enforcer.tenantStatus(
            tenant: "acme", upstream: Snapshot.defaultUpstream, now: SystemClock().now)
        #expect(limits?.limits.rpm == Bucket(rate: 6, burst: 1))
        // Allot comes back on the same port with a newer version: a lease again.
        server.stub.publish(Self.snapshot(version: 2, lease: 60))
        try await server.start()
        #expect(await eventually { gateway.enforcer.enforcedVersion == 2 })
        #expect(!gateway.status.inFallback)
        await gateway.stop()
        await server.stop()
    }

    @Test func aWrongTokenIsRetriedAndReported() async throws {
        let server = StubServer(stub: AllotStub())
        try await server.start()
        server.stub.publish(Self.snapshot(version: 1, lease: 60))
        let gateway = try makeGateway(server, token: "wrong", collector: EventCollector())
        gateway.start()
        #expect(await !gateway.waitForSnapshot(timeout: 0.1))
        #expect(await eventually { await gateway.snapshotClient!.status.consecutiveFailures >= 2 })
        let status = await gateway.snapshotClient!.status
        #expect(status.lastError == "status: unauthorized: missing or invalid bearer token (HTTP 401)")
        #expect(status.enforcedVersion == nil)
        await gateway.stop()
        await server.stop()
    }

    /// The leave over HTTP: `404` (never heard of) and `409` (a replacement polls under the id) are success; a
    /// server older than `instance=` (`400`, `field: instance`) is sent the leave again without it; any other
    /// refusal is an error.
    @Test func theLeaveNamesItsInstanceAndCopesWithWhatTheServerAnswers() async throws {
        let server = StubServer(stub: AllotStub())
        try await server.start()
        let client = try HTTPClient()
        // A generous timeout: the default 2 s ran out once while simulations held both of CI's cores.
        let transport = HTTPSnapshotTransport(
            baseURL: server.baseURL, token: "gw-secret", client: client, timeoutMargin: 60, leaveTimeout: 60)
        server.stub.answerLeaves([(404, "id"), (409, "instance"), (400, "instance"), (200, nil), (400, "id")])
        try await transport.leave(gateway: "eu/gw-1", instance: "run-1")
        try await transport.leave(gateway: "eu/gw-1", instance: "run-1")
        try await transport.leave(gateway: "eu/gw-1", instance: "run-1")
        await #expect(throws: TransportError.self) { try await transport.leave(gateway: "eu/gw-1", instance: "run-1") }
        let named = "/v1/gateways/eu%2Fgw-1?instance=run-1"
        #expect(server.stub.leaveRequests == [named, named, named, "/v1/gateways/eu%2Fgw-1", named])
        await client.shutdown()
        await server.stop()
    }

    @Test func telemetryArrivesAsJSONArraysAndARefusedEventIsDropped() async throws {
        let server = StubServer(stub: AllotStub())
        try await server.start()
        server.stub.publish(Self.snapshot(version: 1, lease: 60))
        let gateway = try makeGateway(server, collector: EventCollector())
        gateway.start()
        #expect(await eventually { gateway.enforcer.enforcedVersion == 1 })
        let ticket = try #require(
            try await gateway.admit(
                tenant: "acme", upstream: Snapshot.defaultUpstream, taskClass: .batch, estimatedTokens: 500,
                taskID: "task-1"
            ).ticket)
        gateway.complete(
            ticket, status: 200, promptTokens: 300, completionTokens: 120, latency: 0.75,
            headers: [("x-ratelimit-remaining-requests", "99"), ("content-type", "application/json")])
        let poisoned = try #require(
            try await gateway.admit(tenant: "acme", upstream: Snapshot.defaultUpstream, taskID: "poison").ticket)
        gateway.complete(poisoned, status: 200, promptTokens: 1, completionTokens: 1)
        #expect(await eventually { !server.stub.telemetry.isEmpty })
        #expect(await eventually { gateway.reporter!.statistics.rejected == 1 })
        let events = server.stub.telemetry
        #expect(events.count == 1)
        let event = try #require(events.first)
        #expect(event["gateway"]?.stringValue == "eu/gw-1")
        #expect(event["tenant"]?.stringValue == "acme")
        #expect(event["upstream"]?.stringValue == Snapshot.defaultUpstream)
        #expect(event["outcome"]?.stringValue == "ok")
        #expect(event["status"]?.intValue == 200)
        #expect(event["prompt_tokens"]?.intValue == 300)
        #expect(event["completion_tokens"]?.intValue == 120)
        #expect(event["estimated_tokens"]?.intValue == 500)
        #expect(event["latency_ms"]?.doubleValue == 750)
        #expect(event["task_class"]?.stringValue == "batch")
        #expect(event["task_id"]?.stringValue == "task-1")
        #expect(event["headers"] == ["x-ratelimit-remaining-requests": "99"])
        #expect(event["ts"]?.int64Value != nil)
        #expect(server.stub.telemetryContentTypes.allSatisfy { $0 == "application/json" })
        // Every post the stub stored carried an idempotency key.
        let keys = server.stub.telemetryKeys
        #expect(!keys.isEmpty && keys.allSatisfy { $0 != nil })
        await gateway.stop()
        await server.stop()
    }

    @Test func telemetryWaitsOutAnOutageAndIsDeliveredAfterIt() async throws {
        let server = StubServer(stub: AllotStub())
        try await server.start()
        server.stub.publish(Self.snapshot(version: 1, lease: 60))
        let gateway = try makeGateway(server, collector: EventCollector())
        gateway.start()
        #expect(await eventually { gateway.enforcer.enforcedVersion == 1 })
        await server.stop()
        for index in 0..<3 {
            let ticket = try #require(gateway.tryAdmit(.make(tokens: 10, taskID: "t-\(index)")).ticket)
            gateway.complete(ticket, status: 200, promptTokens: 5, completionTokens: 5)
        }
        #expect(await eventually { gateway.reporter!.statistics.failedPosts >= 1 })
        try await server.start()
        #expect(await eventually { server.stub.telemetry.count == 3 })
        #expect(server.stub.telemetry.map { $0["task_id"]?.stringValue } == ["t-0", "t-1", "t-2"])
        await gateway.stop()
        await server.stop()
    }
}
