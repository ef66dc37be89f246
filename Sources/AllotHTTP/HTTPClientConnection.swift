import CLinux
import Glibc

/// A request on its way through the client's event loop.
final class PendingClientRequest: @unchecked Sendable {
    // Safe to share: the delivery state (`completion`, a result that arrived before it) and
    // `cancelled` are behind locks, because a cancellation handler can complete the request before
    // the caller has installed its completion; the other mutable fields are only touched on the
    // loop thread.
    let key: String
    let addresses: [SocketAddress]
    let method: HTTPMethod
    let head: [UInt8]
    let body: [UInt8]
    let deadline: UInt64
    typealias Completion = @Sendable (Result<HTTPClientResponse, HTTPClientError>) -> Void
    private struct Delivery {
        var completion: Completion?
        /// A result that arrived before `completion` was installed.
        var early: Result<HTTPClientResponse, HTTPClientError>?
        var completed = false
    }
    private let delivery = Locked(Delivery())
    private let cancelled = Locked(false)
    /// Loop thread: whether it was already retried on a fresh connection, and which address is next.
    var retried = false
    var addressIndex = 0
    /// Loop thread: the timer that fails the request while it waits for a connection slot.
    var queueTimer: UInt32?

    init(key: String, addresses: [SocketAddress], method: HTTPMethod, head: [UInt8], body: [UInt8], deadline: UInt64) {
        self.key = key
        self.addresses = addresses
        self.method = method
        self.head = head
        self.body = body
        self.deadline = deadline
    }

    var isCancelled: Bool { cancelled.withLock { $0 } }
    func markCancelled() { cancelled.withLock { $0 = true } }

    /// Installs the caller's completion. If the request already completed (cancelled before it
    /// started), the stored result is delivered at once, so the caller can never wait forever.
    func install(_ completion: @escaping Completion) {
        let early: Result<HTTPClientResponse, HTTPClientError>? = delivery.withLock { state in
            if let result = state.early {
                state.early = nil
                return result
            }
            state.completion = completion
            return nil
        }
        if let early { completion(early) }
    }

    /// Resumes the caller, once (later results are ignored).
    func complete(_ result: Result<HTTPClientResponse, HTTPClientError>) {
        let completion: Completion? = delivery.withLock { state in
            guard !state.completed else { return nil }
            state.completed = true
            guard let completion = state.completion else {
                state.early = result
                return nil
            }
            state.completion = nil
            return completion
        }
        completion?(result)
    }

    var isCompleted: Bool { delivery.withLock { $0.completed } }
}

/// The client's pool of connections and its requests in flight, on the loop thread.
final class HTTPClientCore: @unchecked Sendable {
    // Safe to share: every method runs on `loop`'s thread (callers submit them with `loop.execute`).
    let loop: EventLoop
    let configuration: HTTPClientConfiguration
    let idleTimeout: UInt64
    private var idle: [String: [HTTPClientConnection]] = [:]
    private var active: [ObjectIdentifier: HTTPClientConnection] = [:]
    /// Connections per key, in use, idle or connecting (bounded by `maxConnectionsPerHost`).
    private var connectionCounts: [String: Int] = [:]
    /// Requests waiting for a connection slot, first come first served.
    private var waiting: [String: [PendingClientRequest]] = [:]
    private var isShutDown = false

    init(loop: EventLoop, configuration: HTTPClientConfiguration) {
        self.loop = loop
        self.configuration = configuration
        self.idleTimeout = configuration.idleConnectionTimeout.nanoseconds
    }

    func start(_ request: PendingClientRequest) {
        if isShutDown {
            request.complete(.failure(HTTPClientError(.shutDown, "the client was shut down")))
            return
        }
        if request.isCancelled {
            request.complete(.failure(HTTPClientError(.cancelled, "the request was cancelled")))
            return
        }
        if loop.now >= request.deadline {
            request.complete(.failure(HTTPClientError(.timedOut, "the request timed out")))
            return
        }
        // The pools are mutated in place (`idle[key]?.…`): copying an array out of the dictionary and
        // back would copy it (and retain every connection in it) on each request.
        while let connection = idle[request.key]?.popLast() {
            if connection.isUsable {
                active[ObjectIdentifier(connection)] = connection
                connection.begin(request)
                return
            }
            connection.close()
        }
        if connectionCounts[request.key, default: 0] >= configuration.maxConnectionsPerHost {
            waiting[request.key, default: []].append(request)
            request.queueTimer = loop.scheduleTimer(at: request.deadline) { [self] in
                request.queueTimer = nil
                if removeWaiter(request) {
                    request.complete(.failure(HTTPClientError(.timedOut, "no connection became free in time")))
                }
            }
            return
        }
        open(for: request)
    }

