import Dispatch

/// A serial executor that runs an actor's jobs on one `DispatchQueue`.
///
/// SQLite calls block (on disk I/O, on fsync, on another process's lock for up to
/// `busy_timeout`). Run on Swift's cooperative pool, which has one thread per core (two here),
/// a few blocked database calls would stall every other task in the process: HTTP handlers,
/// the tick, long-poll wake-ups. Giving the database actors their own dispatch queue moves the
/// blocking onto threads Dispatch manages outside that pool.
final class DispatchQueueExecutor: SerialExecutor {
    let queue: DispatchQueue
    /// Marks `queue`, so that code can ask whether it is running on it (``isCurrent``).
    private let key = DispatchSpecificKey<Bool>()

    /// - Parameter queue: must be serial (the actor's isolation depends on it).
    init(queue: DispatchQueue) {
        self.queue = queue
        queue.setSpecific(key: key, value: true)
    }

    /// True when the caller is running on this executor's queue.
    var isCurrent: Bool { DispatchQueue.getSpecific(key: key) == true }

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        queue.async {
            job.runSynchronously(on: self.asUnownedSerialExecutor())
        }
    }

    func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    func checkIsolated() {
        dispatchPrecondition(condition: .onQueue(queue))
    }
}
