import AllotCrypto
import AllotHTTP
import AllotSQLite
@testable import AllotServer
import AllotStore
import AllotTime
import Dispatch
import Foundation
import Testing

/// Token authentication when the database fails or stalls (outside evaluation round 40: on a frozen filesystem
/// every authenticated request hung for the whole stall, the last good snapshot unserved): a token seen before is
/// answered from its last lookup, a token never seen gets 503 after the lookup timeout, and a revocation is still
/// seen within the cached second once the database answers.
@Suite struct TokenAuthenticatorTests {
    struct Fixture {
        let pool: DatabasePool
        let store: TokenStore
        let issuer: TokenIssuer
        let clock: ManualClock
        let authenticator: TokenAuthenticator

        /// A long lookup timeout: a busy machine must not turn a slow read into a `503` (a 0.1-s one did in CI).
        /// The short waits are made where a stall is made (and not waited out): the stale grace here, and the
        /// ``impatient`` authenticator's lookup timeout.
        static func make() async throws -> Fixture {
            let pool = try await StoreDatabase.temporary()
            let store = TokenStore(pool: pool)
            let clock = ManualClock(now: 1_795_000_000)
            let authenticator = TokenAuthenticator(
                tokens: store, clock: clock, staleGraceSeconds: 0.02, lookupTimeoutSeconds: 60)
            return Fixture(
                pool: pool, store: store, issuer: TokenIssuer(store: store), clock: clock,
                authenticator: authenticator)
        }

        /// Another authenticator on the same table, whose lookups of tokens it has not seen give up after 0.1 s.
        var impatient: TokenAuthenticator {
            TokenAuthenticator(tokens: store, clock: clock, staleGraceSeconds: 0.02, lookupTimeoutSeconds: 0.1)
        }

        func token(_ name: String, role: String = "gateway") async throws -> TokenIssuer.Issued {
            try await issuer.create(name: name, role: role, actor: .cli, now: clock.now)
        }

        func authenticate(
            _ secret: String, with other: TokenAuthenticator? = nil
        ) async -> Result<Principal, HTTPError> {
            do throws(HTTPError) {
                return .success(
                    try await (other ?? authenticator).authenticate(
                        HTTPRequest(target: "/v1/snapshot", headers: ["Authorization": "Bearer \(secret)"])))
            } catch {
                return .failure(error)
            }
        }

        /// Waits until no lookup runs (their answers are cached by then).
        func lookupsDone() async throws {
            for _ in 0..<10_000 where authenticator.runningLookups > 0 { try await Task.sleep(for: .milliseconds(1)) }
            #expect(authenticator.runningLookups == 0)
        }

        func stallReader(until release: DispatchSemaphore) async -> Task<Void, Never> {
            await stallReads(of: pool, until: release)
        }
    }

    @Test func aKnownTokenIsAnsweredFromItsLastLookupWhileTheDatabaseStalls() async throws {
        let fixture = try await Fixture.make()
        let known = try await fixture.token("gw-known")
        let stranger = try await fixture.token("gw-new")
        #expect(try await fixture.authenticate(known.secret).get().name == "gw-known")
        fixture.clock.advance(by: 5)  // past the cached second: the next request looks the token up again

        let release = DispatchSemaphore(value: 0)
        let stall = await fixture.stallReader(until: release)
        #expect(try await fixture.authenticate(known.secret).get().tokenID == known.record.id)
        // Answered from the cache for another second, without waiting again; then it waits its grace once more.
        #expect(try await fixture.authenticate(known.secret).get().tokenID == known.record.id)
        fixture.clock.advance(by: 5)
        #expect(try await fixture.authenticate(known.secret).get().tokenID == known.record.id)
        // A token never seen before cannot be vouched for: 503 after the lookup timeout, not a hang.
        let refused = await fixture.authenticate(stranger.secret, with: fixture.impatient)
        #expect(refused.failure?.status == .serviceUnavailable)
        #expect(
            refused.failure?.message == "cannot check the token now: the database has not answered for 0.1 s",
            "\(String(describing: refused.failure))")
        release.signal()
        await stall.value
        try await fixture.lookupsDone()

