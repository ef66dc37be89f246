import CLinux
import Glibc

/// Something that owns a file descriptor registered on an `EventLoop`.
///
/// Every method is called on the loop's thread, which is what lets handlers keep their state in
/// plain stored properties without locks.
protocol EventLoopHandler: AnyObject {
    /// The descriptor is ready: `events` is the epoll mask (`EPOLLIN`, `EPOLLOUT`, `EPOLLERR`, …).
    func handleEvents(_ events: UInt32)
    /// The deadline set with `EventLoop.setDeadline(_:for:)` has passed.
    func handleDeadline()
    /// The loop is stopping with this handler still registered: close the descriptor now.
    func handleLoopStop()
}

/// One thread running `epoll_wait`, the place where all socket I/O of the HTTP server and client
/// happens.
///
/// Why a thread and not a task per connection: an idle or long-polling connection then costs a
/// registration and a few hundred bytes, not a thread or a suspended task in a read. Request
/// handlers run as Swift tasks on the cooperative pool; whatever they produce comes back here
/// through `execute(_:)` (a locked mailbox plus an `eventfd` to wake `epoll_wait`), so descriptors
/// are only ever touched on this thread and cannot be closed under a writer's feet.
///
/// Deadlines (header-read, idle, write and client timeouts) live in a binary heap keyed by the
/// monotonic clock; each registration has at most one live heap entry (`armedSequence`), and a
/// later deadline is re-armed lazily when the earlier entry pops, so refreshing a deadline on every
/// request costs no heap traffic.
final class EventLoop: @unchecked Sendable {
    // Safe to share: the mutable state below (everything but `mailbox`, `epollFD`, `wakeFD` and
    // `threadID`) is only touched on the loop thread, which `assertInLoop()` checks in debug builds.
    // Other threads may only call `execute(_:)`, `inLoop` and `stop()`, which use the locked mailbox
    // and the eventfd.

    private struct Registration {
        var handler: EventLoopHandler?
        var generation: UInt32 = 0
        var interest: UInt32 = 0
        /// The deadline the handler asked for (monotonic ns, 0 = none).
        var deadline: UInt64 = 0
        /// The deadline of this registration's live heap entry (0 = none).
        var armedDeadline: UInt64 = 0
        var armedSequence: UInt32 = 0
    }

    private struct Mailbox {
        var jobs: [@Sendable () -> Void] = []
        var wakePending = false
        var stopped = false
    }

    let name: String
    private let epollFD: Int32
    private let wakeFD: Int32
    private let mailbox = Locked(Mailbox())
    private var registrations: [Registration] = []
    private var timers = DeadlineHeap()
    private var running = true
    private let threadID = Locked<pthread_t?>(nil)
    private var stopWaiters: [@Sendable () -> Void] = []
    /// One-shot timers not tied to a descriptor (heap entries with `fd == -1`), by id.
    private var timerJobs: [UInt32: () -> Void] = [:]
    private var nextTimerID: UInt32 = 0
    private var spareJobs: [@Sendable () -> Void] = []
    private static let eventCapacity: Int32 = 512

    /// The monotonic time in nanoseconds, read once per loop iteration.
    private(set) var now: UInt64 = Posix.monotonicNanoseconds()

    /// A scratch buffer every handler of this loop reads into (reads are serialised on the loop thread,
    /// so one buffer serves all connections; idle connections hold no read buffer of their own).
    let readBuffer: UnsafeMutableRawBufferPointer

    init(name: String) throws(SystemError) {
        _ = Posix.ignoreSIGPIPE
        self.name = name
        let epollFD = epoll_create1(ALLOT_EPOLL_CLOEXEC)
        guard epollFD >= 0 else { throw SystemError.fromErrno("epoll_create1") }
        let wakeFD = eventfd(0, ALLOT_EFD_NONBLOCK | ALLOT_EFD_CLOEXEC)
        guard wakeFD >= 0 else {
            let error = SystemError.fromErrno("eventfd")
            Posix.close(epollFD)
            throw error
        }
        guard allot_epoll_ctl(epollFD, EPOLL_CTL_ADD, wakeFD, ALLOT_EPOLLIN, UInt64(UInt32.max)) == 0 else {
            let error = SystemError.fromErrno("epoll_ctl(ADD eventfd)")
            Posix.close(wakeFD)
            Posix.close(epollFD)
            throw error
        }
        self.epollFD = epollFD
        self.wakeFD = wakeFD
        self.readBuffer = .allocate(byteCount: 64 * 1024, alignment: 16)
    }

    deinit {
        readBuffer.deallocate()
    }

    /// Starts the loop's thread.
    func start() throws(SystemError) {
        final class Body {
            let run: () -> Void
            init(_ run: @escaping () -> Void) { self.run = run }
        }
        let body = Unmanaged.passRetained(Body { [self] in self.run() }).toOpaque()
        var thread = pthread_t()
        let status = pthread_create(
            &thread, nil,
            { raw in
                let body = Unmanaged<Body>.fromOpaque(raw!).takeRetainedValue()
                body.run()
                return nil
            }, body)
        guard status == 0 else {
            Unmanaged<Body>.fromOpaque(body).release()
            throw SystemError(operation: "pthread_create", code: status)
        }
        pthread_detach(thread)
    }

