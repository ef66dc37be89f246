import CLinux
import Glibc

/// One accepted connection: reads and parses requests, runs each through the responder as a task,
/// writes the responses in order, and enforces the limits and timeouts.
///
/// Requests on a connection are handled one at a time, so pipelined requests are answered in the
/// order they came (RFC 9112 §9.3.2) without reordering buffers: while a handler runs, further
/// pipelined bytes are buffered (up to a cap, then reading pauses) and parsed once the response has
/// been written.
///
/// State machine (all on the loop thread):
/// - `reading`: waiting for, or in the middle of, a request head. With nothing buffered it is idle
///   (deadline: `idleTimeout`, or `headerReadTimeout` if shorter before the connection's first request);
///   from the first byte the head must arrive within `headerReadTimeout`.
/// - `readingBody`: the head is parsed; the body must arrive within `bodyReadTimeout`.
/// - `responding`: the handler task runs; no deadline (long-polls). End of input or a reset here
///   cancels the task, so a parked long-poll can clean up.
/// - `writing`: response bytes are going out; each write must make progress within `writeTimeout`.
/// - `lingering`: the last response is out and our side is shut down; unread input is drained for
///   `lingerTimeout` so the peer reads our response before it sees a reset (RFC 9112 §9.6).
final class HTTPServerConnection: EventLoopHandler, @unchecked Sendable {
    // Safe to share: every stored property is only touched on `loop`'s thread. The one use from
    // another thread is the handler task holding a reference so that it can send `deliver(...)` back
    // through `loop.execute`, which runs it on the loop thread.

    private enum State {
        case reading
        case readingBody
        case responding
        case writing
        case lingering
        case closed
    }

    let fd: Int32
    let remoteAddress: String
    private let loop: EventLoop
    private let context: ServerContext
    private let listener: HTTPListener  // strong: the cycle ends when the connection closes
    /// False for a connection only accepted to be told 503: it does not count as open.
    let countsAsOpen: Bool

    private var state = State.reading
    private var inbound: [UInt8] = []
    private var inboundStart = 0
    private var parser: RequestHeadParser
    private var head: RequestHead?
    private var chunkedDecoder: ChunkedDecoder?
    private var chunkedBody: [UInt8] = []
    private var task: Task<Void, Never>?
    private var sequence: UInt64 = 0
    private var outbound: [[UInt8]] = []
    private var outboundOffset = 0
    private var writeBlocked = false
    private var closeAfterWrite = false
    private var peerClosed = false
    private var requestStarted = false
    private var lingerDiscarded = 0
    private var interest: UInt32 = 0

    /// Pipelined bytes buffered while a request is being handled before reading pauses.
    private var pipelineCap: Int { max(64 * 1024, context.limits.maxHeaderBytes * 2) }
    /// Input drained while lingering before giving up and closing anyway.
    private static let lingerDiscardLimit = 1 << 20

    init(
        fd: Int32, remoteAddress: String, loop: EventLoop, context: ServerContext, listener: HTTPListener,
        countsAsOpen: Bool
    ) {
        self.fd = fd
        self.remoteAddress = remoteAddress
        self.loop = loop
        self.context = context
        self.listener = listener
        self.countsAsOpen = countsAsOpen
        self.parser = RequestHeadParser(limits: context.limits)
    }

    /// Registers with the loop and starts waiting for the first request.
    func start() throws(SystemError) {
        interest = ALLOT_EPOLLIN | ALLOT_EPOLLRDHUP
        try loop.register(fd, interest: interest, handler: self)
        // A new connection has its first request's head to send, not a keep-alive pause: the header timeout
        // (when shorter) bounds its silence too. With the idle timeout alone, connections that never sent a
        // byte held their slots under `maxConnections` for 75 s while a slow head got 408 after 10 (round 13).
        loop.setDeadline(loop.now + min(context.idleTimeout, context.headerReadTimeout), for: fd)
    }

    /// Registers and sends `error` straight away, then closes (used to refuse connections at the limit).
    func startRefusing(with error: HTTPError) throws(SystemError) {
        interest = ALLOT_EPOLLIN | ALLOT_EPOLLRDHUP
        try loop.register(fd, interest: interest, handler: self)
        respondAndClose(error, countAsRejected: false)
    }

