import CLinux
import Glibc
import Testing

@testable import AllotHTTP

/// The event loop's mailbox and deadlines, and the pieces around them.
@Suite struct EventLoopTests {
    /// A handler over an eventfd that records what the loop tells it.
    final class Probe: EventLoopHandler, @unchecked Sendable {
        // Touched on the loop thread only, read by the test after the loop reported back.
        let fd = eventfd(0, ALLOT_EFD_NONBLOCK | ALLOT_EFD_CLOEXEC)
        var deadlines: [UInt64] = []
        var onDeadline: (() -> Void)?
        func handleEvents(_ events: UInt32) {}
        func handleDeadline() {
            deadlines.append(Posix.monotonicNanoseconds())
            onDeadline?()
        }
        func handleLoopStop() { Posix.close(fd) }
    }

    func onLoop<T: Sendable>(_ loop: EventLoop, _ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            loop.execute { continuation.resume(returning: body()) }
        }
    }

    @Test func jobsFromManyThreadsRunOnTheLoopInSubmissionOrderPerThread() async throws {
        let loop = try EventLoop(name: "test")
        try loop.start()
        let log = Locked<[Int: [Int]]>([:])
        let offLoop = Locked(0)
        await withTaskGroup(of: Void.self) { group in
            for sender in 0..<4 {
                group.addTask {
                    for i in 0..<250 {
                        loop.execute {
                            if !loop.inLoop { offLoop.withLock { $0 += 1 } }
                            log.withLock { $0[sender, default: []].append(i) }
                        }
                    }
                }
            }
        }
        _ = await onLoop(loop) { 0 }  // a barrier: every earlier job has run
        #expect(offLoop.withLock { $0 } == 0)
        #expect(log.withLock { $0 }.values.allSatisfy { $0 == Array(0..<250) })
        #expect(log.withLock { $0 }.count == 4)
        await loop.stop()
        #expect(!loop.execute {})  // after stop, jobs are refused
    }

    @Test func aDeadlineMovedLaterFiresAtTheLaterTimeAndAClearedOneNever() async throws {
        let loop = try EventLoop(name: "test")
        try loop.start()
        let moved = Probe()
        let cleared = Probe()
        let fired = OneShotEvent()
        moved.onDeadline = { fired.set() }
        let later = await onLoop(loop) { () -> UInt64 in
            try? loop.register(moved.fd, interest: 0, handler: moved)
            try? loop.register(cleared.fd, interest: 0, handler: cleared)
            loop.setDeadline(loop.now + 5_000_000, for: moved.fd)
            loop.setDeadline(loop.now + 1_000_000, for: cleared.fd)
            loop.setDeadline(nil, for: cleared.fd)
            let later = loop.now + 30_000_000
            loop.setDeadline(later, for: moved.fd)  // later than the armed entry: re-armed lazily
            return later
        }
        try await withDeadline(seconds: 60) { await fired.wait() }
        let (movedFired, clearedFired) = await onLoop(loop) { (moved.deadlines, cleared.deadlines) }
        #expect(movedFired.count == 1)
        #expect(movedFired[0] >= later)
        #expect(clearedFired.isEmpty)
        await loop.stop()
    }

    @Test func timersRunInDeadlineOrder() async throws {
        let loop = try EventLoop(name: "test")
        try loop.start()
        let order = Locked<[Int]>([])
        let done = OneShotEvent()
        await onLoop(loop) {
            let base = loop.now
            for (index, offset) in [4, 1, 3, 2].enumerated() {
                loop.scheduleTimer(at: base + UInt64(offset) * 1_000_000) {
                    order.withLock { $0.append(offset) }
                    if offset == 4 { done.set() }
                }
                _ = index
            }
            let cancelled = loop.scheduleTimer(at: base + 2_500_000) { order.withLock { $0.append(99) } }
            loop.cancelTimer(cancelled)
        }
        try await withDeadline(seconds: 60) { await done.wait() }
        #expect(order.withLock { $0 } == [1, 2, 3, 4])
        await loop.stop()
    }

    @Test func deadlineHeapPopsInOrder() {
        var random = SeededRandom(seed: 42)
        var heap = DeadlineHeap()
        var expected: [UInt64] = []
        for _ in 0..<500 {
            let deadline = random.next() % 10_000
            heap.push(DeadlineHeap.Entry(deadline: deadline, fd: 0, generation: 0, sequence: 0))
            expected.append(deadline)
        }
        var popped: [UInt64] = []
        while let entry = heap.popMin() { popped.append(entry.deadline) }
        #expect(popped == expected.sorted())
    }

    @Test func dateHeaderIsTheCurrentSecond() {
        let text = String(decoding: DateHeaderCache.current(), as: UTF8.self)
        #expect(text.count == 29)
        #expect(text.hasSuffix(" GMT"))
    }

    @Test func responseHeadEncoding() {
        let response = HTTPResponse(
            status: .ok, headers: ["Content-Length": "999", "X-A": "1"], body: Array("hi".utf8))
        let head = String(
            decoding: ResponseEncoder.head(for: response, keepAlive: true, version: .http1_1), as: UTF8.self)
        #expect(head.hasPrefix("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nDate: "))
        #expect(head.hasSuffix(" GMT\r\nX-A: 1\r\n\r\n"))
        let notModified = HTTPResponse(status: .notModified, headers: ["ETag": "\"42\""])
        let closing = String(
            decoding: ResponseEncoder.head(for: notModified, keepAlive: false, version: .http1_0), as: UTF8.self)
        #expect(closing.hasPrefix("HTTP/1.1 304 Not Modified\r\nConnection: close\r\nDate: "))
        #expect(!closing.contains("Content-Length"))
    }
}
