import AllotCore
import AllotProtocol
import AllotTime
import Foundation

/// Everything a gateway needs to enforce Allot's allocations, in one object: the ``Enforcer`` (buckets, queue,
/// task budgets), a ``SnapshotClient`` keeping it fresh, a ``TelemetryReporter`` delivering events, and a task
/// that wakes the queue when time frees room (refill, deadlines, lease expiry).
///
/// ```swift
/// let gateway = try Gateway.connect(to: "http://127.0.0.1:8080", token: token,
///                                   configuration: GatewayConfiguration(gatewayID: "gw-1"))
/// gateway.start()
/// switch try await gateway.admit(tenant: "acme", upstream: "openai/gpt-4o", taskClass: .interactive,
///                                estimatedTokens: 1_200, taskID: "task-7") {
/// case .admitted(let ticket):
///     // … call the upstream …
///     gateway.complete(ticket, AttemptResult(status: 200, promptTokens: 900, completionTokens: 250,
///                                            latency: 1.4, headers: responseHeaders))
/// case .denied(let denial):
///     // answer denial.suggestedStatus with Retry-After: denial.retryAfterHeader, or use a smaller model
/// }
/// ```
///
/// Time comes from the injected ``AllotClock`` only (``ManualClock`` in tests and simulations); transports
/// are protocols, so a simulator can hand snapshots and telemetry across in-process.
///
/// `@unchecked Sendable`: the only mutable state, `tasks`, is guarded by `lock`; everything else is immutable
/// or itself `Sendable`.
public final class Gateway: @unchecked Sendable {
    public let configuration: GatewayConfiguration
    public let clock: any AllotClock
    public let enforcer: Enforcer
    /// Nil when the gateway was built without a snapshot transport (snapshots are applied with ``apply(_:)``).
    public let snapshotClient: SnapshotClient?
    /// Nil when the gateway was built without a telemetry transport and without a sink.
    public let reporter: TelemetryReporter?
    private let waker: WakeSignal
    private let onStop: (@Sendable () async -> Void)?
    private let lock = NSLock()
    private var tasks: [Task<Void, Never>] = []

    /// - Parameters:
    ///   - configuration: identity, queueing, defaults.
    ///   - clock: the only source of time.
    ///   - snapshotTransport: where snapshots come from (nil: apply them yourself).
    ///   - telemetryTransport: where telemetry goes (nil: only `telemetrySink`, if any).
    ///   - telemetrySink: an in-process receiver of events instead of a reporter (used when `telemetryTransport`
    ///     is nil).
    ///   - clientConfiguration: long-poll wait and backoff.
    ///   - reporterConfiguration: buffer, batch, interval, backoff.
    ///   - seed: seeds the backoff jitter of the client and the reporter.
    ///   - onStop: runs at the end of ``stop(timeout:)`` (e.g. shutting down an HTTP client).
    public init(
        configuration: GatewayConfiguration, clock: any AllotClock = SystemClock(endsSleepOnStepBack: true),
        snapshotTransport: (any SnapshotTransport)? = nil, telemetryTransport: (any TelemetryTransport)? = nil,
        telemetrySink: (any TelemetrySink)? = nil,
        clientConfiguration: SnapshotClient.Configuration = SnapshotClient.Configuration(),
        reporterConfiguration: TelemetryReporter.Configuration = TelemetryReporter.Configuration(),
        seed: UInt64 = UInt64.random(in: .min ... .max), onStop: (@Sendable () async -> Void)? = nil
    ) {
        self.configuration = configuration
        self.clock = clock
        let waker = WakeSignal()
        self.waker = waker
        self.onStop = onStop
        let reporter = telemetryTransport.map {
            TelemetryReporter(
                transport: $0, clock: clock, configuration: reporterConfiguration, seed: seed &+ 1,
                onEvent: configuration.onEvent)
        }
        self.reporter = reporter
        // On the system clock the instants are the wall clock's, and a step forward of it is seen (against the
        // steady clock) as a step back is.
        let enforcer = Enforcer(
            configuration: configuration, telemetry: reporter ?? telemetrySink, wakeHandler: { waker.ring() },
            detectsStepsForward: clock is SystemClock)
        self.enforcer = enforcer
        self.snapshotClient = snapshotTransport.map {
            SnapshotClient(
                gatewayID: configuration.gatewayID, transport: $0, enforcer: enforcer, clock: clock,
                configuration: clientConfiguration, seed: seed, onEvent: configuration.onEvent)
        }
    }

