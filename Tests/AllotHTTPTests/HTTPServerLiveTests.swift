import AllotJSON
import AllotLog
import Foundation
import Testing

@testable import AllotHTTP

/// The server over real sockets: keep-alive, pipelining, limits, timeouts, shutdown, long-polls.
@Suite struct HTTPServerLiveTests {
    @Test func keepAliveServesSeveralRequestsOnOneConnection() async throws {
        try await withServer { port, server in
            let bodies = try await onThread { () -> [String] in
                let socket = try RawSocket(port: port)
                var bodies: [String] = []
                for id in ["a", "b", "c"] {
                    try socket.send(get("/tenants/\(id)"))
                    let response = try #require(try socket.readResponse())
                    #expect(response.status == 200)
                    #expect(response.header("Connection") == nil)
                    bodies.append(response.text)
                }
                return bodies
            }
            #expect(bodies == [#"{"id":"a"}"#, #"{"id":"b"}"#, #"{"id":"c"}"#])
            #expect(server.statistics.acceptedConnections == 1)
            #expect(server.statistics.requests == 3)
        }
    }

    @Test func pipelinedRequestsAreAnsweredInOrder() async throws {
        try await withServer { port, _ in
            let bodies = try await onThread { () -> [String] in
                let socket = try RawSocket(port: port)
                let batch =
                    (1...5).map { get("/tenants/t\($0)") }.joined()
                    + "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nping" + get("/hello")
                try socket.send(batch)
                var bodies: [String] = []
                for _ in 0..<7 {
                    bodies.append(try #require(try socket.readResponse()).text)
                }
                return bodies
            }
            #expect(bodies == (1...5).map { #"{"id":"t\#($0)"}"# } + ["ping", "hello"])
        }
    }

    @Test func unknownRouteIs404JSON() async throws {
        try await withServer { port, _ in
            let response = try #require(try await exchange(port, get("/nowhere")))
            #expect(response.status == 404)
            #expect(response.header("Content-Type") == "application/json")
            #expect(response.text == #"{"error":{"code":"not_found","message":"no route for /nowhere"}}"#)
        }
    }

    @Test func wrongMethodIs405WithAllow() async throws {
        try await withServer { port, _ in
            let response = try #require(
                try await exchange(port, "DELETE /hello HTTP/1.1\r\nHost: x\r\n\r\n"))
            #expect(response.status == 405)
            #expect(response.header("Allow") == "GET, HEAD")
            #expect(errorParts(response).code == "method_not_allowed")
        }
    }

    @Test func handlerErrorIs500JSONAndTheConnectionStaysUsable() async throws {
        try await withServer { port, _ in
            let (first, second) = try await onThread { () -> (RawResponse?, RawResponse?) in
                let socket = try RawSocket(port: port)
                try socket.send(get("/fail"))
                let first = try socket.readResponse()
                try socket.send(get("/hello"))
                return (first, try socket.readResponse())
            }
            #expect(first?.status == 500)
            #expect(first?.text == #"{"error":{"code":"internal_error","message":"internal server error"}}"#)
            #expect(second?.text == "hello")
        }
    }

    @Test func oversizedHeaderIs431ThenClose() async throws {
        try await withServer(.test(maxHeaderBytes: 1024)) { port, _ in
            let (response, closed) = try await onThread { () -> (RawResponse?, Bool) in
                let socket = try RawSocket(port: port)
                try socket.send(get("/hello", headers: "X-Big: \(String(repeating: "a", count: 2000))\r\n"))
                return (try socket.readResponse(), try socket.isClosedByPeer())
            }
            #expect(response?.status == 431)
            #expect(response?.header("Connection") == "close")
            #expect(errorParts(response).code == "headers_too_large")
            #expect(closed)
        }
    }

    @Test func tooManyHeaderFieldsIs431() async throws {
        try await withServer(.test(maxHeaderCount: 20)) { port, _ in
            let fields = (0..<30).map { "X-F\($0): v\r\n" }.joined()
            let response = try await exchange(port, get("/hello", headers: fields))
            #expect(response?.status == 431)
            #expect(errorParts(response).code == "too_many_headers")
        }
    }

