import AllotTime

/// The version gateways see, and the long-polls waiting for the next one (SPEC 7 `wait=`).
///
/// Request handlers read and wait here without hopping onto the Publisher actor: a conditional
/// request costs one lock acquisition. A publish swaps the current version and resumes every
/// waiter in one pass (SPEC 13: 5,000 watchers woken within 100 ms). A waiter holds no thread,
/// only a continuation; deadlines are kept in a heap served by one sweeper task sleeping until the
/// earliest, so that neither waiting nor waking costs a timer per request.
final class SnapshotBoard: Sendable {
    private struct Waiter {
        var after: Int64
        var continuation: CheckedContinuation<PublishedSnapshot?, Never>?
        /// Satisfied (by a publish) before it had parked: answer at once when it parks.
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
        /// Waiters' deadlines; entries of waiters already answered stay until they come due.
        var deadlines = DeadlineHeap()
        /// The sweeper, and the deadline it sleeps until.
        var sweeper: Task<Void, Never>?
        var sweeperDeadline: Double?
        var sweeperGeneration: UInt64 = 0
    }

    private let state = Locked(State())
    private static let historyLimit = 512

    var current: PublishedSnapshot? { state.withLock { $0.current } }

    var isShutDown: Bool { state.withLock { $0.isShutDown } }

    /// Waiters currently held.
    var watcherCount: Int { state.withLock { $0.waiters.values.filter { $0.continuation != nil }.count } }

    /// Whether any long-poll is waiting (registered, parked or about to park).
    var hasWaiters: Bool { state.withLock { !$0.waiters.isEmpty } }

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
        let (woken, sweeper): ([CheckedContinuation<PublishedSnapshot?, Never>], Task<Void, Never>?) =
            state.withLock { state in
                state.isShutDown = true
                let ready = state.waiters.values.compactMap(\.continuation)
                state.waiters = [:]
                state.deadlines = DeadlineHeap()
                defer {
                    state.sweeper = nil
                    state.sweeperDeadline = nil
                }
                return (ready, state.sweeper)
            }
        sweeper?.cancel()
        for continuation in woken { continuation.resume(returning: nil) }
    }

    /// Waits until a version newer than `after` is published (returned), or until `deadline` on
    /// `clock`, shutdown or cancellation (nil).
    func wait(after version: Int64, until deadline: Double, clock: any AllotClock) async -> PublishedSnapshot? {
        let registration: (id: UInt64, arm: UInt64?)? = state.withLock { state in
            if state.isShutDown { return nil }
            if let current = state.current, current.version > version { return nil }
            state.nextID += 1
            let id = state.nextID
            state.waiters[id] = Waiter(after: version)
            state.deadlines.push(deadline, id)
            guard state.sweeperDeadline.map({ deadline < $0 }) ?? true else { return (id, nil) }
            state.sweeperGeneration += 1
            state.sweeperDeadline = deadline
            return (id, state.sweeperGeneration)
        }
        guard let registration else {
            let current = self.current
            return current.flatMap { $0.version > version ? $0 : nil }
        }
        if let generation = registration.arm { arm(generation: generation, until: deadline, clock: clock) }
        let id = registration.id
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
            expire([id])
        }
    }

    /// Starts the sweeper of generation `generation`, sleeping until `deadline`, and stops the one it
    /// replaces.
    private func arm(generation: UInt64, until deadline: Double, clock: any AllotClock) {
        let task = Task { [weak self] in
            var wake = deadline
            while true {
                do {
                    try await clock.sleep(until: wake)
                } catch {
                    return
                }
                guard let self, let next = self.sweep(generation: generation, now: clock.now) else { return }
                wake = next
            }
        }
        let replaced: Task<Void, Never>? = state.withLock { state in
            guard state.sweeperGeneration == generation else { return task }  // already superseded
            defer { state.sweeper = task }
            return state.sweeper
        }
        replaced?.cancel()
    }

    /// Ends every wait whose deadline has come; returns when to wake next (nil: stop, nothing waits
    /// or a newer sweeper took over).
    private func sweep(generation: UInt64, now: Double) -> Double? {
        var due: [UInt64] = []
        let next: Double? = state.withLock { state in
            guard state.sweeperGeneration == generation else { return nil }
            while let top = state.deadlines.top, top.deadline <= now {
                state.deadlines.pop()
                if state.waiters[top.id] != nil { due.append(top.id) }
            }
            // Deadlines of waiters already answered are dropped as they surface.
            while let top = state.deadlines.top, state.waiters[top.id] == nil { state.deadlines.pop() }
            state.sweeperDeadline = state.deadlines.top?.deadline
            if state.sweeperDeadline == nil { state.sweeper = nil }
            return state.sweeperDeadline
        }
        expire(due)
        return next
    }

    /// Ends waits with nil (deadline or cancellation), if they are still waiting.
    private func expire(_ ids: [UInt64]) {
        guard !ids.isEmpty else { return }
        let continuations: [CheckedContinuation<PublishedSnapshot?, Never>] = state.withLock { state in
            var ready: [CheckedContinuation<PublishedSnapshot?, Never>] = []
            for id in ids {
                // Not parked yet: removing it leaves the parking code to answer at once.
                guard let waiter = state.waiters.removeValue(forKey: id) else { continue }
                if let continuation = waiter.continuation { ready.append(continuation) }
            }
            return ready
        }
        for continuation in continuations { continuation.resume(returning: nil) }
    }

    /// Records a request for the global view.
    func noteGlobalView(now: Double) {
        state.withLock { $0.globalViewAt = now }
    }

    /// Whether the global view was requested within the last ten minutes: then each version's JSON
    /// is encoded ahead of the first request.
    func wantsGlobalView(now: Double) -> Bool {
        state.withLock { state in state.globalViewAt.map { now - $0 < 600 } ?? false }
    }

    /// When `version` was superseded, only if its successor is still remembered (versions are consecutive): the
    /// exact time, for a gateway's contact to keep (``GatewayRegistry/noteSuperseded(_:)``).
    func supersededAtExactly(_ version: Int64) -> Double? {
        state.withLock { state in
            guard let current = state.current, version < current.version,
                let next = state.history.first(where: { $0.version > version }), next.version == version + 1
            else { return nil }
            return next.at
        }
    }

    /// When the first version after `version` was published (nil: `version` is current, or unknown); the oldest
    /// remembered when its successor is no longer remembered (a lower bound of the lag).
    func supersededAt(_ version: Int64) -> Double? {
        state.withLock { state in
            guard let current = state.current, version < current.version else { return nil }
            return state.history.first { $0.version > version }?.at ?? state.history.first?.at
        }
    }
}

/// A binary min-heap of (deadline, waiter id).
struct DeadlineHeap {
    private var items: [(deadline: Double, id: UInt64)] = []

    var top: (deadline: Double, id: UInt64)? { items.first }
    var count: Int { items.count }

    mutating func push(_ deadline: Double, _ id: UInt64) {
        items.append((deadline, id))
        var child = items.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard items[child].deadline < items[parent].deadline else { break }
            items.swapAt(child, parent)
            child = parent
        }
    }

    mutating func pop() {
        guard !items.isEmpty else { return }
        items.swapAt(0, items.count - 1)
        items.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var smallest = parent
            if left < items.count, items[left].deadline < items[smallest].deadline { smallest = left }
            if right < items.count, items[right].deadline < items[smallest].deadline { smallest = right }
            guard smallest != parent else { return }
            items.swapAt(parent, smallest)
            parent = smallest
        }
    }
}
