import AllotCore
import AllotHTTP
import AllotJSON
import AllotLoop
import AllotStore
import AllotTime
import Foundation
import Testing

@testable import AllotServer

/// The read side of the operator API, router-level: tenants (filters, sorting, paging, the "why"),
/// upstreams, gateways, alerts, costs, and the report metrics.
@Suite struct ReadRoutesTests {
    func ids(_ response: HTTPResponse) -> [String] {
        response.jsonBody["tenants"]?.arrayValue?.compactMap { $0["id"]?.stringValue } ?? []
    }

    @Test func tenantListFiltersSortsAndPages() async throws {
        let harness = try await OperatorHarness.make()
        await harness.classifier.setStarved(["beta"])
        await harness.tick()
        let all = await harness.send(.get, "/v1/tenants", as: .operator)
        #expect(all.status == .ok)
        // The three observed tenants plus the policy's named ones.
        #expect(ids(all) == ["acme", "beta", "example-critical", "example-free", "example-premium"])
        #expect(all.jsonBody["total"] == 5)
        // The policy's tiers, whether a tenant has them or not: what the dashboard's override form offers.
        #expect(all.jsonBody["tiers"] == ["critical", "free", "premium", "standard"])
        let acme = try #require(all.jsonBody["tenants"]?[0])
        #expect(acme["tier"] == "standard")
        #expect(acme["class"] == "steady")
        #expect(acme["demand"]?["rpm"]?.doubleValue == 1000)
        #expect(acme["allocation"]?["rpm"]?.doubleValue == 100)
        #expect(acme["reason"]?["rpm"] == "guardrail_clamped")
        #expect(acme["upstreams"] == [.string(OperatorHarness.upstream)])

        #expect(ids(await harness.send(.get, "/v1/tenants?tier=premium", as: .operator)) == ["example-premium"])
        #expect(ids(await harness.send(.get, "/v1/tenants?starved=true", as: .operator)) == ["beta"])
        #expect(ids(await harness.send(.get, "/v1/tenants?alert=starved", as: .operator)) == ["beta"])
        #expect(ids(await harness.send(.get, "/v1/tenants?alert=any", as: .operator)) == ["beta"])
        let alertTypo = await harness.send(.get, "/v1/tenants?alert=circuit-open", as: .operator)
        #expect(
            alertTypo.badRequest
                == Refusal(
                    field: "alert",
                    message: #"unknown alert kind "circuit-open"; did you mean "circuit_open"?"#))
        #expect(ids(await harness.send(.get, "/v1/tenants?search=EXAMPLE-p", as: .operator)) == ["example-premium"])
        #expect(
            ids(await harness.send(.get, "/v1/tenants?upstream=openai/gpt-4o&sort=-demand_rpm", as: .operator))
                == ["acme", "example-premium", "beta"])
        #expect(
            ids(await harness.send(.get, "/v1/tenants?sort=tier&order=desc&limit=2", as: .operator))
                == ["example-free", "acme"])
        let page = await harness.send(.get, "/v1/tenants?limit=2&offset=2", as: .operator)
        #expect(ids(page) == ["example-critical", "example-free"])
        #expect(page.jsonBody["next_offset"] == 4)

