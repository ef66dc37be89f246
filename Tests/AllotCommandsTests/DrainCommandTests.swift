import AllotCommands
import AllotLoop
import AllotServer
import Foundation
import Synchronization
import Testing

/// `allot drain` against a running service with token authentication.
@Suite struct DrainCommandTests {
    @Test func drainNeedsAnAdminTokenPublishesAnExpiredLeaseAndResumes() async throws {
        let directory = try temporaryDirectory()
        let announced = Mutex<[String]>([])
        let service = try await AllotService.start(
            ServeConfiguration(port: 0, dataDirectory: directory, policies: .embedded), logger: .disabled,
            announce: { line in announced.withLock { $0.append(line) } })
        let admin = try String(contentsOfFile: directory + "/admin-token", encoding: .utf8)
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let url = "http://127.0.0.1:\(service.port)"
        // The loop's first tick publishes right after start; wait for it (virtual time is not needed).
        for _ in 0..<2000 where service.context.operators.loop?.publisher.current == nil {
            try await Task.sleep(for: .milliseconds(5))
        }
        await service.context.operators.loop?.checkpoint()  // the whole first tick is over
        let before = try #require(service.context.operators.loop?.publisher.current?.version)

        let anonymous = await runCLI(["drain", "--url", url])
        #expect(anonymous.code == 1)
        #expect(anonymous.err.hasPrefix("allot drain: 401 "))
        let wrong = await runCLI(["drain", "--url", url, "--token", "allot_nonsense"])
        #expect(wrong.code == 1)
        #expect(wrong.err.hasPrefix("allot drain: 401 "))

        let drained = await runCLI(["drain", "--url", url + "/"], environment: ["ALLOT_TOKEN": admin])
        #expect(drained.code == 0, "\(drained.err)")
        // The loop ticks on the real clock (every 5 s): on a loaded machine a tick may publish between `before` and
        // the drain, so the drain's version is read from its answer and must be newer.
        let prefix = "drained: version "
        #expect(drained.out.hasPrefix(prefix))
        #expect(drained.out.contains(" published with its lease expired at "))
        let version = try #require(Int64(drained.out.dropFirst(prefix.count).prefix { $0.isNumber }))
        #expect(version > before)
        let current = try #require(service.context.operators.loop?.publisher.current)
        #expect(current.version >= version)
        #expect(current.expiresAt == current.generatedAt)

        let resumed = await runCLI(["drain", "--resume", "--url", url, "--token", admin])
        #expect(resumed.code == 0)
        // The end is a version of its own (a tick on the real clock may come right after it).
        #expect(resumed.out.hasPrefix("drain ended: version \(version + 1) records it; "))
        #expect(resumed.out.hasSuffix("; the next tick publishes a normal snapshot"))
        let again = await runCLI(["drain", "--resume", "--url", url, "--token", admin])
        #expect(again.code == 0)
        #expect(again.out == "no drain was in force; nothing changed")
        await service.shutdown(gracePeriod: .seconds(1))

        let unreachable = await runCLI(["drain", "--url", url, "--token", admin])
        #expect(unreachable.code == 1)
        #expect(unreachable.err.hasPrefix("allot drain: cannot reach \(url): "))
        // A URL of the wrong form is a usage error, exit 2, not "cannot reach" (outside evaluation round 36).
        let schemeless = await runCLI(["drain", "--url", "127.0.0.1:8080", "--token", admin])
        #expect(schemeless.code == 2)
        #expect(
            schemeless.err.hasPrefix(
                "allot: error: invalid value '127.0.0.1:8080' for --url: expected an http:// URL, http://HOST:PORT "
                    + "(only http:// URLs are supported: 127.0.0.1:8080/v1/drain)"),
            "\(schemeless.err)")
    }
}