    var isIdle: Bool { state == .reading && !requestStarted && inboundStart == inbound.count }

    // MARK: Events

    func handleEvents(_ events: UInt32) {
        if events & (ALLOT_EPOLLERR | ALLOT_EPOLLHUP) != 0 {
            // A reset or a full close: nothing we send can arrive any more.
            close()
            return
        }
        if events & ALLOT_EPOLLOUT != 0 {
            flush()
        }
        if state != .closed && events & (ALLOT_EPOLLIN | ALLOT_EPOLLRDHUP) != 0 {
            readAvailable()
        }
    }

    func handleDeadline() {
        switch state {
        case .reading where !requestStarted && inboundStart == inbound.count:
            context.count { $0.idleClosedConnections += 1 }
            close()
        case .reading:
            timedOut("request header timed out")
        case .readingBody:
            timedOut("request body timed out")
        case .writing:
            context.count { $0.timedOutConnections += 1 }
            context.log(.debug, "response write timed out", [("remote", remoteAddress)])
            close()
        case .lingering:
            close()
        case .responding, .closed:
            break
        }
    }

    func handleLoopStop() {
        close()
    }

    private func timedOut(_ message: String) {
        context.count { $0.timedOutConnections += 1 }
        context.log(.debug, message, [("remote", remoteAddress)])
        respondAndClose(HTTPError(.requestTimeout, code: "request_timeout", message: message), countAsRejected: false)
    }

    // MARK: Reading

    private func readAvailable() {
        var rounds = 0
        readLoop: while true {
            let result: IOResult<Int>
            do {
                result = try Posix.read(fd, into: loop.readBuffer)
            } catch {
                close()
                return
            }
            switch result {
            case .wouldBlock:
                break readLoop
            case .done(0):
                endOfInput()
                return
            case .done(let count):
                if state == .lingering {
                    lingerDiscarded += count
                    if lingerDiscarded > Self.lingerDiscardLimit {
                        close()
                        return
                    }
                    continue readLoop
                }
                inbound.append(contentsOf: UnsafeRawBufferPointer(rebasing: loop.readBuffer[0..<count]))
                rounds += 1
                // A short read means the socket is drained; a full one may have more. Yield after a
                // few rounds so one fast sender cannot starve the other connections.
                if count < loop.readBuffer.count || rounds >= 4 { break readLoop }
                if (state == .responding || state == .writing) && inbound.count - inboundStart > pipelineCap {
                    break readLoop
                }
            }
        }
        process()
        updateInterest()
    }

    /// The peer shut down its sending side (or closed).
    private func endOfInput() {
        peerClosed = true
        switch state {
        case .writing:
            // Finish the response; the peer may still read it. Close afterwards.
            closeAfterWrite = true
            updateInterest()
        case .responding:
            // The client went away while its request was held: cancel the handler (Go's net/http
            // does the same), so a parked long-poll is released.
            close()
        default:
            close()
        }
    }

    // MARK: Parsing

    private func process() {
        while true {
            switch state {
            case .reading:
                // Tolerate empty lines between requests (RFC 9112 §2.2).
                while !requestStarted && inbound.count - inboundStart >= 2 && inbound[inboundStart] == ASCII.cr
                    && inbound[inboundStart + 1] == ASCII.lf
                {
                    inboundStart += 2
                }
                guard inboundStart < inbound.count else {
                    compactInbound()
                    return
                }
                if !requestStarted {
                    requestStarted = true
                    loop.setDeadline(loop.now + context.headerReadTimeout, for: fd)
                }
                let outcome = inbound.withUnsafeBufferPointer { buffer in
                    parser.parse(UnsafeBufferPointer(rebasing: buffer[inboundStart...]))
                }
                switch outcome {
                case .needMore:
                    return
                case .failure(let error):
                    context.log(.debug, "malformed request", [("remote", remoteAddress), ("error", error.description)])
                    respondAndClose(error)
                    return
                case .head(let parsed, let length):
                    inboundStart += length
                    parser.reset()
                    beginBody(parsed)
                }
            case .readingBody:
                guard let head else { return }
                switch head.framing {
                case .none:
                    dispatch(head, body: [])
                case .length(let length):
                    guard inbound.count - inboundStart >= length else { return }
                    let body: [UInt8]
                    if inboundStart == 0 && inbound.count == length {
                        // The buffer holds exactly the body (`beginBody` moved the head out): hand it
                        // over instead of copying it (telemetry batches are hundreds of kilobytes).
                        body = inbound
                        inbound = []
                    } else {
                        body = Array(inbound[inboundStart..<(inboundStart + length)])
                        inboundStart += length
                    }
                    dispatch(head, body: body)
                case .chunked:
                    guard var decoder = chunkedDecoder else { return }
                    let (consumed, outcome) = inbound.withUnsafeBufferPointer { buffer in
                        decoder.decode(UnsafeBufferPointer(rebasing: buffer[inboundStart...]), into: &chunkedBody)
                    }
                    chunkedDecoder = decoder
                    inboundStart += consumed
                    switch outcome {
                    case .needMore:
                        compactInbound()
                        return
                    case .failure(let error):
                        respondAndClose(error)
                        return
                    case .done:
                        let body = chunkedBody
                        chunkedBody = []
                        chunkedDecoder = nil
                        dispatch(head, body: body)
                    }
                }
            case .responding, .writing, .lingering, .closed:
                return
            }
        }
    }

