import CLinux
import Glibc

/// The listening socket of an `HTTPServer` and the registry of its open connections, on the loop
/// thread.
final class HTTPListener: EventLoopHandler, @unchecked Sendable {
    // Safe to share: all state is touched only on `loop`'s thread; other threads reach the listener
    // only through jobs submitted with `loop.execute`.

    private var fd: Int32
    private let loop: EventLoop
    private let context: ServerContext
    private var connections: [Int32: HTTPServerConnection] = [:]
    private var refusing = 0
    private var draining = false
    private var onDrained: (@Sendable () -> Void)?
    /// How many refused connections may be lingering (being told 503) at once; beyond it they are
    /// closed without a word, so a connection flood cannot exhaust descriptors through refusals.
    private static let maxRefusing = 256
    /// How long accepting pauses when the process runs out of descriptors (`EMFILE`), instead of
    /// spinning on a listening socket that stays readable.
    private static let acceptPause: UInt64 = 100_000_000
    private static let refusal = HTTPError(
        .serviceUnavailable, code: "too_many_connections",
        message: "the server is at its connection limit; retry shortly", headers: ["Retry-After": "1"])

    init(fd: Int32, loop: EventLoop, context: ServerContext) {
        self.fd = fd
        self.loop = loop
        self.context = context
    }

    func start() throws(SystemError) {
        try loop.register(fd, interest: ALLOT_EPOLLIN, handler: self)
    }

    // MARK: Accepting

    func handleEvents(_ events: UInt32) {
        // Accept a bounded batch per wake-up so a connection storm cannot starve established clients.
        for _ in 0..<64 {
            var address = sockaddr_storage()
            let result: IOResult<Int32>
            do {
                result = try Posix.accept(fd, address: &address)
            } catch {
                switch error.code {
                case ECONNABORTED, EPROTO, EPERM:
                    continue  // that client is gone already; the next one may be fine
                case EMFILE, ENFILE, ENOBUFS, ENOMEM:
                    context.log(.error, "accept failed, pausing", [("error", error.description)])
                    loop.setInterest(0, for: fd)
                    loop.setDeadline(loop.now + Self.acceptPause, for: fd)
                    return
                default:
                    context.log(.error, "accept failed", [("error", error.description)])
                    return
                }
            }
            guard case .done(let client) = result else { return }
            accepted(
                client, address: SocketAddress(storage: address, length: socklen_t(MemoryLayout<sockaddr_storage>.size))
            )
        }
    }

    private func accepted(_ client: Int32, address: SocketAddress) {
        Posix.setNoDelay(client)
        // Admission is decided under the shared statistics lock, so the limit holds across loops.
        let admitted = context.admitConnection()
        if !admitted && refusing >= Self.maxRefusing {
            Posix.close(client)
            return
        }
        let connection = HTTPServerConnection(
            fd: client, remoteAddress: address.description, loop: loop, context: context, listener: self,
            countsAsOpen: admitted)
        connections[client] = connection
        if !admitted {
            refusing += 1
            context.logRefusal(remote: connection.remoteAddress)
            do {
                try connection.startRefusing(with: Self.refusal)
            } catch {
                connections[client] = nil
                refusing -= 1
                Posix.close(client)
            }
            return
        }
        do {
            try connection.start()
        } catch {
            connections[client] = nil
            context.count { $0.openConnections -= 1 }
            Posix.close(client)
            context.log(.error, "cannot register connection", [("error", error.description)])
        }
    }

    func handleDeadline() {
        // The accept pause is over.
        if fd >= 0 { loop.setInterest(ALLOT_EPOLLIN, for: fd) }
    }

    func handleLoopStop() {
        stopListening()
    }

    // MARK: Connections

    func connectionClosed(_ connection: HTTPServerConnection) {
        guard connections.removeValue(forKey: connection.fd) != nil else { return }
        if connection.countsAsOpen {
            context.count { $0.openConnections -= 1 }
        } else {
            refusing -= 1
        }
        if draining && connections.isEmpty, let onDrained {
            self.onDrained = nil
            onDrained()
        }
    }

    private func stopListening() {
        guard fd >= 0 else { return }
        loop.deregister(fd)
        Posix.close(fd)
        fd = -1
    }

    /// Graceful shutdown, first step: stop accepting, close idle connections, and let the others
    /// finish their current request (each closes after its response). `drained` runs when none is left.
    func beginDraining(drained: @escaping @Sendable () -> Void) {
        stopListening()
        draining = true
        onDrained = drained
        for connection in Array(connections.values) {
            connection.drain()
        }
        if connections.isEmpty, let onDrained {
            self.onDrained = nil
            onDrained()
        }
    }

    /// Graceful shutdown, last step: close whatever is still open (cancelling running handlers).
    func closeAll() {
        stopListening()
        for connection in Array(connections.values) {
            connection.close()
        }
    }
}
