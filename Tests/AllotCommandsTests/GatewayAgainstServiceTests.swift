import AllotEnforcement
import AllotLoop
import AllotServer
import AllotTime
import Foundation
import Testing

/// The enforcement library against the real service (issue 7's "judged by", SPEC 7 and 12): a
/// gateway long-polls `allot serve`, reports its traffic, receives the allocation the loop computed
/// from it, keeps enforcing the last good snapshot when the server stops, falls back when the lease
/// ends, and recovers when the server comes back on the same port with a higher version. Server and
/// gateway share one virtual clock (ticks, leases, backoff); only the sockets are real.
@Suite struct GatewayAgainstServiceTests {
    /// Waits on real time (a few ms at a time) for a condition the sockets bring about.
    func until(_ condition: () async -> Bool) async -> Bool {
        for _ in 0..<3000 {
            if await condition() { return true }
            try? await Task.sleep(for: .milliseconds(5))
        }
        return await condition()
    }

    func start(_ directory: String, port: Int, clock: ManualClock) async throws -> AllotService {
        try await AllotService.start(
            ServeConfiguration(port: port, dataDirectory: directory, policies: .embedded, dev: true), clock: clock,
            logger: .disabled)
    }

    @Test func aGatewayFollowsTheLoopSurvivesARestartAndFallsBackWhenTheLeaseEnds() async throws {
        let clock = ManualClock(now: SystemClock().now.rounded())
        let directory = try temporaryDirectory()
        var service = try await start(directory, port: 0, clock: clock)
        let port = service.port
        #expect(await until { service.context.operators.loop?.publisher.current != nil })
        await service.context.operators.loop?.checkpoint()  // the whole first tick is over
        let first = try #require(service.context.operators.loop?.publisher.current?.version)

        let gateway = try Gateway.connect(
            to: "http://127.0.0.1:\(port)", token: nil, configuration: GatewayConfiguration(gatewayID: "gw-a"),
            clock: clock,
            clientConfiguration: SnapshotClient.Configuration(
                longPollWait: 30, backoff: Backoff(initial: 0.5, maximum: 1), defaultRefreshInterval: 1),
            reporterConfiguration: TelemetryReporter.Configuration(batchSize: 1, flushInterval: 1))
        gateway.start()
        #expect(await until { gateway.enforcer.enforcedVersion == first })

        // Traffic for a tenant Allot has never seen: the default admits one call, the rest are
        // denied locally; every attempt and denial reaches the server as telemetry.
        var admitted = 0
        for index in 0..<10 {
            let request = AdmissionRequest(
                tenant: "acme", upstream: "openai/gpt-4o", estimatedTokens: 500, taskID: "task-\(index / 5)")
            if let ticket = gateway.tryAdmit(request).ticket {
                admitted += 1
                gateway.complete(ticket, status: 200, promptTokens: 400, completionTokens: 100, latency: 0.5)
            }
        }
        #expect(admitted >= 1)
        #expect(await until { ((try? await service.context.telemetry.lastEventID()) ?? 0) >= 10 })

        // The next tick allocates to acme; the held long-poll delivers it to the gateway.
        clock.advance(by: 5)
        #expect(await until { (gateway.enforcer.enforcedVersion ?? 0) > first })
        let followed = try #require(gateway.enforcer.enforcedVersion)
        let limits = try #require(
            gateway.enforcer.tenantStatus(tenant: "acme", upstream: "openai/gpt-4o", now: clock.now)?.limits)
        #expect(limits.rpm.rate > 2)  // above the unknown-tenant default of the built-in policy
        // Its polls are recorded: the version it enforces is known to the server.
        #expect(
            await until {
                service.context.operators.loop?.publisher.contacts()
                    .contains { $0.id == "gw-a" && $0.enforcedVersion == followed } == true
            })

        // Allot stops: the last good snapshot is still enforced from memory.
        await service.shutdown(gracePeriod: .seconds(1))
        // (After the answer to its held poll the client waits `refresh_ms` on the clock, so move it on.)
        let shutdownAt = clock.now
        #expect(
            await until {
                if clock.now < shutdownAt + 60 { clock.advance(by: 0.5) }
                return (await gateway.snapshotClient?.status.consecutiveFailures ?? 0) >= 1
            })
        #expect(gateway.enforcer.enforcedVersion == followed)
        #expect(!gateway.status.inFallback)

        // The lease (300 s in the built-in policy) ends with Allot still away: fallback floors.
        clock.advance(by: 301)
        #expect(await until { gateway.status.inFallback })

        // Allot comes back on the same port: the last snapshot at once (its lease long over), then a
        // tick with a fresh lease and a higher version; the gateway leaves its fallback.
        service = try await start(directory, port: port, clock: clock)
        #expect(service.context.operators.loop?.publisher.current?.version == followed)
        let recovered = await until {
            clock.advance(by: 1)
            return (gateway.enforcer.enforcedVersion ?? 0) > followed && !gateway.status.inFallback
        }
        #expect(recovered)
        #expect(service.context.operators.loop?.publisher.contacts().map(\.id) == ["gw-a"])
        // Its polls name the run of the process (`instance=`), which its leave names too.
        let instance = try #require(gateway.snapshotClient?.instanceID)
        #expect(service.context.operators.loop?.publisher.contacts().map(\.instance) == [instance])
        await gateway.stop()
        // Stopping told Allot it leaves (DELETE /v1/gateways/gw-a): forgotten at once, not alerted on as silent.
        #expect(service.context.operators.loop?.publisher.contacts().isEmpty == true)
        await service.shutdown(gracePeriod: .seconds(1))
    }
}
