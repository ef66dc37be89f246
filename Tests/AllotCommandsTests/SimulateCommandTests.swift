import AllotJSON
import AllotServer
import Foundation
import Testing

@Suite struct SimulateCommandTests {
    /// A scenario of one pool and one tenant of small batch tasks.
    static func oneTenantScenario(name: String, duration: Int, tier: String, tasksPerMinute: Double) -> String {
        """
        {"name": "\(name)", "description": "test", "headline": {"metric": "upstream_429_rate", "better": "lower"},
         "duration_s": \(duration), "pools": [{"id": "p", "provider": "anthropic", "declared_rpm": 120, "declared_tpm": 200000,
           "capacity": [{"at_s": 0, "rpm": 120, "tpm": 200000}]}],
         "tenants": [{"id": "a", "tier": "\(tier)", "pool": "p", "arrivals": [{"at_s": 0, "tasks_per_min": \(tasksPerMinute)}],
           "task": {"class": "batch", "calls": {"min": 2, "max": 3}, "parallelism": 1,
                    "prompt_tokens": {"mean": 300}, "completion_tokens": {"mean": 50}, "deadline_s": 30}}]}
        """
    }

    /// A fresh scratch directory `allot-sim-NAME-…` holding an empty `policies` directory (the caller removes
    /// `base`).
    static func policyDirectory(_ name: String) throws -> (base: String, policies: String) {
        let base = NSTemporaryDirectory() + "allot-sim-\(name)-\(UUID().uuidString)"
        let policies = base + "/policies"
        try FileManager.default.createDirectory(atPath: policies, withIntermediateDirectories: true)
        return (base, policies)
    }

