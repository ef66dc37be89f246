import CLinux
import Glibc

/// The outcome of a non-blocking I/O call: it either did something or would have had to wait.
enum IOResult<Value> {
    case done(Value)
    case wouldBlock
}

/// Thin wrappers over the system calls the event loop uses, with the hygiene SwiftNIO taught us:
/// every call is retried on `EINTR` (except `close`, which must never be retried on Linux because
/// the descriptor is already released and may have been reused by another thread), `EAGAIN` becomes
/// `.wouldBlock` rather than an error, and failures carry the call's name and `errno`.
enum Posix {
    /// Ignores `SIGPIPE` for the whole process, once. Writing to a socket the peer has closed then
    /// fails with `EPIPE` instead of killing the process; `send` also passes `MSG_NOSIGNAL`, which
    /// covers the calls that take flags.
    static let ignoreSIGPIPE: Void = {
        _ = signal(SIGPIPE, SIG_IGN)
    }()

    @inline(__always)
    static func isWouldBlock(_ code: Int32) -> Bool {
        code == EAGAIN || code == EWOULDBLOCK
    }

    /// `read(2)`; `.done(0)` is end of file.
    static func read(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) throws(SystemError) -> IOResult<Int> {
        while true {
            let n = Glibc.read(fd, buffer.baseAddress, buffer.count)
            if n >= 0 { return .done(n) }
            let code = errno
            if code == EINTR { continue }
            if isWouldBlock(code) { return .wouldBlock }
            throw SystemError(operation: "read", code: code)
        }
    }

    /// `sendmsg(2)` of several buffers at once with `MSG_NOSIGNAL`: one system call for a response's
    /// head and body (no Nagle stall between them, no copy to join them).
    static func send(_ fd: Int32, _ iovecs: UnsafeMutableBufferPointer<iovec>) throws(SystemError) -> IOResult<Int> {
        var message = msghdr()
        message.msg_iov = iovecs.baseAddress
        message.msg_iovlen = iovecs.count
        while true {
            let n = sendmsg(fd, &message, ALLOT_MSG_NOSIGNAL)
            if n >= 0 { return .done(n) }
            let code = errno
            if code == EINTR { continue }
            if isWouldBlock(code) { return .wouldBlock }
            throw SystemError(operation: "sendmsg", code: code)
        }
    }

    /// `send(2)` of one buffer with `MSG_NOSIGNAL`.
    static func send(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws(SystemError) -> IOResult<Int> {
        while true {
            let n = Glibc.send(fd, bytes.baseAddress, bytes.count, ALLOT_MSG_NOSIGNAL)
            if n >= 0 { return .done(n) }
            let code = errno
            if code == EINTR { continue }
            if isWouldBlock(code) { return .wouldBlock }
            throw SystemError(operation: "send", code: code)
        }
    }

    /// `accept4(2)` with `SOCK_NONBLOCK | SOCK_CLOEXEC`, so the new descriptor is ready for the loop
    /// and never leaks into a child process, without extra `fcntl` calls.
    static func accept(_ fd: Int32, address: inout sockaddr_storage) throws(SystemError) -> IOResult<Int32> {
        while true {
            var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
            let client = withUnsafeMutablePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    accept4(fd, $0, &length, ALLOT_SOCK_NONBLOCK | ALLOT_SOCK_CLOEXEC)
                }
            }
            if client >= 0 { return .done(client) }
            let code = errno
            if code == EINTR { continue }
            if isWouldBlock(code) { return .wouldBlock }
            throw SystemError(operation: "accept4", code: code)
        }
    }

    /// `close(2)`, never retried: on Linux the descriptor is released even when `close` reports
    /// `EINTR`, so a retry could close a descriptor another thread has just been given.
    static func close(_ fd: Int32) {
        _ = Glibc.close(fd)
    }

    /// `shutdown(2)` of our sending side; errors (the peer is already gone) do not matter here.
    static func shutdownWrite(_ fd: Int32) {
        _ = Glibc.shutdown(fd, Int32(SHUT_WR))
    }

    /// Sets an integer socket option.
    static func setOption(_ fd: Int32, _ level: Int32, _ name: Int32, _ value: Int32) throws(SystemError) {
        var value = value
        if setsockopt(fd, level, name, &value, socklen_t(MemoryLayout<Int32>.size)) != 0 {
            throw SystemError.fromErrno("setsockopt(\(level), \(name))")
        }
    }

    /// Disables Nagle's algorithm: a response is written in one call, so there is nothing to gain
    /// from coalescing, and a delayed ACK would otherwise stall keep-alive request/response pairs.
    static func setNoDelay(_ fd: Int32) {
        try? setOption(fd, Int32(IPPROTO_TCP), TCP_NODELAY, 1)
    }

    /// The monotonic clock in nanoseconds (`CLOCK_MONOTONIC`), for deadlines that must not jump
    /// with the wall clock.
    @inline(__always)
    static func monotonicNanoseconds() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) &* 1_000_000_000 &+ UInt64(time.tv_nsec)
    }
}
