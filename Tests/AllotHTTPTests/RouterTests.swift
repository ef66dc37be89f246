import AllotJSON
import Testing

@testable import AllotHTTP

/// The router without sockets: exact, fast API-level behaviour.
@Suite struct RouterTests {
    static func makeRouter() -> Router {
        var router = Router()
        router.get("/v1/tenants") { _ in .text("list") }
        router.get("/v1/tenants/summary") { _ in .text("summary") }
        router.get("/v1/tenants/{id}") { request in .text("tenant \(request.pathParameters["id"]!)") }
        router.put("/v1/tenants/{id}/override") { request in
            .json(["id": .string(request.pathParameters["id"]!), "pattern": .string(request.routePattern ?? "")])
        }
        router.delete("/v1/tenants/{id}/override") { _ in HTTPResponse(status: .noContent) }
        router.post("/v1/proposals/{id}/approve") { _ in
            throw HTTPError(.conflict, code: "already_decided", message: "proposal already approved", field: "id")
        }
        router.get("/boom") { _ in
            struct Boom: Error {}
            throw Boom()
        }
        router.get("/") { _ in .text("root") }
        return router
    }

    @Test func matchesLiteralsBeforeParameters() async {
        let router = Self.makeRouter()
        #expect(await router.respond(to: HTTPRequest(target: "/v1/tenants/summary")).bodyText == "summary")
        #expect(await router.respond(to: HTTPRequest(target: "/v1/tenants/acme")).bodyText == "tenant acme")
        #expect(await router.respond(to: HTTPRequest(target: "/v1/tenants")).bodyText == "list")
        #expect(await router.respond(to: HTTPRequest(target: "/")).bodyText == "root")
    }

    @Test func backtracksFromALiteralToAParameterForTheMethod() async throws {
        let router = Self.makeRouter()
        // "summary" is also a literal GET route, but PUT …/summary/override must reach the parameter route.
        let response = await router.respond(to: HTTPRequest(method: .put, target: "/v1/tenants/summary/override"))
        #expect(response.status == .ok)
        #expect(try response.json() == ["id": "summary", "pattern": "/v1/tenants/{id}/override"])
    }

    @Test func fillsDecodedPathParametersAndThePattern() async throws {
        let router = Self.makeRouter()
        let response = await router.respond(
            to: HTTPRequest(method: .put, target: "/v1/tenants/acme%2Fprod%20eu/override"))
        #expect(try response.json() == ["id": "acme/prod eu", "pattern": "/v1/tenants/{id}/override"])
    }

