import AllotTime

/// The version gateways see, and the long-polls waiting for the next one (SPEC 7 `wait=`).
///
/// Request handlers read and wait here without hopping onto the Publisher actor: a conditional
/// request costs one lock acquisition. A publish swaps the current version and resumes every
/// waiter in one pass (SPEC 13: 5,000 watchers woken within 100 ms); a waiter holds no thread,
/// only a continuation, plus a sleeping timer task for its deadline.
final class SnapshotBoard: Sendable {
    private struct Waiter {
        var after: Int64
        var continuation: CheckedContinuation<PublishedSnapshot?, Never>?
        var done = false
    }

    private struct State {
        var current: PublishedSnapshot?
        var waiters: [UInt64: Waiter] = [:]
        var nextID: UInt64 = 0
        var isShutDown = false
        /// (version, generated_at) of recent versions, oldest first: how long a gateway has lagged.
        var history: [(version: Int64, at: Double)] = []
        /// When the global view (no `gateway`) was last requested.
        var globalViewAt: Double?
    }

    private let state = Locked(State())
    private static let historyLimit = 512

    var current: PublishedSnapshot? { state.withLock { $0.current } }

    var isShutDown: Bool { state.withLock { $0.isShutDown } }

    /// Waiters currently held.
    var watcherCount: Int { state.withLock { $0.waiters.values.filter { $0.continuation != nil }.count } }

    /// Records a request for the global view.
    func noteGlobalView(now: Double) {
        state.withLock { $0.globalViewAt = now }
    }

    /// Whether the global view was requested within the last ten minutes: then each version's JSON
    /// is encoded ahead of the first request.
    func wantsGlobalView(now: Double) -> Bool {
        state.withLock { state in state.globalViewAt.map { now - $0 < 600 } ?? false }
    }

    /// Makes `snapshot` current (if it is newer) and wakes every waiter it satisfies.
    func publish(_ snapshot: PublishedSnapshot) {
        let woken: [CheckedContinuation<PublishedSnapshot?, Never>] = state.withLock { state in
            guard (state.current?.version ?? .min) < snapshot.version else { return [] }
            state.current = snapshot
            state.history.append((snapshot.version, snapshot.generatedAt))
            if state.history.count > Self.historyLimit {
                state.history.removeFirst(state.history.count - Self.historyLimit)
            }
            var ready: [CheckedContinuation<PublishedSnapshot?, Never>] = []
            ready.reserveCapacity(state.waiters.count)
            for (id, waiter) in state.waiters where waiter.after < snapshot.version {
                if let continuation = waiter.continuation {
                    ready.append(continuation)
                    state.waiters[id] = nil
                } else {
                    state.waiters[id]?.done = true
                }
            }
            return ready
        }
        for continuation in woken { continuation.resume(returning: snapshot) }
    }

    /// Answers every waiter at once (with nil: "nothing newer") and every later wait immediately:
    /// server shutdown must not wait for long-polls to run out (SPEC 13 graceful shutdown).
    func shutDown() {
        let woken: [CheckedContinuation<PublishedSnapshot?, Never>] = state.withLock { state in
            state.isShutDown = true
            let ready = state.waiters.values.compactMap(\.continuation)
            state.waiters = [:]
            return ready
        }
        for continuation in woken { continuation.resume(returning: nil) }
    }

    /// Waits until a version newer than `after` is published (returned), or until `deadline` on
    /// `clock`, shutdown or cancellation (nil).
    func wait(after version: Int64, until deadline: Double, clock: any AllotClock) async -> PublishedSnapshot? {
        let id: UInt64? = state.withLock { state in
            if state.isShutDown { return nil }
            if let current = state.current, current.version > version { return nil }
            state.nextID += 1
            state.waiters[state.nextID] = Waiter(after: version)
            return state.nextID
        }
        guard let id else {
            let current = self.current
            return current.flatMap { $0.version > version ? $0 : nil }
        }
        let timer = Task { [weak self] in
            try? await clock.sleep(until: deadline)
            self?.expire(id)
        }
        defer { timer.cancel() }
        return await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<PublishedSnapshot?, Never>) in
                let outcome: PublishedSnapshot?? = state.withLock { state in
                    guard let waiter = state.waiters[id] else { return .some(nil) }
                    if waiter.done {
                        state.waiters[id] = nil
                        return .some(state.current)
                    }
                    state.waiters[id]?.continuation = continuation
                    return .none
                }
                if case .some(let result) = outcome { continuation.resume(returning: result) }
            }
        } onCancel: {
            expire(id)
        }
    }

    /// Ends one wait with nil (deadline or cancellation), if it is still waiting.
    private func expire(_ id: UInt64) {
        let continuation: CheckedContinuation<PublishedSnapshot?, Never>? = state.withLock { state in
            guard let waiter = state.waiters[id] else { return nil }
            if let continuation = waiter.continuation {
                state.waiters[id] = nil
                return continuation
            }
            // Not parked yet: leave a tombstone the parking code turns into an immediate answer.
            state.waiters[id] = nil
            return nil
        }
        continuation?.resume(returning: nil)
    }

    /// When the first version after `version` was published (nil: `version` is current, or unknown).
    func supersededAt(_ version: Int64) -> Double? {
        state.withLock { state in
            guard let current = state.current, version < current.version else { return nil }
            return state.history.first { $0.version > version }?.at ?? state.history.first?.at
        }
    }
}