        // The database answers again: the stranger is known (its lookup finished after the stall), and a revocation
        // by another process is seen once the cached second has passed — at the latest by the request after the
        // lookup that one starts (a request waits for it only the grace).
        #expect(try await fixture.authenticate(stranger.secret).get().name == "gw-new")
        _ = try await fixture.issuer.revoke(id: known.record.id, actor: .cli, now: fixture.clock.now)
        fixture.clock.advance(by: 5)
        _ = await fixture.authenticate(known.secret)
        try await fixture.lookupsDone()
        let revoked = await fixture.authenticate(known.secret)
        #expect(revoked.failure?.status == .unauthorized)
        #expect(revoked.failure?.message == "unknown or revoked token")
    }

    /// While the database stalls, lookups of tokens never seen do not pile up: beyond `maxFlights` running, such a
    /// token gets `503` at once (a guess is enough to be well-formed), and a known token is still answered.
    @Test func lookupsWaitingForAStalledDatabaseAreBounded() async throws {
        let fixture = try await Fixture.make()
        let known = try await fixture.token("gw-known")
        #expect(try await fixture.authenticate(known.secret).get().name == "gw-known")
        fixture.clock.advance(by: 5)
        let release = DispatchSemaphore(value: 0)
        let stall = await fixture.stallReader(until: release)
        let guesses = try (0..<TokenAuthenticator.maxFlights).map { _ in try APIToken.generate() }
        let authenticator = fixture.authenticator
        // Each guess starts a lookup and waits for it (the lookup timeout is 60 s): all of them running at once.
        let waiting = Task {
            await withTaskGroup(of: Void.self) { group in
                for guess in guesses { group.addTask { _ = await fixture.authenticate(guess, with: authenticator) } }
            }
        }
        for _ in 0..<10_000 where authenticator.runningLookups < TokenAuthenticator.maxFlights {
            try await Task.sleep(for: .milliseconds(1))
        }
        #expect(authenticator.runningLookups == TokenAuthenticator.maxFlights)
        let refused = await fixture.authenticate(try APIToken.generate())
        #expect(refused.failure?.status == .serviceUnavailable)
        #expect(
            refused.failure?.message
                == "cannot check the token now: \(TokenAuthenticator.maxFlights) lookups are waiting for the database")
        #expect(try await fixture.authenticate(known.secret).get().name == "gw-known")
        release.signal()
        await stall.value
        await waiting.value
        try await fixture.lookupsDone()
    }

    @Test func aDatabaseErrorAnswersAKnownTokenFromItsLastLookupAndRefusesAnUnknownOne() async throws {
        let fixture = try await Fixture.make()
        let known = try await fixture.token("ops", role: "sre")
        let stranger = try await fixture.token("gw-new")
        #expect(try await fixture.authenticate(known.secret).get().role == .sre)
        // The table cannot be read: every lookup fails at once (the known token, waiting its grace, may be answered
        // before its lookup fails: from its last lookup either way).
        try await fixture.pool.write { try $0.execute("ALTER TABLE api_tokens RENAME TO api_tokens_away") }
        fixture.clock.advance(by: 5)
        #expect(try await fixture.authenticate(known.secret).get().role == .sre)
        let refused = await fixture.authenticate(stranger.secret)
        #expect(refused.failure?.status == .serviceUnavailable)
        #expect(refused.failure?.message == "cannot check the token now: the database is unavailable")
        try await fixture.pool.write { try $0.execute("ALTER TABLE api_tokens_away RENAME TO api_tokens") }
        fixture.clock.advance(by: 5)
        #expect(try await fixture.authenticate(stranger.secret).get().name == "gw-new")
    }
}

/// Holds `pool`'s reader connection (every read queues behind it) until `release` is signalled, as a stalled disk
/// does; returns once it is held, with the task that holds it.
func stallReads(of pool: DatabasePool, until release: DispatchSemaphore) async -> Task<Void, Never> {
    let held = DispatchSemaphore(value: 0)
    let task = Task {
        _ = try? await pool.read { _ in
            held.signal()
            release.wait()
        }
    }
    await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
        DispatchQueue.global().async {
            held.wait()
            done.resume()
        }
    }
    return task
}

extension Result {
    fileprivate var failure: Failure? {
        if case .failure(let error) = self { return error }
        return nil
    }
}
