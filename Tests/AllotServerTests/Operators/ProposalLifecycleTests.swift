import AllotCore
import AllotHTTP
import AllotJSON
import AllotStore
import AllotTime
import Testing

@testable import AllotServer

/// Engine and override proposals through the API on a virtual clock (SPEC 6.7, 6.8): approval
/// applies at the next tick, rejection suppresses for the cool-down, pending proposals expire.
@Suite struct ProposalLifecycleTests {
    /// acme (standard, guard_max 100 RPM) wants 1,000 RPM: the engine clamps it and files a proposal.
    func pendingProposal(_ harness: OperatorHarness) async throws -> JSON {
        await harness.tick()
        let list = await harness.send(.get, "/v1/proposals", as: .sre)
        #expect(list.status == .ok)
        let proposals = try #require(list.jsonBody["proposals"]?.arrayValue)
        let proposal = try #require(proposals.first { $0["tenant"] == "acme" && $0["dimension"] == "rpm" })
        #expect(proposal["kind"] == "raise_above_guard_max")
        #expect(proposal["source"] == "engine")
        #expect(proposal["status"] == "pending")
        #expect(proposal["guardrail"]?.doubleValue == 100)
        #expect((proposal["value"]?.doubleValue ?? 0) > 100)
        #expect(proposal["evidence"]?["guard_max"]?.doubleValue == 100)
        #expect(proposal["expires_at"]?.stringValue != nil)
        return proposal
    }

