import AllotHTTP
import AllotLoop
import AllotProtocol
import AllotServer
import AllotStore
import AllotTime
import Testing

/// `GET /v1/snapshot` over real sockets: long-polls held by the server, woken by a publish.
@Suite struct SnapshotRouteLiveTests {
    @Test func longPollsOverLoopbackAreWokenByAPublish() async throws {
        let publisher = AllocationPublisher(
            store: SnapshotStore(pool: try await StoreDatabase.temporary()), clock: SystemClock())
        try await publisher.publish(SnapshotFixture.content(), now: SystemClock().now)
        let signal = ShutdownSignal()
        let route = SnapshotRoute(publisher: publisher, shutdownSignal: signal)
        var router = Router()
        router.get(SnapshotRoute.path) { request in try await route.respond(to: request) }
        let server = HTTPServer(
            configuration: HTTPServerConfiguration(port: 0), responder: router, shutdownSignal: signal)
        let port = try await server.start()
        let client = try HTTPClient()
        let url = "http://127.0.0.1:\(port)/v1/snapshot"

        let first = try await client.get(url + "?gateway=gw-1")
        #expect(first.status == .ok)
        #expect(first.headers["ETag"] == "\"1\"")
        let conditional = try await client.get(url + "?gateway=gw-1", headers: ["If-None-Match": "\"1\""])
        #expect(conditional.status == .notModified)
        #expect(conditional.body.isEmpty)

        let polls = (0..<20).map { index in
            Task {
                try await client.get(
                    url + "?gateway=gw-\(index % 2 + 1)&wait=30", headers: ["If-None-Match": "\"1\""],
                    timeout: .seconds(35))
            }
        }
        while publisher.watcherCount < 20 { await Task.yield() }
        try await publisher.publish(SnapshotFixture.content(rpm: 80), now: SystemClock().now)
        for (index, poll) in polls.enumerated() {
            let response = try await poll.value
            #expect(response.status == .ok)
            #expect(response.headers["ETag"] == "\"2\"")
            let slice = try Snapshot(decoding: response.body)
            #expect(slice.tenants.first?.rpm.rate == (index % 2 == 0 ? 60 : 20))
        }

        // A held long-poll is answered at once when the server shuts down.
        let held = Task {
            try await client.get(url + "?wait=60", headers: ["If-None-Match": "\"2\""], timeout: .seconds(65))
        }
        while publisher.watcherCount < 1 { await Task.yield() }
        await server.shutdown(gracePeriod: .seconds(5))
        #expect(try await held.value.status == .notModified)
        await client.shutdown()
    }
}