    @Test func checkWarnsOfARunTooLargeToFinishSoon() async throws {
        // Outside evaluation round 23: a valid file of 50 million calls ran silently until killed.
        let path = NSTemporaryDirectory() + "check-huge-\(UUID().uuidString).json"
        defer { try? FileManager.default.removeItem(atPath: path) }
        // 100,000 tasks a minute × 2.5 calls × 25 minutes: 6,250,000 calls; over 1,199 s: 4,995,833, no warning.
        for (duration, warned) in [(1_500, true), (1_199, false)] {
            try Data(
                Self.oneTenantScenario(name: "huge", duration: duration, tier: "standard", tasksPerMinute: 1e5).utf8
            )
            .write(to: URL(fileURLWithPath: path))
            let result = await runCLI(["simulate", "--scenario", path, "--check"])
            #expect(result.code == 0, "\(result.err)")
            let calls = duration == 1_500 ? "6250000" : "4995833"
            #expect(result.out.contains("; about \(calls) calls scheduled\n"), "\(result.out)")
            if warned {
                #expect(
                    result.out.contains(
                        "  warning: about 6250000 calls are scheduled (tasks × calls per task, before retries): the "
                            + "simulator runs every one of them, about 30,000 a second, so expect at least 4 minutes "
                            + "per strategy\n"), "\(result.out)")
            } else {
                #expect(!result.out.contains("calls are scheduled"), "\(result.out)")
            }
        }
    }

    @Test func listPrintsTheBuiltInsOnePerLine() async {
        let result = await runCLI(["simulate", "--list"])
        #expect(result.code == 0)
        let names = result.out.split(separator: "\n").map(String.init)
        #expect(names.contains("silent-starvation"))
        #expect(names.contains("fleet-hour"))
        #expect(names.count >= 9)
        // With a scenario it listed and ignored the scenario: refused (usage, exit 2).
        let both = await runCLI(["simulate", "--list", "--scenario", "gaming"])
        #expect(both.code == 2)
        #expect(both.err.contains("--list takes no other option (got --scenario)"), "\(both.err)")
    }

    @Test func aBadScenarioFileNamesThePathAtFault() async throws {
        let path = NSTemporaryDirectory() + "bad-scenario-\(UUID().uuidString).json"
        try Data(
            #"{"name": "x", "description": "d", "headline": {"metric": "utilisation", "better": "up"}, "duration_s": 60, "pools": [], "tenants": []}"#
                .utf8
        )
        .write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let result = await runCLI(["simulate", "--scenario", path])
        #expect(result.code == 1)
        // Every fault of the file, each on its own line, in file order (the headline comes before the pools).
        let path3 = path + ": "
        #expect(
            result.err.split(separator: "\n").map(String.init) == [
                "allot simulate: " + path3 + #"headline.better: must be "lower" or "higher", not "up""#,
                "allot simulate: " + path3 + "pools: must have 1 to 8 entries, not 0",
                "allot simulate: " + path3 + "tenants: must have 1 to 1000 entries, not 0",
            ], "\(result.err)")
        let unknown = await runCLI(["simulate", "--scenario", "no-such-scenario"])
        #expect(unknown.code == 1)
        #expect(unknown.err.contains("neither a built-in scenario nor a readable file"))
        let strategy = await runCLI(["simulate", "--scenario", "gaming", "--strategy", "random"])
        #expect(strategy.code == 2)
    }

    @Test func checkValidatesAndDescribesTheScenarioWithoutRunningIt() async throws {
        let path = NSTemporaryDirectory() + "check-\(UUID().uuidString).json"
        try Data(Self.oneTenantScenario(name: "tiny", duration: 60, tier: "standard", tasksPerMinute: 6).utf8)
            .write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let result = await runCLI(["simulate", "--scenario", path, "--check"])
        #expect(result.code == 0, "\(result.err)")
        let builtIn = try PolicySource.embedded.load().version
        #expect(
            result.out
                == "ok: tiny: 60 s, 3 gateway(s), 1 tenant(s) (1 standard), headline upstream_429_rate (lower is better)\n"
                + "  pool p (anthropic): 120 rpm and 200000 tpm at 0 s; scheduled demand peaks at 12.5 % of capacity "
                + "(rpm, from 0 s); about 15 calls scheduled\n"
                + "  policy built-in, policy_version \(builtIn)")
        #expect(!result.err.contains("simulated s in"))  // nothing ran
        // A demand that rounds to 0.0 % is said to be below 0.1 %, not 0 (outside evaluation round 24).
        try Data(Self.oneTenantScenario(name: "tiny", duration: 60, tier: "standard", tasksPerMinute: 0.01).utf8)
            .write(to: URL(fileURLWithPath: path))
        let sparse = await runCLI(["simulate", "--scenario", path, "--check"])
        #expect(
            sparse.out.contains("scheduled demand peaks at below 0.1 % of capacity (rpm, from 0 s)"), "\(sparse.out)")
        // Bad seeds are refused by a check too, as by a run (a check said "ok" to them).
        for bad in [["--seeds", "5-1"], ["--seed", "abc"], ["--seeds", "1-2000"]] {
            let refused = await runCLI(["simulate", "--scenario", "night-collision", "--check"] + bad)
            #expect(refused.code == 2, "\(bad)")
            #expect(refused.out.isEmpty, "\(bad)")
        }
        let builtin = await runCLI(["simulate", "--scenario", "night-collision", "--check"])
        #expect(builtin.code == 0)
        #expect(builtin.out.hasPrefix("ok: night-collision: 2400 s, 3 gateway(s), 3 tenant(s) (1 critical, 1 premium"))
        try Data(Self.oneTenantScenario(name: "tiny", duration: 60, tier: "gold", tasksPerMinute: 6).utf8)
            .write(to: URL(fileURLWithPath: path))
        let invalid = await runCLI(["simulate", "--scenario", path, "--check"])
        #expect(invalid.code == 1)
        #expect(invalid.err.contains(#"tenants[0].tier: unknown tier "gold""#), "\(invalid.err)")
        #expect(invalid.out.isEmpty)
    }

    @Test func aHeadlineOnATierWithNoTaskDueWithinTheRunIsWarnedAbout() async throws {
        // Tasks due 90 s after they arrive, judged on SLO attainment: a 60-s run judges none of them.
        let path = NSTemporaryDirectory() + "due-\(UUID().uuidString).json"
        let scenario = Self.oneTenantScenario(name: "late", duration: 60, tier: "standard", tasksPerMinute: 6)
            .replacingOccurrences(
                of: #""metric": "upstream_429_rate", "better": "lower""#,
                with: #""metric": "slo_attainment", "tier": "standard", "better": "higher""#
            )
            .replacingOccurrences(of: #""deadline_s": 30"#, with: #""deadline_s": 90"#)
        try Data(scenario.utf8).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let warning =
            "headline slo_attainment[standard]: no task of tier standard is due within the run (the earliest is "
            + "due at 90 s, the run ends at 60 s): no strategy can win on it"
        let check = await runCLI(["simulate", "--scenario", path, "--check"])
        #expect(check.code == 0, "\(check.err)")
        #expect(check.out.contains("\n  warning: " + warning + "\n"), "\(check.out)")
        let run = await runCLI(["simulate", "--scenario", path, "--strategy", "static"])
        #expect(run.code == 0, "\(run.err)")
        #expect(run.err.contains("allot simulate: warning: " + warning))
        // A run that ends when a task arriving at t = 0 would be due: the first arrives later, so none is judged.
        try Data(scenario.replacingOccurrences(of: #""duration_s": 60"#, with: #""duration_s": 90"#).utf8)
            .write(to: URL(fileURLWithPath: path))
        let edge = await runCLI(["simulate", "--scenario", path, "--check"])
        #expect(edge.out.contains("(the earliest is due at 90 s, the run ends at 90 s)"), "\(edge.out)")
        // A run long enough for its first task to fall due: no warning.
        try Data(scenario.replacingOccurrences(of: #""duration_s": 60"#, with: #""duration_s": 100"#).utf8)
            .write(to: URL(fileURLWithPath: path))
        let due = await runCLI(["simulate", "--scenario", path, "--check"])
        #expect(due.code == 0, "\(due.err)")
        #expect(!due.out.contains("warning"))
    }

    /// `--check` on `scenario` (written to a temporary file): its exit code and stdout.
    static func check(_ scenario: String) async throws -> (code: Int32, out: String) {
        let path = NSTemporaryDirectory() + "check-\(UUID().uuidString).json"
        try Data(scenario.utf8).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let result = await runCLI(["simulate", "--scenario", path, "--check"])
        return (result.code, result.out + result.err)
    }

    /// `--check` on `scenario` (a ``oneTenantScenario`` or one built on it) with `headline` for its own.
    static func check(_ scenario: String, headline: String) async throws -> (code: Int32, out: String) {
        try await check(
            scenario.replacingOccurrences(of: #""metric": "upstream_429_rate", "better": "lower""#, with: headline))
    }

    /// Expects `--check` to have passed with no warning.
    static func expectNoWarning(
        _ result: (code: Int32, out: String), sourceLocation: SourceLocation = #_sourceLocation
    ) {
        #expect(result.code == 0, "\(result.out)", sourceLocation: sourceLocation)
        #expect(!result.out.contains("warning"), "\(result.out)", sourceLocation: sourceLocation)
    }

    @Test func aTenantWhoseMeanCallIsLargerThanItsPoolsTokenBucketIsWarnedAbout() async throws {
        // Pool p's 10-s token bucket holds 33333 tokens from t=0 s, 10000 after the drop at t=30 s; a second entry,
        // "big" with count 3, makes calls of 20000 + 1000 tokens on average: too big for the second step only.
        let one = Self.oneTenantScenario(name: "big", duration: 60, tier: "standard", tasksPerMinute: 6)
        let steps = #"[{"at_s": 0, "rpm": 120, "tpm": 200000}, {"at_s": 30, "rpm": 120, "tpm": 60000}]"#
        let big = """
            {"id": "big", "count": 3, "tier": "standard", "pool": "p", "arrivals": [{"at_s": 0, "tasks_per_min": 1}],
             "task": {"class": "batch", "calls": {"min": 1, "max": 1}, "parallelism": 1,
                      "prompt_tokens": {"mean": 20000}, "completion_tokens": {"mean": 1000}, "deadline_s": 30}}
            """
        let scenario = one.replacingOccurrences(of: #"[{"at_s": 0, "rpm": 120, "tpm": 200000}]"#, with: steps)
            .replacingOccurrences(of: #""deadline_s": 30}}]}"#, with: #""deadline_s": 30}}, "# + big + "]}")
        let check = try await Self.check(scenario)
        #expect(check.code == 0, "\(check.out)")
        let warning: String =
            #"tenants[1] ("big" with count 3): its mean call of 21000 tokens (task.prompt_tokens.mean + "#
            + #"completion_tokens.mean) is larger than pool "p"'s 10-s token bucket (10000 of 60000 tpm at "#
            + "pools[0].capacity[1], from t=30 s): the simulated provider admits such a call only when its bucket "
            + "is full, so on a pool with any other traffic it meets 429s whatever the allocator does"
        #expect(check.out.contains("\n  warning: " + warning + "\n"), "\(check.out)")
        #expect(check.out.components(separatedBy: "warning:").count == 2, "\(check.out)")  // once for the entry
        // A mean call larger than the pool's whole tpm (here at both steps): the stronger wording, the smallest step.
        let whole = try await Self.check(
            scenario.replacingOccurrences(
                of: #""completion_tokens": {"mean": 1000}"#, with: #""completion_tokens": {"mean": 50000}"#))
        #expect(whole.code == 0, "\(whole.out)")
        let stronger: String =
            #"tenants[1] ("big" with count 3): its mean call of 70000 tokens (task.prompt_tokens.mean + "#
            + #"completion_tokens.mean) is larger than pool "p"'s whole capacity of 60000 tpm "#
            + "(pools[0].capacity[1], from t=30 s, too small at 2 of its 2 steps; its 10-s token bucket "
            + "holds 10000): the simulated provider admits such a call only when its bucket is full, and each "
            + "one admitted leaves the bucket empty for the next 60 s: it meets 429s whatever the allocator "
            + "does, and so does every other call on the pool (under allot they wait at the gateways instead: "
            + "the call leaves its gateway's cap in debt)"
        #expect(whole.out.contains("\n  warning: " + stronger + "\n"), "\(whole.out)")
        // With a spread, the mean of the drawn (never negative) sizes is not a round number: printed rounded
        // (outside evaluation round 17 read "its mean call of 2000500.0000056403 tokens").
        let spread = try await Self.check(
            scenario.replacingOccurrences(
                of: #""prompt_tokens": {"mean": 20000}"#, with: #""prompt_tokens": {"mean": 20000, "sd": 4000}"#))
        #expect(spread.out.contains("its mean call of 21000 tokens"), "\(spread.out)")
        // Calls that fit every step's bucket (8,000 tokens, the second step's holds 10,000): no warning of that, but
        // they are more than half of it (a second within 6 s of one meets a 429), and more than a third of its 10 s,
        // one gateway's cap under allot.
        let fitting = scenario.replacingOccurrences(
            of: #""prompt_tokens": {"mean": 20000}"#, with: #""prompt_tokens": {"mean": 7000}"#)
        let fits = try await Self.check(fitting)
        #expect(fits.out.components(separatedBy: "warning:").count == 3, "\(fits.out)")
        #expect(
            fits.out.contains(
                #"warning: tenants[1] ("big" with count 3): its mean call of 8000 tokens is more than half of pool "#
                    + #""p"'s 10-s token bucket (10000 of 60000 tpm at pools[0].capacity[1], from t=30 s): a second "#
                    + "such call that reaches the provider within 6 s of another"), "\(fits.out)")
        #expect(
            fits.out.contains(
                #"warning: tenants[1] ("big" with count 3): its mean call of 8000 tokens is larger than one "#
                    + #"gateway's 10-s share of pool "p" under allot (60000 tpm ÷ 3 gateways ≈ 3333 tokens, at "#
                    + "pools[0].capacity[1])"), "\(fits.out)")
        // Behind one gateway its cap holds 10 s of the pool: only the half-bucket warning is left.
        let alone = try await Self.check(
            fitting.replacingOccurrences(of: #""duration_s": 60,"#, with: #""duration_s": 60, "gateways": 1,"#))
        #expect(alone.code == 0, "\(alone.out)")
        #expect(alone.out.components(separatedBy: "warning:").count == 2, "\(alone.out)")
        #expect(alone.out.contains("is more than half of pool"), "\(alone.out)")
        // Calls of half the smallest bucket or less (5,000 tokens) behind one gateway: no warning at all.
        let half = try await Self.check(
            fitting.replacingOccurrences(of: #""duration_s": 60,"#, with: #""duration_s": 60, "gateways": 1,"#)
                .replacingOccurrences(
                    of: #""prompt_tokens": {"mean": 7000}"#, with: #""prompt_tokens": {"mean": 4000}"#))
        Self.expectNoWarning(half)
    }

    @Test func aLatencyWarningOnAPoolWhoseCapacityNeverDropsIsWarnedAbout() async throws {
        let one = Self.oneTenantScenario(name: "rise", duration: 60, tier: "standard", tasksPerMinute: 6)
        // Capacity that only rises: the warning before a drop never applies.
        let scenario = one.replacingOccurrences(
            of: #""capacity": [{"at_s": 0, "rpm": 120, "tpm": 200000}]"#,
            with: #""capacity": [{"at_s": 0, "rpm": 120, "tpm": 200000}, {"at_s": 30, "rpm": 240, "tpm": 400000}], "#
                + #""latency_warning_s": 20"#)
        let warning: String =
            #"pools[0].latency_warning_s (pool "p", 20 s): the pool's capacity never drops (no capacity step "#
            + "lowers rpm or tpm from the step before it): the latency warning never applies"
        let check = try await Self.check(scenario)
        #expect(check.code == 0, "\(check.out)")
        #expect(check.out.contains("\n  warning: " + warning + "\n"), "\(check.out)")
        // A run warns on stderr and still runs.
        let path = NSTemporaryDirectory() + "rise-\(UUID().uuidString).json"
        try Data(scenario.utf8).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let run = await runCLI(["simulate", "--scenario", path, "--strategy", "static"])
        #expect(run.code == 0, "\(run.err)")
        #expect(run.err.contains("allot simulate: warning: " + warning + "\n"), "\(run.err)")
        // The same warning before a drop in tpm alone: no warning.
        let drop = try await Self.check(scenario.replacingOccurrences(of: #""tpm": 400000"#, with: #""tpm": 100000"#))
        Self.expectNoWarning(drop)
    }

    @Test func aLatencyWarningThatWouldStartBeforeTheRunIsWarnedAbout() async throws {
        // A drop at t=30 s warned of 45 s before: from t=-15 s, so the run starts 15 s into the ramp (×1 to ×3).
        let one = Self.oneTenantScenario(name: "early", duration: 60, tier: "standard", tasksPerMinute: 6)
        let scenario = one.replacingOccurrences(
            of: #""capacity": [{"at_s": 0, "rpm": 120, "tpm": 200000}]"#,
            with: #""capacity": [{"at_s": 0, "rpm": 120, "tpm": 200000}, {"at_s": 30, "rpm": 60, "tpm": 200000}], "#
                + #""latency_warning_s": 45"#)
        let check = try await Self.check(scenario)
        #expect(check.code == 0, "\(check.out)")
        let warning: String =
            #"pools[0].latency_warning_s (pool "p", 45 s): the drop at pools[0].capacity[1] (at_s 30) would be "#
            + "warned of from t=-15 s: the warning is cut short by 15 s at the start of the run (latency starts at "
            + "×1.67, not ×1)"
        #expect(check.out.contains("\n  warning: " + warning + "\n"), "\(check.out)")
        // A warning that starts at t=0 exactly: no warning.
        let fits = try await Self.check(
            scenario.replacingOccurrences(of: #""latency_warning_s": 45"#, with: #""latency_warning_s": 30"#))
        Self.expectNoWarning(fits)
    }

    @Test func aHeadlineMeasuredOnlyAfterSomethingTheScenarioNeverHasIsWarnedAbout() async throws {
        // One tenant of 6 tasks a minute × 2.5 calls: 15 of the pool's 120 rpm, 5,250 of its 200,000 tpm.
        let one = Self.oneTenantScenario(name: "calm", duration: 60, tier: "standard", tasksPerMinute: 6)
        let headline = #""metric": "upstream_429_rate", "better": "lower""#
        let utilisation = try await Self.check(one, headline: #""metric": "utilisation", "better": "higher""#)
        #expect(utilisation.code == 0, "\(utilisation.out)")
        let uncontended: String =
            #"headline utilisation: no pool's scheduled demand ever exceeds its true capacity (the most is 12.5 % "#
            + #"of pool "p"'s rpm from t=0 s): utilisation is measured only while demand exceeds capacity, so no "#
            + "strategy can win on it"
        #expect(utilisation.out.contains("\n  warning: " + uncontended + "\n"), "\(utilisation.out)")
        // Jain's index, judged over the same intervals; named by its tier (of two tenants: of one it is 1 anyway).
        let pair = one.replacingOccurrences(of: #""id": "a", "tier""#, with: #""id": "a", "count": 2, "tier""#)
        let jain = try await Self.check(pair, headline: #""metric": "jain", "tier": "standard", "better": "higher""#)
        #expect(
            jain.out.contains(
                "warning: headline jain[standard]: on the pools tier standard uses, no pool's scheduled demand ever "
                    + "exceeds its true capacity (the most is 25 % of pool \"p\"'s rpm from t=0 s): Jain's index is "
                    + "measured only while"), "\(jain.out)")
        // A second pool, contended by a premium tenant (60 tasks a minute × 2.5 calls on 60 rpm): utilisation is
        // measured there, but the standard tier's Jain's index is judged on pool p alone.
        let second =
            #"{"id": "q", "provider": "openai", "declared_rpm": 60, "declared_tpm": 200000, "#
            + #""capacity": [{"at_s": 0, "rpm": 60, "tpm": 200000}]}"#
        let whale =
            #"{"id": "w", "tier": "premium", "pool": "q", "arrivals": [{"at_s": 0, "tasks_per_min": 60}], "#
            + #""task": {"class": "batch", "calls": {"min": 2, "max": 3}, "parallelism": 1, "#
            + #""prompt_tokens": {"mean": 300}, "completion_tokens": {"mean": 50}, "deadline_s": 30}}"#
        let twoPools = pair.replacingOccurrences(of: #"200000}]}]"#, with: #"200000}]}, "# + second + "]")
            .replacingOccurrences(of: #""deadline_s": 30}}]}"#, with: #""deadline_s": 30}}, "# + whale + "]}")
            .replacingOccurrences(of: #""id": "w", "tier""#, with: #""id": "w", "count": 2, "tier""#)
        let contended = try await Self.check(twoPools, headline: #""metric": "utilisation", "better": "higher""#)
        Self.expectOnlyShortRunWarning(contended)
        let standardJain = try await Self.check(
            twoPools, headline: #""metric": "jain", "tier": "standard", "better": "higher""#)
        #expect(standardJain.out.contains("warning: headline jain[standard]: on the pools tier standard uses"))
        let premiumJain = try await Self.check(
            twoPools, headline: #""metric": "jain", "tier": "premium", "better": "higher""#)
        Self.expectNoWarning(premiumJain)
        // From t=30 s, 60 tasks a minute × 2.5 calls = 150 rpm: contended, no warning; the peak is found at the
        // arrival step, not only at t=0.
        let busy = try await Self.check(
            one.replacingOccurrences(of: headline, with: #""metric": "utilisation", "better": "higher""#)
                .replacingOccurrences(
                    of: #"[{"at_s": 0, "tasks_per_min": 6.0}]"#,
                    with: #"[{"at_s": 0, "tasks_per_min": 6}, {"at_s": 30, "tasks_per_min": 60}]"#))
        Self.expectOnlyShortRunWarning(busy)
        // Convergence with a capacity step that repeats the one before it (no change), and with one past the run.
        let steps =
            #"[{"at_s": 0, "rpm": 120, "tpm": 200000}, {"at_s": 20, "rpm": 120, "tpm": 200000}, "#
            + #"{"at_s": 60, "rpm": 60, "tpm": 200000}]"#
        let convergence = one.replacingOccurrences(of: headline, with: #""metric": "convergence_s", "better": "lower""#)
            .replacingOccurrences(of: #"[{"at_s": 0, "rpm": 120, "tpm": 200000}]"#, with: steps)
        let unchanged = try await Self.check(convergence)
        #expect(unchanged.code == 1, "\(unchanged.out)")  // a step at duration_s is an error of its own
        #expect(unchanged.out.contains("pools[0].capacity[2].at_s: must be before duration_s (60), not 60"))
        let still = try await Self.check(
            convergence.replacingOccurrences(of: #""at_s": 60"#, with: #""at_s": 40"#)
                .replacingOccurrences(of: #""rpm": 60"#, with: #""rpm": 120"#))
        #expect(still.code == 0, "\(still.out)")
        let noChange: String =
            "headline convergence_s: no pool's capacity changes within the run (no capacity step at or before "
            + "the start of its last interval, t=50 s, changes rpm or tpm from the step before it): convergence is "
            + "measured only after a change, so no strategy can win on it"
        #expect(still.out.contains("\n  warning: " + noChange + "\n"), "\(still.out)")
        let drops = try await Self.check(convergence.replacingOccurrences(of: #""at_s": 60"#, with: #""at_s": 40"#))
        Self.expectNoWarning(drops)
        // A drop inside the last interval (50–60 s) has no interval of its own: nothing to judge.
        let late = try await Self.check(convergence.replacingOccurrences(of: #""at_s": 60"#, with: #""at_s": 55"#))
        #expect(late.out.contains("\n  warning: " + noChange + "\n"), "\(late.out)")
        let atLastStart = try await Self.check(
            convergence.replacingOccurrences(of: #""at_s": 60"#, with: #""at_s": 50"#))
        Self.expectNoWarning(atLastStart)
    }

    /// The utilisation headline's warning on a 60-s run (``Scenario/shortRunWarnings``).
    static let shortRun60: String =
        "headline utilisation: the run is 60 s long, and the simulated provider's buckets start full (10 s of "
        + "capacity, and again after any lull): a strategy that sends above the capacity from the start is served up "
        + "to about 16.7 % of it on top from that alone, which can decide the headline; a duration_s of 500 or more "
        + "keeps it at 2 % or less"

    /// Expects `--check` to have passed with one warning, ``shortRun60``.
    static func expectOnlyShortRunWarning(
        _ result: (code: Int32, out: String), sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let out = result.out
        #expect(result.code == 0, "\(out)", sourceLocation: sourceLocation)
        #expect(out.contains("\n  warning: " + shortRun60 + "\n"), "\(out)", sourceLocation: sourceLocation)
        #expect(out.components(separatedBy: "warning").count == 2, "\(out)", sourceLocation: sourceLocation)
    }

    @Test func aUtilisationHeadlineOnAShortRunIsWarnedAbout() async throws {
        // Outside evaluation round 44, L7: over 60 s the provider's full buckets made over-sending win utilisation
        // (`fifo-backoff` 114–116 %). 60 tasks a minute × 2.5 calls = 150 rpm on 120: contended, so only this warns.
        let utilisation = #""metric": "utilisation", "better": "higher""#
        let busy = Self.oneTenantScenario(name: "short", duration: 60, tier: "standard", tasksPerMinute: 60)
        Self.expectOnlyShortRunWarning(try await Self.check(busy, headline: utilisation))
        let almost = try await Self.check(
            busy.replacingOccurrences(of: #""duration_s": 60"#, with: #""duration_s": 499"#), headline: utilisation)
        #expect(
            almost.out.contains(
                "\n  warning: headline utilisation: the run is 499 s long, and the simulated provider's buckets "
                    + "start full (10 s of capacity, and again after any lull): a strategy that sends above the "
                    + "capacity from the start is served up to about 2 % of it on top from that alone, which can "
                    + "decide the headline; a duration_s of 500 or more keeps it at 2 % or less\n"), "\(almost.out)")
        let long = busy.replacingOccurrences(of: #""duration_s": 60"#, with: #""duration_s": 500"#)
        Self.expectNoWarning(try await Self.check(long, headline: utilisation))
        // Another headline on the same short run: not warned of.
        Self.expectNoWarning(try await Self.check(busy))
    }

    @Test func aConvergenceHeadlineReadAtCoarseSamplesIsWarnedAbout() async throws {
        // Outside evaluation round 44, L8: at 300-s samples every strategy's convergence_s was 300 s.
        let steps = #"[{"at_s": 0, "rpm": 120, "tpm": 200000}, {"at_s": 300, "rpm": 60, "tpm": 200000}]"#
        let scenario = Self.oneTenantScenario(name: "coarse", duration: 1_200, tier: "standard", tasksPerMinute: 6)
            .replacingOccurrences(of: #"[{"at_s": 0, "rpm": 120, "tpm": 200000}]"#, with: steps)
            .replacingOccurrences(of: #""duration_s": 1200,"#, with: #""duration_s": 1200, "sample_interval_s": 300,"#)
        let headline = #""metric": "convergence_s", "better": "lower""#
        let coarse = try await Self.check(scenario, headline: headline)
        #expect(coarse.code == 0, "\(coarse.out)")
        let warning =
            "headline convergence_s: it is read at the end of a sample interval, and sample_interval_s is 300 s: "
            + "every strategy that settles within the first interval after a change scores the same (up to 300 s), "
            + "so only a slower one can lose; a sample_interval_s of 60 or less tells them apart"
        #expect(coarse.out.contains("\n  warning: " + warning + "\n"), "\(coarse.out)")
        #expect(coarse.out.components(separatedBy: "warning").count == 2, "\(coarse.out)")
        let sixtyOne = try await Self.check(
            scenario.replacingOccurrences(of: #""sample_interval_s": 300"#, with: #""sample_interval_s": 61"#),
            headline: headline)
        #expect(sixtyOne.out.contains("sample_interval_s is 61 s: every strategy"), "\(sixtyOne.out)")
        Self.expectNoWarning(
            try await Self.check(
                scenario.replacingOccurrences(of: #""sample_interval_s": 300"#, with: #""sample_interval_s": 60"#),
                headline: headline))
        // The same samples under another headline: nothing to warn of.
        Self.expectNoWarning(try await Self.check(scenario))
    }

    @Test func aHeadlineStaticWinsByConstructionIsWarnedAbout() async throws {
        let one = Self.oneTenantScenario(name: "fixed", duration: 60, tier: "standard", tasksPerMinute: 6)
        let variation = try await Self.check(one, headline: #""metric": "total_variation", "better": "lower""#)
        #expect(variation.code == 0, "\(variation.out)")
        let never =
            "headline total_variation: `static` never moves a quota, so its total variation is 0: no strategy can "
            + "do better than tie it"
        #expect(variation.out.contains("\n  warning: " + never + "\n"), "\(variation.out)")
        let first = try await Self.check(one, headline: #""metric": "time_to_first_allocation_s", "better": "lower""#)
        #expect(
            first.out.contains(
                "\n  warning: headline time_to_first_allocation_s: `static` provisions every tenant before its "
                    + "first call (0 s): no strategy can do better than tie it\n"), "\(first.out)")
        // The built-in noisy-signals is judged on total variation: it says so too.
        let builtin = await runCLI(["simulate", "--scenario", "noisy-signals", "--check"])
        #expect(builtin.code == 0)
        #expect(builtin.out.contains("\n  warning: " + never + "\n"), "\(builtin.out)")
    }

    @Test func aTierHeadlineEveryStrategyTiesOnIsWarnedAbout() async throws {
        // One standard tenant: its Jain's index is 1 whatever happens.
        let one = Self.oneTenantScenario(name: "alone", duration: 60, tier: "standard", tasksPerMinute: 6)
        let headline = #""metric": "upstream_429_rate", "better": "lower""#
        let jain = try await Self.check(one, headline: #""metric": "jain", "tier": "standard", "better": "higher""#)
        #expect(
            jain.out.contains(
                "\n  warning: headline jain[standard]: tier standard has one tenant (\"a\"), and Jain's index of one "
                    + "is 1 for every strategy: no strategy can win on it\n"), "\(jain.out)")
        // Tasks of 2–3 calls one at a time on a pool of 600-ms calls: 2 × 0.51 s at best, against a 1-s deadline.
        let slo = one.replacingOccurrences(
            of: headline, with: #""metric": "slo_attainment", "tier": "standard", "better": "higher""#)
        let late = try await Self.check(slo.replacingOccurrences(of: #""deadline_s": 30"#, with: #""deadline_s": 1"#))
        #expect(
            late.out.contains(
                "\n  warning: headline slo_attainment[standard]: no task of tier standard can finish by its deadline "
                    + "(at best 1.02 s, from its fewest calls at the pool's base latency, against deadline_s 1): every "
                    + "strategy meets 0 %, so no strategy can win on it\n"), "\(late.out)")
        // Two calls in parallel fit (0.51 s): no warning.
        let parallel = try await Self.check(
            slo.replacingOccurrences(of: #""deadline_s": 30"#, with: #""deadline_s": 1"#)
                .replacingOccurrences(of: #""parallelism": 1"#, with: #""parallelism": 2"#))
        Self.expectNoWarning(parallel)
    }

    @Test func gatewaysOverridesTheScenariosGatewayCountWithinOneTo32() async throws {
        let path = NSTemporaryDirectory() + "gateways-\(UUID().uuidString).json"
        try Data(Self.oneTenantScenario(name: "tiny", duration: 60, tier: "standard", tasksPerMinute: 6).utf8)
            .write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let result = await runCLI(["simulate", "--scenario", path, "--strategy", "allot", "--gateways", "32"])
        #expect(result.code == 0, "\(result.err)")
        #expect(result.err.contains("tiny with 32 gateways (the scenario has 3)"))
        #expect(result.out.contains("scenario tiny, seed 1"))
        for bad in ["0", "33", "many"] {
            let refused = await runCLI(["simulate", "--scenario", path, "--gateways", bad])
            #expect(refused.code == 2, "\(bad)")
            #expect(refused.err.contains("--gateways"), "\(refused.err)")
            #expect(refused.err.contains("an integer from 1 to 32"), "\(refused.err)")
        }
    }

    @Test func outWritesTheReportFiles() async throws {
        let directory = NSTemporaryDirectory() + "allot-sim-out-\(UUID().uuidString)"
        let path = directory + ".json"
        try Data(Self.oneTenantScenario(name: "tiny", duration: 60, tier: "standard", tasksPerMinute: 6).utf8)
            .write(to: URL(fileURLWithPath: path))
        defer {
            try? FileManager.default.removeItem(atPath: path)
            try? FileManager.default.removeItem(atPath: directory)
        }
        let result = await runCLI([
            "simulate", "--scenario", path, "--strategy", "static", "--seed", "3", "--out", directory,
        ])
        #expect(result.code == 0, "\(result.err)")
        #expect(result.out.contains("scenario tiny, seed 3"))
        for file in ["report.json", "timeline.csv", "timeline.svg", "results.md", "tasks.csv", "tenants.csv"] {
            #expect(FileManager.default.fileExists(atPath: directory + "/" + file), "\(file)")
        }
        let report = try JSON.parse(try String(contentsOfFile: directory + "/report.json", encoding: .utf8))
        #expect(report["strategies"]?["static"] != nil)
        // tasks.csv has the rows slo_attainment is computed from (round 33: no file held them): the judged tasks'
        // count and the share that met the deadline are the report's.
        let tasks = try String(contentsOfFile: directory + "/tasks.csv", encoding: .utf8).split(separator: "\n")
        #expect(
            tasks.first
                == "strategy,tenant,tier,pool,class,arrival_s,deadline_s,finished_s,latency_s,met_deadline,judged")
        let judged = tasks.dropFirst().map { $0.split(separator: ",", omittingEmptySubsequences: false) }
            .filter { $0.last == "1" }
        let tier = report["strategies"]?["static"]?["tiers"]?["standard"]
        #expect(tier?["tasks"] == .int(Int64(judged.count)))
        #expect(judged.count >= 2)
        let met = judged.filter { $0[9] == "1" }.count
        let slo = try #require(tier?["slo_attainment"]?.doubleValue)
        #expect(abs(slo - Double(met) / Double(judged.count)) < 1e-6)
        #expect(judged.allSatisfy { $0[0] == "static" && $0[1] == "a" && $0[2] == "standard" && $0[3] == "p" })
        // tenants.csv: static provisions at once, so the first allocation is the first request.
        let tenants = try String(contentsOfFile: directory + "/tenants.csv", encoding: .utf8).split(separator: "\n")
        #expect(tenants.count == 2)
        let row = tenants[1].split(separator: ",", omittingEmptySubsequences: false)
        #expect(row.count == 8 && row[0] == "static" && row[1] == "a" && !row[5].isEmpty && row[5] == row[6])
        #expect(row[7] == "0.000")
        // One strategy compares nothing: no winner, nothing best, `allot_wins` null (present, as documented).
        #expect(report["headline"]?["winner"] == .null)
        #expect(report["headline"]?["best"] == .array([]))
        #expect(report["headline"]?["allot_wins"] == .null)
        #expect(result.out.split(separator: "\n")[0].hasSuffix("is better): one strategy, no comparison"))
        let builtIn = try PolicySource.embedded.load().version
        #expect(report["policy"] == ["source": "built-in", "version": .string(builtIn)])
        #expect(result.out.split(separator: "\n")[1] == "policy built-in, policy_version \(builtIn)")
        // results.md stays the README table's rows: the policy is named in report.json and on stdout.
        let results = try String(contentsOfFile: directory + "/results.md", encoding: .utf8)
        #expect(!results.contains("policy"))
    }

    /// A tenant that needs more calls in flight than its tier's `max_concurrency` allows is warned about, by
    /// `--check` and before a run: the gateways cap its rate whatever the allocation.
    @Test func aTenantHeldByItsConcurrencyCapIsWarnedAbout() async throws {
        // Free (8 in flight), 1,000 tasks of 2.5 calls a minute, answers of 600 + 20 × 50 / 1000 = 601 ms:
        // 2,500 calls/min need 25 in flight; one gateway allows 8, about 799 calls/min. With four gateways, 32 in
        // flight: no warning.
        try await Self.expectCheckWarning(
            Self.oneTenantScenario(name: "slow", duration: 60, tier: "free", tasksPerMinute: 1000),
            warning: "warning: tenants[0] (\"a\"): at its peak of 2500 calls/min, with answers of at least 0.6 s, it "
                + "needs about 25 calls in flight, more than tier \"free\"'s max_concurrency 8 × 1 gateway(s) allows: "
                + "the gateways hold it to about 799 calls/min whatever its allocation (all but `fifo-backoff`, which "
                + "knows no tenant)",
            quietAt: 4, quietOf: "max_concurrency")
    }

    /// Writes `scenario` and runs `simulate --check` on it: behind one gateway it prints `warning` on a line of its
    /// own, behind `quietGateways` nothing mentioning `marker`.
    static func expectCheckWarning(
        _ scenario: String, warning: String, quietAt quietGateways: Int, quietOf marker: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let path = NSTemporaryDirectory() + "allot-sim-check-\(UUID().uuidString).json"
        try Data(scenario.utf8).write(to: URL(fileURLWithPath: path))
        defer { try? FileManager.default.removeItem(atPath: path) }
        let check = await runCLI(["simulate", "--scenario", path, "--gateways", "1", "--check"])
        #expect(check.code == 0, "\(check.err)", sourceLocation: sourceLocation)
        #expect(check.out.contains("\n  " + warning + "\n"), "\(check.out)", sourceLocation: sourceLocation)
        let wide = await runCLI(["simulate", "--scenario", path, "--gateways", "\(quietGateways)", "--check"])
        #expect(wide.code == 0, "\(wide.err)", sourceLocation: sourceLocation)
        #expect(!wide.out.contains(marker), "\(wide.out)", sourceLocation: sourceLocation)
    }

    /// A task larger than its class's budget at a gateway is warned about (outside evaluation round 37): the
    /// gateways deny its calls beyond the budget, which the baselines do not enforce.
    @Test func aTaskLargerThanItsClassBudgetAtAGatewayIsWarnedAbout() async throws {
        let scenario = Self.oneTenantScenario(name: "budget", duration: 60, tier: "premium", tasksPerMinute: 1)
            .replacingOccurrences(of: #""class": "batch", "calls": {"min": 2, "max": 3}"#,
                with: #""class": "realtime", "calls": {"min": 240, "max": 250}"#)
        // Over two gateways, about 125 at each: no warning.
        try await Self.expectCheckWarning(
            scenario,
            warning: "warning: tenants[0] (\"a\"): its realtime tasks of up to 250 calls leave about 250 calls at "
                + "each, more than the 200 calls of the realtime task budget (`task_budgets`) over 1 gateway(s): "
                + "`allot`'s gateways deny each such task's calls beyond it (`task_budget_exceeded`), the baselines "
                + "enforce no budget",
            quietAt: 2, quietOf: "task budget")
    }

    /// Two policy mix-ups are warned about (outside evaluation round 18): a tenant the policy's `tenants` names in
    /// another tier than the scenario (the run takes the scenario's tier but the policy's own floor), and a pool its
    /// tenants' ceilings cannot fill (the rest is never allocated, and nobody lends what nobody holds).
    @Test func aTierConflictAndAPoolItsCeilingsCannotFillAreWarnedAbout() async throws {
        let (base, policies) = try Self.policyDirectory("mixups")
        defer { try? FileManager.default.removeItem(atPath: base) }
        try Data(
            #"{"tenants": {"a": {"tier": "critical", "weight": 2, "floor": {"rpm": "30%"}}}}"#.utf8
        ).write(to: URL(fileURLWithPath: policies + "/tenants.json"))
        try Data(
            #"""
            {"default_tier": "standard", "tiers": {"free": {"priority": 2, "weight": 1, "ceiling": {"rpm": "20%"}},
             "standard": {"priority": 1, "weight": 2}, "critical": {"priority": 0, "weight": 8}}}
            """#.utf8
        ).write(to: URL(fileURLWithPath: policies + "/tiers.json"))
        let scenario = base + "/mixups.json"
        // Four free tenants (20 % each) alone on the pool: 80 % (79.99… in floating point, not shown as 79.9).
        try Data(
            Self.oneTenantScenario(name: "mixups", duration: 60, tier: "free", tasksPerMinute: 1)
                .replacingOccurrences(of: #""id": "a", "tier""#, with: #""id": "a", "count": 4, "tier""#).utf8
        ).write(to: URL(fileURLWithPath: scenario))
        let check = await runCLI(["simulate", "--scenario", scenario, "--check", "--policy", policies])
        #expect(check.code == 0, "\(check.err)")
        // The first tenant of the entry is "a-01"..., so the policy names neither: only the ceilings.
        #expect(!check.out.contains("policy's tenants"), "\(check.out)")
        let ceilings =
            "  warning: pools[0] (\"p\"): the ceilings of its 4 tenant(s) add up to 80 % of its rpm after the safety "
            + "margin at pools[0].capacity[0] (at_s 0): `allot` never allocates the rest, and capacity nobody is "
            + "allocated is not lent\n"
        #expect(check.out.contains(ceilings), "\(check.out)")

        try Data(
            Self.oneTenantScenario(name: "mixups", duration: 60, tier: "standard", tasksPerMinute: 1).utf8
        ).write(to: URL(fileURLWithPath: scenario))
        let conflict = await runCLI(["simulate", "--scenario", scenario, "--check", "--policy", policies])
        let tier =
            "  warning: tenants[0] (\"a\"): tier \"standard\" here, \"critical\" in the policy's tenants: the run "
            + "uses tier \"standard\" with the policy's own weight × 2; floor rpm 30% for it\n"
        #expect(conflict.out.contains(tier), "\(conflict.out)")
        // Standard has no ceiling: the pool is fine. And without the policy, nothing names the tenant.
        #expect(!conflict.out.contains("ceilings"), "\(conflict.out)")
        let builtIn = await runCLI(["simulate", "--scenario", scenario, "--check"])
        #expect(!builtIn.out.contains("warning"), "\(builtIn.out)")
    }

    /// Floors that over-commit a pool are warned about (outside evaluation round 19: two contracts of 60 % each ran
    /// the pool in degraded mode whenever both were active).
    @Test func aPoolItsFloorsOverCommitIsWarnedAbout() async throws {
        let (base, policies) = try Self.policyDirectory("floors")
        defer { try? FileManager.default.removeItem(atPath: base) }
        func tenants(floor: String) throws {
            let entry = #"{"tier": "standard", "floor": {"rpm": "\#(floor)"}}"#
            try Data(#"{"tenants": {"a-01": \#(entry), "a-02": \#(entry)}}"#.utf8)
                .write(to: URL(fileURLWithPath: policies + "/tenants.json"))
        }
        /// The standard tier with `terms` (`"guard_min": "55%"`) beside its priority and weight, and `tenants.json`.
        func policy(standard terms: String, tenants: String) throws {
            let tier = #"{"priority": 0, "weight": 1\#(terms.isEmpty ? "" : ", " + terms)}"#
            try Data(#"{"default_tier": "standard", "tiers": {"standard": \#(tier)}}"#.utf8)
                .write(to: URL(fileURLWithPath: policies + "/tiers.json"))
            try Data(#"{"tenants": \#(tenants)}"#.utf8).write(to: URL(fileURLWithPath: policies + "/tenants.json"))
        }
        try Data(#"{"default_tier": "standard", "tiers": {"standard": {"priority": 0, "weight": 1}}}"#.utf8)
            .write(to: URL(fileURLWithPath: policies + "/tiers.json"))
        let scenario = base + "/floors.json"
        try Data(
            Self.oneTenantScenario(name: "floors", duration: 60, tier: "standard", tasksPerMinute: 1)
                .replacingOccurrences(of: #""id": "a", "tier""#, with: #""id": "a", "count": 2, "tier""#).utf8
        ).write(to: URL(fileURLWithPath: scenario))
        let check = ["simulate", "--scenario", scenario, "--check", "--policy", policies]
        try tenants(floor: "60%")
        let over = await runCLI(check)
        #expect(over.code == 0, "\(over.err)")
        let warning =
            "  warning: pools[0] (\"p\"): the floors of its 2 tenant(s) add up to 120 % of its rpm after the safety "
            + "margin at pools[0].capacity[0] (at_s 0): while they are all active `allot` runs it in degraded mode "
            + "(starvation guards, then floors by tier priority)\n"
        #expect(over.out.contains(warning), "\(over.out)")
        // Exactly the capacity is no over-commitment.
        try tenants(floor: "50%")
        let full = await runCLI(check)
        #expect(!full.out.contains("the floors of"), "\(full.out)")

        // Guard minimums that over-commit the pool are warned of too (outside evaluation round 34): the engine then
        // holds none of them.
        try policy(standard: #""guard_min": "55%""#, tenants: "{}")
        let guards = await runCLI(check)
        #expect(guards.code == 0, "\(guards.err)")
        func guardWarning(_ percent: Int) -> String {
            "  warning: pools[0] (\"p\"): the guard_min values of its 2 tenant(s), with the floors above them, add up to "
                + "\(percent) % of its rpm after the safety margin at pools[0].capacity[0] (at_s 0): while they all want "
                + "that much `allot` holds none of the guards (the pool is shared by weight; guard_min holds only while "
                + "all fit)\n"
        }
        #expect(guards.out.contains(guardWarning(110)), "\(guards.out)")
        #expect(!guards.out.contains("the floors of"), "\(guards.out)")
        // A floor counts where it is above the guard, as the engine counts it (review: a floor of 85 % beside a guard
        // of 20 % drops both guards, and nothing warned); floors that over-commit the pool alone are degraded mode,
        // which their own warning names.
        try policy(
            standard: #""guard_min": "20%""#, tenants: #"{"a-01": {"tier": "standard", "floor": {"rpm": "85%"}}}"#)
        let floorAndGuard = await runCLI(check)
        #expect(floorAndGuard.out.contains(guardWarning(105)), "\(floorAndGuard.out)")
        #expect(!floorAndGuard.out.contains("the floors of"), "\(floorAndGuard.out)")
        try tenants(floor: "60%")
        let floorsAlone = await runCLI(check)
        #expect(floorsAlone.out.contains("the floors of its 2 tenant(s) add up to 120 %"), "\(floorsAlone.out)")
        #expect(!floorsAlone.out.contains("the guard_min values"), "\(floorsAlone.out)")

        // An absolute floor that resolves above a ceiling in percent (which the loader cannot know) is named once per
        // entry, at the first capacity step where it does: the floor wins.
        try policy(standard: #""ceiling": "20%""#, tenants: #"{"a-02": {"tier": "standard", "floor": {"rpm": 30}}}"#)
        let crossed = await runCLI(check)
        #expect(crossed.code == 0, "\(crossed.err)")
        let crossing =
            "  warning: tenants[0] (\"a\" with count 2), tenant \"a-02\": its floor (30 rpm) is above its ceiling "
            + "(20%, 23.52 rpm after the safety margin) at pools[0].capacity[0] (at_s 0): the floor wins — `allot` holds "
            + "it at 30 rpm while it is active, whatever it asks for (less only under a guard_max, a budget or degraded "
            + "mode; policies/README.md, Floor above ceiling)\n"
        #expect(crossed.out.contains(crossing), "\(crossed.out)")
        #expect(crossed.out.components(separatedBy: "its floor").count == 2, "\(crossed.out)")
        // The other mix: a floor in percent above an absolute ceiling (review L5: it read "(30% rpm)").
        try policy(
            standard: #""ceiling": {"rpm": 30}"#, tenants: #"{"a-01": {"tier": "standard", "floor": {"rpm": "30%"}}}"#)
        let share = await runCLI(check)
        #expect(
            share.out.contains(
                "tenant \"a-01\": its floor (30%, 35.28 rpm after the safety margin) is above its ceiling (30 rpm) at "
                    + "pools[0].capacity[0] (at_s 0): the floor wins — `allot` holds it at 35.28 rpm while it is active"),
            "\(share.out)")
    }

    /// A tick other than the shipped 5 s is warned about (outside evaluation round 18): the dampening counts ticks, so
    /// the scenario's `policy.tick_interval_s` or the policy's `loop.interval_s` changes the controller.
    @Test func aTickOtherThanTheShippedOneIsWarnedAbout() async throws {
        let (base, policies) = try Self.policyDirectory("tick")
        defer { try? FileManager.default.removeItem(atPath: base) }
        let plain = Self.oneTenantScenario(name: "tick", duration: 60, tier: "standard", tasksPerMinute: 1)
        func scenario(tick: Int) throws -> String {
            let path = base + "/tick-\(tick).json"
            let text = plain.replacingOccurrences(
                of: #""duration_s": 60,"#, with: #""duration_s": 60, "policy": {"tick_interval_s": \#(tick)},"#)
            try Data(text.utf8).write(to: URL(fileURLWithPath: path))
            return path
        }
        let fast = await runCLI(["simulate", "--scenario", try scenario(tick: 1), "--check"])
        #expect(fast.code == 0, "\(fast.err)")
        let warning =
            "  warning: the loop ticks every 1 s (the scenario's policy.tick_interval_s), the shipped policy every 5 s: "
            + "the dampening counts ticks — a direction change waits persist_ticks 3 (3 s; 15 s at 5 s) and each tick "
            + "may step by max_up 0.25 or max_down 0.5 (60 ticks a minute; 12 at 5 s) — so `allot` acts over other "
            + "times and rates than its defaults were tuned for (policies/README.md, interval_s)\n"
        #expect(fast.out.contains(warning), "\(fast.out)")
        // Before a run it goes to stderr.
        let run = await runCLI(["simulate", "--scenario", try scenario(tick: 1), "--strategy", "static"])
        #expect(run.err.contains("allot simulate: warning: the loop ticks every 1 s"), "\(run.err)")
        // 5 s, set or not: no warning.
        let shipped = await runCLI(["simulate", "--scenario", try scenario(tick: 5), "--check"])
        #expect(!shipped.out.contains("ticks every"), "\(shipped.out)")
        // The policy's own interval, when the scenario sets none.
        try Data(#"{"loop": {"interval_s": 30}}"#.utf8).write(to: URL(fileURLWithPath: policies + "/engine.json"))
        try Data(#"{"default_tier": "standard", "tiers": {"standard": {"priority": 0, "weight": 1}}}"#.utf8)
            .write(to: URL(fileURLWithPath: policies + "/tiers.json"))
        let path = base + "/plain.json"
        try Data(plain.utf8).write(to: URL(fileURLWithPath: path))
        let slow = await runCLI(["simulate", "--scenario", path, "--check", "--policy", policies])
        #expect(slow.code == 0, "\(slow.err)")
        #expect(
            slow.out.contains(
                "warning: the loop ticks every 30 s (the policy's loop.interval_s), the shipped policy every 5 s: the "
                    + "dampening counts ticks — a direction change waits persist_ticks 3 (90 s; 15 s at 5 s)"),
            "\(slow.out)")
    }

    /// A tenant expected to send less than one task in the whole run is warned about: any rate above 0 passes the
    /// "every rate is 0" check (round 11: 5e-324).
    @Test func aTenantThatMaySendNothingIsWarnedAbout() async throws {
        let path = NSTemporaryDirectory() + "allot-sim-few-\(UUID().uuidString).json"
        defer { try? FileManager.default.removeItem(atPath: path) }
        for (rate, shown) in [("5e-324", "less than 0.01"), ("0.5", "0.5")] {
            let text = Self.oneTenantScenario(name: "few", duration: 60, tier: "free", tasksPerMinute: 1)
                .replacingOccurrences(of: #""tasks_per_min": 1.0"#, with: #""tasks_per_min": \#(rate)"#)
            try Data(text.utf8).write(to: URL(fileURLWithPath: path))
            let check = await runCLI(["simulate", "--scenario", path, "--check"])
            #expect(check.code == 0, "\(check.err)")
            let warning =
                "warning: tenants[0] (\"a\"): expects \(shown) tasks in the whole run (its tasks_per_min × how long "
                + "each is in force): it may send none"
            #expect(check.out.contains("\n  " + warning + "\n"), "\(check.out)")
        }
        // One task a minute for a minute: no warning.
        try Data(Self.oneTenantScenario(name: "few", duration: 60, tier: "free", tasksPerMinute: 1).utf8)
            .write(to: URL(fileURLWithPath: path))
        #expect(!(await runCLI(["simulate", "--scenario", path, "--check"])).out.contains("may send none"))
    }

    /// An `--out` that cannot take the files is refused before anything is simulated, with the reason.
    @Test func anUnusableOutputDirectoryIsRefusedBeforeTheRun() async throws {
        let file = NSTemporaryDirectory() + "allot-sim-file-\(UUID().uuidString)"
        try Data("x".utf8).write(to: URL(fileURLWithPath: file))
        defer { try? FileManager.default.removeItem(atPath: file) }
        for (out, reason) in [
            (file, "exists and is not a directory"),
            (file + "/below", "cannot create the directory (Not a directory)"),
        ] {
            let result = await runCLI(["simulate", "--scenario", "cold-start", "--strategy", "static", "--out", out])
            #expect(result.code == 1)
            #expect(result.err == "allot simulate: --out \(out): \(reason)", "\(result.err)")
            #expect(result.out.isEmpty)  // nothing ran
        }
    }

    /// `--policy DIR` runs allot with a candidate policy: its tiers are the ones a scenario may name, its
    /// settings are what the engine applies (here a ceiling the allocation never passes), and a policy that
    /// does not load is refused with the loader's message, before anything runs.
    @Test func aCandidatePolicyDirectoryIsWhatAllotRunsWith() async throws {
        let (base, policies) = try Self.policyDirectory("policy")
        defer { try? FileManager.default.removeItem(atPath: base) }
        try Data(
            #"{"default_tier": "gold", "tiers": {"gold": {"priority": 0, "weight": 1, "ceiling": {"rpm": 30, "tpm": 100000}}}}"#
                .utf8
        ).write(to: URL(fileURLWithPath: policies + "/tiers.json"))
        let scenario = base + "/gold.json"
        try Data(Self.oneTenantScenario(name: "gold", duration: 120, tier: "gold", tasksPerMinute: 20).utf8)
            .write(to: URL(fileURLWithPath: scenario))

        let withoutPolicy = await runCLI(["simulate", "--scenario", scenario, "--strategy", "allot"])
        #expect(withoutPolicy.code == 1)
        #expect(
            withoutPolicy.err.contains(
                #"tenants[0].tier: unknown tier "gold" (tiers: critical, free, premium, standard)"#))

        let out = base + "/out"
        let result = await runCLI([
            "simulate", "--scenario", scenario, "--strategy", "allot", "--policy", policies, "--out", out,
        ])
        #expect(result.code == 0, "\(result.err)")
        // Which policy ran, and its version as `allot serve` names it: on the table's second line, in report.json
        // (beside SPEC 12's keys) and from --check.
        let version = try PolicySource.directory(policies).load().version
        #expect(result.out.split(separator: "\n")[1] == "policy \(policies), policy_version \(version)")
        let report = try JSON.parse(try String(contentsOfFile: out + "/report.json", encoding: .utf8))
        #expect(report["policy"] == ["source": .string(policies), "version": .string(version)])
        #expect(report["scenario"] == "gold" && report["seed"] == 1 && report["strategies"]?["allot"] != nil)
        let check = await runCLI(["simulate", "--scenario", scenario, "--check", "--policy", policies])
        #expect(check.out.hasSuffix("\n  policy \(policies), policy_version \(version)"), "\(check.out)")
        let csv = try String(contentsOfFile: out + "/timeline.csv", encoding: .utf8).split(separator: "\n")
        let header = csv[0].split(separator: ",", omittingEmptySubsequences: false)
        let allocation = try #require(header.firstIndex(of: "allocation_rpm"))
        let allocations = csv.dropFirst().map { $0.split(separator: ",", omittingEmptySubsequences: false) }
            .filter { $0[2] == "tenant" }.compactMap { Double($0[allocation]) }
        // Twelve 10-s samples; the first may end before the tenant's first allocation (blank: its entry is not a move).
        #expect((11...12).contains(allocations.count), "\(allocations)")
        #expect(allocations.max() == 30, "the gold tier's ceiling bounds the allocation: \(allocations)")

        try Data(#"{"tiers": {"gold": {"weight": -1}}}"#.utf8).write(to: URL(fileURLWithPath: policies + "/bad.json"))
        let rejected = await runCLI(["simulate", "--scenario", scenario, "--policy", policies])
        #expect(rejected.code == 1)
        #expect(rejected.err.contains("bad.json: $.tiers.gold.weight: must be between 0.001 and 1000 (got -1)"))
        #expect(rejected.out.isEmpty)
        let missing = await runCLI(["simulate", "--scenario", scenario, "--policy", base + "/none"])
        #expect(missing.code == 1)
        #expect(missing.err.contains("cannot read policy directory \(base)/none"))
    }

    /// A tenant the policy's tenants.json gives its own weight (b: 0.5 × gold's 2) has that weight wherever the
    /// simulator weighs it, as `allot` is given it: `static` provisions 80 and 40 of the pool's 120 rpm, and the
    /// metrics' entitlement splits the true capacity the same way (by the tier's weight alone: 60 and 60, and a
    /// tenant allot served by its own weight counted as starved).
    @Test func aTenantsOwnWeightInThePolicyIsWhatStaticAndTheEntitlementUse() async throws {
        let (base, policies) = try Self.policyDirectory("tenant-terms")
        defer { try? FileManager.default.removeItem(atPath: base) }
        try Data(#"{"default_tier": "gold", "tiers": {"gold": {"priority": 0, "weight": 2}}}"#.utf8)
            .write(to: URL(fileURLWithPath: policies + "/tiers.json"))
        func tenant(_ id: String) -> String {
            """
            {"id": "\(id)", "tier": "gold", "pool": "p", "arrivals": [{"at_s": 0, "tasks_per_min": 100}],
             "task": {"class": "batch", "calls": {"min": 2, "max": 3}, "parallelism": 1,
                      "prompt_tokens": {"mean": 300}, "completion_tokens": {"mean": 50}, "deadline_s": 30}}
            """
        }
        let scenario = base + "/weights.json"
        try Data(
            """
            {"name": "weights", "description": "test", "headline": {"metric": "upstream_429_rate", "better": "lower"},
             "duration_s": 120, "pools": [{"id": "p", "provider": "anthropic", "declared_rpm": 120,
               "declared_tpm": 2000000, "capacity": [{"at_s": 0, "rpm": 120, "tpm": 2000000}]}],
             "tenants": [\(tenant("a")), \(tenant("b"))]}
            """.utf8
        ).write(to: URL(fileURLWithPath: scenario))

        /// The last interval's (allocation, entitlement) in rpm of each tenant, `static`.
        func lastRPM(_ arguments: [String]) async throws -> [String: [String]] {
            let out = base + "/out-\(UUID().uuidString)"
            let result = await runCLI(
                ["simulate", "--scenario", scenario, "--strategy", "static", "--out", out] + arguments)
            #expect(result.code == 0, "\(result.err)")
            let rows = try String(contentsOfFile: out + "/timeline.csv", encoding: .utf8).split(separator: "\n")
                .map { $0.split(separator: ",", omittingEmptySubsequences: false).map(String.init) }
            let header = rows[0]
            let columns = ["t_s", "kind", "id", "allocation_rpm", "entitled_rpm"].map { header.firstIndex(of: $0)! }
            var last: [String: [String]] = [:]
            for row in rows.dropFirst() where row[columns[1]] == "tenant" && row[columns[0]] == "110" {
                last[row[columns[2]]] = [row[columns[3]], row[columns[4]]]
            }
            return last
        }
        #expect(try await lastRPM(["--policy", policies]) == ["a": ["60.0000", "60.0000"], "b": ["60.0000", "60.0000"]])
        try Data(#"{"tenants": {"b": {"tier": "gold", "weight": 0.5}}}"#.utf8)
            .write(to: URL(fileURLWithPath: policies + "/tenants.json"))
        #expect(try await lastRPM(["--policy", policies]) == ["a": ["80.0000", "80.0000"], "b": ["40.0000", "40.0000"]])
    }

    /// `--seeds` runs every listed seed and prints the means; `--out` then writes report.json and
    /// results.md (no timelines); a bad list is a usage error naming what is wrong.
    @Test func seedsPrintTheMeansAndWriteEachSeed() async throws {
        let directory = NSTemporaryDirectory() + "allot-sim-seeds-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        // A timeline left by an earlier single-seed run into the same directory goes (the means have none); a
        // directory of that name is not ours and stays.
        try FileManager.default.createDirectory(atPath: directory + "/timeline.svg", withIntermediateDirectories: true)
        try Data("stale".utf8).write(to: URL(fileURLWithPath: directory + "/timeline.csv"))
        try Data("stale".utf8).write(to: URL(fileURLWithPath: directory + "/tasks.csv"))
        let result = await runCLI([
            "simulate", "--scenario", "cold-start", "--strategy", "static", "--seeds", "2-3", "--out", directory,
        ])
        #expect(result.code == 0, "\(result.err)")
        #expect(result.out.hasPrefix("scenario cold-start, means over seeds 2, 3; headline"))
        #expect(result.err.contains("cold-start seed 2: 1 strategy in"))
        #expect(result.err.contains("cold-start seed 3: 1 strategy in"))
        let report = try String(contentsOfFile: directory + "/report.json", encoding: .utf8)
        #expect(report.contains("\"per_seed\""))
        #expect(report.contains(#""policy": {"#))
        #expect(result.out.split(separator: "\n")[1].hasPrefix("policy built-in, policy_version "))
        #expect(FileManager.default.fileExists(atPath: directory + "/results.md"))
        #expect(!FileManager.default.fileExists(atPath: directory + "/timeline.csv"))
        #expect(!FileManager.default.fileExists(atPath: directory + "/tasks.csv"))
        #expect(result.err.contains("allot simulate: removed \(directory)/timeline.csv, an earlier run's"))
        var isDirectory: ObjCBool = false
        #expect(FileManager.default.fileExists(atPath: directory + "/timeline.svg", isDirectory: &isDirectory))
        #expect(isDirectory.boolValue)
        #expect(!result.err.contains("timeline.svg"))

        let bad = await runCLI(["simulate", "--scenario", "cold-start", "--seeds", "5-1"])
        #expect(bad.code == 2)
        #expect(bad.err == "allot simulate: --seeds: \"5-1\" is not a seed or a range A-B of seeds (A <= B)")
    }

    /// results.md of a scenario of several pools: the README table's rows, a blank line, then the per-pool table
    /// (what scripts/sim-results leaves out); of one pool, the rows alone, as ever.
    @Test func resultsMDOfSeveralPoolsAddsAPerPoolTableAfterTheRows() async throws {
        let directory = NSTemporaryDirectory() + "allot-sim-pools-\(UUID().uuidString)"
        let path = directory + ".json"
        let one = Self.oneTenantScenario(name: "pools", duration: 60, tier: "standard", tasksPerMinute: 6)
        // The same with a second pool, "q", and a tenant on it.
        let task = """
            "task": {"class": "batch", "calls": {"min": 2, "max": 3}, "parallelism": 1,
                     "prompt_tokens": {"mean": 300}, "completion_tokens": {"mean": 50}, "deadline_s": 30}
            """
        let two = """
            {"name": "pools", "description": "test", "headline": {"metric": "upstream_429_rate", "better": "lower"},
             "duration_s": 60,
             "pools": [{"id": "p", "provider": "anthropic", "declared_rpm": 120, "declared_tpm": 200000,
                        "capacity": [{"at_s": 0, "rpm": 120, "tpm": 200000}]},
                       {"id": "q", "provider": "openai", "declared_rpm": 60, "declared_tpm": 200000,
                        "capacity": [{"at_s": 0, "rpm": 60, "tpm": 200000}]}],
             "tenants": [{"id": "a", "tier": "standard", "pool": "p", "arrivals": [{"at_s": 0, "tasks_per_min": 6}],
                          \(task)},
                         {"id": "b", "tier": "standard", "pool": "q", "arrivals": [{"at_s": 0, "tasks_per_min": 6}],
                          \(task)}]}
            """
        defer {
            try? FileManager.default.removeItem(atPath: path)
            try? FileManager.default.removeItem(atPath: directory)
        }
        func results(_ scenario: String) async throws -> (out: String, results: [Substring]) {
            try Data(scenario.utf8).write(to: URL(fileURLWithPath: path))
            let result = await runCLI(["simulate", "--scenario", path, "--strategy", "static", "--out", directory])
            #expect(result.code == 0, "\(result.err)")
            let text = try String(contentsOfFile: directory + "/results.md", encoding: .utf8)
            return (result.out, text.split(separator: "\n", omittingEmptySubsequences: false))
        }
        let (outTwo, lines) = try await results(two)
        try #require(lines.count == 9, "\(lines)")  // header (2), static's row, blank, pools' header (2), 2 pools, ""
        #expect(lines[2].hasPrefix("| pools | upstream_429_rate (lower) | static | "))
        #expect(lines[3] == "")
        #expect(lines[4...5] == ["| strategy | pool | utilisation | 429 rate |", "|---|---|---:|---:|"])
        #expect(lines[6].hasPrefix("| static | p | - | ") && lines[7].hasPrefix("| static | q | - | "))
        #expect(outTwo.contains("\n\nstrategy  pool  "))
        let (outOne, rows) = try await results(one)
        #expect(rows.count == 4 && !rows.dropLast().contains(""))  // header (2), static's row, ""
        #expect(!outOne.contains("\n\n"))
    }
}