    func acmeRPM(_ harness: OperatorHarness) async throws -> (rate: Double, reason: String) {
        let detail = await harness.send(.get, "/v1/tenants/acme", as: .operator)
        #expect(detail.status == .ok)
        let allocation = try #require(detail.jsonBody["upstreams"]?[0]?["allocation"]?["rpm"])
        return (try #require(allocation["rate"]?.doubleValue), try #require(allocation["reason"]?.stringValue))
    }

    @Test func approvalAppliesAtTheNextTick() async throws {
        let harness = try await OperatorHarness.make()
        let proposal = try await pendingProposal(harness)
        let id = try #require(proposal["id"]?.stringValue)
        let clamped = try await acmeRPM(harness)
        #expect(clamped.rate == 100)
        #expect(clamped.reason == "guardrail_clamped")

        let approved = await harness.send(.post, "/v1/proposals/\(id)/approve", as: .sre, json: #"{"reason":"QBR"}"#)
        #expect(approved.status == .ok)
        #expect(approved.jsonBody["proposal"]?["status"] == "approved")
        #expect(approved.jsonBody["proposal"]?["decided_by"] == "sre-user")
        // Not applied before the next tick.
        #expect(try await acmeRPM(harness).rate == 100)

        await harness.tick()
        let after = try await acmeRPM(harness)
        #expect(after.rate > 100)
        #expect(after.reason != "guardrail_clamped")
        let record = try #require(try await harness.console.store.proposal(id: id))
        #expect(record.storedStatus == "approved")
        #expect(try await harness.console.store.inputs(now: harness.clock.now).resolutions.isEmpty)

        let again = await harness.send(.post, "/v1/proposals/\(id)/approve", as: .sre)
        #expect(again.status == .conflict)
        #expect(again.jsonBody["error"]?["code"] == "proposal_resolved")
        #expect(await harness.send(.post, "/v1/proposals/p-nope/approve", as: .sre).status == .notFound)
        // Operators read everything but cannot decide proposals.
        #expect(await harness.send(.post, "/v1/proposals/\(id)/reject", as: .operator).status == .forbidden)
        await harness.close()
    }

    @Test func rejectionSuppressesTheProposalForTheCoolDown() async throws {
        let harness = try await OperatorHarness.make()
        let id = try #require(try await pendingProposal(harness)["id"]?.stringValue)
        let rejected = await harness.send(.post, "/v1/proposals/\(id)/reject", as: .sre)
        #expect(rejected.status == .ok)
        #expect(rejected.jsonBody["status"] == "rejected")

        for _ in 0..<3 { await harness.tick() }
        #expect(try await acmeRPM(harness).rate == 100)
        let pending = await harness.send(.get, "/v1/proposals?status=pending&tenant=acme", as: .sre)
        #expect(pending.jsonBody["proposals"]?.arrayValue?.count == 0)
        let record = try #require(try await harness.console.store.proposal(id: id))
        #expect(record.storedStatus == "rejected")

        // After the cool-down (reject_cooldown_s = 3600) the condition files a new proposal.
        harness.clock.advance(by: harness.policy.proposals.rejectCooldownSeconds)
        await harness.tick()
        await harness.tick()
        let refiled = await harness.send(.get, "/v1/proposals?tenant=acme", as: .sre)
        let ids = refiled.jsonBody["proposals"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
        #expect(ids.count == 1)
        #expect(ids.first != id)
        // Paged newest filed first, as the tenant list is: the new proposal, then the rejected one.
        let first = await harness.send(.get, "/v1/proposals?status=all&tenant=acme&limit=1", as: .sre)
        #expect(first.jsonBody["proposals"]?[0]?["id"]?.stringValue == ids.first)
        #expect(first.jsonBody["total"] == 2)
        #expect(first.jsonBody["next_offset"] == 1)
        let second = await harness.send(.get, "/v1/proposals?status=all&tenant=acme&limit=1&offset=1", as: .sre)
        #expect(second.jsonBody["proposals"]?.arrayValue?.compactMap { $0["id"]?.stringValue } == [id])
        #expect(second.jsonBody["offset"] == 1)
        #expect(second.jsonBody["next_offset"] == .null)
        let negative = await harness.send(.get, "/v1/proposals?offset=-1", as: .sre)
        #expect(negative.jsonBody["error"]?["field"] == "offset")
        await harness.close()
    }

    @Test func pendingProposalsExpire() async throws {
        let harness = try await OperatorHarness.make()
        let id = try #require(try await pendingProposal(harness)["id"]?.stringValue)
        harness.clock.advance(by: harness.policy.proposals.ttlSeconds)
        // Before a tick records it, the expiry already shows.
        let late = await harness.send(.post, "/v1/proposals/\(id)/approve", as: .sre)
        #expect(late.status == .conflict)
        #expect(late.jsonBody["error"]?["code"] == "proposal_expired")
        await harness.tick()
        let record = try #require(try await harness.console.store.proposal(id: id))
        #expect(record.storedStatus == "expired")
        let expired = await harness.send(.get, "/v1/proposals?status=expired", as: .sre)
        #expect(expired.jsonBody["proposals"]?.arrayValue?.contains { $0["id"]?.stringValue == id } == true)
        await harness.close()
    }

    /// Outside evaluation round 27 (H1): a decision the API accepted in the last interval before the expiry was
    /// audited, then the tick after the expiry expired the proposal unapplied and filed it again.
    @Test func decisionsInTheLastIntervalBeforeTheExpiryStand() async throws {
        for verdict in ["approve", "reject"] {
            let harness = try await OperatorHarness.make()
            let id = try #require(try await pendingProposal(harness)["id"]?.stringValue)
            // The harness's tick moved the clock 5 s on: one second before the expiry.
            harness.clock.advance(by: harness.policy.proposals.ttlSeconds - 6)
            let decided = await harness.send(.post, "/v1/proposals/\(id)/\(verdict)", as: .sre)
            #expect(decided.status == .ok)
            harness.clock.advance(by: 2)
            await harness.tick()
            let record = try #require(try await harness.console.store.proposal(id: id))
            #expect(record.storedStatus == (verdict == "approve" ? "approved" : "rejected"))
            let pending = await harness.send(.get, "/v1/proposals?status=pending&tenant=acme", as: .sre)
            #expect(pending.jsonBody["proposals"]?.arrayValue?.count == 0)
            let rpm = try await acmeRPM(harness)
            if verdict == "approve" {
                #expect(rpm.rate > 100)
                #expect(rpm.reason != "guardrail_clamped")
            } else {
                #expect(rpm.rate == 100)
            }
            await harness.close()
        }
    }

    @Test func anOverrideCrossingAGuardrailWaitsForAnSRE() async throws {
        let harness = try await OperatorHarness.make()
        await harness.tick()
        // premium guard_min is 0.5% of C = 49 RPM: a 10 RPM ceiling crosses it.
        let body = #"{"upstream":"openai/gpt-4o","ceiling":{"rpm":10},"reason":"abuse report 42","ttl_s":7200}"#
        let filed = await harness.send(.put, "/v1/tenants/example-premium/override", as: .operator, json: body)
        #expect(filed.status == .accepted)
        #expect(filed.jsonBody["status"] == "proposed")
        let proposal = try #require(filed.jsonBody["proposal"])
        #expect(proposal["kind"] == "override")
        #expect(proposal["crossings"]?[0]?["kind"] == "ceiling_below_guard_min")
        #expect(proposal["crossings"]?[0]?["guardrail"]?.doubleValue == 49)
        #expect(proposal["override"]?["actor"] == "operator-user")
        let id = try #require(proposal["id"]?.stringValue)

        let twice = await harness.send(.put, "/v1/tenants/example-premium/override", as: .operator, json: body)
        #expect(twice.status == .conflict)
        #expect(twice.jsonBody["error"]?["code"] == "proposal_pending")
        // It is an alert in force, on its pool (round 21: `upstream` was null, so `?upstream=` missed it), and
        // `/metrics` counts it (it did not: `allot_alerts` read the loop's alerts alone).
        #expect(!harness.metrics.render().contains(#"allot_alerts{kind="override_proposal""#))
        _ = try await harness.console.serviceAlerts(now: harness.clock.now)  // what the `/metrics` route does first
        #expect(harness.metrics.render().contains(#"allot_alerts{kind="override_proposal",severity="info"} 1"# + "\n"))
        let alerts = await harness.send(
            .get, "/v1/alerts?kind=override_proposal&upstream=openai/gpt-4o", as: .operator)
        #expect(alerts.jsonBody["count"] == 1)
        #expect(alerts.jsonBody["alerts"]?[0]?["upstream"] == "openai/gpt-4o")
        #expect(alerts.jsonBody["alerts"]?[0]?["tenant"] == "example-premium")
        // Nothing applies while it waits.
        await harness.tick()
        #expect(try await harness.console.store.overrides(now: harness.clock.now).isEmpty)

        let approved = await harness.send(.post, "/v1/proposals/\(id)/approve", as: .sre)
        #expect(approved.status == .ok)
        #expect(approved.jsonBody["proposal"]?["override"]?["approved"] == true)
        #expect(approved.jsonBody["warning"] == .null)  // two hours asked, within the approval's day
        let inForce = try await harness.console.store.overrides(now: harness.clock.now)
        #expect(inForce.map(\.override.approved) == [true])
        #expect(inForce.first?.proposalID == id)

        await harness.tick()
        let detail = await harness.send(.get, "/v1/tenants/example-premium", as: .operator)
        let entry = try #require(detail.jsonBody["upstreams"]?[0])
        #expect(entry["override"]?["approved"] == true)
        let rpm = try #require(entry["allocation"]?["rpm"])
        #expect(rpm["reason"] == "override")
        // The "why": the ceiling is 10, but hi = max(floor, min(ceiling, …)) keeps the premium floor
        // (0.5% of C = 49); the guardrail (guard_min, also 49) no longer applies.
        #expect(rpm["why"]?["ceiling"]?.doubleValue == 10)
        #expect(rpm["why"]?["guard_min"]?.doubleValue == 0)
        #expect(rpm["rate"]?.doubleValue == 49)
        #expect(rpm["why"]?["snapshot_version"]?.int64Value == detail.jsonBody["snapshot_version"]?.int64Value)
        #expect(detail.jsonBody["override"]?["proposal_id"]?.stringValue == id)
        await harness.close()
    }

    /// An approval holds for `approval_ttl_s` (a day by default): an override asked for longer ends then, and the
    /// approval says so (round 21: it was cut silently).
    @Test func anApprovalSaysWhenItCutsTheOverridesExpiry() async throws {
        let harness = try await OperatorHarness.make()
        await harness.tick()
        let body = #"{"upstream":"openai/gpt-4o","ceiling":{"rpm":10},"reason":"abuse report 42","ttl_s":604800}"#
        let filed = await harness.send(.put, "/v1/tenants/example-premium/override", as: .operator, json: body)
        let id = try #require(filed.jsonBody["proposal"]?["id"]?.stringValue)
        let approved = await harness.send(.post, "/v1/proposals/\(id)/approve", as: .sre)
        let ends = RFC3339.format(harness.clock.now + 86_400)
        #expect(approved.jsonBody["proposal"]?["override"]?["expires_at"]?.stringValue == ends)
        #expect(
            approved.jsonBody["warning"]?.stringValue
                == "the override ends at \(ends), when this approval lapses (proposals.approval_ttl_s, 86400 s), "
                + "not at the expiry it asked for; set it again before then to keep it (a new proposal)")
        await harness.close()
    }

    @Test func aRejectedOverrideCannotBeProposedAgainDuringTheCoolDown() async throws {
        let harness = try await OperatorHarness.make()
        let body = #"{"ceiling":{"rpm":5},"reason":"cost control","ttl_s":3600}"#
        let filed = await harness.send(.put, "/v1/tenants/example-premium/override", as: .operator, json: body)
        let id = try #require(filed.jsonBody["proposal"]?["id"]?.stringValue)
        let rejected = await harness.send(
            .post, "/v1/proposals/\(id)/reject", as: .sre, json: #"{"reason":"talk to the account manager"}"#)
        #expect(rejected.status == .ok)

        let again = await harness.send(.put, "/v1/tenants/example-premium/override", as: .operator, json: body)
        #expect(again.status == .conflict)
        #expect(again.jsonBody["error"]?["code"] == "proposal_rejected")
        #expect(again.jsonBody["error"]?["message"]?.stringValue?.contains("rejected by sre-user") == true)
        // What it blocks, said as it is: any crossing override of the tenant there, not only the same one.
        let message = again.jsonBody["error"]?["message"]?.stringValue ?? ""
        #expect(message.contains("no tenant-wide override of it that crosses a guardrail can be filed until"))

        harness.clock.advance(by: harness.policy.proposals.rejectCooldownSeconds + 1)
        let later = await harness.send(.put, "/v1/tenants/example-premium/override", as: .operator, json: body)
        #expect(later.status == .accepted)
        await harness.close()
    }

    @Test func deletingTheOverrideWithdrawsItsPendingProposal() async throws {
        let harness = try await OperatorHarness.make()
        let body = #"{"ceiling":{"rpm":5},"reason":"cost control","ttl_s":3600}"#
        let filed = await harness.send(.put, "/v1/tenants/example-premium/override", as: .operator, json: body)
        let id = try #require(filed.jsonBody["proposal"]?["id"]?.stringValue)
        // A reason in the query is held to a body's limit (1,024 bytes); refused, nothing is withdrawn.
        let long = String(repeating: "x", count: 1_025)
        let refused = await harness.send(.delete, "/v1/tenants/example-premium/override?reason=\(long)", as: .operator)
        #expect(refused.badRequest == Refusal(field: "reason", message: "reason is longer than 1024 bytes"))
        let deleted = await harness.send(.delete, "/v1/tenants/example-premium/override?reason=mistake", as: .operator)
        #expect(deleted.status == .ok)
        #expect(deleted.jsonBody["removed"] == .null)
        #expect(deleted.jsonBody["withdrawn"]?["status"] == "withdrawn")
        let approve = await harness.send(.post, "/v1/proposals/\(id)/approve", as: .sre)
        #expect(approve.status == .conflict)
        #expect(
            approve.jsonBody["error"]?["message"]?.stringValue?.hasPrefix(
                "proposal \(id) was already withdrawn by operator-user at ") == true)
        await harness.close()
    }
}
