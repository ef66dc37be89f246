import AllotProtocol

/// Make-before-break (SPEC 7): when a tick moves capacity from tenant A to tenant B, publish A's
/// shrink first and B's growth only once the gateways enforcing A have confirmed the shrunk
/// version (or a bounded wait has passed), so the sum of what gateways enforce never exceeds
/// capacity while some gateways hold the old version and some the new. Pure.
///
/// Gateways poll independently, so during a transition each enforces either the current or the
/// target version: per tenant (and per gateway slice) at most `max(current, target)`. When those
/// maxima fit within every pool's capacity the target is safe to publish at once. Otherwise the
/// first step publishes `min(current, target)` for everything — every shrink (capacity drops
/// included) at once, every growth held — and the target follows: then each gateway holds at most
/// `max(min(current, target), target) = target`, which fits.
enum Transition {
    /// What to publish now.
    struct Step {
        var publish: SnapshotContent
        /// Growth was held back: the target is to follow.
        var held: Bool
        /// Gateways whose slice of some tenant shrank (or went away) in `publish`: the ones that must
        /// confirm it before the growth.
        var shrunkGateways: Set<String>
    }

    private struct Key: Hashable {
        var upstream: String
        var id: String
    }

    /// Relative tolerance for "fits within capacity": floating-point sums of thousands of values.
    static let tolerance = 1e-9

    /// The first step from `current` to `target`.
    ///
    /// - Parameter holdGrowth: Hold every growth regardless of capacity (a previous transition is
    ///   still waiting: gateways may still enforce an older version than `current`).
    static func step(from current: SnapshotContent?, to target: SnapshotContent, holdGrowth: Bool = false) -> Step {
        guard let current else { return Step(publish: target, held: false, shrunkGateways: []) }
        let old = current.snapshot
        let new = target.snapshot
        var oldIndex: [Key: Int] = [:]
        oldIndex.reserveCapacity(old.tenants.count)
        for (position, entry) in old.tenants.enumerated() {
            oldIndex[Key(upstream: entry.upstream, id: entry.id)] = position
        }

        if !holdGrowth, fits(current: current, target: target, oldIndex: oldIndex) {
            return Step(publish: target, held: false, shrunkGateways: [])
        }

        var held = false
        var shrunk = Set<String>()
        var tenants: [TenantEntry] = []
        var slices: [[(gateway: String, rpm: Double, tpm: Double)]] = []
        var kept = Set<Int>()
        tenants.reserveCapacity(new.tenants.count)
        for (position, entry) in new.tenants.enumerated() {
            guard let oldPosition = oldIndex[Key(upstream: entry.upstream, id: entry.id)] else {
                held = true  // a new tenant: growth from `default`
                continue
            }
            kept.insert(oldPosition)
            let before = old.tenants[oldPosition]
            var merged = entry
            merged.rpm = Bucket(
                rate: min(before.rpm.rate, entry.rpm.rate), burst: min(before.rpm.burst, entry.rpm.burst))
            merged.tpm = Bucket(
                rate: min(before.tpm.rate, entry.tpm.rate), burst: min(before.tpm.burst, entry.tpm.burst))
            if merged.rpm != entry.rpm || merged.tpm != entry.tpm { held = true }
            if let credit = entry.burstCredit {
                if let previous = before.burstCredit {
                    merged.burstCredit = AllotProtocol.BurstCredit(
                        calls: min(credit.calls, previous.calls), tokens: min(credit.tokens, previous.tokens),
                        expiresAt: min(credit.expiresAt, previous.expiresAt))
                    if merged.burstCredit != credit { held = true }
                } else {
                    merged.burstCredit = nil
                    held = true
                }
            }
            tenants.append(merged)

            let was = current.plan.materialized(oldPosition, rpm: before.rpm.rate, tpm: before.tpm.rate)
            let will = target.plan.materialized(position, rpm: entry.rpm.rate, tpm: entry.tpm.rate)
            var stage: [(gateway: String, rpm: Double, tpm: Double)] = []
            var i = 0
            var j = 0
            while i < was.count || j < will.count {
                if j >= will.count || (i < was.count && was[i].gateway < will[j].gateway) {
                    shrunk.insert(was[i].gateway)  // the gateway no longer gets a slice
                    i += 1
                } else if i >= was.count || will[j].gateway < was[i].gateway {
                    if will[j].rpm > 0 || will[j].tpm > 0 { held = true }  // a gateway new to the tenant
                    j += 1
                } else {
                    let part = (
                        gateway: was[i].gateway, rpm: min(was[i].rpm, will[j].rpm), tpm: min(was[i].tpm, will[j].tpm)
                    )
                    if part.rpm < was[i].rpm || part.tpm < was[i].tpm { shrunk.insert(part.gateway) }
                    if part.rpm < will[j].rpm || part.tpm < will[j].tpm { held = true }
                    stage.append(part)
                    i += 1
                    j += 1
                }
            }
            slices.append(stage)
        }
        guard held else { return Step(publish: target, held: false, shrunkGateways: []) }
        // Tenants the target no longer lists shrink to `default` on every gateway that served them.
        for position in old.tenants.indices where !kept.contains(position) {
            let entry = old.tenants[position]
            for part in current.plan.materialized(position, rpm: entry.rpm.rate, tpm: entry.tpm.rate) {
                shrunk.insert(part.gateway)
            }
        }

        var oldFallback: [Key: FallbackEntry] = [:]
        for entry in old.fallback.tenants { oldFallback[Key(upstream: entry.upstream, id: entry.id)] = entry }
        let keptKeys = Set(tenants.map { Key(upstream: $0.upstream, id: $0.id) })
        var fallback: [FallbackEntry] = []
        for entry in new.fallback.tenants {
            let key = Key(upstream: entry.upstream, id: entry.id)
            guard keptKeys.contains(key), let previous = oldFallback[key] else { continue }
            var merged = entry
            merged.rpm = Bucket(
                rate: min(previous.rpm.rate, entry.rpm.rate), burst: min(previous.rpm.burst, entry.rpm.burst))
            merged.tpm = Bucket(
                rate: min(previous.tpm.rate, entry.tpm.rate), burst: min(previous.tpm.burst, entry.tpm.burst))
            fallback.append(merged)
        }

        var gatewayNames = Set(target.plan.gateways)
        for stage in slices { for part in stage { gatewayNames.insert(part.gateway) } }
        let gateways = gatewayNames.sorted()
        var gatewayIndex: [String: Int32] = [:]
        for (position, name) in gateways.enumerated() { gatewayIndex[name] = Int32(position) }
        let plan = SlicePlan(
            gateways: gateways,
            tenants: slices.map { stage in
                stage.map { SlicePlan.Slice(gateway: gatewayIndex[$0.gateway]!, rpm: $0.rpm, tpm: $0.tpm) }
            })

        var snapshot = new
        snapshot.tenants = tenants
        snapshot.fallback = Fallback(tenants: fallback, defaultLimits: new.fallback.defaultLimits)
        return Step(publish: SnapshotContent(snapshot: snapshot, plan: plan), held: true, shrunkGateways: shrunk)
    }

