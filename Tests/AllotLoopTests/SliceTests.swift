import AllotCore
import AllotProtocol
import AllotStore
import Foundation
import Testing

@testable import AllotLoop

/// A small deterministic generator (SplitMix64) for property tests.
struct SeededGenerator: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

@Suite struct SliceTests {
    @Test func splitFollowsDemandSharesWithAMinimumAndNeverExceedsTheAllocation() throws {
        let index: [String: Int32] = ["gw-a": 0, "gw-b": 1, "gw-c": 2]
        let slices = try #require(
            SlicePlan.split(
                rpm: 100, tpm: 1000, shares: ["gw-a": 0.7, "gw-b": 0.3, "gw-c": 0.0, "gone": 0.5], index: index,
                minimumShare: 0.05))
        // gw-c just started seeing the tenant: 0.05; "gone" is not in the plan.
        #expect(slices.map(\.gateway) == [0, 1, 2])
        let total = 0.7 + 0.3 + 0.05
        #expect(abs(slices[0].rpm - 100 * 0.7 / total) < 1e-9)
        #expect(abs(slices[1].rpm - 100 * 0.3 / total) < 1e-9)
        #expect(abs(slices[2].rpm - 100 * 0.05 / total) < 1e-9)
        #expect(slices.map(\.rpm).reduce(0, +) <= 100)
        #expect(slices.map(\.tpm).reduce(0, +) <= 1000)
        #expect(SlicePlan.split(rpm: 1, tpm: 1, shares: ["gone": 1], index: index, minimumShare: 0.05) == nil)
        #expect(SlicePlan.split(rpm: 1, tpm: 1, shares: [:], index: index, minimumShare: 0.05) == nil)
    }

    @Test func slicesNeverSumAboveTheAllocationForRandomShares() {
        var random = SeededGenerator(seed: 42)
        var index: [String: Int32] = [:]
        for position in 0..<12 { index["gw-\(position)"] = Int32(position) }
        for _ in 0..<2000 {
            var shares: [String: Double] = [:]
            for _ in 0..<Int.random(in: 1...12, using: &random) {
                shares["gw-\(Int.random(in: 0..<12, using: &random))"] = Double.random(in: 0...1, using: &random)
            }
            let rpm = Double.random(in: 0...1e6, using: &random)
            let tpm = Double.random(in: 0...1e9, using: &random)
            guard
                let slices = SlicePlan.split(
                    rpm: rpm, tpm: tpm, shares: shares, index: index,
                    minimumShare: Double.random(in: 0...0.2, using: &random))
            else { continue }
            #expect(slices.map(\.rpm).reduce(0, +) <= rpm)
            #expect(slices.map(\.tpm).reduce(0, +) <= tpm)
            #expect(slices.allSatisfy { $0.rpm >= 0 && $0.tpm >= 0 })
        }
    }

    @Test func gatewaySlicesSumToAtMostEachTenantsAllocation() async throws {
        let harness = try LoopHarness()
        let tier = Tier(name: "standard", priority: 2, floor: PerDimension(rpm: .absolute(2), tpm: .absolute(500)))
        try await harness.open(policy: loopPolicy(rpm: 1000, tpm: 1_000_000, tiers: [tier]))
        var random = SeededGenerator(seed: 7)
        let gateways = (0..<5).map { "gw-\($0)" }
        for tenant in 0..<20 {
            var shares: [String: Double] = [:]
            for gateway in gateways where Bool.random(using: &random) {
                shares[gateway] = Double.random(in: 0...1, using: &random)
            }
            await harness.classifier.setDemand(
                "t\(tenant)", rpm: Double.random(in: 5...60, using: &random),
                tpm: Double.random(in: 1000...40_000, using: &random), shares: shares)
        }
        await harness.tick()
        let global = try servedSnapshot(harness.publisher)
        #expect(global.tenants.count == 20)
        var sums: [String: (rpm: Double, tpm: Double, floor: Double)] = [:]
        var listed = 0
        for gateway in gateways {
            let slice = try servedSnapshot(harness.publisher, gateway: gateway)
            #expect(slice.gateway == gateway)
            #expect(slice.version == global.version)
            #expect(slice.upstreams == global.upstreams)
            #expect(slice.defaultLimits == global.defaultLimits)
            listed += slice.tenants.count
            for entry in slice.tenants {
                sums[entry.id, default: (0, 0, 0)].rpm += entry.rpm.rate
                sums[entry.id, default: (0, 0, 0)].tpm += entry.tpm.rate
                #expect(entry.rpm.burst >= 1)
            }
            for entry in slice.fallback.tenants { sums[entry.id, default: (0, 0, 0)].floor += entry.rpm.rate }
        }
        #expect(listed > 20)  // tenants are shared between gateways
        for entry in global.tenants {
            let sum = try #require(sums[entry.id], "\(entry.id) has no slice")
            #expect(sum.rpm <= entry.rpm.rate)
            #expect(sum.tpm <= entry.tpm.rate)
            #expect(sum.rpm >= entry.rpm.rate * (1 - 1e-9))  // and nothing is lost
            #expect(sum.floor <= 2)
        }
        await harness.close()
    }

    @Test func aTenantsSlicesKeepStaggeredFractionsOfARequestSoThatTheyDoNotRefillInLockstep() async throws {
        let harness = try LoopHarness()
        try await harness.open(policy: loopPolicy(rpm: 1000, tpm: 1_000_000))
        let gateways = (0..<32).map { "gw-\($0)" }
        let shares = Dictionary(uniqueKeysWithValues: gateways.map { ($0, 1.0 / 32) })
        await harness.classifier.setDemand("acme", rpm: 45, tpm: 90_000, shares: shares)
        await harness.tick()
        let global = try #require(try servedSnapshot(harness.publisher).tenant("acme"))
        #expect(isClose(global.rpm.rate, 45))
        var fractions: [Double] = []
        for gateway in gateways {
            let entry = try #require(try servedSnapshot(harness.publisher, gateway: gateway).tenant("acme"))
            let share = Share(entry: global, rpm: entry.rpm.rate, tpm: entry.tpm.rate, gatewayCount: 32)
            let plain = share.apply(to: global, rpm: entry.rpm.rate, tpm: entry.tpm.rate)
            // 1.4 rpm a gateway: its bucket share and room for two requests, raised by less than one request;
            // the rates and the token bucket as they were.
            #expect(entry.rpm.rate == plain.rpm.rate)
            #expect(entry.rpm.burst >= plain.rpm.burst && entry.rpm.burst < plain.rpm.burst + 1)
            #expect(entry.rpm.burst.rounded(.down) >= 2)
            #expect(entry.tpm == plain.tpm)
            fractions.append(entry.rpm.burst - entry.rpm.burst.rounded(.down))
        }
        // The fractions spread over the whole request: no gap between neighbours (round the unit) reaches two
        // thirty-seconds. Unstaggered, all 32 were the same.
        let sorted = fractions.sorted()
        let gaps = zip(sorted.dropFirst(), sorted).map { $0 - $1 } + [sorted[0] + 1 - sorted[31]]
        #expect(gaps.allSatisfy { $0 < 2.0 / 32 })
        // The same for the next version.
        await harness.tick()
        let again = try #require(try servedSnapshot(harness.publisher, gateway: "gw-7").tenant("acme"))
        #expect(again.rpm.burst - again.rpm.burst.rounded(.down) == fractions[7])
        await harness.close()
    }

    @Test func slicesTheTiltDriftsApartWithinFiveMinutesAreNotStaggered() async throws {
        let harness = try LoopHarness()
        try await harness.open(policy: loopPolicy(rpm: 1000, tpm: 1_000_000))
        let gateways = ["gw-a", "gw-b", "gw-c"]
        let shares = Dictionary(uniqueKeysWithValues: gateways.map { ($0, 1.0 / 3) })
        // 30 rpm a slice behind three: neighbours 2 % apart drift a 2-s refill apart in 100 s.
        await harness.classifier.setDemand("acme", rpm: 90, tpm: 90_000, shares: shares)
        await harness.tick()
        let global = try #require(try servedSnapshot(harness.publisher).tenant("acme"))
        for gateway in gateways {
            let entry = try #require(try servedSnapshot(harness.publisher, gateway: gateway).tenant("acme"))
            let plain = Share(entry: global, rpm: entry.rpm.rate, tpm: entry.tpm.rate, gatewayCount: 3)
                .apply(to: global, rpm: entry.rpm.rate, tpm: entry.tpm.rate)
            #expect(entry.rpm == plain.rpm)
        }
        await harness.close()
        // The bound: a refill period over the neighbours' relative spread (2 × 0.02 / (G − 1)) above 300 s.
        #expect(!Share.needsStagger(rate: 10, gateways: 3))  // 6 s / 0.02 = 300 s: not above
        #expect(Share.needsStagger(rate: 9.9, gateways: 3))
        #expect(Share.needsStagger(rate: 154, gateways: 32))
        #expect(!Share.needsStagger(rate: 155, gateways: 32))
        #expect(!Share.needsStagger(rate: 1, gateways: 1))
        #expect(!Share.needsStagger(rate: 0, gateways: 32))
    }

    @Test func aStaggeredBucketIsRaisedToItsFractionByLessThanARequestAndNeverAboveTheTenants() {
        #expect(abs(Share.staggered(2.75, to: 0.25, global: 10) - 3.25) < 1e-12)
        #expect(abs(Share.staggered(2.25, to: 0.75, global: 10) - 2.75) < 1e-12)
        #expect(Share.staggered(2.5, to: 0.5, global: 10) == 2.5)
        #expect(Share.staggered(2, to: 0, global: 10) == 2)
        // Never above the tenant's own bucket (one gateway holding all of it), never below the slice's.
        #expect(Share.staggered(2.75, to: 0.25, global: 3) == 3)
        #expect(Share.staggered(2.75, to: 0.25, global: 2) == 2.75)
        // A slice under one request, and a stagger that is not a fraction, stay as they are.
        #expect(Share.staggered(0.4, to: 0.9, global: 0.4) == 0.4)
        #expect(Share.staggered(2.75, to: .nan, global: 10) == 2.75)
        #expect(Share.staggered(2.75, to: 1, global: 10) == 2.75)
        // Every position of a plan gets its own fraction, the same each time.
        let first = Share.stagger(tenant: "acme", upstream: pool4o, position: 0)
        #expect(first >= 0 && first < 1)
        #expect(Share.stagger(tenant: "acme", upstream: pool4o, position: 0) == first)
        let second = Share.stagger(tenant: "acme", upstream: pool4o, position: 1)
        #expect(abs((second - first + 1).truncatingRemainder(dividingBy: 1) - 0.618_033_988_749_894_9) < 1e-9)
        #expect(Share.stagger(tenant: "globex", upstream: pool4o, position: 0) != first)
    }

    @Test func aNewTenantIsSpreadOverEveryGatewayOfItsUpstream() async throws {
        let harness = try LoopHarness()
        try await harness.open()
        await harness.classifier.setDemand(
            "old", rpm: 30, tpm: 3000, shares: ["gw-a": 0.5, "gw-b": 0.3, "gw-c": 0.2])
        // Its first calls happened to reach gw-a only.
        await harness.classifier.setDemand("new", rpm: 30, tpm: 3000, shares: ["gw-a": 1], young: true)
        await harness.tick()
        for gateway in ["gw-a", "gw-b", "gw-c"] {
            #expect(isClose(try servedSnapshot(harness.publisher, gateway: gateway).tenant("new")?.rpm.rate, 10))
        }
        #expect(isClose(try servedSnapshot(harness.publisher, gateway: "gw-b").tenant("old")?.rpm.rate, 9))
        // A short window later its slices follow where its calls land.
        await harness.classifier.setDemand("new", rpm: 30, tpm: 3000, shares: ["gw-a": 1])
        await harness.tick()
        #expect(isClose(try servedSnapshot(harness.publisher, gateway: "gw-a").tenant("new")?.rpm.rate, 30))
        #expect(try servedSnapshot(harness.publisher, gateway: "gw-b").tenant("new") == nil)
        await harness.close()
    }

    /// A gateway id that reports telemetry but has never polled enforces nothing: once others poll it is in no plan,
    /// and its share of every tenant goes to the gateways that do (outside evaluation round 22: a new tenant's even
    /// split gave a third of its allocation to such an id).
    @Test func aGatewayThatNeverPolledGetsNoSliceOnceOthersPoll() async throws {
        let harness = try LoopHarness()
        try await harness.open()
        await harness.classifier.setDemand("old", rpm: 30, tpm: 3000, shares: ["gw-a": 0.5, "gw-b": 0.3, "gw-h": 0.2])
        await harness.classifier.setDemand("new", rpm: 30, tpm: 3000, shares: ["gw-a": 1], young: true)
        _ = await harness.publisher.poll(gateway: "gw-a", condition: .none, wait: 0)
        _ = await harness.publisher.poll(gateway: "gw-b", condition: .none, wait: 0)
        await harness.tick()
        let current = try #require(harness.publisher.current)
        #expect(current.content.plan.gateways == ["gw-a", "gw-b"])
        for gateway in ["gw-a", "gw-b"] {
            #expect(isClose(try servedSnapshot(harness.publisher, gateway: gateway).tenant("new")?.rpm.rate, 15))
        }
        let old = current.gatewaySlices(tenant: "old", upstream: pool4o)
        #expect(old.map(\.gateway) == ["gw-a", "gw-b"])
        #expect(isClose(old.map(\.rpm).reduce(0, +), 30))
        await harness.close()
    }

    @Test func aNewTenantsSpreadStaysWithTheGatewaysOfItsUpstream() {
        func status(_ tenant: String, _ upstream: String, _ shares: [String: Double], young: Bool) -> TenantStatus {
            TenantStatus(
                key: AllocationKey(tenant: tenant, upstream: upstream), tenantClass: .coldStart,
                demand: PerDimension(rpm: 10, tpm: 1000), gatewayShares: shares, young: young)
        }
        // gw-z serves another upstream only; gw-y has seen the new tenant but no other tenant of its upstream.
        let new = status("new", "up-1", ["gw-a": 0.8, "gw-y": 0.2], young: true)
        let spread = SnapshotAssembler.shares(of: new, upstreamGateways: ["gw-a", "gw-b"])
        let third: Double = 1.0 / 3
        let expected: [String: Double] = ["gw-a": third, "gw-b": third, "gw-y": third]
        #expect(spread == expected)
        // Even between the gateways that saw it when no other tenant of its upstream is known elsewhere.
        let halves: [String: Double] = ["gw-a": 0.5, "gw-y": 0.5]
        #expect(SnapshotAssembler.shares(of: new, upstreamGateways: ["gw-a"]) == halves)
        // Nothing known of its upstream: the Classifier's shares stand.
        #expect(SnapshotAssembler.shares(of: new, upstreamGateways: nil) == new.gatewayShares)
        // A tenant seen for a short window (still in cold start: too few requests) keeps its shares.
        let steady = status("old", "up-1", ["gw-a": 1], young: false)
        let kept: [String: Double] = ["gw-a": 1]
        #expect(SnapshotAssembler.shares(of: steady, upstreamGateways: ["gw-a", "gw-b"]) == kept)
    }

    @Test func aNewGatewayGetsSlicesFromTheNextTickAndAGoneOneLosesThem() async throws {
        let harness = try LoopHarness()
        try await harness.open()
        // Nobody knows which gateway serves "quiet": split evenly between the plan's gateways.
        await harness.classifier.setDemand("quiet", rpm: 30, tpm: 3000)
        await harness.classifier.setDemand("busy", rpm: 40, tpm: 4000, shares: ["gw-a": 1])
        await harness.tick()
        #expect(try servedSnapshot(harness.publisher, gateway: "gw-a").tenants.map(\.id) == ["busy", "quiet"])
        #expect(isClose(try servedSnapshot(harness.publisher, gateway: "gw-a").tenant("quiet")?.rpm.rate, 30))
        // gw-b starts polling: nothing until the next tick re-splits ("default" applies meanwhile).
        #expect(try servedSnapshot(harness.publisher, gateway: "gw-b").tenants.isEmpty)
        _ = await harness.publisher.poll(gateway: "gw-b", condition: .none, wait: 0)
        _ = await harness.publisher.poll(gateway: "gw-a", condition: .none, wait: 0)
        await harness.tick()
        #expect(try servedSnapshot(harness.publisher, gateway: "gw-b").tenants.map(\.id) == ["quiet"])
        #expect(isClose(try servedSnapshot(harness.publisher, gateway: "gw-b").tenant("quiet")?.rpm.rate, 15))
        #expect(isClose(try servedSnapshot(harness.publisher, gateway: "gw-a").tenant("quiet")?.rpm.rate, 15))
        // gw-b stops polling; after gateway_lag_s (30 s) it is gone and gw-a takes the whole split.
        for _ in 0..<6 {
            _ = await harness.publisher.poll(gateway: "gw-a", condition: .none, wait: 0)
            await harness.tick(by: 6)
        }
        #expect(isClose(try servedSnapshot(harness.publisher, gateway: "gw-a").tenant("quiet")?.rpm.rate, 30))
        #expect(try servedSnapshot(harness.publisher, gateway: "gw-b").tenants.isEmpty)
        await harness.close()
    }

    @Test func slicePlanRoundTripsAndRejectsDamagedBytes() throws {
        let plan = SlicePlan(
            gateways: ["gw-a", "gw-ü"],
            tenants: [nil, [.init(gateway: 0, rpm: 1.5, tpm: 2.5), .init(gateway: 1, rpm: 0, tpm: 1e12)], []])
        let bytes = plan.encoded()
        #expect(try SlicePlan(decoding: bytes) == plan)
        #expect(throws: LoopStateError.self) { try SlicePlan(decoding: []) }
        #expect(throws: LoopStateError.self) { try SlicePlan(decoding: Array("XXXX".utf8) + bytes.dropFirst(4)) }
        for cut in [5, 9, 20, bytes.count - 1] {
            #expect(throws: LoopStateError.self) { try SlicePlan(decoding: Array(bytes.prefix(cut))) }
        }
        #expect(throws: LoopStateError.self) { try SlicePlan(decoding: bytes + [0]) }
        // A huge declared count never allocates: it is checked against the bytes left.
        var huge = Array("ASP1".utf8)
        huge += [0xFF, 0xFF, 0xFF, 0x7F]
        #expect(throws: LoopStateError.self) { try SlicePlan(decoding: huge) }
        var random = SeededGenerator(seed: 3)
        for _ in 0..<500 {
            var damaged = bytes
            damaged[Int.random(in: 4..<damaged.count, using: &random)] = UInt8.random(in: 0...255, using: &random)
            _ = try? SlicePlan(decoding: damaged)  // never traps
        }
    }
}

