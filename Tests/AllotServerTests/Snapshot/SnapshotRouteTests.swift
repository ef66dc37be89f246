import AllotCore
import AllotHTTP
import AllotJSON
import AllotLoop
import AllotProtocol
import AllotServer
import AllotStore
import AllotTime
import Testing

/// A publisher on a throwaway database, and content to publish.
struct SnapshotFixture {
    static let start = 1_800_000_000.0
    let clock = ManualClock(now: start)
    let publisher: AllocationPublisher

    init() async throws {
        publisher = AllocationPublisher(store: SnapshotStore(pool: try await StoreDatabase.temporary()), clock: clock)
    }

    /// One tenant `acme` at `rpm`, split between `gw-1` (3/4) and `gw-2` (1/4).
    static func content(rpm: Double = 40) -> SnapshotContent {
        let limits = RateLimits(rpm: Bucket(rate: 1, burst: 1), tpm: Bucket(rate: 1000, burst: 100))
        let snapshot = Snapshot(
            version: 0, generatedAt: start, expiresAt: start + 300, refreshMs: 5000, policyVersion: "p1",
            upstreams: [
                UpstreamEntry(id: "openai/gpt-4o", state: "healthy", capacity: DimensionValues(rpm: 100, tpm: 1e5))
            ],
            tenants: [
                TenantEntry(
                    id: "acme", upstream: "openai/gpt-4o", tier: "premium", priority: 1,
                    rpm: Bucket(rate: rpm, burst: rpm / 6), tpm: Bucket(rate: 8000, burst: 1333), queueWeight: 4,
                    reason: Reasons(rpm: "fair_share", tpm: "demand"), maxConcurrency: 64)
            ],
            defaultLimits: limits, fallback: Fallback(tenants: [], defaultLimits: limits))
        let plan = SlicePlan(
            gateways: ["gw-1", "gw-2"],
            tenants: [[.init(gateway: 0, rpm: rpm * 0.75, tpm: 6000), .init(gateway: 1, rpm: rpm * 0.25, tpm: 2000)]])
        return SnapshotContent(snapshot: snapshot, plan: plan)
    }

    func publish(rpm: Double = 40) async throws {
        try await publisher.publish(Self.content(rpm: rpm), now: clock.now)
    }

    func get(_ target: String, headers: HTTPHeaders = [:]) async -> HTTPResponse {
        let route = SnapshotRoute(publisher: publisher)
        do {
            return try await route.respond(to: HTTPRequest(method: .get, target: target, headers: headers))
        } catch {
            return error.response
        }
    }
}

@Suite struct SnapshotRouteTests {
    @Test func noSnapshotYetIs503() async throws {
        let fixture = try await SnapshotFixture()
        let response = await fixture.get("/v1/snapshot?gateway=gw-1")
        #expect(response.status == .serviceUnavailable)
        #expect(response.headers["Retry-After"] == "1")
        let error = try response.json()["error"]
        #expect(error?["code"] == "no_snapshot")
    }

    @Test func servesTheGlobalViewAndSlicesWithTheVersionAsETag() async throws {
        let fixture = try await SnapshotFixture()
        try await fixture.publish()
        let global = await fixture.get("/v1/snapshot")
        #expect(global.status == .ok)
        #expect(global.headers["ETag"] == "\"1\"")
        #expect(global.headers["Cache-Control"] == "no-cache")
        #expect(global.headers["Content-Type"] == "application/json")
        let snapshot = try Snapshot(decoding: global.body)
        #expect(snapshot.version == 1)
        #expect(snapshot.gateway == nil)
        #expect(snapshot.tenants.first?.rpm.rate == 40)

        let slice = try Snapshot(decoding: await fixture.get("/v1/snapshot?gateway=gw-1").body)
        #expect(slice.gateway == "gw-1")
        #expect(slice.tenants.first?.rpm.rate == 30)
        #expect(slice.tenants.first?.tpm.rate == 6000)
        // An unknown gateway registers and gets no tenant (default applies) until the next tick.
        let unknown = try Snapshot(decoding: await fixture.get("/v1/snapshot?gateway=gw-new").body)
        #expect(unknown.tenants.isEmpty)
        #expect(fixture.publisher.contacts().map(\.id) == ["gw-1", "gw-new"])
    }

