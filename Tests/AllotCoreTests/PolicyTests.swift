import AllotAssets
import AllotJSON
import Foundation
import Testing

@testable import AllotCore

/// Fixtures: policy files from literal JSON text.
enum PolicyFixtures {
    static let tiers = """
        {"default_tier": "standard",
         "tiers": {"premium": {"priority": 1, "weight": 4, "floor": {"rpm": 10}},
                   "standard": {"priority": 2}}}
        """

    static func files(_ files: [(String, String)]) -> [PolicyFile] {
        files.map { PolicyFile(name: $0.0, bytes: Array($0.1.utf8)) }
    }

    static func issues(_ files: [(String, String)]) -> [PolicyIssue] {
        Policy.validate(files: Self.files(files))
    }

    /// The issues of one extra file loaded next to a valid tiers file.
    static func issues(with text: String, name: String = "extra.json") -> [PolicyIssue] {
        issues([("00-tiers.json", tiers), (name, text)])
    }

    static func load(_ files: [(String, String)]) throws -> Policy {
        try Policy.load(files: Self.files(files))
    }
}

@Suite("Policy loading and validation (SPEC 10)")
struct PolicyTests {
    // MARK: Shipped policies

    /// The repository's `policies/` directory, read from disk relative to this file.
    static func shippedPolicyFiles() throws -> [PolicyFile] {
        let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("policies")
        let names = try FileManager.default.contentsOfDirectory(atPath: directory.path).filter { $0.hasSuffix(".json") }
        return try names.sorted().map { name in
            PolicyFile(name: name, bytes: Array(try Data(contentsOf: directory.appendingPathComponent(name))))
        }
    }

    @Test func shippedPoliciesOnDiskValidate() throws {
        let files = try Self.shippedPolicyFiles()
        #expect(files.count >= 3)
        let issues = Policy.validate(files: files)
        #expect(issues.isEmpty, "\(issues)")
        let policy = try Policy.load(files: files)
        #expect(policy.tiers.map(\.name) == ["critical", "premium", "standard", "free"])
        #expect(policy.defaultTier == "standard")
        #expect(policy.upstream("openai/gpt-4o")?.capacity == PerDimension(rpm: 10000, tpm: 2_000_000))
        #expect(policy.price(ofUpstream: "anthropic/claude-sonnet").known)
        #expect(!policy.price(ofUpstream: "mystery/model").known)
        #expect(policy.tier(named: "premium")?.floor.rpm == .percent(0.5))
        #expect(policy.taskBudgets[.realtime] == TaskBudgetPolicy(maxCalls: 200, maxTokens: 5_000_000))
    }

    @Test func embeddedDefaultPoliciesMatchTheRepositoryAndValidate() throws {
        let embedded = AllotAssets.defaultPolicies.map { PolicyFile(name: $0.name, bytes: $0.bytes) }
        #expect(embedded == (try Self.shippedPolicyFiles()))
        let policy = try Policy.load(files: AllotAssets.defaultPolicies.map { ($0.name, $0.bytes) })
        #expect(policy.loop.intervalSeconds == 5)
        // Saved by an editor that writes a UTF-8 byte order mark: the same policy, the same version.
        let marked = try Policy.load(
            files: AllotAssets.defaultPolicies.map { ($0.name, [0xEF, 0xBB, 0xBF] + $0.bytes) })
        #expect(marked == policy && marked.canonicalBytes == policy.canonicalBytes)
    }

