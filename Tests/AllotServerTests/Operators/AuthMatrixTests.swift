import AllotCrypto
import AllotHTTP
import AllotJSON
import AllotLog
import AllotServer
import AllotStore
import Foundation
import Synchronization
import Testing

/// Authentication and authorisation of the whole service (SPEC 8, 9), live over loopback against
/// `AllotService` as `allot serve` runs it.
@Suite struct AuthMatrixTests {
    /// SPEC 9's role column, route by route. Every route the service registers must be listed here
    /// (a new route fails the matrix until its roles are decided), and must grant exactly these.
    static let specRoles: [String: Set<Role>?] = {
        let operators: Set<Role> = [.operator, .sre, .admin]
        let sre: Set<Role> = [.sre, .admin]
        let everyone = Set(Role.allCases)
        return [
            "GET /healthz": nil, "GET /readyz": nil, "GET /metrics": nil, "GET /openapi.json": nil, "GET /": nil,
            "POST /v1/telemetry": [.gateway, .admin], "GET /v1/snapshot": everyone,
            "GET /v1/gateways": operators, "GET /v1/upstreams": operators, "GET /v1/tenants": operators,
            "GET /v1/tenants/{id}": operators, "PUT /v1/tenants/{id}/override": operators,
            "DELETE /v1/tenants/{id}/override": operators, "POST /v1/tenants/{id}/bursts": everyone,
            "GET /v1/tenants/{id}/bursts": everyone, "GET /v1/proposals": sre,
            "POST /v1/proposals/{id}/approve": sre, "POST /v1/proposals/{id}/reject": sre, "POST /v1/plan": sre,
            "GET /v1/alerts": operators, "GET /v1/audit": sre, "GET /v1/costs": operators,
            "GET /v1/tokens": [.admin], "POST /v1/tokens": [.admin], "DELETE /v1/tokens/{id}": [.admin],
            "POST /v1/drain": [.admin], "DELETE /v1/drain": [.admin],
            // Not in SPEC 9: a gateway says it leaves as it stops; an SRE retires one that will not come back.
            "DELETE /v1/gateways/{id}": [.gateway, .sre, .admin],
        ]
    }()

    struct Running {
        let service: AllotService
        let client: HTTPClient
        let tokens: [Role: String]
        let directory: String
        let announced: [String]
        let logs: CapturingLogSink

        func send(_ method: HTTPMethod, _ path: String, token: String?, body: String = "") async throws
            -> HTTPClientResponse
        {
            var headers: HTTPHeaders = [:]
            if let token { headers["Authorization"] = "Bearer \(token)" }
            if !body.isEmpty { headers["Content-Type"] = "application/json" }
            return try await client.execute(
                HTTPClientRequest(
                    method: method, url: "http://127.0.0.1:\(service.port)\(path)", headers: headers,
                    body: Array(body.utf8)))
        }

        func stop() async {
            await client.shutdown()
            await service.shutdown(gracePeriod: .seconds(1))
        }
    }

