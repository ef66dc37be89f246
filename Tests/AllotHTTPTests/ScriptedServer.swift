import Foundation
import Glibc

/// A one-connection server that answers each request with canned bytes, for client tests that need
/// responses our own server never sends (chunked, unframed, malformed).
final class ScriptedServer: Sendable {
    let port: Int
    private let fd: Int32

    /// Listens on an ephemeral port; `start` serves one connection on a thread of its own.
    init() throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.fd = fd
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, listen(fd, 8) == 0 else {
            // `port` is not set yet, so deinit will not run: close here (once).
            let code = errno
            Glibc.close(fd)
            throw RawSocket.Failure(description: "listen: errno \(code)")
        }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        port = Int(UInt16(bigEndian: address.sin_port))
    }

    deinit { Glibc.close(fd) }

    /// Accepts one connection; for each entry of `replies`, reads one request head and sends the
    /// entry; then closes if `closeAfter`, else waits for the client to close.
    func start(replies: [String], closeAfter: Bool = true) {
        let fd = self.fd
        let thread = Thread {
            let client = accept(fd, nil, nil)
            guard client >= 0 else { return }
            // Longer than a client's request timeout: a test task was once held over 10 s between two requests
            // by other tests' work on the cooperative pool, and a server that gave up first would fail it.
            var timeout = timeval(tv_sec: 120, tv_usec: 0)
            setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
            var pending: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            for reply in replies {
                while pending.firstRange(of: [13, 10, 13, 10]) == nil {
                    let n = buffer.withUnsafeMutableBytes { recv(client, $0.baseAddress, $0.count, 0) }
                    if n <= 0 { Glibc.close(client); return }
                    pending.append(contentsOf: buffer[0..<n])
                }
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