        let typo = await harness.send(.get, "/v1/tenants?teir=premium", as: .operator)
        #expect(typo.status == .badRequest)
        #expect(typo.jsonBody["error"]?["field"] == "teir")
        let badSort = await harness.send(.get, "/v1/tenants?sort=size", as: .operator)
        #expect(badSort.jsonBody["error"]?["field"] == "sort")
        // A tier or pool no policy defines and no tenant has is a typo, not an empty list (round 14).
        let tier = await harness.send(.get, "/v1/tenants?tier=premiun", as: .operator)
        #expect(tier.badRequest == Refusal(field: "tier", message: #"unknown tier "premiun"; did you mean "premium"?"#))
        let farOff = await harness.send(.get, "/v1/tenants?tier=gold", as: .operator)
        #expect(
            farOff.badRequest
                == Refusal(
                    field: "tier",
                    message: #"unknown tier "gold"; expected one of "critical", "free", "premium", "standard""#))
        let pool = await harness.send(.get, "/v1/tenants?upstream=openai/gpt4o", as: .operator)
        #expect(pool.status == .badRequest)
        #expect(pool.jsonBody["error"]?["field"] == "upstream")
        #expect(pool.jsonBody["error"]?["message"]?.stringValue?.contains(#"did you mean "openai/gpt-4o""#) == true)
        #expect(ids(await harness.send(.get, "/v1/tenants?tier=premium", as: .operator)) == ["example-premium"])
        // Both orders at once was read as the second (round 14): refused. The same order twice is fine.
        let both = await harness.send(.get, "/v1/tenants?sort=-demand_rpm&order=asc", as: .operator)
        #expect(both.status == .badRequest)
        #expect(both.jsonBody["error"]?["field"] == "order")
        #expect(await harness.send(.get, "/v1/tenants?sort=-demand_rpm&order=desc", as: .operator).status == .ok)
        let badLimit = await harness.send(.get, "/v1/tenants?limit=0", as: .operator)
        #expect(badLimit.jsonBody["error"]?["field"] == "limit")
        await harness.close()
    }

    /// One customer's keys (a policy `group`) are listed, filtered and shown with their group; a group no policy
    /// tenant has is refused with the nearest, as a tier is.
    @Test func tenantListAndDetailShowThePolicyGroup() async throws {
        let harness = try await OperatorHarness.make { policy in
            policy.setTenant(TenantPolicy(id: "acme", tier: "standard", group: "globex-co"))
            policy.setTenant(TenantPolicy(id: "beta", tier: "standard", group: "globex-co"))
        }
        await harness.tick()
        let all = await harness.send(.get, "/v1/tenants", as: .operator)
        let groups = all.jsonBody["tenants"]?.arrayValue?.map { $0["group"] }
        #expect(groups == ["globex-co", "globex-co", .null, .null, .null])
        #expect(ids(await harness.send(.get, "/v1/tenants?group=globex-co", as: .operator)) == ["acme", "beta"])
        #expect(
            ids(await harness.send(.get, "/v1/tenants?group=globex-co&starved=true", as: .operator)) == [])
        let typo = await harness.send(.get, "/v1/tenants?group=globex-cp", as: .operator)
        #expect(
            typo.badRequest
                == Refusal(field: "group", message: #"unknown group "globex-cp"; did you mean "globex-co"?"#))
        #expect(await harness.send(.get, "/v1/tenants/acme", as: .operator).jsonBody["group"] == "globex-co")
        #expect(await harness.send(.get, "/v1/tenants/example-premium", as: .operator).jsonBody["group"] == .null)
        await harness.close()
    }

    @Test func tenantDetailExplainsTheAllocation() async throws {
        let harness = try await OperatorHarness.make()
        await harness.tick()
        await harness.tick()
        let detail = await harness.send(.get, "/v1/tenants/beta", as: .operator)
        #expect(detail.status == .ok)
        let body = detail.jsonBody
        #expect(body["tier"] == "standard")
        #expect(body["tier_source"] == "default")
        #expect(body["tick"] == 2)
        let entry = try #require(body["upstreams"]?[0])
        #expect(entry["upstream"]?.stringValue == OperatorHarness.upstream)
        #expect(entry["class"] == "steady")
        let why = try #require(entry["allocation"]?["rpm"]?["why"])
        // Inputs (capacity, weight, floor, ceiling, demand), the fair-share level, the damping step.
        #expect(why["capacity"]?.doubleValue == 9800)
        #expect(why["capacity_estimate"]?.doubleValue == 10_000)
        #expect(why["weight"]?.doubleValue == 2)
        #expect(why["demand"]?.doubleValue == 50)
        #expect(why["level"]?.doubleValue != nil)
        #expect(why["step"]?.doubleValue != nil)
        #expect(why["damping"]?.stringValue != nil)
        #expect(why["snapshot_version"]?.int64Value == body["snapshot_version"]?.int64Value)
        #expect(body["snapshot_version"]?.int64Value != nil)
        #expect(entry["burst_account"]?["debt"]?["calls"]?.doubleValue == 0)
        #expect(body["history"]?["points"]?.arrayValue != nil)

        let unknown = await harness.send(.get, "/v1/tenants/nobody", as: .operator)
        #expect(unknown.status == .notFound)
        #expect(unknown.jsonBody["error"]?["field"] == "id")
        await harness.close()
    }

