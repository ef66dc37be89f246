import AllotTime
import Foundation

/// Lets one background loop sleep until either something rings it or a deadline passes on an ``AllotClock``
/// (virtual in tests and simulations, real in production).
///
/// A ring while nobody waits is remembered (one pending ring), so a ring that races with the loop going to
/// sleep is never lost. Only one task may wait at a time: each signal belongs to one loop.
///
/// `@unchecked Sendable`: `pending`, `waiter` and `cancelledBeforeParking` are only touched while holding
/// `lock`, and the continuation is resumed after the lock is released.
final class WakeSignal: @unchecked Sendable {
    private let lock = NSLock()
    private var pending = false
    private var nextID: UInt64 = 0
    private var waiter: (id: UInt64, continuation: CheckedContinuation<Void, Never>)?
    private var cancelledBeforeParking: UInt64?

    /// Wakes the waiting loop, or makes its next wait return at once.
    func ring() {
        let continuation: CheckedContinuation<Void, Never>? = lock.withLock {
            if let waiter {
                self.waiter = nil
                return waiter.continuation
            }
            pending = true
            return nil
        }
        continuation?.resume()
    }

    /// Returns when rung (or at once if rung since the last wait), when `deadline` has passed on `clock`, or
    /// when the calling task is cancelled.
    func wait(until deadline: Double?, clock: any AllotClock) async {
        let rung = lock.withLock {
            defer { pending = false }
            return pending
        }
        if rung || Task.isCancelled { return }
        await withTaskGroup(of: Void.self) { group in
            group.addTask { await self.waitForRing() }
            if let deadline {
                group.addTask { try? await clock.sleep(until: deadline) }
            }
            _ = await group.next()
            group.cancelAll()
        }
    }

    private func waitForRing() async {
        let id: UInt64 = lock.withLock {
            nextID += 1
            return nextID
        }
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
                let resumeNow: Bool = lock.withLock {
                    if pending || cancelledBeforeParking == id {
                        pending = false
                        cancelledBeforeParking = nil
                        return true
                    }
                    waiter = (id, continuation)
                    return false
                }
                if resumeNow { continuation.resume() }
            }
        } onCancel: {
            let continuation: CheckedContinuation<Void, Never>? = lock.withLock {
                if let waiter, waiter.id == id {
                    self.waiter = nil
                    return waiter.continuation
                }
                cancelledBeforeParking = id
                return nil
            }
            continuation?.resume()
        }
    }
}