    @Test func oversizedBodyIs413WithoutReadingIt() async throws {
        try await withServer(.test(maxBodyBytes: 1000)) { port, server in
            let response = try await exchange(
                port,
                "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5000\r\n\r\n" + String(repeating: "z", count: 5000))
            #expect(response?.status == 413)
            #expect(
                response?.text
                    == #"{"error":{"code":"body_too_large","message":"request body exceeds the limit of 1000 bytes","field":"Content-Length"}}"#
            )
            #expect(server.statistics.requests == 0)
        }
    }

    @Test func oversizedChunkedBodyIs413() async throws {
        try await withServer(.test(maxBodyBytes: 100)) { port, _ in
            let chunk = String(repeating: "y", count: 80)
            let response = try await exchange(
                port,
                "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n50\r\n\(chunk)\r\n50\r\n\(chunk)\r\n0\r\n\r\n"
            )
            #expect(response?.status == 413)
        }
    }

    @Test func chunkedRequestBodyIsDecoded() async throws {
        try await withServer { port, _ in
            let response = try await exchange(
                port,
                "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nTrailer: x\r\n\r\n"
            )
            #expect(response?.status == 200)
            #expect(response?.text == "hello world")
        }
    }

    @Test func malformedRequestLineIs400ThenClose() async throws {
        try await withServer { port, _ in
            let (response, closed) = try await onThread { () -> (RawResponse?, Bool) in
                let socket = try RawSocket(port: port)
                try socket.send("GET /hello\r\nHost: x\r\n\r\n")
                return (try socket.readResponse(), try socket.isClosedByPeer())
            }
            #expect(response?.status == 400)
            #expect(errorParts(response).code == "malformed_request")
            #expect(errorParts(response).message == "malformed request line")
            #expect(closed)
        }
    }

    @Test func unsupportedVersionIs505() async throws {
        try await withServer { port, _ in
            let response = try await exchange(port, "GET /hello HTTP/2.0\r\nHost: x\r\n\r\n")
            #expect(response?.status == 505)
            #expect(errorParts(response).code == "version_not_supported")
        }
    }

    @Test func longTargetIs414() async throws {
        try await withServer(.test(maxRequestLineBytes: 1000)) { port, _ in
            let response = try await exchange(port, get("/" + String(repeating: "p", count: 1500)))
            #expect(response?.status == 414)
            #expect(errorParts(response).code == "uri_too_long")
        }
    }

    @Test func http10ClosesAfterTheResponse() async throws {
        try await withServer { port, _ in
            let (response, closed) = try await onThread { () -> (RawResponse?, Bool) in
                let socket = try RawSocket(port: port)
                try socket.send("GET /hello HTTP/1.0\r\n\r\n")
                return (try socket.readResponse(), try socket.isClosedByPeer())
            }
            #expect(response?.status == 200)
            #expect(response?.header("Connection") == "close")
            #expect(closed)
        }
    }

    @Test func http10KeepAliveIsHonoured() async throws {
        try await withServer { port, _ in
            let responses = try await onThread { () -> [RawResponse?] in
                let socket = try RawSocket(port: port)
                try socket.send("GET /hello HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
                let first = try socket.readResponse()
                try socket.send("GET /hello HTTP/1.0\r\n\r\n")
                return [first, try socket.readResponse()]
            }
            #expect(responses[0]?.header("Connection") == "keep-alive")
            #expect(responses[1]?.header("Connection") == "close")
        }
    }

    @Test func connectionCloseIsHonoured() async throws {
        try await withServer { port, _ in
            let (response, closed) = try await onThread { () -> (RawResponse?, Bool) in
                let socket = try RawSocket(port: port)
                try socket.send(get("/hello", headers: "Connection: close\r\n") + get("/hello"))
                return (try socket.readResponse(), try socket.isClosedByPeer())
            }
            #expect(response?.text == "hello")
            #expect(response?.header("Connection") == "close")
            #expect(closed)
        }
    }

    @Test func headSendsTheHeadOnly() async throws {
        try await withServer { port, _ in
            let (head, next) = try await onThread { () -> (RawResponse?, RawResponse?) in
                let socket = try RawSocket(port: port)
                try socket.send("HEAD /big?bytes=1000 HTTP/1.1\r\nHost: x\r\n\r\n" + get("/hello"))
                return (try socket.readResponse(bodyless: true), try socket.readResponse())
            }
            #expect(head?.status == 200)
            #expect(head?.header("Content-Length") == "1000")
            #expect(next?.text == "hello")  // proves no body bytes were sent after the HEAD response
        }
    }

    @Test func expectContinueGetsAnInterimResponseBeforeTheBody() async throws {
        try await withServer { port, _ in
            let (interim, final) = try await onThread { () -> (RawResponse?, RawResponse?) in
                let socket = try RawSocket(port: port)
                try socket.send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nExpect: 100-continue\r\n\r\n")
                let interim = try socket.readResponse(bodyless: true)
                try socket.send("abc")
                return (interim, try socket.readResponse())
            }
            #expect(interim?.status == 100)
            #expect(final?.status == 200)
            #expect(final?.text == "abc")
        }
    }

    @Test func expectContinueWithAnOversizedBodyIs413WithoutContinue() async throws {
        try await withServer(.test(maxBodyBytes: 10)) { port, _ in
            let response = try await exchange(
                port, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\nExpect: 100-continue\r\n\r\n")
            #expect(response?.status == 413)
        }
    }

    /// A client that sends half a head does not hold up another. No timeout takes part: the header timeout is
    /// longer than any stall, because handlers run on the cooperative pool, which other tests' simulations
    /// can hold for more than 10 s on a loaded 2-core CI machine (the slow client then timed out before the
    /// fast one was answered, and the test failed on a race, not on the server).
    @Test func aSlowClientDoesNotHoldUpAnother() async throws {
        try await withServer(.test(headerReadTimeout: .seconds(600))) { port, server in
            let (fast, slow, timedOut) = try await onThread { () -> (RawResponse?, RawResponse?, Int) in
                let slow = try RawSocket(port: port)
                try slow.send("GET /hello HTTP/1.1\r\nHo")
                let fast = try RawSocket(port: port)
                try fast.send(get("/hello"))
                let fastResponse = try fast.readResponse()
                try slow.send("st: x\r\n\r\n")
                return (fastResponse, try slow.readResponse(), server.statistics.timedOutConnections)
            }
            #expect(fast?.text == "hello")
            #expect(slow?.text == "hello")  // the slow head was still being waited for, and then served
            #expect(timedOut == 0)
        }
    }

    @Test func aHeadNotFinishedWithinTheHeaderTimeoutIs408AndClosed() async throws {
        try await withServer(.test(headerReadTimeout: .milliseconds(100))) { port, server in
            let (response, closed) = try await onThread { () -> (RawResponse?, Bool) in
                let slow = try RawSocket(port: port)
                try slow.send("GET /hello HTTP/1.1\r\nHo")
                return (try slow.readResponse(), try slow.isClosedByPeer())
            }
            #expect(response?.status == 408)
            #expect(errorParts(response).code == "request_timeout")
            #expect(closed)
            #expect(server.statistics.timedOutConnections == 1)
        }
    }

    /// A connection that never sends a byte is closed after the header timeout, not the (longer) idle timeout:
    /// silent connections held slots under the connection limit 7.5 times as long as a slow head's 408.
    @Test func aSilentNewConnectionIsClosedAfterTheHeaderTimeout() async throws {
        let configuration = HTTPServerConfiguration.test(
            headerReadTimeout: .milliseconds(100), idleTimeout: .seconds(600))
        try await withServer(configuration) { port, server in
            let closed = try await onThread { () -> Bool in
                let socket = try RawSocket(port: port)
                return try socket.isClosedByPeer()
            }
            #expect(closed)
            #expect(server.statistics.idleClosedConnections == 1)
            #expect(server.statistics.timedOutConnections == 0)  // nothing was asked: closed without a 408
        }
    }

    @Test func idleConnectionIsClosedSilently() async throws {
        try await withServer(.test(idleTimeout: .milliseconds(100))) { port, server in
            let (first, closed) = try await onThread { () -> (RawResponse?, Bool) in
                let socket = try RawSocket(port: port)
                try socket.send(get("/hello"))
                return (try socket.readResponse(), try socket.isClosedByPeer())
            }
            #expect(first?.text == "hello")
            #expect(closed)
            #expect(server.statistics.idleClosedConnections == 1)
            #expect(server.statistics.timedOutConnections == 0)
        }
    }

    @Test func connectionLimitAnswers503ThenCloses() async throws {
        // A long idle timeout: on a loaded CI machine this test once stalled for over 3 s (the default
        // test idle timeout) between the held connections' answers and the third connect, the server
        // closed the held ones as idle, and the third was let in. Each held connection is opened only once the
        // one before has its answer: opened together, the second waited for the first's handler (the
        // cooperative pool, held by other tests' simulations) longer than the 3-s timeout of a connection that
        // has sent nothing, was closed as silent, and the third was let in (seen in a full local run).
        try await withServer(.test(maxConnections: 2, idleTimeout: .seconds(60))) { port, server in
            let (held, refused, closed) = try await onThread { () -> ([RawSocket], RawResponse?, Bool) in
                let held = try (0..<2).map { _ -> RawSocket in  // both accepted and answered before the third
                    let socket = try RawSocket(port: port)
                    try socket.send(get("/hello"))
                    _ = try socket.readResponse()
                    return socket
                }
                let third = try RawSocket(port: port)
                return (held, try third.readResponse(), try third.isClosedByPeer())
            }
            #expect(refused?.status == 503)
            #expect(refused?.header("Retry-After") == "1")
            #expect(errorParts(refused).code == "too_many_connections")
            #expect(closed)
            #expect(server.statistics.rejectedConnections == 1)
            #expect(server.statistics.openConnections == 2)
            // The held connections still work.
            let again = try await onThread { () -> RawResponse? in
                try held[0].send(get("/hello"))
                return try held[0].readResponse()
            }
            #expect(again?.text == "hello")
        }
    }

    /// Connections refused at the limit are logged once per 10 s, the next line counting those in between (outside
    /// evaluation round 40: a client reconnecting in a loop wrote 25,000 lines a second).
    @Test func connectionsRefusedAtTheLimitAreLoggedOncePerInterval() {
        let lines = Locked<[HTTPServerLogEvent]>([])
        var configuration = HTTPServerConfiguration.test(maxConnections: 1)
        configuration.log = { event in lines.withLock { $0.append(event) } }
        let context = ServerContext(configuration: configuration, responder: Router(), maxConnections: 1)
        let second: UInt64 = 1_000_000_000
        context.logRefusal(remote: "10.0.0.1:1", now: 100 * second)
        for offset in 1...5 { context.logRefusal(remote: "10.0.0.1:\(offset + 1)", now: 100 * second + UInt64(offset)) }
        context.logRefusal(remote: "10.0.0.2:9", now: 109 * second)
        context.logRefusal(remote: "10.0.0.3:7", now: 110 * second)
        let logged = lines.withLock { $0 }
        #expect(logged.map(\.message) == ["connection refused at the limit", "connection refused at the limit"])
        #expect(logged.map { $0.fields.map { "\($0.name)=\($0.value)" } } == [
            ["remote=10.0.0.1:1", "limit=1"], ["remote=10.0.0.3:7", "limit=1", "refused_unlogged=6"],
        ])
    }

    /// The soft open-file limit is raised, as far as the hard one allows, to what the connection limit needs
    /// (outside evaluation round 40: systemd's default soft 1,024 silently made `--max-connections 10000` 960); the
    /// rule alone, without changing the process's limits under the tests running beside it.
    @Test func theOpenFileLimitIsRaisedForTheConnectionLimit() {
        #expect(HTTPServer.raisedSoftLimit(for: 10_000, soft: 1_024, hard: 20_000) == 10_064)
        #expect(HTTPServer.raisedSoftLimit(for: 10_000, soft: 1_024, hard: 4_096) == 4_096)
        #expect(HTTPServer.raisedSoftLimit(for: 10_000, soft: 1_024, hard: rlim_t.max) == 10_064)
        #expect(HTTPServer.raisedSoftLimit(for: 10_000, soft: 20_000, hard: 20_000) == 20_000)
        #expect(HTTPServer.raisedSoftLimit(for: 100, soft: 1_024, hard: 1_024) == 1_024)
        #expect(HTTPServer.connectionLimit(10_000, soft: 10_064) == 10_000)
        #expect(HTTPServer.connectionLimit(10_000, soft: 4_096) == 4_032)
        #expect(HTTPServer.connectionLimit(10_000, soft: 10) == 1)
        // And for real: what this process is allowed, never lowered.
        var before = rlimit()
        _ = getrlimit(Int32(RLIMIT_NOFILE.rawValue), &before)
        let limit = HTTPServer.effectiveConnectionLimit(100)
        #expect(limit == 100 || before.rlim_cur < 164)
    }

    @Test func heldLongPollDoesNotBlockOtherRequests() async throws {
        let probe = HoldProbe()
        try await withServer(router: .makeTest(probe: probe)) { port, _ in
            let held = try await onThread { () -> RawSocket in
                let socket = try RawSocket(port: port)
                try socket.send(get("/hold"))
                return socket
            }
            try await withDeadline(seconds: 60) { await probe.started.wait() }
            for _ in 0..<3 {
                #expect(try await exchange(port, get("/hello"))?.text == "hello")
            }
            probe.release.set()
            let answer = try await onThread { try held.readResponse() }
            #expect(answer?.text == "released")
        }
    }

    @Test func clientDisconnectCancelsTheHeldHandler() async throws {
        let probe = HoldProbe()
        try await withServer(router: .makeTest(probe: probe)) { port, server in
            let socket = try await onThread { () -> RawSocket in
                let socket = try RawSocket(port: port)
                try socket.send(get("/hold"))
                return socket
            }
            try await withDeadline(seconds: 60) { await probe.started.wait() }
            _ = socket  // keep it open until here
            Glibc.shutdown(socket.fd, Int32(SHUT_RDWR))
            try await withDeadline(seconds: 60) { await probe.cancelled.wait() }
            #expect(probe.cancelled.isSet)
            #expect(server.statistics.cancelledRequests == 1)
        }
    }

    @Test func gracefulShutdownAnswersAHeldRequestAndClosesIdleOnes() async throws {
        let probe = HoldProbe()
        let server = HTTPServer(configuration: .test(), responder: Router.makeTest(probe: probe))
        server.shutdownSignal.onShutdown { probe.release.set() }
        let port = try await server.start()
        let (held, idle) = try await onThread { () -> (RawSocket, RawSocket) in
            let idle = try RawSocket(port: port)
            try idle.send(get("/hello"))
            _ = try idle.readResponse()
            let held = try RawSocket(port: port)
            try held.send(get("/hold"))
            return (held, idle)
        }
        try await withDeadline(seconds: 60) { await probe.started.wait() }
        let clock = ContinuousClock()
        let started = clock.now
        // It returns once the held request is answered, not when the grace period runs out (a generous
        // period, so that a loaded machine cannot fail this: the bound was 2 s of a 5-s period, and a busy
        // CI core took 2.5 s).
        await server.shutdown(gracePeriod: .seconds(30))
        #expect(clock.now - started < .seconds(30))
        let (answer, heldClosed, idleClosed) = try await onThread {
            (try held.readResponse(), try held.isClosedByPeer(), try idle.isClosedByPeer())
        }
        #expect(answer?.text == "released")
        #expect(answer?.header("Connection") == "close")
        #expect(heldClosed)
        #expect(idleClosed)
        #expect(!probe.cancelled.isSet)
        #expect(server.statistics.openConnections == 0)
        #expect(throws: RawSocket.Failure.self) { try RawSocket(port: port) }
    }

    @Test func shutdownAfterTheGracePeriodCancelsStragglers() async throws {
        let probe = HoldProbe()
        let server = HTTPServer(configuration: .test(), responder: Router.makeTest(probe: probe))
        let port = try await server.start()
        let held = try await onThread { () -> RawSocket in
            let socket = try RawSocket(port: port)
            try socket.send(get("/hold"))
            return socket
        }
        try await withDeadline(seconds: 60) { await probe.started.wait() }
        await server.shutdown(gracePeriod: .milliseconds(50))
        try await withDeadline(seconds: 60) { await probe.cancelled.wait() }
        #expect(try await onThread { try held.isClosedByPeer() })
    }

    @Test func largeResponseReachesASlowReaderThroughPartialWrites() async throws {
        let size = 8 * 1024 * 1024
        try await withServer { port, _ in
            let (response, prefix) = try await onThread { () -> (RawResponse?, [UInt8]) in
                let socket = try RawSocket(port: port)
                socket.setReceiveBuffer(16 * 1024)
                try socket.send(get("/big?bytes=\(size)"))
                // Read the first megabyte slowly so the server's socket buffer fills and writes go partial.
                let prefix = try socket.readExactly(1 << 20, chunk: 16 * 1024, pause: 0.0005)
                let headEnd = prefix.firstRange(of: [13, 10, 13, 10])!.upperBound
                let rest = try socket.readExactly(size - (prefix.count - headEnd))
                return (
                    RawResponse(status: 200, headers: [], body: Array(prefix[headEnd...]) + rest), Array(prefix[0..<16])
                )
            }
            #expect(String(decoding: prefix, as: UTF8.self).hasPrefix("HTTP/1.1 200 OK"))
            let body = try #require(response?.body)
            #expect(body.count == size)
            let intact = body == patternBytes(size)  // outside #expect: a failure must not print 8 MiB
            #expect(intact)
        }
    }
}