    /// True when called on the loop's thread.
    var inLoop: Bool {
        guard let thread = threadID.withLock({ $0 }) else { return false }
        return pthread_equal(thread, pthread_self()) != 0
    }

    @inline(__always)
    func assertInLoop(file: StaticString = #fileID, line: UInt = #line) {
        assert(inLoop, "must run on the event loop thread", file: file, line: line)
    }

    /// Runs `job` on the loop thread, after the events being handled now. Callable from any thread.
    /// Jobs submitted after the loop stopped are dropped.
    @discardableResult
    func execute(_ job: @escaping @Sendable () -> Void) -> Bool {
        let (accepted, wake) = mailbox.withLock { box -> (Bool, Bool) in
            guard !box.stopped else { return (false, false) }
            box.jobs.append(job)
            defer { box.wakePending = true }
            return (true, !box.wakePending)
        }
        if wake {
            _ = eventfd_write(wakeFD, 1)
        }
        return accepted
    }

    /// Stops the loop after the jobs already submitted; handlers still registered get
    /// `handleLoopStop()`. `completion` runs on the loop thread as its last act.
    /// Returns false (and never runs `completion`) when the loop had already stopped.
    @discardableResult
    func stop(completion: @escaping @Sendable () -> Void = {}) -> Bool {
        execute { [self] in
            self.running = false
            self.stopWaiters.append(completion)
        }
    }

