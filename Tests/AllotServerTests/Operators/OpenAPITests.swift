import AllotAssets
import AllotHTTP
import AllotJSON
import AllotServer
import AllotStore
import Foundation
import Testing

/// `GET /openapi.json` (SPEC 9): one OpenAPI 3.1 document that describes exactly the routes the
/// service registers, whose examples — and the server's real responses — satisfy its schemas.
@Suite struct OpenAPITests {
    static let document: JSON = {
        let bytes = AllotAssets.file("openapi.json")?.bytes ?? []
        return (try? JSON.parse(bytes)) ?? .null
    }()

    /// Routes the document describes before the service registers them (owned by other parts of the
    /// service that land separately). Empty once everything has landed.
    static let documentedAhead: Set<String> = []

    static var documentedRoutes: Set<String> {
        var routes = Set<String>()
        for (path, item) in document["paths"]?.objectValue ?? JSONObject() {
            for (method, _) in item.objectValue ?? JSONObject() { routes.insert("\(method.uppercased()) \(path)") }
        }
        return routes
    }

    @Test func theDocumentIsOpenAPI31WithBearerSecurityAndTheErrorSchema() {
        let document = Self.document
        #expect(document["openapi"] == "3.1.0")
        #expect(document["components"]?["securitySchemes"]?["bearer"]?["scheme"] == "bearer")
        #expect(document["security"] == [["bearer": []]])
        #expect(
            document["components"]?["schemas"]?["Error"]?["properties"]?["error"]?["required"] == ["code", "message"])
    }

    @Test func everyRegisteredRouteIsDocumentedAndNothingElse() async throws {
        let directory = NSTemporaryDirectory() + "allot-openapi-\(UUID().uuidString)"
        let service = try await AllotService.start(
            ServeConfiguration(port: 0, dataDirectory: directory, policies: .embedded), logger: .disabled)
        let registered = Set(service.access.keys.map { "\($0.method.rawValue) \($0.pattern)" })
        // Served as the embedded file, byte for byte.
        let client = try HTTPClient()
        let served = try await client.get("http://127.0.0.1:\(service.port)/openapi.json")
        await client.shutdown()
        await service.shutdown(gracePeriod: .seconds(1))
        #expect(served.status == .ok)
        #expect(served.body == AllotAssets.file("openapi.json")?.bytes)

        let documented = Self.documentedRoutes
        let missing = registered.subtracting(documented)
        #expect(missing.isEmpty, "registered but not documented: \(missing.sorted())")
        let extra = documented.subtracting(registered).subtracting(Self.documentedAhead)
        #expect(extra.isEmpty, "documented but not registered: \(extra.sorted())")
        // Protected routes declare 401 and 403; public ones declare no security.
        for (route, rule) in service.access {
            let operation = Self.document["paths"]?[route.pattern]?[route.method.rawValue.lowercased()]
            if rule.isPublic {
                #expect(operation?["security"] == [], "\(route)")
            } else {
                #expect(operation?["responses"]?["401"] != nil, "\(route)")
                #expect(operation?["responses"]?["403"] != nil, "\(route)")
            }
        }
    }

    @Test func everyExampleSatisfiesItsSchema() throws {
        let validator = SchemaValidator(document: Self.document)
        var checked = 0
        for (path, item) in Self.document["paths"]?.objectValue ?? JSONObject() {
            for (method, operation) in item.objectValue ?? JSONObject() {
                var media: [(String, JSON)] = []
                for (status, response) in operation["responses"]?.objectValue ?? JSONObject() {
                    let resolved = response["$ref"]?.stringValue.flatMap(validator.resolve) ?? response
                    for (type, content) in resolved["content"]?.objectValue ?? JSONObject() {
                        media.append(("\(method) \(path) \(status) \(type)", content))
                    }
                }
                for (type, content) in operation["requestBody"]?["content"]?.objectValue ?? JSONObject() {
                    media.append(("\(method) \(path) body \(type)", content))
                }
                for (name, content) in media {
                    guard let example = content["example"], let schema = content["schema"] else { continue }
                    checked += 1
                    let problems = validator.validate(example, against: schema)
                    #expect(problems.isEmpty, "\(name): \(problems.prefix(5))")
                }
            }
        }
        #expect(checked >= 40)
        // The validator does catch violations.
        let error = JSON.object(["error": ["code": "x"]])
        #expect(!validator.validate(error, against: ["$ref": "#/components/schemas/Error"]).isEmpty)
    }

    /// The server's actual answers, not only the examples, satisfy the documented schemas.
    @Test func realResponsesSatisfyTheirSchemas() async throws {
        let harness = try await OperatorHarness.make()
        await harness.classifier.setStarved(["beta"])
        await harness.tick()
        await harness.tick()
        let proposed = await harness.send(
            .put, "/v1/tenants/example-premium/override", as: .operator,
            json: #"{"ceiling":{"rpm":5},"reason":"cap","ttl_s":600}"#)
        let applied = await harness.send(
            .put, "/v1/tenants/beta/override", as: .operator, json: #"{"weight":2,"reason":"x","ttl_s":600}"#)
        let burst = await harness.send(
            .post, "/v1/tenants/beta/bursts", as: .operator, json: #"{"calls":5,"ttl_s":60}"#)
        await harness.tick()
        let engine = await harness.send(.get, "/v1/proposals?source=engine", as: .sre)
        let id = engine.jsonBody["proposals"]?[0]?["id"]?.stringValue ?? "-"
        let token = await harness.send(.post, "/v1/tokens", as: .admin, json: #"{"name":"n","role":"sre"}"#)
        let tokenID = token.jsonBody["id"]?.stringValue ?? "-"
        _ = await harness.loop.publisher.poll(gateway: "gw-1", condition: .none, wait: 0)
        let responses: [(String, String, HTTPResponse)] = [
            ("/v1/tenants/{id}/override", "put", proposed), ("/v1/tenants/{id}/override", "put", applied),
            ("/v1/tenants/{id}/bursts", "post", burst), ("/v1/proposals", "get", engine),
            ("/v1/tokens", "post", token),
            ("/v1/tenants", "get", await harness.send(.get, "/v1/tenants", as: .operator)),
            ("/v1/tenants/{id}", "get", await harness.send(.get, "/v1/tenants/acme", as: .operator)),
            ("/v1/tenants/{id}", "get", await harness.send(.get, "/v1/tenants/beta", as: .operator)),
            ("/v1/tenants/{id}", "get", await harness.send(.get, "/v1/tenants/example-free", as: .operator)),
            ("/v1/tenants/{id}", "get", await harness.send(.get, "/v1/tenants/nobody", as: .operator)),
            ("/v1/tenants/{id}/bursts", "get", await harness.send(.get, "/v1/tenants/beta/bursts", as: .operator)),
            ("/v1/proposals/{id}/approve", "post", await harness.send(.post, "/v1/proposals/\(id)/approve", as: .sre)),
            ("/v1/proposals/{id}/approve", "post", await harness.send(.post, "/v1/proposals/\(id)/approve", as: .sre)),
            ("/v1/proposals/{id}/reject", "post", await harness.send(.post, "/v1/proposals/p-x/reject", as: .sre)),
            ("/v1/tenants/{id}/override", "delete", await harness.send(.delete, "/v1/tenants/beta/override", as: .sre)),
            ("/v1/upstreams", "get", await harness.send(.get, "/v1/upstreams?history_minutes=5", as: .operator)),
            ("/v1/gateways", "get", await harness.send(.get, "/v1/gateways", as: .operator)),
            ("/v1/gateways/{id}", "delete", await harness.send(.delete, "/v1/gateways/gw-1", as: .gateway)),
            ("/v1/gateways/{id}", "delete", await harness.send(.delete, "/v1/gateways/gw-1", as: .gateway)),
            ("/v1/alerts", "get", await harness.send(.get, "/v1/alerts", as: .operator)),
            ("/v1/audit", "get", await harness.send(.get, "/v1/audit", as: .sre)),
            ("/v1/costs", "get", await harness.send(.get, "/v1/costs", as: .operator)),
            ("/v1/tokens", "get", await harness.send(.get, "/v1/tokens", as: .admin)),
            ("/v1/tokens/{id}", "delete", await harness.send(.delete, "/v1/tokens/\(tokenID)", as: .admin)),
            ("/v1/tenants", "get", await harness.send(.get, "/v1/tenants?sort=bogus", as: .operator)),
            ("/v1/tenants", "get", await harness.send(.get, "/v1/tenants", as: nil)),
            ("/v1/audit", "get", await harness.send(.get, "/v1/audit", as: .operator)),
        ]
        let validator = SchemaValidator(document: Self.document)
        for (path, method, response) in responses {
            let operation = Self.document["paths"]?[path]?[method]
            var declared = operation?["responses"]?[String(response.status.code)]
            #expect(declared != nil, "\(method) \(path): status \(response.status.code) not documented")
            if let reference = declared?["$ref"]?.stringValue { declared = validator.resolve(reference) }
            guard let schema = declared?["content"]?["application/json"]?["schema"] else { continue }
            let problems = validator.validate(response.jsonBody, against: schema)
            #expect(problems.isEmpty, "\(method) \(path) \(response.status.code): \(problems.prefix(5))")
        }
        await harness.close()
    }
}