@Suite struct HTTPServerLifecycleTests {
    @Test func logHookReceivesServerEvents() async throws {
        let events = Locked<[HTTPServerLogEvent]>([])
        var configuration = HTTPServerConfiguration.test()
        configuration.log = { event in events.withLock { $0.append(event) } }
        let server = HTTPServer(configuration: configuration, responder: Router.makeTest())
        let port = try await server.start()
        _ = try await exchange(port, "BAD\r\n\r\n")
        await server.shutdown(gracePeriod: .milliseconds(100))
        let messages = events.withLock { $0 }.map(\.message)
        #expect(messages.first == "listening")
        #expect(messages.contains("malformed request"))
        #expect(messages.last == "stopped")
        let listening = events.withLock { $0 }.first
        #expect(listening?.fields.first?.value == "127.0.0.1:\(port)")
        #expect(listening?.level == .info)
    }

    @Test func loggingBridgeWritesJSONLines() async throws {
        let sink = CapturingLogSink()
        var configuration = HTTPServerConfiguration.test()
        configuration.log = HTTPServerConfiguration.logging(to: Logger(label: "http", minimumLevel: .debug, sink: sink))
        let server = HTTPServer(configuration: configuration, responder: Router.makeTest())
        let port = try await server.start()
        await server.shutdown(gracePeriod: .zero)
        let first = try #require(sink.records.first ?? nil)
        #expect(first["msg"]?.stringValue == "listening")
        #expect(first["level"]?.stringValue == "info")
        #expect(first["address"]?.stringValue == "127.0.0.1:\(port)")
    }