    // MARK: Lifecycle

    /// Starts the background tasks: snapshot polling, telemetry delivery, and the queue's timer. Calling it
    /// again does nothing.
    public func start() {
        lock.withLock {
            guard tasks.isEmpty else { return }
            let enforcer = self.enforcer
            let waker = self.waker
            let clock = self.clock
            tasks.append(
                Task {
                    while !Task.isCancelled {
                        await waker.wait(until: enforcer.nextWakeTime, clock: clock)
                        if Task.isCancelled { break }
                        enforcer.pump(now: clock.now)
                    }
                })
            if let client = snapshotClient {
                tasks.append(Task { await client.run() })
            }
            if let reporter {
                tasks.append(Task { await reporter.run() })
            }
        }
    }

    /// Stops polling and the queue's timer, denies requests still waiting (`gateway_stopping`), then, together and
    /// for at most `timeout` seconds on the clock, makes one last attempt to deliver buffered telemetry and tells
    /// Allot the gateway leaves (its tenants' slices go to the other gateways at the next tick;
    /// `DELETE /v1/gateways/{id}`) — what is unfinished then is cancelled (events not delivered are lost) — and runs
    /// `onStop` (a gateway made by `connect` shuts its HTTP client down there). Not meant to be followed by
    /// ``start()`` again: create a new gateway. The bound keeps a shutdown within a container's grace period: an
    /// Allot that took the last batch and never answered held `stop()` for the post's 30-s timeout, the leave
    /// never sent (outside evaluation round 32). The bound needs transports that end when cancelled, as the HTTP
    /// ones do; a custom transport that ignores cancellation holds `stop` until it returns. `timeout: .infinity`
    /// waits for both.
    public func stop(timeout: Double = 10) async {
        let running = lock.withLock {
            defer { tasks = [] }
            return tasks
        }
        for task in running { task.cancel() }
        for task in running { await task.value }
        enforcer.denyAllWaiting(now: clock.now)
        let reporter = self.reporter
        let snapshotClient = self.snapshotClient
        let clock = self.clock
        await withTaskGroup(of: Bool.self) { group in
            group.addTask {
                if let reporter { await reporter.flush() }
                return true
            }
            group.addTask {
                if let snapshotClient { await snapshotClient.leave() }
                return true
            }
            // `.infinity` waits for both; NaN reads as the default.
            if timeout != .infinity {
                group.addTask {
                    try? await clock.sleep(for: timeout.isNaN ? 10 : max(0, timeout))
                    return false
                }
            }
            var finished = 0
            while let done = await group.next(), done {
                finished += 1
                if finished == 2 { break }
            }
            group.cancelAll()
        }
        await onStop?()
    }

    /// Waits until a first snapshot is enforced (for a readiness probe, or to hold traffic at start-up) or
    /// `timeout` seconds have passed on the clock. True when a snapshot is enforced.
    public func waitForSnapshot(timeout: Double) async -> Bool {
        let deadline = clock.now + timeout
        while enforcer.enforcedVersion == nil {
            if clock.now >= deadline || Task.isCancelled { return false }
            try? await clock.sleep(until: min(deadline, clock.now + 0.05))
        }
        return true
    }

    // MARK: Admission

    /// Asks to dispatch a request: returns a ticket at once if the limits allow, else waits in the priority
    /// queue up to the task class's maximum wait, and returns a ticket or a denial. Never waits for the network.
    ///
    /// Agent frameworks should pass the task context: `taskStartedAt` (when the task's first call was
    /// admitted; nil before) and `taskDeadline` (epoch seconds, as on ``clock``). Under overload the tenant's
    /// calls of started tasks then go before those of new tasks, and calls of late tasks stop taking capacity
    /// from timely ones (``AdmissionRequest/taskStartedAt``, ``GatewayConfiguration/pastDeadline``).
    ///
    /// - Throws: `CancellationError` if the calling task is cancelled (a ticket granted meanwhile is released).
    public func admit(
        tenant: String, upstream: String, taskClass: TaskClass = .interactive, estimatedTokens: Int? = nil,
        promptTokens: Int? = nil, taskID: String? = nil, retry: Int = 0, taskStartedAt: Double? = nil,
        taskDeadline: Double? = nil
    ) async throws(CancellationError) -> Admission {
        try await admit(
            AdmissionRequest(
                tenant: tenant, upstream: upstream, taskClass: taskClass, estimatedTokens: estimatedTokens,
                promptTokens: promptTokens, taskID: taskID, retry: retry, taskStartedAt: taskStartedAt,
                taskDeadline: taskDeadline))
    }