    /// Opens a fresh connection to the request's next address.
    func open(for request: PendingClientRequest) {
        let address = request.addresses[min(request.addressIndex, request.addresses.count - 1)]
        do {
            let connection = try HTTPClientConnection.connect(to: address, key: request.key, core: self)
            connectionCounts[request.key, default: 0] += 1
            active[ObjectIdentifier(connection)] = connection
            connection.begin(request)
        } catch {
            request.complete(.failure(error))
        }
    }

    private func removeWaiter(_ request: PendingClientRequest) -> Bool {
        guard let index = waiting[request.key]?.firstIndex(where: { $0 === request }) else { return false }
        waiting[request.key]?.remove(at: index)
        if waiting[request.key]?.isEmpty == true { waiting[request.key] = nil }
        if let timer = request.queueTimer {
            loop.cancelTimer(timer)
            request.queueTimer = nil
        }
        return true
    }

    /// The next request waiting for a connection to `key`, if any.
    private func nextWaiter(for key: String) -> PendingClientRequest? {
        guard let first = waiting[key]?.first else { return nil }
        _ = removeWaiter(first)
        return first
    }

    func cancel(_ request: PendingClientRequest) {
        for connection in active.values where connection.request === request {
            connection.fail(HTTPClientError(.cancelled, "the request was cancelled"), retryable: false)
            return
        }
        _ = removeWaiter(request)
        request.complete(.failure(HTTPClientError(.cancelled, "the request was cancelled")))
    }

    /// A connection finished its request and may serve another.
    func release(_ connection: HTTPClientConnection) {
        if let next = nextWaiter(for: connection.key) {
            connection.begin(next)
            return
        }
        active[ObjectIdentifier(connection)] = nil
        guard !isShutDown, idle[connection.key, default: []].count < configuration.maxIdleConnectionsPerHost else {
            connection.close()
            return
        }
        idle[connection.key, default: []].append(connection)
        connection.becomeIdle()
    }

    func closed(_ connection: HTTPClientConnection) {
        active[ObjectIdentifier(connection)] = nil
        let remaining = connectionCounts[connection.key, default: 1] - 1
        connectionCounts[connection.key] = remaining > 0 ? remaining : nil
        if !isShutDown, let next = nextWaiter(for: connection.key) {
            open(for: next)
        }
        if connection.isPooled, let index = idle[connection.key]?.lastIndex(where: { $0 === connection }) {
            idle[connection.key]?.remove(at: index)
        }
    }

    func shutDown() {
        isShutDown = true
        for request in waiting.values.flatMap({ $0 }) {
            _ = removeWaiter(request)
            request.complete(.failure(HTTPClientError(.shutDown, "the client was shut down")))
        }
        for connection in Array(active.values) {
            connection.fail(HTTPClientError(.shutDown, "the client was shut down"), retryable: false)
        }
        for connection in idle.values.flatMap({ $0 }) {
            connection.close()
        }
        idle = [:]
    }
}

/// One client connection: connects, sends a request, parses the response, then idles in the pool.
final class HTTPClientConnection: EventLoopHandler {
    private enum State {
        case connecting
        case sending
        case receiving
        case idle
        case closed
    }

    let fd: Int32
    let key: String
    private let core: HTTPClientCore  // strong: the cycle ends when the connection closes
    private var loop: EventLoop { core.loop }
    private var state = State.connecting
    /// Whether the connection sits in the core's idle pool.
    private(set) var isPooled = false
    private(set) var request: PendingClientRequest?
    private var served = 0
    private var outbound: [[UInt8]] = []
    private var outboundOffset = 0
    private var inbound: [UInt8] = []
    private var headParser: ResponseHeadParser
    private var head: ResponseHead?
    private var bodyStart = 0
    private var chunked: ChunkedDecoder?
    private var chunkedBody: [UInt8] = []
    private var interest: UInt32 = 0

    private init(fd: Int32, key: String, core: HTTPClientCore) {
        self.fd = fd
        self.key = key
        self.core = core
        self.headParser = ResponseHeadParser(maxHeaderBytes: core.configuration.maxHeaderBytes)
    }

    static func connect(to address: SocketAddress, key: String, core: HTTPClientCore) throws(HTTPClientError)
        -> HTTPClientConnection
    {
        let fd = socket(address.family, Int32(SOCK_STREAM.rawValue) | ALLOT_SOCK_NONBLOCK | ALLOT_SOCK_CLOEXEC, 0)
        guard fd >= 0 else { throw HTTPClientError(.system, SystemError.fromErrno("socket").description) }
        Posix.setNoDelay(fd)
        var status: Int32
        repeat {
            status = address.withSockaddr { Glibc.connect(fd, $0, $1) }
        } while status != 0 && errno == EINTR
        if status != 0 && errno != EINPROGRESS {
            let code = errno
            Posix.close(fd)
            throw connectError(code, address)
        }
        let connection = HTTPClientConnection(fd: fd, key: key, core: core)
        do {
            connection.interest = ALLOT_EPOLLOUT
            try core.loop.register(fd, interest: ALLOT_EPOLLOUT, handler: connection)
        } catch {
            Posix.close(fd)
            throw HTTPClientError(.system, error.description)
        }
        return connection
    }