    @Test(arguments: ["\"1\"", "1", "W/\"1\"", "*", "\"0\", \"1\"", " \"1\" "])
    func ifNoneMatchWithTheCurrentVersionIs304(_ header: String) async throws {
        let fixture = try await SnapshotFixture()
        try await fixture.publish()
        let response = await fixture.get("/v1/snapshot?gateway=gw-1", headers: ["If-None-Match": header])
        #expect(response.status == .notModified)
        #expect(response.headers["ETag"] == "\"1\"")
        #expect(response.body.isEmpty)
    }

    @Test(arguments: ["\"0\"", "\"2\"", "\"abc\"", "W/\"01x\""])
    func ifNoneMatchWithAnotherVersionIs200(_ header: String) async throws {
        let fixture = try await SnapshotFixture()
        try await fixture.publish()
        let response = await fixture.get("/v1/snapshot?gateway=gw-1", headers: ["If-None-Match": header])
        #expect(response.status == .ok)
        #expect(try Snapshot(decoding: response.body).version == 1)
    }

    @Test func theEnforcedVersionIsRecordedFromIfNoneMatch() async throws {
        let fixture = try await SnapshotFixture()
        try await fixture.publish()
        _ = await fixture.get("/v1/snapshot?gateway=gw-1", headers: ["If-None-Match": "\"1\""])
        _ = await fixture.get("/v1/snapshot?gateway=gw-2")
        let contacts = fixture.publisher.contacts()
        #expect(contacts.map(\.enforcedVersion) == [1, nil])
        #expect(contacts.map(\.polls) == [1, 1])
    }

    @Test(arguments: ["abc", "-1", "61", "60.5", "1e3", "", "nan", "inf", "0x10", "1,5", "99999999999999999999"])
    func badWaitIs400NamingTheField(_ wait: String) async throws {
        let fixture = try await SnapshotFixture()
        try await fixture.publish()
        let response = await fixture.get("/v1/snapshot?wait=\(wait)")
        #expect(response.status == .badRequest)
        let error = try response.json()["error"]
        #expect(error?["code"] == "invalid_parameter")
        #expect(error?["field"] == "wait")
    }

    /// One of the route's parameters given twice is refused naming it, as on every other route; an unknown one is
    /// still ignored (outside evaluation round 22: the first of two `gateway`s was taken silently).
    @Test(arguments: [
        ("gateway=gw-a&gateway=gw-b", "gateway"), ("wait=1&wait=50", "wait"),
        ("instance=a&gateway=g&instance=b", "instance"),
    ])
    func aParameterGivenTwiceIs400NamingIt(_ query: String, _ field: String) async throws {
        let fixture = try await SnapshotFixture()
        try await fixture.publish()
        let response = await fixture.get("/v1/snapshot?\(query)")
        #expect(response.status == .badRequest)
        #expect(try response.json()["error"]?["field"] == .string(field))
        #expect(try response.json()["error"]?["message"] == .string("query parameter '\(field)' is given twice"))
        #expect(fixture.publisher.contacts().isEmpty)
        #expect(await fixture.get("/v1/snapshot?gateway=gw-a&future=1&future=2").status == .ok)
    }

    @Test(arguments: ["gateway=", "gateway=a%20b", "gateway=" + String(repeating: "g", count: 129), "gateway=%C3%A9"])
    func badGatewayIs400NamingTheField(_ query: String) async throws {
        let fixture = try await SnapshotFixture()
        try await fixture.publish()
        let response = await fixture.get("/v1/snapshot?\(query)")
        #expect(response.status == .badRequest)
        #expect(try response.json()["error"]?["field"] == "gateway")
    }

    @Test(arguments: ["instance=", "instance=a%20b", "instance=" + String(repeating: "i", count: 129)])
    func badInstanceIs400NamingTheField(_ query: String) async throws {
        let fixture = try await SnapshotFixture()
        try await fixture.publish()
        let response = await fixture.get("/v1/snapshot?gateway=gw-1&\(query)")
        #expect(response.status == .badRequest)
        #expect(try response.json()["error"]?["field"] == "instance")
        #expect(fixture.publisher.contacts().isEmpty)
    }

