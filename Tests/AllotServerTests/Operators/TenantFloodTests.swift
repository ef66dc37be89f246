import AllotJSON
import AllotStore
import AllotTime
import Testing

@testable import AllotServer

/// A gateway registering tenants by the thousand raises `tenant_flood` (outside evaluation round 22: one batch of
/// 10,000 invented ids held a real tenant at 1 rpm for five minutes, with no alert).
@Suite struct TenantFloodTests {
    private static func batch(_ count: Int, from gateway: String, prefix: String, at now: Double) -> TelemetryBatch {
        TelemetryBatch(
            events: (0..<count).map { index in
                TelemetryEvent(
                    timestampMs: EpochTime.milliseconds(fromSeconds: now), gateway: gateway,
                    tenant: "\(prefix)-\(index)", upstream: "openai/gpt-4o", outcome: .ok)
            })
    }

    @Test func moreThan500NewTenantsInAMinuteRaiseAnAlertNamingTheGateway() async throws {
        let harness = try await OperatorHarness.make()
        let now = harness.clock.now
        // 500 is not a flood; the same tenants again register nothing.
        _ = try await harness.telemetry.ingest(
            Self.batch(500, from: "gw-a", prefix: "real", at: now), defaultTier: "free", now: now)
        _ = try await harness.telemetry.ingest(
            Self.batch(500, from: "gw-a", prefix: "real", at: now), defaultTier: "free", now: now)
        var alerts = await harness.send(.get, "/v1/alerts?kind=tenant_flood", as: .operator)
        #expect(alerts.jsonBody["count"] == 0)

        harness.clock.advance(by: 10)
        let later = harness.clock.now
        _ = try await harness.telemetry.ingest(
            Self.batch(1, from: "gw-x", prefix: "fake", at: later), defaultTier: "free", now: later)
        alerts = await harness.send(.get, "/v1/alerts?kind=tenant_flood", as: .operator)
        #expect(alerts.jsonBody["count"] == 1)
        let alert = try #require(alerts.jsonBody["alerts"]?[0])
        #expect(alert["severity"] == "warning")
        #expect(alert["since"] == .string(RFC3339.format(later)))
        let message = alert["message"]?.stringValue ?? ""
        #expect(
            message.hasPrefix(
                "501 new tenants registered by telemetry in the last 60 s (more than 500), from gateway gw-a, gw-x"),
            "\(message)")
        _ = try await harness.console.serviceAlerts(now: harness.clock.now)
        #expect(harness.metrics.render().contains(#"allot_alerts{kind="tenant_flood",severity="warning"} 1"# + "\n"))

        // A minute after the first 500 the window holds one registration: over.
        harness.clock.advance(by: 55)
        alerts = await harness.send(.get, "/v1/alerts?kind=tenant_flood", as: .operator)
        #expect(alerts.jsonBody["count"] == 0)
    }
}