    /// ``admit(tenant:upstream:taskClass:estimatedTokens:promptTokens:taskID:retry:taskStartedAt:taskDeadline:)``
    /// for a prepared request.
    public func admit(_ request: AdmissionRequest) async throws(CancellationError) -> Admission {
        if Task.isCancelled { throw CancellationError() }
        let enforcer = self.enforcer
        let clock = self.clock
        let handle = WaiterHandle()
        let admission: Admission = await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Admission, Never>) in
                let submission = enforcer.submit(request, now: clock.now) { continuation.resume(returning: $0) }
                switch submission {
                case .decided(let admission):
                    continuation.resume(returning: admission)
                case .queued(let id):
                    if handle.queued(id) { enforcer.cancel(id, now: clock.now) }
                }
            }
        } onCancel: {
            if let id = handle.cancel() { enforcer.cancel(id, now: clock.now) }
        }
        if Task.isCancelled {
            if let ticket = admission.ticket { enforcer.release(ticket, now: clock.now) }
            throw CancellationError()
        }
        return admission
    }

    /// Admits or denies at once, without queueing (`now` defaults to the clock's; one you pass must be the clock's
    /// current reading, not an earlier or later instant: the enforcer takes an instant more than a second off where its
    /// clock should be for a step of the clock).
    public func tryAdmit(_ request: AdmissionRequest, now: Double? = nil) -> Admission {
        enforcer.tryAdmit(request, now: now ?? clock.now)
    }

    /// Reports the result of a dispatched request: frees its permit, reconciles its tokens, records telemetry. `now`,
    /// when you pass it, is the clock's current reading (as for ``tryAdmit(_:now:)``): the result's time, not the
    /// dispatch's.
    @discardableResult
    public func complete(_ ticket: Ticket, _ result: AttemptResult, now: Double? = nil) -> Bool {
        enforcer.complete(ticket, result, now: now ?? clock.now)
    }

    /// ``complete(_:_:now:)`` with the common fields: HTTP status (nil if no response), usage, latency in
    /// seconds, and the response headers (the rate-limit ones are reported verbatim).
    @discardableResult
    public func complete(
        _ ticket: Ticket, status: Int?, promptTokens: Int? = nil, completionTokens: Int? = nil,
        latency: Double? = nil, headers: [(String, String)] = [], errorType: String? = nil
    ) -> Bool {
        complete(
            ticket,
            AttemptResult(
                status: status, promptTokens: promptTokens, completionTokens: completionTokens, latency: latency,
                headers: headers, errorType: errorType))
    }

    /// Hands back a ticket whose request was never sent.
    @discardableResult
    public func release(_ ticket: Ticket) -> Bool {
        enforcer.release(ticket, now: clock.now)
    }

    /// Enforces `snapshot` now (for gateways fed in-process, or a snapshot restored from disk at start).
    @discardableResult
    public func apply(_ snapshot: Snapshot) -> SnapshotApplyResult {
        enforcer.apply(snapshot, now: clock.now)
    }

    /// Which snapshot is enforced, lease or fallback, as of now.
    public var status: EnforcementStatus {
        enforcer.status(now: clock.now)
    }
}

/// Links a queued admission to its cancellation, whichever comes first.
///
/// `@unchecked Sendable`: `id` and `cancelled` are only touched while holding `lock`.
private final class WaiterHandle: @unchecked Sendable {
    private let lock = NSLock()
    private var id: UInt64?
    private var cancelled = false

    /// Records the waiter's id; true if the task was already cancelled (the caller cancels the waiter).
    func queued(_ id: UInt64) -> Bool {
        lock.withLock {
            self.id = id
            return cancelled
        }
    }

    /// Marks the task cancelled; returns the waiter's id if it is already known.
    func cancel() -> UInt64? {
        lock.withLock {
            cancelled = true
            return id
        }
    }
}
