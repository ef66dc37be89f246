import AllotJSON
import Foundation
import Testing

@testable import AllotHTTP

/// The client against our server and against scripted byte-level servers.
@Suite struct HTTPClientTests {
    func withClient(
        // 120 s, as the scripted server's own wait: on two cores the simulator's headline tests hold the
        // cooperative pool for minutes, and readsChunkedResponses once timed out at 30 s waiting for its turn.
        _ configuration: HTTPClientConfiguration = HTTPClientConfiguration(timeout: .seconds(120)),
        _ body: (HTTPClient) async throws -> Void
    ) async throws {
        let client = try HTTPClient(configuration: configuration)
        do {
            try await body(client)
        } catch {
            await client.shutdown()
            throw error
        }
        await client.shutdown()
    }

    func expectError(_ kind: HTTPClientError.Kind, _ body: () async throws(HTTPClientError) -> HTTPClientResponse) async
    {
        do {
            let response = try await body()
            Issue.record("expected \(kind), got \(response.status)")
        } catch {
            #expect(error.kind == kind, "\(error)")
        }
    }

    @Test func getsAndReusesTheConnection() async throws {
        // A long idle timeout: on a loaded machine a stall of over the test default (3 s) between two
        // requests let the server close the pooled connection, and the client rightly opened a second.
        try await withServer(.test(idleTimeout: .seconds(60))) { port, server in
            try await withClient { client in
                for id in ["a", "b", "c"] {
                    let response = try await client.get("http://127.0.0.1:\(port)/tenants/\(id)")
                    #expect(response.status == .ok)
                    #expect(try response.json() == ["id": .string(id)])
                    #expect(response.headers["content-type"] == "application/json")
                }
                #expect(server.statistics.acceptedConnections == 1)
                #expect(server.statistics.requests == 3)
            }
        }
    }

    /// A request whose task is cancelled before (or while) it starts must still return: the
    /// cancellation can complete the request before the caller installed its completion.
    @Test func requestsCancelledAtStartAlwaysReturn() async throws {
        try await withServer { port, _ in
            try await withClient { client in
                for round in 0..<300 {
                    let task = Task { try await client.get("http://127.0.0.1:\(port)/tenants/x\(round)") }
                    if round % 2 == 0 { task.cancel() } else { Task { task.cancel() } }
                    // Either a response (it won the race) or `.cancelled`; never a hang.
                    switch await task.result {
                    case .success(let response): #expect(response.status == .ok)
                    case .failure(let error): #expect((error as? HTTPClientError)?.kind == .cancelled, "\(error)")
                    }
                }
            }
        }
    }

    @Test func postsABody() async throws {
        try await withServer { port, _ in
            try await withClient { client in
                let body = patternBytes(60_000)
                let response = try await client.post(
                    "http://127.0.0.1:\(port)/echo", body: body, headers: ["X-Batch": "1"])
                let same = response.body == body  // compared outside #expect: a failure must not print 60 KB
                #expect(same)
                let empty = try await client.post("http://127.0.0.1:\(port)/echo", body: [])
                #expect(empty.status == .ok)
                #expect(empty.body.isEmpty)
            }
        }
    }

    @Test func headAndErrorStatusesAreResponsesNotErrors() async throws {
        try await withServer { port, _ in
            try await withClient { client in
                let head = try await client.execute(
                    HTTPClientRequest(method: .head, url: "http://127.0.0.1:\(port)/big?bytes=500"))
                #expect(head.headers["Content-Length"] == "500")
                #expect(head.body.isEmpty)
                let missing = try await client.get("http://127.0.0.1:\(port)/nope")
                #expect(missing.status == .notFound)
                #expect(try missing.json()["error"]?["code"] == "not_found")
                // The connection survived both (HEAD had no body to skip).
                #expect(try await client.get("http://127.0.0.1:\(port)/hello").bodyText == "hello")
            }
        }
    }

    @Test func readsChunkedResponses() async throws {
        let scripted = try ScriptedServer()
        scripted.start(
            replies: [
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n7;x=y\r\n, world\r\n0\r\nT: 1\r\n\r\n",
                "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok",
            ], closeAfter: false)
        // The pooled connection must outlive any wait between the two requests: with the default 15-s idle timeout
        // the client closed it while other tests' simulations held the cooperative pool, opened a new one the
        // one-connection server never accepts, and timed out (reproduced with a 5-ms idle timeout and a 100-ms
        // pause).
        let configuration = HTTPClientConfiguration(timeout: .seconds(120), idleConnectionTimeout: .seconds(3600))
        try await withClient(configuration) { client in
            let first = try await client.get(scripted.url)
            #expect(first.bodyText == "hello, world")
            let second = try await client.get(scripted.url)  // same connection
            #expect(second.status == .created)
            #expect(second.bodyText == "ok")
        }
    }

