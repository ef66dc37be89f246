import AllotJSON
import Testing

@testable import AllotSimulation

/// Built-in scenarios' headline claims, asserted on whole runs of the scenario with every strategy
/// (seed 1). Only the claims `allot` meets today are here; the README's results table lists the
/// other (noisy-signals), which issue 8 keeps open. fleet-hour (also won) is left to
/// `scripts/sim-results`: an hour of 50 tenants takes minutes in a debug build.
@Suite struct HeadlineTests {
    private func report(_ name: String, gateways: Int? = nil) async throws -> SimulationReport {
        var scenario = try Scenario.builtin(named: name)
        if let gateways { scenario.gateways = gateways }
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
        // What starvation `allot` has (1.5–2 tenant-minutes) is dips of a minute or two; the small tenants
        // of static and equal-split starve for whole stretches of five minutes and more.
        #expect(allot.sustainedStarvationTenantMinutes == 0)
        #expect(try metrics(report, "static").sustainedStarvationTenantMinutes > 10)
        #expect(try metrics(report, "equal-split").sustainedStarvationTenantMinutes > 10)
    }

    /// A premium support surge (tasks due within 60 s) at minute 10 on a pool the batch pipeline fills:
    /// `allot` makes every premium deadline at seed 1 (a blocked tenant's claim reads its attempts over the
    /// fast window, so the surge is claimed within seconds), as well as any baseline does — static and
    /// equal-split also make them by holding a share of the pool for each tenant, which leaves capacity idle
    /// and starves the pipeline for minutes at a stretch.
    @Test func nightCollisionAllotMakesThePremiumDeadlines() async throws {
        let report = try await report("night-collision")
        // A tie with static and equal-split, at 100 %: no single winner.
        #expect(report.headlineBest == ["allot", "static", "equal-split"])
        #expect(report.headlineWinner == nil)
        #expect(report.table().contains("(higher is better): tie: allot, static, equal-split\n"))
        let headline = try #require(try JSON.parse(report.json())["headline"])
        #expect(headline["winner"] == .null)
        #expect(headline["best"] == .array([.string("allot"), .string("static"), .string("equal-split")]))
        #expect(headline["allot_wins"] == .bool(false))
        let allot = try metrics(report, "allot")
        let premium = try #require(allot.tiers["premium"]?.sloAttainment)
        #expect(premium >= 0.999)
        for baseline in ["static", "fifo-backoff", "equal-split"] {
            let theirs = try #require(try metrics(report, baseline).tiers["premium"]?.sloAttainment)
            #expect(premium >= theirs, "\(baseline)")
        }
        #expect(try #require(allot.utilisation) >= 0.95)
        #expect(allot.sustainedStarvationTenantMinutes == 0)
        // The baselines that tie pay for it: static and equal-split leave capacity idle and starve the pipeline.
        #expect(try metrics(report, "static").sustainedStarvationTenantMinutes > 10)
        #expect(try #require(try metrics(report, "static").utilisation) < 0.8)
        #expect(try metrics(report, "equal-split").sustainedStarvationTenantMinutes > 10)
        #expect(try #require(try metrics(report, "equal-split").utilisation) < 0.8)
    }

    /// The true capacity halves at minute 12 with latency warning first: `allot` cuts before the
    /// provider answers 429, quotas provisioned from the declared capacity bounce off it. At most the
    /// SPEC 13 goal of 1%, not exactly 0: this seed gave 0 once, but a few 429s just after the drop, before
    /// the new allocation is in force, come and go with the run's course (other seeds gave 0.03–0.19%, main
    /// with the Observer changes of 1d372c9–1a81d47 gives 0.06% here, task-aware admission 0.03%).
    @Test func capacityDropAllotAvoidsUpstream429s() async throws {
        let report = try await report("capacity-drop")
        #expect(report.headlineWinner == "allot")
        #expect(try metrics(report, "allot").upstream429Rate <= 0.01)
        for baseline in ["static", "fifo-backoff", "equal-split"] {
            #expect(try metrics(report, baseline).upstream429Rate > 0.05, "\(baseline)")
        }
    }

    /// The capacity drop from a provider that states no limit: the new limit is found from the refusals
    /// alone (one settled slice in which a quarter or more was refused measures it), and probing after the
    /// cut steps in units of the estimate, not of the declared capacity twice the real one.
    @Test func blindCapacityDropAllotFindsTheLimitFromRefusals() async throws {
        let report = try await report("blind-capacity-drop")
        #expect(report.headlineWinner == "allot")
        let allot = try metrics(report, "allot")
        #expect(allot.upstream429Rate <= 0.01)
        #expect((allot.utilisation ?? 0) >= 0.95)
        for baseline in ["static", "fifo-backoff", "equal-split"] {
            #expect(try metrics(report, baseline).upstream429Rate > 0.05, "\(baseline)")
        }
    }

    /// A token-heavy tenant and request-heavy ones share a pool: `allot` allocates both dimensions,
    /// starves least, and stays above 95% utilisation (every tenant in its binding dimension). (Seed 1: 3.0
    /// starved tenant-minutes against static's 5.5, 95.5%. A burst of 30k-token calls meeting the provider's
    /// bucket once cut the Observer's token estimate to 725k of a true 1M for minutes; a cut now needs
    /// refusals in three settled slices, and the estimate returns toward the stated limit quickly.)
    @Test func tpmVersusRpmAllotStarvesLeast() async throws {
        let report = try await report("tpm-vs-rpm")
        try expectAllotStarvesLeast(report, utilisation: 0.95)
    }