    /// `gateway_shares` are the Classifier's demand shares; `gateway_slices` what the served version gives each
    /// gateway (round 20's F11: a young tenant seen at one gateway showed `{"gw-a": 1}` while it was split evenly).
    @Test func tenantDetailShowsThePublishedSplitBesideTheDemandShares() async throws {
        let harness = try await OperatorHarness.make()
        await harness.classifier.setGatewayShares(
            ["acme": ["gw-a": 0.25, "gw-b": 0.75], "beta": ["gw-a": 1]], young: ["beta"])
        await harness.tick()
        let beta = try #require(await harness.send(.get, "/v1/tenants/beta", as: .operator).jsonBody["upstreams"]?[0])
        #expect(beta["gateway_shares"] == ["gw-a": 1])
        let rate = try #require(beta["allocation"]?["rpm"]?["rate"]?.doubleValue)
        let slices = try #require(beta["gateway_slices"]?.objectValue)
        #expect(slices.keys.sorted() == ["gw-a", "gw-b"])
        for gateway in ["gw-a", "gw-b"] {
            let part = try #require(slices[gateway]?["rpm"]?.doubleValue)
            #expect(abs(part - rate / 2) < 1e-9 * rate)
        }
        let acme = try #require(await harness.send(.get, "/v1/tenants/acme", as: .operator).jsonBody["upstreams"]?[0])
        let acmeRate = try #require(acme["allocation"]?["rpm"]?["rate"]?.doubleValue)
        let acmeB = try #require(acme["gateway_slices"]?["gw-b"]?["rpm"]?.doubleValue)
        #expect(acmeB > 0.7 * acmeRate && acmeB < 0.8 * acmeRate)
        await harness.close()
        // A pool without capacity in a dimension publishes 10¹² split between the gateways: shown as null, as the
        // allocation shows that dimension (review).
        #expect(TenantRoutes.sliceRate(5e11) == .null)
        #expect(TenantRoutes.sliceRate(250) == 250)
    }

