import AllotProtocol
import Foundation

/// Receives telemetry events as the enforcer produces them: ``TelemetryReporter`` (batched to Allot over a
/// ``TelemetryTransport``), or a simulator's own collector. Called synchronously, outside the enforcer's lock.
public protocol TelemetrySink: Sendable {
    func record(_ event: TelemetryRecord)
}

/// The gateway's enforcement core: the limits in force, each tenant's dual token buckets, the admission queue,
/// the runaway-task guard, and the reconciliation of estimates with actual usage (SPEC §7, §12).
///
/// It is synchronous and takes every instant as a `now` argument, so a simulator can drive tens of thousands
/// of admissions per simulated minute deterministically, and it never touches the network: admission reads
/// the limits from memory, and new snapshots are handed in with ``apply(_:now:)``. ``Gateway`` wraps it with a
/// clock, an async `admit` that waits in the queue, a snapshot client and a telemetry reporter.
///
/// Queued requests are decided through their `onDecision` callback: when a completion, a release or a
/// snapshot frees room, at once; when time does (refill, a deadline), at the next ``pump(now:)``, which the
/// owner calls at ``nextWakeTime`` (``Gateway`` runs a task for it; a simulator calls it from its event loop).
///
/// `@unchecked Sendable`: all mutable state is in `state`, read and written only while holding `lock`; callbacks,
/// telemetry and events are delivered after the lock is released, so they may call back into the enforcer.
public final class Enforcer: @unchecked Sendable {
    public let configuration: GatewayConfiguration
    private let telemetry: (any TelemetrySink)?
    private let wakeHandler: (@Sendable () -> Void)?
    private let lock = NSLock()
    private var state: EnforcerState
    /// Seconds on a clock that is never stepped (`CLOCK_BOOTTIME`, which counts time suspended): where the wall clock
    /// should be after a step, so that the step is measured from then and not from the last instant the enforcer was
    /// shown.
    private let monotonic: @Sendable () -> Double
    /// Whether the instants the enforcer is given are the wall clock's (a ``Gateway`` on the
    /// ``AllotTime/SystemClock``), so that one further ahead of the last than the steady clock moved is a step forward.
    /// Off for instants a caller makes up (tests, the simulator's virtual time), which run ahead of the steady clock by
    /// design.
    let detectsStepsForward: Bool

    /// - Parameters:
    ///   - configuration: identity, queueing and defaults.
    ///   - telemetry: where attempt, denial and abandonment events go (nil: nowhere).
    ///   - wakeHandler: called when something queued is due earlier than the instant last read from
    ///     ``nextWakeTime``, so the owner's timer can be re-armed.
    public convenience init(
        configuration: GatewayConfiguration, telemetry: (any TelemetrySink)? = nil,
        wakeHandler: (@Sendable () -> Void)? = nil
    ) {
        self.init(
            configuration: configuration, telemetry: telemetry, wakeHandler: wakeHandler, detectsStepsForward: false)
    }

    /// With the steady clock (`CLOCK_BOOTTIME`); `detectsStepsForward` for a ``Gateway`` on the system clock.
    convenience init(
        configuration: GatewayConfiguration, telemetry: (any TelemetrySink)?, wakeHandler: (@Sendable () -> Void)?,
        detectsStepsForward: Bool
    ) {
        let steady = SteadyClock()
        let origin = steady.now
        self.init(
            configuration: configuration, telemetry: telemetry, wakeHandler: wakeHandler,
            monotonic: { steady.now - origin }, detectsStepsForward: detectsStepsForward)
    }

    /// With `monotonic`, seconds on a clock that is never stepped (tests pass their own).
    init(
        configuration: GatewayConfiguration, telemetry: (any TelemetrySink)?, wakeHandler: (@Sendable () -> Void)?,
        monotonic: @escaping @Sendable () -> Double, detectsStepsForward: Bool = false
    ) {
        self.configuration = configuration
        self.telemetry = telemetry
        self.wakeHandler = wakeHandler
        self.monotonic = monotonic
        self.detectsStepsForward = detectsStepsForward
        self.state = EnforcerState(configuration: configuration, reportsTelemetry: telemetry != nil)
    }

