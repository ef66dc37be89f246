import AllotTime
import CLinux
import Foundation
import Glibc

/// The long-poll benchmark's gateways: plain loopback sockets driven by one thread with `poll(2)`,
/// so that what is measured is the server answering 5,000 held requests, not an HTTP client
/// library resuming 5,000 tasks in the same two cores.
///
/// Each watcher is one keep-alive connection; ``send(_:)`` writes one request on each, and
/// ``collect(timeout:)`` reads until every response is complete, noting when each one was.
final class LongPollWatchers: @unchecked Sendable {
    // Not shared: `send` and `collect` are called one after the other by the benchmark, never at
    // once; the descriptors and buffers belong to whichever is running.
    private var sockets: [Int32] = []

    struct Response {
        /// `MonotonicClock` nanoseconds when the whole response had arrived (0: it never did).
        var completedAt: UInt64
        var status: Int
        var bodyBytes: Int
    }

    /// Connects `count` sockets to `127.0.0.1:port`.
    init(count: Int, port: Int) throws {
        _ = signal(SIGPIPE, SIG_IGN)
        sockets.reserveCapacity(count)
        for _ in 0..<count {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            guard fd >= 0 else { throw BenchmarkSocketError(operation: "socket", code: errno) }
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(port).bigEndian)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            guard connected == 0 else {
                let code = errno
                close(fd)
                throw BenchmarkSocketError(operation: "connect", code: code)
            }
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            sockets.append(fd)
        }
    }

    deinit {
        for fd in sockets { close(fd) }
    }

    var count: Int { sockets.count }

    /// Writes one request on every socket: `request(index)` gives its bytes.
    func send(_ request: (Int) -> [UInt8]) throws {
        for (index, fd) in sockets.enumerated() {
            let bytes = request(index)
            var sent = 0
            while sent < bytes.count {
                let n = bytes.withUnsafeBytes { write(fd, $0.baseAddress! + sent, bytes.count - sent) }
                if n < 0 {
                    if errno == EINTR { continue }
                    throw BenchmarkSocketError(operation: "write", code: errno)
                }
                sent += n
            }
        }
    }

    /// Reads until every socket has one complete response, or `timeout` seconds pass.
    ///
    /// Uses epoll, so each wake-up costs the reader in proportion to the sockets that are ready, not
    /// to all 5,000 (a `poll(2)` over every descriptor per answer would make the reader, which shares
    /// the two cores with the server, the bottleneck being measured).
    func collect(timeout: Double) -> [Response] {
        var responses = [Response](repeating: Response(completedAt: 0, status: 0, bodyBytes: 0), count: sockets.count)
        var buffers = [[UInt8]](repeating: [], count: sockets.count)
        var pending = sockets.count
        let deadline = MonotonicClock.now() + UInt64(timeout * 1e9)
        let epollFD = epoll_create1(ALLOT_EPOLL_CLOEXEC)
        guard epollFD >= 0 else { return responses }
        defer { close(epollFD) }
        for (index, fd) in sockets.enumerated() {
            _ = allot_epoll_ctl(epollFD, EPOLL_CTL_ADD, fd, ALLOT_EPOLLIN, UInt64(index))
        }
        let capacity = 1_024
        let events = UnsafeMutableRawPointer.allocate(
            byteCount: Int(allot_epoll_event_size()) * capacity, alignment: 8)
        defer { events.deallocate() }
        var chunk = [UInt8](repeating: 0, count: 65_536)
        func finish(_ index: Int) {
            _ = allot_epoll_ctl(epollFD, EPOLL_CTL_DEL, sockets[index], 0, 0)
            pending -= 1
        }
        while pending > 0, MonotonicClock.now() < deadline {
            let ready = allot_epoll_wait(epollFD, events, Int32(capacity), 100)
            guard ready > 0 else { continue }
            for slot in 0..<Int(ready) {
                let index = Int(allot_epoll_event_data(events, Int32(slot)))
                guard responses[index].completedAt == 0 else { continue }
                let n = chunk.withUnsafeMutableBytes { read(sockets[index], $0.baseAddress, $0.count) }
                guard n > 0 else {
                    if n == 0 || (errno != EAGAIN && errno != EINTR) { finish(index) }  // closed or broken
                    continue
                }
                buffers[index].append(contentsOf: chunk[0..<n])
                if let response = Self.complete(buffers[index]) {
                    responses[index] = Response(
                        completedAt: MonotonicClock.now(), status: response.status, bodyBytes: response.body)
                    buffers[index] = []
                    finish(index)
                }
            }
        }
        return responses
    }

    /// The status and body length when `bytes` hold a whole response (head and `Content-Length` body).
    static func complete(_ bytes: [UInt8]) -> (status: Int, body: Int)? {
        let separator: [UInt8] = [13, 10, 13, 10]
        guard bytes.count >= 16,
            let headEnd = (0...(bytes.count - 4)).first(where: { bytes[$0..<($0 + 4)].elementsEqual(separator) })
        else { return nil }
        let head = String(decoding: bytes[0..<headEnd], as: UTF8.self)
        let lines = head.split(separator: "\r\n")
        guard let statusLine = lines.first, statusLine.count >= 12,
            let status = Int(statusLine.dropFirst(9).prefix(3))
        else { return nil }
        var length = 0
        for line in lines.dropFirst() where line.lowercased().hasPrefix("content-length:") {
            length = Int(line.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) ?? 0
        }
        guard bytes.count - headEnd - 4 >= length else { return nil }
        return (status, length)
    }
}

/// A socket call of the benchmark's client failed.
struct BenchmarkSocketError: Error, CustomStringConvertible {
    var operation: String
    var code: Int32
    var description: String { "\(operation): \(String(cString: strerror(code)))" }
}