    @Test func aPollRecordsTheInstanceItNames() async throws {
        let fixture = try await SnapshotFixture()
        try await fixture.publish()
        #expect(await fixture.get("/v1/snapshot?gateway=gw-1&instance=run-7").status == .ok)
        #expect(fixture.publisher.contacts().map(\.instance) == ["run-7"])
        #expect(await fixture.get("/v1/snapshot?gateway=gw-1").status == .ok)
        #expect(fixture.publisher.contacts().map(\.instance) == [nil])
    }

    @Test(arguments: ["0", "0.5", "60", "30"])
    func validWaitsAreAccepted(_ wait: String) async throws {
        let fixture = try await SnapshotFixture()
        try await fixture.publish()
        // Without If-None-Match a wait returns at once.
        #expect(await fixture.get("/v1/snapshot?wait=\(wait)&gateway=gw-1").status == .ok)
    }

    /// A long-poll's wait is measured on the wait clock (monotonic in the service), not on the wall clock: a step back
    /// of the wall clock does not hold it for the step (outside evaluation round 41: a poll held until an instant of
    /// the wall clock was held for the whole step, and the gateway learned of the step a minute and more later), and
    /// its answer carries the stepped clock.
    @Test(.timeLimit(.minutes(1))) func aStepBackOfTheWallClockDoesNotStretchALongPoll() async throws {
        let wall = ManualClock(now: SnapshotFixture.start)
        let steady = ManualClock(now: 0)
        let publisher = AllocationPublisher(
            store: SnapshotStore(pool: try await StoreDatabase.temporary()), clock: wall, waitClock: steady)
        try await publisher.publish(SnapshotFixture.content(), now: wall.now)
        let route = SnapshotRoute(publisher: publisher)
        let held = Task {
            try await route.respond(
                to: HTTPRequest(target: "/v1/snapshot?gateway=gw-1&wait=10", headers: ["If-None-Match": "\"1\""]))
        }
        while publisher.watcherCount < 1 { await Task.yield() }
        await steady.waitForSleepers(1)
        wall.stepBack(by: 3_600)
        steady.advance(by: 10)
        let answer = try await held.value
        #expect(answer.status == .notModified)
        #expect(answer.headers["Allot-Server-Time"] == "2027-01-15T07:00:00.000Z")
    }

    @Test func longPollIsAnsweredByTheNextVersionOrTimesOutWith304() async throws {
        let fixture = try await SnapshotFixture()
        try await fixture.publish()
        let waiting = Task {
            await fixture.get("/v1/snapshot?gateway=gw-1&wait=30", headers: ["If-None-Match": "\"1\""])
        }
        while fixture.publisher.watcherCount < 1 { await Task.yield() }
        try await fixture.publish(rpm: 80)
        let woken = await waiting.value
        #expect(woken.status == .ok)
        #expect(woken.headers["ETag"] == "\"2\"")
        #expect(try Snapshot(decoding: woken.body).tenants.first?.rpm.rate == 60)
        // Allot's clock as it answers, by which gateways judge `expires_at`.
        #expect(woken.headers["Allot-Server-Time"] == "2027-01-15T08:00:00.000Z")

        let timingOut = Task {
            await fixture.get("/v1/snapshot?gateway=gw-1&wait=2.5", headers: ["If-None-Match": "2"])
        }
        while fixture.publisher.watcherCount < 1 { await Task.yield() }
        await fixture.clock.waitForSleepers(1)
        fixture.clock.advance(by: 2.5)
        let timedOut = await timingOut.value
        #expect(timedOut.status == .notModified)
        #expect(timedOut.headers["ETag"] == "\"2\"")
        #expect(timedOut.headers["Allot-Server-Time"] == "2027-01-15T08:00:02.500Z")
    }

