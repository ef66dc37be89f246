import AllotCore
import AllotProtocol
import AllotTime

/// Keeps a gateway's ``Enforcer`` supplied with fresh snapshots (SPEC §7): long-polls Allot with the enforced
/// version as `If-None-Match`, applies what arrives, and backs off with jitter when Allot is unreachable.
///
/// - Admission never waits for it: the enforcer keeps enforcing the last good snapshot while a poll is
///   outstanding or failing, until that snapshot's `expires_at`, then its `fallback` (the enforcer switches by
///   itself; ``Gateway`` wakes it at the expiry instant and reports ``GatewayEvent/leaseExpired(version:expiresAt:)``).
///   `expires_at` is Allot's instant: each answer's `Allot-Server-Time` tells the enforcer how far Allot's clock is
///   from the gateway's (``Enforcer/observeServerClock(_:now:)``).
/// - The version it sends is the one the enforcer enforces, which is what Allot records as the gateway's
///   version (lag and drift, `GET /v1/gateways`).
/// - A snapshot with a lower version than the enforced one is refused (``SnapshotApplyResult/rejected(reason:)``).
/// - Pacing: after a new snapshot it polls again at once (long-poll); after a `304` it polls again at once if
///   the server held the request for at least half the wait, else (a server or proxy that does not hold
///   long-polls) after the snapshot's `refresh_ms`; after a failure, after ``Backoff``'s jittered delay (at
///   least the server's `Retry-After`).
public actor SnapshotClient {
    /// Settings of a snapshot client.
    public struct Configuration: Sendable {
        /// Seconds the server may hold a poll (`wait=`, at most 60); 0 polls without holding. Default 30.
        /// (At most half the lease of the snapshot enforced, whatever this says: ``SnapshotClient/longPollWait``.)
        public var longPollWait: Double
        /// Delays after failed polls.
        public var backoff: Backoff
        /// Poll interval when the snapshot gives no `refresh_ms` (and before the first snapshot, when the server
        /// does not hold polls). Default 5 s.
        public var defaultRefreshInterval: Double

        public init(
            longPollWait: Double = 30, backoff: Backoff = Backoff(initial: 0.5, maximum: 30),
            defaultRefreshInterval: Double = 5
        ) {
            self.longPollWait = min(max(longPollWait, 0), 60)
            self.backoff = backoff
            self.defaultRefreshInterval = defaultRefreshInterval
        }
    }

    /// What one poll did.
    public enum PollResult: Sendable, Equatable {
        /// A snapshot arrived and was applied, left unchanged (same version) or rejected (lower version).
        case received(version: Int64, SnapshotApplyResult)
        /// The enforced version is current (`304`).
        case notModified
        /// The poll failed; the next should wait `retryIn` seconds.
        case failed(TransportError, retryIn: Double)
        /// The calling task was cancelled.
        case cancelled
    }

    public nonisolated let gatewayID: String
    /// This run of the gateway process (`instance=` in its polls and its leave): random unless given. Allot ignores
    /// a poll of an instance that has left (one still in flight as the gateway stopped), and an instance's leave
    /// does not remove a replacement that polls under the same gateway id.
    public nonisolated let instanceID: String
    public nonisolated let configuration: Configuration
    private let transport: any SnapshotTransport
    private let enforcer: Enforcer
    private let clock: any AllotClock
    private let onEvent: (@Sendable (GatewayEvent) -> Void)?
    private var random: SplitMix64
    private var state = SnapshotClientStatus()

    /// - Parameters:
    ///   - gatewayID: sent as `?gateway=`.
    ///   - transport: HTTP (``HTTPSnapshotTransport``) or in-process.
    ///   - enforcer: receives the snapshots; its enforced version is sent as `If-None-Match`.
    ///   - clock: for pacing and backoff.
    ///   - configuration: long-poll wait, backoff, default refresh interval.
    ///   - seed: seeds the backoff jitter.
    ///   - onEvent: poll failures, for logs.
    ///   - instanceID: this run of the process, unique to it (a process that reuses its predecessor's is taken, for
    ///     75 s after that one left, for its late polls); by default, or when it is not 1–128 characters of
    ///     `[A-Za-z0-9._:/-]` (Allot would refuse every poll), 16 random hex digits.
    public init(
        gatewayID: String, transport: any SnapshotTransport, enforcer: Enforcer, clock: any AllotClock,
        configuration: Configuration = Configuration(), seed: UInt64 = UInt64.random(in: .min ... .max),
        onEvent: (@Sendable (GatewayEvent) -> Void)? = nil, instanceID: String? = nil
    ) {
        self.gatewayID = gatewayID
        self.instanceID = instanceID.flatMap { GatewayIdentifier.isValid($0) ? $0 : nil } ?? Self.randomInstance()
        self.transport = transport
        self.enforcer = enforcer
        self.clock = clock
        self.configuration = configuration
        self.random = SplitMix64(seed: seed)
        self.onEvent = onEvent
    }

    /// Where the client stands.
    public var status: SnapshotClientStatus {
        var status = state
        status.enforcedVersion = enforcer.enforcedVersion
        return status
    }

    /// Tells Allot this gateway leaves (once polling has stopped: a poll after it would register the gateway again).
    /// A failure is reported as ``GatewayEvent/leaveFailed(message:)``; nothing is retried.
    public func leave() async {
        do {
            try await transport.leave(gateway: gatewayID, instance: instanceID)
        } catch {
            onEvent?(.leaveFailed(message: error.description))
        }
    }

    /// Polls until the calling task is cancelled.
    public func run() async {
        while !Task.isCancelled {
            let started = clock.now
            let wait = longPollWait
            let result = await pollOnce()
            let delay: Double
            switch result {
            case .cancelled:
                return
            case .failed(_, let retryIn):
                delay = retryIn
            case .received(_, .applied) where wait > 0:
                delay = 0
            case .received, .notModified:
                let held = clock.now - started
                delay = wait > 0 && held >= wait / 2 ? 0 : refreshInterval
            }
            if delay > 0 {
                do {
                    try await clock.sleep(for: delay)
                } catch {
                    return
                }
            }
        }
    }

    /// The `wait` a poll asks for: ``Configuration/longPollWait``, but at most half the lease of the snapshot enforced
    /// (`expires_at − generated_at`), so that Allot answers at least twice a lease even when it publishes nothing: an
    /// answer carries Allot's clock, and after a step of it the lease is judged anew (outside evaluation round 41: a
    /// 20-s lease ran out while a 30-s poll was held). A drain's (no lease) does not shorten it.
    public var longPollWait: Double {
        let configured = configuration.longPollWait
        guard let snapshot = enforcer.snapshot, !snapshot.bornExpired else { return configured }
        return min(configured, snapshot.leaseSeconds / 2)
    }

    private var refreshInterval: Double {
        guard let refreshMs = enforcer.snapshot?.refreshMs, refreshMs > 0 else {
            return configuration.defaultRefreshInterval
        }
        // At most ten minutes: a hostile `refresh_ms` (Int.max) put the client to sleep for ages (round 14).
        return min(Double(refreshMs) / 1_000, Self.longestRefresh)
    }

    /// 16 random hex digits (the system's generator): a process's run, told apart from its predecessors and
    /// successors under one gateway id; twice over, the prefix of a ``TelemetryReporter``'s batch keys.
    static func randomInstance() -> String {
        let digits = String(UInt64.random(in: .min ... .max), radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }

    /// The longest pause between polls a snapshot's `refresh_ms` may ask for, seconds.
    static let longestRefresh = 600.0

    /// One poll: fetch, apply, account.
    public func pollOnce() async -> PollResult {
        state.polls += 1
        let known = enforcer.enforcedVersion
        let exchange: SnapshotExchange
        do {
            exchange = try await transport.exchange(
                gateway: gatewayID, instance: instanceID, knownVersion: known, wait: longPollWait)
        } catch {
            if Task.isCancelled { return .cancelled }
            state.consecutiveFailures += 1
            state.failures += 1
            state.lastError = error.description
            var delay = configuration.backoff.delay(
                failures: state.consecutiveFailures, unit: random.unit(), retryAfter: error.retryAfter)
            // On the fallback floors (or before a first snapshot) every second of an outage's end counts: the poll
            // comes at least every refresh interval, jittered so that a fleet that fell back together does not poll
            // together (round 32: back 30 s after an outage, Allot was seen 8 s later, the backoff at its 30 s).
            let enforced = enforcer.status(now: clock.now)
            let refresh = refreshInterval
            if enforced.inFallback || enforced.version == nil, delay > refresh / 2 {
                // At least a second: a refresh interval of 0 (or a stray snapshot's `refresh_ms` of 1) must not spin.
                delay = max(1, min(delay, max(1, refresh) * (0.5 + 0.5 * random.unit())))
            }
            onEvent?(
                .pollFailed(
                    message: error.description, consecutiveFailures: state.consecutiveFailures, retryIn: delay))
            return .failed(error, retryIn: delay)
        }
        let now = clock.now
        state.lastContact = now
        state.consecutiveFailures = 0
        state.lastError = nil
        switch exchange.fetch {
        case .notModified:
            enforcer.observeServerClock(exchange.serverTime, now: now)
            state.notModified += 1
            return .notModified
        case .snapshot(let snapshot):
            // Allot's clock as read in this answer, taken with its snapshot (unless rejected): its lease is judged on
            // it.
            let applied = enforcer.apply(snapshot, now: now, serverTime: exchange.serverTime)
            switch applied {
            case .applied: state.received += 1
            case .rejected(let reason):
                // Not a failure of the exchange, but what the gateway's health should show (round 14).
                state.rejected += 1
                state.lastError = "snapshot rejected: \(reason)"
            case .unchanged: break
            }
            return .received(version: snapshot.version, applied)
        }
    }
}

/// Where a ``SnapshotClient`` stands, for a gateway's health endpoint and metrics.
public struct SnapshotClientStatus: Sendable, Equatable {
    /// The version the gateway enforces (and sends in `If-None-Match`).
    public var enforcedVersion: Int64?
    /// Last successful exchange with Allot (a snapshot or a `304`), seconds since the epoch.
    public var lastContact: Double?
    public var consecutiveFailures = 0
    /// The last failure, while failing, or why the last snapshot received was rejected (until the next exchange).
    public var lastError: String?
    public var polls = 0
    public var failures = 0
    /// Snapshots applied.
    public var received = 0
    public var notModified = 0
    /// Snapshots refused for a version below the enforced one.
    public var rejected = 0

    public init() {}
}
