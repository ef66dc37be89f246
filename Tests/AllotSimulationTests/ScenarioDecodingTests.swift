import AllotCore
import Foundation
import Testing

@testable import AllotSimulation

/// A small valid scenario; `edit` changes its JSON text before decoding.
func scenarioJSON(
    duration: Int = 120, tenants: String? = nil, pools: String? = nil, extra: String = ""
) -> String {
    let pools =
        pools ?? """
            [{"id": "openai/gpt-4o", "provider": "openai", "declared_rpm": 600, "declared_tpm": 1000000,
              "capacity": [{"at_s": 0, "rpm": 600, "tpm": 1000000}]}]
            """
    let tenants =
        tenants ?? """
            [{"id": "acme", "count": 2, "tier": "premium", "pool": "openai/gpt-4o",
              "arrivals": [{"at_s": 0, "tasks_per_min": 6}],
              "task": {"class": "interactive", "calls": {"min": 2, "max": 4}, "parallelism": 2,
                       "prompt_tokens": {"mean": 500, "sd": 100}, "completion_tokens": {"mean": 100, "sd": 20},
                       "deadline_s": 60}}]
            """
    return """
        {"name": "tiny", "description": "test", "headline": {"metric": "utilisation", "better": "higher"},
         "duration_s": \(duration), "pools": \(pools), "tenants": \(tenants)\(extra)}
        """
}

/// Two pools of 60 rpm, `a` and `b`.
let twoSmallPools = """
    [{"id": "a", "provider": "openai", "declared_rpm": 60, "declared_tpm": 1000,
      "capacity": [{"at_s": 0, "rpm": 60, "tpm": 1000}]},
     {"id": "b", "provider": "openai", "declared_rpm": 60, "declared_tpm": 1000,
      "capacity": [{"at_s": 0, "rpm": 60, "tpm": 1000}]}]
    """

func decode(_ text: String) throws(ScenarioError) -> Scenario {
    try Scenario.decode(Array(text.utf8), source: "test.json")
}

@Suite struct ScenarioDecodingTests {
    @Test func decodesDefaultsAndExpandsCount() throws {
        let scenario = try decode(scenarioJSON())
        #expect(scenario.name == "tiny")
        #expect(scenario.sampleIntervalSeconds == 10)
        #expect(scenario.gateways == 3)
        #expect(scenario.tenants.map(\.id) == ["acme-01", "acme-02"])
        #expect(scenario.tenants[0].maxRetries == 6)
        #expect(scenario.tenants[0].behaviour == .honest)
        #expect(scenario.tenants[0].task.taskClass == .interactive)
        #expect(scenario.pools[0].latency == LatencyModel())
        #expect(scenario.headline == ScenarioHeadline(metric: "utilisation", higherIsBetter: true))
    }