    private func beginBody(_ parsed: RequestHead) {
        head = parsed
        state = .readingBody
        guard parsed.framing != .none else { return }
        loop.setDeadline(loop.now + context.bodyReadTimeout, for: fd)
        if case .length(let length) = parsed.framing, inbound.count - inboundStart < length {
            // The body is still arriving: drop the head and make room for the whole body once (the
            // length is within `maxBodyBytes`, and untouched capacity costs no memory), so that it
            // is neither copied as the buffer doubles nor copied out at the end.
            inbound.removeFirst(inboundStart)
            inboundStart = 0
            inbound.reserveCapacity(length)
        }
        if case .chunked = parsed.framing {
            chunkedDecoder = ChunkedDecoder(
                maxBodyBytes: context.limits.maxBodyBytes, maxTrailerBytes: context.limits.maxHeaderBytes)
            chunkedBody = []
        }
        // Ask for the body only when it is not already here (RFC 9110 §10.1.1).
        if parsed.expectsContinue && inboundStart == inbound.count {
            outbound.append(ResponseEncoder.continueResponse)
            flush()
        }
    }

    /// Drops consumed input so the buffer does not grow across requests.
    private func compactInbound() {
        if inboundStart == inbound.count {
            if inbound.capacity > 64 * 1024 {
                inbound = []
            } else {
                inbound.removeAll(keepingCapacity: true)
            }
            inboundStart = 0
        } else if inboundStart > 4096 && inboundStart * 2 > inbound.count {
            inbound.removeFirst(inboundStart)
            inboundStart = 0
        }
    }

    // MARK: Handling

    private func dispatch(_ head: RequestHead, body: [UInt8]) {
        self.head = nil
        state = .responding
        requestStarted = false
        loop.setDeadline(nil, for: fd)
        compactInbound()
        sequence &+= 1
        let sequence = self.sequence
        let request = HTTPRequest(
            method: head.method, target: head.target, version: head.version, headers: head.headers, body: body,
            remoteAddress: remoteAddress)
        context.count { $0.requests += 1 }
        let context = self.context
        let loop = self.loop
        let omitBody = head.method == .head
        task = Task { [self] in
            let response = await context.responder.respond(to: request)
            let keepAlive =
                head.keepAlive && !context.isDraining && !response.headers.containsToken("close", in: "Connection")
            let bytes = ResponseEncoder.head(for: response, keepAlive: keepAlive, version: head.version)
            let body = omitBody || response.status.forbidsBody ? [] : response.body
            loop.execute { self.deliver(sequence, head: bytes, body: body, keepAlive: keepAlive) }
        }
    }

    private func deliver(_ sequence: UInt64, head: [UInt8], body: [UInt8], keepAlive: Bool) {
        guard state == .responding, sequence == self.sequence else { return }
        task = nil
        state = .writing
        closeAfterWrite = closeAfterWrite || !keepAlive
        outbound.append(head)
        if !body.isEmpty { outbound.append(body) }
        flush()
        updateInterest()
    }