    /// The same story behind 32 gateways, where a long-context tenant's slice refills one 30k-token call every
    /// few minutes at each: `allot` still starves least (seed 1: 26.0 tenant-minutes, equal-split 43.2, static
    /// 63.8, fifo-backoff 95.7). With room for one request per slice it starved 52.0 and lost to equal-split,
    /// at 73.5% utilisation.
    @Test func tpmVersusRpmBehind32GatewaysAllotStillStarvesLeast() async throws {
        let report = try await report("tpm-vs-rpm", gateways: 32)
        try expectAllotStarvesLeast(report, utilisation: 0.8)
    }

    /// `allot` wins the headline, starves fewer tenant-minutes than every baseline, never for five minutes at a
    /// stretch, with at most 1% of its attempts answered 429 and at least `utilisation`.
    private func expectAllotStarvesLeast(_ report: SimulationReport, utilisation: Double) throws {
        let allot = try metrics(report, "allot")
        #expect(report.headlineWinner == "allot")
        for baseline in ["static", "fifo-backoff", "equal-split"] {
            #expect(
                allot.starvationTenantMinutes < (try metrics(report, baseline)).starvationTenantMinutes, "\(baseline)")
        }
        #expect(allot.upstream429Rate <= 0.01)
        #expect((allot.utilisation ?? 0) >= utilisation)
        #expect(allot.sustainedStarvationTenantMinutes == 0)
    }

    /// A premium tenant over-consumes for good while another bursts for five minutes: within each tenant the
    /// gateways finish the tasks they have started before starting new ones, so `allot` delivers most premium
    /// tasks on time where every baseline delivers far fewer (74.2% at seed 1; before task-aware admission
    /// 23.2%, behind fifo-backoff's 37.3%).
    @Test func burstVersusSustainedAllotDeliversTheMostPremiumTasksOnTime() async throws {
        let report = try await report("burst-vs-sustained")
        #expect(report.headlineWinner == "allot")
        let allot = try #require(try metrics(report, "allot").tiers["premium"]?.sloAttainment)
        #expect(allot >= 0.65)
        for baseline in ["static", "fifo-backoff", "equal-split"] {
            let other = try #require(try metrics(report, baseline).tiers["premium"]?.sloAttainment)
            #expect(allot >= other + 0.1, "\(baseline)")
        }
        #expect(try metrics(report, "allot").tiers["standard"]?.sloAttainment == 1)
        // The burster's ramp-up and the sustained tenant's wait while the burst's backlog drains are
        // dips (3.0 tenant-minutes at the 60-s measure); static and equal-split starve for stretches.
        #expect(try metrics(report, "allot").sustainedStarvationTenantMinutes == 0)
        #expect(try metrics(report, "static").sustainedStarvationTenantMinutes > 5)
        #expect(try metrics(report, "equal-split").sustainedStarvationTenantMinutes > 5)
    }

    /// One tenant hammers (retries at once, ignores retry-after, under-declares its tokens) beside four
    /// honest ones: `allot` keeps served ÷ entitled even across the standard tier (Jain 0.998 at seed 1,
    /// judged against the demand that arrived), where fixed quotas leave the pool a third idle and the
    /// shared FIFO bucket lets the hammering tenant take the honest tenants' deadlines (20.8% SLO).
    @Test func gamingAllotKeepsTheHonestTenantsShares() async throws {
        let report = try await report("gaming")
        #expect(report.headlineWinner == "allot")
        let allot = try metrics(report, "allot")
        let jain = try #require(allot.tiers["standard"]?.jain)
        let slo = try #require(allot.tiers["standard"]?.sloAttainment)
        for baseline in ["static", "fifo-backoff", "equal-split"] {
            let other = try metrics(report, baseline)
            #expect(jain >= (other.tiers["standard"]?.jain ?? 1) + 0.02, "\(baseline)")
            #expect(slo >= (other.tiers["standard"]?.sloAttainment ?? 1) + 0.2, "\(baseline)")
        }
        #expect(allot.sustainedStarvationTenantMinutes == 0)
        #expect(try metrics(report, "static").sustainedStarvationTenantMinutes > 10)
    }

    /// A premium newcomer starts at minute 10 on a pool two incumbents fill: `allot` gives it an allocation
    /// within seconds of its first request and meets every premium deadline, as a quota provisioned for it
    /// does — but static leaves the capacity nobody uses idle for the first ten minutes (the incumbents
    /// starve for 53 tenant-minutes), and the shared FIFO bucket puts it behind the incumbents' backlog
    /// (70.5% premium SLO).
    @Test func coldStartAllotServesNewTenantsAtOnce() async throws {
        let report = try await report("cold-start")
        #expect(report.headlineBest == ["allot", "static", "equal-split"])
        let allot = try metrics(report, "allot")
        #expect(allot.tiers["premium"]?.sloAttainment == 1)
        #expect((allot.timeToFirstAllocation ?? .infinity) < 10)
        #expect((allot.utilisation ?? 0) >= 0.95)
        #expect(allot.sustainedStarvationTenantMinutes == 0)
        #expect(try #require(try metrics(report, "fifo-backoff").tiers["premium"]?.sloAttainment) < 0.9)
        #expect(try metrics(report, "static").sustainedStarvationTenantMinutes > 30)
    }
}
