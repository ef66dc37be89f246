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
                "501 new tenants registered by telemetry within 60 s (more than 500), by gateways gw-a (500), gw-x (1):"
            ),
            "\(message)")
        _ = try await harness.console.serviceAlerts(now: harness.clock.now)
        #expect(harness.metrics.render().contains(#"allot_alerts{kind="tenant_flood",severity="warning"} 1"# + "\n"))

        // It stays while the flood's tenants keep their shares (five minutes after the window last held more than
        // 500), not only for the minute of the window: a scrape a minute later still sees it.
        harness.clock.advance(by: 55)
        alerts = await harness.send(.get, "/v1/alerts?kind=tenant_flood", as: .operator)
        #expect(alerts.jsonBody["count"] == 1)
        harness.clock.advance(by: 250)
        alerts = await harness.send(.get, "/v1/alerts?kind=tenant_flood", as: .operator)
        #expect(alerts.jsonBody["count"] == 0)
    }

    /// A second flood, after the first has ended, has its own start even when nobody read the alert in between; the
    /// gateways are listed by how many tenants each registered.
    @Test func aLaterFloodHasItsOwnStartAndTheBiggestGatewayComesFirst() {
        var window = RegistrationWindow()
        window.record(["gw-b": 400, "gw-a": 200], now: 100)
        #expect(window.flood(now: 100)?.gateways.map(\.id) == ["gw-b", "gw-a"])
        #expect(window.flood(now: 100)?.since == 100)
        window.record(["gw-c": 501], now: 1_000)  // nobody asked in between
        let second = window.flood(now: 1_000)
        #expect(second?.since == 1_000)
        #expect(second?.tenants == 501)
        #expect(second?.gateways.map(\.id) == ["gw-c"])
        #expect(window.flood(now: 1_000 + 301) == nil)
        // 500 is not a flood.
        var quiet = RegistrationWindow()
        quiet.record(["gw-a": 500], now: 0)
        #expect(quiet.flood(now: 0) == nil)
    }
}