    @Test func historyAndCostsComeFromTheRollups() async throws {
        let harness = try await OperatorHarness.make()
        let now = harness.clock.now
        let ms = EpochTime.milliseconds(fromSeconds: now - 120)
        var lines: [String] = []
        for (tenant, upstream, prompt, completion) in [
            ("acme", "openai/gpt-4o", 1_000_000, 100_000), ("beta", "openai/gpt-4o", 200_000, 0),
            ("beta", "mystery/model", 1_000_000, 0),
        ] {
            lines.append(
                #"{"ts":\#(ms),"gateway":"gw-1","tenant":"\#(tenant)","upstream":"\#(upstream)","status":200,"#
                    + #""prompt_tokens":\#(prompt),"completion_tokens":\#(completion),"task_class":"batch"}"#)
        }
        // Attempts the provider refused or failed are not billed: neither showback nor spend counts them (outside
        // evaluation round 27: the costs priced every event's tokens, the budgets served calls only).
        for failed in [#""status":429"#, #""outcome":"server_error""#, #""outcome":"timeout""#] {
            lines.append(
                #"{"ts":\#(ms),"gateway":"gw-1","tenant":"acme","upstream":"openai/gpt-4o",\#(failed),"#
                    + #""prompt_tokens":400000,"completion_tokens":50000,"task_class":"batch"}"#)
        }
        _ = try await harness.telemetry.ingest(
            body: Array(lines.joined(separator: "\n").utf8), format: .ndjson, defaultTier: "standard", now: now)

        let costs = await harness.send(.get, "/v1/costs", as: .operator)
        #expect(costs.status == .ok)
        let rows = try #require(costs.jsonBody["rows"]?.arrayValue)
        // acme: 1M input × 2.5 + 0.1M output × 10 = 3.5; beta: 0.2M × 2.5 = 0.5 plus 1M at the
        // default price (15) on an unpriced model = 15.5, marked unpriced.
        #expect(rows.map { $0["tenant"]?.stringValue ?? "" } == ["beta", "acme"])
        #expect(rows[0]["cost"]?.doubleValue == 15.5)
        #expect(rows[0]["priced"] == false)
        #expect(rows[0]["unpriced_cost"]?.doubleValue == 15)
        #expect(rows[1]["cost"]?.doubleValue == 3.5)
        #expect(rows[1]["requests"] == 1)
        #expect(rows[1]["prompt_tokens"] == 1_000_000)
        #expect(rows[1]["tier"] == "standard")
        #expect(costs.jsonBody["total"]?["cost"]?.doubleValue == 19)
        #expect(costs.jsonBody["currency"] == "USD")

        let byUpstream = await harness.send(.get, "/v1/costs?group_by=upstream", as: .operator)
        #expect(
            byUpstream.jsonBody["rows"]?.arrayValue?.compactMap { $0["upstream"]?.stringValue } == [
                "mystery/model", "openai/gpt-4o",
            ])
        let csv = await harness.send(
            .get, "/v1/costs?group_by=task_class", as: .operator, headers: ["Accept": "text/csv"])
        #expect(csv.headers["Content-Type"] == "text/csv; charset=utf-8")
        #expect(
            csv.bodyText
                == "task_class,requests,prompt_tokens,completion_tokens,cost,currency,priced\r\nbatch,3,2200000,100000,19.0,USD,false\r\n"
        )
        let empty = await harness.send(
            .get, "/v1/costs?from=2020-01-01T00:00:00Z&to=2020-01-02T00:00:00Z", as: .operator)
        #expect(empty.jsonBody["rows"] == [])
        let backwards = await harness.send(
            .get, "/v1/costs?from=2021-01-01T00:00:00Z&to=2020-01-01T00:00:00Z", as: .operator)
        #expect(backwards.jsonBody["error"]?["field"] == "from")
        #expect(CostsRoute.field("=SUM(A1)") == "'=SUM(A1)")
        #expect(CostsRoute.field("a,b") == "\"a,b\"")

        let detail = await harness.send(.get, "/v1/tenants/acme?history_minutes=10", as: .operator)
        let points = try #require(detail.jsonBody["history"]?["points"]?.arrayValue)
        #expect(points.count == 1)
        // The upstream history counts the served calls' tokens, as the costs do: acme's 1.1M and beta's 0.2M.
        let upstreams = await harness.send(.get, "/v1/upstreams?history_minutes=10", as: .operator)
        let pool = try #require(upstreams.jsonBody["upstreams"]?.arrayValue?.first { $0["id"] == "openai/gpt-4o" })
        let served = try #require(pool["history"]?["served"]?.arrayValue)
        #expect(served.count == 1)
        #expect(served.first?["tokens"] == 1_300_000)
        #expect(served.first?["requests"] == 5)
        #expect(served.first?["ok"] == 2)
        // The tenant history is traffic: every attempt's tokens, the failed ones' too.
        #expect(points.first?["prompt_tokens"] == 2_200_000)
        #expect(points.first?["ok"] == 1)
        await harness.close()
    }