    @Test func readsBodiesDelimitedByClose() async throws {
        let scripted = try ScriptedServer()
        scripted.start(replies: ["HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the end"])
        try await withClient { client in
            let response = try await client.get(scripted.url)
            #expect(response.bodyText == "until the end")
        }
    }

    @Test(arguments: [
        "SPDY/3 200 OK\r\n\r\n",
        "HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n",
        "HTTP/1.1 200 OK\r\nNo colon here\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: -3\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd",
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nxyz\r\n",
    ])
    func malformedResponsesAreReported(reply: String) async throws {
        let scripted = try ScriptedServer()
        scripted.start(replies: [reply])
        try await withClient { client in
            await expectError(.malformedResponse) { () async throws(HTTPClientError) in
                try await client.get(scripted.url)
            }
        }
    }

    @Test func truncatedResponseIsConnectionClosed() async throws {
        let scripted = try ScriptedServer()
        scripted.start(replies: ["HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort"])
        try await withClient { client in
            await expectError(.connectionClosed) { () async throws(HTTPClientError) in
                try await client.get(scripted.url)
            }
        }
    }

    @Test func oversizedResponseIsRefused() async throws {
        try await withServer { port, _ in
            try await withClient(HTTPClientConfiguration(timeout: .seconds(30), maxResponseBytes: 1000)) { client in
                await expectError(.responseTooLarge) { () async throws(HTTPClientError) in
                    try await client.get("http://127.0.0.1:\(port)/big?bytes=5000")
                }
            }
        }
    }

    /// A chunked response past the limit is named as the response's (round 32: "request body exceeds the limit").
    @Test func anOversizedChunkedResponseIsNamedAsTheResponse() async throws {
        let scripted = try ScriptedServer()
        let chunk = String(repeating: "x", count: 600)
        scripted.start(replies: [
            "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n258\r\n\(chunk)\r\n258\r\n\(chunk)\r\n0\r\n\r\n"
        ])
        try await withClient(HTTPClientConfiguration(timeout: .seconds(30), maxResponseBytes: 1000)) { client in
            do throws(HTTPClientError) {
                let response = try await client.get(scripted.url)
                Issue.record("expected responseTooLarge, got \(response.status)")
            } catch {
                #expect(error.kind == .responseTooLarge)
                #expect(error.message == "response body exceeds the limit of 1000 bytes")
            }
        }
    }

    @Test func connectionRefused() async throws {
        let refusing = try RefusingPort()
        try await withClient { client in
            await expectError(.connectionRefused) { () async throws(HTTPClientError) in
                try await client.get("http://127.0.0.1:\(refusing.port)/hello")
            }
        }
        withExtendedLifetime(refusing) {}
    }

    @Test func invalidURLs() async throws {
        try await withClient { client in
            for url in [
                "https://example.com/", "ftp://x", "http://", "http://host:99999/", "http://[::1/", "http://h/a b",
            ] {
                await expectError(.invalidURL) { () async throws(HTTPClientError) in try await client.get(url) }
            }
        }
    }