    /// Runs `body` on the state under the lock, having shown it `now` first (a wall clock stepped rebases the buckets:
    /// ``EnforcerState/noticeClock(_:monotonic:forward:effects:)``), and delivers what it produced after the lock is
    /// released.
    private func mutate<Result>(_ now: Double, _ body: (inout EnforcerState, inout Effects) -> Result) -> Result {
        var effects = Effects()
        let steady = monotonic()
        let result = lock.withLock {
            state.noticeClock(now, monotonic: steady, forward: detectsStepsForward, effects: &effects)
            return body(&state, &effects)
        }
        deliver(effects)
        return result
    }

    private func deliver(_ effects: Effects) {
        if let telemetry {
            for event in effects.telemetry { telemetry.record(event) }
        }
        if let onEvent = configuration.onEvent {
            for event in effects.events { onEvent(event) }
        }
        for (onDecision, admission) in effects.decisions { onDecision(admission) }
        if effects.wakeEarlier { wakeHandler?() }
    }

    // MARK: Snapshots

    /// Enforces `snapshot` from `now` on, unless its version is below the enforced one (rejected) or equal
    /// (unchanged). Bucket parameters are swapped without refilling; waiting requests that now fit are admitted.
    @discardableResult
    public func apply(_ snapshot: Snapshot, now: Double) -> SnapshotApplyResult {
        mutate(now) { state, effects in state.apply(snapshot, now: now, effects: &effects) }
    }

    /// The same, for a snapshot that arrived at `now` in an answer carrying Allot's clock (`serverTime`:
    /// `Allot-Server-Time`; nil when the server sends none): the clock is taken with the snapshot, unless it is
    /// rejected, and its lease is judged on it (``observeServerClock(_:now:)``). `serverTime: nil` puts leases back on
    /// the gateway's clock; ``apply(_:now:)`` leaves the clock as it is.
    @discardableResult
    public func apply(_ snapshot: Snapshot, now: Double, serverTime: Double?) -> SnapshotApplyResult {
        mutate(now) { state, effects in
            state.apply(
                snapshot, now: now, reading: serverTime.map { .measured($0 - now) } ?? .noTime, effects: &effects)
        }
    }

    /// Takes Allot's clock as read in a `304` that arrived at `now` (`Allot-Server-Time`; nil when the server sends
    /// none): the enforced lease, and the next, run until Allot's clock reaches their `expires_at`, whatever the
    /// gateway's clock reads, and telemetry is stamped on Allot's clock (``ServerClock``: clocks within a second of
    /// each other change nothing; a measure beyond an hour is not believed; a lease runs at most its length and 60 s
    /// past the last answer). A lease that ended by the gateway's clock alone is enforced again
    /// (``GatewayEvent/leaseResumed(version:)``); one that ends sooner by Allot's ends then.
    public func observeServerClock(_ serverTime: Double?, now: Double) {
        mutate(now) { state, effects in
            state.observeServerClock(offset: serverTime.map { $0 - now }, now: now, effects: &effects)
        }
    }

    /// The enforced snapshot's version: what the snapshot client sends in `If-None-Match`.
    public var enforcedVersion: Int64? {
        lock.withLock { state.table.version }
    }

    /// The enforced snapshot, nil before the first.
    public var snapshot: Snapshot? {
        lock.withLock { state.table.snapshot }
    }

    /// Which snapshot is enforced and how (lease or fallback), as of `now` (a lease that ended by `now` is
    /// switched to fallback first).
    public func status(now: Double) -> EnforcementStatus {
        mutate(now) { state, effects in
            state.checkLease(now: now, effects: &effects)
            return EnforcementStatus(
                version: state.table.version, inFallback: state.table.inFallback,
                expiresAt: state.table.snapshot?.expiresAt, leaseEnd: state.leaseEnd,
                serverClockOffset: state.serverClock.measured, policyVersion: state.table.snapshot?.policyVersion,
                queueLength: state.queue.count, inFlight: state.tickets.count, trackedTenants: state.states.count,
                trackedTasks: state.tasks.count,
                brakes: state.brakes)
        }
    }

    // MARK: Admission

    /// Admits or denies `request` at `now` without waiting (the simulator's and a non-queueing gateway's call).
    ///
    /// - Parameter reportDenial: whether a denial is reported as a `denied_local` telemetry event; a caller
    ///   that retries the same request itself reports only its final denial.
    public func tryAdmit(_ request: AdmissionRequest, now: Double, reportDenial: Bool = true) -> Admission {
        mutate(now) { state, effects in
            switch state.submit(
                request, now: now, wait: false, report: reportDenial, onDecision: nil, effects: &effects)
            {
            case .decided(let admission): admission
            case .queued: preconditionFailure("a request submitted without waiting was queued")
            }
        }
    }