    @Test func upstreamsGatewaysAndAlerts() async throws {
        let harness = try await OperatorHarness.make()
        await harness.classifier.setStarved(["beta"])
        await harness.tick()
        await harness.tick()
        let upstreams = await harness.send(.get, "/v1/upstreams?history_minutes=60", as: .operator)
        #expect(upstreams.status == .ok)
        let list = try #require(upstreams.jsonBody["upstreams"]?.arrayValue)
        // The observed pool plus the policy's other declared pools.
        let poolIDs = list.compactMap { $0["id"]?.stringValue }
        #expect(poolIDs.contains(OperatorHarness.upstream))
        let pool = try #require(list.first { $0["id"]?.stringValue == OperatorHarness.upstream })
        #expect(pool["state"] == "healthy")
        #expect(pool["estimate"]?["rpm"]?.doubleValue == 10_000)
        #expect(pool["capacity"]?["rpm"]?.doubleValue == 9800)
        #expect(pool["latency"]?["short"]?["p95_ms"]?.doubleValue == 900)
        #expect(pool["outcomes"]?["quota_exhausted"] == 5)
        #expect(pool["tenants"] == 3)
        #expect(pool["history"]?["capacity"]?.arrayValue?.count == 1)
        let declaredOnly = try #require(list.first { $0["id"] == "google/gemini-pro" })
        #expect(declaredOnly["declared"]?["rpm"]?.doubleValue == 1000)
        #expect(declaredOnly["allocated"] == .null)

        let gateways = await harness.send(.get, "/v1/gateways", as: .operator)
        #expect(gateways.status == .ok)
        #expect(gateways.jsonBody["gateways"] == [])

        _ = await harness.send(
            .put, "/v1/tenants/example-premium/override", as: .operator,
            json: #"{"ceiling":{"rpm":5},"reason":"cap","ttl_s":600}"#)
        let alerts = await harness.send(.get, "/v1/alerts", as: .operator)
        let kinds = alerts.jsonBody["alerts"]?.arrayValue?.compactMap { $0["kind"]?.stringValue } ?? []
        #expect(kinds.contains("starved"))
        #expect(kinds.contains("override_proposal"))
        #expect(alerts.jsonBody["by_severity"]?["warning"] == 1)
        let starved = await harness.send(.get, "/v1/alerts?kind=starved&tenant=beta", as: .operator)
        #expect(starved.jsonBody["count"] == 1)
        #expect(await harness.send(.get, "/v1/alerts?severity=loud", as: .operator).status == .badRequest)
        // A misspelt kind is refused naming the nearest (it answered an empty list).
        let typo = await harness.send(.get, "/v1/alerts?kind=starve", as: .operator)
        #expect(
            typo.badRequest
                == Refusal(field: "kind", message: #"unknown alert kind "starve"; did you mean "starved"?"#))
        #expect(await harness.send(.get, "/v1/alerts?kind=drain", as: .operator).jsonBody["count"] == 0)
        // None near: every kind is listed (outside evaluation round 29: neither the nearest nor the kinds).
        let far = await harness.send(.get, "/v1/alerts?kind=zzzzzzzzzz", as: .operator)
        #expect(
            far.badRequest
                == Refusal(
                    field: "kind",
                    message: #"unknown alert kind "zzzzzzzzzz"; expected one of "#
                        + LoopAlert.kinds.map { "\"\($0)\"" }.joined(separator: ", ")))
        #expect(LoopAlert.kinds.count > 12)
        await harness.close()
    }

    /// The kinds `?kind=` and `?alert=` accept are the ones docs/api-reference.md lists, and no other.
    /// `DELETE /v1/gateways/{id}`: a gateway leaving (or an SRE retiring one) is forgotten at once and audited.
    @Test func aGatewayLeavesThroughTheAPI() async throws {
        let harness = try await OperatorHarness.make()
        await harness.tick()
        _ = await harness.loop.publisher.poll(gateway: "gw/1", condition: .none, wait: 0)
        _ = await harness.loop.publisher.poll(gateway: "gw-2", condition: .none, wait: 0)
        let listed = await harness.send(.get, "/v1/gateways", as: .operator)
        #expect(listed.jsonBody["gateways"]?.arrayValue?.compactMap { $0["id"]?.stringValue } == ["gw-2", "gw/1"])

        #expect(await harness.send(.delete, "/v1/gateways/gw-2", as: .operator).status == .forbidden)
        let left = await harness.send(.delete, "/v1/gateways/gw%2F1", as: .gateway)
        #expect(left.status == .ok)
        #expect(left.jsonBody["gateway"] == "gw/1")
        #expect(left.jsonBody["left"] == true)
        #expect(left.jsonBody["resplit"] == "at the next tick")
        let after = await harness.send(.get, "/v1/gateways", as: .operator)
        #expect(after.jsonBody["gateways"]?.arrayValue?.compactMap { $0["id"]?.stringValue } == ["gw-2"])
        let again = await harness.send(.delete, "/v1/gateways/gw%2F1", as: .sre)
        #expect(again.status == .notFound)
        #expect(again.jsonBody["error"]?["message"] == "no gateway gw/1 has polled (or it was forgotten)")
        let unknown = await harness.send(.delete, "/v1/gateways/gw-2?force=1", as: .sre)
        #expect(unknown.jsonBody["error"]?["field"] == "force")
        let malformed = await harness.send(.delete, "/v1/gateways/gw%20two", as: .sre)
        #expect(
            malformed.badRequest
                == Refusal(field: "id", message: "gateway id must be 1-128 characters of [A-Za-z0-9._:/-]"))

        let audit = await harness.send(.get, "/v1/audit?action=gateway.leave", as: .sre)
        let entries = try #require(audit.jsonBody["entries"]?.arrayValue)
        #expect(entries.count == 1)
        #expect(entries.first?["subject"] == "gw/1")
        #expect(entries.first?["actor_role"] == "gateway")
        #expect(entries.first?["before"]?["polls"] == 1)
        await harness.close()
    }