    /// The scenario's `policy` reports its first fault in file order (outside evaluation round 44, L10a: an unknown
    /// field after a tick out of range hid the range).
    @Test func aPolicysFirstFaultInTheFileIsReported() {
        for (policy, path, reason) in [
            (#"{"tick_interval_s": 61, "extra": 1}"#, "policy.tick_interval_s", "must be between 1 and 60, not 61"),
            (#"{"extra": 1, "tick_interval_s": 61}"#, "policy.extra", "unknown field (allowed: tick_interval_s)"),
            ("[]", "policy", "must be an object, not array"),
        ] {
            #expect(throws: ScenarioError(source: "test.json", path: path, reason: reason)) {
                try decode(scenarioJSON(extra: #", "policy": "# + policy))
            }
        }
    }

    /// A file saved with a UTF-8 byte order mark (Windows editors write one) decodes like one without; a tenant count
    /// over the limit says how many there were (outside evaluation round 18).
    @Test func aByteOrderMarkIsSkippedAndTooManyTenantsAreCounted() throws {
        let plain = try decode(scenarioJSON())
        let marked = try Scenario.decode([0xEF, 0xBB, 0xBF] + Array(scenarioJSON().utf8), source: "test.json")
        #expect(marked.tenants.map(\.id) == plain.tenants.map(\.id))
        #expect(marked.pools == plain.pools)
        let solo =
            #"{"id": "solo", "tier": "free", "pool": "openai/gpt-4o", "arrivals": [{"at_s": 0, "tasks_per_min": 1}], "#
            + #""task": {"class": "batch", "calls": {"min": 1, "max": 1}, "parallelism": 1, "#
            + #""prompt_tokens": {"mean": 10}, "completion_tokens": {"mean": 10}, "deadline_s": 60}}"#
        let many = scenarioJSON().replacingOccurrences(of: #""count": 2"#, with: #""count": 1000"#)
            .replacingOccurrences(
                of: #""tenants": [{"id": "acme""#, with: #""tenants": ["# + solo + #", {"id": "acme""#)
        let error = #expect(throws: ScenarioError.self) { try decode(many) }
        #expect(error?.path == "tenants")
        #expect(error?.reason == "1001 tenants after expanding count, more than 1000")
    }

    /// docs/scenarios.md's example is a scenario that decodes and runs: the format documented by example, kept true.
    @Test func theDocumentedExampleDecodesAndRuns() async throws {
        let docs = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("docs/scenarios.md")
        let text = try String(contentsOf: docs, encoding: .utf8)
        let start = try #require(text.range(of: "```json\n"))
        let end = try #require(text.range(of: "\n```", range: start.upperBound..<text.endIndex))
        let scenario = try Scenario.decode(Array(text[start.upperBound..<end.lowerBound].utf8), source: "example")
        #expect(scenario.name == "support-surge")
        #expect(scenario.headline == ScenarioHeadline(metric: "slo_attainment", tier: "premium", higherIsBetter: true))
        #expect(
            scenario.tenants.map(\.id) == [
                "pipeline", "desk", "small-01", "small-02", "small-03", "small-04", "small-05",
            ])
        #expect(scenario.pools[0].capacity.count == 2)
        #expect(scenario.pools[0].overload.count == 1)
        #expect(scenario.tenants[1].task.thinkSeconds == 0.5)
        let trace = try await Simulator.run(scenario, strategy: .static, seed: 1)
        #expect(trace.samples.count == 90)
    }

    @Test func everyBuiltInDecodes() throws {
        #expect(Scenario.builtinNames.count >= 10)
        for name in [
            "night-collision", "silent-starvation", "capacity-drop", "cold-start", "gaming", "burst-vs-sustained",
            "tpm-vs-rpm", "noisy-signals", "fleet-hour", "blind-capacity-drop",
        ] {
            let scenario = try Scenario.builtin(named: name)
            #expect(scenario.name == name)
        }
        #expect(try Scenario.builtin(named: "fleet-hour").tenants.count == 50)
        #expect(try Scenario.builtin(named: "fleet-hour").durationSeconds == 3600)
        #expect(try Scenario.builtin(named: "blind-capacity-drop").pools.allSatisfy { $0.headerMissing == 1 })
    }

    /// Times and intervals that could never happen, pools nobody uses, a headline's direction, fractions.
    static let consistencyCases: [(String, String, String)] = [
        (
            scenarioJSON().replacingOccurrences(of: #""count": 2, "#, with: #""count": 1.5, "#), "tenants[0].count",
            "must be an integer, not 1.5"
        ),
        (
            scenarioJSON(extra: #", "sample_interval_s": 100"#), "sample_interval_s",
            "must be at most half of duration_s (60), not 100"
        ),
        (
            scenarioJSON().replacingOccurrences(
                of: #"[{"at_s": 0, "rpm": 600, "tpm": 1000000}]"#,
                with: #"[{"at_s": 0, "rpm": 600, "tpm": 1000000}, {"at_s": 120, "rpm": 300, "tpm": 1000000}]"#),
            "pools[0].capacity[1].at_s", "must be before duration_s (120), not 120"
        ),
        (
            scenarioJSON().replacingOccurrences(
                of: #""arrivals": [{"at_s": 0, "tasks_per_min": 6}]"#,
                with: #""arrivals": [{"at_s": 600, "tasks_per_min": 6}]"#),
            "tenants[0].arrivals[0].at_s", "must be before duration_s (120), not 600"
        ),
        (
            scenarioJSON(
                pools: #"[{"id": "openai/gpt-4o", "provider": "openai", "declared_rpm": 600, "declared_tpm": 1000000, "#
                    + #""capacity": [{"at_s": 0, "rpm": 600, "tpm": 1000000}]}, {"id": "spare", "provider": "openai", "#
                    + #""declared_rpm": 60, "declared_tpm": 100000, "capacity": [{"at_s": 0, "rpm": 60, "tpm": 100000}]}]"#
            ), "pools[1].id", #"no tenant uses pool "spare""#
        ),
        (
            scenarioJSON().replacingOccurrences(of: #""better": "higher""#, with: #""better": "lower""#),
            "headline.better", "utilisation is better higher, not lower"
        ),
        (
            scenarioJSON().replacingOccurrences(
                of: #"{"metric": "utilisation", "better": "higher"}"#,
                with: #"{"metric": "slo_attainment", "tier": "critical", "better": "higher"}"#),
            "headline.tier", #"no tenant has tier "critical" (the tenants' tiers: premium)"#
        ),
        (
            scenarioJSON().replacingOccurrences(of: #""duration_s": 120"#, with: #""duration_s": 120.5"#),
            "duration_s", "must be an integer, not 120.5"
        ),
        (scenarioJSON(extra: #", "sample_interval_s": 2.5"#), "sample_interval_s", "must be an integer, not 2.5"),
        (
            scenarioJSON().replacingOccurrences(of: #""description": "test""#, with: #""description": """#),
            "description", "must not be empty"
        ),
        (
            scenarioJSON().replacingOccurrences(of: #""description": "test""#, with: #""description": " \t ""#),
            "description", "must not be empty"
        ),
        (
            scenarioJSON().replacingOccurrences(
                of: #""arrivals": [{"at_s": 0, "tasks_per_min": 6}]"#,
                with: #""arrivals": [{"at_s": 0, "tasks_per_min": 0}, {"at_s": 60, "tasks_per_min": 0}]"#),
            "tenants[0].arrivals", "every rate is 0: the tenant never sends a task"
        ),
        (
            scenarioJSON().replacingOccurrences(
                of: #""capacity": [{"at_s": 0, "rpm": 600, "tpm": 1000000}]"#,
                with: #""capacity": [{"at_s": 0, "rpm": 600, "tpm": 1000000}], "overload": "#
                    + #"[{"from_s": 10, "to_s": 60, "rate": 0.2}, {"from_s": 60, "to_s": 70, "rate": 0.1}, "#
                    + #"{"from_s": 50, "to_s": 55, "rate": 0.5}]"#),
            "pools[0].overload[2]",
            "overlaps pools[0].overload[0] (from_s 10, to_s 60): windows must not overlap (one rate at a time)"
        ),
        (
            scenarioJSON().replacingOccurrences(
                of: #""capacity": [{"at_s": 0, "rpm": 600, "tpm": 1000000}]"#,
                with: #""capacity": [{"at_s": 0, "rpm": 600, "tpm": 1000000}], "latency_warning_s": 200"#),
            "pools[0].latency_warning_s", "must be at most duration_s (120), not 200"
        ),
        (
            scenarioJSON().replacingOccurrences(
                of: #""capacity": [{"at_s": 0, "rpm": 600, "tpm": 1000000}]"#,
                with: #""capacity": [{"at_s": 0, "rpm": 600, "tpm": 1000000}], "overload": "#
                    + #"[{"from_s": 10, "to_s": 60, "rate": 0.2}, {"from_s": 60, "to_s": 70, "rate": 0}]"#),
            "pools[0].overload[1].rate", "must be above 0 (a window of rate 0 refuses nothing)"
        ),
        (
            scenarioJSON().replacingOccurrences(
                of: #""capacity": [{"at_s": 0, "rpm": 600, "tpm": 1000000}]"#,
                with: #""capacity": [{"at_s": 0, "rpm": 600, "tpm": 1000000}], "#
                    + #""noise": {"header_jitter": 0.2, "header_missing": 1}"#),
            "pools[0].noise.header_jitter",
            "must be 0 when header_missing is 1 (no answer carries a header to jitter), not 0.2"
        ),
        // The values in order, both quoted (outside evaluation round 23).
        (
            scenarioJSON().replacingOccurrences(
                of: #""capacity": [{"at_s": 0, "rpm": 600, "tpm": 1000000}]"#,
                with: #""capacity": [{"at_s": 0, "rpm": 600, "tpm": 1000000}], "overload": "#
                    + #"[{"from_s": 60, "to_s": 30, "rate": 0.2}]"#),
            "pools[0].overload[0].to_s", "must be after from_s (60), not 30"
        ),
        (
            scenarioJSON().replacingOccurrences(
                of: #""capacity": [{"at_s": 0, "rpm": 600, "tpm": 1000000}]"#,
                with: #""capacity": [{"at_s": 0, "rpm": 600, "tpm": 1000000}, {"at_s": 0, "rpm": 300, "tpm": 1000000}]"#
            ),
            "pools[0].capacity[1].at_s", "must be after the previous step's at_s (0), not 0"
        ),
        (
            scenarioJSON().replacingOccurrences(
                of: #""arrivals": [{"at_s": 0, "tasks_per_min": 6}]"#,
                with: #""arrivals": [{"at_s": 0, "tasks_per_min": 6}, {"at_s": 0, "tasks_per_min": 2}]"#),
            "tenants[0].arrivals[1].at_s", "must be after the previous step's at_s (0), not 0"
        ),
    ]

    @Test(arguments: consistencyCases)
    func rejectsWhatCouldNeverHappen(text: String, path: String, reason: String) {
        rejectsWithThePathAndReason(text: text, path: path, reason: reason)
    }

    /// Names and ids out of their alphabet: the message lists each allowed character on its own ('-', '.', '_', not
    /// one string "'._'").
    static let identifierCases: [(String, String, String)] = [
        (
            scenarioJSON().replacingOccurrences(of: #""name": "tiny""#, with: #""name": "Tiny""#), "name",
            #"must be 1 to 64 characters of a-z, 0-9, '-', not "Tiny""#
        ),
        (
            scenarioJSON().replacingOccurrences(of: #""id": "acme""#, with: #""id": "acme+1""#), "tenants[0].id",
            #"must be 1 to 64 characters of a-z, 0-9, '-', '.', '_', not "acme+1""#
        ),
        (
            scenarioJSON().replacingOccurrences(of: #""id": "openai/gpt-4o""#, with: #""id": "openai:gpt-4o""#),
            "pools[0].id", #"must be 1 to 64 characters of a-z, 0-9, '-', '.', '/', '_', not "openai:gpt-4o""#
        ),
    ]

    @Test(arguments: identifierCases)
    func rejectsANameOutOfItsAlphabet(text: String, path: String, reason: String) {
        rejectsWithThePathAndReason(text: text, path: path, reason: reason)
    }

    /// `null` is a value of the wrong type, for a number as for anything else, as in policies: it read as absent for
    /// numbers only (`"gateways": null` ran with 3 gateways, `"duration_s": null` said "missing"; round 10).
    @Test func nullIsAValueOfTheWrongTypeEverywhere() {
        let cases: [(text: String, path: String, reason: String)] = [
            (scenarioJSON(extra: #", "gateways": null"#), "gateways", "must be an integer, not null"),
            (
                scenarioJSON().replacingOccurrences(of: #""duration_s": 120, "#, with: #""duration_s": null, "#),
                "duration_s", "must be an integer, not null"
            ),
            (
                scenarioJSON().replacingOccurrences(of: #""parallelism": 2"#, with: #""parallelism": null"#),
                "tenants[0].task.parallelism", "must be an integer, not null"
            ),
            (scenarioJSON(tenants: "null"), "tenants", "must be an array, not null"),
        ]
        for (text, path, reason) in cases { rejectsWithThePathAndReason(text: text, path: path, reason: reason) }
        // A headline's `tier` may be null, as report.json writes it for a metric of no tier.
        #expect(throws: Never.self) {
            try decode(
                scenarioJSON().replacingOccurrences(
                    of: #""better": "higher""#, with: #""better": "higher", "tier": null"#))
        }
    }

    /// An integer too large for the machine's is out of range, not "not an integer" (round 11).
    @Test func aHugeIntegerIsJudgedByItsRange() {
        rejectsWithThePathAndReason(
            text: scenarioJSON().replacingOccurrences(
                of: #""duration_s": 120, "#, with: #""duration_s": 18446744073709551616, "#),
            path: "duration_s", reason: "must be between 60 and 86400, not 1.8446744073709552e+19")
        rejectsWithThePathAndReason(
            text: scenarioJSON().replacingOccurrences(of: #""duration_s": 120, "#, with: #""duration_s": 120.5, "#),
            path: "duration_s", reason: "must be an integer, not 120.5")
    }

    /// A number JSON cannot hold (`1e400`) fails the parse, which names the field like every other error (outside
    /// evaluation round 19: it was reported by its line and column only).
    @Test func aNumberOutOfJSONsRangeIsNamedByItsField() {
        rejectsWithThePathAndReason(
            text: scenarioJSON().replacingOccurrences(of: #""tasks_per_min": 6"#, with: #""tasks_per_min": 1e400"#),
            path: "tenants[0].arrivals[0].tasks_per_min",
            reason: "not valid JSON: line 4, column 45: number out of range")
    }

    /// A `static_quota` above the pool's largest capacity can never bind: warned about, per dimension; quotas that
    /// only add up to more than the pool (overbooking) are not.
    @Test func aStaticQuotaAboveItsPoolIsWarnedAbout() throws {
        func warnings(_ quota: String) throws -> [String] {
            try decode(
                scenarioJSON().replacingOccurrences(
                    of: #""tier": "premium","#, with: #""tier": "premium", "static_quota": \#(quota),"#)
            ).warnings.filter { $0.contains("static_quota") }
        }
        #expect(
            try warnings(#"{"rpm": 601, "tpm": 2000000}"#) == [
                #"tenants[0] ("acme" with count 2): static_quota.rpm 601 is above pool "openai/gpt-4o"'s largest "#
                    + "capacity, 600 rpm: the static baseline never holds the tenant back there",
                #"tenants[0] ("acme" with count 2): static_quota.tpm 2000000 is above pool "openai/gpt-4o"'s largest "#
                    + "capacity, 1000000 tpm: the static baseline never holds the tenant back there",
            ])
        // Two tenants of 400 rpm each on 600: overbooked, not warned.
        #expect(try warnings(#"{"rpm": 400, "tpm": 1000000}"#).isEmpty)
    }

    /// A declared capacity four times the truth at t = 0 or more, or a quarter or less, is warned about per dimension
    /// (outside evaluation round 31: 100× passed silently); a stale declaration within that factor is not.
    @Test func aDeclarationFarFromTheTruthIsWarnedAbout() throws {
        func warnings(rpm: Int, tpm: Int) throws -> [String] {
            try decode(
                scenarioJSON().replacingOccurrences(
                    of: #""declared_rpm": 600, "declared_tpm": 1000000"#,
                    with: #""declared_rpm": \#(rpm), "declared_tpm": \#(tpm)"#)
            ).warnings.filter { $0.contains("declared_") }
        }
        let consequence =
            ": the baselines provision from the declaration (`static` without a static_quota, `fifo-backoff`'s one "
            + "bucket, `equal-split`) and `allot` starts from it until the provider states a limit; correct it unless "
            + "the file means a stale declaration"
        #expect(
            try warnings(rpm: 60_000, tpm: 250_000) == [
                #"pools[0].declared_rpm 60000 (pool "openai/gpt-4o") is 100× its true capacity at t=0 (600 rpm)"#
                    + consequence,
                #"pools[0].declared_tpm 250000 (pool "openai/gpt-4o") is 4× below its true capacity at t=0 "#
                    + "(1000000 tpm)" + consequence,
            ])
        #expect(try warnings(rpm: 2399, tpm: 250_001).isEmpty)
    }

    /// A task parallelism above its largest number of calls never binds: warned about once per entry.
    @Test func aParallelismAboveTheCallsIsWarnedAbout() throws {
        let scenario = try decode(
            scenarioJSON().replacingOccurrences(of: #""parallelism": 2"#, with: #""parallelism": 50"#))
        #expect(
            scenario.warnings.filter { $0.contains("parallelism") } == [
                #"tenants[0] ("acme" with count 2): task.parallelism 50 is above task.calls.max 4: a task never has "#
                    + "more than 4 calls in flight, so the parallelism never binds"
            ])
        #expect(try decode(scenarioJSON()).warnings.filter { $0.contains("parallelism") }.isEmpty)
        // A later shape is judged too.
        let changed = try decode(
            scenarioJSON().replacingOccurrences(
                of: #""deadline_s": 60}}"#,
                with: #""deadline_s": 60}, "task_changes": [{"at_s": 30, "parallelism": 9}]}"#))
        #expect(
            changed.warnings.filter { $0.contains("parallelism") } == [
                #"tenants[0] ("acme" with count 2): task_changes[0].parallelism 9 is above task.calls.max 4: a task "#
                    + "never has more than 4 calls in flight, so the parallelism never binds"
            ])
    }

    /// `task_changes`: each names the fields that change from the shape before it; a task takes the shape in force
    /// when it arrives (outside evaluation round 31: "prompts double at minute 15" could only be a second tenant).
    @Test func taskChangesReplaceTheFieldsTheyName() throws {
        let changes = #"""
            , "task_changes": [{"at_s": 60, "prompt_tokens": {"mean": 1000, "sd": 200}},
                               {"at_s": 90, "calls": {"min": 5, "max": 7}, "deadline_s": 30, "think_ms": 250}]
            """#
        let scenario = try decode(
            scenarioJSON().replacingOccurrences(
                of: #""deadline_s": 60}}"#, with: #""deadline_s": 60}"# + changes + "}"))
        let tenant = scenario.tenants[0]
        #expect(tenant.taskChanges.map(\.at) == [60, 90])
        #expect(tenant.task(at: 59.9) == tenant.task)
        let doubled = tenant.task(at: 60)
        #expect(doubled.promptTokens == TokenShape(mean: 1000, sd: 200))
        #expect(doubled.completionTokens == tenant.task.completionTokens)
        #expect(doubled.minCalls == 2 && doubled.maxCalls == 4 && doubled.deadlineSeconds == 60)
        let later = tenant.task(at: 100)
        #expect(later.promptTokens == doubled.promptTokens)
        #expect(later.minCalls == 5 && later.maxCalls == 7 && later.deadlineSeconds == 30 && later.thinkSeconds == 0.25)
        #expect(later.taskClass == .interactive && later.parallelism == 2)
        // Scheduled load, each shape for as long as it is in force: 6 tasks a minute of 3 calls, then of 6.
        let load = tenant.averageLoad(from: 80, length: 20)
        let expected: Double = (6.0 * 3 + 6.0 * 6) / 2
        #expect(load.rpm == expected)
    }

    static let badTaskChanges: [(String, String, String)] = [
        (#"[{"at_s": 0, "deadline_s": 30}]"#, "tenants[0].task_changes[0].at_s",
         "must be above 0: the shape at 0 is the tenant's task"),
        (#"[{"at_s": 50, "deadline_s": 30}, {"at_s": 50, "deadline_s": 20}]"#, "tenants[0].task_changes[1].at_s",
         "must be after the previous step's at_s (50), not 50"),
        (#"[{"at_s": 120, "deadline_s": 30}]"#, "tenants[0].task_changes[0].at_s",
         "must be before duration_s (120), not 120: it would never happen"),
        (#"[{"at_s": 50}]"#, "tenants[0].task_changes[0]",
         "changes nothing: give at least one of calls, parallelism, prompt_tokens, completion_tokens, "
            + "deadline_s, think_ms"),
        (#"[{"at_s": 50, "class": "batch"}]"#, "tenants[0].task_changes[0].class",
         "a tenant's task class does not change: give the other class another tenant"),
        (#"[{"at_s": 50, "calls": {"min": 5, "max": 3}}]"#, "tenants[0].task_changes[0].calls.max",
         "must be at least calls.min (5)"),
        (#"[{"at_s": 50, "deadline_s": 0.5}]"#, "tenants[0].task_changes[0].deadline_s",
         "must be between 1 and 604800, not 0.5"),
        (#"[{"at_s": 50, "prompt": 5}]"#, "tenants[0].task_changes[0].prompt",
         "unknown field (allowed: at_s, calls, parallelism, prompt_tokens, completion_tokens, deadline_s, think_ms)"),
        (#"[]"#, "tenants[0].task_changes", "must have 1 to 100 entries, not 0"),
    ]

    @Test(arguments: badTaskChanges)
    func badTaskChangesAreRejected(_ changes: String, _ path: String, _ reason: String) {
        rejectsWithThePathAndReason(
            text: scenarioJSON().replacingOccurrences(
                of: #""deadline_s": 60}}"#, with: #""deadline_s": 60}, "task_changes": "# + changes + "}"),
            path: path, reason: reason)
    }

    @Test func aMissingHeadlineDirectionSaysWhichOneTheMetricHas() {
        rejectsWithThePathAndReason(
            text: scenarioJSON().replacingOccurrences(of: #", "better": "higher""#, with: ""),
            path: "headline.better", reason: #"missing: "lower" or "higher" (utilisation is better higher)"#)
    }

    @Test(arguments: [
        (scenarioJSON(extra: #", "colour": 1"#), "colour", "unknown field"),
        (scenarioJSON().replacingOccurrences(of: #""duration_s": 120, "#, with: ""), "duration_s", "missing"),
        (scenarioJSON(duration: 10), "duration_s", "must be between 60 and 86400, not 10"),
        (
            scenarioJSON().replacingOccurrences(of: #""provider": "openai""#, with: #""provider": "azure""#),
            "pools[0].provider", #"must be "openai" or "anthropic", not "azure""#
        ),
        (
            scenarioJSON().replacingOccurrences(of: #""provider": "openai""#, with: #""provider": "google""#),
            "pools[0].provider",
            #"must be "openai" or "anthropic", not "google" (a provider that states no limit, like Google's: "#
                + #"either, with "noise": {"header_missing": 1})"#
        ),
        (
            scenarioJSON().replacingOccurrences(of: #"{"at_s": 0, "rpm": 600"#, with: #"{"at_s": 5, "rpm": 600"#),
            "pools[0].capacity[0].at_s", "the first capacity step must start at 0"
        ),
        (
            scenarioJSON().replacingOccurrences(of: #""pool": "openai/gpt-4o""#, with: #""pool": "nope""#),
            "tenants[0].pool", #"unknown pool "nope""#
        ),
        (
            scenarioJSON().replacingOccurrences(of: #""tier": "premium""#, with: #""tier": "gold""#),
            "tenants[0].tier", #"unknown tier "gold""#
        ),
        (
            scenarioJSON().replacingOccurrences(of: #""max": 4"#, with: #""max": 1"#),
            "tenants[0].task.calls.max", "must be at least calls.min (2)"
        ),
        (
            scenarioJSON().replacingOccurrences(of: #""class": "interactive""#, with: #""class": "urgent""#),
            "tenants[0].task.class", "must be one of realtime, interactive, batch, background"
        ),
        (
            scenarioJSON().replacingOccurrences(of: #""metric": "utilisation""#, with: #""metric": "slo_attainment""#),
            "headline.tier", "missing: slo_attainment is measured per tier"
        ),
        (
            scenarioJSON().replacingOccurrences(of: #""count": 2, "#, with: #""count": "two", "#), "tenants[0].count",
            "must be an integer, not string"
        ),
    ])
    func rejectsWithThePathAndReason(text: String, path: String, reason: String) {
        do {
            _ = try decode(text)
            Issue.record("accepted a scenario that should fail at \(path)")
        } catch {
            #expect(error.source == "test.json")
            #expect(error.path == path)
            #expect(error.reason.hasPrefix(reason), "\(error.reason)")
        }
    }

    /// Two entries of one id on one pool with different tiers (or groups) are one duplicate, not also a tenant with two
    /// tiers "on pool x and on pool x" (outside evaluation round 44, L10).
    @Test func aDuplicateWithAnotherTierOrGroupIsOnlyADuplicate() throws {
        let first = #"{"id": "acme", "tier": "premium", "group": "g", "pool": "openai/gpt-4o","#
        let second = #"{"id": "acme", "tier": "standard", "pool": "openai/gpt-4o","#
        let rest = #""arrivals": [{"at_s": 0, "tasks_per_min": 1}], "task": {"class": "batch", "#
            + #""calls": {"min": 1, "max": 1}, "parallelism": 1, "prompt_tokens": {"mean": 10}, "#
            + #""completion_tokens": {"mean": 10}, "deadline_s": 60}}"#
        let error = try #require(
            #expect(throws: ScenarioError.self) {
                try decode(scenarioJSON(tenants: "[\(first) \(rest), \(second) \(rest)]"))
            })
        #expect(
            error.all.map(\.line) == [
                #"test.json: tenants[1].id: duplicate tenant id "acme" on pool "openai/gpt-4o", from tenants[0] "#
                    + #"("acme") and tenants[1] ("acme"): a tenant id is unique per pool after expanding count"#
            ])
    }

    /// Two entries whose ids collide once `count` is expanded: the error names both entries, and what each was.
    @Test func duplicateTenantsAfterExpansionNameBothEntries() {
        func tenant(_ id: String, count: Int) -> String {
            """
            {"id": "\(id)", "count": \(count), "tier": "free", "pool": "openai/gpt-4o",
             "arrivals": [{"at_s": 0, "tasks_per_min": 1}],
             "task": {"class": "batch", "calls": {"min": 1, "max": 1}, "parallelism": 1,
                      "prompt_tokens": {"mean": 10}, "completion_tokens": {"mean": 10}, "deadline_s": 60}}
            """
        }
        let text = scenarioJSON(
            tenants: "[\(tenant("other", count: 1)), \(tenant("acme", count: 2)), \(tenant("acme-01", count: 1))]")
        #expect(
            throws: ScenarioError(
                source: "test.json", path: "tenants[2].id",
                reason: #"duplicate tenant id "acme-01" on pool "openai/gpt-4o", from tenants[1] ("acme" with "#
                    + #"count 2) and tenants[2] ("acme-01"): a tenant id is unique per pool after expanding count"#)
        ) {
            try decode(text)
        }
        #expect(
            throws: ScenarioError(
                source: "test.json", path: "tenants[1].id",
                reason: #"duplicate tenant id "acme-01" on pool "openai/gpt-4o", from tenants[0] ("acme" with "#
                    + #"count 3) and tenants[1] ("acme" with count 2): a tenant id is unique per pool after "#
                    + "expanding count")
        ) {
            try decode(scenarioJSON(tenants: "[\(tenant("acme", count: 3)), \(tenant("acme", count: 2))]"))
        }
    }

    @Test func aTenantMayCallSeveralPoolsWithOneTier() throws {
        let pools = """
            [{"id": "openai/gpt-4o", "provider": "openai", "declared_rpm": 600, "declared_tpm": 1000000,
              "capacity": [{"at_s": 0, "rpm": 600, "tpm": 1000000}]},
             {"id": "anthropic/claude-sonnet", "provider": "anthropic", "declared_rpm": 300, "declared_tpm": 500000,
              "capacity": [{"at_s": 0, "rpm": 300, "tpm": 500000}]}]
            """
        func tenant(pool: String, tier: String) -> String {
            """
            {"id": "omni", "tier": "\(tier)", "pool": "\(pool)", "arrivals": [{"at_s": 0, "tasks_per_min": 6}],
             "task": {"class": "batch", "calls": {"min": 2, "max": 2}, "parallelism": 1,
                      "prompt_tokens": {"mean": 100}, "completion_tokens": {"mean": 10}, "deadline_s": 60}}
            """
        }
        let scenario = try decode(
            scenarioJSON(
                tenants: "[\(tenant(pool: "openai/gpt-4o", tier: "premium")), "
                    + "\(tenant(pool: "anthropic/claude-sonnet", tier: "premium"))]", pools: pools))
        #expect(scenario.tenants.map(\.id) == ["omni", "omni"])
        #expect(scenario.tenants.map(\.pool) == ["openai/gpt-4o", "anthropic/claude-sonnet"])
        // The policy the loop runs with lists the tenant once.
        let policy = try SimulationPolicy.policy(for: scenario)
        #expect(policy.tenants.filter { $0.id == "omni" }.count == 1)
        // One tenant, one tier.
        #expect(
            throws: ScenarioError(
                source: "test.json", path: "tenants",
                reason: #"tenant "omni" has tier "premium" on pool "openai/gpt-4o" and tier "standard" on pool "#
                    + #""anthropic/claude-sonnet": a tenant has one tier"#)
        ) {
            try decode(
                scenarioJSON(
                    tenants: "[\(tenant(pool: "openai/gpt-4o", tier: "premium")), "
                        + "\(tenant(pool: "anthropic/claude-sonnet", tier: "standard"))]", pools: pools))
        }
    }

    /// `group`: given to every tenant of the entry and to the policy's entry for it; one per tenant across pools.
    @Test func aGroupIsReadIntoThePolicyAndIsOnePerTenant() throws {
        let grouped = scenarioJSON().replacingOccurrences(
            of: #""tier": "premium","#, with: #""tier": "premium", "group": "acme:Inc","#)
        let scenario = try decode(grouped)
        #expect(scenario.tenants.map(\.group) == ["acme:Inc", "acme:Inc"])
        let policy = try SimulationPolicy.policy(for: scenario)
        #expect(policy.tenant("acme-01")?.group == "acme:Inc")
        #expect(policy.tenant("acme-02")?.group == "acme:Inc")
        #expect(try decode(scenarioJSON()).tenants.map(\.group) == [nil, nil])

        func withGroup(_ group: String) -> String {
            scenarioJSON().replacingOccurrences(
                of: #""tier": "premium","#, with: #""tier": "premium", "group": \#(group),"#)
        }
        rejectsWithThePathAndReason(
            text: withGroup(#""a b""#), path: "tenants[0].group",
            reason: #"must be 1 to 128 characters of A-Z, a-z, 0-9, '.', '_', ':', '-', not "a b""#)
        rejectsWithThePathAndReason(
            text: withGroup("3"), path: "tenants[0].group", reason: "must be a string, not number")

        let pools = twoSmallPools
        func tenant(pool: String, group: String) -> String {
            """
            {"id": "omni", "tier": "free", "pool": "\(pool)", \(group)"arrivals": [{"at_s": 0, "tasks_per_min": 6}],
             "task": {"class": "batch", "calls": {"min": 2, "max": 2}, "parallelism": 1,
                      "prompt_tokens": {"mean": 100}, "completion_tokens": {"mean": 10}, "deadline_s": 60}}
            """
        }
        #expect(
            throws: ScenarioError(
                source: "test.json", path: "tenants",
                reason: #"tenant "omni" has group "x" on pool "a" and no group on pool "b": a tenant has one group"#)
        ) {
            try decode(
                scenarioJSON(
                    tenants: "[\(tenant(pool: "a", group: #""group": "x", "#)), \(tenant(pool: "b", group: ""))]",
                    pools: pools))
        }
    }

    /// `static_quota`: both dimensions, a pool's declared ranges, nothing else.
    @Test(arguments: [
        (#"{"rpm": 0, "tpm": 1000}"#, "tenants[0].static_quota.rpm", "must be between 1 and 10000000, not 0"),
        (#"{"rpm": 10}"#, "tenants[0].static_quota.tpm", "missing"),
        (
            #"{"rpm": 10, "tpm": 20000000000}"#, "tenants[0].static_quota.tpm",
            "must be between 1 and 10000000000, not 20000000000"
        ),
        (
            #"{"rpm": 10, "tpm": 1000, "rps": 1}"#, "tenants[0].static_quota.rps",
            "unknown field (allowed: rpm, tpm)"
        ),
        ("60", "tenants[0].static_quota", "must be an object, not number"),
    ])
    func rejectsABrokenStaticQuota(quota: String, path: String, reason: String) {
        rejectsWithThePathAndReason(
            text: scenarioJSON().replacingOccurrences(
                of: #""deadline_s": 60}}"#, with: #""deadline_s": 60}, "static_quota": \#(quota)}"#),
            path: path, reason: reason)
    }

    /// Windows that only touch (one ends where the next starts) do not overlap.
    @Test func overloadWindowsThatTouchAreAccepted() throws {
        let scenario = try decode(
            scenarioJSON().replacingOccurrences(
                of: #""capacity": [{"at_s": 0, "rpm": 600, "tpm": 1000000}]"#,
                with: #""capacity": [{"at_s": 0, "rpm": 600, "tpm": 1000000}], "overload": "#
                    + #"[{"from_s": 60, "to_s": 70, "rate": 0.1}, {"from_s": 10, "to_s": 60, "rate": 0.2}]"#))
        #expect(scenario.pools[0].overload.map(\.from) == [60, 10])
    }

    @Test func notJSONAndUnknownBuiltIns() {
        #expect(throws: ScenarioError.self) { try decode("{") }
        do {
            _ = try Scenario.load("/nonexistent/scenario.json")
            Issue.record("loaded a missing file")
        } catch {
            #expect(error.reason.hasPrefix("neither a built-in scenario nor a readable file"))
        }
    }

    /// With a candidate policy (`allot simulate --policy DIR`) the tiers a scenario may name are that
    /// policy's; the simulated policy keeps a tenant's own weight, floor and ceiling when the base policy
    /// names it, takes the tier from the scenario, and replaces the upstreams with the scenario's pools.
    @Test func aBasePolicySuppliesTheTiersAndTheTenantsOwnTerms() throws {
        #expect(throws: ScenarioError.self) {
            try decode(scenarioJSON().replacingOccurrences(of: "premium", with: "gold"))
        }
        let scenario = try Scenario.decode(
            Array(scenarioJSON().replacingOccurrences(of: "premium", with: "gold").utf8), source: "test.json",
            tiers: ["gold"])
        #expect(scenario.tenants.map(\.tier) == ["gold", "gold"])

        var base = try SimulationPolicy.defaultPolicy()
        base.setTenant(
            TenantPolicy(id: "acme-01", tier: "free", weight: 3, ceiling: PerDimension(rpm: .absolute(50), tpm: nil)))
        base.setTenant(TenantPolicy(id: "elsewhere", tier: "free", weight: 5))
        let premium = try decode(scenarioJSON())
        let policy = try SimulationPolicy.policy(for: premium, base: base)
        #expect(
            policy.tenant("acme-01")
                == TenantPolicy(
                    id: "acme-01", tier: "premium", weight: 3, ceiling: PerDimension(rpm: .absolute(50), tpm: nil)))
        #expect(policy.tenant("acme-02") == TenantPolicy(id: "acme-02", tier: "premium"))
        #expect(policy.tenant("elsewhere") == nil)
        #expect(policy.upstreams.map(\.id) == ["openai/gpt-4o"])
    }

    /// A file with several faults lists them all, in file order: one per top-level field and per pool and tenant
    /// entry. A tenant on a pool whose entry is at fault is not also told the pool is unknown, and a pool is not said
    /// to be unused when a tenant entry that may use it is at fault (the checks across entries wait for those).
    @Test func everyFaultOfAFileIsListed() throws {
        let pools = """
            [{"id": "openai/gpt-4o", "provider": "openai", "declared_rpm": 0, "declared_tpm": 1000000,
              "capacity": [{"at_s": 0, "rpm": 600, "tpm": 1000000}]},
             {"id": "anthropic/claude", "provider": "anthropic", "declared_rpm": 300, "declared_tpm": 500000,
              "capacity": [{"at_s": 0, "rpm": 300, "tpm": 500000}]}]
            """
        func tenant(_ id: String, pool: String, tier: String, rate: String = "6") -> String {
            """
            {"id": "\(id)", "tier": "\(tier)", "pool": "\(pool)", "arrivals": [{"at_s": 0, "tasks_per_min": \(rate)}],
             "task": {"class": "batch", "calls": {"min": 2, "max": 2}, "parallelism": 1,
                      "prompt_tokens": {"mean": 100}, "completion_tokens": {"mean": 10}, "deadline_s": 60}}
            """
        }
        let text = scenarioJSON(
            tenants: "[\(tenant("a", pool: "openai/gpt-4o", tier: "gold")), "
                + "\(tenant("b", pool: "anthropic/claude", tier: "free", rate: "-1")), "
                + "\(tenant("c", pool: "openai/gpt-4o", tier: "free"))]",
            pools: pools, extra: #", "gatways": 2"#
        ).replacingOccurrences(of: #""better": "higher""#, with: #""better": "up""#)
        let error = try #require(#expect(throws: ScenarioError.self) { try decode(text) })
        // In file order: the headline stands third in the file, the misspelt field last.
        #expect(
            error.all.map(\.line) == [
                #"test.json: headline.better: must be "lower" or "higher", not "up""#,
                "test.json: pools[0].declared_rpm: must be between 1 and 10000000, not 0",
                #"test.json: tenants[0].tier: unknown tier "gold" (tiers: critical, free, premium, standard)"#,
                "test.json: tenants[1].arrivals[0].tasks_per_min: must be between 0 and 100000, not -1",
                "test.json: gatways: unknown field (allowed: name, description, headline, duration_s, "
                    + "sample_interval_s, gateways, policy, pools, tenants)",
            ])
        #expect(error.path == "headline.better")
        #expect(error.description == error.all.map(\.line).joined(separator: "\n"))

        // Past twenty faults the rest are counted, not listed.
        let many = (0..<25).map { tenant("t\($0)", pool: "openai/gpt-4o", tier: "gold") }.joined(separator: ", ")
        let crowded = try #require(
            #expect(throws: ScenarioError.self) { try decode(scenarioJSON(tenants: "[\(many)]")) })
        #expect(crowded.all.count == 25)
        let lines = crowded.description.split(separator: "\n")
        #expect(lines.count == ScenarioError.listed + 1)
        #expect(lines.last == "test.json: 5 more errors not listed")

        // An unused pool is named by its place in the file, also after a pool before it that is at fault (review:
        // it was counted among the pools that decoded, `pools[1]` for the third).
        let three = """
            [{"id": "a", "provider": "openai", "declared_rpm": 0, "declared_tpm": 1000,
              "capacity": [{"at_s": 0, "rpm": 60, "tpm": 1000}]},
             {"id": "b", "provider": "openai", "declared_rpm": 60, "declared_tpm": 1000,
              "capacity": [{"at_s": 0, "rpm": 60, "tpm": 1000}]},
             {"id": "c", "provider": "openai", "declared_rpm": 60, "declared_tpm": 1000,
              "capacity": [{"at_s": 0, "rpm": 60, "tpm": 1000}]}]
            """
        let unused = try #require(
            #expect(throws: ScenarioError.self) {
                try decode(
                    scenarioJSON(
                        tenants: "[\(tenant("x", pool: "a", tier: "free")), \(tenant("y", pool: "b", tier: "free"))]",
                        pools: three))
            })
        #expect(
            unused.all.map(\.line) == [
                "test.json: pools[0].declared_rpm: must be between 1 and 10000000, not 0",
                #"test.json: pools[2].id: no tenant uses pool "c""#,
            ])

        // A `pools` array at fault as a whole tells no tenant its pool is unknown (`(pools: )` on every tenant).
        let empty = try #require(#expect(throws: ScenarioError.self) { try decode(scenarioJSON(pools: "[]")) })
        #expect(empty.all.map(\.line) == ["test.json: pools: must have 1 to 8 entries, not 0"])

        // Two entries of `count` 50 with one id stem and different tiers on two pools: one fault for the pair, not
        // fifty that would crowd every other fault out of the list.
        let twoPools = twoSmallPools
        let counted = [("a", "free"), ("b", "standard")].map { pool, tier in
            tenant("x", pool: pool, tier: tier).replacingOccurrences(
                of: #""id": "x","#, with: #""id": "x", "count": 50,"#)
        }
        let conflict = try #require(
            #expect(throws: ScenarioError.self) {
                try decode(scenarioJSON(tenants: "[\(counted.joined(separator: ", "))]", pools: twoPools))
            })
        #expect(
            conflict.all.map(\.line) == [
                #"test.json: tenants: tenant "x-01" has tier "free" on pool "a" and tier "standard" on pool "b": "#
                    + "a tenant has one tier"
            ])
    }

    /// A mean call that fits the provider's bucket but not one gateway's cap under `allot` is warned about, with the
    /// cap's size; behind one gateway (a cap of the whole pool's 10 s) it fits and only the half-bucket warning is left
    /// (outside evaluation round 24's 200k-token prompts).
    @Test func aCallLargerThanOneGatewaysCapIsWarnedAbout() throws {
        let pools = """
            [{"id": "anthropic/claude", "provider": "anthropic", "declared_rpm": 1000, "declared_tpm": 2000000,
              "capacity": [{"at_s": 0, "rpm": 1000, "tpm": 2000000}]}]
            """
        let tenants = """
            [{"id": "fullctx", "tier": "premium", "pool": "anthropic/claude",
              "arrivals": [{"at_s": 0, "tasks_per_min": 1}],
              "task": {"class": "batch", "calls": {"min": 1, "max": 2}, "parallelism": 1,
                       "prompt_tokens": {"mean": 199000}, "completion_tokens": {"mean": 1000}, "deadline_s": 300}}]
            """
        var scenario = try decode(scenarioJSON(tenants: tenants, pools: pools))
        #expect(scenario.gateways == 3)
        #expect(scenario.tokenBucketWarnings.isEmpty)  // 200k fits the provider's 333k
        // but two within 2 s of each other do not: behind three gateways nothing holds them apart
        #expect(
            scenario.halfBucketWarnings == [
                #"tenants[0] ("fullctx"): its mean call of 200000 tokens is more than half of pool "#
                    + #""anthropic/claude"'s 10-s token bucket (333333 of 2000000 tpm at pools[0].capacity[0], from "#
                    + "t=0 s): a second such call that reaches the provider within 2 s of another (parallel calls, "
                    + "tasks that overlap) is more than the bucket holds then and meets a 429; a gateway's own buckets "
                    + "may hold such calls apart, but nothing holds apart calls that go through different gateways (3 "
                    + "here)"
            ])
        #expect(
            scenario.gatewayCapWarnings == [
                #"tenants[0] ("fullctx"): its mean call of 200000 tokens is larger than one gateway's 10-s share of "#
                    + #"pool "anthropic/claude" under allot (2000000 tpm ÷ 3 gateways ≈ 111111 tokens, at "#
                    + "pools[0].capacity[0]): the gateway's cap and the tenant's slice there hold less than one such "
                    + "call, so a gateway admits one only into a full bucket and then owes the rest; such calls queue "
                    + "at each gateway and may wait out their maximum wait and be denied; fewer gateways (--gateways) "
                    + "give each a larger share"
            ])
        #expect(scenario.warnings.contains(scenario.gatewayCapWarnings[0]))
        scenario.gateways = 1
        #expect(scenario.gatewayCapWarnings.isEmpty)
        #expect(
            scenario.halfBucketWarnings.first?.hasSuffix(
                "meets a 429; the gateway's own buckets may hold such calls apart") == true)
        scenario.gateways = 2  // 166,666 tokens: still smaller than the call
        #expect(scenario.gatewayCapWarnings.count == 1)
    }

    /// Calls of at most half the provider's bucket at every step get no half-bucket warning; where they are more, the
    /// step with the smallest bucket is named (here the middle one), before the gateway-cap warning; a call as large
    /// as the bucket is left to ``Scenario/tokenBucketWarnings`` (it needs a full bucket, like a larger one).
    @Test func halfBucketWarningsNameTheSmallestStepAndStepAsideForTheBucketWarning() throws {
        func scenario(promptTokens: Int) throws -> Scenario {
            let pools = """
                [{"id": "p", "provider": "openai", "declared_rpm": 600, "declared_tpm": 600000,
                  "capacity": [{"at_s": 0, "rpm": 600, "tpm": 600000}, {"at_s": 30, "rpm": 600, "tpm": 240000},
                               {"at_s": 60, "rpm": 600, "tpm": 300000}]}]
                """
            let tenants = """
                [{"id": "big", "tier": "standard", "pool": "p", "arrivals": [{"at_s": 0, "tasks_per_min": 1}],
                  "task": {"class": "batch", "calls": {"min": 1, "max": 1}, "parallelism": 1,
                           "prompt_tokens": {"mean": \(promptTokens)}, "completion_tokens": {"mean": 1000},
                           "deadline_s": 300}}]
                """
            return try decode(scenarioJSON(tenants: tenants, pools: pools))
        }
        // Buckets of 100,000, 40,000 and 50,000 tokens.
        #expect(try scenario(promptTokens: 19000).halfBucketWarnings.isEmpty)  // 20k: half of the smallest
        let mid = try scenario(promptTokens: 29000)  // 30k: more than half of the 40k and the 50k buckets
        let half =
            #"tenants[0] ("big"): its mean call of 30000 tokens is more than half of pool "p"'s 10-s token bucket "#
            + "(40000 of 240000 tpm at pools[0].capacity[1], from t=30 s): a second such call that reaches the "
            + "provider within 5 s of another (parallel calls, tasks that overlap) is more than the bucket holds "
            + "then and meets a 429; a gateway's own buckets may hold such calls apart, but nothing holds apart calls "
            + "that go through different gateways (3 here)"
        #expect(mid.halfBucketWarnings == [half])
        let cap = try #require(mid.gatewayCapWarnings.first)
        let order = (mid.warnings.firstIndex(of: half), mid.warnings.firstIndex(of: cap))
        #expect(order.0 != nil && order.1 != nil && order.0! < order.1!)
        let whole = try scenario(promptTokens: 39000)  // 40k: the whole of the 40k bucket
        #expect(whole.halfBucketWarnings.isEmpty)
        #expect(whole.tokenBucketWarnings.count == 1)
        #expect(
            whole.tokenBucketWarnings.first?.contains(
                #"is as large as pool "p"'s 10-s token bucket (40000 of 240000 tpm at pools[0].capacity[1]"#) == true)
    }
}