    @Test func severalEventLoopsShareThePortAndTheConnectionLimit() async throws {
        // The connections must outlive the whole sequence: with the default 3-s idle timeout, a full run whose
        // simulator tests held the cooperative pool (the handlers' threads) made the eight exchanges take 44 s, the
        // server closed the first connections as idle, and all eight were answered 200.
        var configuration = HTTPServerConfiguration.test(maxConnections: 6, idleTimeout: .seconds(600))
        configuration.eventLoopCount = 3
        let probe = HoldProbe()
        try await withServer(configuration, router: .makeTest(probe: probe)) { port, server in
            let outcome = try await onThread { () -> ([RawSocket], [Int]) in
                var open: [RawSocket] = []
                var statuses: [Int] = []
                for _ in 0..<8 {
                    let socket = try RawSocket(port: port)
                    try socket.send(get("/hello"))
                    statuses.append(try socket.readResponse()?.status ?? 0)
                    open.append(socket)
                }
                return (open, statuses)
            }
            #expect(outcome.1 == [200, 200, 200, 200, 200, 200, 503, 503])
            #expect(server.statistics.openConnections == 6)
            #expect(server.statistics.rejectedConnections == 2)
            _ = outcome.0
        }
    }

    @Test func startTwiceIsAnError() async throws {
        let server = HTTPServer(configuration: .test(), responder: Router.makeTest())
        _ = try await server.start()
        await #expect(throws: HTTPServerStateError.self) { try await server.start() }
        await server.shutdown(gracePeriod: .zero)
        await server.shutdown(gracePeriod: .zero)  // idempotent
        #expect(server.shutdownSignal.isTriggered)
    }