    /// A poll's `Allot-Gateway-Time` (the gateway's clock as it sent it) shows in `GET /v1/gateways` as the gateway's
    /// clock minus ours, and in the metrics; a poll without it, or with one that does not read as a time, clears it.
    @Test func aGatewaysClockIsShownFromItsPolls() async throws {
        let harness = try await OperatorHarness.make()
        await harness.tick()
        let route = SnapshotRoute(publisher: harness.loop.publisher)
        func poll(_ clock: String) async throws -> HTTPResponse {
            try await route.respond(
                to: HTTPRequest(
                    method: .get, target: "/v1/snapshot?gateway=gw-1", headers: ["Allot-Gateway-Time": clock]))
        }
        let answer = try await poll(RFC3339.format(harness.clock.now + 45.25))
        #expect(answer.status == .ok)
        #expect(answer.headers["Allot-Server-Time"] == RFC3339.format(harness.clock.now))
        var listed = await harness.send(.get, "/v1/gateways", as: .operator)
        #expect(listed.jsonBody["gateways"]?[0]?["clock_offset_s"] == 45.25)
        #expect(harness.metrics.render().contains(#"allot_gateway_clock_offset_seconds{gateway="gw-1"} 45.25"# + "\n"))
        _ = try await poll("soon")
        listed = await harness.send(.get, "/v1/gateways", as: .operator)
        #expect(listed.jsonBody["gateways"]?[0]?["clock_offset_s"] == .null)
        await harness.close()
    }

    /// `?instance=`: a gateway's polls name the run of its process; its leave names it too. An old instance leaving
    /// after a replacement polled under the same id is `409 gateway_replaced` and removes nothing; a malformed
    /// instance is `400` naming the field; `GET /v1/gateways` shows the instance.
    @Test func aGatewayLeavesOnlyAsTheInstanceThatPolls() async throws {
        let harness = try await OperatorHarness.make()
        await harness.tick()
        let publisher = harness.loop.publisher
        _ = await publisher.poll(gateway: "gw-1", instance: "old", condition: .none, wait: 0)
        _ = await publisher.poll(gateway: "gw-1", instance: "new", condition: .none, wait: 0)
        let listed = await harness.send(.get, "/v1/gateways", as: .operator)
        #expect(listed.jsonBody["gateways"]?[0]?["instance"] == "new")

        let stale = await harness.send(.delete, "/v1/gateways/gw-1?instance=old", as: .gateway)
        #expect(stale.status == .conflict)
        #expect(stale.jsonBody["error"]?["code"] == "gateway_replaced")
        #expect(stale.jsonBody["error"]?["field"] == "instance")
        #expect(
            stale.jsonBody["error"]?["message"]
                == "gateway gw-1 is still polled by another instance (new): it stays; old left")
        #expect(await harness.send(.get, "/v1/gateways", as: .operator).jsonBody["gateways"]?.arrayValue?.count == 1)
        let badLeave = await harness.send(.delete, "/v1/gateways/gw-1?instance=", as: .gateway)
        #expect(badLeave.badRequest?.field == "instance")

