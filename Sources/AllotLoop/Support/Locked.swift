import Foundation

/// A value behind a lock, for state that request handlers read without hopping onto an actor
/// (the current snapshot, gateway contacts, the loop's latest reports).
///
/// `@unchecked Sendable`: `value` is only touched inside `withLock`, which holds `lock` for the
/// whole access, so no two threads ever see it at once; the closures must not block or await.
final class Locked<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value

    init(_ value: Value) {
        self.value = value
    }

    func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }

    /// A copy of the value.
    var current: Value { withLock { $0 } }
}

/// First-come, first-served mutual exclusion across suspension points, for an actor whose
/// operations must not interleave at their `await`s (a tick, a publish): actor isolation alone
/// lets another call in while one is suspended.
///
/// Used only from inside its owner's isolation, so its plain stored properties need no lock.
struct SerialGate {
    private var busy = false
    private var waiters: [CheckedContinuation<Void, Never>] = []

    /// Whether an operation holds the gate.
    var isBusy: Bool { busy }

    /// Takes the gate now, or returns the continuation slot to wait in (see ``enter(_:)``).
    mutating func tryEnter() -> Bool {
        if busy { return false }
        busy = true
        return true
    }

    /// Queues a waiter; it is resumed holding the gate.
    mutating func enqueue(_ continuation: CheckedContinuation<Void, Never>) {
        waiters.append(continuation)
    }

    /// Hands the gate to the next waiter, or frees it.
    mutating func leave() {
        if waiters.isEmpty {
            busy = false
        } else {
            waiters.removeFirst().resume()
        }
    }
}