    private static func connectError(_ code: Int32, _ address: SocketAddress) -> HTTPClientError {
        code == ECONNREFUSED
            ? HTTPClientError(.connectionRefused, "connection refused by \(address)")
            : HTTPClientError(.system, "\(SystemError(operation: "connect(\(address))", code: code))")
    }

    /// Whether a pooled connection can take a request: still idle, and the server has not closed it
    /// (a peek that would block means nothing is pending, which is what an idle connection shows).
    var isUsable: Bool {
        guard state == .idle else { return false }
        var byte: UInt8 = 0
        let n = recv(fd, &byte, 1, Int32(MSG_PEEK | MSG_DONTWAIT))
        return n < 0 && Posix.isWouldBlock(errno)
    }

    func begin(_ request: PendingClientRequest) {
        self.request = request
        isPooled = false
        outbound = [request.head]
        if !request.body.isEmpty { outbound.append(request.body) }
        outboundOffset = 0
        inbound.removeAll(keepingCapacity: true)
        headParser.reset()
        head = nil
        chunked = nil
        chunkedBody = []
        loop.setDeadline(request.deadline, for: fd)
        if state != .connecting {
            state = .sending
            flush()
        }
    }

    func becomeIdle() {
        state = .idle
        isPooled = true
        request = nil
        outbound = []
        inbound = []
        setInterest(ALLOT_EPOLLIN | ALLOT_EPOLLRDHUP)
        loop.setDeadline(loop.now + core.idleTimeout, for: fd)
    }

    // MARK: Events