    @Test func canonicalFormRoundTripsAndIgnoresFileLayout() throws {
        let policy = try Policy.load(files: try Self.shippedPolicyFiles())
        let reloaded = try Policy.load(files: [PolicyFile(name: "canonical.json", bytes: policy.canonicalBytes)])
        #expect(reloaded == policy)
        #expect(reloaded.canonicalBytes == policy.canonicalBytes)

        // The same content split differently and with keys in another order hashes the same.
        let a = try PolicyFixtures.load([
            ("a.json", PolicyFixtures.tiers), ("b.json", #"{"loop": {"lease_s": 60, "interval_s": 2}}"#),
        ])
        let b = try PolicyFixtures.load([
            ("x.json", #"{"loop": {"interval_s": 2}, "tiers": {"standard": {"priority": 2}}}"#),
            (
                "y.json",
                #"{"loop": {"lease_s": 60}, "default_tier": "standard", "tiers": {"premium": {"weight": 4, "priority": 1, "floor": {"rpm": 10}}}}"#
            ),
        ])
        #expect(a.canonicalBytes == b.canonicalBytes)

        // A default written out is the same rule (outside evaluation round 29: a tenant's `"weight": 1` and a tier's
        // `queue_weight` equal to its weight each changed the version).
        let implicit = try PolicyFixtures.load([
            (
                "t.json",
                #"{"tiers": {"standard": {"priority": 2, "weight": 3}}, "tenants": {"acme": {"tier": "standard"}}}"#
            )
        ])
        let explicit = try PolicyFixtures.load([
            (
                "t.json",
                #"{"tiers": {"standard": {"priority": 2, "weight": 3, "queue_weight": 3}}, "#
                    + #""tenants": {"acme": {"tier": "standard", "weight": 1}}}"#
            )
        ])
        #expect(implicit.canonicalBytes == explicit.canonicalBytes)
        let other = try PolicyFixtures.load([
            ("t.json", #"{"tiers": {"standard": {"priority": 2, "weight": 3, "queue_weight": 2}}}"#)
        ])
        #expect(other.canonicalJSON["tiers"]?["standard"]?["queue_weight"]?.doubleValue == 2)
    }

    @Test func defaultsApplyToOmittedFields() throws {
        let policy = try PolicyFixtures.load([("tiers.json", PolicyFixtures.tiers)])
        #expect(policy.loop == LoopSettings())
        #expect(policy.allocation == AllocationSettings())
        #expect(policy.dampening == DampeningSettings())
        let standard = try #require(policy.tier(named: "standard"))
        #expect(standard.weight == 1)
        #expect(standard.ceiling == PerDimension(.unbounded))
        #expect(standard.starvationGuard == Tier.defaultStarvationGuard)
        #expect(policy.tierName(ofTenant: "unknown") == "standard")
    }

    /// Computed amounts in alerts and proposal reasons show six significant digits at most: no floating-point dust
    /// (outside evaluation round 20: "spent 0.9999999999999999 of 5 USD").
    @Test func measuredAmountsAreShownWithoutFloatingPointDust() {
        #expect(Quantity.formatMeasured(0.9999999999999999) == "1")
        #expect(Quantity.formatMeasured(0.1 + 0.2) == "0.3")
        #expect(Quantity.formatMeasured(650.4612345) == "650.461")
        #expect(Quantity.formatMeasured(0.0075) == "0.0075")
        #expect(Quantity.formatMeasured(-3999.999999996) == "-4000")
        #expect(Quantity.formatMeasured(123_456_789) == "123457000")
        #expect(Quantity.formatMeasured(0) == "0")
        #expect(Quantity.formatMeasured(.leastNonzeroMagnitude) == "5e-324")  // beyond what rounding can scale
        #expect(Quantity.formatMeasured(.infinity) == "inf")
    }

    @Test func quantitiesAcceptNumbersPercentagesAndUnbounded() throws {
        let policy = try PolicyFixtures.load([
            (
                "tiers.json",
                #"{"tiers": {"standard": {"priority": 0, "floor": "2.5%", "ceiling": {"rpm": "unbounded", "tpm": 90000}}}}"#
            )
        ])
        let tier = try #require(policy.tier(named: "standard"))
        #expect(tier.floor == PerDimension(.percent(2.5)))
        #expect(tier.ceiling == PerDimension(rpm: .unbounded, tpm: .absolute(90000)))
        #expect(Quantity.percent(2.5).resolved(capacity: 1000) == 25)
    }

    @Test func filesCombineByNameAcrossFiles() throws {
        let policy = try PolicyFixtures.load([
            ("tiers.json", PolicyFixtures.tiers),
            ("tenants.json", #"{"tenants": {"acme": {"tier": "premium", "weight": 2, "ceiling": {"tpm": 5000}}}}"#),
            ("upstreams.json", #"{"upstreams": {"p/m": {"capacity": {"rpm": 100}}}}"#),
        ])
        #expect(policy.tenant("acme")?.weight == 2)
        #expect(policy.tenant("acme")?.ceiling == PerDimension(rpm: nil, tpm: .absolute(5000)))
        #expect(policy.upstream("p/m")?.capacity == PerDimension(rpm: 100, tpm: nil))
        #expect(policy.tierName(ofTenant: "acme") == "premium")
    }

    @Test func aTenantsGroupIsReadWrittenAndChecked() throws {
        let policy = try PolicyFixtures.load([
            ("tiers.json", PolicyFixtures.tiers),
            (
                "tenants.json",
                #"{"tenants": {"acme-key-1": {"tier": "premium", "group": "acme"}, "b": {"tier": "premium"}}}"#
            ),
        ])
        #expect(policy.tenant("acme-key-1")?.group == "acme")
        #expect(policy.tenant("b")?.group == nil)
        #expect(policy.tenant("acme-key-1")?.json["group"] == "acme")
        #expect(policy.tenant("b")?.json["group"] == nil)
        #expect(policy.terms(ofTenant: "acme-key-1", upstream: "p/m", overrides: [], now: 0).group == "acme")

        let invalid = try Self.only(
            PolicyFixtures.issues(with: #"{"tenants": {"k": {"tier": "premium", "group": "a b"}}}"#))
        #expect(invalid.path == "$.tenants.k.group")
        #expect(invalid.code == .invalidValue)
        #expect(invalid.message == "a group must be 1-128 characters of [A-Za-z0-9._:-]")
        let wrongType = try Self.only(
            PolicyFixtures.issues(with: #"{"tenants": {"k": {"tier": "premium", "group": 7}}}"#))
        #expect(wrongType.path == "$.tenants.k.group")
        #expect(wrongType.code == .wrongType)
    }

    // MARK: One test per error kind

    private static func only(_ issues: [PolicyIssue]) throws -> PolicyIssue {
        #expect(issues.count == 1, "\(issues)")
        return try #require(issues.first)
    }

    @Test func invalidJSONNamesFileAndPosition() throws {
        let issue = try Self.only(PolicyFixtures.issues(with: "{\"loop\": {\"interval_s\": 5,}}", name: "broken.json"))
        #expect(issue.file == "broken.json")
        #expect(issue.path == "$.loop")  // the object with the trailing comma
        #expect(issue.code == .invalidJSON)
        #expect(issue.message.contains("line 1"))
    }

    @Test func unknownFieldSuggestsTheNearestName() throws {
        let issue = try Self.only(
            PolicyFixtures.issues(
                with: #"{"tiers": {"gold": {"priority": 0, "flor": {"rpm": 5}}}}"#, name: "gold.json"))
        #expect(issue.file == "gold.json")
        #expect(issue.path == "$.tiers.gold.flor")
        #expect(issue.code == .unknownField)
        #expect(issue.message == #"unknown field "flor"; did you mean "floor"?"#)

        let top = try Self.only(PolicyFixtures.issues(with: #"{"upstream": {}}"#))
        #expect(top.path == "$.upstream")
        #expect(top.message == #"unknown field "upstream"; did you mean "upstreams"?"#)

        let dimension = try Self.only(
            PolicyFixtures.issues(
                with: #"{"tenants": {"t1": {"tier": "standard", "ceiling": {"rpn": 5}}}}"#))
        #expect(dimension.path == "$.tenants.t1.ceiling.rpn")
        #expect(dimension.message.contains(#"did you mean "rpm"?"#))
    }

    @Test func wrongTypeNamesExpectedAndActual() throws {
        let issue = try Self.only(PolicyFixtures.issues(with: #"{"loop": {"interval_s": "5"}}"#))
        #expect(issue.path == "$.loop.interval_s")
        #expect(issue.code == .wrongType)
        #expect(issue.message == "expected a number, got string")

        let section = try Self.only(PolicyFixtures.issues(with: #"{"dampening": [1]}"#))
        #expect(section.path == "$.dampening")
        #expect(section.code == .wrongType)
        #expect(section.message == "expected an object, got array")
    }

    @Test func fanOutDetectionIsOnUnlessATierTurnsItOff() throws {
        let policy = try PolicyFixtures.load([
            (
                "tiers.json",
                #"{"tiers": {"premium": {"priority": 1, "burst": {"detect_fan_out": false}}, "#
                    + #""standard": {"priority": 2}}}"#
            )
        ])
        #expect(policy.tier(named: "premium")?.burst.detectFanOut == false)
        #expect(policy.tier(named: "standard")?.burst.detectFanOut == true)
        #expect(policy.tier(named: "premium")?.json["burst"]?["detect_fan_out"] == JSON.bool(false))
        let issue = try Self.only(
            PolicyFixtures.issues([
                ("tiers.json", #"{"tiers": {"standard": {"priority": 2, "burst": {"detect_fan_out": "yes"}}}}"#)
            ]))
        #expect(issue.path == "$.tiers.standard.burst.detect_fan_out")
        #expect(issue.code == .wrongType)
    }

    @Test func negativeRateIsRejected() throws {
        let issue = try Self.only(
            PolicyFixtures.issues(
                with: #"{"tenants": {"acme": {"tier": "premium", "floor": {"tpm": -5}}}}"#, name: "tenants.json"))
        #expect(issue.file == "tenants.json")
        #expect(issue.path == "$.tenants.acme.floor.tpm")
        #expect(issue.code == .negative)
        #expect(issue.message == "must not be negative (got -5)")
    }

    @Test func demandDeviationsIsReadAndANegativeOneRejected() throws {
        let policy = try PolicyFixtures.load([
            ("00-tiers.json", PolicyFixtures.tiers), ("extra.json", #"{"allocation": {"demand_deviations": 1.5}}"#),
        ])
        #expect(policy.allocation.demandDeviations == 1.5)
        #expect(policy.canonicalJSON["allocation"]?["demand_deviations"]?.doubleValue == 1.5)
        let defaulted = try PolicyFixtures.load([("00-tiers.json", PolicyFixtures.tiers)])
        #expect(defaulted.allocation.demandDeviations == 2)
        let issue = try Self.only(PolicyFixtures.issues(with: #"{"allocation": {"demand_deviations": -1}}"#))
        #expect(issue.path == "$.allocation.demand_deviations")
        #expect(issue.code == .negative)
        #expect(issue.message == "must not be negative (got -1)")
    }

    @Test func holdSurplusIsReadDefaultsToTrueAndMustBeABoolean() throws {
        let policy = try PolicyFixtures.load([
            ("00-tiers.json", PolicyFixtures.tiers), ("extra.json", #"{"dampening": {"hold_surplus": false}}"#),
        ])
        #expect(policy.dampening.holdSurplus == false)
        #expect(policy.canonicalJSON["dampening"]?["hold_surplus"] == false)
        let defaulted = try PolicyFixtures.load([("00-tiers.json", PolicyFixtures.tiers)])
        #expect(defaulted.dampening.holdSurplus == true)
        #expect(defaulted.canonicalJSON["dampening"]?["hold_surplus"] == true)
        let issue = try Self.only(PolicyFixtures.issues(with: #"{"dampening": {"hold_surplus": "yes"}}"#))
        #expect(issue.path == "$.dampening.hold_surplus")
        #expect(issue.code == .wrongType)
        #expect(issue.message == "expected true or false, got string")
    }

    @Test func fractionsOutOfRangeAreRejected() throws {
        let margin = try Self.only(PolicyFixtures.issues(with: #"{"allocation": {"safety_margin": 1.5}}"#))
        #expect(margin.path == "$.allocation.safety_margin")
        #expect(margin.code == .outOfRange)
        #expect(margin.message == "must be at least 0 and below 1 (got 1.5)")

        let percent = try Self.only(
            PolicyFixtures.issues(
                with: #"{"tiers": {"gold": {"priority": 0, "ceiling": {"rpm": "150%"}}}}"#))
        #expect(percent.path == "$.tiers.gold.ceiling.rpm")
        #expect(percent.code == .outOfRange)
        #expect(percent.message == #"percentage out of range: "150%" (allowed 0% to 100%)"#)
    }

    /// A percentage is digits, an optional fraction and `%`, nothing else: "2 %", " 2%", "+2%" and "2.%" had been
    /// accepted while "2% " was refused.
    @Test(arguments: ["2 %", " 2%", "+2%", "2.%", "2% ", ".5%", "2%%", "1e1%"])
    func aPercentageOutOfItsGrammarIsRejectedWithTheFieldPath(text: String) throws {
        let issue = try Self.only(
            PolicyFixtures.issues(with: #"{"tiers": {"gold": {"priority": 0, "floor": {"rpm": "\#(text)"}}}}"#))
        #expect(issue.path == "$.tiers.gold.floor.rpm")
        #expect(issue.code == .invalidValue)
        #expect(
            issue.message
                == #"expected a number or a percentage such as "5%" (a percentage is digits, an optional fraction, "#
                + #"then %: no spaces or signs), got "\#(text)""#)
    }

    /// A pool id is named as telemetry's `upstream` names it (outside evaluation round 29: `"bad id"` loaded).
    @Test func anUpstreamIdTelemetryCannotNameIsRefused() throws {
        for id in ["bad id", "", String(repeating: "a", count: 129), "pool?x"] {
            let file = #"{"upstreams": {"\#(id)": {"capacity": {"rpm": 1}}}}"#
            let issue = try Self.only(PolicyFixtures.issues(with: file))
            #expect(issue.code == .invalidValue)
            #expect(
                issue.message
                    == "an upstream id must be 1-128 characters of [A-Za-z0-9._:/@+-], as telemetry's upstream")
        }
        let fine = try PolicyFixtures.load([
            ("tiers.json", PolicyFixtures.tiers),
            ("u.json", #"{"upstreams": {"azure:eu/gpt-4o@2024+x_1.-": {"capacity": {"rpm": 1}}}}"#),
        ])
        #expect(fine.upstream("azure:eu/gpt-4o@2024+x_1.-") != nil)
    }

    @Test func coldStartShareLoadsWithItsDefaultAndRange() throws {
        let defaulted = try PolicyFixtures.load([("tiers.json", PolicyFixtures.tiers)])
        #expect(defaulted.classifier.coldStartShare == 0.25)
        #expect(defaulted.canonicalJSON["classifier"]?["cold_start_share"]?.doubleValue == 0.25)
        let set = try PolicyFixtures.load([
            ("tiers.json", PolicyFixtures.tiers), ("e.json", #"{"classifier": {"cold_start_share": 0.1}}"#),
        ])
        #expect(set.classifier.coldStartShare == 0.1)
        #expect(set.canonicalJSON["classifier"]?["cold_start_share"]?.doubleValue == 0.1)
        let issue = try Self.only(PolicyFixtures.issues(with: #"{"classifier": {"cold_start_share": 1.5}}"#))
        #expect(issue.path == "$.classifier.cold_start_share")
        #expect(issue.code == .outOfRange)
    }

    @Test func aPercentageInItsGrammarIsAccepted() throws {
        let policy = try PolicyFixtures.load([
            (
                "tiers.json",
                #"{"default_tier": "gold", "tiers": {"gold": {"priority": 0, "floor": {"rpm": "0.25%", "tpm": "2%"}}}}"#
            )
        ])
        #expect(policy.tier(named: "gold")?.floor == PerDimension(rpm: .percent(0.25), tpm: .percent(2)))
        let negative = try Self.only(
            PolicyFixtures.issues(with: #"{"tiers": {"gold": {"priority": 0, "floor": {"rpm": "-2%"}}}}"#))
        #expect(negative.path == "$.tiers.gold.floor.rpm")
        #expect(negative.code == .negative)
        #expect(negative.message == #"must not be negative (got "-2%")"#)
    }

    /// The server ticks at `loop.interval_s` for real: 1 to 60 s, as a scenario's `policy.tick_interval_s`.
    /// Weights are 0.001 to 1000: the engine multiplies a tier's by the tenant's (or an override's), and a weight of
    /// 1e308 overflowed the product to infinity and froze the loop (round 11).
    @Test func weightsAreBoundedSoTheirProductStaysFinite() throws {
        let cases = [
            (#"{"tenants": {"acme": {"tier": "premium", "weight": 1e308}}}"#, "$.tenants.acme.weight", "1e+308"),
            (#"{"tiers": {"gold": {"priority": 1, "weight": 1001}}}"#, "$.tiers.gold.weight", "1001"),
            (#"{"tiers": {"gold": {"priority": 1, "weight": 0.0001}}}"#, "$.tiers.gold.weight", "0.0001"),
            (#"{"tiers": {"gold": {"priority": 1, "queue_weight": 5000}}}"#, "$.tiers.gold.queue_weight", "5000"),
        ]
        for (text, path, shown) in cases {
            let issue = try Self.only(PolicyFixtures.issues(with: text, name: "extra.json"))
            #expect(issue.path == path)
            #expect(issue.code == .outOfRange)
            #expect(issue.message == "must be between 0.001 and 1000 (got \(shown))")
        }
        let bounds = try PolicyFixtures.load([
            ("00-tiers.json", PolicyFixtures.tiers),
            (
                "extra.json",
                #"{"tiers": {"gold": {"priority": 1, "weight": 1000}}, "#
                    + #""tenants": {"acme": {"tier": "gold", "weight": 0.001}}}"#
            ),
        ])
        #expect(bounds.tier(named: "gold")?.weight == 1000)
        #expect(bounds.tenant("acme")?.weight == 0.001)
        // A policy built in code is not validated: the effective weight is still held finite and above 0.
        var built = bounds
        built.setTenant(TenantPolicy(id: "acme", tier: "gold", weight: .infinity))
        #expect(built.terms(ofTenant: "acme", upstream: "u", overrides: [], now: 0).weight == 1e9)
        built.setTenant(TenantPolicy(id: "acme", tier: "gold", weight: 0))
        #expect(built.terms(ofTenant: "acme", upstream: "u", overrides: [], now: 0).weight == 1e-9)
    }

    /// Rates are at most 1e12 a minute: the engine sums floors and capacities, and floors of 1.7e308 summed to
    /// infinity, leaving every tenant allocated 0 (round 11's robustness pass, `allot plan`).
    @Test func ratesAreAtMostATrillionAMinute() throws {
        let floor = try Self.only(
            PolicyFixtures.issues(
                with: #"{"tenants": {"acme": {"tier": "premium", "floor": {"rpm": 1.7e308}}}}"#, name: "tenants.json"))
        #expect(floor.path == "$.tenants.acme.floor.rpm")
        #expect(floor.code == .outOfRange)
        #expect(floor.message == "must be at most 1e12 per minute (got 1.7e+308)")
        let capacity = try Self.only(
            PolicyFixtures.issues(with: #"{"upstreams": {"u": {"capacity": {"rpm": 1e13, "tpm": 100}}}}"#))
        #expect(capacity.path == "$.upstreams.u.capacity.rpm")
        #expect(capacity.message == "must be at most 1e12 per minute (got 10000000000000)")
        let fine = try PolicyFixtures.load([
            ("00-tiers.json", PolicyFixtures.tiers),
            ("tenants.json", #"{"tenants": {"acme": {"tier": "premium", "ceiling": {"tpm": 1e12}}}}"#),
        ])
        #expect(fine.tenant("acme")?.ceiling.tpm == .absolute(1e12))
    }

    @Test func theLoopIntervalIsOneToSixtySeconds() throws {
        // One message for every value outside the range, 0 and negative ones included (outside evaluation round 24).
        for (text, shown) in [
            ("0.25", "0.25"), ("0.999", "0.999"), ("61", "61"), ("3600", "3600"), ("0", "0"), ("-1", "-1"),
        ] {
            let issue = try Self.only(PolicyFixtures.issues(with: #"{"loop": {"interval_s": \#(text)}}"#))
            #expect(issue.path == "$.loop.interval_s")
            #expect(issue.code == (text == "-1" ? .negative : .outOfRange))
            #expect(issue.message == "must be between 1 and 60 s (got \(shown))")
        }
        for value in [1, 2.5, 60] {
            let policy = try PolicyFixtures.load([
                ("00-tiers.json", PolicyFixtures.tiers), ("engine.json", #"{"loop": {"interval_s": \#(value)}}"#),
            ])
            #expect(policy.loop.intervalSeconds == value)
        }
    }

    @Test func floorAboveCeilingIsRejectedForTiersAndTenants() throws {
        let tier = try Self.only(
            PolicyFixtures.issues(
                with: #"{"tiers": {"gold": {"priority": 0, "floor": {"rpm": "30%"}, "ceiling": {"rpm": "20%"}}}}"#))
        #expect(tier.path == "$.tiers.gold.floor.rpm")
        #expect(tier.code == .floorAboveCeiling)
        #expect(tier.message == #"floor (30%) is above ceiling (20%)"#)

        // The tenant's own floor against the ceiling it inherits from its tier.
        let tenant = try Self.only(
            PolicyFixtures.issues([
                ("tiers.json", #"{"tiers": {"standard": {"priority": 2, "ceiling": {"rpm": 100}}}}"#),
                ("tenants.json", #"{"tenants": {"acme": {"tier": "standard", "floor": {"rpm": 500}}}}"#),
            ]))
        #expect(tenant.file == "tenants.json")
        #expect(tenant.path == "$.tenants.acme.floor.rpm")
        #expect(tenant.message == #"floor (500) is above ceiling (100) (from tier "standard")"#)
    }

    @Test func floorAboveGuardMaxIsRejected() throws {
        let issue = try Self.only(
            PolicyFixtures.issues(
                with: #"{"tiers": {"gold": {"priority": 0, "floor": {"tpm": "10%"}, "guard_max": "5%"}}}"#))
        #expect(issue.path == "$.tiers.gold.floor.tpm")
        #expect(issue.code == .invalidValue)
        #expect(issue.message == "floor (10%) is above guard_max (5%): the engine could never honour it")

        // A tenant's own floor too (outside evaluation round 34: accepted, then published at the guard_max), in the
        // file and at the path that set it; a floor the guard_max bounds only once `C` is known is left to run time.
        let tenant = try Self.only(
            PolicyFixtures.issues([
                ("tiers.json", #"{"tiers": {"standard": {"priority": 2, "guard_max": {"rpm": 100}}}}"#),
                ("tenants.json", #"{"tenants": {"acme": {"tier": "standard", "floor": {"rpm": 300}}}}"#),
            ]))
        #expect(tenant.file == "tenants.json")
        #expect(tenant.path == "$.tenants.acme.floor.rpm")
        #expect(tenant.code == .invalidValue)
        #expect(
            tenant.message
                == #"floor (300) is above guard_max (100) of tier "standard": "# + "the engine could never honour it")
        _ = try PolicyFixtures.load([
            ("tiers.json", #"{"tiers": {"standard": {"priority": 2, "guard_max": {"rpm": "10%"}}}}"#),
            ("tenants.json", #"{"tenants": {"acme": {"tier": "standard", "floor": {"rpm": 300}}}}"#),
        ])
    }

    @Test func guardMinAboveGuardMaxIsRejected() throws {
        let issue = try Self.only(
            PolicyFixtures.issues(
                with: #"{"tiers": {"gold": {"priority": 0, "guard_min": 50, "guard_max": {"rpm": 40}}}}"#))
        #expect(issue.path == "$.tiers.gold.guard_min.rpm")
        #expect(issue.code == .guardMinAboveGuardMax)
        #expect(issue.message == "guard_min (50) is above guard_max (40)")
    }

    @Test func unknownTierIsRejectedForTenantsAndDefaultTier() throws {
        let tenant = try Self.only(
            PolicyFixtures.issues(
                with: #"{"tenants": {"acme": {"tier": "premum"}}}"#, name: "tenants.json"))
        #expect(tenant.file == "tenants.json")
        #expect(tenant.path == "$.tenants.acme.tier")
        #expect(tenant.code == .unknownTier)
        #expect(tenant.message == #"unknown tier "premum"; did you mean "premium"?"#)

        let fallback = try Self.only(
            PolicyFixtures.issues([
                ("tiers.json", #"{"default_tier": "gold", "tiers": {"standard": {"priority": 2}}}"#)
            ]))
        #expect(fallback.file == "tiers.json")
        #expect(fallback.path == "$.default_tier")
        #expect(fallback.code == .unknownTier)
    }

    @Test func duplicateDefinitionsNameBothFiles() throws {
        let tier = try Self.only(
            PolicyFixtures.issues(
                with: #"{"tiers": {"premium": {"priority": 5}}}"#, name: "more-tiers.json"))
        #expect(tier.file == "more-tiers.json")
        #expect(tier.path == "$.tiers.premium")
        #expect(tier.code == .duplicate)
        #expect(tier.message == #"tier "premium" is defined in both 00-tiers.json and more-tiers.json"#)

        let field = try Self.only(
            PolicyFixtures.issues([
                ("00-tiers.json", PolicyFixtures.tiers), ("a.json", #"{"loop": {"interval_s": 5}}"#),
                ("b.json", #"{"loop": {"interval_s": 10}}"#),
            ]))
        #expect(field.file == "b.json")
        #expect(field.path == "$.loop.interval_s")
        #expect(field.message == #""loop.interval_s" is defined in both a.json and b.json"#)

        let window = try Self.only(
            PolicyFixtures.issues(
                with: """
                    {"tenants": {"acme": {"tier": "standard", "budgets": [{"window": "day", "amount": 5}, {"window": "day", "amount": 9}]}}}
                    """))
        #expect(window.path == "$.tenants.acme.budgets[1].window")
        #expect(window.code == .duplicate)
    }

    @Test func missingRequiredFieldsAreNamed() throws {
        let issues = PolicyFixtures.issues(
            with: """
                {"tiers": {"gold": {"weight": 2}}, "tenants": {"acme": {"weight": 2}},
                 "upstreams": {"p/m": {"price": {"input_per_mtok": 1}}}}
                """)
        let missing = issues.filter { $0.code == .missingField }.map(\.path)
        #expect(
            missing == [
                "$.tiers.gold.priority", #"$.upstreams["p/m"].capacity"#, #"$.upstreams["p/m"].price.output_per_mtok"#,
                "$.tenants.acme.tier",
            ])
        #expect(issues.count == 4)
    }

    @Test func noTiersAtAllIsAnError() throws {
        let issue = try Self.only(PolicyFixtures.issues([("engine.json", #"{"loop": {"interval_s": 5}}"#)]))
        #expect(issue.path == "$.tiers")
        #expect(issue.code == .missingField)
        // Named after the file that would define them (tiers.json deleted), not the first file read.
        #expect(issue.file == "tiers.json")
    }

    /// A file that is not JSON is the one issue reported about what it would have held: a trailing comma in
    /// tiers.json had also reported "engine.json: $.tiers: no tiers are defined", and a tenant's tier or the
    /// default tier named in it as unknown. Other files' own problems are still reported.
    @Test func anUnreadableFileIsNotFollowedByWhatItWouldHaveDefined() throws {
        let tiers = #"{"default_tier": "standard", "tiers": {"standard": {"priority": 0},}}"#
        let issue = try Self.only(
            PolicyFixtures.issues([
                ("engine.json", #"{"loop": {"interval_s": 5}}"#), ("tiers.json", tiers),
                ("tenants.json", #"{"tenants": {"acme": {"tier": "standard"}}}"#),
            ]))
        #expect(issue.file == "tiers.json")
        #expect(issue.path == "$.tiers")
        #expect(issue.code == .invalidJSON)
        let split = PolicyFixtures.issues([
            ("a-tiers.json", #"{"tiers": {"gold": {"priority": 0}}}"#), ("b-tiers.json", tiers),
            ("engine.json", #"{"loop": {"interval_s": -1}}"#),
            ("tenants.json", #"{"default_tier": "standard", "tenants": {"acme": {"tier": "standard"}}}"#),
        ])
        #expect(split.map(\.file) == ["b-tiers.json", "engine.json"])
        #expect(split.map(\.path) == ["$.tiers", "$.loop.interval_s"])
    }

    @Test func everyIssueIsReportedAtOnce() throws {
        let issues = PolicyFixtures.issues(
            with: """
                {"loop": {"interval_s": -1, "lease": 5},
                 "allocation": {"surplus": "share", "burst_reserve": 2, "idle_share": -0.1},
                 "tiers": {"gold": {"priority": 0.5, "mode": "enforced", "budgets": {"window": "day"}}},
                 "task_budgets": {"realtme": {"max_calls": 1, "max_tokens": 1}}}
                """)
        let paths = issues.map(\.path)
        #expect(
            paths == [
                "$.loop.lease", "$.loop.interval_s", "$.allocation.surplus", "$.allocation.burst_reserve",
                "$.allocation.idle_share", "$.tiers.gold.priority", "$.tiers.gold.mode", "$.tiers.gold.budgets",
                "$.task_budgets.realtme",
            ])
        #expect(
            issues.first { $0.path == "$.allocation.surplus" }?.message
                == #"unknown value "share"; expected one of "distribute", "hold""#)
        #expect(
            issues.first { $0.path == "$.tiers.gold.mode" }?.message
                == #"unknown value "enforced"; did you mean "enforce"?"#)
        #expect(
            issues.first { $0.path == "$.task_budgets.realtme" }?.message
                == #"unknown task class "realtme"; did you mean "realtime"?"#)
        #expect(issues.allSatisfy { $0.file == "extra.json" })
    }

    @Test func loadThrowsEveryIssue() {
        #expect(throws: PolicyError.self) {
            try PolicyFixtures.load([("a.json", #"{"tiers": {"x": {"priority": -1}}}"#)])
        }
        do {
            _ = try Policy.load(
                files: PolicyFixtures.files([
                    ("a.json", "[]"), ("b.json", #"{"default_tier": "x", "tiers": {"x": {"priority": -1}}}"#),
                ]))
            Issue.record("expected an error")
        } catch {
            #expect(error.issues.map(\.file) == ["a.json", "b.json"])
            #expect(error.description.contains("b.json: $.tiers.x.priority: must be at least 0 (got -1)"))
        }
    }

    @Test func budgetThresholdsMustBeOrdered() throws {
        let issue = try Self.only(
            PolicyFixtures.issues(
                with: """
                    {"tenants": {"acme": {"tier": "standard", "budgets": [{"window": "month", "amount": 100, "throttle": "120%", "hard": 110}]}}}
                    """))
        #expect(issue.path == "$.tenants.acme.budgets[0].throttle")
        #expect(issue.message == "throttle (120%) is above hard (110)")
    }

    @Test func budgetsCombineTenantAndTier() throws {
        let policy = try PolicyFixtures.load([
            (
                "tiers.json",
                #"{"tiers": {"standard": {"priority": 2, "budgets": [{"window": "day", "amount": 10}, {"window": "month", "amount": 100}]}}}"#
            ),
            (
                "tenants.json",
                #"{"tenants": {"acme": {"tier": "standard", "budgets": [{"window": "day", "amount": 50}]}}}"#
            ),
        ])
        let budgets = policy.budgets(ofTenant: "acme", tierName: "standard")
        #expect(budgets.map(\.window) == [.day, .month])
        #expect(budgets.map(\.amount) == [50, 100])
        #expect(budgets[0].throttleAmount == 45)
    }

    // MARK: Budget windows

    @Test func budgetWindowsAreUTCCalendarPeriods() {
        let now = 1_795_316_400.0  // 2026-11-22T03:00:00Z
        #expect(BudgetWindow.hour.interval(containing: now + 59) == (now, now + 3600))
        #expect(BudgetWindow.day.interval(containing: now) == (1_795_305_600, 1_795_392_000))
        #expect(BudgetWindow.month.interval(containing: now) == (1_793_491_200, 1_796_083_200))  // Nov 1 – Dec 1
        let december = 1_796_083_200.0 + 86_400 * 10  // 2026-12-11
        #expect(BudgetWindow.month.interval(containing: december) == (1_796_083_200, 1_798_761_600))  // – 2027-01-01
        let leap = 1_709_164_800.0  // 2024-02-29T00:00:00Z
        #expect(BudgetWindow.month.interval(containing: leap) == (1_706_745_600, 1_709_251_200))  // Feb 1 – Mar 1
    }
}