        #expect(await harness.send(.delete, "/v1/gateways/gw-1?instance=new", as: .gateway).status == .ok)
        #expect(await harness.send(.get, "/v1/gateways", as: .operator).jsonBody["gateways"]?.arrayValue?.count == 0)
        // A poll the leaving instance sent before it left, arriving after: answered, not registered.
        guard case .modified = await publisher.poll(gateway: "gw-1", instance: "new", condition: .none, wait: 0) else {
            Issue.record("the late poll was not answered")
            return
        }
        #expect(await harness.send(.get, "/v1/gateways", as: .operator).jsonBody["gateways"]?.arrayValue?.count == 0)
        // Only within a long-poll's reach of its leave: later, the same instance polling is back (a leave sent by
        // mistake does not keep a live gateway out until it is forgotten).
        harness.clock.advance(by: 80)
        _ = await publisher.poll(gateway: "gw-1", instance: "new", condition: .none, wait: 0)
        #expect(await harness.send(.get, "/v1/gateways", as: .operator).jsonBody["gateways"]?[0]?["instance"] == "new")
        #expect(await harness.send(.delete, "/v1/gateways/gw-1?instance=new", as: .gateway).status == .ok)
        // Its successor registers.
        _ = await publisher.poll(gateway: "gw-1", instance: "next", condition: .none, wait: 0)
        #expect(await harness.send(.get, "/v1/gateways", as: .operator).jsonBody["gateways"]?[0]?["instance"] == "next")
        // An SRE's forget names no instance: the same instance polling afterwards is back at once.
        #expect(await harness.send(.delete, "/v1/gateways/gw-1", as: .sre).status == .ok)
        _ = await publisher.poll(gateway: "gw-1", instance: "next", condition: .none, wait: 0)
        #expect(await harness.send(.get, "/v1/gateways", as: .operator).jsonBody["gateways"]?.arrayValue?.count == 1)
        let audit = await harness.send(.get, "/v1/audit?action=gateway.leave", as: .sre)
        #expect(audit.jsonBody["entries"]?.arrayValue?.count == 3)
        // The instance that left is recorded (newest first: the SRE's forget of "next").
        #expect(audit.jsonBody["entries"]?[0]?["before"]?["instance"] == "next")
        await harness.close()
    }

    /// Two processes polling under one id at once (an overlap in a rolling deploy, a misconfigured pair): the one
    /// that leaves does not take the gateway with it while the other polls, whichever polled last; its late poll
    /// does not count; the other's leave then removes it.
    @Test func oneOfTwoInstancesSharingAnIdLeavesWithoutRemovingTheGateway() async throws {
        let harness = try await OperatorHarness.make()
        await harness.tick()
        let publisher = harness.loop.publisher
        func listed() async -> [JSON] {
            await harness.send(.get, "/v1/gateways", as: .operator).jsonBody["gateways"]?.arrayValue ?? []
        }
        _ = await publisher.poll(gateway: "gw-1", instance: "a", condition: .none, wait: 0)
        harness.clock.advance(by: 20)
        _ = await publisher.poll(gateway: "gw-1", instance: "b", condition: .none, wait: 0)
        harness.clock.advance(by: 20)
        _ = await publisher.poll(gateway: "gw-1", instance: "a", condition: .none, wait: 0)
        #expect(await listed().first?["instance"] == "a")

        let first = await harness.send(.delete, "/v1/gateways/gw-1?instance=a", as: .gateway)
        #expect(first.status == .conflict)
        #expect(first.jsonBody["error"]?["code"] == "gateway_replaced")
        #expect(
            first.jsonBody["error"]?["message"]
                == "gateway gw-1 is still polled by another instance (b): it stays; a left")
        #expect(await listed().count == 1)
        #expect(await listed().first?["instance"] == "b")
        // a's long-poll, sent before it left, arrives: not recorded.
        _ = await publisher.poll(gateway: "gw-1", instance: "a", condition: .none, wait: 0)
        #expect(await listed().first?["instance"] == "b")

        harness.clock.advance(by: 10)
        #expect(await harness.send(.delete, "/v1/gateways/gw-1?instance=b", as: .gateway).status == .ok)
        #expect(await listed().isEmpty)
        // An instance that last polled a long-poll's reach ago no longer keeps it: c's leave removes it.
        _ = await publisher.poll(gateway: "gw-2", instance: "c", condition: .none, wait: 0)
        _ = await publisher.poll(gateway: "gw-2", instance: "d", condition: .none, wait: 0)
        harness.clock.advance(by: 76)
        _ = await publisher.poll(gateway: "gw-2", instance: "c", condition: .none, wait: 0)
        #expect(await harness.send(.delete, "/v1/gateways/gw-2?instance=c", as: .gateway).status == .ok)
        #expect(await listed().isEmpty)
        // Nor does one killed without a word before its successor first polled: the successor's leave removes it.
        _ = await publisher.poll(gateway: "gw-3", instance: "killed", condition: .none, wait: 0)
        harness.clock.advance(by: 15)
        _ = await publisher.poll(gateway: "gw-3", instance: "successor", condition: .none, wait: 0)
        harness.clock.advance(by: 25)
        #expect(await harness.send(.delete, "/v1/gateways/gw-3?instance=successor", as: .gateway).status == .ok)
        #expect(await listed().isEmpty)
        // A leave naming an instance that never polled keeps a gateway another instance polls.
        _ = await publisher.poll(gateway: "gw-4", instance: "e", condition: .none, wait: 0)
        #expect(await harness.send(.delete, "/v1/gateways/gw-4?instance=stranger", as: .gateway).status == .conflict)
        #expect(await listed().count == 1)
        await harness.close()
    }

    @Test func theAcceptedAlertKindsAreTheDocumentedOnes() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().deletingLastPathComponent()
        let text = try String(contentsOf: root.appendingPathComponent("docs/api-reference.md"), encoding: .utf8)
        let documented = text.split(separator: "\n").compactMap { line -> String? in
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map {
                $0.trimmingCharacters(in: .whitespaces)
            }
            guard cells.count > 3, ["info", "warning", "critical"].contains(cells[2]), cells[1].hasPrefix("`") else {
                return nil
            }
            return cells[1].trimmingCharacters(in: CharacterSet(charactersIn: "`"))
        }
        #expect(documented.count == 31)
        #expect(documented.sorted() == LoopAlert.kinds.sorted())
    }

    @Test func metricsExposeTheReports() async throws {
        let harness = try await OperatorHarness.make()
        await harness.classifier.setStarved(["beta"])
        await harness.tick()
        let text = harness.metrics.render()
        for line in [
            #"allot_upstream_capacity_estimate_per_minute{upstream="openai/gpt-4o",dimension="rpm"} 10000"#,
            #"allot_upstream_capacity_effective_per_minute{upstream="openai/gpt-4o",dimension="rpm"} 9800"#,
            #"allot_upstream_state{upstream="openai/gpt-4o",state="healthy"} 1"#,
            #"allot_upstream_window_attempts{upstream="openai/gpt-4o",outcome="quota_exhausted"} 5"#,
            #"allot_upstream_latency_seconds{upstream="openai/gpt-4o",window="short",quantile="0.95"} 0.9"#,
            #"allot_tenant_allocation_per_minute{tenant="acme",upstream="openai/gpt-4o",dimension="rpm"} 100"#,
            #"allot_tenant_starved{tenant="beta",upstream="openai/gpt-4o"} 1"#,
            #"allot_tenants{class="steady"} 3"#, "allot_tenants_starved 1", "allot_tenant_series_omitted 0",
            #"allot_alerts{kind="starved",severity="warning"} 1"#, #"allot_proposals{status="pending"} 1"#,
        ] {
            #expect(text.contains(line + "\n"), "missing \(line)")
        }
        await harness.close()
    }
}
