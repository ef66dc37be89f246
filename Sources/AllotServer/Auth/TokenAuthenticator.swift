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
    /// Lookups by hash, and a count ``invalidate(tokenID:)`` raises: a lookup started before a revocation made here
    /// neither caches what it read nor vouches for the token afterwards. One lock, so that the check and the write
    /// are one step.
    private let cache = Mutex<(entries: [String: Cached], generation: Int)>(([:], 0))
    /// The lookup running for each hash, shared by the requests that wait for it, and the generation it began at.
    private let flights = Mutex<[String: Flight]>([:])
    private typealias Flight = (lookup: SharedResult<Lookup>, generation: Int)
    private static let maxCached = 10_000
    /// Lookups running at once at most: while the database stalls none finishes, and tokens never seen (a guess is
    /// enough to be well-formed) would each add one (review of round 40's fix); beyond, a token not cached gets `503`
    /// at once and a cached one its last answer.
    static let maxFlights = 256

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
        let cached = cache.withLock { $0.entries[hash] }
        if let cached, now - cached.checkedAt < cacheSeconds {
            guard let principal = cached.principal else { throw refuse("revoked", "unknown or revoked token") }
            return principal
        }
        // Twice at most: a lookup that began before a revocation made here since proves nothing, and one more is
        // started (the first request after a `DELETE /v1/tokens/{id}` could otherwise join a lookup from before it).
        var outcome: Lookup?
        var full = false
        for _ in 0..<2 {
            guard let flight = flight(for: hash, now: now) else {
                full = true
                break
            }
            outcome = await flight.lookup.wait(seconds: cached == nil ? lookupTimeoutSeconds : staleGraceSeconds)
            guard case .found = outcome, cache.withLock({ $0.generation }) != flight.generation else { break }
            outcome = .unavailable
        }
        switch outcome {
        case .found(let principal):
            return principal
        case .revoked:
            throw refuse("revoked", "unknown or revoked token")
        case .unknown:
            throw refuse("unknown", "unknown or revoked token")
        case .unavailable, nil:
            // The database failed, or has not answered yet: the token as it was at its last lookup, for another
            // `cacheSeconds` (the next request does not wait again) — unless that was forgotten meanwhile.
            let kept = cache.withLock { cache -> Cached? in
                cache.entries[hash]?.checkedAt = now
                return cache.entries[hash]
            }
            if let kept {
                guard let principal = kept.principal else { throw refuse("revoked", "unknown or revoked token") }
                return principal
            }
            failures?.labels(["unavailable"]).increment()
            throw HTTPError.serviceUnavailable(
                full
                    ? "cannot check the token now: \(Self.maxFlights) lookups are waiting for the database"
                    : outcome == nil
                        ? "cannot check the token now: the database has not answered for "
                            + "\(formattedSeconds(cached == nil ? lookupTimeoutSeconds : staleGraceSeconds)) s"
                        : "cannot check the token now: the database is unavailable")
        }
    }

    /// The lookup of `hash` running now (if it began since the last revocation made here), or a new one; nil when
    /// ``maxFlights`` lookups are running. It caches what it finds, and writes `last_used_ms` when that is due.
    private func flight(for hash: String, now: Double) -> Flight? {
        let generation = cache.withLock { $0.generation }
        let (flight, started) = flights.withLock { flights -> (Flight?, Bool) in
            if let running = flights[hash], running.generation == generation { return (running, false) }
            guard flights.count < Self.maxFlights || flights[hash] != nil else { return (nil, false) }
            let flight = (lookup: SharedResult<Lookup>(), generation: generation)
            flights[hash] = flight
            return (flight, true)
        }
        if let flight, started {
            Task { [self] in
                flight.lookup.finish(await read(hash, now: now, generation: flight.generation))
                flights.withLock { flights in
                    if flights[hash]?.lookup === flight.lookup { flights[hash] = nil }
                }
            }
        }
        return flight
    }

    private func read(_ hash: String, now: Double, generation: Int) async -> Lookup {
        let found: (record: TokenRecord, storedHash: String)?
        do {
            found = try await tokens.token(hash: hash)
        } catch {
            logger.error("cannot read api_tokens to authenticate", ["error": .string("\(error)")])
            return .unavailable
        }
        guard let found, ConstantTime.equals(found.storedHash, hash) else {
            // Gone (a database restored without it): not answered from an older lookup during an outage either.
            cache.withLock { cache in
                if cache.generation == generation { cache.entries[hash] = nil }
            }
            return .unknown
        }
        guard !found.record.isRevoked, let role = Role(rawValue: found.record.role) else {
            remember(hash, principal: nil, now: now, generation: generation)
            return .revoked
        }
        let principal = Principal(
            tokenID: found.record.id, name: found.record.name, role: role,
            gatewayScope: role == .gateway ? found.record.gatewayScope : nil)
        let lastUsed = found.record.lastUsedMs.map { EpochTime.seconds(fromMilliseconds: $0) }
        if remember(hash, principal: principal, now: now, generation: generation, lastUsed: lastUsed) {
            let tokens = self.tokens
            let id = principal.tokenID
            Task.detached { try? await tokens.touch(id: id, atMs: EpochTime.milliseconds(fromSeconds: now)) }
        }
        return .found(principal)
    }

    /// Lookups running now (tests wait for them to finish).
    var runningLookups: Int { flights.withLock { $0.count } }

    /// Forgets every cached lookup of `tokenID`, so its revocation applies to the next request.
    public func invalidate(tokenID: String) {
        cache.withLock { cache in
            cache.generation += 1
            cache.entries = cache.entries.filter { $0.value.principal?.tokenID != tokenID }
        }
    }

    /// Caches a lookup made at `generation` (nothing when a revocation was made here since); returns whether
    /// `last_used_ms` is due for a write.
    @discardableResult
    private func remember(
        _ hash: String, principal: Principal?, now: Double, generation: Int, lastUsed: Double? = nil
    ) -> Bool {
        cache.withLock { cache in
            guard cache.generation == generation else { return false }
            if cache.entries.count >= Self.maxCached { cache.entries.removeAll(keepingCapacity: true) }
            let touchedAt = cache.entries[hash]?.touchedAt ?? lastUsed
            let due = principal != nil && (touchedAt.map { now - $0 >= touchIntervalSeconds } ?? true)
            cache.entries[hash] = Cached(principal: principal, checkedAt: now, touchedAt: due ? now : touchedAt)
            return due
        }
    }

    private func refuse(_ reason: String, _ message: String) -> HTTPError {
        failures?.labels([reason]).increment()
        return HTTPError.unauthorized(message, code: reason == "missing" ? "unauthorized" : "invalid_token")
    }
}
