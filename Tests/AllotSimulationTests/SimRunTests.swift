import AllotCore
import AllotEnforcement
import AllotJSON
import Testing

@testable import AllotSimulation

@Suite struct SimRunTests {
    /// Two minutes, one pool of 600 rpm, two tenants wanting about 36 calls per minute in all.
    static func small() throws -> Scenario {
        try decode(scenarioJSON(duration: 120))
    }

    @Test func baselinesAreDeterministicForASeed() async throws {
        let scenario = try Self.small()
        for strategy in [SimulationStrategy.static, .fifoBackoff, .equalSplit] {
            let first = try await Simulator.run(scenario, strategy: strategy, seed: 7)
            let second = try await Simulator.run(scenario, strategy: strategy, seed: 7)
            #expect(first == second, "\(strategy)")
            let other = try await Simulator.run(scenario, strategy: strategy, seed: 8)
            #expect(first.tasks != other.tasks, "a different seed draws different tasks")
        }
    }

    /// The real loop, too (issue 8: "same seed, identical report.json"): its growth held for
    /// make-before-break used to reach the gateways one tick later or not depending on scheduling,
    /// which showed within the first few simulated minutes of `silent-starvation`.
    @Test func allotIsDeterministicForASeed() async throws {
        var scenario = try Scenario.builtin(named: "silent-starvation")
        scenario.durationSeconds = 300
        var reports: [(json: String, timeline: String)] = []
        var first: SimulationTrace?
        for _ in 0..<3 {
            let trace = try await Simulator.run(scenario, strategy: .allot, seed: 1)
            if let first { #expect(trace == first) } else { first = trace }
            let report = SimulationReport(scenario: scenario, seed: 1, traces: [trace])
            reports.append((report.json(), report.timelineCSV()))
        }
        for report in reports.dropFirst() {
            #expect(report.json == reports[0].json)
            #expect(report.timeline == reports[0].timeline)
        }
    }

    /// A tenant whose prompts double at one minute (`task_changes`): its tasks arriving from then make the new
    /// calls and have the new deadline, the nominal and arrived demand follow the shape in force, and the allot loop
    /// runs it (the same code path as the baselines' for the world).
    @Test func aTaskShapeChangeReachesTheCallsAndTheDemand() async throws {
        let text = scenarioJSON(duration: 120).replacingOccurrences(
            of: #""deadline_s": 60}}"#,
            with: #""deadline_s": 60}, "task_changes": [{"at_s": 60, "prompt_tokens": {"mean": 1000}, "#
                + #""deadline_s": 30}]}"#)
        let scenario = try decode(text)
        let tenant = scenario.tenants[0]
        let before = tenant.task.meanTokensPerCall
        let after = tenant.task(at: 60).meanTokensPerCall
        #expect(after == 1000 + tenant.task.completionTokens.expected)
        for strategy in [SimulationStrategy.static, .allot] {
            let trace = try await Simulator.run(scenario, strategy: strategy, seed: 1)
            // Nominal demand: 6 tasks a minute × 3 calls, at the shape's mean tokens.
            #expect(trace.samples[5].tenants[0].demandTPM == 18 * before)
            #expect(trace.samples[6].tenants[0].demandTPM == 18 * after)
            // Arrived demand: the calls the arrived tasks bring, at their own shape's tokens.
            for sample in trace.samples {
                let row = sample.tenants[0]
                guard row.arrivedRPM > 0 else { continue }
                let perCall = row.arrivedTPM / row.arrivedRPM
                #expect(abs(perCall - (sample.start < 60 ? before : after)) < 1e-6, "\(strategy) \(sample.start)")
            }
            // Deadlines: 60 s for the tasks that arrived before the change, 30 s after.
            let tasks = trace.tasks.filter { $0.tenant == 0 }
            #expect(tasks.contains { $0.arrival >= 60 })
            #expect(tasks.allSatisfy { abs($0.deadline - $0.arrival - ($0.arrival < 60 ? 60 : 30)) < 1e-9 })
            // Served tokens per call: about 600 before, about 1,100 after (the calls of tasks arriving after 70 s).
            let early = trace.samples[1..<5].map { $0.tenants[0] }
            let late = trace.samples[8..<12].map { $0.tenants[0] }
            let earlyPerCall = early.reduce(0) { $0 + $1.servedTPM } / early.reduce(0) { $0 + $1.servedRPM }
            let latePerCall = late.reduce(0) { $0 + $1.servedTPM } / late.reduce(0) { $0 + $1.servedRPM }
            #expect(earlyPerCall > 500 && earlyPerCall < 700, "\(strategy) \(earlyPerCall)")
            #expect(latePerCall > 950 && latePerCall < 1250, "\(strategy) \(latePerCall)")
        }
    }

    @Test func traceCoversTheRunInSamples() async throws {
        let trace = try await Simulator.run(try Self.small(), strategy: .static, seed: 1)
        #expect(trace.samples.count == 12)
        #expect(trace.samples.map(\.start) == stride(from: 0.0, to: 120, by: 10).map { $0 })
        #expect(trace.tenants.map(\.id) == ["acme-01", "acme-02"])
        #expect(trace.tenants.allSatisfy { $0.weight == 4 && $0.tier == "premium" })
        // Demand is the nominal offered load: 6 tasks/min × 3 calls on average, per tenant.
        #expect(trace.samples[0].tenants[0].demandRPM == 18)
        #expect(trace.samples[0].pools[0].trueRPM == 600)
        #expect(!trace.tasks.isEmpty)
    }

    /// A tenant has no allocation until it first has one, so its entry is not counted as a move (total variation
    /// measures oscillation; `static`, provisioned from the start, never paid for an entry): equal-split gives a
    /// tenant arriving at one minute half of a 600-rpm pool, and only the first tenant's 600 → 300 counts.
    @Test func aTenantsFirstAllocationIsNotAMove() async throws {
        let tenant = { (id: String, arrivals: String) in
            """
            {"id": "\(id)", "tier": "premium", "pool": "openai/gpt-4o", "arrivals": \(arrivals),
             "task": {"class": "interactive", "calls": {"min": 2, "max": 4}, "parallelism": 2,
                      "prompt_tokens": {"mean": 500, "sd": 100}, "completion_tokens": {"mean": 100, "sd": 20},
                      "deadline_s": 60}}
            """
        }
        let scenario = try decode(
            scenarioJSON(
                tenants: "[" + tenant("early", #"[{"at_s": 0, "tasks_per_min": 6}]"#) + ","
                    + tenant("late", #"[{"at_s": 0, "tasks_per_min": 0}, {"at_s": 60, "tasks_per_min": 6}]"#) + "]"))
        let trace = try await Simulator.run(scenario, strategy: .equalSplit, seed: 1)
        let late = trace.samples.map { $0.tenants[1].allocationRPM }
        // None before its first task (at one minute or a little later: Poisson), half the pool from then on.
        let entry = try #require(late.firstIndex { $0 != nil })
        #expect(entry >= 6 && entry <= 9, "\(late)")
        #expect(late[entry...].allSatisfy { $0 == 300 }, "\(late)")
        #expect(trace.samples.last?.tenants[0].allocationRPM == 300)
        // 300 of 600 rpm and 500,000 of 1,000,000 tpm moved once in two minutes: 25 %/min (50 with the entry).
        #expect(RunMetrics(trace: trace).totalVariation == 25)
    }

    /// A call is served when the upstream accepts it, the instant it spends the capacity: counted when its answer
    /// came back, the calls in flight across a drop were served "after" it, far above the new capacity.
    @Test func aCallIsServedWhenTheUpstreamAcceptsItNotWhenItsAnswerComesBack() async throws {
        let pools = """
            [{"id": "openai/gpt-4o", "provider": "openai", "declared_rpm": 600, "declared_tpm": 1000000,
              "capacity": [{"at_s": 0, "rpm": 600, "tpm": 1000000}, {"at_s": 60, "rpm": 1, "tpm": 1000000}],
              "latency": {"base_ms": 5000, "per_1k_output_tokens_ms": 0, "knee": 0.8, "max_factor": 1}}]
            """
        let tenants = """
            [{"id": "acme", "count": 2, "tier": "premium", "pool": "openai/gpt-4o",
              "arrivals": [{"at_s": 0, "tasks_per_min": 60}],
              "task": {"class": "interactive", "calls": {"min": 2, "max": 4}, "parallelism": 2,
                       "prompt_tokens": {"mean": 500, "sd": 100}, "completion_tokens": {"mean": 100, "sd": 20},
                       "deadline_s": 60}}]
            """
        let trace = try await Simulator.run(
            try decode(scenarioJSON(tenants: tenants, pools: pools)), strategy: .static, seed: 1)
        // About 280 calls a minute, each answered 5 s later: some 20 in flight when the pool drops to 1 rpm.
        let before = try #require(trace.samples.first { $0.start == 50 })
        #expect(before.pools[0].servedRPM > 200)
        // After it, only what the provider's bucket (10 s of 1 rpm, at most one call as it refills) accepts.
        for sample in trace.samples where sample.start >= 60 {
            #expect(sample.pools[0].servedRPM <= 6, "\(sample.start)")
            #expect(sample.tenants.reduce(0) { $0 + $1.servedRPM } == sample.pools[0].servedRPM)
        }
    }

    /// A provider that states no limit (every answer without headers) and really gives 600 rpm where the policy
    /// declares 300. Ten minutes of demand at 1.3 times the truth: `allot` probes above the declared capacity while
    /// its gateways turn calls away, and only refusals bound it; `static` provisions the declared 300 for good.
    @Test func aBlindPoolDeclaredAtHalfItsCapacityIsFoundFromTheDemandItTurnsAway() async throws {
        let pools = """
            [{"id": "google/gemini", "provider": "openai", "declared_rpm": 300, "declared_tpm": 1000000,
              "capacity": [{"at_s": 0, "rpm": 600, "tpm": 2000000}], "noise": {"header_missing": 1}}]
            """
        let tenants = """
            [{"id": "acme", "count": 2, "tier": "standard", "pool": "google/gemini",
              "arrivals": [{"at_s": 0, "tasks_per_min": 26}],
              "task": {"class": "batch", "calls": {"min": 10, "max": 20}, "parallelism": 4,
                       "prompt_tokens": {"mean": 500, "sd": 100}, "completion_tokens": {"mean": 100, "sd": 20},
                       "deadline_s": 600}}]
            """
        let scenario = try decode(scenarioJSON(duration: 600, tenants: tenants, pools: pools))
        let allot = RunMetrics(trace: try await Simulator.run(scenario, strategy: .allot, seed: 1))
        let fixed = RunMetrics(trace: try await Simulator.run(scenario, strategy: .static, seed: 1))
        // Static serves the declared half of the truth.
        #expect(try #require(fixed.utilisation) < 0.51)
        // Allot starts there too and climbs, as fast as its tenants' allocations follow (0.70 at seed 1; 0.49 when
        // the declared capacity was a ceiling), with few refusals.
        #expect(try #require(allot.utilisation) > 0.65)
        #expect(allot.upstream429Rate < 0.01)
    }

    @Test func theFleetStartsFromTheUpstreamsCapacityWhateverItsSize() {
        // Three gateways keep the library's default; any number of them together start from 102 % of an upstream's
        // capacity where none holds a slice yet (eight at the default 0.34 each started from 2.7 times it).
        #expect(SimulationRun.newcomerCapShare(gateways: 3) == GatewayConfiguration(gatewayID: "g").newcomerCapShare)
        for gateways in [1, 2, 8, 16, 32] {
            #expect(abs(SimulationRun.newcomerCapShare(gateways: gateways) * Double(gateways) - 1.02) < 1e-12)
        }
    }

    /// `fifo-backoff` is one global bucket and one FIFO queue, whatever the number of gateways: two 6,000-token calls
    /// a task, in parallel, on a 60k-TPM pool (a 10,000-token provider bucket) are held apart by the one bucket
    /// (10 s of the declared tpm), behind three gateways as behind one. Split into three buckets of a third each
    /// behind three gateways, as before 2026-11-29, the calls of one task went through different gateways and the
    /// second met a 429 (34 % of the attempts, outside evaluation round 25).
    @Test func fifoBackoffIsOneGlobalBucketWhateverTheGateways() async throws {
        let pools = """
            [{"id": "p", "provider": "openai", "declared_rpm": 120, "declared_tpm": 60000,
              "capacity": [{"at_s": 0, "rpm": 120, "tpm": 60000}]}]
            """
        let tenants = """
            [{"id": "t", "tier": "standard", "pool": "p", "arrivals": [{"at_s": 0, "tasks_per_min": 2}],
              "task": {"class": "interactive", "calls": {"min": 2, "max": 2}, "parallelism": 2,
                       "prompt_tokens": {"mean": 5500}, "completion_tokens": {"mean": 500}, "deadline_s": 120}}]
            """
        var scenario = try decode(scenarioJSON(duration: 300, tenants: tenants, pools: pools))
        var counts: [Int: (attempts: Int, refused: Int)] = [:]
        for gateways in [1, 3] {
            scenario.gateways = gateways
            let metrics = RunMetrics(trace: try await Simulator.run(scenario, strategy: .fifoBackoff, seed: 1))
            counts[gateways] = (metrics.upstreamAttempts, metrics.upstream429s)
        }
        #expect(counts[1]?.attempts == counts[3]?.attempts && counts[1]?.refused == counts[3]?.refused)
        let (attempts, refused) = try #require(counts[3])
        #expect(attempts > 10 && refused * 10 < attempts)
    }

    @Test func allotServesEveryTaskWhenDemandIsBelowCapacity() async throws {
        let trace = try await Simulator.run(try Self.small(), strategy: .allot, seed: 1)
        let metrics = RunMetrics(trace: trace)
        #expect(metrics.upstream429s == 0)
        // Tenants start at their tier's idle allocation until the first ticks have seen their demand; the
        // gateways lend them the allocation nobody uses meanwhile, so nobody starves in the first minute.
        #expect(metrics.starvationTenantMinutes == 0)
        #expect(metrics.utilisation == nil)  // demand never exceeded capacity
        let judged = trace.tasks.filter { $0.deadline <= trace.durationSeconds }
        #expect(!judged.isEmpty)
        let allMet = judged.allSatisfy { $0.metSLO }
        #expect(allMet)
        // The loop's estimate is read from the provider's headers: the true 600 rpm.
        #expect(trace.samples.last?.pools[0].estimatedRPM == 600)
        // Allocations come from the snapshots the gateways enforce.
        #expect(trace.samples.last?.tenants[0].allocationRPM.map { $0 > 0 } == true)
        #expect(trace.tenants.allSatisfy { $0.firstRequestAt != nil })
    }

    /// One tenant given 300 of the 400 rpm it wants (static quota), ten minutes: its gateways finish the tasks
    /// they have started before they start new ones (the calls carry their task's first admission and
    /// deadline), so about three tasks in four make their deadline. Serving every call alike (no task context)
    /// made a quarter of them.
    @Test func aTenantOverItsQuotaFinishesMostOfItsTasksOnTime() async throws {
        let tenants = """
            [{"id": "acme", "tier": "premium", "pool": "openai/gpt-4o", "arrivals": [{"at_s": 0, "tasks_per_min": 40}],
              "task": {"class": "interactive", "calls": {"min": 8, "max": 12}, "parallelism": 3,
                       "prompt_tokens": {"mean": 500, "sd": 100}, "completion_tokens": {"mean": 100, "sd": 20},
                       "deadline_s": 60, "think_ms": 200}}]
            """
        let pools = """
            [{"id": "openai/gpt-4o", "provider": "openai", "declared_rpm": 300, "declared_tpm": 1000000,
              "capacity": [{"at_s": 0, "rpm": 300, "tpm": 1000000}]}]
            """
        let scenario = try decode(scenarioJSON(duration: 600, tenants: tenants, pools: pools))
        let trace = try await Simulator.run(scenario, strategy: .static, seed: 1)
        let metrics = RunMetrics(trace: trace)
        #expect((metrics.utilisation ?? 0) >= 0.95)
        let attainment = try #require(metrics.tiers["premium"]?.sloAttainment)
        #expect(attainment >= 0.65, "\(attainment)")
    }

    /// The trace carries each tenant's ceiling as its terms give it: a share of the pool stays a share (resolved by
    /// the metrics against each interval's true capacity), an absolute one a rate, none nil (outside evaluation
    /// round 33: resolved against the declared capacity, a cut pool's free tenants were "starved" by policy).
    @Test func ceilingsReachTheTraceAsSharesOrRates() async throws {
        let tenants = """
            [{"id": "hobby", "tier": "free", "pool": "openai/gpt-4o",
              "arrivals": [{"at_s": 0, "tasks_per_min": 2}],
              "task": {"class": "interactive", "calls": {"min": 1, "max": 1}, "parallelism": 1,
                       "prompt_tokens": {"mean": 100}, "completion_tokens": {"mean": 10}, "deadline_s": 60}},
             {"id": "team", "tier": "standard", "pool": "openai/gpt-4o",
              "arrivals": [{"at_s": 0, "tasks_per_min": 2}],
              "task": {"class": "interactive", "calls": {"min": 1, "max": 1}, "parallelism": 1,
                       "prompt_tokens": {"mean": 100}, "completion_tokens": {"mean": 10}, "deadline_s": 60}}]
            """
        let scenario = try decode(scenarioJSON(duration: 60, tenants: tenants))
        var policy = try SimulationPolicy.defaultPolicy()
        policy.setTenant(
            TenantPolicy(id: "team", tier: "standard", ceiling: PerDimension(rpm: .absolute(40), tpm: nil)))
        let trace = try await Simulator.run(scenario, strategy: .static, seed: 1, policy: policy)
        let hobby = try #require(trace.tenants.first { $0.id == "hobby" })
        #expect(hobby.ceilingShareRPM == 0.2 && hobby.ceilingShareTPM == 0.2)
        #expect(hobby.ceilingRPM == nil && hobby.ceilingTPM == nil)
        let team = try #require(trace.tenants.first { $0.id == "team" })
        #expect(team.ceilingRPM == 40 && team.ceilingShareRPM == nil)
        #expect(team.ceilingTPM == nil && team.ceilingShareTPM == nil)
    }

    /// A tenant whose realtime tasks make 25 calls, past a realtime budget of 20 (the default policy's, with its
    /// realtime task budget lowered to 20 calls), behind one gateway (a gateway counts the calls of a task it has
    /// seen, and calls go round-robin), under `allot`.
    static func overBudget(behaviour: String, tasksPerMinute: Double, duration: Int) async throws -> SimulationTrace {
        let tenants = """
            [{"id": "voice", "tier": "premium", "pool": "openai/gpt-4o", "behaviour": "\(behaviour)",
              "arrivals": [{"at_s": 0, "tasks_per_min": \(tasksPerMinute)}],
              "task": {"class": "realtime", "calls": {"min": 25, "max": 25}, "parallelism": 1,
                       "prompt_tokens": {"mean": 200}, "completion_tokens": {"mean": 20}, "deadline_s": 600}}]
            """
        let scenario = try decode(scenarioJSON(duration: duration, tenants: tenants, extra: #", "gateways": 1"#))
        var policy = try SimulationPolicy.defaultPolicy()
        policy.taskBudgets[.realtime] = TaskBudgetPolicy(maxCalls: 20, maxTokens: 200_000)
        return try await Simulator.run(scenario, strategy: .allot, seed: 1, policy: policy)
    }

    /// A denial without a retry-after is final: a task over its class's task budget (here 20 calls for
    /// realtime) is given up at its first such denial. Retrying it every second, as the
    /// simulated clients did, stormed the gateways with denials until twice the task's deadline.
    @Test func aTaskOverItsTaskBudgetIsGivenUpNotRetried() async throws {
        let trace = try await Self.overBudget(behaviour: "honest", tasksPerMinute: 6, duration: 300)
        let overBudget = trace.tasks.filter { $0.finished == nil }
        #expect(!overBudget.isEmpty)
        #expect(trace.tasks.allSatisfy { $0.finished == nil }, "no task of 25 calls finishes under a 20-call budget")
        let denials = trace.samples.reduce(0) { $0 + $1.tenants[0].denials }
        // One denial per task that reached its 21st call, none retried (and a few rate denials while the tenant
        // was new); retried every second, each task's would have run to hundreds.
        #expect(denials <= trace.tasks.count + 5, "\(denials) denials for \(trace.tasks.count) tasks")
        #expect(denials > 0)
    }

    /// A gaming tenant hammers on a final denial every 0.2 s: past 1,000 attempts of one call its telemetry
    /// carries the attempt number clamped, as a gateway's reporter clamps it. Unclamped, the ingest refused
    /// the batch (`400 invalid_event: field 'retry'`) and ended the run.
    @Test func aCallRetriedMoreThanAThousandTimesIsReportedClamped() async throws {
        let trace = try await Self.overBudget(behaviour: "gaming", tasksPerMinute: 1, duration: 480)
        let denials = trace.samples.reduce(0) { $0 + $1.tenants[0].denials }
        #expect(denials > 1_500, "\(denials)")
    }

    /// More telemetry between two ticks than one ingest batch holds (10,000 events: a hammering tenant, a
    /// one-minute tick) is posted in several batches, as a gateway's reporter does; one batch was refused
    /// with `413 too_many_events` and ended the run.
    @Test func aBusyTickPostsItsTelemetryInSeveralBatches() async throws {
        let tenants = """
            [{"id": "hammer", "tier": "standard", "pool": "openai/gpt-4o", "behaviour": "gaming",
              "arrivals": [{"at_s": 0, "tasks_per_min": 120}],
              "task": {"class": "interactive", "calls": {"min": 10, "max": 10}, "parallelism": 8,
                       "prompt_tokens": {"mean": 200}, "completion_tokens": {"mean": 20}, "deadline_s": 600}}]
            """
        let pools = """
            [{"id": "openai/gpt-4o", "provider": "openai", "declared_rpm": 60, "declared_tpm": 1000000,
              "capacity": [{"at_s": 0, "rpm": 60, "tpm": 1000000}]}]
            """
        let scenario = try decode(
            scenarioJSON(duration: 90, tenants: tenants, pools: pools, extra: #", "policy": {"tick_interval_s": 60}"#))
        let trace = try await Simulator.run(scenario, strategy: .allot, seed: 1)
        let denials = trace.samples.prefix(6).reduce(0) { $0 + $1.tenants[0].denials }
        #expect(denials > 10_000, "the first tick's telemetry holds more than one batch (\(denials) denials)")
        #expect(trace.samples.last?.tenants[0].allocationRPM.map { $0 > 0 } == true)
    }

    /// timeline.svg: every pool charted for every strategy on one scale, a tenant in one colour in every panel,
    /// and no legend entry for a line a panel does not draw (fifo-backoff has no estimate, no allocations).
    @Test func theChartShowsEveryPoolAndKeepsEachTenantsColour() async throws {
        let pools = """
            [{"id": "pool-a", "provider": "openai", "declared_rpm": 120, "declared_tpm": 1000000,
              "capacity": [{"at_s": 0, "rpm": 120, "tpm": 1000000}]},
             {"id": "pool-b", "provider": "anthropic", "declared_rpm": 60, "declared_tpm": 1000000,
              "capacity": [{"at_s": 0, "rpm": 60, "tpm": 1000000}]}]
            """
        func tenant(_ id: String, _ pool: String, _ rate: Double) -> String {
            """
            {"id": "\(id)", "tier": "standard", "pool": "\(pool)", "arrivals": [{"at_s": 0, "tasks_per_min": \(rate)}],
             "task": {"class": "interactive", "calls": {"min": 2, "max": 2}, "parallelism": 1,
                      "prompt_tokens": {"mean": 200}, "completion_tokens": {"mean": 20}, "deadline_s": 60}}
            """
        }
        // On pool-a, eight tenants: the six whose arrivals are largest are drawn, the other two summed.
        let rates = [0.2, 0.3, 4, 8, 16, 32, 64, 128]
        let tenants =
            rates.enumerated().map { tenant("a\($0.offset + 1)", "pool-a", $0.element) }
            + [tenant("b1", "pool-b", 10), tenant("b2", "pool-b", 40)]
        let scenario = try decode(
            scenarioJSON(duration: 120, tenants: "[" + tenants.joined(separator: ",") + "]", pools: pools))
        let report = SimulationReport(
            scenario: scenario, seed: 1,
            traces: [
                try await Simulator.run(scenario, strategy: .allot, seed: 1),
                try await Simulator.run(scenario, strategy: .fifoBackoff, seed: 1),
            ])
        let svg = report.timelineSVG()
        func count(_ text: String) -> Int { svg.components(separatedBy: text).count - 1 }
        #expect(count("allot — pool-a, ") == 1 && count("fifo-backoff — pool-a, ") == 1)
        #expect(count("allot — pool-b, ") == 1 && count("fifo-backoff — pool-b, ") == 1)
        #expect(svg.contains("height=\"\(Int(40 + 4 * 260 + 10))\""))
        #expect(count("Allot's estimate (dashed)") == 2)  // allot's two panels only
        #expect(count("dashed: tenant allocation") == 2)
        #expect(count(">2 others (sum)<") == 2)  // pool-a's panels
        #expect(!svg.contains(">a1 (standard)<") && !svg.contains(">a2 (standard)<"))
        // Each legend entry: <rect … fill="COLOUR"/><text …>ID (tier)</text>. The same tenant, the same colour.
        var colours: [String: Set<String>] = [:]
        for line in svg.split(separator: "\n") where line.contains("(standard)</text>") {
            let fill = line.components(separatedBy: "fill=\"")[1].prefix(7)
            let name = line.components(separatedBy: "\">").last!.components(separatedBy: " (")[0]
            colours[name, default: []].insert(String(fill))
        }
        #expect(Set(colours.keys) == ["a3", "a4", "a5", "a6", "a7", "a8", "b1", "b2"])
        #expect(colours.values.allSatisfy { $0.count == 1 })
        #expect(colours["a8"] == ["#1f77b4"] && colours["b2"] == ["#1f77b4"])  // the largest arrivals first
        #expect(!colours.values.contains(["#d62728"]))  // red is the estimate's
        // Two minutes: the time axis every 15 s on whole steps. The values on round grid lines: pool-a's (120 rpm,
        // served in bursts above 200) 100 apart, pool-b's (60 rpm) 25 apart.
        #expect(count(">1m45s</text>") == 4 && count(">2m</text>") == 4 && !svg.contains(">20s</text>"))
        let labels = svg.split(separator: "\n").filter { $0.contains("dy=\"4\"") }.map {
            $0.components(separatedBy: "\">").last!.replacingOccurrences(of: "</text>", with: "")
        }
        let a = ["0", "100", "200", "300"]
        let b = ["0", "25", "50", "75", "100"]
        #expect(labels == a + a + b + b)
    }

    @Test func chartAxesStepOnRoundValues() {
        #expect(SimulationReport.niceStep(1_900) == 500)
        #expect(SimulationReport.niceStep(2_100) == 1_000)
        #expect(SimulationReport.niceStep(4_200_000) == 2_000_000)
        #expect(SimulationReport.niceStep(130) == 50)
        #expect(SimulationReport.niceStep(9) == 2.5)
        #expect(SimulationReport.niceStep(0) == 1)
        #expect(SimulationReport.timeStep(120) == 15)
        #expect(SimulationReport.timeStep(1_800) == 300)
        #expect(SimulationReport.timeStep(2_400) == 300)
        #expect(SimulationReport.timeStep(3_600) == 600)
        #expect(SimulationReport.timeStep(86_400) == 10_800)
    }

    /// A capacity step that repeats the step before it changes nothing: it is not a capacity change, so
    /// there is no convergence to measure ("-"), as for a pool without a change. Counted as one, convergence
    /// was measured on a pool that never moved.
    @Test func aCapacityStepThatChangesNothingIsNotACapacityChange() async throws {
        func run(_ capacity: String) async throws -> SimulationTrace {
            let pools = """
                [{"id": "openai/gpt-4o", "provider": "openai", "declared_rpm": 600, "declared_tpm": 1000000,
                  "capacity": \(capacity)}]
                """
            return try await Simulator.run(try decode(scenarioJSON(pools: pools)), strategy: .static, seed: 1)
        }
        let repeated = try await run(
            #"[{"at_s": 0, "rpm": 600, "tpm": 1000000}, {"at_s": 60, "rpm": 600, "tpm": 1000000}]"#)
        #expect(repeated.capacityChangeTimes == [])
        let metrics = RunMetrics(trace: repeated)
        #expect(!metrics.hasCapacityChange)
        #expect(metrics.convergenceSeconds == nil)
        let report = SimulationReport(scenario: try Self.small(), seed: 1, traces: [repeated])
        let row = try #require(report.table().split(separator: "\n").first { $0.hasPrefix("static ") })
        #expect(row.split(separator: " ")[6] == "-")  // the "converge s" column
        // A step that changes either dimension is a change.
        let moved = try await run(
            #"[{"at_s": 0, "rpm": 600, "tpm": 1000000}, {"at_s": 30, "rpm": 600, "tpm": 1000000}, "#
                + #"{"at_s": 60, "rpm": 600, "tpm": 900000}, {"at_s": 90, "rpm": 600, "tpm": 900000}]"#)
        #expect(moved.capacityChangeTimes == [60])
    }

    /// A tenant's `static_quota` is what `static` provisioned for it, whatever its tier's weight; the others keep
    /// the weight rule over every tenant of the pool (`declared × weight / Σweights`), and the other strategies
    /// ignore the field.
    @Test func staticProvisionsATenantsStaticQuota() async throws {
        let tenants = """
            [{"id": "stale", "tier": "premium", "pool": "openai/gpt-4o", "static_quota": {"rpm": 60, "tpm": 90000},
              "arrivals": [{"at_s": 0, "tasks_per_min": 40}],
              "task": {"class": "batch", "calls": {"min": 2, "max": 4}, "parallelism": 2,
                       "prompt_tokens": {"mean": 500}, "completion_tokens": {"mean": 100}, "deadline_s": 60}},
             {"id": "fresh", "tier": "premium", "pool": "openai/gpt-4o", "arrivals": [{"at_s": 0, "tasks_per_min": 6}],
              "task": {"class": "batch", "calls": {"min": 2, "max": 4}, "parallelism": 2,
                       "prompt_tokens": {"mean": 500}, "completion_tokens": {"mean": 100}, "deadline_s": 60}}]
            """
        let scenario = try decode(scenarioJSON(duration: 300, tenants: tenants))
        let trace = try await Simulator.run(scenario, strategy: .static, seed: 1)
        for sample in trace.samples {
            #expect(sample.tenants[0].allocationRPM == 60 && sample.tenants[0].allocationTPM == 90_000)
            // 600 rpm × 4 / (4 + 4): the stale tenant's weight still counts in the sum.
            #expect(sample.tenants[1].allocationRPM == 300 && sample.tenants[1].allocationTPM == 500_000)
        }
        // It wants 120 calls a minute and is served its quota: 60 a minute over every 30 s after the first 10 s, in
        // which the gateways' buckets start full (10 s of quota, 10 calls, on top of the 10 s of refill: at most 120).
        let served = trace.samples.map { $0.tenants[0].servedRPM }
        #expect(served[0] > 60 && served[0] <= 120, "\(served[0])")
        for k in 1..<(served.count - 2) { #expect(served[k..<(k + 3)].reduce(0, +) / 3 == 60, "\(k)") }
        let split = try await Simulator.run(scenario, strategy: .equalSplit, seed: 1)
        #expect(split.samples.last?.tenants.map(\.allocationRPM) == [300, 300])
    }

    /// report.json keeps `null` for a metric that was "never" reached and for one that does not apply; each
    /// strategy's `never` lists the first kind, as the table prints them ("never" against "-").
    @Test func reportJSONListsTheMetricsThatWereNeverReached() throws {
        var never = SeedMeansTests.run(
            utilisation: nil, rate: 0, starved: 0, tv: nil, convergence: nil, slo: 0.5, p95: nil, jain: 1, tasks: 10)
        never.tiers["free"] = TierMetrics(
            sloAttainment: nil, latencyP50: nil, latencyP95: nil, latencyP99: nil, jain: nil, tasks: 0)
        var none = SeedMeansTests.run(
            utilisation: 0.9, rate: 0, starved: 0, tv: 1, convergence: nil, slo: 1, p95: 3, jain: 1, tasks: 10)
        none.strategy = "static"
        none.hasCapacityChange = false
        none.tiers["free"] = never.tiers["free"]
        let report = SimulationReport(scenario: try Self.small(), seeds: [1], perSeed: [[never, none]])
        let json = try JSON.parse(report.json())
        #expect(
            json["strategies"]?["allot"]?["never"]
                == .array([
                    .string("convergence_s"), .string("tiers.premium.task_latency_p95_s"),
                    .string("tiers.premium.task_latency_p99_s"),
                ]))
        #expect(json["strategies"]?["allot"]?["convergence_s"] == .null)
        #expect(json["strategies"]?["allot"]?["tiers"]?["free"]?["task_latency_p95_s"] == .null)
        #expect(json["strategies"]?["static"]?["never"] == .array([]))
        #expect(json["strategies"]?["static"]?["convergence_s"] == .null)
        #expect(json["per_seed"]?[0]?["strategies"]?["allot"]?["never"] == json["strategies"]?["allot"]?["never"])
        let table = report.table().split(separator: "\n")
        #expect(table.contains { $0.hasPrefix("allot ") && $0.contains(" never ") })
        #expect(!table.contains { $0.hasPrefix("static ") && $0.contains("never") })
    }

    /// A pool refusing a third of the attempts as overloaded (503) for the whole run: each tenant's refusals are
    /// counted (they add up to the pool's, in the trace and in `timeline.csv`), so the starvation metric can
    /// count them as throttling.
    @Test func overloadRefusalsAreCountedPerTenant() async throws {
        let pools = """
            [{"id": "openai/gpt-4o", "provider": "openai", "declared_rpm": 600, "declared_tpm": 1000000,
              "capacity": [{"at_s": 0, "rpm": 600, "tpm": 1000000}],
              "overload": [{"from_s": 0, "to_s": 120, "rate": 0.33}]}]
            """
        let scenario = try decode(scenarioJSON(duration: 120, pools: pools))
        let trace = try await Simulator.run(scenario, strategy: .static, seed: 1)
        var total = 0
        for sample in trace.samples {
            let tenants = sample.tenants.map(\.upstreamOverloaded)
            #expect(tenants.reduce(0, +) == sample.pools[0].upstreamOverloaded)
            total += sample.pools[0].upstreamOverloaded
        }
        #expect(total > 0)
        let lines = SimulationReport(scenario: scenario, seed: 1, traces: [trace]).timelineCSV().split(separator: "\n")
        let column = try #require(lines[0].split(separator: ",").firstIndex(of: "upstream_overloaded"))
        let counted = lines.dropFirst().filter { $0.contains(",tenant,") }.compactMap {
            Int($0.split(separator: ",", omittingEmptySubsequences: false)[column])
        }
        #expect(counted.reduce(0, +) == total)
    }

    /// The per-tenant quota baselines hold a tenant to its tier's `max_concurrency` at each gateway, as `allot`'s
    /// gateways do; `fifo-backoff`, which knows no tenant, does not. One free tenant (8 in flight) alone on a roomy
    /// pool whose answers take 10 s wants about 300 calls a minute, and can have at most 8 × 60 ÷ 10 = 48 at a time.
    @Test func perTenantBaselinesEnforceTheTiersConcurrencyCap() async throws {
        let pools = """
            [{"id": "p", "provider": "openai", "declared_rpm": 6000, "declared_tpm": 10000000,
              "capacity": [{"at_s": 0, "rpm": 6000, "tpm": 10000000}],
              "latency": {"base_ms": 10000, "per_1k_output_tokens_ms": 0}}]
            """
        let tenants = """
            [{"id": "solo", "tier": "free", "pool": "p", "arrivals": [{"at_s": 0, "tasks_per_min": 30}],
              "task": {"class": "batch", "calls": {"min": 10, "max": 10}, "parallelism": 10,
                       "prompt_tokens": {"mean": 100, "sd": 10}, "completion_tokens": {"mean": 50, "sd": 5},
                       "deadline_s": 600}}]
            """
        let scenario = try decode(
            scenarioJSON(duration: 300, tenants: tenants, pools: pools, extra: #", "gateways": 1"#))
        func meanServed(_ strategy: SimulationStrategy) async throws -> Double {
            let trace = try await Simulator.run(scenario, strategy: strategy, seed: 1)
            let served = trace.samples.dropFirst(6).map { $0.tenants[0].servedRPM }
            return served.reduce(0, +) / Double(served.count)
        }
        // 48 at the base latency; the model's jitter lets a few answers come sooner.
        #expect(try await meanServed(.static) < 60)
        #expect(try await meanServed(.equalSplit) < 60)
        #expect(try await meanServed(.fifoBackoff) > 200)
    }

    /// Whether a tenant had a call held back (queued at a gateway, or waiting for a retry) in each interval: never
    /// on a roomy pool, nearly always on one asked for 4.5 times its capacity.
    @Test func callsHeldBackAreRecordedPerTenantAndInterval() async throws {
        let scenario = try Self.twoPools()
        let trace = try await Simulator.run(scenario, strategy: .static, seed: 1)
        let roomy = trace.tenants.indices.filter { trace.tenants[$0].pool == "roomy" }
        let tight = trace.tenants.indices.filter { trace.tenants[$0].pool == "tight" }
        #expect(!roomy.isEmpty && !tight.isEmpty)
        let samples = trace.samples.dropFirst(3)
        #expect(samples.allSatisfy { sample in roomy.allSatisfy { !sample.tenants[$0].heldBack } })
        let held = samples.filter { sample in tight.allSatisfy { sample.tenants[$0].heldBack } }.count
        #expect(held * 10 >= samples.count * 9, "\(held) of \(samples.count)")
        let csv = SimulationReport(scenario: scenario, seed: 1, traces: [trace]).timelineCSV().split(separator: "\n")
        let column = try #require(csv[0].split(separator: ",").firstIndex(of: "held_back"))
        let values = Set(csv.dropFirst().map { $0.split(separator: ",", omittingEmptySubsequences: false)[column] })
        #expect(values == ["", "0", "1"])
        // Calls that waited 5 s or more in a queue: none on the roomy pool, many on the tight one, and in the
        // timeline's last column (blank for pools).
        #expect(samples.allSatisfy { sample in roomy.allSatisfy { sample.tenants[$0].longQueueWaits == 0 } })
        let long = samples.reduce(0) { sum, sample in
            sum + tight.reduce(0) { $0 + sample.tenants[$1].longQueueWaits }
        }
        #expect(long > 0)
        let rows = csv.dropFirst().map { $0.split(separator: ",", omittingEmptySubsequences: false) }
        let total = trace.samples.reduce(0) { sum, sample in sum + sample.tenants.reduce(0) { $0 + $1.longQueueWaits } }
        #expect(rows.reduce(0) { $0 + (Int($1.last!) ?? 0) } == total)
        #expect(Set(rows.filter { $0[2] == "pool" }.map { $0.last! }) == [""])
    }

    @Test func reportHasTheSpecShape() async throws {
        let scenario = try Self.small()
        let traces = [
            try await Simulator.run(scenario, strategy: .static, seed: 1),
            try await Simulator.run(scenario, strategy: .equalSplit, seed: 1),
        ]
        let report = SimulationReport(scenario: scenario, seed: 1, traces: traces)
        let json = try JSON.parse(report.json())
        #expect(json["scenario"]?.stringValue == "tiny")
        #expect(json["seed"]?.intValue == 1)
        let strategy = try #require(json["strategies"]?["static"])
        for key in [
            "utilisation", "upstream_429_rate", "starvation_tenant_minutes", "sustained_starvation_tenant_minutes",
            "total_variation", "convergence_s",
        ] {
            #expect(strategy[key] != nil, "\(key)")
        }
        // Which tenants the starvation figure is made of: they add up to it (to report.json's 6 digits).
        let starved = try #require(strategy["starved_tenants"]?.objectValue)
        let total = try #require(strategy["starvation_tenant_minutes"]?.doubleValue)
        #expect(abs(starved.compactMap { $0.value.doubleValue }.reduce(0, +) - total) <= 1e-5 * max(1, total))
        let tier = try #require(strategy["tiers"]?["premium"])
        for key in ["slo_attainment", "task_latency_p50_s", "task_latency_p95_s", "task_latency_p99_s", "jain"] {
            #expect(tier[key] != nil, "\(key)")
        }
        #expect(json["headline"]?["metric"]?.stringValue == "utilisation")
        #expect(report.json() == SimulationReport(scenario: scenario, seed: 1, traces: traces).json())
        #expect(report.table().contains("equal-split"))
        let rows = report.timelineCSV().split(separator: "\n").count
        #expect(rows == 73)  // header + 2 strategies × 12 intervals × (1 pool + 2 tenants)
        let lines = report.timelineCSV().split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        let header = lines.first!.split(separator: ",", omittingEmptySubsequences: false).map(String.init)
        #expect(
            header.suffix(8) == [
                "arrived_rpm", "arrived_tpm", "entitled_rpm", "entitled_tpm", "pool", "upstream_overloaded",
                "held_back", "long_queue_waits",
            ])
        for line in lines {
            #expect(line.split(separator: ",", omittingEmptySubsequences: false).count == header.count)
        }
        // A tenant row carries the entitlement the metrics judge it against.
        let entitled = RunMetrics.entitlements(trace: traces[0])
        let firstTenant = lines.dropFirst().first { $0.contains(",tenant,") }!.split(
            separator: ",", omittingEmptySubsequences: false)
        #expect(firstTenant[header.firstIndex(of: "entitled_rpm")!] == SimulationReport.fixed(entitled.rpm[0][0], 4))
        // A pool row sums its tenants' arrived demand, and has no entitlement.
        let arrived = RunMetrics.arrivedDemand(trace: traces[0])
        let firstPool = lines.dropFirst().first { $0.contains(",pool,") }!.split(
            separator: ",", omittingEmptySubsequences: false)
        func column(_ name: String) -> Substring { firstPool[header.firstIndex(of: name)!] }
        #expect(column("arrived_rpm") == SimulationReport.fixed(arrived.rpm[0].reduce(0, +), 4))
        #expect(column("arrived_tpm") == SimulationReport.fixed(arrived.tpm[0].reduce(0, +), 4))
        #expect(column("entitled_rpm") == "")
        let svg = report.timelineSVG()
        #expect(svg.hasPrefix("<svg xmlns=\"http://www.w3.org/2000/svg\""))
        #expect(svg.contains("true capacity (hidden)"))
        #expect(report.markdownRows().split(separator: "\n").count == 2)
    }

    /// Two minutes, two pools: "roomy" (600 rpm) with `small()`'s two tenants (about 36 calls a minute in all), and
    /// "tight" (20 rpm) with three tenants wanting about 90 calls a minute in all.
    static func twoPools() throws -> Scenario {
        let pools = """
            [{"id": "roomy", "provider": "openai", "declared_rpm": 600, "declared_tpm": 1000000,
              "capacity": [{"at_s": 0, "rpm": 600, "tpm": 1000000}]},
             {"id": "tight", "provider": "anthropic", "declared_rpm": 20, "declared_tpm": 1000000,
              "capacity": [{"at_s": 0, "rpm": 20, "tpm": 1000000}]}]
            """
        let task = """
            "task": {"class": "interactive", "calls": {"min": 2, "max": 4}, "parallelism": 2,
                     "prompt_tokens": {"mean": 500}, "completion_tokens": {"mean": 100}, "deadline_s": 60}
            """
        let tenants = """
            [{"id": "acme", "count": 2, "tier": "premium", "pool": "roomy",
              "arrivals": [{"at_s": 0, "tasks_per_min": 6}], \(task)},
             {"id": "crowd", "count": 3, "tier": "standard", "pool": "tight",
              "arrivals": [{"at_s": 0, "tasks_per_min": 10}], \(task)}]
            """
        return try decode(scenarioJSON(duration: 120, tenants: tenants, pools: pools))
    }

    /// report.json's `pools`: per strategy and pool id, the pool's utilisation and 429s by the overall rules over
    /// that pool alone (`null`: never contended), in single-seed reports, `per_seed` and the means alike.
    @Test func reportJSONHasEachPoolsUtilisationAndUpstream429s() async throws {
        let scenario = try Self.twoPools()
        var traces: [SimulationTrace] = []
        for strategy in [SimulationStrategy.static, .fifoBackoff] {
            traces.append(try await Simulator.run(scenario, strategy: strategy, seed: 1))
        }
        let json = try JSON.parse(SimulationReport(scenario: scenario, seed: 1, traces: traces).json())
        for trace in traces {
            let strategy = try #require(json["strategies"]?[trace.strategy])
            guard case .object(let pools) = strategy["pools"] else {
                Issue.record("\(trace.strategy): no pools object")
                continue
            }
            #expect(pools.keys.sorted() == ["roomy", "tight"])
            for (p, id) in ["roomy", "tight"].enumerated() {
                let pool = try #require(pools[id])
                guard case .object(let keys) = pool else { continue }
                #expect(
                    keys.keys.sorted() == ["upstream_429_rate", "upstream_429s", "upstream_attempts", "utilisation"])
                // Counted here from the trace's pool samples; both pools' binding dimension is RPM.
                let samples = trace.samples.map { $0.pools[p] }
                let attempts = samples.reduce(0) { $0 + $1.upstreamAttempts }
                let rejected = samples.reduce(0) { $0 + $1.upstream429s }
                let used = samples.filter { $0.demandRPM > $0.trueRPM }.map { $0.servedRPM / $0.trueRPM }
                #expect(pool["upstream_attempts"]?.intValue == attempts)
                #expect(pool["upstream_429s"]?.intValue == rejected)
                #expect(
                    pool["upstream_429_rate"]?.doubleValue
                        == SimulationReport.round6(attempts > 0 ? Double(rejected) / Double(attempts) : 0))
                if id == "roomy" {
                    #expect(used.isEmpty && pool["utilisation"] == .null)  // 36 of 600 rpm
                } else {
                    #expect(used.count == samples.count)  // 90 of 20 rpm throughout
                    let mean = used.reduce(0, +) / Double(used.count)
                    #expect(pool["utilisation"]?.doubleValue == SimulationReport.round6(mean))
                }
            }
        }
        #expect((json["strategies"]?["static"]?["pools"]?["tight"]?["upstream_429s"]?.intValue ?? 0) > 0)
        // Over seeds: each seed's pools as in its own report, and the means of them (of one seed here).
        let perSeed = [traces.map(RunMetrics.init(trace:))]
        let seeds = try JSON.parse(SimulationReport(scenario: scenario, seeds: [1], perSeed: perSeed).json())
        for name in ["static", "fifo-backoff"] {
            let single = json["strategies"]?[name]?["pools"]
            #expect(single != nil)
            #expect(seeds["per_seed"]?[0]?["strategies"]?[name]?["pools"] == single)
            #expect(seeds["strategies"]?[name]?["pools"] == single)
        }
    }

    /// The printed table and results.md add a per-pool table (strategy, pool, utilisation, 429 rate) after the
    /// rows for a scenario of several pools; one of one pool prints what it always has.
    @Test func onlyAScenarioOfSeveralPoolsHasAPerPoolTable() async throws {
        let two = try Self.twoPools()
        let report = SimulationReport(
            scenario: two, seed: 1, traces: [try await Simulator.run(two, strategy: .static, seed: 1)])
        let roomy = try #require(report.metrics.first?.pools["roomy"])
        let tight = try #require(report.metrics.first?.pools["tight"])
        let (tightUse, tightRate) = (
            SimulationReport.percent(tight.utilisation), SimulationReport.percent(tight.upstream429Rate, digits: 2)
        )
        let roomyRate = SimulationReport.percent(roomy.upstream429Rate, digits: 2)
        #expect(roomy.utilisation == nil && tight.upstream429s > 0)
        // Right-aligned under "util" and "429 rate", as the table above.
        func right(_ cell: String, _ width: Int) -> String { String(repeating: " ", count: width - cell.count) + cell }
        let util = max(4, tightUse.count)
        // The scenario, the header and static's row (no policy line); a blank line; the pools' header and rows;
        // "" after the last "\n".
        let lines = report.table().split(separator: "\n", omittingEmptySubsequences: false)
        #expect(lines.count == 8)
        #expect(lines[3] == "")
        #expect(lines[4] == "strategy  pool   \(right("util", util))  429 rate")
        #expect(lines[5] == "static    roomy  \(right("-", util))  \(right(roomyRate, 8))")
        #expect(lines[6] == "static    tight  \(right(tightUse, util))  \(right(tightRate, 8))")
        #expect(lines[7] == "")
        #expect(
            report.markdownPoolTable()
                == "\n| strategy | pool | utilisation | 429 rate |\n|---|---|---:|---:|\n"
                + "| static | roomy | - | \(roomyRate) |\n| static | tight | \(tightUse) | \(tightRate) |\n")
        #expect(report.markdownRows().split(separator: "\n").count == 1)

        let one = try Self.small()
        let single = SimulationReport(
            scenario: one, seed: 1, traces: [try await Simulator.run(one, strategy: .static, seed: 1)])
        #expect(single.metrics.first?.pools.keys.sorted() == ["openai/gpt-4o"])
        let table = single.table()
        #expect(table.split(separator: "\n", omittingEmptySubsequences: false).count == 4)
        #expect(!table.contains("\n\n") && !table.contains("pool"))
        #expect(single.markdownPoolTable() == "")
    }

    /// `ALLOT_SIM_DEBUG` and `ALLOT_SIM_TENANTS` on a pool of 20 rpm: a traced tenant's values below 10 keep one or
    /// two decimals (they read `D=4 up=2 level=0 T=0 P=0`), a denial summary names the pool, and names that are no
    /// tenant of the scenario are reported once, in one line.
    @Test func theDebugTracesAreReadableOnATinyPool() async throws {
        let pools = """
            [{"id": "tiny/pool", "provider": "openai", "declared_rpm": 20, "declared_tpm": 40000,
              "capacity": [{"at_s": 0, "rpm": 20, "tpm": 40000}]}]
            """
        let tenants = """
            [{"id": "acme", "count": 2, "tier": "standard", "pool": "tiny/pool",
              "arrivals": [{"at_s": 0, "tasks_per_min": 3}],
              "task": {"class": "interactive", "calls": {"min": 2, "max": 4}, "parallelism": 2,
                       "prompt_tokens": {"mean": 500}, "completion_tokens": {"mean": 100}, "deadline_s": 60}}]
            """
        let scenario = try decode(scenarioJSON(duration: 180, tenants: tenants, pools: pools))
        var lines: [String] = []
        let run = try await SimulationRun(
            scenario: scenario, strategy: .allot, seed: 1,
            environment: ["ALLOT_SIM_DEBUG": "1", "ALLOT_SIM_TENANTS": "acme-01,ghost,acme"], log: { lines.append($0) })
        _ = try await run.execute()

        #expect(
            lines.filter { $0.hasPrefix("ALLOT_SIM_TENANTS") }
                == [
                    "ALLOT_SIM_TENANTS: no tenant acme, ghost in scenario tiny "
                        + "(ignored; a tenant with count N is id-01 … id-NN, numbered to the width of N and at least "
                        + "two digits: id-001 … id-100 for 100)"
                ])
        let traced = lines.filter { $0.hasPrefix("t=") && $0.contains(" acme-01 tiny/pool ") }
        #expect(!traced.isEmpty)
        #expect(!lines.contains { $0.hasPrefix("t=") && $0.contains(" acme-02 tiny/pool ") })
        // Every value of the rpm part: whole from 10 up, one decimal from 1, two below.
        var small = 0
        for line in traced {
            let rpm = try #require(line.split(separator: "|").first { $0.hasPrefix(" rpm ") })
            for field in rpm.split(separator: " ") {
                guard let equals = field.firstIndex(of: "=") else { continue }
                let text = field[field.index(after: equals)...]
                let value = try #require(Double(text), "\(line)")
                let decimals = text.firstIndex(of: ".").map { text.distance(from: $0, to: text.endIndex) - 1 } ?? 0
                #expect(decimals == (abs(value) >= 10 ? 0 : abs(value) >= 1 ? 1 : value == 0 ? 0 : 2), "\(line)")
                if abs(value) < 10 { small += 1 }
            }
        }
        #expect(small > 0, "a tiny pool has values below 10")
        let denied = lines.filter { $0.hasPrefix("denied ") }
        #expect(!denied.isEmpty)
        for line in denied {
            let fields = line.split(separator: " ")
            #expect(fields.count == 5 && fields[2] == "tiny/pool" && Int(fields[4]) != nil, "\(line)")
        }
        // "0" (or false, no, empty) is off: it switched the trace on (round 14).
        var quiet: [String] = []
        let off = try await SimulationRun(
            scenario: scenario, strategy: .allot, seed: 1, environment: ["ALLOT_SIM_DEBUG": "0"],
            log: { quiet.append($0) })
        _ = try await off.execute()
        #expect(quiet.isEmpty)
    }

    @Test func aTraceValueKeepsDecimalsBelowTen() {
        #expect(
            [nil, 0, 0.004, 0.25, -0.5, 1, 2.345, 9.94, 9.96, 10, 135.4, .infinity].map(AllotDriver.traceNumber)
                == ["-", "0", "0.00", "0.25", "-0.50", "1.0", "2.3", "9.9", "10.0", "10", "135", "inf"])
    }
}
