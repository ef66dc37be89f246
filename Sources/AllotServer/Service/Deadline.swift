import Synchronization

/// Waiting for work that may never finish in time: a database read on a stalled disk (`fsfreeze`, a hung network
/// volume) blocks in SQLite, where no cancellation reaches it. Outside evaluation round 40: every authenticated
/// request and `/readyz` hung for the whole of a 2.5-minute stall, the last good snapshot unserved.
enum Deadline {
    /// `task`'s value if it finishes within `seconds` of real time, else nil (the task runs on: its value is dropped
    /// here, and whatever it does when it finishes, such as filling a cache, still happens).
    static func value<T: Sendable>(of task: Task<T, Never>, within seconds: Double) async -> T? {
        let once = Once()
        return await withCheckedContinuation { (continuation: CheckedContinuation<T?, Never>) in
            let timer = Task {
                try? await Task.sleep(for: .seconds(min(max(0, seconds), 86_400)))
                if once.claim() { continuation.resume(returning: nil) }
            }
            Task {
                let value = await task.value
                if once.claim() {
                    timer.cancel()
                    continuation.resume(returning: value)
                }
            }
        }
    }

    /// The first of two racers to claim it wins.
    private final class Once: Sendable {
        private let claimed = Mutex(false)

        func claim() -> Bool {
            claimed.withLock { claimed in
                defer { claimed = true }
                return !claimed
            }
        }
    }
}
