@preconcurrency import Dispatch
import Glibc

/// Turns process signals (SIGTERM, SIGINT) into something async code can await, for graceful
/// shutdown (SPEC §13 "Operations").
///
/// ```swift
/// let trap = await SignalTrap()            // SIGTERM and SIGINT no longer kill the process
/// _ = await trap.wait()                    // the first one to arrive
/// await server.shutdown(gracePeriod: .seconds(10))
/// ```
///
/// Dispatch signal sources do the work outside signal context (a handler installed with `signal(2)`
/// may only call async-signal-safe functions). On Linux, Dispatch installs its own handler when a
/// source registers, which replaces the default action (so the process is not killed); the
/// initialiser waits for that registration, so no signal sent after it returns is lost. On Darwin
/// the default action must be set to `SIG_IGN` for the kqueue source to see the signal (the same
/// split as swift-service-lifecycle). `cancel()` restores the default actions, so a second Ctrl-C
/// after `cancel()` kills as usual.
public final class SignalTrap: Sendable {
    private struct State {
        var received: Int32?
        var nextID: UInt64 = 0
        var waiters: [UInt64: CheckedContinuation<Int32?, Never>] = [:]
        var cancelledWaiters: Set<UInt64> = []
        var handlers: [@Sendable (Int32) -> Void] = []
        var cancelled = false
    }

    /// The trapped signal numbers.
    public let signals: [Int32]
    private let state = Locked(State())
    private let sources: [any DispatchSourceSignal]
    private static let queue = DispatchQueue(label: "allot.signal-trap")

    /// Starts trapping `signals` (default SIGTERM and SIGINT); returns once Dispatch has registered
    /// them.
    public init(signals: [Int32] = [SIGTERM, SIGINT]) async {
        self.signals = signals
        let state = self.state
        sources = signals.map { number in
            #if canImport(Darwin)
                _ = signal(number, SIG_IGN)
            #endif
            let source = DispatchSource.makeSignalSource(signal: number, queue: Self.queue)
            source.setEventHandler {
                let (waiters, handlers) = state.withLock {
                    state -> ([CheckedContinuation<Int32?, Never>], [@Sendable (Int32) -> Void]) in
                    if state.received == nil { state.received = number }
                    defer { state.waiters = [:] }
                    return (Array(state.waiters.values), state.handlers)
                }
                for waiter in waiters { waiter.resume(returning: number) }
                for handler in handlers { handler(number) }
            }
            return source
        }
        for source in sources {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                source.setRegistrationHandler { continuation.resume() }
                source.resume()
            }
        }
    }

    deinit {
        cancel()
    }

    /// The first trapped signal received so far, if any.
    public var received: Int32? { state.withLock { $0.received } }

    /// Returns the first trapped signal (at once if one already arrived), or nil if the calling task
    /// is cancelled first.
    public func wait() async -> Int32? {
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Int32?, Never>) in
                let outcome = state.withLock { state -> Int32?? in
                    if let received = state.received { return .some(received) }
                    if state.cancelledWaiters.remove(id) != nil { return .some(nil) }
                    state.waiters[id] = continuation
                    return .none
                }
                if let outcome { continuation.resume(returning: outcome) }
            }
        } onCancel: {
            let waiter = state.withLock { state -> CheckedContinuation<Int32?, Never>? in
                if let waiter = state.waiters.removeValue(forKey: id) { return waiter }
                if state.received == nil { state.cancelledWaiters.insert(id) }
                return nil
            }
            waiter?.resume(returning: nil)
        }
    }

    /// Calls `handler` (on a Dispatch queue) for every trapped signal from now on, e.g. to exit at
    /// once on a second SIGINT.
    public func onSignal(_ handler: @escaping @Sendable (Int32) -> Void) {
        state.withLock { $0.handlers.append(handler) }
    }

    /// Stops trapping and restores the signals' default actions. Idempotent.
    public func cancel() {
        let first = state.withLock { state -> Bool in
            defer { state.cancelled = true }
            return !state.cancelled
        }
        guard first else { return }
        for source in sources { source.cancel() }
        for number in signals { _ = Glibc.signal(number, SIG_DFL) }
    }
}