    @Test func parsesURLs() throws {
        #expect(
            try HTTPURL("http://127.0.0.1:8080/v1/snapshot?wait=60")
                == HTTPURL.make("127.0.0.1", 8080, "/v1/snapshot?wait=60"))
        #expect(try HTTPURL("http://allot?x=1") == HTTPURL.make("allot", 80, "/?x=1"))
        #expect(try HTTPURL("http://[::1]:9/a#frag") == HTTPURL.make("::1", 9, "/a"))
        #expect(try HTTPURL("http://[::1]:9/a").authority == "[::1]:9")
        #expect(try HTTPURL("http://allot").authority == "allot")
    }

    @Test func timesOutAHeldRequestAndTheServerCancelsIt() async throws {
        let probe = HoldProbe()
        try await withServer(router: .makeTest(probe: probe)) { port, _ in
            try await withClient { client in
                await expectError(.timedOut) { () async throws(HTTPClientError) in
                    try await client.get("http://127.0.0.1:\(port)/hold", timeout: .milliseconds(100))
                }
                try await withDeadline(seconds: 60) { await probe.cancelled.wait() }
            }
        }
    }

    @Test func cancellingTheTaskCancelsTheRequest() async throws {
        let probe = HoldProbe()
        try await withServer(router: .makeTest(probe: probe)) { port, _ in
            try await withClient { client in
                let task = Task { () async throws(HTTPClientError) -> HTTPClientResponse in
                    try await client.get("http://127.0.0.1:\(port)/hold")
                }
                // Generous: the deadline only turns a hang into a failure (CI once took over 5 s to start it).
                try await withDeadline(seconds: 60) { await probe.started.wait() }
                task.cancel()
                let result = await task.result
                guard case .failure(let error) = result else {
                    Issue.record("expected cancellation, got \(result)")
                    return
                }
                #expect((error as? HTTPClientError)?.kind == .cancelled)
                try await withDeadline(seconds: 60) { await probe.cancelled.wait() }
            }
        }
    }

    @Test func longPollAndOtherRequestsShareTheClient() async throws {
        let probe = HoldProbe()
        try await withServer(.test(idleTimeout: .seconds(60)), router: .makeTest(probe: probe)) { port, server in
            try await withClient { client in
                async let held = client.get("http://127.0.0.1:\(port)/hold", timeout: .seconds(60))
                // Generous: the deadline only turns a hang into a failure (CI once took over 5 s to start it).
                try await withDeadline(seconds: 60) { await probe.started.wait() }
                for _ in 0..<5 {
                    #expect(try await client.get("http://127.0.0.1:\(port)/hello").bodyText == "hello")
                }
                probe.release.set()
                #expect(try await held.bodyText == "released")
                #expect(server.statistics.acceptedConnections == 2)
            }
        }
    }

    @Test func manyConcurrentRequestsShareABoundedNumberOfConnections() async throws {
        try await withServer(.test(idleTimeout: .seconds(60))) { port, server in
            try await withClient(HTTPClientConfiguration(timeout: .seconds(30), maxConnectionsPerHost: 8)) { client in
                try await withThrowingTaskGroup(of: String.self) { group in
                    for i in 0..<200 {
                        group.addTask {
                            try await client.get("http://127.0.0.1:\(port)/tenants/t\(i)").bodyText
                        }
                    }
                    var bodies = Set<String>()
                    for try await body in group { bodies.insert(body) }
                    #expect(bodies.count == 200)
                }
                #expect(server.statistics.requests == 200)
                #expect(server.statistics.acceptedConnections <= 8)
            }
        }
    }

    @Test func staleKeepAliveConnectionIsReplaced() async throws {
        try await withServer(.test(idleTimeout: .milliseconds(30))) { port, server in
            try await withClient { client in
                #expect(try await client.get("http://127.0.0.1:\(port)/hello").bodyText == "hello")
                // Wait until the server has closed the pooled connection for idleness.
                for _ in 0..<400 where server.statistics.idleClosedConnections == 0 {
                    try await Task.sleep(for: .milliseconds(5))
                }
                #expect(server.statistics.idleClosedConnections == 1)
                #expect(try await client.get("http://127.0.0.1:\(port)/hello").bodyText == "hello")
                #expect(server.statistics.acceptedConnections == 2)
            }
        }
    }

    @Test func queuedRequestTimesOutWhenNoConnectionFrees() async throws {
        let probe = HoldProbe()
        try await withServer(router: .makeTest(probe: probe)) { port, _ in
            try await withClient(HTTPClientConfiguration(timeout: .seconds(30), maxConnectionsPerHost: 1)) { client in
                async let held = client.get("http://127.0.0.1:\(port)/hold")
                // Generous: the deadline only turns a hang into a failure (CI once took over 5 s to start it).
                try await withDeadline(seconds: 60) { await probe.started.wait() }
                await expectError(.timedOut) { () async throws(HTTPClientError) in
                    try await client.get("http://127.0.0.1:\(port)/hello", timeout: .milliseconds(50))
                }
                probe.release.set()
                #expect(try await held.bodyText == "released")
            }
        }
    }

    @Test func requestsAfterShutdownFail() async throws {
        let client = try HTTPClient()
        await client.shutdown()
        await expectError(.shutDown) { () async throws(HTTPClientError) in try await client.get("http://127.0.0.1:1/") }
    }
}

extension HTTPURL {
    static func make(_ host: String, _ port: Int, _ target: String) throws -> HTTPURL {
        var url = try HTTPURL("http://placeholder/")
        url.host = host
        url.port = port
        url.target = target
        return url
    }
}
