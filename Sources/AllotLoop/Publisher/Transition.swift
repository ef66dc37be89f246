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
        let match = matches(old: old.tenants, new: new.tenants)

        if !holdGrowth, fits(current: current, target: target, match: match) {
            return Step(publish: target, held: false, shrunkGateways: [])
        }

        var held = false
        var shrunk = Set<String>()
        var tenants: [TenantEntry] = []
        var slices: [[(gateway: String, rpm: Double, tpm: Double)]] = []
        var kept = Set<Int>()
        tenants.reserveCapacity(new.tenants.count)
        for (position, entry) in new.tenants.enumerated() {
            guard let oldPosition = match[position] else {
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

    /// For each tenant entry of `new`, the position of the same tenant and upstream in `old`. Both
    /// lists are sorted by upstream then tenant (the engine's order), so a merge finds them without
    /// hashing 10,000 keys; a dictionary is the fallback for unsorted input.
    static func matches(old: [TenantEntry], new: [TenantEntry]) -> [Int?] {
        func before(_ a: TenantEntry, _ b: TenantEntry) -> Bool {
            a.upstream != b.upstream ? a.upstream < b.upstream : a.id < b.id
        }
        func sorted(_ list: [TenantEntry]) -> Bool {
            zip(list, list.dropFirst()).allSatisfy { before($0, $1) }
        }
        var result = [Int?](repeating: nil, count: new.count)
        guard sorted(old), sorted(new) else {
            var index: [Key: Int] = [:]
            for (position, entry) in old.enumerated() { index[Key(upstream: entry.upstream, id: entry.id)] = position }
            for (position, entry) in new.enumerated() {
                result[position] = index[Key(upstream: entry.upstream, id: entry.id)]
            }
            return result
        }
        var i = 0
        for (position, entry) in new.enumerated() {
            while i < old.count, before(old[i], entry) { i += 1 }
            if i < old.count, old[i].upstream == entry.upstream, old[i].id == entry.id { result[position] = i }
        }
        return result
    }

    /// Whether every pool still fits its capacity with each tenant (and each gateway slice) at the
    /// larger of its current and target values.
    private static func fits(current: SnapshotContent, target: SnapshotContent, match: [Int?]) -> Bool {
        let old = current.snapshot
        let new = target.snapshot
        var capacity: [String: DimensionValues] = [:]
        for upstream in new.upstreams { capacity[upstream.id] = upstream.capacity }
        let sameGateways = current.plan.gateways == target.plan.gateways
        var sums = PoolSums()
        var matched = [Bool](repeating: false, count: old.tenants.count)
        for (position, entry) in new.tenants.enumerated() {
            guard let oldPosition = match[position] else {
                let parts = target.plan.materialized(position, rpm: entry.rpm.rate, tpm: entry.tpm.rate)
                sums.add(
                    entry.upstream, global: (entry.rpm.rate, entry.tpm.rate),
                    sliced: parts.reduce((0, 0)) { ($0.0 + $1.rpm, $0.1 + $1.tpm) })
                continue
            }
            matched[oldPosition] = true
            let before = old.tenants[oldPosition]
            sums.add(
                entry.upstream, global: (max(entry.rpm.rate, before.rpm.rate), max(entry.tpm.rate, before.tpm.rate)),
                sliced: slicedMaximum(
                    current.plan, oldPosition, before, target.plan, position, entry, sameGateways: sameGateways))
        }
        for (position, entry) in old.tenants.enumerated() where !matched[position] {
            let parts = current.plan.materialized(position, rpm: entry.rpm.rate, tpm: entry.tpm.rate)
            sums.add(
                entry.upstream, global: (entry.rpm.rate, entry.tpm.rate),
                sliced: parts.reduce((0, 0)) { ($0.0 + $1.rpm, $0.1 + $1.tpm) })
        }
        for (upstream, sum) in sums.finished() {
            guard let limit = capacity[upstream] else { continue }
            if exceeds(sum.global.rpm, limit.rpm) || exceeds(sum.global.tpm, limit.tpm)
                || exceeds(sum.sliced.rpm, limit.rpm) || exceeds(sum.sliced.tpm, limit.tpm)
            {
                return false
            }
        }
        return true
    }

    /// The sum over gateways of the larger of each gateway's current and target slice of one tenant.
    /// The common cases — both split evenly over the same gateways, or both listed against the same
    /// gateway list — need no intermediate arrays.
    private static func slicedMaximum(
        _ currentPlan: SlicePlan, _ oldPosition: Int, _ before: TenantEntry, _ targetPlan: SlicePlan, _ position: Int,
        _ entry: TenantEntry, sameGateways: Bool
    ) -> (Double, Double) {
        let was = oldPosition < currentPlan.tenants.count ? currentPlan.tenants[oldPosition] : nil
        let will = position < targetPlan.tenants.count ? targetPlan.tenants[position] : nil
        if sameGateways {
            switch (was, will) {
            case (nil, nil):
                let count = targetPlan.gateways.count
                return (
                    SlicePlan.evenPart(max(before.rpm.rate, entry.rpm.rate), count: count) * Double(count),
                    SlicePlan.evenPart(max(before.tpm.rate, entry.tpm.rate), count: count) * Double(count)
                )
            case (let a?, let b?):
                var rpm = 0.0
                var tpm = 0.0
                var i = 0
                var j = 0
                while i < a.count || j < b.count {
                    if j >= b.count || (i < a.count && a[i].gateway < b[j].gateway) {
                        rpm += a[i].rpm
                        tpm += a[i].tpm
                        i += 1
                    } else if i >= a.count || b[j].gateway < a[i].gateway {
                        rpm += b[j].rpm
                        tpm += b[j].tpm
                        j += 1
                    } else {
                        rpm += max(a[i].rpm, b[j].rpm)
                        tpm += max(a[i].tpm, b[j].tpm)
                        i += 1
                        j += 1
                    }
                }
                return (rpm, tpm)
            default:
                break
            }
        }
        let parts = maxima(
            currentPlan.materialized(oldPosition, rpm: before.rpm.rate, tpm: before.tpm.rate),
            targetPlan.materialized(position, rpm: entry.rpm.rate, tpm: entry.tpm.rate))
        return parts.reduce((0, 0)) { ($0.0 + $1.rpm, $0.1 + $1.tpm) }
    }

    /// Per-pool sums, accumulated run by run (tenants come grouped by upstream).
    private struct PoolSums {
        private var done: [String: (global: (rpm: Double, tpm: Double), sliced: (rpm: Double, tpm: Double))] = [:]
        private var upstream: String?
        private var global = (rpm: 0.0, tpm: 0.0)
        private var sliced = (rpm: 0.0, tpm: 0.0)

        mutating func add(_ pool: String, global add: (Double, Double), sliced addSliced: (Double, Double)) {
            if pool != upstream {
                flush()
                upstream = pool
                let previous = done[pool]
                global = previous?.global ?? (0, 0)
                sliced = previous?.sliced ?? (0, 0)
            }
            global.rpm += add.0
            global.tpm += add.1
            sliced.rpm += addSliced.0
            sliced.tpm += addSliced.1
        }

        private mutating func flush() {
            if let upstream { done[upstream] = (global, sliced) }
        }

        mutating func finished() -> [String: (global: (rpm: Double, tpm: Double), sliced: (rpm: Double, tpm: Double))] {
            flush()
            upstream = nil
            return done
        }
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
