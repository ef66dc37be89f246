import Foundation
import Testing

@testable import AllotHTTP

/// Bodies that arrive in pieces reach the handler byte for byte, whether the buffer is handed over
/// whole (nothing after the body) or the body is copied out (the next request already behind it).
@Suite struct RequestBodyTests {
    static func post(_ body: [UInt8]) -> [UInt8] {
        Array("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: \(body.count)\r\n\r\n".utf8) + body
    }

    @Test(arguments: [1, 4_000, 48_000])
    func aBodySentInPiecesArrivesWhole(size: Int) async throws {
        try await withServer { port, _ in
            let first = patternBytes(size)
            let second = Array(patternBytes(size + 7).reversed())
            let echoed = try await onThread { () -> [[UInt8]] in
                let socket = try RawSocket(port: port)
                // The head alone, then the body in pieces with short pauses between them.
                let request = Self.post(first)
                let headLength = request.count - first.count
                try socket.send(Array(request[..<headLength]))
                var start = headLength
                while start < request.count {
                    let end = min(request.count, start + max(1, size / 3))
                    try socket.send(Array(request[start..<end]))
                    start = end
                    usleep(2_000)
                }
                var bodies = [try #require(try socket.readResponse()).body]
                // The same connection again: head and body together.
                try socket.send(Self.post(second))
                bodies.append(try #require(try socket.readResponse()).body)
                return bodies
            }
            #expect(echoed == [first, second])
        }
    }

    @Test func aBodyFollowedByThePipelinedNextRequestIsCutAtItsLength() async throws {
        try await withServer { port, _ in
            let first = patternBytes(30_000)
            let second = Array("second".utf8)
            let echoed = try await onThread { () -> [[UInt8]] in
                let socket = try RawSocket(port: port)
                let bytes = Self.post(first) + Self.post(second)
                try socket.send(Array(bytes[..<10_000]))
                usleep(2_000)
                try socket.send(Array(bytes[10_000...]))
                return [try #require(try socket.readResponse()).body, try #require(try socket.readResponse()).body]
            }
            #expect(echoed == [first, second])
        }
    }
}
