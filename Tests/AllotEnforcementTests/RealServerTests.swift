import AllotHTTP
import AllotJSON
import AllotProtocol
import AllotTime
import Foundation
import Testing

@testable import AllotEnforcement

/// The HTTP transports against a running `allot serve`. Runs only when `ALLOT_SERVE_URL` is set (and
/// `ALLOT_SERVE_TOKEN` for a server with auth):
///
///     allot serve --dev --listen 127.0.0.1:18431 --data /tmp/allot-test &
///     ALLOT_SERVE_URL=http://127.0.0.1:18431 swift test --filter RealServerTests
@Suite(.enabled(if: ProcessInfo.processInfo.environment["ALLOT_SERVE_URL"] != nil))
struct RealServerTests {
    static let url = ProcessInfo.processInfo.environment["ALLOT_SERVE_URL"] ?? ""
    static let token = ProcessInfo.processInfo.environment["ALLOT_SERVE_TOKEN"]

    @Test func telemetryBatchesAreAcceptedAsTheLibraryWritesThem() async throws {
        let client = try HTTPClient()
        let transport = HTTPTelemetryTransport(baseURL: Self.url, token: Self.token, client: client)
        let now = SystemClock().now
        let records = [
            TelemetryRecord(
                ts: now, gateway: "eu/gw-1", tenant: "acme", upstream: "openai/gpt-4o", outcome: .ok, status: 200,
                latency: 0.25, queueWait: 0.01, promptTokens: 900, completionTokens: 120, estimatedTokens: 1_200,
                taskClass: .batch, taskID: "task-1", modelVersion: "gpt-4o-2024-08-06", retry: 0,
                headers: [
                    ResponseHeader(name: "x-ratelimit-remaining-requests", value: "99"),
                    ResponseHeader(name: "x-ratelimit-reset-tokens", value: "6m0s"),
                ]),
            TelemetryRecord(
                ts: now, gateway: "eu/gw-1", tenant: "acme", upstream: "openai/gpt-4o", outcome: .deniedLocal,
                queueWait: 5, estimatedTokens: 500, taskClass: .interactive, errorType: "rpm"),
            TelemetryRecord(
                ts: now, gateway: "eu/gw-1", tenant: "acme", upstream: "openai/gpt-4o", outcome: .queued,
                queueWait: 0.5, estimatedTokens: 500, taskClass: .background),
            TelemetryRecord(
                ts: now, gateway: "eu/gw-1", tenant: "globex", upstream: "openai/gpt-4o",
                outcome: .quotaExhausted, status: 429, latency: 0.05, estimatedTokens: 300, retry: 2,
                headers: [ResponseHeader(name: "retry-after", value: "2")], errorType: "rate_limit_exceeded"),
        ]
        try await transport.send(records.compactMap { $0.validated() })
        await client.shutdown()
    }

    @Test func theSnapshotClientLongPollsTheRealServer() async throws {
        let gateway = try Gateway.connect(
            to: Self.url, token: Self.token, configuration: GatewayConfiguration(gatewayID: "eu/gw-1"),
            clientConfiguration: .init(longPollWait: 1, backoff: Backoff(initial: 0.05, maximum: 0.5)))
        gateway.start()
        #expect(await gateway.waitForSnapshot(timeout: 10))
        let version = try #require(gateway.enforcer.enforcedVersion)
        // The next poll carries the version and is held for the wait, then answered 304 (or a newer version).
        #expect(await eventually(timeout: 60) { await gateway.snapshotClient!.status.polls >= 3 })
        let status = await gateway.snapshotClient!.status
        #expect(status.consecutiveFailures == 0)
        #expect(status.enforcedVersion.map { $0 >= version } == true)
        await gateway.stop()
    }
}
