import AllotJSON
import Testing

@testable import AllotProtocol

@Suite struct SnapshotTests {
    static func make(version: Int64 = 42) -> Snapshot {
        Snapshot(
            version: version,
            generatedAt: 1_795_316_400,  // 2026-11-22T03:00:00Z
            expiresAt: 1_795_316_700,
            refreshMs: 5000,
            policyVersion: "p-1",
            gateway: nil,
            upstreams: [
                UpstreamEntry(id: "openai/gpt-4o", state: "healthy", capacity: DimensionValues(rpm: 10000, tpm: 2_000_000))
            ],
            tenants: [
                TenantEntry(
                    id: "acme", upstream: "openai/gpt-4o", tier: "premium", priority: 1,
                    rpm: Bucket(rate: 120, burst: 20), tpm: Bucket(rate: 40000, burst: 8000), queueWeight: 4,
                    reason: Reasons(rpm: "fair_share", tpm: "demand"), maxConcurrency: 16,
                    tokenEstimate: TokenEstimate(p50: 300, p95: 1200)),
                TenantEntry(
                    id: "beta", upstream: "openai/gpt-4o", tier: "free", priority: 3,
                    rpm: Bucket(rate: 5, burst: 2), tpm: Bucket(rate: 2000, burst: 1000), queueWeight: 1,
                    reason: Reasons(rpm: "floor", tpm: "floor"),
                    burstCredit: BurstCredit(calls: 30, tokens: 60000, expiresAt: 1_795_316_460), mode: "shadow",
                    maxConcurrency: 2, deny: "budget_exhausted"),
            ],
            defaultLimits: RateLimits(rpm: Bucket(rate: 5, burst: 2), tpm: Bucket(rate: 2000, burst: 1000)),
            fallback: Fallback(
                tenants: [
                    FallbackEntry(
                        id: "acme", upstream: "openai/gpt-4o", rpm: Bucket(rate: 10, burst: 5),
                        tpm: Bucket(rate: 4000, burst: 2000))
                ],
                defaultLimits: RateLimits(rpm: Bucket(rate: 1, burst: 1), tpm: Bucket(rate: 500, burst: 500))),
            taskBudgets: ["batch": TaskBudget(maxCalls: 500, maxTokens: 5_000_000)]
        )
    }

    @Test func encodesTheSpecShape() throws {
        let json = try JSON.parse(Self.make().encoded())
        #expect(json["version"] == 42)
        #expect(json["generated_at"] == "2026-11-22T03:00:00.000Z")
        #expect(json["expires_at"] == "2026-11-22T03:05:00.000Z")
        #expect(json["refresh_ms"] == 5000)
        #expect(json["policy_version"] == "p-1")
        #expect(json["gateway"] == nil)
        #expect(json["upstreams"]?[0]?["capacity"] == ["rpm": 10000.0, "tpm": 2_000_000.0])
        #expect(json["upstreams"]?[0]?["circuit"] == "closed")
        let acme = try #require(json["tenants"]?[0])
        #expect(acme.objectValue?.keys == [
            "id", "upstream", "tier", "priority", "rpm", "tpm", "queue_weight", "reason", "burst_credit", "mode",
            "max_concurrency", "token_estimate", "deny", "ceiling",
        ])
        #expect(acme["ceiling"] == .null)
        #expect(acme["rpm"] == ["rate": 120.0, "burst": 20.0])
        #expect(acme["reason"] == ["rpm": "fair_share", "tpm": "demand"])
        #expect(acme["burst_credit"] == .null)
        #expect(acme["mode"] == "enforce")
        #expect(acme["token_estimate"] == ["p50": 300.0, "p95": 1200.0])
        #expect(json["tenants"]?[1]?["burst_credit"]?["expires_at"] == "2026-11-22T03:01:00.000Z")
        #expect(json["default"] == ["rpm": ["rate": 5.0, "burst": 2.0], "tpm": ["rate": 2000.0, "burst": 1000.0]])
        #expect(json["fallback"]?["tenants"]?[0]?["id"] == "acme")
        #expect(json["task_budget"] == ["batch": ["max_calls": 500, "max_tokens": 5_000_000]])
    }

    @Test func roundTrips() throws {
        var snapshot = Self.make()
        snapshot.gateway = "gw-7"
        snapshot.upstreams[0].circuitOpen = true
        snapshot.upstreams[0].shed = ["background", "batch"]
        // A ceiling in requests only: the tokens' is unbounded (`null` on the wire).
        snapshot.tenants[1].ceiling = DimensionValues(rpm: 72, tpm: .infinity)
        let decoded = try Snapshot(decoding: snapshot.encoded())
        #expect(decoded == snapshot)
        #expect(try JSON.parse(snapshot.encoded())["tenants"]?[1]?["ceiling"] == ["rpm": 72.0, "tpm": .null])
    }

    @Test func decodingNamesThePathAtFault() throws {
        var json = try JSON.parse(Self.make().encoded())
        guard case .object(var root) = json, case .array(var tenants) = root["tenants"],
            case .object(var first) = tenants[0]
        else {
            Issue.record("unexpected shape")
            return
        }
        first["rpm"] = ["rate": "fast", "burst": 1]
        tenants[0] = .object(first)
        root["tenants"] = .array(tenants)
        json = .object(root)
        #expect(throws: SnapshotDecodingError(path: "$.tenants[0].rpm.rate", reason: "expected a number, found string")) {
            try Snapshot(json: json)
        }
        #expect(throws: SnapshotDecodingError(path: "$.version", reason: "missing")) {
            try Snapshot(json: ["generated_at": "x"])
        }
        #expect(throws: SnapshotDecodingError.self) { try Snapshot(decoding: Array("{".utf8)) }
        // Counts are never negative (round 14: max_concurrency -1 queued every request of its tenant).
        first["rpm"] = ["rate": 1, "burst": 1]
        first["max_concurrency"] = -1
        tenants[0] = .object(first)
        root["tenants"] = .array(tenants)
        let negative = SnapshotDecodingError(
            path: "$.tenants[0].max_concurrency", reason: "expected an integer ≥ 0, found -1")
        #expect(throws: negative) { try Snapshot(json: .object(root)) }
        first["max_concurrency"] = 0
        tenants[0] = .object(first)
        root["tenants"] = .array(tenants)
        root["refresh_ms"] = -5
        #expect(throws: SnapshotDecodingError(path: "$.refresh_ms", reason: "expected an integer ≥ 0, found -5")) {
            try Snapshot(json: .object(root))
        }
        root["refresh_ms"] = 5_000
        #expect(try Snapshot(json: .object(root)).tenants[0].maxConcurrency == 0)
        // A ceiling is never negative, and a snapshot without one (before 2026-11-29) has none.
        first["ceiling"] = ["rpm": -1, "tpm": .null]
        tenants[0] = .object(first)
        root["tenants"] = .array(tenants)
        let negativeCeiling = SnapshotDecodingError(
            path: "$.tenants[0].ceiling.rpm", reason: "expected a number ≥ 0, found -1.0")
        #expect(throws: negativeCeiling) { try Snapshot(json: .object(root)) }
        first["ceiling"] = .null
        tenants[0] = .object(first)
        root["tenants"] = .array(tenants)
        #expect(try Snapshot(json: .object(root)).tenants[0].ceiling == nil)
    }

    @Test func ignoresUnknownFields() throws {
        guard case .object(var root) = try JSON.parse(Self.make().encoded()) else { return }
        root["future_field"] = ["anything": true]
        let decoded = try Snapshot(json: .object(root))
        #expect(decoded == Self.make())
    }
}
