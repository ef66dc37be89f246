import AllotJSON

@testable import AllotHTTP

/// What the `/hold` handler of the test router reports, so tests can follow a held request.
final class HoldProbe: Sendable {
    /// Set when a `/hold` handler has started waiting.
    let started = OneShotEvent()
    /// Set when a `/hold` handler saw its task cancelled.
    let cancelled = OneShotEvent()
    /// Set by the test (or the shutdown signal) to let held handlers answer.
    let release = OneShotEvent()
}

extension Router {
    /// The router the live tests talk to.
    static func makeTest(probe: HoldProbe = HoldProbe()) -> Router {
        var router = Router()
        router.get("/hello") { _ in .text("hello") }
        router.get("/tenants/{id}") { request in
            .json(["id": .string(request.pathParameters["id"] ?? "")])
        }
        router.post("/echo") { request in
            HTTPResponse(status: .ok, headers: ["Content-Type": "application/octet-stream"], body: request.body)
        }
        router.get("/big") { request in
            let count = Int(request.queryValue("bytes") ?? "0") ?? 0
            return HTTPResponse(body: patternBytes(count))
        }
        router.get("/hold") { _ in
            probe.started.set()
            await probe.release.wait()
            if Task.isCancelled {
                probe.cancelled.set()
            }
            return .text("released")
        }
        router.get("/fail") { _ in
            struct Boom: Error {}
            throw Boom()
        }
        return router
    }
}

extension HTTPServerConfiguration {
    /// Short timeouts so tests that exercise them stay fast; tests override what they test.
    static func test(
        maxConnections: Int = 100, maxHeaderBytes: Int = 4096, maxRequestLineBytes: Int = 2048,
        maxHeaderCount: Int = 50, maxBodyBytes: Int = 64 * 1024,
        headerReadTimeout: Duration = .seconds(3), idleTimeout: Duration = .seconds(3),
        writeTimeout: Duration = .seconds(3), lingerTimeout: Duration = .milliseconds(200)
    ) -> HTTPServerConfiguration {
        HTTPServerConfiguration(
            host: "127.0.0.1", port: 0, maxConnections: maxConnections, maxHeaderBytes: maxHeaderBytes,
            maxRequestLineBytes: maxRequestLineBytes, maxHeaderCount: maxHeaderCount, maxBodyBytes: maxBodyBytes,
            headerReadTimeout: headerReadTimeout, bodyReadTimeout: headerReadTimeout, idleTimeout: idleTimeout,
            writeTimeout: writeTimeout, lingerTimeout: lingerTimeout)
    }
}

/// Starts a server on an ephemeral port, runs `body`, and always shuts the server down.
func withServer(
    _ configuration: HTTPServerConfiguration = .test(), router: Router = .makeTest(),
    _ body: (_ port: Int, _ server: HTTPServer) async throws -> Void
) async throws {
    let server = HTTPServer(configuration: configuration, responder: router)
    let port = try await server.start()
    do {
        try await body(port, server)
    } catch {
        await server.shutdown(gracePeriod: .milliseconds(100))
        throw error
    }
    await server.shutdown(gracePeriod: .milliseconds(100))
}

/// A well-formed GET request.
func get(_ path: String, headers: String = "") -> String {
    "GET \(path) HTTP/1.1\r\nHost: test\r\n\(headers)\r\n"
}

/// Sends `request` on a fresh connection and reads one response.
func exchange(_ port: Int, _ request: String) async throws -> RawResponse? {
    try await onThread {
        let socket = try RawSocket(port: port)
        try socket.send(request)
        return try socket.readResponse()
    }
}

/// Parses a JSON error body into (code, message, field).
func errorParts(_ response: RawResponse?) -> (code: String?, message: String?, field: String?) {
    guard let response, let json = try? JSON.parse(response.body) else { return (nil, nil, nil) }
    return (
        json["error"]?["code"]?.stringValue, json["error"]?["message"]?.stringValue,
        json["error"]?["field"]?.stringValue
    )
}

/// `count` bytes of a 251-byte repeating pattern (a prime period, so misplaced chunks show), built
/// with a few large copies because debug-built per-byte loops over megabytes are slow.
func patternBytes(_ count: Int) -> [UInt8] {
    guard count > 0 else { return [] }
    var bytes = (0..<min(count, 251)).map { UInt8($0) }
    bytes.reserveCapacity(count)
    while bytes.count < count {
        bytes.append(contentsOf: bytes[0..<min(bytes.count, count - bytes.count)])
    }
    return bytes
}
