import AllotProtocol
import Testing

@testable import AllotLoop

/// Make-before-break as a property (SPEC 7): whatever mix of versions the gateways hold during a
/// transition, what they enforce together never exceeds the pool's capacity.
@Suite struct TransitionPropertyTests {
    static let capacity = 1000.0

    /// A random content on one pool: tenants `t0…` (some absent), allocations summing to at most the
    /// capacity, slices over some of `gw-0…gw-3` (or even splits).
    static func content(_ random: inout SeededGenerator, gateways: [String]) -> SnapshotContent {
        var tenants: [TenantEntry] = []
        var weights: [Double] = []
        for index in 0..<12 where Bool.random(using: &random) || index < 2 {
            weights.append(Double.random(in: 0.1...1, using: &random))
            tenants.append(
                TenantEntry(
                    id: "t\(String(format: "%02d", index))", upstream: "u", tier: "standard", priority: 2,
                    rpm: Bucket(rate: 0, burst: 0), tpm: Bucket(rate: 0, burst: 0), queueWeight: 1,
                    reason: Reasons(rpm: "fair_share", tpm: "fair_share"), maxConcurrency: 8))
        }
        let total = weights.reduce(0, +)
        let used = Double.random(in: 0.5...1, using: &random) * capacity
        var index: [String: Int32] = [:]
        for (position, gateway) in gateways.enumerated() { index[gateway] = Int32(position) }
        var slices: [[SlicePlan.Slice]?] = []
        for position in tenants.indices {
            let rate = used * weights[position] / total
            tenants[position].rpm = Bucket(rate: rate, burst: rate / 6)
            tenants[position].tpm = Bucket(rate: rate * 100, burst: rate * 10)
            var shares: [String: Double] = [:]
            for gateway in gateways where Bool.random(using: &random) {
                shares[gateway] = Double.random(in: 0...1, using: &random)
            }
            slices.append(
                SlicePlan.split(rpm: rate, tpm: rate * 100, shares: shares, index: index, minimumShare: 0.05))
        }
        let limits = RateLimits(rpm: Bucket(rate: 1, burst: 1), tpm: Bucket(rate: 1, burst: 1))
        return SnapshotContent(
            snapshot: Snapshot(
                version: 0, generatedAt: 0, expiresAt: 300, refreshMs: 5000, policyVersion: "p",
                upstreams: [
                    UpstreamEntry(
                        id: "u", state: "healthy", capacity: DimensionValues(rpm: capacity, tpm: capacity * 100))
                ],
                tenants: tenants, defaultLimits: limits, fallback: Fallback(tenants: [], defaultLimits: limits)),
            plan: SlicePlan(gateways: gateways, tenants: slices))
    }

    /// What each gateway enforces of each tenant under `content`: [gateway: [tenant: rpm]].
    static func enforced(_ content: SnapshotContent) -> [String: [String: Double]] {
        var result: [String: [String: Double]] = [:]
        for (position, entry) in content.snapshot.tenants.enumerated() {
            for part in content.plan.materialized(position, rpm: entry.rpm.rate, tpm: entry.tpm.rate) {
                result[part.gateway, default: [:]][entry.id] = part.rpm
            }
        }
        return result
    }

    @Test func noMixOfVersionsExceedsCapacity() {
        var random = SeededGenerator(seed: 2026)
        var staged = 0
        for _ in 0..<400 {
            let gatewaysBefore = ["gw-0", "gw-1", "gw-2", "gw-3"].filter { _ in Bool.random(using: &random) }
            let gatewaysAfter = ["gw-0", "gw-1", "gw-2", "gw-3"].filter { _ in Bool.random(using: &random) }
            let current = Self.content(&random, gateways: gatewaysBefore)
            let target = Self.content(&random, gateways: gatewaysAfter)
            let step = Transition.step(from: current, to: target)
            let first = step.publish
            // The versions gateways can hold at once: (current, first), then (first, target).
            var phases = [[current, first]]
            if step.held {
                staged += 1
                phases.append([first, target])
            } else {
                #expect(first == target)
            }
            let gateways = Set(gatewaysBefore + gatewaysAfter)
            for phase in phases {
                let views = phase.map(Self.enforced)
                // Worst case: each gateway holds whichever version gives it more of each tenant.
                var total = 0.0
                for gateway in gateways {
                    var tenants = Set<String>()
                    for view in views { tenants.formUnion(view[gateway]?.keys ?? [:].keys) }
                    for tenant in tenants { total += views.map { $0[gateway]?[tenant] ?? 0 }.max() ?? 0 }
                }
                #expect(total <= Self.capacity * (1 + 1e-9), "slices may sum to \(total)")
                // And the global views, for gateways that use them.
                var global = 0.0
                var ids = Set<String>()
                for content in phase { ids.formUnion(content.snapshot.tenants.map(\.id)) }
                for id in ids {
                    global += phase.map { $0.snapshot.tenants.first { $0.id == id }?.rpm.rate ?? 0 }.max() ?? 0
                }
                #expect(global <= Self.capacity * (1 + 1e-9), "global views may sum to \(global)")
            }
        }
        #expect(staged > 50)  // the generator moves capacity often enough to exercise staging
    }

    @Test func matchingFindsTenantsInSortedAndUnsortedLists() {
        func entry(_ id: String, _ upstream: String) -> TenantEntry {
            TenantEntry(
                id: id, upstream: upstream, tier: "s", priority: 0, rpm: Bucket(rate: 1, burst: 1),
                tpm: Bucket(rate: 1, burst: 1), queueWeight: 1, reason: Reasons(rpm: "demand", tpm: "demand"),
                maxConcurrency: 1)
        }
        let old = [entry("a", "u1"), entry("c", "u1"), entry("a", "u2")]
        let new = [entry("a", "u1"), entry("b", "u1"), entry("a", "u2"), entry("z", "u2")]
        #expect(Transition.matches(old: old, new: new) == [0, nil, 2, nil])
        #expect(Transition.matches(old: old.reversed(), new: new) == [2, nil, 0, nil])
    }
}