    @Test func shutdownAnswersHeldLongPollsWith304() async throws {
        let fixture = try await SnapshotFixture()
        try await fixture.publish()
        let signal = ShutdownSignal()
        let route = SnapshotRoute(publisher: fixture.publisher, shutdownSignal: signal)
        let held = Task {
            try await route.respond(
                to: HTTPRequest(target: "/v1/snapshot?wait=60", headers: ["If-None-Match": "\"1\""]))
        }
        while fixture.publisher.watcherCount < 1 { await Task.yield() }
        signal.trigger()
        let response = try await held.value
        #expect(response.status == .notModified)
    }

    @Test func gatewaysListsVersionsLagAndTenants() async throws {
        let fixture = try await SnapshotFixture()
        try await fixture.publish()
        _ = await fixture.get("/v1/snapshot?gateway=gw-1", headers: ["If-None-Match": "\"1\""])
        fixture.clock.advance(by: 5)
        try await fixture.publish(rpm: 50)
        fixture.clock.advance(by: 2)
        let route = GatewaysRoute(publisher: fixture.publisher, policy: { Policy() }, clock: fixture.clock)
        let json = try await route.respond(to: HTTPRequest(target: "/v1/gateways")).json()
        #expect(json["version"] == 2)
        let gateway = json["gateways"]?[0] ?? .null
        #expect(gateway["id"] == "gw-1")
        #expect(gateway["state"] == "behind")
        #expect(gateway["enforced_version"] == 1)
        #expect(gateway["lag_versions"] == 1)
        #expect(gateway["lag_s"]?.doubleValue == 2)
        #expect(gateway["since_contact_s"]?.doubleValue == 7)
        #expect(gateway["polls"] == 1)
        #expect(gateway["tenants"] == ["acme"])
        #expect(gateway["tenant_count"] == 1)
        #expect(gateway["last_contact"] == .string(RFC3339.format(SnapshotFixture.start)))
    }

    @Test func drainAndResume() async throws {
        let fixture = try await SnapshotFixture()
        let route = DrainRoute(publisher: fixture.publisher, clock: fixture.clock)
        do {
            _ = try await route.drain(HTTPRequest(method: .post, target: "/v1/drain"))
            Issue.record("draining nothing must fail")
        } catch {
            #expect(error.status == .conflict)
            #expect(error.code == "no_snapshot")
        }
        try await fixture.publish()
        fixture.clock.advance(by: 1)
        // It takes no arguments: a parameter or a body member is refused, not ignored (outside evaluation round 20).
        for (request, code, field) in [
            (HTTPRequest(method: .post, target: "/v1/drain?now=1"), "unknown_parameter", "now"),
            (
                HTTPRequest(
                    method: .post, target: "/v1/drain", headers: ["Content-Type": "application/json"],
                    body: Array(#"{"x":1}"#.utf8)), "unknown_field", "x"
            ),
        ] {
            do {
                _ = try await route.drain(request)
                Issue.record("\(request.target) drained")
            } catch {
                #expect(error.status == .badRequest)
                #expect(error.code == code && error.field == field)
            }
        }
        #expect(fixture.publisher.current?.version == 1)
        let drained = try await route.drain(HTTPRequest(method: .post, target: "/v1/drain")).json()
        #expect(drained["drained"] == true)
        #expect(drained["version"] == 2)
        #expect(drained["expires_at"] == drained["generated_at"])
        let snapshot = try Snapshot(decoding: await fixture.get("/v1/snapshot").body)
        #expect(snapshot.expiresAt == snapshot.generatedAt)
        // Tick decisions are not published while drained.
        try await fixture.publish(rpm: 70)
        #expect(fixture.publisher.current?.version == 2)
        let resumed = try await route.resume(HTTPRequest(method: .delete, target: "/v1/drain")).json()
        #expect(resumed == ["drained": false, "ended": true, "version": 3])  // the end, persisted, still no lease
        let ended = try Snapshot(decoding: await fixture.get("/v1/snapshot").body)
        #expect(ended.version == 3)
        #expect(ended.expiresAt == ended.generatedAt)
        try await fixture.publish(rpm: 70)
        #expect(fixture.publisher.current?.version == 4)
    }
}
