import Glibc

/// A mutual-exclusion lock over `pthread_mutex_t`.
///
/// Why not `NSLock` or `Synchronization.Mutex`: this keeps the hot path free of Foundation and of
/// non-copyable types, and it is all the event loop needs (short, uncontended critical sections).
final class Lock: @unchecked Sendable {
    // Safe to share: the mutex lives at a stable heap address for the object's lifetime and is only
    // touched through pthread calls, which are themselves thread-safe.
    private let mutex: UnsafeMutablePointer<pthread_mutex_t>

    init() {
        mutex = .allocate(capacity: 1)
        mutex.initialize(to: pthread_mutex_t())
        let status = pthread_mutex_init(mutex, nil)
        precondition(status == 0, "pthread_mutex_init failed: \(status)")
    }

    deinit {
        pthread_mutex_destroy(mutex)
        mutex.deinitialize(count: 1)
        mutex.deallocate()
    }

    @inline(__always)
    func withLock<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
        pthread_mutex_lock(mutex)
        defer { pthread_mutex_unlock(mutex) }
        return try body()
    }
}

/// A value guarded by a `Lock`.
final class Locked<Value>: @unchecked Sendable {
    // Safe to share: every access to `value` goes through `lock`, and the closures passed to
    // `withLock` cannot let `value` escape by reference (they get it `inout` for their duration only).
    private let lock = Lock()
    private var value: Value

    init(_ value: Value) {
        self.value = value
    }

    @inline(__always)
    func withLock<T, E: Error>(_ body: (inout Value) throws(E) -> T) throws(E) -> T {
        try lock.withLock { () throws(E) -> T in try body(&value) }
    }
}