    static func start() async throws -> Running {
        let directory = NSTemporaryDirectory() + "allot-auth-\(UUID().uuidString)"
        let announced = Mutex<[String]>([])
        let logs = CapturingLogSink()
        let service = try await AllotService.start(
            ServeConfiguration(port: 0, dataDirectory: directory, policies: .embedded),
            logger: Logger(label: "allot", minimumLevel: .debug, sink: logs),
            announce: { line in announced.withLock { $0.append(line) } })
        let notice = announced.withLock { $0 }
        var tokens: [Role: String] = [:]
        tokens[.admin] = try String(contentsOfFile: directory + "/admin-token", encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        for role in [Role.gateway, .operator, .sre] {
            tokens[role] = try await service.context.operators.issuer.create(
                name: "\(role.rawValue)-bot", role: role.rawValue, actor: .cli, now: Date().timeIntervalSince1970
            ).secret
        }
        return Running(
            service: service, client: try HTTPClient(), tokens: tokens, directory: directory, announced: notice,
            logs: logs)
    }

    @Test func everyRouteTimesEveryRoleAndNoToken() async throws {
        let running = try await Self.start()
        let routes = running.service.access.sorted { $0.key.description < $1.key.description }
        #expect(routes.count >= 20)
        let stranger = try APIToken.generate()  // well-formed, unknown
        for (route, rule) in routes {
            let name = "\(route.method.rawValue) \(route.pattern)"
            guard let expected = Self.specRoles[name] else {
                Issue.record("\(name) is not in the SPEC 9 role table of AuthMatrixTests: decide its roles")
                continue
            }
            #expect(rule.isPublic == (expected == nil), "\(name) public")
            if let expected { #expect(rule.allowed == expected, "\(name) roles") }
            let path = route.pattern.replacingOccurrences(of: "{id}", with: "acme")

            let anonymous = try await running.send(route.method, path, token: nil)
            let unknown = try await running.send(route.method, path, token: stranger)
            if rule.isPublic {
                #expect(![401, 403].contains(anonymous.status.code), "\(name) without a token")
            } else {
                #expect(anonymous.status == .unauthorized, "\(name) without a token")
                #expect(anonymous.headers["WWW-Authenticate"] == "Bearer", "\(name)")
                #expect(unknown.status == .unauthorized, "\(name) with an unknown token")
            }
            for role in Role.allCases {
                let response = try await running.send(route.method, path, token: running.tokens[role])
                if rule.isPublic || rule.allowed.contains(role) {
                    #expect(![401, 403].contains(response.status.code), "\(name) as \(role): \(response.status)")
                } else {
                    #expect(response.status == .forbidden, "\(name) as \(role)")
                    let error = try JSON.parse(response.body)["error"]
                    #expect(error?["code"] == "forbidden")
                }
            }
        }
        await running.stop()
    }

    /// A gateway token limited to `gw-eu-*` (`gateway_scope`, made over `POST /v1/tokens`) reports, polls and
    /// leaves as those gateways only: another gateway's event refuses the whole batch (`403 gateway_out_of_scope`
    /// naming it, nothing stored), as do a poll and a leave as another gateway; an SRE is not limited.
    @Test func aScopedGatewayTokenSpeaksOnlyForItsGateways() async throws {
        let running = try await Self.start()
        let admin = try #require(running.tokens[.admin])
        let refused = try await running.send(
            .post, "/v1/tokens", token: admin, body: #"{"name":"ops","role":"operator","gateway_scope":"gw-eu-*"}"#)
        #expect(refused.status == .badRequest)
        #expect(try JSON.parse(refused.body)["error"]?["field"] == "gateway_scope")
        let malformed = try await running.send(
            .post, "/v1/tokens", token: admin, body: #"{"name":"eu","role":"gateway","gateway_scope":"gw eu*"}"#)
        #expect(try JSON.parse(malformed.body)["error"]?["field"] == "gateway_scope")
        let created = try await running.send(
            .post, "/v1/tokens", token: admin, body: #"{"name":"eu","role":"gateway","gateway_scope":"gw-eu-*"}"#)
        #expect(created.status == .created)
        let body = try JSON.parse(created.body)
        #expect(body["gateway_scope"] == "gw-eu-*")
        let token = try #require(body["token"]?.stringValue)

        let now = Int64(Date().timeIntervalSince1970 * 1000)
        func event(_ gateway: String) -> String {
            #"{"ts":\#(now),"gateway":"\#(gateway)","tenant":"acme","upstream":"openai/gpt-4o","outcome":"ok"}"#
        }
        let mixed = try await running.send(
            .post, "/v1/telemetry", token: token, body: "[\(event("gw-eu-1")),\(event("gw-us-1"))]")
        #expect(mixed.status == .forbidden)
        let error = try JSON.parse(mixed.body)["error"]
        #expect(error?["code"] == "gateway_out_of_scope")
        #expect(error?["field"] == "[1].gateway")
        #expect(
            error?["message"]
                == "event 1: field 'gateway': this token may speak only for gateways gw-eu-*, not gw-us-1")
        // Nothing of the refused batch was stored: the next batch's event is the first.
        let stored = try await running.send(.post, "/v1/telemetry", token: token, body: "[\(event("gw-eu-1"))]")
        #expect(stored.status == .ok)
        #expect(try JSON.parse(stored.body)["first_id"] == 1)

        let poll = try await running.send(.get, "/v1/snapshot?gateway=gw-us-1", token: token)
        #expect(poll.status == .forbidden)
        #expect(try JSON.parse(poll.body)["error"]?["field"] == "gateway")
        #expect(try await running.send(.get, "/v1/snapshot?gateway=gw-eu-1", token: token).status == .ok)
        // Nor the global view, which lists every gateway's tenants (outside evaluation round 20).
        let global = try await running.send(.get, "/v1/snapshot", token: token)
        #expect(global.status == .forbidden)
        #expect(try JSON.parse(global.body)["error"]?["code"] == "gateway_out_of_scope")
        #expect(try JSON.parse(global.body)["error"]?["field"] == "gateway")
        let leave = try await running.send(.delete, "/v1/gateways/gw-us-1", token: token)
        #expect(leave.status == .forbidden)
        #expect(try JSON.parse(leave.body)["error"]?["field"] == "id")
        #expect(try await running.send(.delete, "/v1/gateways/gw-eu-1", token: token).status == .ok)
        // Not limited: the unscoped gateway token and an SRE.
        let any = try #require(running.tokens[.gateway])
        #expect(try await running.send(.get, "/v1/snapshot?gateway=gw-us-1", token: any).status == .ok)
        #expect(try await running.send(.get, "/v1/snapshot", token: any).status == .ok)
        // A scope of `*` covers every gateway: the global view too.
        let everything = try await running.send(
            .post, "/v1/tokens", token: admin, body: #"{"name":"all","role":"gateway","gateway_scope":"*"}"#)
        let wide = try #require(try JSON.parse(everything.body)["token"]?.stringValue)
        #expect(try await running.send(.get, "/v1/snapshot", token: wide).status == .ok)
        let sre = try #require(running.tokens[.sre])
        #expect(try await running.send(.delete, "/v1/gateways/gw-us-1", token: sre).status == .ok)
        let listed = try JSON.parse(try await running.send(.get, "/v1/tokens", token: admin).body)
        #expect(
            listed["tokens"]?.arrayValue?.compactMap { $0["gateway_scope"]?.stringValue } == ["gw-eu-*", "*"])
        await running.stop()
    }

    /// A person reading a gateway's slice (`operator`, `sre`) registers nothing: an operator's look brought back a
    /// gateway an SRE had removed and moved slices to it (outside evaluation round 22). A gateway's or an admin's
    /// poll registers the gateway.
    @Test func onlyAGatewaysOwnPollRegistersIt() async throws {
        let running = try await Self.start()
        func gateways() async throws -> [String] {
            let admin = try #require(running.tokens[.admin])
            let listed = try JSON.parse(try await running.send(.get, "/v1/gateways", token: admin).body)
            return listed["gateways"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
        }
        // The service's first tick publishes on its real clock: wait for it (bounded), or a read is 503.
        for _ in 0..<4000 where running.service.context.operators.loop?.publisher.current == nil {
            try await Task.sleep(for: .milliseconds(5))
        }
        for role in [Role.operator, .sre] {
            let token = try #require(running.tokens[role])
            let read = try await running.send(.get, "/v1/snapshot?gateway=gw-look-\(role.rawValue)", token: token)
            #expect(read.status == .ok)
        }
        #expect(try await gateways().isEmpty)
        let gatewayToken = try #require(running.tokens[.gateway])
        let adminToken = try #require(running.tokens[.admin])
        #expect(try await running.send(.get, "/v1/snapshot?gateway=gw-1", token: gatewayToken).status == .ok)
        #expect(try await running.send(.get, "/v1/snapshot?gateway=gw-2", token: adminToken).status == .ok)
        #expect(try await gateways() == ["gw-1", "gw-2"])
        await running.stop()
    }

    @Test func malformedAndRevokedTokensAreRefused() async throws {
        let running = try await Self.start()
        for header in ["Basic abc", "Bearer", "Bearer not-a-token", "bearer " + String(repeating: "a", count: 58)] {
            let response = try await running.client.execute(
                HTTPClientRequest(
                    url: "http://127.0.0.1:\(running.service.port)/v1/tenants", headers: ["Authorization": header]))
            #expect(response.status == .unauthorized, "\(header)")
            #expect(!String(decoding: response.body, as: UTF8.self).contains("not-a-token"))
        }
        let operatorToken = try #require(running.tokens[.operator])
        #expect(try await running.send(.get, "/v1/tenants", token: operatorToken).status == .ok)
        // The header twice, even with two good tokens, is refused: which one counts is where a proxy and the
        // server could disagree.
        var twice = HTTPHeaders()
        twice.add(name: "Authorization", value: "Bearer \(operatorToken)")
        twice.add(name: "Authorization", value: "Bearer \(try #require(running.tokens[.admin]))")
        let doubled = try await running.client.execute(
            HTTPClientRequest(url: "http://127.0.0.1:\(running.service.port)/v1/tenants", headers: twice))
        #expect(doubled.status == .unauthorized)
        #expect(try JSON.parse(doubled.body)["error"]?["message"] == "send one Authorization header, not several")
        let listing = try await running.send(.get, "/v1/tokens", token: running.tokens[.admin])
        let tokens = try #require(try JSON.parse(listing.body)["tokens"]?.arrayValue)
        #expect(!String(decoding: listing.body, as: UTF8.self).contains(operatorToken))
        let id = try #require(tokens.first { $0["name"] == "operator-bot" }?["id"]?.stringValue)
        let revoked = try await running.send(.delete, "/v1/tokens/\(id)", token: running.tokens[.admin])
        #expect(revoked.status == .ok)
        // Revocation through this process applies to the very next request (no cache delay).
        let refused = try await running.send(.get, "/v1/tenants", token: operatorToken)
        #expect(refused.status == .unauthorized)
        #expect(try JSON.parse(refused.body)["error"]?["message"] == "unknown or revoked token")
        await running.stop()
    }

    /// Over HTTP the last admin token in force cannot be revoked (outside evaluation round 27: an admin revoked its
    /// only token and HTTP administration was gone until someone on the host made another); the CLI still can.
    @Test func theLastAdminTokenInForceIsNotRevokedOverHTTP() async throws {
        let running = try await Self.start()
        let admin = try #require(running.tokens[.admin])
        func adminIDs(_ token: String) async throws -> [String] {
            let listing = try await running.send(.get, "/v1/tokens", token: token)
            return try #require(try JSON.parse(listing.body)["tokens"]?.arrayValue).filter {
                $0["role"] == "admin" && $0["revoked"] == false
            }.compactMap { $0["id"]?.stringValue }
        }
        let first = try #require(try await adminIDs(admin).first)
        let refused = try await running.send(.delete, "/v1/tokens/\(first)", token: admin)
        #expect(refused.status == .conflict)
        let error = try JSON.parse(refused.body)["error"]
        #expect(error?["code"] == "last_admin_token")
        #expect(error?["field"] == "id")
        #expect(
            error?["message"]?.stringValue
                == "token \(first) is the last admin token in force: create another admin token first "
                + "(POST /v1/tokens), or revoke it on the host with `allot tokens revoke \(first)`")
        #expect(try await running.send(.get, "/v1/tokens", token: admin).status == .ok)

        // With a second admin token the first goes; then the second is the last.
        let created = try await running.send(
            .post, "/v1/tokens", token: admin, body: #"{"name":"second-admin","role":"admin"}"#)
        #expect(created.status == .created)
        let second = try #require(try JSON.parse(created.body)["token"]?.stringValue)
        #expect(try await running.send(.delete, "/v1/tokens/\(first)", token: second).status == .ok)
        let secondID = try #require(try await adminIDs(second).first)
        #expect(try await running.send(.delete, "/v1/tokens/\(secondID)", token: second).status == .conflict)
        // The host's CLI path (no keeping) still revokes it.
        let revoked = try await running.service.context.operators.issuer.revoke(
            id: secondID, actor: .cli, now: Date().timeIntervalSince1970)
        #expect(revoked?.changed == true)
        await running.stop()
    }

    @Test func firstStartWritesTheAdminTokenOnceAndTheDatabaseNeverHoldsATokenOrLogsIt() async throws {
        let running = try await Self.start()
        let admin = try #require(running.tokens[.admin])
        #expect(APIToken.isWellFormed(admin))
        #expect(running.announced.count == 1)
        #expect(running.announced.first?.contains(admin) == true)
        let attributes = try FileManager.default.attributesOfItem(atPath: running.directory + "/admin-token")
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        // Use every token, so last_used and the cache have seen them.
        for token in running.tokens.values { _ = try await running.send(.get, "/v1/alerts", token: token) }
        await running.stop()

        // A restart neither creates another admin token nor touches the file.
        let again = Mutex<[String]>([])
        let service = try await AllotService.start(
            ServeConfiguration(port: 0, dataDirectory: running.directory, policies: .embedded), logger: .disabled,
            announce: { line in again.withLock { $0.append(line) } })
        #expect(try await service.context.operators.tokens.count() == 4)
        await service.shutdown(gracePeriod: .seconds(1))
        #expect(again.withLock { $0 }.isEmpty)
        #expect(
            try String(contentsOfFile: running.directory + "/admin-token", encoding: .utf8) == admin + "\n")

        // Scan every byte of the database files: hashes yes, tokens never.
        var bytes: [UInt8] = []
        for file in try FileManager.default.contentsOfDirectory(atPath: running.directory)
        where file.hasPrefix("allot.sqlite") {
            bytes += Array(try Data(contentsOf: URL(fileURLWithPath: running.directory + "/" + file)))
        }
        #expect(bytes.count > 10_000)
        func contains(_ needle: String) -> Bool {
            let pattern = Array(needle.utf8)
            guard pattern.count <= bytes.count else { return false }
            return (0...(bytes.count - pattern.count)).contains { start in
                bytes[start] == pattern[0] && Array(bytes[start..<(start + pattern.count)]) == pattern
            }
        }
        for token in running.tokens.values {
            #expect(!contains(token))
            #expect(!contains(String(token.dropFirst(APIToken.prefix.count))))
            #expect(contains(APIToken.storageHash(of: token)))
        }
        let logs = running.logs.lines.joined(separator: "\n")
        #expect(!logs.isEmpty)
        for token in running.tokens.values { #expect(!logs.contains(token)) }
        // The request log (debug) writes its numbers as JSON numbers, not strings.
        let requests = running.logs.lines.filter { $0.contains(#""request""#) && $0.contains(#""route":"#) }
        #expect(!requests.isEmpty)
        for line in requests {
            let fields = try JSON.parse(Array(line.utf8))
            #expect(fields["status"]?.int64Value != nil, "\(line)")
            #expect(fields["duration_ms"]?.doubleValue != nil, "\(line)")
        }
    }

    /// `allot tokens create` before the first `allot serve` (the README's order for a gateway token)
    /// must not cost the admin token: serve creates it whenever the database holds no admin token.
    @Test func tokensCreatedBeforeTheFirstStartStillGetTheAdminTokenCreatedOnce() async throws {
        let directory = NSTemporaryDirectory() + "allot-auth-\(UUID().uuidString)"
        let (pool, _) = try await DataDirectory(path: directory).openDatabase()
        let early = try await TokenIssuer(store: TokenStore(pool: pool)).create(
            name: "cs-team", role: "operator", actor: .cli, now: Date().timeIntervalSince1970)
        await pool.close()

        let announced = Mutex<[String]>([])
        let service = try await AllotService.start(
            ServeConfiguration(port: 0, dataDirectory: directory, policies: .embedded), logger: .disabled,
            announce: { line in announced.withLock { $0.append(line) } })
        let notices = announced.withLock { $0 }
        let admin = try String(contentsOfFile: directory + "/admin-token", encoding: .utf8)
        #expect(admin.hasSuffix("\n"))
        let secret = admin.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(APIToken.isWellFormed(secret))
        #expect(notices.count == 1)
        #expect(notices.first?.hasPrefix("allot: created the first admin token (shown once): \(secret)\n") == true)
        // How to make more names this server's data directory (outside evaluation round 36: without it the CLI wrote
        // to ./allot-data, and the server refused the token).
        #expect(
            notices.first?.hasSuffix(
                " Create more with `allot tokens create --role ROLE --name NAME --data \(directory)`.") == true,
            "\(notices)")
        let attributes = try FileManager.default.attributesOfItem(atPath: directory + "/admin-token")
        #expect((attributes[.posixPermissions] as? NSNumber)?.intValue == 0o600)
        let records = try await service.context.operators.tokens.all()
        #expect(records.map(\.role).sorted() == ["admin", "operator"])
        #expect(records.first { $0.role == "operator" }?.id == early.record.id)
        let principal = try await service.context.operators.authenticator.authenticate(
            HTTPRequest(target: "/v1/tokens", headers: ["Authorization": "Bearer \(secret)"]))
        #expect(principal.role == .admin)
        await service.shutdown(gracePeriod: .seconds(1))

        // A restart finds the admin token and creates none.
        let again = Mutex<[String]>([])
        let restarted = try await AllotService.start(
            ServeConfiguration(port: 0, dataDirectory: directory, policies: .embedded), logger: .disabled,
            announce: { line in again.withLock { $0.append(line) } })
        #expect(try await restarted.context.operators.tokens.count() == 2)
        await restarted.shutdown(gracePeriod: .seconds(1))
        #expect(again.withLock { $0 }.isEmpty)
    }
}
