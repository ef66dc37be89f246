import Testing

@testable import AllotSimulation

/// Built-in scenarios' headline claims, asserted on whole runs of the scenario with every strategy
/// (seed 1). Only the claims `allot` meets today are here; the README's results table lists the
/// others, which issue 8 keeps open. fleet-hour (also won) is left to `scripts/sim-results`: an hour of
/// 50 tenants takes minutes in a debug build.
@Suite struct HeadlineTests {
    private func report(_ name: String) async throws -> SimulationReport {
        let scenario = try Scenario.builtin(named: name)
        var traces: [SimulationTrace] = []
        for strategy in [SimulationStrategy.allot, .static, .fifoBackoff, .equalSplit] {
            traces.append(try await Simulator.run(scenario, strategy: strategy, seed: 1))
        }
        return SimulationReport(scenario: scenario, seed: 1, traces: traces)
    }

    private func metrics(_ report: SimulationReport, _ strategy: String) throws -> RunMetrics {
        try #require(report.metrics.first { $0.strategy == strategy })
    }

    /// Small free-tier tenants keep their share while two big tenants grow to twice the pool: `allot`
    /// starves them least, and every baseline starves them for longer.
    @Test func silentStarvationAllotStarvesLeast() async throws {
        let report = try await report("silent-starvation")
        #expect(report.headlineWinner == "allot")
        let allot = try metrics(report, "allot")
        for baseline in ["static", "fifo-backoff", "equal-split"] {
            let other = try metrics(report, baseline)
            #expect(allot.starvationTenantMinutes < other.starvationTenantMinutes, "\(baseline)")
        }
        #expect(try metrics(report, "static").starvationTenantMinutes > 10)
        #expect(allot.upstream429Rate == 0)
    }

    /// The true capacity halves at minute 12 with latency warning first: `allot` cuts before the
    /// provider answers 429, quotas provisioned from the declared capacity bounce off it.
    @Test func capacityDropAllotAvoidsUpstream429s() async throws {
        let report = try await report("capacity-drop")
        #expect(report.headlineWinner == "allot")
        #expect(try metrics(report, "allot").upstream429Rate == 0)
        for baseline in ["static", "fifo-backoff", "equal-split"] {
            #expect(try metrics(report, baseline).upstream429Rate > 0.05, "\(baseline)")
        }
    }

    /// A token-heavy tenant and request-heavy ones share a pool: `allot` allocates both dimensions,
    /// starves least, and stays above 95% utilisation (every tenant in its binding dimension).
    @Test func tpmVersusRpmAllotStarvesLeast() async throws {
        let report = try await report("tpm-vs-rpm")
        #expect(report.headlineWinner == "allot")
        let allot = try metrics(report, "allot")
        for baseline in ["static", "fifo-backoff", "equal-split"] {
            #expect(allot.starvationTenantMinutes < (try metrics(report, baseline)).starvationTenantMinutes, "\(baseline)")
        }
        #expect((allot.utilisation ?? 0) >= 0.95)
        #expect(allot.upstream429Rate == 0)
    }
}