    /// Admits or denies `request` at `now`, or queues it: then `onDecision` is called exactly once, later, with
    /// the ticket or the denial (and ``Submission/queued(_:)`` gives the id to ``cancel(_:now:)`` it with).
    /// `onDecision` is not called when the answer is returned directly.
    public func submit(
        _ request: AdmissionRequest, now: Double, onDecision: @escaping @Sendable (Admission) -> Void
    ) -> Submission {
        mutate(now) { state, effects in
            switch state.submit(request, now: now, wait: true, report: true, onDecision: onDecision, effects: &effects)
            {
            case .decided(let admission): .decided(admission)
            case .queued(let id): .queued(id)
            }
        }
    }

    /// The answer to ``submit(_:now:onDecision:)``.
    public enum Submission: Sendable, Equatable {
        case decided(Admission)
        /// Waiting in the queue with this id.
        case queued(UInt64)
    }

    /// Removes a waiting request whose caller gave up; its `onDecision` receives a `cancelled` denial. False
    /// when it had already been decided.
    @discardableResult
    public func cancel(_ waiterID: UInt64, now: Double) -> Bool {
        mutate(now) { state, effects in state.cancel(waiterID, now: now, effects: &effects) }
    }

    /// Re-examines the queue and the lease at `now`: admits what now fits, denies what waited too long,
    /// switches to fallback if the lease ended.
    public func pump(now: Double) {
        mutate(now) { state, effects in state.pump(now: now, effects: &effects, changed: .time) }
    }

    /// Denies every waiting request with code `gateway_stopping` (reported as `denied_local`): called when the
    /// gateway stops, since nothing would decide them any more.
    public func denyAllWaiting(now: Double) {
        mutate(now) { state, effects in state.denyAllWaiting(now: now, effects: &effects) }
    }

    /// The earliest instant ``pump(now:)`` has something to do (a refill, a deadline, the lease end); nil when
    /// nothing is pending. Reading it arms the wake handler for anything due earlier.
    public var nextWakeTime: Double? {
        lock.withLock {
            let next = state.nextWakeTime()
            state.armedWake = next
            return next
        }
    }

    // MARK: Completion

    /// Reports a dispatched request's result: frees its concurrency permit, reconciles its token reservation
    /// with the actual usage (over-spend becomes debt in the TPM bucket, under-spend is refunded up to the
    /// burst; an overload refusal, 503 or 529, gives back its request too), records the attempt's telemetry
    /// event (outcome classified with `ErrorClassifier` unless given), and admits waiting requests that now fit.
    /// False if the ticket was already handed back.
    @discardableResult
    public func complete(_ ticket: Ticket, _ result: AttemptResult, now: Double) -> Bool {
        mutate(now) { state, effects in state.complete(ticket, result, now: now, effects: &effects) }
    }

    /// Hands back a ticket whose request was never sent: its call, tokens and permit are returned, nothing is
    /// reported. False if the ticket was already handed back.
    @discardableResult
    public func release(_ ticket: Ticket, now: Double) -> Bool {
        mutate(now) { state, effects in state.release(ticket, now: now, effects: &effects) }
    }

    // MARK: Inspection

    public var statistics: EnforcementStatistics {
        lock.withLock { state.statistics }
    }

    /// The limits and buckets of `tenant` on `upstream` at `now`; nil when no limits apply yet (no snapshot).
    /// A tenant not seen yet shows full buckets.
    public func tenantStatus(tenant: String, upstream: String, now: Double) -> TenantEnforcementStatus? {
        lock.withLock {
            let key = TenantKey(tenant: tenant, upstream: upstream)
            guard let policy = state.table.policy(for: key) else { return nil }
            var tenantState = state.states[key] ?? TenantState(policy: policy, now: now)
            tenantState.rpm.advance(to: now)
            tenantState.tpm.advance(to: now)
            return TenantEnforcementStatus(
                limits: policy.limits, listed: state.table.tenants[key] != nil, shadow: policy.shadow,
                rpm: tenantState.rpm, tpm: tenantState.tpm, inFlight: tenantState.inFlight,
                queued: state.queueAccounts[key]?.waiting.total ?? 0,
                creditCalls: tenantState.credit?.calls(at: state.serverNow(now)) ?? 0,
                creditTokens: tenantState.credit?.tokens(at: state.serverNow(now)) ?? 0)
        }
    }
}
