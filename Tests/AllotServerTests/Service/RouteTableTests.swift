import AllotHTTP
import Synchronization
import Testing

@testable import AllotServer

/// The route table authenticates before the handler, and once more after a held request (a long-poll): a token
/// revoked while the request waited gets `401`, not one more answer (outside evaluation round 22).
@Suite struct RouteTableTests {
    /// Accepts the gateway token until it is revoked.
    final class Tokens: Authenticator {
        let revoked = Mutex(false)

        func authenticate(_ request: HTTPRequest) async throws(HTTPError) -> Principal {
            guard !revoked.withLock({ $0 }) else {
                throw HTTPError(.unauthorized, code: "invalid_token", message: "unknown or revoked token")
            }
            return Principal(tokenID: "tok-1", name: "gw", role: .gateway)
        }
    }

    @Test func aTokenRevokedWhileARequestWasHeldGets401() async throws {
        let tokens = Tokens()
        var table = RouteTable(authenticator: tokens)
        // The handler stands for a long-poll during which the token is revoked.
        let revokeWhileHeld: AuthorizedHandler = { _, _ in
            tokens.revoked.withLock { $0 = true }
            return .json(["version": 2])
        }
        table.get("/held", Access([.gateway]), held: { $0.queryValue("wait") != nil }, revokeWhileHeld)
        table.get("/plain", Access([.gateway]), revokeWhileHeld)

        let held = await table.router.respond(to: HTTPRequest(method: .get, target: "/held?wait=30"))
        #expect(held.status == .unauthorized)
        tokens.revoked.withLock { $0 = false }
        // Not held (no wait): answered as authenticated when it arrived.
        let quick = await table.router.respond(to: HTTPRequest(method: .get, target: "/held"))
        #expect(quick.status == .ok)
        tokens.revoked.withLock { $0 = false }
        let plain = await table.router.respond(to: HTTPRequest(method: .get, target: "/plain?wait=30"))
        #expect(plain.status == .ok)
    }

    @Test func theSnapshotRouteCountsAsHeldOnlyWithAWait() {
        #expect(SnapshotRoute.isLongPoll(HTTPRequest(method: .get, target: "/v1/snapshot?wait=30")))
        #expect(SnapshotRoute.isLongPoll(HTTPRequest(method: .get, target: "/v1/snapshot?gateway=g&wait=0.5")))
        #expect(!SnapshotRoute.isLongPoll(HTTPRequest(method: .get, target: "/v1/snapshot?wait=0")))
        #expect(!SnapshotRoute.isLongPoll(HTTPRequest(method: .get, target: "/v1/snapshot")))
        #expect(!SnapshotRoute.isLongPoll(HTTPRequest(method: .get, target: "/v1/snapshot?wait=abc")))
    }
}
