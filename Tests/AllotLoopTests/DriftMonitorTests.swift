import AllotCore
import Testing

@testable import AllotLoop

@Suite struct DriftMonitorTests {
    static let key = AllocationKey(tenant: "acme", upstream: "openai/gpt-4o")

    /// Admitted `served` against `allowed` for 60 s (the default `drift_window_s`): the alert's message.
    static func driftMessage(served: Double, allowed: Double) -> String? {
        var monitor = DriftMonitor()
        let status = TenantStatus(
            key: key, tenantClass: .steady, demand: PerDimension(rpm: served, tpm: 0),
            gatewayServed: ["gw-1": PerDimension(rpm: served, tpm: 0)])
        let allowance: [AllocationKey: PerDimension<Double?>] = [key: PerDimension(rpm: allowed, tpm: nil)]
        var alerts: [LoopAlert] = []
        for now in stride(from: 0.0, through: 60, by: 5) {
            alerts = monitor.review(statuses: [status], allowance: allowance, thresholds: AlertThresholds(), now: now)
        }
        return alerts.first { $0.kind == "drift" }?.message
    }

    @Test func theMessageSaysHowFarOver() {
        #expect(
            Self.driftMessage(served: 36, allowed: 30)
                == "gateways admitted 36 rpm for acme on openai/gpt-4o against an allocation of 30 (20% over)")
    }

    /// A sliver of an allocation (10⁻³⁰⁰ rpm) admitted against: the ratio overflows an Int. Converting it trapped,
    /// and took the loop (the server, the simulator) down with it; found by a random scenario.
    @Test func aSliverOfAnAllocationIsOverWithoutAPercentage() {
        let message = Self.driftMessage(served: 5, allowed: 1e-300)
        #expect(message?.hasSuffix("(over)") == true, "\(message ?? "no alert")")
        // Beyond a thousandfold the percentage says nothing; below it, it is given.
        #expect(Self.driftMessage(served: 5, allowed: 0.001)?.hasSuffix("(over)") == true)
        #expect(Self.driftMessage(served: 5, allowed: 1)?.hasSuffix("(400% over)") == true)
    }
}
