import AllotHTTP
import AllotJSON
import AllotSQLite
import AllotServer
import AllotStore
import AllotTime
import Testing

/// `POST /v1/telemetry` over a real socket: the route behind `HTTPServer`, posted to by `HTTPClient`.
@Suite struct TelemetryRouteLiveTests {
    @Test func postsOverLoopbackAndTheServerBodyLimitApplies() async throws {
        let store = TelemetryStore(pool: try await StoreDatabase.temporary())
        var router = Router()
        TelemetryRoute(store: store, defaultTier: { "free" }, clock: ManualClock(now: TelemetryRouteTests.now))
            .register(in: &router)
        let server = HTTPServer(configuration: HTTPServerConfiguration(port: 0, maxBodyBytes: 4_096), responder: router)
        let port = try await server.start()
        let client = try HTTPClient()
        let url = "http://127.0.0.1:\(port)/v1/telemetry"

        let ndjson = Array((TelemetryRouteTests.event() + "\n" + TelemetryRouteTests.event(tenant: "beta") + "\n").utf8)
        let stored = try await client.post(url, body: ndjson, headers: ["Content-Type": "application/x-ndjson"])
        #expect(stored.status == .ok)
        #expect(stored.bodyText == #"{"stored":2,"first_id":1,"last_id":2,"registered_tenants":["acme","beta"]}"#)

        let invalid = try await client.post(
            url, body: Array("[\(TelemetryRouteTests.event(extra: #","status":"teapot""#))]".utf8),
            headers: ["Content-Type": "application/json"])
        #expect(invalid.status == .badRequest)
        #expect(try invalid.json()["error"]?["field"] == "[0].status")

        let oversized = try await client.post(
            url, body: Array(repeating: UInt8(ascii: " "), count: 5_000), headers: ["Content-Type": "application/json"])
        #expect(oversized.status == .contentTooLarge)
        #expect(try oversized.json()["error"]?["code"] == "body_too_large")

        await client.shutdown()
        await server.shutdown(gracePeriod: .seconds(1))
        let names = try await store.names()
        #expect(names.tenants.values.map(\.tier) == ["free", "free"])
        #expect(try await store.lastEventID() == 2)
    }
}