    /// Stops the loop and waits for its thread to finish with every descriptor it owned.
    func stop() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            if !stop(completion: { continuation.resume() }) {
                continuation.resume()
            }
        }
    }

    // MARK: Registrations (loop thread only)

    /// Adds `fd` to the epoll set with `interest` (an epoll mask), owned by `handler`.
    func register(_ fd: Int32, interest: UInt32, handler: EventLoopHandler) throws(SystemError) {
        assertInLoop()
        let index = Int(fd)
        if index >= registrations.count {
            registrations.append(contentsOf: repeatElement(Registration(), count: index - registrations.count + 1))
        }
        let generation = registrations[index].generation
        guard allot_epoll_ctl(epollFD, EPOLL_CTL_ADD, fd, interest, Self.token(fd: fd, generation: generation)) == 0
        else { throw SystemError.fromErrno("epoll_ctl(ADD)") }
        registrations[index] = Registration(handler: handler, generation: generation, interest: interest)
    }

    /// Changes what `fd` waits for; a no-op when it is unchanged (no system call).
    func setInterest(_ interest: UInt32, for fd: Int32) {
        assertInLoop()
        let index = Int(fd)
        guard index < registrations.count, registrations[index].handler != nil,
            registrations[index].interest != interest
        else { return }
        let token = Self.token(fd: fd, generation: registrations[index].generation)
        if allot_epoll_ctl(epollFD, EPOLL_CTL_MOD, fd, interest, token) == 0 {
            registrations[index].interest = interest
        }
    }

    /// Removes `fd` from the loop (before the owner closes it). Events and deadlines already queued
    /// for it are ignored from now on, even if the kernel hands the same number to a new socket.
    func deregister(_ fd: Int32) {
        assertInLoop()
        let index = Int(fd)
        guard index < registrations.count, registrations[index].handler != nil else { return }
        _ = allot_epoll_ctl(epollFD, EPOLL_CTL_DEL, fd, 0, 0)
        registrations[index] = Registration(generation: registrations[index].generation &+ 1)
    }

    /// Sets (or with `nil` clears) the monotonic deadline after which `fd`'s handler gets
    /// `handleDeadline()`.
    func setDeadline(_ deadline: UInt64?, for fd: Int32) {
        assertInLoop()
        let index = Int(fd)
        guard index < registrations.count, registrations[index].handler != nil else { return }
        let deadline = deadline ?? 0
        registrations[index].deadline = deadline
        let armed = registrations[index].armedDeadline
        if deadline != 0 && (armed == 0 || deadline < armed) {
            arm(index, at: deadline)
        }
    }

    /// Runs `job` on the loop thread once the monotonic clock reaches `deadline`; returns an id for
    /// `cancelTimer`.
    @discardableResult
    func scheduleTimer(at deadline: UInt64, _ job: @escaping () -> Void) -> UInt32 {
        assertInLoop()
        nextTimerID &+= 1
        timerJobs[nextTimerID] = job
        timers.push(DeadlineHeap.Entry(deadline: deadline, fd: -1, generation: 0, sequence: nextTimerID))
        return nextTimerID
    }

    func cancelTimer(_ id: UInt32) {
        assertInLoop()
        timerJobs[id] = nil
    }

    private func arm(_ index: Int, at deadline: UInt64) {
        registrations[index].armedSequence &+= 1
        registrations[index].armedDeadline = deadline
        timers.push(
            DeadlineHeap.Entry(
                deadline: deadline, fd: Int32(index), generation: registrations[index].generation,
                sequence: registrations[index].armedSequence))
    }

    // MARK: The loop

    private static func token(fd: Int32, generation: UInt32) -> UInt64 {
        UInt64(generation) << 32 | UInt64(UInt32(bitPattern: fd))
    }

    private func run() {
        threadID.withLock { $0 = pthread_self() }
        let eventSize = Int(allot_epoll_event_size())
        let events = UnsafeMutableRawPointer.allocate(
            byteCount: eventSize * Int(Self.eventCapacity), alignment: 16)
        defer { events.deallocate() }

        while running {
            let count = allot_epoll_wait(epollFD, events, Self.eventCapacity, waitTimeout())
            now = Posix.monotonicNanoseconds()
            if count < 0 && errno != EINTR {
                // Only EBADF/EFAULT/EINVAL are possible: a programming error, not a runtime condition.
                preconditionFailure("\(SystemError.fromErrno("epoll_wait"))")
            }
            for i in 0..<max(0, Int(count)) {
                dispatch(
                    mask: allot_epoll_event_mask(events, Int32(i)), token: allot_epoll_event_data(events, Int32(i)))
            }
            runJobs()
            expireDeadlines()
        }
        finish()
    }

    private func dispatch(mask: UInt32, token: UInt64) {
        if token == UInt64(UInt32.max) {
            var value: eventfd_t = 0
            _ = eventfd_read(wakeFD, &value)
            return
        }
        let index = Int(UInt32(truncatingIfNeeded: token))
        let generation = UInt32(truncatingIfNeeded: token >> 32)
        guard index < registrations.count, registrations[index].generation == generation,
            let handler = registrations[index].handler
        else { return }
        handler.handleEvents(mask)
    }

    private func runJobs() {
        // Swap the queue with a spare array so neither side reallocates on the steady path.
        var batch = spareJobs
        spareJobs = []
        mailbox.withLock { box in
            swap(&batch, &box.jobs)
            box.wakePending = false
        }
        for job in batch {
            job()
        }
        batch.removeAll(keepingCapacity: true)
        spareJobs = batch
    }

    private func expireDeadlines() {
        while let top = timers.min, top.deadline <= now {
            timers.popMin()
            if top.fd < 0 {
                timerJobs.removeValue(forKey: top.sequence)?()
                continue
            }
            let index = Int(top.fd)
            guard index < registrations.count, registrations[index].generation == top.generation,
                registrations[index].armedSequence == top.sequence, let handler = registrations[index].handler
            else { continue }
            registrations[index].armedDeadline = 0
            let wanted = registrations[index].deadline
            if wanted == 0 { continue }
            if wanted <= now {
                registrations[index].deadline = 0
                handler.handleDeadline()
            } else {
                arm(index, at: wanted)
            }
        }
    }

    /// How long `epoll_wait` may sleep: until the earliest deadline (rounded up to whole
    /// milliseconds, so we never wake a hair early and spin), not at all when jobs are waiting.
    private func waitTimeout() -> Int32 {
        if mailbox.withLock({ !$0.jobs.isEmpty }) { return 0 }
        guard let next = timers.min else { return -1 }
        let current = Posix.monotonicNanoseconds()
        guard next.deadline > current else { return 0 }
        let milliseconds = (next.deadline - current + 999_999) / 1_000_000
        return Int32(min(milliseconds, 60_000))
    }

    private func finish() {
        for index in registrations.indices {
            if let handler = registrations[index].handler {
                handler.handleLoopStop()
                deregister(Int32(index))
            }
        }
        let (waiters, leftover) = mailbox.withLock { box in
            box.stopped = true
            defer { box.jobs = [] }
            return (stopWaiters, box.jobs)
        }
        _ = leftover  // dropped: their connections are gone
        Posix.close(wakeFD)
        Posix.close(epollFD)
        threadID.withLock { $0 = nil }
        for waiter in waiters {
            waiter()
        }
    }
}

/// A binary min-heap of deadlines for `EventLoop`.
struct DeadlineHeap {
    struct Entry {
        var deadline: UInt64
        var fd: Int32
        var generation: UInt32
        var sequence: UInt32
    }

    private var entries: [Entry] = []

    var min: Entry? { entries.first }
    var count: Int { entries.count }

    mutating func push(_ entry: Entry) {
        entries.append(entry)
        var child = entries.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard entries[child].deadline < entries[parent].deadline else { break }
            entries.swapAt(child, parent)
            child = parent
        }
    }

    @discardableResult
    mutating func popMin() -> Entry? {
        guard !entries.isEmpty else { return nil }
        let top = entries[0]
        let last = entries.removeLast()
        guard !entries.isEmpty else { return top }
        entries[0] = last
        var parent = 0
        while true {
            let left = 2 * parent + 1
            guard left < entries.count else { break }
            var smallest = left
            let right = left + 1
            if right < entries.count && entries[right].deadline < entries[left].deadline { smallest = right }
            guard entries[smallest].deadline < entries[parent].deadline else { break }
            entries.swapAt(smallest, parent)
            parent = smallest
        }
        return top
    }
}