    @Test func unknownPathIs404JSON() async {
        let response = await Self.makeRouter().respond(to: HTTPRequest(target: "/v2/nothing?x=1"))
        #expect(response.status == .notFound)
        #expect(response.headers["content-type"] == "application/json")
        #expect(response.bodyText == #"{"error":{"code":"not_found","message":"no route for /v2/nothing"}}"#)
        // A trailing slash is a different path, and an empty segment is no parameter value.
        #expect(await Self.makeRouter().respond(to: HTTPRequest(target: "/v1/tenants/")).status == .notFound)
        #expect(
            await Self.makeRouter().respond(to: HTTPRequest(method: .put, target: "/v1/tenants//override")).status
                == .notFound)
    }

    @Test func wrongMethodIs405WithAllow() async {
        let response = await Self.makeRouter().respond(
            to: HTTPRequest(method: .post, target: "/v1/tenants/acme/override"))
        #expect(response.status == .methodNotAllowed)
        #expect(response.headers["Allow"] == "DELETE, PUT")
        #expect(
            response.bodyText
                == #"{"error":{"code":"method_not_allowed","message":"POST is not allowed on /v1/tenants/acme/override; allowed: DELETE, PUT"}}"#
        )
        let onGet = await Self.makeRouter().respond(to: HTTPRequest(method: .delete, target: "/v1/tenants/summary"))
        #expect(onGet.headers["Allow"] == "GET, HEAD")
    }

    @Test func headFallsBackToGet() async {
        let response = await Self.makeRouter().respond(to: HTTPRequest(method: .head, target: "/v1/tenants"))
        #expect(response.status == .ok)
        #expect(response.bodyText == "list")  // the server drops the body on the wire
    }

    @Test func thrownHTTPErrorBecomesItsJSON() async {
        let response = await Self.makeRouter().respond(
            to: HTTPRequest(method: .post, target: "/v1/proposals/7/approve"))
        #expect(response.status == .conflict)
        #expect(
            response.bodyText
                == #"{"error":{"code":"already_decided","message":"proposal already approved","field":"id"}}"#)
    }

    @Test func anyOtherErrorIs500AndTheObserverSeesIt() async {
        let seen = Locked<[HTTPRouteObservation]>([])
        var router = Self.makeRouter()
        router.observer = { observation in seen.withLock { $0.append(observation) } }
        let response = await router.respond(to: HTTPRequest(target: "/boom", remoteAddress: "127.0.0.1:9"))
        #expect(response.status == .internalServerError)
        #expect(response.bodyText == #"{"error":{"code":"internal_error","message":"internal server error"}}"#)
        let observation = seen.withLock { $0 }.first
        #expect(observation?.routePattern == "/boom")
        #expect(observation?.status == .internalServerError)
        #expect(observation?.errorDescription == "Boom()")
        #expect(observation?.remoteAddress == "127.0.0.1:9")
    }

    @Test func observerGetsThePatternNotThePath() async {
        let seen = Locked<[HTTPRouteObservation]>([])
        var router = Self.makeRouter()
        router.observer = { observation in seen.withLock { $0.append(observation) } }
        _ = await router.respond(to: HTTPRequest(method: .put, target: "/v1/tenants/acme/override"))
        _ = await router.respond(to: HTTPRequest(target: "/missing"))
        let observations = seen.withLock { $0 }
        #expect(observations.map(\.routePattern) == ["/v1/tenants/{id}/override", nil])
        #expect(observations.map(\.status.code) == [200, 404])
        #expect(observations.map(\.method) == [.put, .get])
        #expect(observations.allSatisfy { $0.duration >= .zero })
    }

    @Test func listsRegisteredRoutesInOrder() {
        let routes = Self.makeRouter().routes.map(\.description)
        #expect(
            routes == [
                "GET /v1/tenants", "GET /v1/tenants/summary", "GET /v1/tenants/{id}", "PUT /v1/tenants/{id}/override",
                "DELETE /v1/tenants/{id}/override", "POST /v1/proposals/{id}/approve", "GET /boom", "GET /",
            ])
    }

    @Test func requestExposesQueryItems() {
        let request = HTTPRequest(target: "/v1/snapshot?gateway=gw+1&wait=30&flag&gateway=second&e=%E2%82%AC")
        #expect(request.path == "/v1/snapshot")
        #expect(request.query == "gateway=gw+1&wait=30&flag&gateway=second&e=%E2%82%AC")
        #expect(request.queryValue("gateway") == "gw 1")
        #expect(request.queryValue("flag") == "")
        #expect(request.queryValue("e") == "€")
        #expect(request.queryValue("absent") == nil)
        #expect(request.queryItems.count == 5)
    }

    @Test func headersAreCaseInsensitive() {
        var headers: HTTPHeaders = ["Content-Type": "text/plain", "X-A": "1"]
        headers.add(name: "x-a", value: "2")
        #expect(headers["content-TYPE"] == "text/plain")
        #expect(headers.values(for: "X-A") == ["1", "2"])
        headers["X-a"] = "3"
        #expect(headers.values(for: "x-a") == ["3"])
        headers["x-A"] = nil
        #expect(!headers.contains("X-A"))
        #expect(headers.count == 1)
    }

    @Test func errorRendersTheOneShape() throws {
        let withField = HTTPError(
            .badRequest, code: "invalid_field", message: "wait must be 0…60 \"seconds\"", field: "wait")
        #expect(
            withField.response.bodyText
                == #"{"error":{"code":"invalid_field","message":"wait must be 0…60 \"seconds\"","field":"wait"}}"#)
        #expect(withField.response.headers["Content-Type"] == "application/json")
        let json = try withField.response.json()
        #expect(json["error"]?["field"] == "wait")
        let withoutField = HTTPError.notFound("no such tenant")
        #expect(try withoutField.response.json() == ["error": ["code": "not_found", "message": "no such tenant"]])
        let unavailable = HTTPError.serviceUnavailable("database unreachable")
        #expect(unavailable.response.status.code == 503)
    }

    @Test func responseHelpers() throws {
        var writer = JSONWriter()
        writer.beginObject()
        writer.field("version", 42)
        writer.endObject()
        let fromWriter = HTTPResponse.json(bytes: writer.bytes, headers: ["ETag": "\"42\""])
        #expect(fromWriter.bodyText == #"{"version":42}"#)
        #expect(fromWriter.headers["etag"] == "\"42\"")
        #expect(fromWriter.headers["content-type"] == "application/json")

        struct Tenant: Encodable {
            var id: String
            var rpm: Double
        }
        let encoded = try HTTPResponse.json(encoding: Tenant(id: "acme", rpm: 120), status: .created)
        #expect(encoded.status == .created)
        #expect(encoded.bodyText == #"{"id":"acme","rpm":120}"#)
        #expect(HTTPResponse.text("hi").headers["Content-Type"] == "text/plain; charset=utf-8")
    }
}