    /// Whether every pool still fits its capacity with each tenant (and each gateway slice) at the
    /// larger of its current and target values.
    private static func fits(current: SnapshotContent, target: SnapshotContent, oldIndex: [Key: Int]) -> Bool {
        let old = current.snapshot
        let new = target.snapshot
        var capacity: [String: DimensionValues] = [:]
        for upstream in new.upstreams { capacity[upstream.id] = upstream.capacity }
        var global: [String: (rpm: Double, tpm: Double)] = [:]
        var sliced: [String: (rpm: Double, tpm: Double)] = [:]
        var matched = Set<Int>()
        for (position, entry) in new.tenants.enumerated() {
            var rpm = entry.rpm.rate
            var tpm = entry.tpm.rate
            var parts = target.plan.materialized(position, rpm: rpm, tpm: tpm)
            if let oldPosition = oldIndex[Key(upstream: entry.upstream, id: entry.id)] {
                matched.insert(oldPosition)
                let before = old.tenants[oldPosition]
                rpm = max(rpm, before.rpm.rate)
                tpm = max(tpm, before.tpm.rate)
                parts = maxima(
                    current.plan.materialized(oldPosition, rpm: before.rpm.rate, tpm: before.tpm.rate), parts)
            }
            global[entry.upstream, default: (0, 0)].rpm += rpm
            global[entry.upstream, default: (0, 0)].tpm += tpm
            for part in parts {
                sliced[entry.upstream, default: (0, 0)].rpm += part.rpm
                sliced[entry.upstream, default: (0, 0)].tpm += part.tpm
            }
        }
        for (position, entry) in old.tenants.enumerated() where !matched.contains(position) {
            global[entry.upstream, default: (0, 0)].rpm += entry.rpm.rate
            global[entry.upstream, default: (0, 0)].tpm += entry.tpm.rate
            for part in current.plan.materialized(position, rpm: entry.rpm.rate, tpm: entry.tpm.rate) {
                sliced[entry.upstream, default: (0, 0)].rpm += part.rpm
                sliced[entry.upstream, default: (0, 0)].tpm += part.tpm
            }
        }
        for sums in [global, sliced] {
            for (upstream, sum) in sums {
                guard let limit = capacity[upstream] else { continue }
                if exceeds(sum.rpm, limit.rpm) || exceeds(sum.tpm, limit.tpm) { return false }
            }
        }
        return true
    }

    private static func exceeds(_ sum: Double, _ limit: Double) -> Bool {
        limit < SnapshotContent.unlimited && sum > limit * (1 + tolerance) + tolerance
    }

    /// Per gateway, the larger of two sorted slice lists.
    private static func maxima(
        _ a: [(gateway: String, rpm: Double, tpm: Double)], _ b: [(gateway: String, rpm: Double, tpm: Double)]
    ) -> [(gateway: String, rpm: Double, tpm: Double)] {
        var result: [(gateway: String, rpm: Double, tpm: Double)] = []
        var i = 0
        var j = 0
        while i < a.count || j < b.count {
            if j >= b.count || (i < a.count && a[i].gateway < b[j].gateway) {
                result.append(a[i])
                i += 1
            } else if i >= a.count || b[j].gateway < a[i].gateway {
                result.append(b[j])
                j += 1
            } else {
                result.append((a[i].gateway, max(a[i].rpm, b[j].rpm), max(a[i].tpm, b[j].tpm)))
                i += 1
                j += 1
            }
        }
        return result
    }
}
