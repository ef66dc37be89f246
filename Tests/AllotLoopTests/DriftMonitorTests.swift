import AllotCore
import Foundation
import Testing

@testable import AllotLoop

@Suite struct DriftMonitorTests {
    static let key = AllocationKey(tenant: "acme", upstream: "openai/gpt-4o")

    /// Admitted nothing at first, then `served` against `allowed` for 60 s (the default `drift_window_s`): the
    /// alert's message.
    static func driftMessage(served: Double, allowed: Double) -> String? {
        var monitor = DriftMonitor()
        let allowance: [AllocationKey: PerDimension<Double?>] = [key: PerDimension(rpm: allowed, tpm: nil)]
        var alerts: [LoopAlert] = []
        for now in stride(from: -5.0, through: 60, by: 5) {
            let admitted = now < 0 ? 0 : served
            let status = TenantStatus(
                key: key, tenantClass: .steady, demand: PerDimension(rpm: admitted, tpm: 0),
                gatewayServed: ["gw-1": PerDimension(rpm: admitted, tpm: 0)])
            alerts = monitor.review(
                statuses: [status], allowance: allowance, thresholds: AlertThresholds(), window: 60, now: now)
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

    /// Alerts from `served(t)` admitted against `allowed(t)`, reviewed every 5 s from 0 through `until`.
    static func alerts(
        until: Double, served: (Double) -> Double, allowed: (Double) -> Double
    ) -> [(at: Double, message: String)] {
        var monitor = DriftMonitor()
        var raised: [(at: Double, message: String)] = []
        for now in stride(from: 0.0, through: until, by: 5) {
            let status = TenantStatus(
                key: key, tenantClass: .steady, demand: PerDimension(rpm: served(now), tpm: 0),
                gatewayServed: ["gw-1": PerDimension(rpm: served(now), tpm: 0)])
            let allowance: [AllocationKey: PerDimension<Double?>] = [key: PerDimension(rpm: allowed(now), tpm: nil)]
            for alert in monitor.review(
                statuses: [status], allowance: allowance, thresholds: AlertThresholds(), window: 60, now: now)
            where alert.kind == "drift" {
                raised.append((now, alert.message))
            }
        }
        return raised
    }

    /// A tenant that stops sending: its allocation falls to its idle allocation at once, while the admitted rate
    /// (a one-minute EWMA) decays. Compared with the allowance of the moment that was "5091% over" for a tenant
    /// admitted nothing (outside evaluation round 21); compared with the allowance averaged the same way, never.
    @Test func aTenantThatStopsIsNotDrift() {
        let stop = 120.0
        let raised = Self.alerts(
            until: 400, served: { $0 < stop ? 900 : 900 * exp(-($0 - stop) / 60) },
            allowed: { $0 < stop ? 1000 : 3 })
        #expect(raised.isEmpty, "\(raised)")
        // The same when a burst credit ends: 240 admitted under 250 allowed, then 30 allowed and 12 sent.
        let credit = Self.alerts(
            until: 400, served: { $0 < stop ? 240 : 12 + 228 * exp(-($0 - stop) / 60) },
            allowed: { $0 < stop ? 250 : 30 })
        #expect(credit.isEmpty, "\(credit)")
    }

    /// Gateways that keep admitting the old rate after the allowance fell (a stale version) are drift once the
    /// averaged allowance has come down and the excess has lasted `drift_window_s`.
    @Test func gatewaysThatKeepTheOldRateAreDrift() throws {
        let raised = Self.alerts(until: 400, served: { _ in 900 }, allowed: { $0 < 120 ? 1000 : 300 })
        let first = try #require(raised.first)
        // The average passes 900 / 1.1 ≈ 818 about 12 s after the cut, and the alert follows 60 s later.
        #expect(first.at >= 180 && first.at <= 200, "\(first.at)")
        #expect(
            raised.last?.message == "gateways admitted 900 rpm for acme on openai/gpt-4o against an allocation of "
                + "300 (200% over)")
    }

    /// After a restart the admitted rates come back from the checkpoint but the averaged allowance does not: a
    /// tenant that stopped just before (admitted decaying from 900, allowance now 3) starts from what was admitted,
    /// so it is not drift; one whose gateways keep admitting 900 against 300 is, once that start has decayed.
    @Test func aRestartStartsFromWhatWasAdmitted() throws {
        let stopped = Self.alerts(
            until: 300, served: { 900 * exp(-($0 + 30) / 60) }, allowed: { _ in 3 })
        #expect(stopped.isEmpty, "\(stopped)")
        let stale = Self.alerts(until: 400, served: { _ in 900 }, allowed: { _ in 300 })
        let first = try #require(stale.first)
        // The start (900) falls below 900 / 1.1 about 10 s in, and the alert follows 60 s later.
        #expect(first.at >= 65 && first.at <= 80, "\(first.at)")
    }

    /// An allowance raised above what is admitted ends the excess at once: not drift, and never "(-80% over)".
    @Test func aRaisedAllowanceIsNotDrift() {
        let raised = Self.alerts(until: 300, served: { _ in 100 }, allowed: { $0 < 60 ? 50 : 500 })
        #expect(raised.allSatisfy { $0.at < 60 }, "\(raised)")
        #expect(raised.allSatisfy { !$0.message.contains("-") }, "\(raised)")
    }
}
