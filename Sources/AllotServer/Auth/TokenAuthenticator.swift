import AllotCrypto
import AllotHTTP
import AllotLog
import AllotMetrics
import AllotStore
import AllotTime
import Synchronization

/// Bearer-token authentication against the `api_tokens` table (SPEC 8).
///
/// A presented token is checked for shape first (garbage costs no database lookup), hashed with
/// SHA-256 and looked up by that hash; the stored hash is then compared with the computed one in
/// constant time. Looking a row up by the hash through an index is not constant-time, and need not
/// be: what it could leak is how the *hash* of a guess relates to stored hashes, which says nothing
/// about any token (finding a token from its hash is a SHA-256 preimage).
///
/// Valid and revoked tokens are cached by hash for ``cacheSeconds`` (1 s by default), so a busy
/// gateway does not cost a database read per request, while a revocation made by another process
/// (`allot tokens revoke`) takes effect within that second; one made through this process
/// (`DELETE /v1/tokens/{id}`) calls ``invalidate(tokenID:)`` and takes effect at once. Unknown
/// tokens are never cached, so guessing cannot fill memory.
///
/// Nothing here logs, stores or echoes a token: errors say only that it was missing, malformed,
/// unknown or revoked.
public final class TokenAuthenticator: Authenticator {
    private struct Cached {
        var principal: Principal?
        var checkedAt: Double
        var touchedAt: Double?
    }

    public let tokens: TokenStore
    public let clock: any AllotClock
    /// How long a lookup result is reused, seconds.
    public let cacheSeconds: Double
    /// `last_used_ms` is written at most this often per token, seconds.
    public let touchIntervalSeconds: Double
    private let logger: Logger
    private let failures: CounterFamily?
    private let cache = Mutex<[String: Cached]>([:])
    private static let maxCached = 10_000

    /// - Parameters:
    ///   - tokens: The token table.
    ///   - clock: For the cache and `last_used_ms`.
    ///   - cacheSeconds: Default 1 s: revocation from another process is seen within it.
    ///   - touchIntervalSeconds: Default 60 s.
    ///   - metrics: Registers `allot_auth_failures_total{reason}` when given.
    public init(
        tokens: TokenStore, clock: any AllotClock, cacheSeconds: Double = 1, touchIntervalSeconds: Double = 60,
        metrics: MetricsRegistry? = nil, logger: Logger = .disabled
    ) {
        self.tokens = tokens
        self.clock = clock
        self.cacheSeconds = cacheSeconds
        self.touchIntervalSeconds = touchIntervalSeconds
        self.logger = logger
        failures = try? metrics?.counter(
            "allot_auth_failures_total",
            help: "Requests refused with 401, by reason (missing, malformed, unknown, revoked, unavailable).",
            labelNames: ["reason"])
    }

    public func authenticate(_ request: HTTPRequest) async throws(HTTPError) -> Principal {
        guard let token = request.bearerToken else {
            throw refuse(
                "missing",
                request.headers["Authorization"] == nil
                    ? "authentication required: send Authorization: Bearer TOKEN"
                    : request.headers.values(for: "Authorization").count > 1
                        ? "send one Authorization header, not several"
                        : "the Authorization header must be 'Bearer TOKEN'")
        }
        guard APIToken.isWellFormed(token) else {
            throw refuse("malformed", "invalid token: not an Allot API token")
        }
        let hash = APIToken.storageHash(of: token)
        let now = clock.now
        if let cached = cache.withLock({ $0[hash] }), now - cached.checkedAt < cacheSeconds {
            guard let principal = cached.principal else { throw refuse("revoked", "unknown or revoked token") }
            return principal
        }
        let found: (record: TokenRecord, storedHash: String)?
        do {
            found = try await tokens.token(hash: hash)
        } catch {
            failures?.labels(["unavailable"]).increment()
            logger.error("cannot read api_tokens to authenticate", ["error": .string("\(error)")])
            throw HTTPError.serviceUnavailable("cannot check the token now: the database is unavailable")
        }
        guard let found, ConstantTime.equals(found.storedHash, hash) else {
            throw refuse("unknown", "unknown or revoked token")
        }
        guard !found.record.isRevoked, let role = Role(rawValue: found.record.role) else {
            remember(hash, principal: nil, now: now)
            throw refuse("revoked", "unknown or revoked token")
        }
        let principal = Principal(
            tokenID: found.record.id, name: found.record.name, role: role,
            gatewayScope: role == .gateway ? found.record.gatewayScope : nil)
        let lastUsed = found.record.lastUsedMs.map { EpochTime.seconds(fromMilliseconds: $0) }
        let touch = remember(hash, principal: principal, now: now, lastUsed: lastUsed)
        if touch {
            let tokens = self.tokens
            let id = principal.tokenID
            Task.detached { try? await tokens.touch(id: id, atMs: EpochTime.milliseconds(fromSeconds: now)) }
        }
        return principal
    }

    /// Forgets every cached lookup of `tokenID`, so its revocation applies to the next request.
    public func invalidate(tokenID: String) {
        cache.withLock { cache in
            cache = cache.filter { $0.value.principal?.tokenID != tokenID }
        }
    }

    /// Caches a lookup; returns whether `last_used_ms` is due for a write.
    @discardableResult
    private func remember(_ hash: String, principal: Principal?, now: Double, lastUsed: Double? = nil) -> Bool {
        cache.withLock { cache in
            if cache.count >= Self.maxCached { cache.removeAll(keepingCapacity: true) }
            let touchedAt = cache[hash]?.touchedAt ?? lastUsed
            let due = principal != nil && (touchedAt.map { now - $0 >= touchIntervalSeconds } ?? true)
            cache[hash] = Cached(principal: principal, checkedAt: now, touchedAt: due ? now : touchedAt)
            return due
        }
    }

    private func refuse(_ reason: String, _ message: String) -> HTTPError {
        failures?.labels([reason]).increment()
        return HTTPError.unauthorized(message, code: reason == "missing" ? "unauthorized" : "invalid_token")
    }
}
