import AllotHTTP
import AllotJSON
import AllotMetrics
import AllotSQLite
import AllotServer
import AllotStore
import AllotTime
import Testing

/// `POST /v1/telemetry` with an `Idempotency-Key`: a resent batch is stored once (outside evaluation round 22, F4).
@Suite struct TelemetryIdempotencyTests {
    typealias R = TelemetryRouteTests

    static func post(_ fixture: R.Fixture, _ body: String, keys: [String]) async -> HTTPResponse {
        var headers: HTTPHeaders = ["Content-Type": "application/json"]
        for key in keys { headers.add(name: "Idempotency-Key", value: key) }
        return await fixture.post(Array(body.utf8), headers: headers)
    }

    @Test func aResentBatchIsAnsweredAsTheFirstTimeAndStoredOnce() async throws {
        let fixture = try await R.make()
        let body = "[\(R.event()),\(R.event(tenant: "beta"))]"
        let first = await Self.post(fixture, body, keys: ["gw-1:0001"])
        #expect(first.status == .ok)
        #expect(first.bodyText == #"{"stored":2,"first_id":1,"last_id":2,"registered_tenants":["acme","beta"]}"#)
        let again = await Self.post(fixture, body, keys: [#""gw-1:0001""#])  // the structured-field form
        #expect(again.status == .ok)
        #expect(again.bodyText == #"{"stored":2,"first_id":1,"last_id":2,"duplicate":true}"#)
        #expect(try await fixture.count("events") == 2)
        #expect(try await fixture.count("telemetry_batch_keys") == 1)
        let counters = await fixture.store.counters
        #expect(counters.batchesStored == 1)
        #expect(counters.eventsStored == 2)
        #expect(counters.batchesDuplicate == 1)

        // Without a key the same body is another batch (at-least-once, as before).
        #expect(await fixture.post(body).bodyText == #"{"stored":2,"first_id":3,"last_id":4}"#)
        #expect(try await fixture.count("events") == 4)
    }

    @Test func aKeyUsedForAnotherBodyIs422AndStoresNothing() async throws {
        let fixture = try await R.make()
        #expect(await Self.post(fixture, "[\(R.event())]", keys: ["k-1"]).status == .ok)
        let other = await Self.post(fixture, "[\(R.event(tenant: "beta"))]", keys: ["k-1"])
        #expect(other.status.code == 422)
        #expect(
            other.bodyText
                == #"{"error":{"code":"idempotency_key_reused","message":"Idempotency-Key 'k-1' was used for a different batch (1 event stored at 2026-11-22T03:00:00.000Z): a retry must resend the same body; a new batch needs a new key","field":"Idempotency-Key"}}"#
        )
        #expect(try await fixture.count("events") == 1)
        #expect(try await fixture.count("tenants") == 1)
        #expect(await fixture.store.counters.batchesRejected == ["idempotency_key_reused": 1])
    }

    @Test func aRefusedBatchDoesNotUseItsKey() async throws {
        let fixture = try await R.make()
        let refused = await Self.post(fixture, "[\(R.event(tenant: "bad tenant"))]", keys: ["k-2"])
        #expect(refused.status == .badRequest)
        let fixed = await Self.post(fixture, "[\(R.event())]", keys: ["k-2"])
        #expect(fixed.bodyText == #"{"stored":1,"first_id":1,"last_id":1,"registered_tenants":["acme"]}"#)
    }

    @Test(arguments: [
        ([""], "Idempotency-Key is empty"),
        ([#""""#], "Idempotency-Key is empty"),
        ([String(repeating: "k", count: 129)], "Idempotency-Key is 129 characters long: at most 128"),
        (["a b"], "Idempotency-Key 'a b' must be characters of [A-Za-z0-9._:-] (a UUID, a ULID)"),
        (["k/1"], "Idempotency-Key 'k/1' must be characters of [A-Za-z0-9._:-] (a UUID, a ULID)"),
        (["k-1", "k-2"], "Idempotency-Key was sent 2 times: send one key per batch"),
        (["k-1, k-2"], "Idempotency-Key was sent 2 times: send one key per batch"),
    ])
    func anIllFormedKeyIs400NamingTheHeader(keys: [String], message: String) async throws {
        let fixture = try await R.make()
        let response = await Self.post(fixture, "[\(R.event())]", keys: keys)
        #expect(response.status == .badRequest)
        #expect(
            response.bodyText
                == #"{"error":{"code":"invalid_idempotency_key","message":"\#(message)","field":"Idempotency-Key"}}"#)
        #expect(try await fixture.count("events") == 0)
    }

    @Test func metricsCountBatchesByResultAndEventsStoredOnce() async throws {
        let metrics = MetricsRegistry()
        let store = TelemetryStore(pool: try await StoreDatabase.temporary())
        var router = Router()
        TelemetryRoute(
            store: store, defaultTier: { "standard" }, clock: ManualClock(now: R.now), metrics: metrics
        ).register(in: &router)
        let fixture = R.Fixture(store: store, router: router)
        let body = "[\(R.event()),\(R.event())]"
        #expect(await Self.post(fixture, body, keys: ["m-1"]).status == .ok)
        #expect(await Self.post(fixture, body, keys: ["m-1"]).status == .ok)
        #expect(await Self.post(fixture, "[\(R.event())]", keys: ["m-1"]).status.code == 422)
        #expect(await Self.post(fixture, body, keys: ["bad key"]).status == .badRequest)
        let text = metrics.render()
        for line in [
            #"allot_telemetry_batches_total{result="stored"} 1"#,
            #"allot_telemetry_batches_total{result="duplicate"} 1"#,
            #"allot_telemetry_batches_total{result="idempotency_key_reused"} 1"#,
            #"allot_telemetry_batches_total{result="invalid_idempotency_key"} 1"#,
            "allot_telemetry_events_stored_total 2",
        ] {
            #expect(text.contains(line + "\n"), "\(line)")
        }
    }

    @Test func keysUpToTheLimitAndUUIDsAreAccepted() async throws {
        let fixture = try await R.make()
        for key in [String(repeating: "k", count: 128), "0f8fad5b-d9cb-469f-a165-70867728950e", " A.b_c:9 "] {
            #expect(await Self.post(fixture, "[\(R.event())]", keys: [key]).status == .ok, "\(key)")
        }
        #expect(try await fixture.count("telemetry_batch_keys") == 3)
    }
}
