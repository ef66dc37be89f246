import Foundation
import Glibc

/// A one-connection server that answers each request with canned bytes, for client tests that need
/// responses our own server never sends (chunked, unframed, malformed).
final class ScriptedServer: Sendable {
    let port: Int
    /// A path of this server's own: requests must ask for it (see ``start(replies:closeAfter:)``).
    let path = "/scripted-\(UInt64.random(in: 0...UInt64.max))"
    /// ``path`` on ``port``: what a test's client asks for.
    var url: String { "http://127.0.0.1:\(port)\(path)" }
    private let fd: Int32

    /// Listens on an ephemeral port; `start` serves one connection on a thread of its own.
    init() throws {
        let (fd, port) = try bindLoopback(listening: true)
        self.fd = fd
        self.port = port
    }

    deinit { Glibc.close(fd) }

    /// Accepts connections until one asks for ``url``'s path (any other is closed unanswered: a client of
    /// another test still retrying a port that was a closed server's, now ours, once took the only accept and
    /// left this server's own client waiting out its timeout); for each entry of `replies`, reads one request
    /// head from it and sends the entry; then closes if `closeAfter`, else waits for the client to close.
    func start(replies: [String], closeAfter: Bool = true) {
        let fd = self.fd
        let marker = Array(" \(path) ".utf8)
        let thread = Thread {
            var pending: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            var client: Int32 = -1
            /// Reads until `pending` holds a whole request head; false when the client is gone.
            func readHead() -> Bool {
                while pending.firstRange(of: [13, 10, 13, 10]) == nil {
                    let n = buffer.withUnsafeMutableBytes { recv(client, $0.baseAddress, $0.count, 0) }
                    if n <= 0 { return false }
                    pending.append(contentsOf: buffer[0..<n])
                }
                return true
            }
            while true {
                client = accept(fd, nil, nil)
                guard client >= 0 else { return }
                // Longer than a client's request timeout: a test task was once held over 10 s between two
                // requests by other tests' work on the cooperative pool, and a server that gave up first would
                // fail it.
                var timeout = timeval(tv_sec: 120, tv_usec: 0)
                setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
                pending = []
                if readHead(), let line = pending.firstRange(of: [13, 10]),
                    pending[..<line.lowerBound].firstRange(of: marker) != nil
                {
                    break
                }
                Glibc.close(client)
            }
            for reply in replies {
                guard readHead() else { Glibc.close(client); return }
                pending.removeSubrange(..<pending.firstRange(of: [13, 10, 13, 10])!.upperBound)
                _ = Array(reply.utf8).withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            }
            if !closeAfter {
                while buffer.withUnsafeMutableBytes({ recv(client, $0.baseAddress, $0.count, 0) }) > 0 {}
            }
            Glibc.close(client)
        }
        thread.start()
    }
}

/// A port held bound but not listening: a connection to it is refused, and no other test's server can take it
/// meanwhile (a port freed by a stopped server was taken by another test's, and the client got a 404 instead of a
/// refusal, on a busy machine).
final class RefusingPort: Sendable {
    let port: Int
    private let fd: Int32

    init() throws {
        (fd, port) = try bindLoopback(listening: false)
    }

    deinit { Glibc.close(fd) }
}

/// A TCP socket bound to an ephemeral port of 127.0.0.1 (listening when `listening`), and the port; closed again on
/// failure.
private func bindLoopback(listening: Bool) throws -> (fd: Int32, port: Int) {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { throw RawSocket.Failure(description: "socket: errno \(errno)") }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    let bound = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    guard bound == 0, !listening || listen(fd, 8) == 0 else {
        let code = errno
        Glibc.close(fd)
        throw RawSocket.Failure(description: (listening ? "listen" : "bind") + ": errno \(code)")
    }
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
    }
    return (fd, Int(UInt16(bigEndian: address.sin_port)))
}
