/// A one-way event that tasks can await: set once, never reset.
///
/// Waiting is cancellation-aware: a cancelled waiter returns at once and leaves nothing behind.
final class OneShotEvent: Sendable {
    private struct State {
        var isSet = false
        var nextID: UInt64 = 0
        var waiters: [UInt64: CheckedContinuation<Void, Never>] = [:]
        /// Waiters cancelled before they had registered their continuation.
        var cancelledEarly: Set<UInt64> = []
        var callbacks: [@Sendable () -> Void] = []
    }

    private let state = Locked(State())

    var isSet: Bool { state.withLock { $0.isSet } }

    /// Sets the event: resumes every waiter and runs every callback (on the caller's thread).
    /// Returns false when it was already set.
    @discardableResult
    func set() -> Bool {
        let outcome = state.withLock { state -> ([CheckedContinuation<Void, Never>], [@Sendable () -> Void])? in
            guard !state.isSet else { return nil }
            state.isSet = true
            defer {
                state.waiters = [:]
                state.callbacks = []
                state.cancelledEarly = []
            }
            return (Array(state.waiters.values), state.callbacks)
        }
        guard let (waiters, callbacks) = outcome else { return false }
        for waiter in waiters { waiter.resume() }
        for callback in callbacks { callback() }
        return true
    }

    /// Runs `callback` when the event is set (at once, on this thread, if it already is).
    func onSet(_ callback: @escaping @Sendable () -> Void) {
        let runNow = state.withLock { state -> Bool in
            if state.isSet { return true }
            state.callbacks.append(callback)
            return false
        }
        if runNow { callback() }
    }

    /// Returns once the event is set, or at once if the calling task is cancelled.
    func wait() async {
        let id = state.withLock { state -> UInt64 in
            state.nextID += 1
            return state.nextID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow = state.withLock { state -> Bool in
                    if state.isSet || state.cancelledEarly.remove(id) != nil { return true }
                    state.waiters[id] = continuation
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let continuation = state.withLock { state -> CheckedContinuation<Void, Never>? in
                if let waiter = state.waiters.removeValue(forKey: id) { return waiter }
                if !state.isSet { state.cancelledEarly.insert(id) }
                return nil
            }
            continuation?.resume()
        }
    }
}

/// Tells the application that the server has begun a graceful shutdown.
///
/// Why it exists: a long-poll (`GET /v1/snapshot?wait=60`, SPEC §7) holds its request open for up
/// to a minute. On SIGTERM the server stops accepting and waits for in-flight requests, but a held
/// long-poll only finishes when the application answers it; handlers (or the component that parks
/// them) await `wait()` or register `onShutdown` to answer at once, typically with the current
/// version, so shutdown takes milliseconds instead of the grace period.
public final class ShutdownSignal: Sendable {
    private let event = OneShotEvent()

    public init() {}

    /// Whether shutdown has begun.
    public var isTriggered: Bool { event.isSet }

    /// Returns when shutdown begins (at once if it already has, or if the calling task is cancelled).
    public func wait() async { await event.wait() }

    /// Runs `callback` once when shutdown begins (at once if it already has). Callbacks run on the
    /// thread that triggers shutdown and must not block.
    public func onShutdown(_ callback: @escaping @Sendable () -> Void) { event.onSet(callback) }

    /// Begins shutdown for everyone listening. `HTTPServer.shutdown` calls it; applications that
    /// share one signal between several components may call it too. Idempotent.
    public func trigger() { event.set() }
}
