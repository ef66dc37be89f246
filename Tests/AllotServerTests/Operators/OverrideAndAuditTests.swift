import AllotCore
import AllotHTTP
import AllotJSON
import AllotServer
import AllotStore
import AllotTime
import Testing

/// Overrides with expiry on a virtual clock (SPEC 6.8), bursts (6.5), and the audit record every
/// mutation leaves (SPEC 8).
@Suite struct OverrideAndAuditTests {
    @Test func overrideAppliesAtTheNextTickAndExpires() async throws {
        let harness = try await OperatorHarness.make()
        await harness.tick()
        let set = await harness.send(
            .put, "/v1/tenants/beta/override", as: .operator, json: #"{"weight":3,"reason":"QBR promise","ttl_s":600}"#)
        #expect(set.status == .ok)
        #expect(set.jsonBody["status"] == "applied")
        #expect(set.jsonBody["override"]?["actor"] == "operator-user")
        #expect(set.jsonBody["override"]?["expires_at"]?.stringValue == RFC3339.format(harness.clock.now + 600))
        #expect(set.jsonBody["previous"] == .null)

        await harness.tick()
        var detail = await harness.send(.get, "/v1/tenants/beta", as: .operator)
        #expect(detail.jsonBody["upstreams"]?[0]?["override"]?["weight"]?.doubleValue == 3)
        #expect(detail.jsonBody["override"]?["reason"] == "QBR promise")
        let listed = await harness.send(.get, "/v1/tenants?override=true", as: .operator)
        #expect(listed.jsonBody["tenants"]?.arrayValue?.compactMap { $0["id"]?.stringValue } == ["beta"])

        // 600 s later it no longer applies, and the next tick prunes it.
        harness.clock.advance(by: 600)
        #expect(try await harness.console.store.overrides(now: harness.clock.now).isEmpty)
        await harness.tick()
        detail = await harness.send(.get, "/v1/tenants/beta", as: .operator)
        #expect(detail.jsonBody["override"] == .null)
        #expect(detail.jsonBody["upstreams"]?[0]?["override"] == .null)
        let rows = try await harness.pool.read { try $0.queryValue("SELECT count(*) FROM overrides")?.int64 }
        #expect(rows == 0)
        // Its end is audited, once, as the service's doing.
        let ended = await harness.send(.get, "/v1/audit?action=override.expire", as: .sre)
        let entries = ended.jsonBody["entries"]?.arrayValue ?? []
        #expect(entries.count == 1)
        #expect(entries.first?["actor"] == "allot")
        #expect(entries.first?["tenant"] == "beta")
        #expect(entries.first?["reason"] == "expired")
        #expect(entries.first?["before"]?["weight"]?.doubleValue == 3)
        // In the API's shape, as its `override.set` entry and the response showed it (round 21: the storage form,
        // `expiresAt` in epoch seconds).
        #expect(entries.first?["before"] == set.jsonBody["override"])
        #expect(entries.first?["before"]?["expires_at"]?.stringValue == RFC3339.format(OperatorHarness.start + 605))
        await harness.tick()
        let again = await harness.send(.get, "/v1/audit?action=override.expire", as: .sre)
        #expect(again.jsonBody["entries"]?.arrayValue?.count == 1)
        await harness.close()
    }

    /// An override that leaves a floor above the ceiling (with the tenant's other override or its tier) or above
    /// the pool's capacity applies with a warning saying so (round 20: both applied without a word).
    @Test func anOverrideThatContradictsTheTermsItJoinsSaysSo() async throws {
        let harness = try await OperatorHarness.make()
        await harness.tick()
        func put(_ body: String) async -> HTTPResponse {
            await harness.send(.put, "/v1/tenants/example-premium/override", as: .operator, json: body)
        }
        let wide = await put(#"{"ceiling":{"rpm":200},"reason":"cap","ttl_s":600}"#)
        #expect(wide.jsonBody["status"] == "applied")
        #expect(wide.jsonBody["warning"] == .null)
        let floor = await put(#"{"upstream":"openai/gpt-4o","floor":{"rpm":300},"reason":"launch","ttl_s":600}"#)
        #expect(floor.jsonBody["status"] == "applied")
        #expect(
            floor.jsonBody["warning"] == "on openai/gpt-4o the rpm floor 300 is above the ceiling 200: the floor wins")
        let huge = await put(#"{"upstream":"openai/gpt-4o","floor":{"rpm":20000},"reason":"launch","ttl_s":600}"#)
        #expect(
            huge.jsonBody["warning"]
                == .string(
                    "on openai/gpt-4o the rpm floor 20000 is above the ceiling 200: the floor wins; "
                        + "on openai/gpt-4o the rpm floor 20000 is above the pool's capacity 9800 "
                        + "(after the safety margin): it cannot be met"))
        // A new tenant-wide ceiling under the pool's floor: said for that pool (the capacity is the floor's
        // business).
        let low = await put(#"{"ceiling":{"rpm":150},"reason":"cap","ttl_s":600}"#)
        #expect(
            low.jsonBody["warning"] == "on openai/gpt-4o the rpm floor 20000 is above the ceiling 150: the floor wins")
        // Within the terms: no warning.
        let fine = await put(#"{"upstream":"openai/gpt-4o","floor":{"rpm":100},"reason":"launch","ttl_s":600}"#)
        #expect(fine.jsonBody["status"] == "applied")
        #expect(fine.jsonBody["warning"] == .null)
        // Without `upstream` a delete removes the tenant-wide override only; once that is gone, the 404 names the
        // pool that still has one (outside evaluation round 38: it said the tenant had no override in force).
        let path = "/v1/tenants/example-premium/override?reason=done"
        #expect(await harness.send(.delete, path, as: .operator).status == .ok)
        let again = await harness.send(.delete, path, as: .operator)
        #expect(again.status == .notFound)
        #expect(
            again.jsonBody["error"]?["message"]?.stringValue
                == "tenant example-premium has no tenant-wide override in force; it has one on openai/gpt-4o "
                + "(remove it with upstream=POOL)")
        #expect(await harness.send(.delete, path + "&upstream=openai/gpt-4o", as: .operator).status == .ok)
        let none = await harness.send(.delete, path, as: .operator)
        #expect(none.jsonBody["error"]?["message"]?.stringValue == "tenant example-premium has no override in force")
        await harness.close()
    }

    /// A ceiling on a pool with no capacity to allocate (known only from telemetry): the tenant is unlimited there,
    /// and an absolute ceiling is published as its rate; a percentage has nothing to resolve against and the warning
    /// says so (outside evaluation round 29: "applied", no warning, and the snapshot kept the tenant at 10¹²).
    @Test func aCeilingOnAPoolWithoutCapacityIsEnforcedOrSaysWhyNot() async throws {
        let mistral = TenantObservation(
            tenant: "example-premium", upstream: "mistral/large", demand: PerDimension(rpm: 400, tpm: 40_000))
        let harness = try await OperatorHarness.make(tenants: OperatorHarness.defaultTenants + [mistral])
        await harness.tick()
        func put(_ body: String) async -> HTTPResponse {
            await harness.send(.put, "/v1/tenants/example-premium/override", as: .operator, json: body)
        }
        let absolute = await put(#"{"upstream":"mistral/large","ceiling":{"rpm":50},"reason":"cap","ttl_s":600}"#)
        #expect(absolute.jsonBody["status"] == "applied")
        #expect(absolute.jsonBody["warning"] == .null)
        await harness.tick()
        func published() throws -> (rate: Double, burst: Double, reason: AllocationReason)? {
            let decision = try #require(harness.loop.view.decision)
            return decision.allocation(tenant: "example-premium", upstream: "mistral/large")?.published(.rpm)
        }
        let capped = try #require(try published())
        #expect(capped.rate == 50 && capped.reason == .override)
        let percent = await put(#"{"upstream":"mistral/large","ceiling":{"rpm":"5%"},"reason":"cap","ttl_s":600}"#)
        #expect(percent.jsonBody["status"] == "applied")
        #expect(
            percent.jsonBody["warning"]
                == .string(
                    "on mistral/large the rpm ceiling 5% has no capacity to resolve against (none declared or "
                        + "estimated) and limits nothing there until there is one: the tenant is unlimited there"))
        await harness.tick()
        #expect(try published() == nil)
        await harness.close()
    }

    /// A tenant-wide override is checked on the pools the tenant uses (every declared pool buried the one that
    /// mattered), and an override that waits for an SRE carries its warning too (round 21).
    @Test func conflictWarningsNameTheTenantsPoolsAndComeWithProposals() async throws {
        let harness = try await OperatorHarness.make()
        await harness.tick()
        let wide = await harness.send(
            .put, "/v1/tenants/example-premium/override", as: .operator,
            json: #"{"floor":{"rpm":20000},"reason":"launch","ttl_s":600}"#)
        #expect(wide.jsonBody["status"] == "applied")
        #expect(
            wide.jsonBody["warning"]?.stringValue
                == "on openai/gpt-4o the rpm floor 20000 is above the pool's capacity 9800 (after the safety margin): "
                + "it cannot be met")
        // The policy gives example-critical a floor of 5 % (490 rpm), critical's guard_min: a ceiling of 20 is a
        // proposal, and would leave the floor above it.
        let proposed = await harness.send(
            .put, "/v1/tenants/example-critical/override", as: .operator,
            json: #"{"upstream":"openai/gpt-4o","ceiling":{"rpm":20},"reason":"abuse","ttl_s":600}"#)
        #expect(proposed.status == .accepted)
        #expect(
            proposed.jsonBody["warning"] == "on openai/gpt-4o the rpm floor 490 is above the ceiling 20: the floor wins"
        )
        await harness.close()
    }

    @Test func overrideValidationNamesTheField() async throws {
        let harness = try await OperatorHarness.make()
        let cases: [(String, String, String)] = [
            (#"{"weight":2,"ttl_s":60}"#, "missing_field", "reason"),
            (#"{"weight":-1,"reason":"x","ttl_s":60}"#, "negative", "weight"),
            // Round 11: accepted, it overflowed the engine's product of weights and froze the loop.
            (#"{"weight":1e308,"reason":"x","ttl_s":60}"#, "out_of_range", "weight"),
            // Overrides always expire, within 366 days; a reason is at most 1024 bytes, as every other.
            (#"{"weight":2,"reason":"x","ttl_s":1e20}"#, "out_of_range", "ttl_s"),
            (#"{"weight":2,"reason":"x","expires_at":1e15}"#, "out_of_range", "expires_at"),
            (#"{"weight":2,"reason":"x","expires_at":"tomorrow"}"#, "invalid_value", "expires_at"),
            (#"{"weight":2,"reason":"x","expires_at":"1970-01-02T00:00:00Z"}"#, "out_of_range", "expires_at"),
            (#"{"weight":2,"reason":"\#(String(repeating: "x", count: 1025))","ttl_s":60}"#, "invalid_value", "reason"),
            (#"{"weight":2,"reason":"x"}"#, "missing_field", "ttl_s"),
            (#"{"tier":"platinum","reason":"x","ttl_s":60}"#, "unknown_tier", "tier"),
            // Round 12: both were accepted; a misspelt pool was stored and never applied.
            (#"{"weight":2,"reason":"x","ttl_s":60,"expires_at":1e10}"#, "invalid_value", "expires_at"),
            (#"{"weight":2,"reason":"x","ttl_s":60,"upstream":"openai/gpt4o"}"#, "unknown_upstream", "upstream"),
            (#"{"weight":2,"reason":"x","ttl_s":60,"upstream":""}"#, "invalid_value", "upstream"),
            (#"{"floor":{"rpm":50},"ceiling":{"rpm":10},"reason":"x","ttl_s":60}"#, "floor_above_ceiling", "floor.rpm"),
            (#"{"weight":2,"reason":"x","ttl_s":60,"colour":"red"}"#, "unknown_field", "colour"),
        ]
        for (body, code, field) in cases {
            let response = await harness.send(.put, "/v1/tenants/acme/override", as: .operator, json: body)
            #expect(response.status == .badRequest, "\(body)")
            #expect(response.jsonBody["error"]?["code"]?.stringValue == code, "\(body)")
            #expect(response.jsonBody["error"]?["field"]?.stringValue == field, "\(body)")
        }
        let notJSON = await harness.send(.put, "/v1/tenants/acme/override", as: .operator, json: "{weight")
        #expect(notJSON.jsonBody["error"]?["code"] == "invalid_json")
        // A byte order mark is named, as telemetry names it (outside evaluation round 36: "unexpected byte 0xEF").
        let bom = await harness.send(
            .put, "/v1/tenants/acme/override", as: .operator, json: "\u{FEFF}" + #"{"weight":2,"reason":"x","ttl_s":60}"#)
        #expect(bom.status == .badRequest)
        #expect(bom.jsonBody["error"]?["code"] == "invalid_json")
        #expect(bom.jsonBody["error"]?["message"]?.stringValue == JSON.byteOrderMarkInBody)
        // Where in the body: the field, as a validation error names it.
        let huge = await harness.send(
            .put, "/v1/tenants/acme/override", as: .operator, json: #"{"floor":{"rpm":1e400},"reason":"x","ttl_s":60}"#)
        #expect(huge.status == .badRequest)
        #expect(huge.jsonBody["error"]?["field"] == "floor.rpm")
        #expect(
            huge.jsonBody["error"]?["message"] == "invalid JSON at line 1, column 17 (floor.rpm): number out of range")
        // A repeated name is refused, not read as its first or its last value.
        let repeated = await harness.send(
            .put, "/v1/tenants/acme/override", as: .operator, json: #"{"weight":1,"reason":"x","ttl_s":60,"weight":9}"#)
        #expect(repeated.status == .badRequest)
        #expect(repeated.jsonBody["error"]?["code"] == "invalid_json")
        let message = repeated.jsonBody["error"]?["message"]?.stringValue ?? ""
        #expect(message.contains(#"duplicate member name "weight""#), "\(message)")
        let form = await harness.send(
            .put, "/v1/tenants/acme/override", as: .operator, json: "{}",
            headers: ["Content-Type": "application/x-www-form-urlencoded"])
        #expect(form.status == .unsupportedMediaType)
        let compressed = await harness.send(
            .put, "/v1/tenants/acme/override", as: .operator, json: "{}", headers: ["Content-Encoding": "gzip"])
        #expect(compressed.status == .unsupportedMediaType)
        #expect(compressed.jsonBody["error"]?["field"] == "Content-Encoding")
        // The media type itself, not a prefix of it; parameters, case and `+json` types are fine.
        for type in ["application/jsonx", "application/json-seq", "application/json5"] {
            let response = await harness.send(
                .put, "/v1/tenants/acme/override", as: .operator, json: "{}", headers: ["Content-Type": type])
            #expect(response.status == .unsupportedMediaType, "\(type)")
            #expect(response.jsonBody["error"]?["code"] == "unsupported_media_type", "\(type)")
        }
        for type in ["Application/JSON; charset=utf-8", "application/merge-patch+json", " application/json "] {
            let response = await harness.send(
                .put, "/v1/tenants/acme/override", as: .operator, json: "{}", headers: ["Content-Type": type])
            #expect(response.status == .badRequest, "\(type)")  // read as JSON: `{}` sets nothing
        }
        let badID = await harness.send(.put, "/v1/tenants/a%20b/override", as: .operator, json: "{}")
        #expect(badID.jsonBody["error"]?["field"] == "id")
        #expect(await harness.send(.delete, "/v1/tenants/acme/override", as: .operator).status == .notFound)
        // An RFC 3339 expiry, as every time the API answers with, is taken as well as epoch seconds.
        let until = RFC3339.format(harness.clock.now + 900, fractionDigits: 0)
        let other = await harness.send(
            .put, "/v1/tenants/acme/override", as: .operator,
            json: #"{"weight":2,"reason":"trial","expires_at":"\#(until)"}"#)
        #expect(other.status == .ok)
        #expect(other.jsonBody["override"]?["expires_at"]?.stringValue == RFC3339.format(harness.clock.now + 900))
        // A tenant nobody has seen (no telemetry, not in the policy) is stored with a warning naming the nearest id.
        let ghost = await harness.send(
            .put, "/v1/tenants/example-premiun/override", as: .operator, json: #"{"weight":2,"reason":"x","ttl_s":60}"#)
        #expect(ghost.status == .ok)
        #expect(
            ghost.jsonBody["warning"]?.stringValue
                == "no tenant example-premiun has sent telemetry or is named by the policy: the override waits for its "
                + "first call; did you mean \"example-premium\"?")
        await harness.close()
    }

    @Test func burstRequestIsPendingUntilTheNextTickDecidesIt() async throws {
        let harness = try await OperatorHarness.make()
        await harness.tick()
        let posted = await harness.send(
            .post, "/v1/tenants/beta/bursts", as: .gateway,
            json: #"{"calls":60,"tokens":60000,"ttl_s":120,"task_id":"t-9"}"#)
        #expect(posted.status == .accepted)
        #expect(posted.jsonBody["burst"]?["status"] == "pending")
        #expect(posted.jsonBody["burst"]?["upstream"]?.stringValue == OperatorHarness.upstream)
        #expect(posted.jsonBody["burst"]?["requested_by"] == "gateway-user")
        let id = try #require(posted.jsonBody["burst"]?["id"]?.stringValue)
        await harness.tick()
        let stored = try #require(try await harness.console.store.burst(id: id))
        #expect(stored.status != "pending")
        let listed = await harness.send(.get, "/v1/tenants/beta/bursts", as: .operator)
        #expect(listed.jsonBody["bursts"]?[0]?["id"]?.stringValue == id)
        #expect(listed.jsonBody["bursts"]?[0]?["status"]?.stringValue == stored.status)

        // A tenant the policy names: no warning. One nobody has seen: accepted, with the nearest id.
        let named = await harness.send(
            .post, "/v1/tenants/example-premium/bursts", as: .gateway,
            json: #"{"calls":5,"ttl_s":60,"upstream":"\#(OperatorHarness.upstream)"}"#)
        #expect(named.status == .accepted)
        #expect(named.jsonBody["warning"] == .null)
        let ghost = await harness.send(
            .post, "/v1/tenants/example-premiun/bursts", as: .gateway,
            json: #"{"calls":5,"ttl_s":60,"upstream":"\#(OperatorHarness.upstream)"}"#)
        #expect(ghost.status == .accepted)
        #expect(
            ghost.jsonBody["warning"]?.stringValue
                == "no tenant example-premiun has sent telemetry or is named by the policy: the next tick decides the "
                + "burst as unknown (the tenant is in no decision); did you mean \"example-premium\"?")

        let invalid = await harness.send(.post, "/v1/tenants/beta/bursts", as: .operator, json: #"{"calls":5}"#)
        #expect(invalid.jsonBody["error"]?["field"] == "ttl_s")
        let empty = await harness.send(.post, "/v1/tenants/beta/bursts", as: .operator, json: #"{"ttl_s":60}"#)
        #expect(empty.jsonBody["error"]?["field"] == "calls")
        // Round 12: a burst for a misspelt pool was accepted and could never be granted.
        let misspelt = await harness.send(
            .post, "/v1/tenants/beta/bursts", as: .operator, json: #"{"calls":5,"ttl_s":60,"upstream":"openai/gpt4o"}"#)
        #expect(misspelt.status == .badRequest)
        #expect(misspelt.jsonBody["error"]?["code"] == "unknown_upstream")
        #expect(
            misspelt.jsonBody["error"]?["message"]?.stringValue
                == #"unknown upstream "openai/gpt4o"; did you mean "openai/gpt-4o"?"#)
        await harness.close()
    }

    @Test func everyMutationIsAudited() async throws {
        let harness = try await OperatorHarness.make()
        await harness.tick()
        _ = await harness.send(
            .put, "/v1/tenants/beta/override", as: .operator, json: #"{"weight":3,"reason":"first","ttl_s":600}"#)
        _ = await harness.send(
            .put, "/v1/tenants/beta/override", as: .operator, json: #"{"weight":4,"reason":"second","ttl_s":600}"#)
        _ = await harness.send(.delete, "/v1/tenants/beta/override", as: .operator, json: #"{"reason":"done"}"#)
        let proposed = await harness.send(
            .put, "/v1/tenants/example-premium/override", as: .operator,
            json: #"{"ceiling":{"rpm":5},"reason":"cap","ttl_s":600}"#)
        let overrideProposal = try #require(proposed.jsonBody["proposal"]?["id"]?.stringValue)
        _ = await harness.send(.post, "/v1/proposals/\(overrideProposal)/reject", as: .sre, json: #"{"reason":"no"}"#)
        let engine = await harness.send(.get, "/v1/proposals?source=engine", as: .sre)
        let engineProposal = try #require(engine.jsonBody["proposals"]?[0]?["id"]?.stringValue)
        _ = await harness.send(.post, "/v1/proposals/\(engineProposal)/approve", as: .admin, json: #"{"reason":"ok"}"#)
        _ = await harness.send(
            .post, "/v1/tenants/beta/bursts", as: .operator,
            json: #"{"calls":10,"ttl_s":60,"task_id":"t-9","reason":"quarter-end report"}"#)
        let created = await harness.send(.post, "/v1/tokens", as: .admin, json: #"{"name":"ci","role":"gateway"}"#)
        #expect(created.status == .created)
        let tokenID = try #require(created.jsonBody["id"]?.stringValue)
        #expect(created.jsonBody["token"]?.stringValue?.hasPrefix("allot_") == true)
        _ = await harness.send(.delete, "/v1/tokens/\(tokenID)", as: .admin)
        await harness.console.recordPolicyReload(
            source: "policies", from: ("aaaa", ["a.json"]), to: ("bbbb", ["a.json", "b.json"]))

        let audit = await harness.send(.get, "/v1/audit?limit=50", as: .sre)
        #expect(audit.status == .ok)
        let entries = try #require(audit.jsonBody["entries"]?.arrayValue)
        let actions = entries.compactMap { $0["action"]?.stringValue }
        #expect(
            Array(actions.prefix(10)) == [
                "policy.reload", "token.revoke", "token.create", "burst.request", "proposal.approve", "proposal.reject",
                "override.propose", "override.delete", "override.set", "override.set",
            ])
        func entry(_ action: String) -> JSON? { entries.first { $0["action"]?.stringValue == action } }
        #expect(entry("override.delete")?["before"]?["override"]?["weight"]?.doubleValue == 4)
        #expect(entry("override.delete")?["after"] == .null)
        #expect(entry("override.delete")?["reason"] == "done")
        #expect(entry("override.delete")?["actor"] == "operator-user")
        #expect(entry("override.delete")?["actor_role"] == "operator")
        let sets = entries.filter { $0["action"] == "override.set" }
        #expect(sets.first?["before"]?["weight"]?.doubleValue == 3)
        #expect(sets.first?["after"]?["weight"]?.doubleValue == 4)
        #expect(sets.first?["tenant"] == "beta")
        #expect(entry("proposal.reject")?["before"]?["status"] == "pending")
        #expect(entry("proposal.reject")?["after"]?["status"] == "rejected")
        #expect(entry("proposal.approve")?["actor"] == "admin-user")
        #expect(entry("burst.request")?["reason"] == "task t-9; quarter-end report")
        #expect(entry("token.revoke")?["after"]?["revoked"] == true)
        #expect(entry("policy.reload")?["after"]?["version"] == "bbbb")
        // No secret in the log, ever.
        #expect(!audit.bodyText.contains(created.jsonBody["token"]?.stringValue ?? "-"))

        // Filters and paging.
        let family = await harness.send(.get, "/v1/audit?action=override", as: .sre)
        #expect(family.jsonBody["entries"]?.arrayValue?.count == 4)
        let page = await harness.send(.get, "/v1/audit?limit=3", as: .sre)
        let cursor = try #require(page.jsonBody["next_cursor"]?.stringValue)
        let next = await harness.send(.get, "/v1/audit?limit=3&cursor=\(cursor)", as: .sre)
        #expect(next.jsonBody["entries"]?[0]?["action"] == "burst.request")
        let tenant = await harness.send(.get, "/v1/audit?tenant=example-premium", as: .sre)
        #expect(
            tenant.jsonBody["entries"]?.arrayValue?.compactMap { $0["action"]?.stringValue } == [
                "proposal.reject", "override.propose",
            ])
        // Epoch seconds given for `from` fell in January 1970 as milliseconds and matched everything: refused.
        let seconds = await harness.send(.get, "/v1/audit?from=1764345600", as: .sre)
        #expect(seconds.status == .badRequest)
        #expect(seconds.jsonBody["error"]?["field"] == "from")
        #expect(
            seconds.jsonBody["error"]?["message"]?.stringValue?.hasPrefix(
                "from 1764345600 looks like epoch seconds; give epoch milliseconds (1764345600000)") == true)
        #expect(await harness.send(.get, "/v1/audit?from=1764345600000", as: .sre).status == .ok)
        #expect(await harness.send(.get, "/v1/audit", as: .operator).status == .forbidden)
        await harness.close()
    }
}
