import Foundation

/// Virtual time for tests and the simulator: time moves only when ``advance(by:)`` or ``advance(to:)`` is called.
///
/// Sleepers whose deadline has been reached are resumed in deadline order (ties in the order they went to
/// sleep), after ``now`` has been set to the target, so a woken task always observes a time at or past its
/// deadline. Resuming is deterministic; what the woken tasks then do runs on the concurrency runtime, so a test
/// that needs them to settle waits with ``waitForSleepers(_:)`` before advancing again.
///
/// Cancellation-safe: a task cancelled while asleep is removed and resumed at once with `CancellationError`;
/// one cancelled before it sleeps never parks.
///
/// `@unchecked Sendable`: all mutable state lives in `state` and is only touched while holding `lock`;
/// continuations are always resumed after the lock is released, so resumed code can call back into the clock.
public final class ManualClock: AllotClock, @unchecked Sendable {
    private struct Sleeper {
        var deadline: Double
        var id: UInt64
        var continuation: CheckedContinuation<Void, any Error>?
        var cancelled = false
    }

    private struct SleeperWaiter {
        var count: Int
        var continuation: CheckedContinuation<Void, Never>
    }

    private struct State {
        var now: Double
        var nextID: UInt64 = 0
        /// Registered sleepers by id; `continuation == nil` while the task is between registration and parking.
        var sleepers: [UInt64: Sleeper] = [:]
        var parkedCount = 0
        var waiters: [SleeperWaiter] = []
    }

    private let lock = NSLock()
    private var state: State

    /// A clock that reads `now` (seconds since the epoch) until it is advanced.
    public init(now: Double = 0) {
        state = State(now: now)
    }

    public var now: Double {
        lock.withLock { state.now }
    }

    /// Number of tasks currently parked in ``sleep(until:)``.
    public var sleeperCount: Int {
        lock.withLock { state.parkedCount }
    }

    /// The earliest deadline among parked sleepers, for simulators that jump straight to the next event.
    public var nextDeadline: Double? {
        lock.withLock { state.sleepers.values.filter { $0.continuation != nil }.map(\.deadline).min() }
    }

    public func sleep(until deadline: Double) async throws {
        let id: UInt64? = lock.withLock {
            if deadline <= state.now { return nil }
            let id = state.nextID
            state.nextID += 1
            state.sleepers[id] = Sleeper(deadline: deadline, id: id)
            return id
        }
        guard let id else {
            try Task.checkCancellation()
            return
        }
        try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Void, any Error>) in
                enum Action { case park, resume, cancel }
                var waitersToResume: [CheckedContinuation<Void, Never>] = []
                let action: Action = lock.withLock {
                    guard let sleeper = state.sleepers[id] else { return .resume }
                    if sleeper.cancelled {
                        state.sleepers[id] = nil
                        return .cancel
                    }
                    if sleeper.deadline <= state.now {
                        state.sleepers[id] = nil
                        return .resume
                    }
                    state.sleepers[id]?.continuation = continuation
                    state.parkedCount += 1
                    waitersToResume = takeSatisfiedWaiters()
                    return .park
                }
                switch action {
                case .park: break
                case .resume: continuation.resume()
                case .cancel: continuation.resume(throwing: CancellationError())
                }
                for waiter in waitersToResume { waiter.resume() }
            }
        } onCancel: {
            let continuation: CheckedContinuation<Void, any Error>? = lock.withLock {
                guard let sleeper = state.sleepers[id] else { return nil }
                if let continuation = sleeper.continuation {
                    state.sleepers[id] = nil
                    state.parkedCount -= 1
                    return continuation
                }
                state.sleepers[id]?.cancelled = true
                return nil
            }
            continuation?.resume(throwing: CancellationError())
        }
    }

    /// Moves time forward by `seconds` (negative or NaN amounts do nothing) and wakes every sleeper now due.
    public func advance(by seconds: Double) {
        guard seconds > 0 else { return }
        advance(to: now + seconds)
    }

    /// Moves time forward to `instant` (time never goes back: an earlier instant does nothing) and wakes every
    /// sleeper whose deadline is at or before it, earliest deadline first.
    public func advance(to instant: Double) {
        let due: [CheckedContinuation<Void, any Error>] = lock.withLock {
            guard instant > state.now else { return [] }
            state.now = instant
            let ready = state.sleepers.values
                .filter { $0.continuation != nil && $0.deadline <= instant }
                .sorted { ($0.deadline, $0.id) < ($1.deadline, $1.id) }
            for sleeper in ready { state.sleepers[sleeper.id] = nil }
            state.parkedCount -= ready.count
            return ready.compactMap(\.continuation)
        }
        for continuation in due { continuation.resume() }
    }

    /// Steps time back by `seconds` (a wall clock's NTP or operator step; negative or NaN amounts do nothing) and
    /// wakes every parked sleeper, short of its deadline, as ``SystemClock`` ends a sleep at a step back: the code
    /// under test looks at the time again.
    public func stepBack(by seconds: Double) {
        let woken: [CheckedContinuation<Void, any Error>] = lock.withLock {
            guard seconds > 0 else { return [] }
            state.now -= seconds
            let parked = state.sleepers.values.filter { $0.continuation != nil }.sorted { $0.id < $1.id }
            for sleeper in parked { state.sleepers[sleeper.id] = nil }
            state.parkedCount -= parked.count
            return parked.compactMap(\.continuation)
        }
        for continuation in woken { continuation.resume() }
    }

    /// Returns once at least `count` tasks are parked in ``sleep(until:)``: the way a test knows the code under
    /// test has reached its wait before it advances time. Returns at once if that is already so.
    public func waitForSleepers(_ count: Int = 1) async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let ready: Bool = lock.withLock {
                if state.parkedCount >= count { return true }
                state.waiters.append(SleeperWaiter(count: count, continuation: continuation))
                return false
            }
            if ready { continuation.resume() }
        }
    }

    /// Removes and returns the waiters satisfied by the current parked count. Call with `lock` held.
    private func takeSatisfiedWaiters() -> [CheckedContinuation<Void, Never>] {
        guard !state.waiters.isEmpty else { return [] }
        var satisfied: [CheckedContinuation<Void, Never>] = []
        let parked = state.parkedCount
        state.waiters.removeAll { waiter in
            guard waiter.count <= parked else { return false }
            satisfied.append(waiter.continuation)
            return true
        }
        return satisfied
    }
}