    func handleEvents(_ events: UInt32) {
        switch state {
        case .connecting:
            var code: Int32 = 0
            var length = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &code, &length)
            if code != 0 {
                failConnect(code)
                return
            }
            state = .sending
            flush()
        case .sending:
            if events & (ALLOT_EPOLLERR | ALLOT_EPOLLHUP) != 0 {
                fail(HTTPClientError(.connectionClosed, "the server closed the connection"), retryable: true)
            } else {
                flush()
            }
        case .receiving:
            readAvailable()
        case .idle:
            // An idle connection has nothing to say: the server closed it, or sent garbage.
            close()
        case .closed:
            break
        }
    }

    func handleDeadline() {
        switch state {
        case .idle:
            close()
        case .connecting, .sending, .receiving:
            fail(HTTPClientError(.timedOut, "the request timed out"), retryable: false)
        case .closed:
            break
        }
    }

    func handleLoopStop() {
        fail(HTTPClientError(.shutDown, "the client was shut down"), retryable: false)
        close()
    }

    private func failConnect(_ code: Int32) {
        guard let request else { return close() }
        let address = request.addresses[min(request.addressIndex, request.addresses.count - 1)]
        self.request = nil
        close()
        if request.addressIndex + 1 < request.addresses.count {
            request.addressIndex += 1
            core.open(for: request)
        } else {
            request.complete(.failure(Self.connectError(code, address)))
        }
    }

    // MARK: Sending

    private func flush() {
        while !outbound.isEmpty {
            let result: IOResult<Int>
            do {
                result = try outbound[0].withUnsafeBytes { first throws(SystemError) in
                    try Posix.send(fd, UnsafeRawBufferPointer(rebasing: first[outboundOffset...]))
                }
            } catch {
                fail(HTTPClientError(.connectionClosed, "sending failed: \(error)"), retryable: true)
                return
            }
            switch result {
            case .wouldBlock:
                setInterest(ALLOT_EPOLLOUT)
                return
            case .done(let written):
                outboundOffset += written
                if outboundOffset == outbound[0].count {
                    outbound.removeFirst()
                    outboundOffset = 0
                }
            }
        }
        state = .receiving
        setInterest(ALLOT_EPOLLIN | ALLOT_EPOLLRDHUP)
    }

    // MARK: Receiving

    private func readAvailable() {
        while true {
            let result: IOResult<Int>
            do {
                result = try Posix.read(fd, into: loop.readBuffer)
            } catch {
                fail(
                    HTTPClientError(.connectionClosed, "receiving failed: \(error.message)"), retryable: inbound.isEmpty
                )
                return
            }
            switch result {
            case .wouldBlock:
                return
            case .done(0):
                endOfInput()
                return
            case .done(let count):
                inbound.append(contentsOf: UnsafeRawBufferPointer(rebasing: loop.readBuffer[0..<count]))
                if !parse() { return }
                if count < loop.readBuffer.count { return }
            }
        }
    }

    /// Parses what has arrived; false once the request completed or failed.
    private func parse() -> Bool {
        guard let request else { return false }
        while head == nil {
            let outcome = inbound.withUnsafeBufferPointer { headParser.parse($0, requestMethod: request.method) }
            switch outcome {
            case .needMore:
                return true
            case .failure(let message):
                fail(HTTPClientError(.malformedResponse, message), retryable: false)
                return false
            case .head(let parsed, let length):
                if (100..<200).contains(parsed.status.code) {
                    // An interim response (100 Continue): skip it and read the final one.
                    inbound.removeFirst(length)
                    headParser.reset()
                    continue
                }
                head = parsed
                bodyStart = length
                if parsed.framing == .chunked {
                    chunked = ChunkedDecoder(
                        maxBodyBytes: core.configuration.maxResponseBytes,
                        maxTrailerBytes: core.configuration.maxHeaderBytes)
                }
            }
        }
        guard let head else { return true }
        switch head.framing {
        case .none:
            finish(body: [])
            return false
        case .length(let length):
            guard length <= core.configuration.maxResponseBytes else {
                fail(
                    HTTPClientError(.responseTooLarge, "response body of \(length) bytes exceeds the limit"),
                    retryable: false)
                return false
            }
            guard inbound.count - bodyStart >= length else { return true }
            finish(body: Array(inbound[bodyStart..<(bodyStart + length)]))
            return false
        case .chunked:
            guard var decoder = chunked else { return false }
            let (consumed, outcome) = inbound.withUnsafeBufferPointer { buffer in
                decoder.decode(UnsafeBufferPointer(rebasing: buffer[bodyStart...]), into: &chunkedBody)
            }
            chunked = decoder
            bodyStart += consumed
            switch outcome {
            case .needMore:
                inbound.removeFirst(bodyStart)
                bodyStart = 0
                return true
            case .failure(let error):
                let kind: HTTPClientError.Kind =
                    error.status == .contentTooLarge ? .responseTooLarge : .malformedResponse
                // The decoder speaks of a request body (it is the server's too): here it is the response's.
                let message =
                    kind == .responseTooLarge
                    ? "response body exceeds the limit of \(core.configuration.maxResponseBytes) bytes" : error.message
                fail(HTTPClientError(kind, message), retryable: false)
                return false
            case .done:
                finish(body: chunkedBody)
                return false
            }
        case .untilClose:
            if inbound.count - bodyStart > core.configuration.maxResponseBytes {
                fail(HTTPClientError(.responseTooLarge, "response body exceeds the limit"), retryable: false)
                return false
            }
            return true
        }
    }

    private func endOfInput() {
        if let head, head.framing == .untilClose {
            finish(body: Array(inbound[bodyStart...]), reusable: false)
            return
        }
        if head == nil && inbound.isEmpty {
            fail(
                HTTPClientError(.connectionClosed, "the server closed the connection before responding"),
                retryable: true)
        } else {
            fail(
                HTTPClientError(.connectionClosed, "the server closed the connection in the middle of the response"),
                retryable: false)
        }
    }

    private func finish(body: [UInt8], reusable: Bool = true) {
        guard let request, let head else { return }
        self.request = nil
        served += 1
        let keep =
            reusable && head.keepAlive && inbound.count == bodyStart + (head.framing == .chunked ? 0 : body.count)
        request.complete(.success(HTTPClientResponse(status: head.status, headers: head.headers, body: body)))
        if keep {
            core.release(self)
        } else {
            close()
        }
    }

    /// Fails the current request and closes. A failure before any response byte on a connection that
    /// had served before is retried once on a fresh connection, for idempotent methods only.
    func fail(_ error: HTTPClientError, retryable: Bool) {
        let request = self.request
        self.request = nil
        close()
        guard let request, !request.isCompleted else { return }
        if retryable && served > 0 && !request.retried && request.method.isIdempotent && !request.isCancelled
            && loop.now < request.deadline
        {
            request.retried = true
            core.open(for: request)
            return
        }
        request.complete(.failure(error))
    }

    private func setInterest(_ wanted: UInt32) {
        guard wanted != interest, state != .closed else { return }
        interest = wanted
        loop.setInterest(wanted, for: fd)
    }

    func close() {
        guard state != .closed else { return }
        state = .closed
        loop.deregister(fd)
        Posix.close(fd)
        core.closed(self)
        isPooled = false
        if let request {
            self.request = nil
            request.complete(.failure(HTTPClientError(.connectionClosed, "the connection was closed")))
        }
    }
}
