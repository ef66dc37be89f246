import Glibc

/// A plain `pthread_mutex_t`, heap-allocated so its address never moves.
///
/// Metrics live below Foundation on purpose (every module may record them), so this is the
/// smallest lock the platform offers. Non-recursive: never call back into user code while held.
final class Lock: @unchecked Sendable {
    // Safe to share: the mutex is only touched through pthread calls, which are thread-safe by
    // contract, and the pointer is immutable for the lock's lifetime.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        let result = pthread_mutex_init(mutex, nil)
        precondition(result == 0, "pthread_mutex_init failed: \(result)")
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    /// Runs `body` with the mutex held.
    @inline(__always)
    func withLock<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }
}
