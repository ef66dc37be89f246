import Foundation
import Glibc

/// A blocking TCP client for live tests that must send bytes no real client would (malformed heads,
/// half requests, pipelined batches) and see exactly what the server answers.
///
/// It is deliberately independent of the code under test, and every blocking call runs on a thread
/// of its own via `onThread`, never on the cooperative pool, so blocked tests cannot starve the
/// server's handler tasks. Receives time out after `receiveTimeout` so a broken test fails instead
/// of hanging.
final class RawSocket: @unchecked Sendable {
    // Used by one test thread at a time (the scenario closure passed to `onThread`).
    let fd: Int32
    private var buffer: [UInt8] = []

    struct Failure: Error, CustomStringConvertible {
        var description: String
    }

    init(port: Int, receiveTimeout: Double = 30) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: errno \(errno)") }
        var timeout = timeval(
            tv_sec: Int(receiveTimeout), tv_usec: Int((receiveTimeout - Double(Int(receiveTimeout))) * 1e6))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = UInt16(port).bigEndian
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let status = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard status == 0 else {
            // No close here: the object is fully initialised, so throwing runs deinit, which closes `fd`. Closing it
            // here as well closed it twice, and between the two closes another test running in parallel could be
            // handed the same descriptor number for its SQLite file: the second close took that file away from it
            // (SQLITE_IOERR_READ in a store test, once, in CI).
            throw Failure(description: "connect: errno \(errno)")
        }
    }

    deinit { Glibc.close(fd) }

    /// Shrinks the receive buffer (before reading) to make a slow reader.
    func setReceiveBuffer(_ bytes: Int32) {
        var value = bytes
        setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &value, socklen_t(MemoryLayout<Int32>.size))
    }

    func send(_ text: String) throws { try send(Array(text.utf8)) }

    func send(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n < 0 {
                if errno == EINTR { continue }
                throw Failure(description: "send: errno \(errno)")
            }
            offset += n
        }
    }

    /// Reads more bytes into the buffer; false on end of input (or a reset).
    private func fill(max: Int = 65536) throws -> Bool {
        var chunk = [UInt8](repeating: 0, count: max)
        while true {
            let n = chunk.withUnsafeMutableBytes { Glibc.recv(fd, $0.baseAddress, $0.count, 0) }
            if n > 0 {
                buffer.append(contentsOf: chunk[0..<n])
                return true
            }
            if n == 0 { return false }
            if errno == EINTR { continue }
            if errno == ECONNRESET { return false }
            throw Failure(description: errno == EAGAIN ? "receive timed out" : "recv: errno \(errno)")
        }
    }

    /// Reads one response (status line, headers, a `Content-Length` body unless `bodyless`); nil when
    /// the server closed before sending any byte of it.
    func readResponse(bodyless: Bool = false) throws -> RawResponse? {
        while true {
            if let end = find([13, 10, 13, 10]) {
                let head = String(decoding: buffer[0..<end], as: UTF8.self)
                var lines = head.components(separatedBy: "\r\n")
                let statusLine = lines.removeFirst()
                let parts = statusLine.split(separator: " ", maxSplits: 2)
                guard parts.count >= 2, let status = Int(parts[1]) else {
                    throw Failure(description: "bad status line: \(statusLine)")
                }
                var headers: [(String, String)] = []
                for line in lines {
                    guard let colon = line.firstIndex(of: ":") else {
                        throw Failure(description: "bad header: \(line)")
                    }
                    headers.append(
                        (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
                    )
                }
                let length = bodyless ? 0 : Int(headers.first { $0.0.lowercased() == "content-length" }?.1 ?? "0") ?? 0
                while buffer.count < end + 4 + length {
                    guard try fill() else { throw Failure(description: "closed inside a body") }
                }
                let body = Array(buffer[(end + 4)..<(end + 4 + length)])
                buffer.removeFirst(end + 4 + length)
                return RawResponse(status: status, headers: headers, body: body)
            }
            guard try fill() else {
                if buffer.isEmpty { return nil }
                throw Failure(description: "closed inside a head: \(String(decoding: buffer, as: UTF8.self))")
            }
        }
    }

    /// Reads until the server closes; returns what came.
    func readToEnd() throws -> [UInt8] {
        while try fill() {}
        defer { buffer = [] }
        return buffer
    }

    /// True when the server has closed the connection (end of input, or a reset) within the timeout.
    func isClosedByPeer() throws -> Bool {
        let closed = try !fill()
        return closed && buffer.isEmpty
    }

    private func find(_ pattern: [UInt8]) -> Int? {
        guard buffer.count >= pattern.count else { return nil }
        for i in 0...(buffer.count - pattern.count) where buffer[i] == pattern[0] {
            if Array(buffer[i..<(i + pattern.count)]) == pattern { return i }
        }
        return nil
    }

    /// Reads exactly `count` bytes, slowly if `chunk` and `pause` say so (a slow reader).
    func readExactly(_ count: Int, chunk: Int = 65536, pause: Double = 0) throws -> [UInt8] {
        while buffer.count < count {
            guard try fill(max: chunk) else { throw Failure(description: "closed after \(buffer.count) bytes") }
            if pause > 0 { usleep(UInt32(pause * 1e6)) }
        }
        let result = Array(buffer[0..<count])
        buffer.removeFirst(count)
        return result
    }

    func shutdownWrite() { Glibc.shutdown(fd, Int32(SHUT_WR)) }
}

struct RawResponse: Sendable {
    var status: Int
    var headers: [(String, String)]
    var body: [UInt8]

    func header(_ name: String) -> String? {
        headers.first { $0.0.lowercased() == name.lowercased() }?.1
    }

    var text: String { String(decoding: body, as: UTF8.self) }
}

/// Runs blocking test code on a thread of its own and awaits its result.
func onThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        let thread = Thread {
            do {
                continuation.resume(returning: try body())
            } catch {
                continuation.resume(throwing: error)
            }
        }
        thread.stackSize = 1 << 20
        thread.start()
    }
}

struct TimedOut: Error {}

/// Runs `body`, failing with `TimedOut` if it takes longer than `seconds` (a safety net, not a sleep).
func withDeadline<T: Sendable>(seconds: Double, _ body: @escaping @Sendable () async throws -> T) async throws -> T {
    try await withThrowingTaskGroup(of: T.self) { group in
        group.addTask { try await body() }
        group.addTask {
            try await Task.sleep(for: .seconds(seconds))
            throw TimedOut()
        }
        defer { group.cancelAll() }
        return try await group.next()!
    }
}