    /// A host that does not resolve is named in one line (`allot serve` printed the error struct's dump).
    @Test func anUnresolvableHostSaysSoInOneLine() {
        let error = #expect(throws: AddressResolutionError.self) {
            try SocketAddress.resolve(host: "no-such-host.invalid", port: 80)
        }
        #expect(error?.description.hasPrefix(#"cannot resolve host "no-such-host.invalid": "#) == true)
    }

    @Test func bindingAPortInUseFails() async throws {
        let first = HTTPServer(configuration: .test(), responder: Router.makeTest())
        let port = try await first.start()
        var configuration = HTTPServerConfiguration.test()
        configuration.port = port
        let second = HTTPServer(configuration: configuration, responder: Router.makeTest())
        await #expect(throws: SystemError.self) { try await second.start() }
        await first.shutdown(gracePeriod: .zero)
    }

    @Test func shutdownSignalWakesWaitersAndCallbacks() async throws {
        let signal = ShutdownSignal()
        let called = Locked(0)
        signal.onShutdown { called.withLock { $0 += 1 } }
        async let waited: Void = signal.wait()
        signal.trigger()
        signal.trigger()
        await waited
        signal.onShutdown { called.withLock { $0 += 1 } }  // already triggered: runs at once
        #expect(called.withLock { $0 } == 2)
        #expect(signal.isTriggered)
    }
}