@Suite struct StoredSnapshotTests {
    static func content() -> SnapshotContent {
        let limits = RateLimits(rpm: Bucket(rate: 1, burst: 1), tpm: Bucket(rate: 1000, burst: 166.5))
        return SnapshotContent(
            snapshot: Snapshot(
                version: 42, generatedAt: 1_800_000_000.125, expiresAt: 1_800_000_300.125, refreshMs: 5000,
                policyVersion: "p-ü", gateway: "gw-1",
                upstreams: [
                    UpstreamEntry(
                        id: pool4o, state: "overloaded", capacity: DimensionValues(rpm: 100, tpm: 1e12),
                        circuitOpen: true, shed: ["background", "batch"]),
                    UpstreamEntry(id: "x/y", state: "healthy", capacity: DimensionValues(rpm: 0, tpm: 0)),
                ],
                tenants: [
                    TenantEntry(
                        id: "acme", upstream: pool4o, tier: "premium", priority: 1,
                        rpm: Bucket(rate: 30.5, burst: 5.1), tpm: Bucket(rate: 2e4, burst: 3e3), queueWeight: 4,
                        reason: Reasons(rpm: "burst_credit", tpm: "no_capacity"),
                        burstCredit: BurstCredit(calls: 3, tokens: 900, expiresAt: 1_800_000_060),
                        mode: "shadow", maxConcurrency: Int(Int32.max),
                        tokenEstimate: TokenEstimate(p50: 120, p95: 480),
                        deny: "budget_exhausted", ceiling: DimensionValues(rpm: 40, tpm: .infinity)),
                    TenantEntry(
                        id: "globex", upstream: pool4o, tier: "standard", priority: 2, rpm: Bucket(rate: 0, burst: 0),
                        tpm: Bucket(rate: 0, burst: 0), queueWeight: 1, reason: Reasons(rpm: "demand", tpm: "demand"),
                        maxConcurrency: 16),
                ],
                defaultLimits: limits,
                fallback: Fallback(
                    tenants: [
                        FallbackEntry(id: "acme", upstream: pool4o, rpm: Bucket(rate: 2, burst: 1), tpm: limits.tpm)
                    ],
                    defaultLimits: limits),
                taskBudgets: [
                    "batch": TaskBudget(maxCalls: 500, maxTokens: 5_000_000),
                    "realtime": TaskBudget(maxCalls: 20, maxTokens: 1),
                ]),
            plan: SlicePlan(gateways: ["gw-1"], tenants: [[.init(gateway: 0, rpm: 30, tpm: 2e4)], nil]))
    }

