import AllotJSON
import Testing

@testable import AllotCore

@Suite("What-if plans (SPEC 6)")
struct PlanTests {
    static let policy: Policy = {
        // The shipped policy, so that tier names and defaults are the real ones.
        try! Policy.load(files: try! PolicyTests.shippedPolicyFiles())
    }()

    private static func run(_ text: String, policy: Policy = PlanTests.policy) throws -> String {
        String(decoding: try Plan.run(bytes: Array(text.utf8), policy: policy), as: UTF8.self)
    }

    private static func error(_ text: String, policy: Policy = PlanTests.policy) -> PlanError? {
        do {
            _ = try run(text, policy: policy)
            return nil
        } catch let error as PlanError {
            return error
        } catch {
            return nil
        }
    }

    @Test func specExampleIsReproducedExactly() throws {
        let output = try Self.run(
            """
            {
              "capacity": {"rpm": 1000, "tpm": 200000},
              "settings": {"safety_margin": 0, "demand_headroom": 0, "surplus": "hold"},
              "tenants": [
                {"id": "a", "tier": "premium", "weight": 2, "floor": {"rpm": 10}, "ceiling": {"rpm": 500},
                 "demand": {"rpm": 300, "tpm": 50000}}
              ]
            }
            """)
        #expect(
            output
                == #"{"allocations":[{"id":"a","rpm":300.0,"tpm":50000.0,"reason":{"rpm":"demand","tpm":"demand"}}],"unallocated":{"rpm":700.0,"tpm":150000.0},"degraded":{"rpm":false,"tpm":false}}"#
        )
    }

    @Test func readmeWorkedExampleMatches() throws {
        let output = try Self.run(
            """
            {"capacity": {"rpm": 2000},
             "tenants": [{"id": "acme", "tier": "premium", "demand": {"rpm": 5000}},
                         {"id": "globex", "tier": "standard", "demand": {"rpm": 100}},
                         {"id": "initech", "tier": "standard", "demand": {"rpm": 3000}},
                         {"id": "hooli", "tier": "standard", "demand": {"rpm": 3000}}]}
            """)
        #expect(
            output
                == #"{"allocations":[{"id":"acme","rpm":920.0,"reason":{"rpm":"fair_share"}},{"id":"globex","rpm":120.0,"reason":{"rpm":"demand"}},{"id":"initech","rpm":460.0,"reason":{"rpm":"fair_share"}},{"id":"hooli","rpm":460.0,"reason":{"rpm":"fair_share"}}],"unallocated":{"rpm":0.0},"degraded":{"rpm":false}}"#
        )
        let full = try Self.run(
            """
            {"capacity": {"rpm": 10000},
             "tenants": [{"id": "acme", "tier": "premium", "demand": {"rpm": 5000}},
                         {"id": "globex", "tier": "standard", "demand": {"rpm": 100}},
                         {"id": "initech", "tier": "standard", "demand": {"rpm": 3000}},
                         {"id": "hooli", "tier": "standard", "demand": {"rpm": 3000}}]}
            """)
        #expect(
            full
                == #"{"allocations":[{"id":"acme","rpm":4840.0,"reason":{"rpm":"fair_share"}},{"id":"globex","rpm":120.0,"reason":{"rpm":"demand"}},{"id":"initech","rpm":2420.0,"reason":{"rpm":"fair_share"}},{"id":"hooli","rpm":2420.0,"reason":{"rpm":"fair_share"}}],"unallocated":{"rpm":0.0},"degraded":{"rpm":false}}"#
        )
    }

    /// The README's guardrail variant: had premium a `guard_max` of 40 % (of C = 1,960), the engine would hold acme
    /// there and share what it frees among the others.
    @Test func readmeWorkedExampleWithGuardMax() throws {
        let premium = try #require(Self.policy.tier(named: "premium"))
        let standard = try #require(Self.policy.tier(named: "standard"))
        let claims = [(premium, 5000.0), (standard, 100), (standard, 3000), (standard, 3000)].map { tier, demand in
            AllocationClaim(
                weight: tier.weight, floor: tier.floor.rpm.resolved(capacity: 1960), demand: demand,
                guardMin: tier.guardMin.rpm.resolved(capacity: 1960),
                guardMax: tier.name == "premium" ? 784 : .infinity)
        }
        let result = PoolAllocation.compute(capacityEstimate: 2000, settings: Self.policy.allocation, claims: claims)
        #expect(result.unclamped == [920, 120, 460, 460])
        #expect(result.guardClamped == [true, false, false, false])
        #expect(result.allocations == [784, 120, 528, 528])
        #expect(result.level == 264)
        #expect(result.reasons == [.guardrailClamped, .demand, .fairShare, .fairShare])
    }

    @Test func absentDimensionIsNotComputed() throws {
        let output = try Self.run(
            #"{"capacity": {"tpm": 100}, "settings": {"safety_margin": 0}, "tenants": [{"id": "x", "demand": {"rpm": 5}}]}"#
        )
        #expect(
            output
                == #"{"allocations":[{"id":"x","tpm":100.0,"reason":{"tpm":"fair_share"}}],"unallocated":{"tpm":0.0},"degraded":{"tpm":false}}"#
        )
    }

    @Test func tenantsWithoutTierUseOnlyTheirOwnFields() throws {
        let result = Plan.compute(
            try Plan.parse(
                try JSON.parse(
                    """
                    {"capacity": {"rpm": 100}, "settings": {"safety_margin": 0, "demand_headroom": 0, "surplus": "hold"},
                     "tenants": [{"id": "a", "weight": 3}, {"id": "b"}, {"id": "c", "floor": 30, "demand": {"rpm": 10}}]}
                    """), policy: Self.policy))
        let rpm = try #require(result.dimensions[.rpm])
        #expect(rpm.allocations == [52.5, 17.5, 30])
        #expect(rpm.reasons == [.fairShare, .fairShare, .floor])
    }

    /// The shipped policy with these tenants in place of the examples in its tenants.json.
    static func policy(tenants: String) throws -> Policy {
        try Policy.load(
            files: try PolicyTests.shippedPolicyFiles().filter { $0.name != "tenants.json" }
                + [PolicyFile(name: "tenants.json", bytes: Array(tenants.utf8))])
    }

    /// A group's tenants that are not idle share one weight, max-min among themselves, as `allot serve` shares it (a
    /// review of 2026-12-01: plans ignored `group`). The policy's group applies unless the plan gives one.
    @Test func aGroupsTenantsShareOneWeightInAPlan() throws {
        let policy = try Self.policy(
            tenants: #"{"tenants": {"k1": {"tier": "standard", "group": "acme"}, "k2": {"tier": "standard", "group": "acme"}}}"#
        )
        let settings = #""settings": {"safety_margin": 0, "demand_headroom": 0, "surplus": "hold"}"#
        let output = try Self.run(
            #"{"capacity": {"rpm": 1000}, "# + settings + #", "tenants": [{"id": "k1"}, "#
                + #"{"id": "k2", "demand": {"rpm": 50}}, {"id": "b", "tier": "standard"}]}"#, policy: policy)
        // The group weighs what `b` does; `k2` wants 50 and leaves the rest of the group's 500 to `k1`.
        #expect(
            output
                == #"{"allocations":[{"id":"k1","rpm":450.0,"reason":{"rpm":"fair_share"}},{"id":"k2","rpm":50.0,"reason":{"rpm":"demand"}},{"id":"b","rpm":500.0,"reason":{"rpm":"fair_share"}}],"unallocated":{"rpm":0.0},"degraded":{"rpm":false}}"#
        )
        // An idle member (1 rpm, the standard idle allocation) leaves the whole weight to the others, and a plan's
        // own group groups tenants the policy does not name.
        let planned = try Self.run(
            #"{"capacity": {"rpm": 1000}, "# + settings + #", "tenants": ["#
                + #"{"id": "x", "tier": "standard", "group": "g"}, {"id": "y", "tier": "standard", "group": "g"}, "#
                + #"{"id": "z", "tier": "standard", "group": "g", "idle": true}, {"id": "b", "tier": "standard"}]}"#,
            policy: policy)
        #expect(planned.contains(#"{"id":"x","rpm":249.75,"#), "\(planned)")
        #expect(planned.contains(#"{"id":"y","rpm":249.75,"#), "\(planned)")
        #expect(planned.contains(#"{"id":"b","rpm":499.5,"#), "\(planned)")
        let bad = try #require(
            Self.error(#"{"capacity": {"rpm": 1000}, "tenants": [{"id": "x", "group": "a b"}]}"#, policy: policy))
        #expect(bad.field == "tenants[0].group")
    }

    /// A tenant the policy's tenants.json names has its terms there, as `allot serve` gives them: acme its own 4 %
    /// floor (not premium's 0.5 %), vip-01 its tier and weight 2 though the plan names neither, legacy-01 its
    /// 80-rpm ceiling. What the plan gives wins (solo's weight 1 over the policy's 3); a tenant the policy does not
    /// name and the plan gives no tier keeps weight 1 (SPEC 6), not the default tier's.
    @Test func tenantsThePolicyNamesGetTheirPolicyTermsUnlessThePlanGivesItsOwn() throws {
        let policy = try Self.policy(
            tenants: """
                {"tenants": {"acme": {"tier": "premium", "floor": {"rpm": "4%"}},
                             "vip-01": {"tier": "premium", "weight": 2},
                             "legacy-01": {"tier": "standard", "ceiling": {"rpm": 80}},
                             "solo": {"tier": "standard", "weight": 3}}}
                """)
        let output = try Self.run(
            """
            {"capacity": {"rpm": 1000}, "settings": {"safety_margin": 0, "demand_headroom": 0, "surplus": "hold"},
             "tenants": [{"id": "acme", "tier": "premium", "demand": {"rpm": 10}}, {"id": "vip-01"},
                         {"id": "legacy-01", "tier": "standard"}, {"id": "walk-in"},
                         {"id": "solo", "tier": "standard", "weight": 1}]}
            """, policy: policy)
        // C = 1,000: acme holds its floor of 40 (it asks for 10), legacy-01 its ceiling of 80; the other 880 go by
        // weight 8 (premium 4 × 2), 1 and 2 (standard 2 × the plan's 1): a level of 80.
        #expect(
            output
                == #"{"allocations":[{"id":"acme","rpm":40.0,"reason":{"rpm":"floor"}},{"id":"vip-01","rpm":640.0,"reason":{"rpm":"fair_share"}},{"id":"legacy-01","rpm":80.0,"reason":{"rpm":"ceiling"}},{"id":"walk-in","rpm":80.0,"reason":{"rpm":"fair_share"}},{"id":"solo","rpm":160.0,"reason":{"rpm":"fair_share"}}],"unallocated":{"rpm":0.0},"degraded":{"rpm":false}}"#
        )

        // The plan's own floor and ceiling win over the policy's, per dimension.
        let own = try Self.run(
            """
            {"capacity": {"rpm": 1000}, "settings": {"safety_margin": 0, "demand_headroom": 0, "surplus": "hold"},
             "tenants": [{"id": "acme", "floor": {"rpm": 10}, "demand": {"rpm": 5}},
                         {"id": "legacy-01", "ceiling": {"rpm": 300}}]}
            """, policy: policy)
        #expect(
            own
                == #"{"allocations":[{"id":"acme","rpm":10.0,"reason":{"rpm":"floor"}},{"id":"legacy-01","rpm":300.0,"reason":{"rpm":"ceiling"}}],"unallocated":{"rpm":690.0},"degraded":{"rpm":false}}"#
        )

        // A floor from the policy above the plan's own ceiling is named with where each came from.
        let conflict = try #require(
            Self.error(
                #"{"capacity": {"rpm": 1000}, "tenants": [{"id": "acme", "ceiling": {"rpm": 20}}]}"#, policy: policy))
        #expect(conflict.field == "tenants[0].ceiling.rpm")
        #expect(
            conflict.message
                == #"tenant "acme" (tenants[0]): ceiling.rpm: floor (39.2) (the policy's, for this tenant) is above "#
                + "ceiling (20)")

        // Both from the policy — an absolute floor of 263 under the free tier's 20 % ceiling (196 of 980), which
        // the loader cannot check — is no error: the floor wins, as `allot serve` allocates it (round 13).
        let big = try Self.policy(tenants: #"{"tenants": {"big": {"tier": "free", "floor": {"rpm": 263}}}}"#)
        let floorWins = try Self.run(
            #"{"capacity": {"rpm": 1000}, "tenants": [{"id": "big", "demand": {"rpm": 500}}]}"#, policy: big)
        #expect(floorWins.contains(#"{"id":"big","rpm":263.0,"#), "\(floorWins)")
    }

    /// Floating-point dust is no reason (round 13): a tenant with no demand on a full pool was given 1.1e-13 with
    /// the reason `surplus`, and one held at its ceiling to within 1e-14 was `fair_share`.
    @Test func reasonsIgnoreFloatingPointDust() throws {
        let zero = try Self.run(
            #"{"capacity": {"rpm": 1000}, "settings": {"safety_margin": 0.02, "demand_headroom": 0}, "#
                + #""tenants": [{"id": "t0", "weight": 7.5}, {"id": "t1", "weight": 7.5, "demand": {"rpm": 0}}]}"#)
        #expect(zero.contains(#"{"id":"t1","rpm":0.0,"reason":{"rpm":"demand"}}"#), "\(zero)")
        let ceiling = try Self.run(
            #"{"capacity": {"rpm": 100}, "settings": {"safety_margin": 0.1, "demand_headroom": 0.5}, "tenants": ["#
                + #"{"id": "t0", "weight": 3, "floor": {"rpm": 1.825}, "ceiling": {"rpm": 57.03}, "#
                + #""demand": {"rpm": 0.967}}, "#
                + #"{"id": "t1", "floor": {"rpm": "22.5%"}, "ceiling": {"rpm": 42.93}, "demand": {"rpm": 40.432}}, "#
                + #"{"id": "t2", "weight": 3, "floor": {"rpm": "27.04%"}, "ceiling": {"rpm": "35%"}, "#
                + #""demand": {"rpm": 47.133}}, "#
                + #"{"id": "t3", "weight": 7.5, "ceiling": {"rpm": 18.48}, "demand": {"rpm": 41.95}}]}"#)
        #expect(ceiling.contains(#""id":"t3","rpm":18.47"#), "\(ceiling)")
        #expect(ceiling.contains(#""reason":{"rpm":"ceiling"}}]"#), "\(ceiling)")
    }

    @Test func settingsDefaultToThePolicy() throws {
        // Shipped policy: safety margin 0.02, headroom 0.2, surplus distribute.
        let output = try Self.run(
            #"{"capacity": {"rpm": 1000}, "tenants": [{"id": "a", "demand": {"rpm": 100}}, {"id": "b", "demand": {"rpm": 100}}]}"#
        )
        // C = 980; both get 120, then the surplus 740 is distributed in full (no burst reserve in plans).
        #expect(
            output
                == #"{"allocations":[{"id":"a","rpm":490.0,"reason":{"rpm":"surplus"}},{"id":"b","rpm":490.0,"reason":{"rpm":"surplus"}}],"unallocated":{"rpm":0.0},"degraded":{"rpm":false}}"#
        )
    }

    @Test func percentagesResolveAgainstCapacityAfterTheMargin() throws {
        let output = try Self.run(
            #"{"capacity": {"rpm": 1000}, "settings": {"safety_margin": 0.5, "surplus": "hold"}, "tenants": [{"id": "a", "ceiling": "10%"}]}"#
        )
        #expect(output.contains(#""rpm":50.0,"reason":{"rpm":"ceiling"}"#))
        #expect(output.contains(#""unallocated":{"rpm":450.0}"#))
    }

    @Test func degradedModeAndIdleExtension() throws {
        let output = try Self.run(
            """
            {"capacity": {"rpm": 100}, "settings": {"safety_margin": 0},
             "tenants": [{"id": "c", "tier": "critical", "floor": 70}, {"id": "p", "tier": "premium", "floor": 40},
                         {"id": "i", "tier": "standard", "idle": true}]}
            """)
        // idle first (1), then guards 10 + 5, then critical's floor in full (60 more), premium gets the last 24.
        #expect(
            output
                == #"{"allocations":[{"id":"c","rpm":70.0,"reason":{"rpm":"degraded"}},{"id":"p","rpm":29.0,"reason":{"rpm":"degraded"}},{"id":"i","rpm":1.0,"reason":{"rpm":"idle"}}],"unallocated":{"rpm":0.0},"degraded":{"rpm":true}}"#
        )
    }

    /// Tiers of equal priority are one rank in degraded mode: where capacity runs out their tenants share what is left
    /// in proportion to their floors (above the guard), whatever the tiers' names. Ranked by name, "east" had its
    /// floor in full before "west" got anything beyond its guard.
    @Test func tiersOfEqualPriorityShareARankInDegradedMode() throws {
        let policy = try PolicyFixtures.load([
            (
                "tiers.json",
                #"{"default_tier": "west", "tiers": {"west": {"priority": 1, "starvation_guard": 0}, "#
                    + #""east": {"priority": 1, "starvation_guard": 0}, "top": {"priority": 0, "starvation_guard": 0}}}"#
            )
        ])
        #expect(policy.tierRanks == ["top": 0, "east": 1, "west": 1])
        let output = try Self.run(
            """
            {"capacity": {"rpm": 100}, "settings": {"safety_margin": 0},
             "tenants": [{"id": "t", "tier": "top", "floor": 40}, {"id": "w", "tier": "west", "floor": 60},
                         {"id": "e", "tier": "east", "floor": 60}]}
            """, policy: policy)
        // top's floor first (40), then the 60 left shared by east and west in proportion to their floors.
        #expect(
            output
                == #"{"allocations":[{"id":"t","rpm":40.0,"reason":{"rpm":"degraded"}},{"id":"w","rpm":30.0,"reason":{"rpm":"degraded"}},{"id":"e","rpm":30.0,"reason":{"rpm":"degraded"}}],"unallocated":{"rpm":0.0},"degraded":{"rpm":true}}"#
        )
    }

    @Test func idleAllocationsTakeAtMostTheIdleShare() throws {
        // Two idle critical tenants (5 rpm each) on a 60-rpm pool: by the shipped policy's idle_share (0.1)
        // they take 6 rpm together, 3 each; with "idle_share": 1 all 10 (SPEC 6.1: taken from C first).
        func plan(_ extra: String) -> String {
            #"{"capacity": {"rpm": 60}, "settings": {"safety_margin": 0, "surplus": "hold""# + extra + "}, "
                + #""tenants": [{"id": "i1", "tier": "critical", "idle": true}, "#
                + #"{"id": "i2", "tier": "critical", "idle": true}, {"id": "a", "demand": {"rpm": 100}}]}"#
        }
        let shared = try Self.run(plan(""))
        #expect(shared.contains(#"{"id":"i1","rpm":3.0,"reason":{"rpm":"idle"}}"#))
        #expect(shared.contains(#"{"id":"a","rpm":54.0,"reason":{"rpm":"fair_share"}}"#))
        let whole = try Self.run(plan(#", "idle_share": 1"#))
        #expect(whole.contains(#"{"id":"i1","rpm":5.0,"reason":{"rpm":"idle"}}"#))
        #expect(whole.contains(#"{"id":"a","rpm":50.0,"reason":{"rpm":"fair_share"}}"#))
        let bad = try #require(Self.error(plan(#", "idle_share": 2"#)))
        #expect(bad.message.contains("idle_share"))
    }

    @Test func emptyTenantListGivesAnEmptyPlan() throws {
        #expect(
            try Self.run(#"{"capacity": {"rpm": 10}, "tenants": []}"#)
                == #"{"allocations":[],"unallocated":{"rpm":9.8},"degraded":{"rpm":false}}"#)
    }

    // MARK: Bad input

    @Test func missingCapacity() throws {
        let error = try #require(Self.error(#"{"tenants": []}"#))
        #expect(error.field == "capacity")
        #expect(error.tenant == nil)
        #expect(error.code == "missing_field")
        #expect(error.message == #"capacity: missing required field "capacity""#)
        let empty = try #require(Self.error(#"{"capacity": {}, "tenants": []}"#))
        #expect(empty.message == #"capacity: capacity must give "rpm", "tpm" or both"#)
    }

    @Test func nonObjectInputAndInvalidJSON() throws {
        let array = try #require(Self.error("[1, 2]"))
        #expect(array.field == nil)
        #expect(array.message == "plan: expected an object, got array")
        let broken = try #require(Self.error("{\"capacity\": "))
        #expect(broken.code == "invalid_json")
        #expect(broken.field == "capacity")
        #expect(
            broken.message
                == "not valid JSON: expected a JSON value, found end of input at line 1, column 14 (capacity)")
    }

    @Test func negativeNumberNamesTenantAndField() throws {
        let error = try #require(
            Self.error(#"{"capacity": {"rpm": 10}, "tenants": [{"id": "ok"}, {"id": "acme", "floor": {"rpm": -5}}]}"#))
        #expect(error.tenant == "acme")
        #expect(error.field == "tenants[1].floor.rpm")
        #expect(error.code == "negative")
        #expect(error.message == #"tenant "acme" (tenants[1]): floor.rpm: must not be negative (got -5)"#)

        let capacity = try #require(Self.error(#"{"capacity": {"rpm": -1}, "tenants": []}"#))
        #expect(capacity.field == "capacity.rpm")
        #expect(capacity.message == "capacity.rpm: must not be negative (got -1)")
    }

    @Test func nonNumericValueNamesTenantAndField() throws {
        let error = try #require(
            Self.error(#"{"capacity": {"rpm": 10}, "tenants": [{"id": "acme", "demand": {"rpm": "lots"}}]}"#))
        #expect(error.tenant == "acme")
        #expect(error.field == "tenants[0].demand.rpm")
        // A demand is a rate: the error does not offer the percentage that a demand refuses (round 38, L5).
        #expect(error.message == #"tenant "acme" (tenants[0]): demand.rpm: expected a number or "unbounded", got "lots""#)
        let typed = try #require(
            Self.error(#"{"capacity": {"rpm": 10}, "tenants": [{"id": "acme", "demand": {"rpm": true}}]}"#))
        #expect(typed.message == #"tenant "acme" (tenants[0]): demand.rpm: expected a number or "unbounded", got boolean"#)
        let ceiling = try #require(
            Self.error(#"{"capacity": {"rpm": 10}, "tenants": [{"id": "acme", "ceiling": {"rpm": "lots"}}]}"#))
        #expect(
            ceiling.message
                == #"tenant "acme" (tenants[0]): ceiling.rpm: expected a number, a percentage such as "5%" or "unbounded", got "lots""#
        )
        let weight = try #require(Self.error(#"{"capacity": {"rpm": 10}, "tenants": [{"id": "w", "weight": true}]}"#))
        #expect(weight.message == #"tenant "w" (tenants[0]): weight: expected a number, got boolean"#)
        let zero = try #require(Self.error(#"{"capacity": {"rpm": 10}, "tenants": [{"id": "w", "weight": 0}]}"#))
        #expect(zero.message == #"tenant "w" (tenants[0]): weight: must be between 0.001 and 1000 (got 0)"#)
        // A weight the engine's product of weights could overflow with (round 11: 1.8e308 planned as `null`).
        let huge = try #require(
            Self.error(#"{"capacity": {"rpm": 10}, "tenants": [{"id": "w", "weight": 1.7976931348623157e308}]}"#))
        #expect(huge.message.hasPrefix(#"tenant "w" (tenants[0]): weight: must be between 0.001 and 1000 (got 1.79"#))
    }

    @Test func nonFiniteNumbersAreRejected() throws {
        let input: JSON = ["capacity": ["rpm": .double(.infinity)], "tenants": []]
        #expect(
            throws: PlanError(
                code: "out_of_range", message: "capacity.rpm: must be a finite number", tenant: nil,
                field: "capacity.rpm")
        ) {
            try Plan.run(input: input, policy: Self.policy)
        }
        let nan: JSON = ["capacity": ["rpm": 10], "tenants": [["id": "n", "demand": .double(.nan)]]]
        #expect(
            throws: PlanError(
                code: "out_of_range", message: #"tenant "n" (tenants[0]): demand: must be a finite number"#,
                tenant: "n", field: "tenants[0].demand")
        ) {
            try Plan.run(input: nan, policy: Self.policy)
        }
    }

    @Test func duplicateIds() throws {
        let error = try #require(
            Self.error(#"{"capacity": {"rpm": 10}, "tenants": [{"id": "a"}, {"id": "b"}, {"id": "a"}]}"#))
        #expect(error.tenant == "a")
        #expect(error.field == "tenants[2].id")
        #expect(error.message == #"tenant "a" (tenants[2]): id: duplicate id "a" (also tenants[0])"#)
    }

    @Test func floorAboveCeiling() throws {
        let error = try #require(
            Self.error(
                #"{"capacity": {"rpm": 1000}, "tenants": [{"id": "a", "floor": {"rpm": 600}, "ceiling": {"rpm": 500}}]}"#
            ))
        #expect(error.field == "tenants[0].floor.rpm")
        #expect(error.code == "floor_above_ceiling")
        #expect(error.message == #"tenant "a" (tenants[0]): floor.rpm: floor (600) is above ceiling (500)"#)
        // A tenant ceiling below its tier's floor names the ceiling.
        let tier = try #require(
            Self.error(
                #"{"capacity": {"rpm": 1000}, "settings": {"safety_margin": 0}, "tenants": [{"id": "c", "tier": "critical", "ceiling": {"rpm": 5}}]}"#
            ))
        #expect(tier.field == "tenants[0].ceiling.rpm")
        #expect(tier.message == #"tenant "c" (tenants[0]): ceiling.rpm: floor (20) is above ceiling (5)"#)
    }

    @Test func tenantIDsAreThoseOfTenantsJSON() throws {
        // Round 12: an id with a NUL or a right-to-left override was accepted and printed raw.
        for id in [#"a\u0000b"#, #"a\u202Eb"#, "", "a b", String(repeating: "x", count: 129)] {
            let error = try #require(Self.error(#"{"capacity": {"rpm": 10}, "tenants": [{"id": "\#(id)"}]}"#), "\(id)")
            #expect(error.code == "invalid_value")
            #expect(error.field == "tenants[0].id")
            #expect(
                error.message
                    == "tenants[0]: id: a tenant id must be 1-128 characters of [A-Za-z0-9._:-]", "\(id)")
        }
        #expect(Self.error(#"{"capacity": {"rpm": 10}, "tenants": [{"id": "org:acme-1.eu_2"}]}"#) == nil)
    }

    @Test func unknownTier() throws {
        let error = try #require(Self.error(#"{"capacity": {"rpm": 10}, "tenants": [{"id": "a", "tier": "premum"}]}"#))
        #expect(error.code == "unknown_tier")
        #expect(error.field == "tenants[0].tier")
        #expect(error.message == #"tenant "a" (tenants[0]): tier: unknown tier "premum"; did you mean "premium"?"#)
    }

    @Test func unknownFieldsWithSuggestions() throws {
        let tenant = try #require(
            Self.error(#"{"capacity": {"rpm": 10}, "tenants": [{"id": "a", "demnd": {"rpm": 1}}]}"#))
        #expect(tenant.code == "unknown_field")
        #expect(tenant.message == #"tenant "a" (tenants[0]): demnd: unknown field "demnd"; did you mean "demand"?"#)
        let top = try #require(Self.error(#"{"capacity": {"rpm": 10}, "tenants": [], "setings": {}}"#))
        #expect(top.message == #"setings: unknown field "setings"; did you mean "settings"?"#)
        let surplus = try #require(
            Self.error(#"{"capacity": {"rpm": 10}, "tenants": [], "settings": {"surplus": "keep"}}"#))
        #expect(surplus.field == "settings.surplus")
    }

    @Test func wrongTypesAndMissingIds() throws {
        let tenants = try #require(Self.error(#"{"capacity": {"rpm": 10}, "tenants": {"a": {}}}"#))
        #expect(tenants.field == "tenants")
        #expect(tenants.message == "tenants: expected an array of tenants, got object")
        let entry = try #require(Self.error(#"{"capacity": {"rpm": 10}, "tenants": ["a"]}"#))
        #expect(entry.tenant == "tenants[0]")
        #expect(entry.message == "tenants[0]: expected an object, got string")
        let noID = try #require(Self.error(#"{"capacity": {"rpm": 10}, "tenants": [{"weight": 1}]}"#))
        #expect(noID.tenant == "tenants[0]")
        #expect(noID.field == "tenants[0].id")
        #expect(noID.message == #"tenants[0]: id: missing required field "id""#)
        let idle = try #require(Self.error(#"{"capacity": {"rpm": 10}, "tenants": [{"id": "x", "idle": "yes"}]}"#))
        #expect(idle.message == #"tenant "x" (tenants[0]): idle: expected true or false, got string"#)
    }
}