    /// Answers with `error` and closes: for requests the server refuses itself.
    private func respondAndClose(_ error: HTTPError, countAsRejected: Bool = true) {
        if countAsRejected { context.count { $0.rejectedRequests += 1 } }
        head = nil
        task?.cancel()
        task = nil
        state = .writing
        closeAfterWrite = true
        let response = error.response
        outbound.append(ResponseEncoder.head(for: response, keepAlive: false, version: .http1_1))
        outbound.append(response.body)
        flush()
        updateInterest()
    }

    // MARK: Writing

    /// Writes as much pending output as the socket takes, head and body in one `sendmsg`.
    private func flush() {
        while !outbound.isEmpty {
            let result: IOResult<Int>
            do {
                result = try outbound[0].withUnsafeBytes { first in
                    var vectors = (
                        iovec(
                            iov_base: UnsafeMutableRawPointer(mutating: first.baseAddress! + outboundOffset),
                            iov_len: first.count - outboundOffset),
                        iovec()
                    )
                    if outbound.count > 1 {
                        return try outbound[1].withUnsafeBytes { second throws(SystemError) in
                            vectors.1 = iovec(
                                iov_base: UnsafeMutableRawPointer(mutating: second.baseAddress!),
                                iov_len: second.count)
                            return try withUnsafeMutableBytes(of: &vectors) { raw throws(SystemError) in
                                try Posix.send(fd, raw.bindMemory(to: iovec.self))
                            }
                        }
                    }
                    return try withUnsafeMutableBytes(of: &vectors) { raw throws(SystemError) in
                        try Posix.send(fd, UnsafeMutableBufferPointer(rebasing: raw.bindMemory(to: iovec.self)[0..<1]))
                    }
                }
            } catch {
                close()
                return
            }
            switch result {
            case .wouldBlock:
                if !writeBlocked {
                    writeBlocked = true
                    updateInterest()
                }
                loop.setDeadline(loop.now + context.writeTimeout, for: fd)
                return
            case .done(var written):
                while written > 0 {
                    let remaining = outbound[0].count - outboundOffset
                    if written >= remaining {
                        written -= remaining
                        outbound.removeFirst()
                        outboundOffset = 0
                    } else {
                        outboundOffset += written
                        written = 0
                    }
                }
                if writeBlocked && !outbound.isEmpty {
                    loop.setDeadline(loop.now + context.writeTimeout, for: fd)
                }
            }
        }
        writeBlocked = false
        if state == .writing {
            responseWritten()
        }
        updateInterest()
    }

    private func responseWritten() {
        if closeAfterWrite || context.isDraining {
            if peerClosed {
                close()
            } else {
                beginLingering()
            }
            return
        }
        state = .reading
        requestStarted = false
        if inboundStart == inbound.count {
            loop.setDeadline(loop.now + context.idleTimeout, for: fd)
        }
        process()
    }

    private func beginLingering() {
        state = .lingering
        Posix.shutdownWrite(fd)
        inbound = []
        inboundStart = 0
        loop.setDeadline(loop.now + context.lingerTimeout, for: fd)
        updateInterest()
    }

    // MARK: Interest and closing

    private func updateInterest() {
        guard state != .closed else { return }
        var wanted: UInt32 = 0
        if !peerClosed {
            switch state {
            case .responding, .writing:
                wanted =
                    inbound.count - inboundStart > pipelineCap ? ALLOT_EPOLLRDHUP : ALLOT_EPOLLIN | ALLOT_EPOLLRDHUP
            default:
                wanted = ALLOT_EPOLLIN | ALLOT_EPOLLRDHUP
            }
        }
        if writeBlocked { wanted |= ALLOT_EPOLLOUT }
        if wanted != interest {
            interest = wanted
            loop.setInterest(wanted, for: fd)
        }
    }

    /// Called by the listener when the server starts draining: idle connections close now, the
    /// others after their current response.
    func drain() {
        if isIdle { close() }
    }

    func close() {
        guard state != .closed else { return }
        if state == .responding, let task {
            task.cancel()
            context.count { $0.cancelledRequests += 1 }
        }
        state = .closed
        task = nil
        outbound = []
        inbound = []
        loop.deregister(fd)
        Posix.close(fd)
        listener.connectionClosed(self)
    }
}