    @Test func theStoredFormRoundTripsEveryField() throws {
        let content = Self.content()
        let record = SnapshotRecord(
            version: 42, generatedMs: 0, expiresMs: 0, kind: .tick, policyVersion: "p", body: content.binarySnapshot(),
            slices: content.plan.encoded())
        let restored = try SnapshotContent(stored: record)
        #expect(restored == content)
        // The JSON served after a restart is the JSON served before.
        #expect(restored.snapshot.encoded() == content.snapshot.encoded())
        // A row holding the JSON document itself is read too.
        var json = record
        json.body = content.snapshot.encoded()
        #expect(try SnapshotContent(stored: json) == content)
    }

    @Test func damagedStoredSnapshotsAreErrorsNotTraps() throws {
        let content = Self.content()
        let body = content.binarySnapshot()
        let slices = content.plan.encoded()
        func record(_ body: [UInt8]) -> SnapshotRecord {
            SnapshotRecord(
                version: 1, generatedMs: 0, expiresMs: 0, kind: .tick, policyVersion: "p", body: body, slices: slices)
        }
        #expect(throws: LoopStateError.self) { try SnapshotContent(stored: record([])) }
        for cut in stride(from: 1, to: body.count, by: 5) {
            #expect(throws: LoopStateError.self) { try SnapshotContent(stored: record(Array(body.prefix(cut)))) }
        }
        var random = SeededGenerator(seed: 5)
        for _ in 0..<2000 {
            var damaged = body
            damaged[Int.random(in: 4..<damaged.count, using: &random)] = UInt8.random(in: 0...255, using: &random)
            _ = try? SnapshotContent(stored: record(damaged))
        }
        // A plan that does not match the tenants is refused.
        var mismatched = record(body)
        mismatched.slices = SlicePlan(gateways: [], tenants: [nil]).encoded()
        #expect(throws: LoopStateError.self) { try SnapshotContent(stored: mismatched) }
    }
}
