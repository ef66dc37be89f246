import AllotAssets
import AllotCore
import AllotEnforcement
import AllotJSON
import Foundation

/// A scenario that cannot be used: which file, which JSON path, why (docs/scenarios.md). A file with several
/// faults is one error carrying the others in `more` (one per top-level field and per pool and tenant entry: an
/// author fixes them in one pass, as a policy directory's problems are all listed).
public struct ScenarioError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The file or built-in name.
    public var source: String
    /// JSON path of the value at fault (`tenants[2].task.calls.min`), empty for the whole file.
    public var path: String
    public var reason: String
    /// The file's further faults, in file order after this one (empty for a single fault).
    public var more: [ScenarioError] = []

    public init(source: String, path: String, reason: String) {
        self.source = source
        self.path = path
        self.reason = reason
    }

    /// How many faults `description` lists before it only counts the rest.
    public static let listed = 20

    /// This fault and every further one, in file order.
    public var all: [ScenarioError] { [ScenarioError(source: source, path: path, reason: reason)] + more }

    /// One line per fault (at most ``listed``, then how many more).
    public var description: String {
        let faults = all
        var lines = faults.prefix(Self.listed).map(\.line)
        if faults.count > Self.listed {
            lines.append("\(source): \(faults.count - Self.listed) more errors not listed")
        }
        return lines.joined(separator: "\n")
    }

    /// This fault alone, on one line.
    public var line: String { path.isEmpty ? "\(source): \(reason)" : "\(source): \(path): \(reason)" }
}

extension Scenario {
    /// What `allot simulate --check` prints for a valid scenario: the world it describes, as read (tenants after
    /// `count`, each counted once however many pools it calls).
    public var summary: String {
        let byID = Dictionary(grouping: tenants, by: \.id)
        var tiers: [String: Int] = [:]
        for entries in byID.values { tiers[entries[0].tier, default: 0] += 1 }
        let number = ScenarioReader.format
        let pools = pools.map { pool in
            let steps = pool.capacity.map { "\(number($0.rpm)) rpm and \(number($0.tpm)) tpm at \(number($0.at)) s" }
            // How loaded the story is, as scheduled: an author who meant "over-subscribed" sees at once if it is not.
            let peak = peakDemand(on: [pool.id]).map {
                // A demand that rounds to 0 is not none: "0 %" read as a file the checker failed to understand.
                let percent = ($0.ratio * 1000).rounded() / 10
                let shown = percent == 0 && $0.ratio > 0 ? "below 0.1" : number(percent)
                return "; scheduled demand peaks at \(shown) % of capacity (\($0.dimension), from \(number($0.at)) s)"
            }
            return "  pool \(pool.id) (\(pool.provider.rawValue)): " + steps.joined(separator: ", ")
                + (pool.overload.isEmpty ? "" : "; \(pool.overload.count) overload window(s)") + (peak ?? "")
                + "; about \(number(scheduledCalls(on: pool.id).rounded())) calls scheduled"
        }
        let tierCounts = tiers.sorted { $0.key < $1.key }.map { "\($0.value) \($0.key)" }.joined(separator: ", ")
        let head =
            "ok: \(name): \(number(durationSeconds)) s, \(gateways) gateway(s), "
            + "\(byID.count) tenant(s) (\(tierCounts)), headline \(headline.label) "
            + "(\(headline.higherIsBetter ? "higher" : "lower") is better)"
        return ([head] + pools + warnings.map { "  warning: " + $0 }).joined(separator: "\n")
    }

    /// What `--check` warns about (and a run, on stderr) in a scenario that is valid but cannot mean what its
    /// author meant (docs/scenarios.md): a headline on a tier with no task due within the run, a headline no
    /// strategy can win on (``unwinnableHeadlineWarnings``), a tenant's mean call too large for its pool's token
    /// bucket (``tokenBucketWarnings``), more than half of it (``halfBucketWarnings``) or larger than one gateway's
    /// cap under `allot` (``gatewayCapWarnings``), a latency warning on a pool whose capacity never drops, a latency
    /// warning that would start before the run, a declaration far from the truth (``declaredWarnings``), a
    /// parallelism that never binds, a run too large to be quick (``runSizeWarnings``), a `utilisation` headline on
    /// a short run (``shortRunWarnings``).
    public var warnings: [String] {
        headlineWarnings + unwinnableHeadlineWarnings + tokenBucketWarnings + halfBucketWarnings + gatewayCapWarnings
            + latencyWarningWarnings + fewTasksWarnings + staticQuotaWarnings + declaredWarnings + parallelismWarnings
            + runSizeWarnings + shortRunWarnings
    }

    /// A run shorter than this (seconds) with a `utilisation` headline is warned about (``shortRunWarnings``): the
    /// provider's full buckets are then worth 2 % of the run's capacity or more.
    static let shortUtilisationRun = 500.0

    /// A `utilisation` headline on a run under ``shortUtilisationRun``: the simulated provider's buckets start full
    /// (``SimUpstream/burstSeconds`` of capacity), and a strategy that sends above the capacity from the start is
    /// served that on top of the capacity, so over a short run over-sending wins the headline (outside evaluation
    /// round 44, L7: in a 60-s run `fifo-backoff` 114–116 %, `allot` 97–102 %).
    var shortRunWarnings: [String] {
        guard headline.metric == "utilisation", durationSeconds < Self.shortUtilisationRun else { return [] }
        let number = ScenarioReader.format
        let share = SimUpstream.burstSeconds / durationSeconds * 100
        return [
            "headline utilisation: the run is \(number(durationSeconds)) s long, and the simulated provider's "
                + "buckets start full (\(number(SimUpstream.burstSeconds)) s of capacity, and again after any lull): "
                + "a strategy that sends above the capacity from the start is served up to about "
                + "\(number((share * 10).rounded() / 10)) % of it on top from that alone, which can decide the "
                + "headline; a duration_s of \(number(Self.shortUtilisationRun)) or more keeps it at 2 % or less"
        ]
    }

    /// A `convergence_s` headline read at samples longer than this (seconds) is warned about: see
    /// ``unwinnableHeadlineWarnings``.
    static let convergenceResolution = 60.0

    /// How far a pool's declared capacity may be from its true one at t = 0 (a factor either way) before `--check`
    /// says so: a stale declaration is a story (`blind-capacity-drop` declares what the pool later loses), a
    /// declaration 100 times the truth is more likely a slip, and it is what every baseline provisions from
    /// (outside evaluation round 31: `declared_rpm` 100,000 on a 1,000-rpm pool passed silently).
    static let declaredFactor = 4.0

    /// A pool declared at ``declaredFactor`` times its true capacity at t = 0 or more, or at that fraction of it or
    /// less, per dimension.
    var declaredWarnings: [String] {
        let number = ScenarioReader.format
        var warnings: [String] = []
        for (index, pool) in pools.enumerated() {
            guard let first = pool.capacity.first else { continue }
            for (name, declared, truth) in [
                ("rpm", pool.declaredRPM, first.rpm), ("tpm", pool.declaredTPM, first.tpm),
            ] where truth > 0 && (declared >= Self.declaredFactor * truth || declared * Self.declaredFactor <= truth) {
                let above = declared > truth
                let factor = above ? declared / truth : truth / declared
                warnings.append(
                    "pools[\(index)].declared_\(name) \(number(declared)) (pool \"\(pool.id)\") is "
                        + "\(number((factor * 10).rounded() / 10))× \(above ? "" : "below ")its true capacity at t=0 "
                        + "(\(number(truth)) \(name)): the baselines provision from the declaration (`static` without "
                        + "a static_quota, `fifo-backoff`'s one bucket, `equal-split`) and `allot` starts from it "
                        + "until "
                        + "the provider states a limit; correct it unless the file means a stale declaration")
            }
        }
        return warnings
    }

    /// A task `parallelism` above its largest number of calls: no task ever has that many calls in flight, so the
    /// parallelism never binds (outside evaluation round 31: 50 with calls of 4–6). Once per `tenants` entry.
    var parallelismWarnings: [String] {
        firstOfEachEntry.flatMap { tenant, entry in
            tenant.shapes.enumerated().compactMap { index, shape -> String? in
                guard shape.parallelism > shape.maxCalls else { return nil }
                let path = index == 0 ? "task" : "task_changes[\(index - 1)]"
                return "\(entry.label): \(path).parallelism \(shape.parallelism) is above task.calls.max "
                    + "\(shape.maxCalls): a task never has more than \(shape.maxCalls) calls in flight, so the "
                    + "parallelism never binds"
            }
        }
    }

    /// The calls the arrivals schedule on `pool` over the run: each tenant's tasks (its rates × how long each is
    /// in force) × its mean calls per task, before retries and denials.
    func scheduledCalls(on pool: String) -> Double {
        tenants.filter { $0.pool == pool }.reduce(0) {
            $0 + $1.averageLoad(from: 0, length: durationSeconds).rpm * durationSeconds / 60
        }
    }

    /// More calls scheduled than above which a run would take a long time (outside evaluation round 23: a valid
    /// file of 50 million calls a minute ran silently until killed).
    static let largeRunCalls = 5_000_000.0

    /// Calls a second `allot` simulates on a 2-core machine, roughly: what the large-run warning's estimate uses (and
    /// states, as "about 30,000 a second").
    static let simulatedCallsPerSecond = 30_000.0

    /// A run too large to finish soon: the simulator runs every call (events, telemetry), about
    /// ``simulatedCallsPerSecond`` (fleet-hour: about 197,000 calls scheduled, 7.2 s on a quiet machine).
    var runSizeWarnings: [String] {
        let total = pools.reduce(0) { $0 + scheduledCalls(on: $1.id) }
        guard total > Self.largeRunCalls else { return [] }
        let minutes = (total / Self.simulatedCallsPerSecond / 60).rounded(.up)
        return [
            "about \(ScenarioReader.format(total.rounded())) calls are scheduled (tasks × calls per task, before "
                + "retries): the simulator runs every one of them, about 30,000 a second, so expect at least "
                + "\(ScenarioReader.format(minutes)) minutes per strategy"
        ]
    }

    /// A `static_quota` above its pool's largest capacity in a dimension (outside evaluation round 19): the quota can
    /// never bind there, so `static` is not the provisioned baseline the file means but no limit at all. Quotas that
    /// only add up to more than the pool are overbooking, which is how static quotas are often set, and pass.
    var staticQuotaWarnings: [String] {
        let number = ScenarioReader.format
        var warnings: [String] = []
        for (tenant, entry) in firstOfEachEntry {
            guard let quota = tenant.staticQuota, let pool = pools.first(where: { $0.id == tenant.pool }) else {
                continue
            }
            for (name, value, peak) in [
                ("rpm", quota.rpm, pool.capacity.map(\.rpm).max() ?? 0),
                ("tpm", quota.tpm, pool.capacity.map(\.tpm).max() ?? 0),
            ] where value > peak {
                warnings.append(
                    "\(entry.label): static_quota.\(name) \(number(value)) is above pool \"\(pool.id)\"'s largest "
                        + "capacity, \(number(peak)) \(name): the static baseline never holds the tenant back there")
            }
        }
        return warnings
    }

    /// A tenant expected to send less than one task in the whole run (its arrival rates × how long each is in
    /// force): it may well send none. Rates above 0 pass the "every rate is 0" check however small (round 11:
    /// `tasks_per_min` 5e-324). Once per `tenants` entry.
    var fewTasksWarnings: [String] {
        let number = ScenarioReader.format
        var warnings: [String] = []
        for (tenant, entry) in firstOfEachEntry {
            let expected = tenant.averageArrivalRate(from: 0, length: durationSeconds) * durationSeconds / 60
            guard expected < 1 else { continue }
            let shown = expected >= 0.01 ? number((expected * 100).rounded() / 100) : "less than 0.01"
            warnings.append(
                "\(entry.label): expects \(shown) tasks in the whole run (its tasks_per_min × how long each is in "
                    + "force): it may send none")
        }
        return warnings
    }

    /// A headline judged on tasks (SLO attainment, a latency percentile) of a tier none of whose tasks is due
    /// within the run: the metrics judge only tasks whose deadline falls inside it, so every strategy would show
    /// `-` and none would win.
    var headlineWarnings: [String] {
        guard let tier = headline.tier,
            headline.metric == "slo_attainment" || headline.metric.hasPrefix("task_latency_")
        else { return [] }
        let due = tenants.filter { $0.tier == tier }.compactMap { $0.earliestDue(before: durationSeconds) }
        // At `duration_s` is no earlier: the first task arrives after its arrival step begins (a Poisson draw), so
        // its deadline falls after the run's end (a 600-s run whose tasks are due 600 s after t = 0 judged none).
        guard let earliest = due.min(), earliest >= durationSeconds else { return [] }
        let number = ScenarioReader.format
        return [
            "headline \(headline.label): no task of tier \(tier) is due within the run (the earliest is due at "
                + "\(number(earliest)) s, the run ends at \(number(durationSeconds)) s): no strategy can win on it"
        ]
    }

    /// A tier headline every strategy ties on: `jain` on a tier of one tenant (1), `slo_attainment` when no task
    /// of the tier can finish by its deadline even at the pool's base latency (0). A headline `static` wins by
    /// construction: `total_variation` (it never moves a quota: 0) and `time_to_first_allocation_s` (it
    /// provisions every tenant before its first call: 0 s); the others can at best tie. And a headline measured
    /// only after something the scenario never has, so every strategy would show `-` and none would win:
    /// `convergence_s` with no capacity change to judge (``capacityChangeTimes``), and `utilisation` or a
    /// tier's `jain` when no pool (of the tier's tenants, for `jain`) has demand above its true capacity. Demand
    /// is what the metrics count it by: each tenant's scheduled arrival rate × its mean calls per task (× mean
    /// tokens per call for tpm), summed over the pool's tenants, against the capacity step in force. Also
    /// `convergence_s` read at samples longer than ``convergenceResolution``: ties are likely.
    var unwinnableHeadlineWarnings: [String] {
        let number = ScenarioReader.format
        let never = "no strategy can win on it"
        let tierTenants = headline.tier.map { tier in tenants.filter { $0.tier == tier } } ?? []
        let members = Set(tierTenants.map(\.id))
        switch headline.metric {
        case "jain" where members.count == 1:
            return [
                "headline \(headline.label): tier \(headline.tier!) has one tenant (\"\(members.first!)\"), and "
                    + "Jain's index of one is 1 for every strategy: \(never)"
            ]
        case "slo_attainment":
            // The fastest a task can finish: its fewest calls in rounds of `parallelism`, each at the pool's
            // base latency less the 15 % jitter (no queueing, no output tokens, no think time).
            let fastest = tierTenants.flatMap { tenant -> [(seconds: Double, deadline: Double)] in
                let base = pools.first { $0.id == tenant.pool }?.latency.baseMs ?? 0
                return tenant.shapes.map { shape in
                    let rounds = (shape.minCalls + shape.parallelism - 1) / shape.parallelism
                    return (Double(rounds) * 0.85 * base / 1000, shape.deadlineSeconds)
                }
            }
            guard let nearest = fastest.min(by: { $0.seconds - $0.deadline < $1.seconds - $1.deadline }),
                nearest.seconds > nearest.deadline
            else { return [] }
            return [
                "headline \(headline.label): no task of tier \(headline.tier!) can finish by its deadline (at best "
                    + "\(number((nearest.seconds * 100).rounded() / 100)) s, from its fewest calls at the pool's "
                    + "base latency, against deadline_s \(number(nearest.deadline))): every strategy meets 0 %, so "
                    + never
            ]
        case "total_variation":
            return [
                "headline total_variation: `static` never moves a quota, so its total variation is 0: no strategy "
                    + "can do better than tie it"
            ]
        case "time_to_first_allocation_s":
            return [
                "headline time_to_first_allocation_s: `static` provisions every tenant before its first call "
                    + "(0 s): no strategy can do better than tie it"
            ]
        case "convergence_s" where !capacityChangeTimes.isEmpty && sampleIntervalSeconds > Self.convergenceResolution:
            // Read at the end of an interval: whoever settles within the first one after a change scores the same
            // (outside evaluation round 44, L8: 300-s samples, all four strategies 300 s).
            let interval = number(sampleIntervalSeconds)
            return [
                "headline convergence_s: it is read at the end of a sample interval, and sample_interval_s is "
                    + "\(interval) s: every strategy that settles within the first interval after a change scores "
                    + "the same (up to \(interval) s), so only a slower one can lose; a sample_interval_s of "
                    + "\(number(Self.convergenceResolution)) or less tells them apart"
            ]
        case "convergence_s" where capacityChangeTimes.isEmpty:
            return [
                "headline convergence_s: no pool's capacity changes within the run (no capacity step at or before "
                    + "the start of its last interval, t=\(number(lastSampleStart)) s, changes rpm or tpm from the "
                    + "step before it): convergence is measured only after a change, so \(never)"
            ]
        case "utilisation", "jain":
            // A tier's Jain's index is judged on its own tenants' pools only.
            let judged = headline.tier.map { _ in Set(tierTenants.map(\.pool)) }
            guard let peak = peakDemand(on: judged), peak.ratio <= 1 else { return [] }
            let what = headline.metric == "jain" ? "Jain's index is" : "utilisation is"
            return [
                "headline \(headline.label): \(headline.tier.map { "on the pools tier \($0) uses, " } ?? "")"
                    + "no pool's scheduled demand ever exceeds its true capacity (the most is "
                    + "\(number((peak.ratio * 1000).rounded() / 10)) % of pool \"\(peak.pool)\"'s \(peak.dimension) "
                    + "from t=\(number(peak.at)) s): \(what) measured only while demand exceeds capacity, so "
                    + "\(never)"
            ]
        default:
            return []
        }
    }

    /// The highest ratio, over pools and the spans between steps (capacity and arrival steps, within the run), of
    /// a pool's scheduled demand to its true capacity in either dimension: where, in which dimension, from when
    /// (the first of equals). `judged`: only those pools (by id); nil: every pool.
    func peakDemand(on judged: Set<String>? = nil) -> (ratio: Double, pool: String, dimension: String, at: Double)? {
        var peak: (ratio: Double, pool: String, dimension: String, at: Double)?
        for pool in pools where judged?.contains(pool.id) ?? true {
            let members = tenants.filter { $0.pool == pool.id }
            let starts = Set(
                [0] + pool.capacity.map(\.at) + members.flatMap { $0.arrivals.map(\.at) + $0.taskChanges.map(\.at) })
            for at in starts.filter({ $0 < durationSeconds }).sorted() {
                let step = pool.capacity(at: at)
                let rpm = members.reduce(0) { $0 + $1.arrivalRate(at: at) * $1.task(at: at).meanCalls }
                let tpm = members.reduce(0) {
                    let shape = $1.task(at: at)
                    return $0 + $1.arrivalRate(at: at) * shape.meanCalls * shape.meanTokensPerCall
                }
                for (ratio, dimension) in [(rpm / step.rpm, "rpm"), (tpm / step.tpm, "tpm")]
                where ratio > (peak?.ratio ?? -1) {
                    peak = (ratio, pool.id, dimension, at)
                }
            }
        }
        return peak
    }

    /// A tenant whose mean call is as large as its pool's token bucket or larger (``SimUpstream/burstSeconds`` of the
    /// tpm) at some capacity step: the simulated provider admits such a call only when the bucket is full (and a
    /// larger one then leaves it below empty, for longer than the bucket takes to fill), so on a pool with
    /// any other traffic it meets 429s whatever the allocator does. Once per `tenants` entry, naming the step
    /// with the smallest bucket.
    var tokenBucketWarnings: [String] {
        let number = ScenarioReader.format
        let bucket = SimUpstream.tokenBurst(at:)
        return callSizeWarnings { entry, pool, poolIndex, call in
            // A call of the bucket's size, like a larger one, needs a full bucket.
            let tooSmall = pool.capacity.indices.filter { call >= bucket(pool.capacity[$0]) }
            guard let worst = Self.smallestStep(of: tooSmall, in: pool) else { return nil }
            let step = pool.capacity[worst]
            let stepPath = "pools[\(poolIndex)].capacity[\(worst)]"
            let others =
                tooSmall.count > 1 ? ", too small at \(tooSmall.count) of its \(pool.capacity.count) steps" : ""
            let head =
                "\(entry.label): its mean call of \(number(call.rounded())) tokens (task.prompt_tokens.mean + "
                + "completion_tokens.mean) is \(call > bucket(step) ? "larger than" : "as large as") pool "
                + "\"\(pool.id)\"'s "
            let full = "the simulated provider admits such a call only when its bucket is full"
            guard call > step.tpm else {
                return head
                    + "\(number(SimUpstream.burstSeconds))-s token bucket (\(number(bucket(step).rounded(.down))) "
                    + "of \(number(step.tpm)) tpm at \(stepPath), from t=\(number(step.at)) s\(others)): \(full), "
                    + "so on a pool with any other traffic it meets 429s whatever the allocator does"
            }
            // Admitted, it leaves the bucket below empty until the excess over the bucket has refilled.
            let empty = (call - bucket(step)) / (step.tpm / 60)
            return head + "whole capacity of \(number(step.tpm)) tpm (\(stepPath), from t=\(number(step.at)) s"
                + "\(others); its \(number(SimUpstream.burstSeconds))-s token bucket holds "
                + "\(number(bucket(step).rounded(.down)))): \(full), and each one admitted leaves the bucket "
                + "empty for the next \(number(empty.rounded())) s: it meets 429s whatever the allocator does, "
                + "and so does every other call on the pool (under allot they wait at the gateways instead: "
                + "the call leaves its gateway's cap in debt)"
        }
    }

    /// A tenant whose mean call fits its pool's token bucket at every capacity step but is more than half of it at
    /// some step: a second such call that reaches the provider within `(2 × call − bucket) ÷ (tpm ÷ 60)` seconds of
    /// another is more than the bucket holds then, and is refused. A gateway's own bucket may hold two such calls
    /// apart (behind one gateway the per-tenant baselines' 10-s buckets of the tenant's quota did: outside evaluation
    /// round 25, 6,000-token calls on a 10,000-token bucket, 0 % 429s for them against `allot`'s 14.6 %), but nothing
    /// holds calls through different gateways apart, nor those of one gateway whose buckets have room for both.
    /// Outside evaluation round 24: 200k-token calls, one task a minute, alone on a 2M-TPM pool (a 333k bucket) at 15 %
    /// of its capacity behind three gateways, had 25 % of their attempts answered 429 under `allot`, 26–40 % under
    /// `static` and `equal-split` and 17–22 % under `fifo-backoff`, whose one bucket is the provider's size (seeds
    /// 1–2, 2026-11-29), with no warning, as one call fits. Calls of half the bucket or less can still
    /// meet 429s three at a time. Once per `tenants` entry, naming the step with the smallest bucket; not where
    /// ``tokenBucketWarnings`` already warns that one call does not fit.
    var halfBucketWarnings: [String] {
        let number = ScenarioReader.format
        let bucket = SimUpstream.tokenBurst(at:)
        let gateways = self.gateways
        return callSizeWarnings { entry, pool, poolIndex, call in
            guard Self.fitsEveryBucket(call, pool),
                let worst = Self.smallestStep(
                    of: pool.capacity.indices.filter { 2 * call > bucket(pool.capacity[$0]) }, in: pool)
            else { return nil }
            let step = pool.capacity[worst]
            // At least a tenth of a second: a call just over half the bucket has a window that rounds to 0.
            let window = max(0.1, ((2 * call - bucket(step)) / (step.tpm / 60) * 10).rounded() / 10)
            let apart =
                gateways > 1
                ? "a gateway's own buckets may hold such calls apart, but nothing holds apart calls that go through "
                    + "different gateways (\(gateways) here)"
                : "the gateway's own buckets may hold such calls apart"
            return "\(entry.label): its mean call of \(number(call.rounded())) tokens is more than half of pool "
                + "\"\(pool.id)\"'s \(number(SimUpstream.burstSeconds))-s token bucket "
                + "(\(number(bucket(step).rounded(.down))) of \(number(step.tpm)) tpm at "
                + "pools[\(poolIndex)].capacity[\(worst)], from t=\(number(step.at)) s): a second such call that "
                + "reaches the provider within \(number(window)) s of another (parallel calls, "
                + "tasks that overlap) is more than the bucket holds then and meets a 429; \(apart)"
        }
    }

    /// A tenant whose mean call fits its pool's token bucket but not one gateway's share of it under `allot` at
    /// some capacity step: ``GatewayConfiguration/defaultCapWindow`` seconds of `tpm ÷ gateways`, what the gateway's
    /// cap holds and more than the tenant's slice there holds. A call larger than those buckets is admitted only
    /// into a full one and leaves a debt, so such calls queue at every gateway and wait out their maximum wait
    /// (outside evaluation round 24: 200k-token calls on a 2M-TPM pool at 87.5 % of its capacity, 3 gateways,
    /// served 332k TPM of an allocation of about 471k; behind 1 gateway, nobody starved). Once per `tenants`
    /// entry, naming the step with the smallest share; not where ``tokenBucketWarnings`` already warns of the
    /// provider's own bucket.
    var gatewayCapWarnings: [String] {
        let number = ScenarioReader.format
        let window = GatewayConfiguration.defaultCapWindow
        let gateways = self.gateways
        func cap(_ step: CapacityStep) -> Double { step.tpm / Double(gateways) * window / 60 }
        return callSizeWarnings { entry, pool, poolIndex, call in
            guard Self.fitsEveryBucket(call, pool),
                let worst = Self.smallestStep(
                    of: pool.capacity.indices.filter { call > cap(pool.capacity[$0]) }, in: pool)
            else { return nil }
            let step = pool.capacity[worst]
            return "\(entry.label): its mean call of \(number(call.rounded())) tokens is larger than one gateway's "
                + "\(number(window))-s share of pool \"\(pool.id)\" under allot (\(number(step.tpm)) tpm "
                + "÷ \(gateways) gateway\(gateways == 1 ? "" : "s") ≈ \(number(cap(step).rounded(.down))) tokens, at "
                + "pools[\(poolIndex)].capacity[\(worst)]): the gateway's cap and the tenant's slice there hold less "
                + "than one such call, so a gateway admits one only into a full bucket and then owes the rest; such "
                + "calls queue at each gateway and may wait out their maximum wait and be denied; fewer gateways "
                + "(--gateways) give each a larger share"
        }
    }

    /// The call-size warnings' walk: for the first tenant of each `tenants` entry whose pool the file has, `warning`
    /// given the entry, its pool, the pool's index and the tenant's mean tokens per call — the largest of its shapes'
    /// (nil: nothing to say).
    private func callSizeWarnings(
        _ warning: (ScenarioTenantEntry, ScenarioPool, Int, Double) -> String?
    ) -> [String] {
        firstOfEachEntry.compactMap { tenant, entry in
            guard let poolIndex = pools.firstIndex(where: { $0.id == tenant.pool }) else { return nil }
            return warning(entry, pools[poolIndex], poolIndex, tenant.shapes.map(\.meanTokensPerCall).max() ?? 0)
        }
    }

    /// Whether a call of `call` tokens is smaller than the simulated provider's token bucket at every capacity step of
    /// `pool` (where ``tokenBucketWarnings`` has nothing to say and the other call-size warnings look further).
    private static func fitsEveryBucket(_ call: Double, _ pool: ScenarioPool) -> Bool {
        pool.capacity.allSatisfy { call < SimUpstream.tokenBurst(at: $0) }
    }

    /// Of `steps` (indices into `pool.capacity`), the one with the smallest tpm, the first of equals: the step a
    /// call fits worst. Nil when there are none.
    private static func smallestStep(of steps: [Int], in pool: ScenarioPool) -> Int? {
        steps.min { pool.capacity[$0].tpm < pool.capacity[$1].tpm }
    }

    /// The first tenant of each `tenants` entry (an entry with `count` N expands to N alike), with its entry: what a
    /// warning about the file names once.
    var firstOfEachEntry: [(tenant: ScenarioTenant, entry: ScenarioTenantEntry)] {
        var seen = Set<Int>()
        return zip(tenants, entryOfEachTenant).filter { seen.insert($0.1.index).inserted }.map { ($0.0, $0.1) }
    }

    /// Per tenant, the `tenants` entry it was expanded from (each its own entry in a scenario built without them).
    var entryOfEachTenant: [ScenarioTenantEntry] {
        tenantEntries.count == tenants.count
            ? tenantEntries
            : tenants.enumerated().map { ScenarioTenantEntry(index: $0.offset, id: $0.element.id, count: 1) }
    }

    /// Tenants the gateways' `max_concurrency` holds below their own rate (outside evaluation round 10): at its
    /// peak arrival rate (tasks per minute × mean calls) and the pool's quickest mean answer (`latency.base_ms` +
    /// `per_1k_output_tokens_ms` × mean completion ÷ 1000: no queueing factor), a tenant needs rate × latency ÷ 60
    /// calls in flight (Little's law). More than its tier's `max_concurrency` × the gateways, and the gateways cap
    /// it at about cap × 60 ÷ latency calls a minute whatever its allocation — `allot`'s, `static`'s and
    /// `equal-split`'s (`fifo-backoff`'s one global bucket knows no tenant). The engine does not know it: it
    /// allocates rate the tenant cannot use.
    public func concurrencyWarnings(policy: Policy) -> [String] {
        let number = ScenarioReader.format
        var warnings: [String] = []
        for (tenant, entry) in firstOfEachEntry {
            guard let pool = pools.first(where: { $0.id == tenant.pool }), let tier = policy.tier(named: tenant.tier)
            else { continue }
            // Its shape that needs the most in flight (with the peak arrival rate of the whole run: an upper bound).
            let rate = tenant.arrivals.map(\.tasksPerMinute).max() ?? 0
            let (peak, latency) = tenant.shapes.map { shape -> (Double, Double) in
                let output = pool.latency.perThousandOutputTokensMs * shape.completionTokens.expected / 1000
                return (rate * shape.meanCalls, (pool.latency.baseMs + output) / 1000)
            }.max { $0.0 * $0.1 < $1.0 * $1.1 } ?? (0, 0)
            let cap = Double(tier.maxConcurrency * gateways)
            let needed = peak * latency / 60
            guard latency > 0, needed > cap else { continue }
            warnings.append(
                "\(entry.label): at its peak of \(number(peak.rounded())) calls/min, with answers of at least "
                    + "\(number((latency * 10).rounded() / 10)) s, it needs about \(number(needed.rounded())) calls in "
                    + "flight, more than tier \"\(tier.name)\"'s max_concurrency \(tier.maxConcurrency) × \(gateways) "
                    + "gateway(s) allows: the gateways hold it to about "
                    + "\(number((cap * 60 / latency).rounded())) calls/min whatever its allocation "
                    + "(all but `fifo-backoff`, which knows no tenant)")
        }
        return warnings
    }

    /// The warnings that depend on the policy the run uses (the built-in one or `--policy`): a tick other than the
    /// one the dampening was tuned at (``tickWarnings(policy:)``), tenants held by their concurrency cap
    /// (``concurrencyWarnings(policy:)``), tenants the policy names in another tier
    /// (``tierConflictWarnings(policy:)``), pools their tenants' ceilings cannot fill (``ceilingWarnings(policy:)``)
    /// and pools their floors (``floorWarnings(policy:)``) or guard minimums (``guardMinWarnings(policy:)``)
    /// over-commit.
    public func policyWarnings(policy: Policy) -> [String] {
        tickWarnings(policy: policy) + concurrencyWarnings(policy: policy) + tierConflictWarnings(policy: policy)
            + ceilingWarnings(policy: policy) + floorWarnings(policy: policy) + guardMinWarnings(policy: policy)
            + floorAboveCeilingWarnings(policy: policy) + taskBudgetWarnings(policy: policy)
    }

    /// Tenants whose largest task outgrows its class's `task_budgets` at a gateway (outside evaluation round 37:
    /// realtime tasks of 250 calls behind one gateway against a budget of 200: each denied from its 201st call,
    /// `allot`'s SLO 0 % where the baselines, which enforce no budget, met 100 %). A tenant's calls take the gateways
    /// in turn, so one task leaves about its calls ÷ the gateways at each; its tokens are counted at their mean.
    func taskBudgetWarnings(policy: Policy) -> [String] {
        let number = ScenarioReader.format
        var warnings: [String] = []
        let spread = Double(max(gateways, 1))
        for (tenant, entry) in firstOfEachEntry {
            for shape in tenant.shapes {
                guard let budget = policy.taskBudgets[shape.taskClass] else { continue }
                let calls = (Double(shape.maxCalls) / spread).rounded(.up)
                let tokens = (calls * shape.meanTokensPerCall).rounded()
                let over: String
                if calls > Double(budget.maxCalls) {
                    over = "about \(number(calls)) calls at each, more than the \(budget.maxCalls) calls"
                } else if tokens > Double(budget.maxTokens) {
                    over = "about \(number(tokens)) tokens at each, more than the \(budget.maxTokens) tokens"
                } else {
                    continue
                }
                warnings.append(
                    "\(entry.label): its \(shape.taskClass.rawValue) tasks of up to \(shape.maxCalls) calls leave "
                        + "\(over) of the \(shape.taskClass.rawValue) task budget (`task_budgets`) over \(gateways) "
                        + "gateway(s): `allot`'s gateways deny each such task's calls beyond it "
                        + "(`task_budget_exceeded`), the baselines enforce no budget")
                break
            }
        }
        return warnings
    }

    /// Tenants whose floor resolves above their ceiling at some capacity step (outside evaluation round 34: an
    /// absolute floor of 250 rpm under a `"20%"` ceiling, 196 rpm of the pool, took the other standard tenant down
    /// to 71). The loader rejects the two only in the same unit; at run time the floor wins (policies/README.md,
    /// *Floor above ceiling*). Once per tenant entry (naming its first such tenant), at the first step, in the first
    /// dimension where it does.
    func floorAboveCeilingWarnings(policy: Policy) -> [String] {
        let margin = 1 - policy.allocation.safetyMargin
        guard let run = try? SimulationPolicy.policy(for: self, base: policy) else { return [] }
        let number = ScenarioReader.format
        var warned = Set<Int>()
        var warnings: [String] = []
        for (tenant, entry) in zip(tenants, entryOfEachTenant) where !warned.contains(entry.index) {
            guard let (poolIndex, pool) = pools.enumerated().first(where: { $0.element.id == tenant.pool }) else {
                continue
            }
            let terms = run.terms(ofTenant: tenant.id, upstream: pool.id, overrides: [], now: 0)
            search: for (stepIndex, step) in pool.capacity.enumerated() {
                for dimension in RateDimension.allCases {
                    guard let capacity = step.allocable(dimension, margin: margin) else { continue }
                    let floor = terms.floor[dimension].resolved(capacity: capacity)
                    let ceiling = terms.ceiling[dimension].resolved(capacity: capacity)
                    guard floor > ceiling * (1 + 1e-9) else { continue }
                    warned.insert(entry.index)
                    let unit = dimension.rawValue
                    // A share as written and what it comes to; a rate as it is.
                    func shown(_ quantity: Quantity, _ resolved: Double) -> String {
                        if case .percent = quantity {
                            return "\(quantity.jsonText), \(number(resolved)) \(unit) after the safety margin"
                        }
                        return "\(number(resolved)) \(unit)"
                    }
                    warnings.append(
                        "\(entry.label)\(entry.count > 1 ? ", tenant \"\(tenant.id)\"" : ""): its floor "
                            + "(\(shown(terms.floor[dimension], floor))) is above its ceiling "
                            + "(\(shown(terms.ceiling[dimension], ceiling))) at pools[\(poolIndex)].capacity[\(stepIndex)] "
                            + "(at_s \(number(step.at))): the floor wins — `allot` holds it at \(number(floor)) \(unit) "
                            + "while it is active, whatever it asks for (less only under a guard_max, a budget or "
                            + "degraded mode; policies/README.md, Floor above ceiling)")
                    break search
                }
            }
        }
        return warnings
    }

    /// A loop interval other than the shipped policy's (outside evaluation round 18): the dampening counts ticks
    /// (SPEC 6.6: `persist_ticks`, `max_up`, `max_down` per tick), so another tick is another controller, not the
    /// same one faster or slower — premium desks bursting to 4× met 94.5 % of their deadlines at 5 s, 91.2 % at 1 s.
    func tickWarnings(policy: Policy) -> [String] {
        let shipped = LoopSettings().intervalSeconds
        let tick = tickIntervalSeconds ?? policy.loop.intervalSeconds
        guard tick != shipped else { return [] }
        let number = ScenarioReader.format
        let source =
            tickIntervalSeconds != nil ? "the scenario's policy.tick_interval_s" : "the policy's loop.interval_s"
        let dampening = policy.dampening
        func seconds(_ ticks: Int, at interval: Double) -> String { number(Double(ticks) * interval) + " s" }
        return [
            "the loop ticks every \(number(tick)) s (\(source)), the shipped policy every \(number(shipped)) s: "
                + "the dampening counts ticks — a direction change waits persist_ticks \(dampening.persistTicks) "
                + "(\(seconds(dampening.persistTicks, at: tick)); \(seconds(dampening.persistTicks, at: shipped)) "
                + "at \(number(shipped)) s) and each tick may step by max_up \(number(dampening.maxUp)) or max_down "
                + "\(number(dampening.maxDown)) (\(number((60 / tick).rounded(.down))) ticks a minute; "
                + "\(number((60 / shipped).rounded(.down))) at \(number(shipped)) s) — so `allot` acts over other "
                + "times and rates than its defaults were tuned for (policies/README.md, interval_s)"
        ]
    }

    /// Tenants the policy's `tenants` names in another tier than the scenario does (outside evaluation round 18):
    /// the run puts them in the scenario's tier but keeps the policy's own weight, floor and ceiling for them
    /// (``SimulationPolicy``) — a standard tenant with a contract's 30 % floor, which is rarely what was meant.
    func tierConflictWarnings(policy: Policy) -> [String] {
        var warned = Set<String>()
        var warnings: [String] = []
        for (tenant, entry) in zip(tenants, entryOfEachTenant) {
            guard let named = policy.tenant(tenant.id), named.tier != tenant.tier, warned.insert(tenant.id).inserted
            else { continue }
            // An entry with `count` names each of its tenants the policy names.
            let label = entry.label + (entry.count > 1 ? ", tenant \"\(tenant.id)\"" : "")
            var own: [String] = []
            if let weight = named.weight { own.append("weight × \(ScenarioReader.format(weight))") }
            for (field, values) in [("floor", named.floor), ("ceiling", named.ceiling)] {
                let set = RateDimension.allCases.compactMap { dimension in
                    values[dimension].map { "\(dimension.rawValue) \($0.jsonText)" }
                }
                if !set.isEmpty { own.append("\(field) " + set.joined(separator: ", ")) }
            }
            warnings.append(
                "\(label): tier \"\(tenant.tier)\" here, \"\(named.tier)\" in the policy's tenants: the run uses "
                    + "tier \"\(tenant.tier)\""
                    + (own.isEmpty ? "" : " with the policy's own " + own.joined(separator: "; ") + " for it"))
        }
        return warnings
    }

    /// Pools whose tenants' ceilings together cannot take the capacity (outside evaluation round 18: four free
    /// tenants, each at most 20 %, alone on a pool — at most 80 % of it is ever allocated, and capacity nobody is
    /// allocated is not lent). Each tenant's ceiling is the policy's own for it or its tier's, resolved like the
    /// engine's against the true capacity after the safety margin; a pool with any unbounded tenant is fine. The
    /// first capacity step where the sum falls short is named, in the dimension that falls shortest.
    func ceilingWarnings(policy: Policy) -> [String] {
        termShares(policy: policy, term: \.ceiling, beyond: { $0 < 1 - 1e-9 }, further: { $0 < $1 }).map { found in
            // Rounded down (past rounding dust: 4 × 20 % reads 80, not 79.9): a shortfall never reads as 100 %.
            let percent = ScenarioReader.format((found.share * 1000 + 1e-6).rounded(.down) / 10)
            return "\(found.where): the ceilings of its \(found.members) tenant(s) add up to \(percent) % of its "
                + "\(found.dimension.rawValue) after the safety margin at \(found.step): `allot` never allocates the "
                + "rest, and capacity nobody is allocated is not lent"
        }
    }

    /// Pools whose tenants' floors together exceed the capacity (outside evaluation round 19: two contracts of 60 %
    /// each): while they are all active the engine runs the pool in degraded mode — every tenant its tier's
    /// starvation guard, then floors tier by tier in priority order (SPEC 6.4) — and fair shares no longer apply.
    /// Resolved and named like ``ceilingWarnings(policy:)``, in the dimension furthest over.
    func floorWarnings(policy: Policy) -> [String] {
        termShares(policy: policy, term: \.floor, beyond: { $0 > 1 + 1e-9 }, further: { $0 > $1 }).map { found in
            // Rounded up (past rounding dust): an excess never reads as 100 %.
            let percent = ScenarioReader.format((found.share * 1000 - 1e-6).rounded(.up) / 10)
            return "\(found.where): the floors of its \(found.members) tenant(s) add up to \(percent) % of its "
                + "\(found.dimension.rawValue) after the safety margin at \(found.step): while they are all active "
                + "`allot` runs it in degraded mode (starvation guards, then floors by tier priority)"
        }
    }

    /// Pools whose tenants' `guard_min`s together exceed the capacity (outside evaluation round 34: standard tenants
    /// guarded at 200 rpm each, a fifth joining a 1,000-rpm pool). The engine holds guard minimums only while all of
    /// them fit (each up to what its tenant wants): beyond, it holds none and shares the pool by weight — capacity, not
    /// choice — so one tenant joining drops every incumbent below its guard at once. Resolved and named like
    /// ``floorWarnings(policy:)``.
    func guardMinWarnings(policy: Policy) -> [String] {
        // As the engine counts them: each tenant's guard_min or, above it, its floor (review of round 34's warning: a
        // floor of 700 beside two guards of 200 on a 980-rpm pool dropped both guards, and nothing warned).
        let guarded = { (terms: TenantTerms, dimension: RateDimension, capacity: Double) -> Double in
            max(
                terms.floor[dimension].resolved(capacity: capacity),
                terms.tier.guardMin[dimension].resolved(capacity: capacity))
        }
        let over = { (share: Double) in share > 1 + 1e-9 }
        let floors = Set(
            termShares(policy: policy, term: \.floor, beyond: over, further: { $0 > $1 }).map { $0.where + $0.step })
        return termShares(policy: policy, value: guarded, beyond: over, further: { $0 > $1 }).compactMap { found in
            // The floors alone over-commit the pool there: degraded mode, which their own warning names (guards do
            // not apply in it).
            guard !floors.contains(found.where + found.step) else { return nil }
            let percent = ScenarioReader.format((found.share * 1000 - 1e-6).rounded(.up) / 10)
            return "\(found.where): the guard_min values of its \(found.members) tenant(s), with the floors above them, "
                + "add up to \(percent) % of its \(found.dimension.rawValue) after the safety margin at \(found.step): "
                + "while they all want that much `allot` holds none of the guards (the pool is shared by weight; "
                + "guard_min holds only while all fit)"
        }
    }

    /// Per pool with tenants, the first capacity step where the sum of `term` over its tenants (as the run resolves
    /// it: the scenario's tiers with what the policy says of each tenant, against the true capacity after the safety
    /// margin), as a share of that capacity, is `beyond` — in the dimension `further` ranks first.
    private func termShares(
        policy: Policy, term: @escaping (TenantTerms) -> PerDimension<Quantity>, beyond: (Double) -> Bool,
        further: (Double, Double) -> Bool
    ) -> [(where: String, members: Int, step: String, dimension: RateDimension, share: Double)] {
        termShares(
            policy: policy, value: { term($0)[$1].resolved(capacity: $2) }, beyond: beyond, further: further)
    }

    /// ``termShares(policy:term:beyond:further:)`` with each tenant's value resolved by `value(terms, dimension, C)`.
    private func termShares(
        policy: Policy, value: (TenantTerms, RateDimension, Double) -> Double, beyond: (Double) -> Bool,
        further: (Double, Double) -> Bool
    ) -> [(where: String, members: Int, step: String, dimension: RateDimension, share: Double)] {
        let margin = 1 - policy.allocation.safetyMargin
        guard let run = try? SimulationPolicy.policy(for: self, base: policy) else { return [] }
        var found: [(where: String, members: Int, step: String, dimension: RateDimension, share: Double)] = []
        for (poolIndex, pool) in pools.enumerated() {
            let members = tenants.filter { $0.pool == pool.id }
            guard !members.isEmpty else { continue }
            let terms = members.map { run.terms(ofTenant: $0.id, upstream: pool.id, overrides: [], now: 0) }
            for (stepIndex, step) in pool.capacity.enumerated() {
                var furthest: (dimension: RateDimension, share: Double)?
                for dimension in RateDimension.allCases {
                    guard let capacity = step.allocable(dimension, margin: margin) else { continue }
                    let share = terms.reduce(0) { $0 + value($1, dimension, capacity) } / capacity
                    if beyond(share), furthest.map({ further(share, $0.share) }) ?? true {
                        furthest = (dimension, share)
                    }
                }
                guard let furthest else { continue }
                found.append(
                    (
                        "pools[\(poolIndex)] (\"\(pool.id)\")", members.count,
                        "pools[\(poolIndex)].capacity[\(stepIndex)] (at_s \(ScenarioReader.format(step.at)))",
                        furthest.dimension, furthest.share
                    ))
                break
            }
        }
        return found
    }

    /// `latency_warning_s` on a pool whose capacity never drops (the warning never applies), and a drop whose
    /// warning would start before t = 0 (cut short at the start of the run).
    var latencyWarningWarnings: [String] {
        let number = ScenarioReader.format
        var warnings: [String] = []
        for (poolIndex, pool) in pools.enumerated() where pool.latencyWarningSeconds > 0 {
            let warning = pool.latencyWarningSeconds
            let path = "pools[\(poolIndex)].latency_warning_s (pool \"\(pool.id)\", \(number(warning)) s)"
            let drops = pool.capacity.indices.dropFirst().filter {
                pool.capacity[$0].drops(from: pool.capacity[$0 - 1])
            }
            guard !drops.isEmpty else {
                warnings.append(
                    path + ": the pool's capacity never drops (no capacity step lowers rpm or tpm from the step "
                        + "before it): the latency warning never applies")
                continue
            }
            for index in drops where pool.capacity[index].at < warning {
                let at = pool.capacity[index].at
                // The ramp over the warning, already part-way up at t = 0.
                let factor = SimUpstream.warningFactor(into: warning - at, of: warning)
                warnings.append(
                    path + ": the drop at pools[\(poolIndex)].capacity[\(index)] (at_s \(number(at))) would be warned "
                        + "of from t=\(number(at - warning)) s: the warning is cut short by \(number(warning - at)) s "
                        + "at the start of the run (latency starts at ×\(number((factor * 100).rounded() / 100)), "
                        + "not ×1)")
            }
        }
        return warnings
    }

    /// The built-in scenarios' names (`scenarios/*.json`, embedded), sorted.
    public static var builtinNames: [String] {
        AllotAssets.scenarios.map { String($0.name.dropLast(".json".count)) }.sorted()
    }

    /// A built-in scenario by name.
    public static func builtin(named name: String, tiers: Set<String>? = nil) throws(ScenarioError) -> Scenario {
        guard let file = AllotAssets.scenarios.first(where: { $0.name == name + ".json" }) else {
            throw ScenarioError(
                source: name, path: "",
                reason: "no built-in scenario of that name (built-ins: \(builtinNames.joined(separator: ", ")))")
        }
        return try decode(file.bytes, source: name, tiers: tiers)
    }

    /// A built-in name, else a file path. `tiers`: the tier names tenants may use (default: the
    /// default policy's; `allot simulate --policy DIR` passes that policy's).
    public static func load(_ nameOrPath: String, tiers: Set<String>? = nil) throws(ScenarioError) -> Scenario {
        if builtinNames.contains(nameOrPath) { return try builtin(named: nameOrPath, tiers: tiers) }
        guard let data = FileManager.default.contents(atPath: nameOrPath) else {
            throw ScenarioError(
                source: nameOrPath, path: "",
                reason:
                    "neither a built-in scenario nor a readable file (built-ins: \(builtinNames.joined(separator: ", ")))"
            )
        }
        return try decode([UInt8](data), source: nameOrPath, tiers: tiers)
    }

    /// The tier names scenarios may use: the default policy's.
    static var knownTiers: Set<String> {
        Set(((try? SimulationPolicy.defaultPolicy()) ?? Policy()).tiers.map(\.name))
    }

    /// Decodes and validates a scenario (the format of docs/scenarios.md); every error names its JSON path.
    public static func decode(_ bytes: [UInt8], source: String, tiers: Set<String>? = nil) throws(ScenarioError)
        -> Scenario
    {
        let json: JSON
        do {
            json = try JSON.parseFile(bytes)
        } catch {
            // The path as every other error gives it (`tenants[2].arrivals[0].tasks_per_min: not valid JSON: …`).
            var located = error
            located.path = nil
            throw ScenarioError(source: source, path: error.path ?? "", reason: "not valid JSON: \(located)")
        }
        let reader = ScenarioReader(source: source, tiers: tiers ?? Scenario.knownTiers)
        return try reader.scenario(json)
    }
}

/// Reads the JSON tree, collecting the path for errors.
private struct ScenarioReader {
    let source: String
    /// The tier names tenants and the headline may use.
    let tiers: Set<String>

    func fail(_ path: String, _ reason: String) -> ScenarioError {
        ScenarioError(source: source, path: path, reason: reason)
    }

    func object(_ json: JSON?, _ path: String, keys: [String], required: [String]) throws(ScenarioError) -> JSONObject {
        guard let json else { throw fail(path, "missing") }
        guard let object = json.objectValue else { throw fail(path, "must be an object, not \(json.typeName)") }
        for key in object.keys where !keys.contains(key) {
            throw fail(join(path, key), "unknown field (allowed: \(keys.joined(separator: ", ")))")
        }
        for key in required where object[key] == nil {
            throw fail(join(path, key), "missing")
        }
        return object
    }

    func join(_ path: String, _ key: String) -> String { path.isEmpty ? key : path + "." + key }

    func string(_ json: JSON?, _ path: String) throws(ScenarioError) -> String {
        guard let json else { throw fail(path, "missing") }
        guard let value = json.stringValue else { throw fail(path, "must be a string, not \(json.typeName)") }
        return value
    }

    func number(_ json: JSON?, _ path: String, _ range: ClosedRange<Double>, default value: Double? = nil)
        throws(ScenarioError) -> Double
    {
        // `null` is a value of the wrong type, as everywhere in the file (and in policies): it read as "absent"
        // here only, so `"gateways": null` ran with 3 gateways and `"duration_s": null` said "missing".
        guard let json else {
            if let value { return value }
            throw fail(path, "missing")
        }
        guard let number = json.doubleValue else { throw fail(path, "must be a number, not \(json.typeName)") }
        guard range.contains(number) else {
            throw fail(
                path,
                "must be between \(Self.format(range.lowerBound)) and \(Self.format(range.upperBound)), not \(Self.format(number))"
            )
        }
        return number
    }

    func integer(_ json: JSON?, _ path: String, _ range: ClosedRange<Int>, default value: Int? = nil)
        throws(ScenarioError) -> Int
    {
        guard let json else {
            if let value { return value }
            throw fail(path, "missing")
        }
        guard let number = json.intValue else {
            if let value = json.doubleValue, value.isFinite, value == value.rounded() {
                // An integer too large for the machine's: its range is what is wrong (round 11).
                let bounds = "\(range.lowerBound) and \(range.upperBound)"
                throw fail(path, "must be between \(bounds), not \(Self.format(value))")
            }
            if let value = json.doubleValue { throw fail(path, "must be an integer, not \(Self.format(value))") }
            throw fail(path, "must be an integer, not \(json.typeName)")
        }
        guard range.contains(number) else {
            throw fail(path, "must be between \(range.lowerBound) and \(range.upperBound), not \(number)")
        }
        return number
    }

    func array(_ json: JSON?, _ path: String, count: ClosedRange<Int>) throws(ScenarioError) -> [JSON] {
        guard let json else { throw fail(path, "missing") }
        guard let items = json.arrayValue else { throw fail(path, "must be an array, not \(json.typeName)") }
        guard count.contains(items.count) else {
            throw fail(path, "must have \(count.lowerBound) to \(count.upperBound) entries, not \(items.count)")
        }
        return items
    }

    func identifier(_ json: JSON?, _ path: String, extra: String) throws(ScenarioError) -> String {
        let value = try string(json, path)
        let allowed = Set("abcdefghijklmnopqrstuvwxyz0123456789-" + extra)
        guard (1...64).contains(value.count), value.allSatisfy({ allowed.contains($0) }) else {
            // Each extra character quoted on its own: "'._'" read as one string of three.
            let listed = (["a-z", "0-9", "'-'"] + extra.map { "'\($0)'" }).joined(separator: ", ")
            throw fail(path, "must be 1 to 64 characters of \(listed), not \"\(value)\"")
        }
        return value
    }

    static func format(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }

    static let maxSeconds = 7 * 86_400.0

    /// Decodes the whole file, collecting a fault per top-level field and per pool and tenant entry (an entry's
    /// first); the checks across entries (duplicate ids, a pool no tenant uses, the headline's tier) run on the
    /// entries that decoded, those that need every entry only when all did. Throws the first fault with the rest in
    /// ``ScenarioError/more``, in file order: by where the top-level field they are about stands in the file (a
    /// missing one first), then as found.
    func scenario(_ json: JSON) throws(ScenarioError) -> Scenario {
        var problems: [ScenarioError] = []
        func check<T>(_ body: () throws(ScenarioError) -> T) -> T? {
            do { return try body() } catch {
                problems.append(error)
                return nil
            }
        }
        let keys = [
            "name", "description", "headline", "duration_s", "sample_interval_s", "gateways", "policy", "pools",
            "tenants",
        ]
        let required = ["name", "description", "headline", "duration_s", "pools", "tenants"]
        guard let root = json.objectValue else { throw fail("", "must be an object, not \(json.typeName)") }
        for key in root.keys where !keys.contains(key) {
            problems.append(fail(key, "unknown field (allowed: \(keys.joined(separator: ", ")))"))
        }
        for key in required where root[key] == nil { problems.append(fail(key, "missing")) }
        /// A required field's value, decoded; nil when it is missing (reported above) or at fault (reported now).
        func field<T>(_ key: String, _ body: (JSON) throws(ScenarioError) -> T) -> T? {
            guard let value = root[key] else { return nil }
            return check { () throws(ScenarioError) in try body(value) }
        }
        let name = field("name") { json throws(ScenarioError) in try identifier(json, "name", extra: "") }
        let description = field("description") { json throws(ScenarioError) in
            let text = try string(json, "description")
            // What it models is the one thing a reader of the report has to go on.
            guard !text.allSatisfy(\.isWhitespace) else { throw fail("description", "must not be empty") }
            return text
        }
        // Whole seconds, as documented: the run and its intervals are counted in them (timeline.csv's `t_s`).
        let duration = field("duration_s") { json throws(ScenarioError) in
            Double(try integer(json, "duration_s", 60...86_400))
        }
        // When the duration itself is at fault nothing is judged against it: no error that follows from it.
        let judged = duration ?? .infinity
        let interval = check { () throws(ScenarioError) in
            let interval = Double(try integer(root["sample_interval_s"], "sample_interval_s", 1...300, default: 10))
            guard interval <= judged / 2 else {
                throw fail(
                    "sample_interval_s",
                    "must be at most half of duration_s (\(Self.format(judged / 2))), not \(Self.format(interval)): "
                        + "the metrics need at least two intervals")
            }
            return interval
        }
        let gateways = check { () throws(ScenarioError) in try integer(root["gateways"], "gateways", 1...32, default: 3)
        }
        var tick: Double?
        if let policy = root["policy"] {
            _ = check { () throws(ScenarioError) in
                // Its fields in file order, the first fault reported: an unknown field after a tick out of range hid
                // the range (outside evaluation round 44, L10a).
                guard let fields = policy.objectValue else {
                    _ = try object(policy, "policy", keys: ["tick_interval_s"], required: [])
                    return
                }
                for key in fields.keys {
                    guard key == "tick_interval_s" else {
                        throw fail("policy." + key, "unknown field (allowed: tick_interval_s)")
                    }
                    tick = try number(fields[key], "policy.tick_interval_s", 1...60)
                }
            }
        }
        var pools: [ScenarioPool] = []
        var poolIndices: [Int] = []  // each decoded pool's position in the file
        // Every entry's id as written, decoded or not: a tenant on a pool whose entry is at fault is not also told the
        // pool is unknown; nil when the `pools` array itself is at fault (missing, empty, too long): then no tenant
        // is (`unknown pool "p" (pools: )` on every tenant said nothing the array's own fault had not).
        var poolIDs: Set<String>?
        if let items = field("pools", { json throws(ScenarioError) in try array(json, "pools", count: 1...8) }) {
            poolIDs = Set(items.compactMap { $0["id"]?.stringValue })
            var seenPools = Set<String>()
            for (index, json) in items.enumerated() {
                // A pool at fault is left out; its fault keeps the file from being used.
                guard
                    let pool = check({ () throws(ScenarioError) in
                        try self.pool(json, "pools[\(index)]", duration: judged)
                    })
                else { continue }
                if !seenPools.insert(pool.id).inserted {
                    problems.append(fail("pools[\(index)].id", "duplicate pool id \"\(pool.id)\""))
                }
                pools.append(pool)
                poolIndices.append(index)
            }
        }
        var tenants: [ScenarioTenant] = []
        // Per tenant after `count`: the entry it came from, so that an error (or a warning) can name the entries,
        // not the ids.
        var entries: [ScenarioTenantEntry] = []
        var tenantsComplete = false
        if let items = field("tenants", { json throws(ScenarioError) in try array(json, "tenants", count: 1...1000) }) {
            tenantsComplete = true
            for (index, json) in items.enumerated() {
                guard
                    let expanded = check({ () throws(ScenarioError) in
                        try tenant(json, "tenants[\(index)]", pools: poolIDs, tiers: tiers, duration: judged)
                    })
                else {
                    tenantsComplete = false
                    continue
                }
                let entry = ScenarioTenantEntry(index: index, id: json["id"]?.stringValue ?? "", count: expanded.count)
                tenants += expanded
                entries += Array(repeating: entry, count: expanded.count)
            }
        }
        if tenantsComplete {
            let used = Set(tenants.map(\.pool))
            for (index, pool) in zip(poolIndices, pools) where !used.contains(pool.id) {
                problems.append(fail("pools[\(index)].id", "no tenant uses pool \"\(pool.id)\""))
            }
        }
        if tenants.count > 1000 {
            problems.append(fail("tenants", "\(tenants.count) tenants after expanding count, more than 1000"))
        }
        // Past the limit the ids are not judged (up to a million of them, and the file is refused anyway).
        // A tenant may call several pools (one entry per pool, as Allot keys a tenant per upstream), with one tier.
        var seenTenants: [String: Int] = [:]
        var firstEntry: [String: (tier: String, pool: String, position: Int, group: String?)] = [:]
        var duplicated = Set<[Int]>()  // pairs of entries already reported (two of `count` overlap in many ids)
        var conflicting = Set<[Int]>()  // pairs of entries whose tiers are already reported (once, not per id)
        for (position, tenant) in tenants.enumerated() where tenants.count <= 1000 {
            let key = tenant.id + "\u{1}" + tenant.pool
            if let first = seenTenants[key] {
                if duplicated.insert([entries[first].index, entries[position].index]).inserted {
                    problems.append(
                        fail(
                            "tenants[\(entries[position].index)].id",
                            "duplicate tenant id \"\(tenant.id)\" on pool \"\(tenant.pool)\", from "
                                + "\(entries[first].label) and \(entries[position].label): a tenant id is unique "
                                + "per pool after expanding count"))
                }
            } else {
                seenTenants[key] = position
            }
            // On one pool the two are duplicates, reported above (outside evaluation round 44, L10: "tier … on pool
            // "x" and tier … on pool "x"" followed the duplicate).
            if let first = firstEntry[tenant.id], first.pool != tenant.pool, first.tier != tenant.tier,
                conflicting.insert([entries[first.position].index, entries[position].index]).inserted
            {
                problems.append(
                    fail(
                        "tenants",
                        "tenant \"\(tenant.id)\" has tier \"\(first.tier)\" on pool \"\(first.pool)\" and tier "
                            + "\"\(tenant.tier)\" on pool \"\(tenant.pool)\": a tenant has one tier"))
            }
            if let first = firstEntry[tenant.id], first.pool != tenant.pool, first.group != tenant.group,
                conflicting.insert([entries[first.position].index, entries[position].index, -1]).inserted
            {
                func name(_ group: String?) -> String { group.map { "group \"\($0)\"" } ?? "no group" }
                problems.append(
                    fail(
                        "tenants",
                        "tenant \"\(tenant.id)\" has \(name(first.group)) on pool \"\(first.pool)\" and "
                            + "\(name(tenant.group)) on pool \"\(tenant.pool)\": a tenant has one group"))
            }
            if firstEntry[tenant.id] == nil {
                firstEntry[tenant.id] = (tenant.tier, tenant.pool, position, tenant.group)
            }
        }
        let headline = field("headline") { json throws(ScenarioError) in
            try self.headline(json, "headline", tiers: tiers)
        }
        if let tier = headline?.tier, tenantsComplete, !tenants.contains(where: { $0.tier == tier }) {
            let used = Set(tenants.map(\.tier)).sorted().joined(separator: ", ")
            problems.append(fail("headline.tier", "no tenant has tier \"\(tier)\" (the tenants' tiers: \(used))"))
        }
        guard problems.isEmpty, let name, let description, let headline, let duration, let interval, let gateways
        else {
            // File order: by the top-level field each fault is about (a missing one first), then as found.
            let positions = Dictionary(uniqueKeysWithValues: root.keys.enumerated().map { ($0.element, $0.offset) })
            func position(_ fault: ScenarioError) -> Int {
                let key = fault.path.prefix { $0 != "." && $0 != "[" }
                return positions[String(key)] ?? -1
            }
            let ordered = problems.enumerated().sorted {
                (position($0.element), $0.offset) < (position($1.element), $1.offset)
            }.map(\.element)
            var first = ordered.first ?? fail("", "not a scenario")
            first.more = Array(ordered.dropFirst())
            throw first
        }
        return Scenario(
            name: name, description: description, headline: headline, durationSeconds: duration,
            sampleIntervalSeconds: interval, gateways: gateways, tickIntervalSeconds: tick, pools: pools,
            tenants: tenants, tenantEntries: entries)
    }

    func headline(_ json: JSON?, _ path: String, tiers: Set<String>) throws(ScenarioError) -> ScenarioHeadline {
        let object = try object(json, path, keys: ["metric", "tier", "better"], required: ["metric"])
        let metric = try string(object["metric"], path + ".metric")
        guard object["better"] != nil else {
            let natural = ScenarioHeadline.higherIsBetter.contains(metric) ? "higher" : "lower"
            throw fail(path + ".better", "missing: \"lower\" or \"higher\" (\(metric) is better \(natural))")
        }
        let better = try string(object["better"], path + ".better")
        guard better == "lower" || better == "higher" else {
            throw fail(path + ".better", "must be \"lower\" or \"higher\", not \"\(better)\"")
        }
        var tier: String?
        if let json = object["tier"], !json.isNull { tier = try string(json, path + ".tier") }
        if ScenarioHeadline.tierMetrics.contains(metric) {
            guard let tier else { throw fail(path + ".tier", "missing: \(metric) is measured per tier") }
            guard tiers.contains(tier) else {
                throw fail(
                    path + ".tier", "unknown tier \"\(tier)\" (tiers: \(tiers.sorted().joined(separator: ", ")))")
            }
        } else if ScenarioHeadline.globalMetrics.contains(metric) {
            if tier != nil { throw fail(path + ".tier", "\(metric) is not a per-tier metric") }
        } else {
            throw fail(
                path + ".metric",
                "unknown metric \"\(metric)\" (one of \((ScenarioHeadline.globalMetrics + ScenarioHeadline.tierMetrics).joined(separator: ", ")))"
            )
        }
        let natural = ScenarioHeadline.higherIsBetter.contains(metric)
        guard natural == (better == "higher") else {
            throw fail(path + ".better", "\(metric) is better \(natural ? "higher" : "lower"), not \(better)")
        }
        return ScenarioHeadline(metric: metric, tier: tier, higherIsBetter: better == "higher")
    }

    func pool(_ json: JSON, _ path: String, duration: Double) throws(ScenarioError) -> ScenarioPool {
        let object = try object(
            json, path,
            keys: [
                "id", "provider", "declared_rpm", "declared_tpm", "capacity", "latency", "latency_warning_s",
                "overload", "noise",
            ],
            required: ["id", "provider", "declared_rpm", "declared_tpm", "capacity"])
        let id = try identifier(object["id"], path + ".id", extra: "./_")
        let providerName = try string(object["provider"], path + ".provider")
        guard let provider = ProviderStyle(rawValue: providerName) else {
            throw fail(
                path + ".provider",
                "must be \"openai\" or \"anthropic\", not \"\(providerName)\" (a provider that states no limit, "
                    + "like Google's: either, with \"noise\": {\"header_missing\": 1})")
        }
        let declaredRPM = try number(object["declared_rpm"], path + ".declared_rpm", 1...10_000_000)
        let declaredTPM = try number(object["declared_tpm"], path + ".declared_tpm", 1...10_000_000_000)
        var steps: [CapacityStep] = []
        for (index, json) in try array(object["capacity"], path + ".capacity", count: 1...1000).enumerated() {
            let stepPath = "\(path).capacity[\(index)]"
            let step = try self.object(json, stepPath, keys: ["at_s", "rpm", "tpm"], required: ["at_s", "rpm", "tpm"])
            let at = try number(step["at_s"], stepPath + ".at_s", 0...Self.maxSeconds)
            if index == 0, at != 0 { throw fail(stepPath + ".at_s", "the first capacity step must start at 0") }
            try after(steps.last?.at, at, stepPath + ".at_s")
            try before(duration, at, stepPath + ".at_s")
            steps.append(
                CapacityStep(
                    at: at, rpm: try number(step["rpm"], stepPath + ".rpm", 1...10_000_000),
                    tpm: try number(step["tpm"], stepPath + ".tpm", 1...10_000_000_000)))
        }
        var latency = LatencyModel()
        if let json = object["latency"] {
            let lp = path + ".latency"
            let l = try self.object(
                json, lp, keys: ["base_ms", "per_1k_output_tokens_ms", "knee", "max_factor"], required: [])
            latency.baseMs = try number(l["base_ms"], lp + ".base_ms", 1...600_000, default: latency.baseMs)
            latency.perThousandOutputTokensMs = try number(
                l["per_1k_output_tokens_ms"], lp + ".per_1k_output_tokens_ms", 0...600_000,
                default: latency.perThousandOutputTokensMs)
            latency.knee = try number(l["knee"], lp + ".knee", 0...1, default: latency.knee)
            latency.maxFactor = try number(l["max_factor"], lp + ".max_factor", 1...100, default: latency.maxFactor)
        }
        let warning = try number(object["latency_warning_s"], path + ".latency_warning_s", 0...3600, default: 0)
        // A warning longer than the run would start before it: the author has mistaken the unit or the field.
        guard warning <= duration else {
            throw fail(
                path + ".latency_warning_s",
                "must be at most duration_s (\(Self.format(duration))), not \(Self.format(warning))")
        }
        var overload: [OverloadWindow] = []
        if let json = object["overload"] {
            for (index, json) in try array(json, path + ".overload", count: 0...1000).enumerated() {
                let wp = "\(path).overload[\(index)]"
                let w = try self.object(
                    json, wp, keys: ["from_s", "to_s", "rate"], required: ["from_s", "to_s", "rate"])
                let from = try number(w["from_s"], wp + ".from_s", 0...Self.maxSeconds)
                let to = try number(w["to_s"], wp + ".to_s", 0...Self.maxSeconds)
                guard to > from else {
                    throw fail(
                        wp + ".to_s",
                        "must be after from_s (\(Self.format(from))), not \(Self.format(to))")
                }
                try before(duration, from, wp + ".from_s")
                // Overlapping windows would each draw their own chance, 1 − (1 − a)(1 − b) in effect, which no
                // author means: one rate at a time. A window may start where another ends (`[from_s, to_s)`).
                if let other = overload.firstIndex(where: { $0.from < to && from < $0.to }) {
                    throw fail(
                        wp,
                        "overlaps \(path).overload[\(other)] (from_s \(Self.format(overload[other].from)), to_s "
                            + "\(Self.format(overload[other].to))): windows must not overlap (one rate at a time)")
                }
                let rate = try number(w["rate"], wp + ".rate", 0...1)
                guard rate > 0 else { throw fail(wp + ".rate", "must be above 0 (a window of rate 0 refuses nothing)") }
                overload.append(OverloadWindow(from: from, to: to, rate: rate))
            }
        }
        var jitter = 0.0
        var missing = 0.0
        if let json = object["noise"] {
            let np = path + ".noise"
            let n = try self.object(json, np, keys: ["header_jitter", "header_missing"], required: [])
            jitter = try number(n["header_jitter"], np + ".header_jitter", 0...1, default: 0)
            missing = try number(n["header_missing"], np + ".header_missing", 0...1, default: 0)
            guard jitter == 0 || missing < 1 else {
                throw fail(
                    np + ".header_jitter",
                    "must be 0 when header_missing is 1 (no answer carries a header to jitter), not "
                        + Self.format(jitter))
            }
        }
        return ScenarioPool(
            id: id, provider: provider, declaredRPM: declaredRPM, declaredTPM: declaredTPM, capacity: steps,
            latency: latency, latencyWarningSeconds: warning, overload: overload, headerJitter: jitter,
            headerMissing: missing)
    }

    /// A time inside the run: a step at or after `duration_s` would never happen.
    /// A step's `at_s` after the previous step's (steps in time order).
    func after(_ previous: Double?, _ at: Double, _ path: String) throws(ScenarioError) {
        guard let previous, at <= previous else { return }
        throw fail(path, "must be after the previous step's at_s (\(Self.format(previous))), not \(Self.format(at))")
    }

    func before(_ duration: Double, _ at: Double, _ path: String) throws(ScenarioError) {
        guard at < duration else {
            throw fail(
                path,
                "must be before duration_s (\(Self.format(duration))), not \(Self.format(at)): it would never happen")
        }
    }

    func tenant(_ json: JSON, _ path: String, pools: Set<String>?, tiers: Set<String>, duration: Double)
        throws(ScenarioError)
        -> [ScenarioTenant]
    {
        let object = try object(
            json, path,
            keys: [
                "id", "count", "tier", "pool", "arrivals", "task", "task_changes", "behaviour", "max_retries",
                "static_quota", "group",
            ],
            required: ["id", "tier", "pool", "arrivals", "task"])
        let id = try identifier(object["id"], path + ".id", extra: "._")
        let count = try integer(object["count"], path + ".count", 1...1000, default: 1)
        let tier = try string(object["tier"], path + ".tier")
        guard tiers.contains(tier) else {
            throw fail(path + ".tier", "unknown tier \"\(tier)\" (tiers: \(tiers.sorted().joined(separator: ", ")))")
        }
        let pool = try string(object["pool"], path + ".pool")
        if let pools, !pools.contains(pool) {
            throw fail(path + ".pool", "unknown pool \"\(pool)\" (pools: \(pools.sorted().joined(separator: ", ")))")
        }
        var arrivals: [ArrivalStep] = []
        for (index, json) in try array(object["arrivals"], path + ".arrivals", count: 1...1000).enumerated() {
            let ap = "\(path).arrivals[\(index)]"
            let a = try self.object(json, ap, keys: ["at_s", "tasks_per_min"], required: ["at_s", "tasks_per_min"])
            let at = try number(a["at_s"], ap + ".at_s", 0...Self.maxSeconds)
            try after(arrivals.last?.at, at, ap + ".at_s")
            try before(duration, at, ap + ".at_s")
            arrivals.append(
                ArrivalStep(at: at, tasksPerMinute: try number(a["tasks_per_min"], ap + ".tasks_per_min", 0...100_000)))
        }
        // Like a pool no tenant uses: a tenant that never sends anything tells no story (and has no demand to judge).
        guard arrivals.contains(where: { $0.tasksPerMinute > 0 }) else {
            throw fail(path + ".arrivals", "every rate is 0: the tenant never sends a task")
        }
        let task = try taskShape(object["task"], path + ".task")
        var changes: [TaskChange] = []
        if let json = object["task_changes"] {
            for (index, json) in try array(json, path + ".task_changes", count: 1...100).enumerated() {
                let cp = "\(path).task_changes[\(index)]"
                let previous = changes.last?.task ?? task
                let change = try taskChange(json, cp, from: previous)
                guard change.at > 0 else {
                    throw fail(cp + ".at_s", "must be above 0: the shape at 0 is the tenant's task")
                }
                try after(changes.last?.at, change.at, cp + ".at_s")
                try before(duration, change.at, cp + ".at_s")
                changes.append(change)
            }
        }
        var behaviour = TenantBehaviour.honest
        if let json = object["behaviour"] {
            let name = try string(json, path + ".behaviour")
            guard let value = TenantBehaviour(rawValue: name) else {
                throw fail(path + ".behaviour", "must be \"honest\" or \"gaming\", not \"\(name)\"")
            }
            behaviour = value
        }
        let retries = try integer(object["max_retries"], path + ".max_retries", 0...100, default: 6)
        // The policy's rule for a group.
        var group: String?
        if let json = object["group"] {
            let name = try string(json, path + ".group")
            guard TenantPolicy.isValidGroup(name) else {
                throw fail(
                    path + ".group",
                    "must be 1 to 128 characters of A-Z, a-z, 0-9, '.', '_', ':', '-', not \"\(name)\"")
            }
            group = name
        }
        var quota: StaticQuota?
        if let json = object["static_quota"] {
            let qp = path + ".static_quota"
            let q = try self.object(json, qp, keys: ["rpm", "tpm"], required: ["rpm", "tpm"])
            quota = StaticQuota(
                rpm: try number(q["rpm"], qp + ".rpm", 1...10_000_000),
                tpm: try number(q["tpm"], qp + ".tpm", 1...10_000_000_000))
        }
        let digits = max(2, String(count).count)
        return (1...count).map { n in
            let suffix = String(repeating: "0", count: digits - String(n).count) + String(n)
            return ScenarioTenant(
                id: count == 1 ? id : "\(id)-\(suffix)", tier: tier, pool: pool, arrivals: arrivals, task: task,
                taskChanges: changes, behaviour: behaviour, maxRetries: retries, staticQuota: quota, group: group)
        }
    }

    func taskShape(_ json: JSON?, _ path: String) throws(ScenarioError) -> TaskShape {
        let object = try object(
            json, path, keys: ["class"] + Self.taskFields,
            required: ["class", "calls", "parallelism", "prompt_tokens", "completion_tokens", "deadline_s"])
        let className = try string(object["class"], path + ".class")
        guard let taskClass = TaskClass(rawValue: className) else {
            throw fail(
                path + ".class",
                "must be one of \(TaskClass.allCases.map(\.rawValue).joined(separator: ", ")), not \"\(className)\"")
        }
        // Every field but `think_ms` is required above, so each is read over these placeholders.
        var shape = TaskShape(
            taskClass: taskClass, minCalls: 1, maxCalls: 1, parallelism: 1, promptTokens: TokenShape(mean: 1, sd: 0),
            completionTokens: TokenShape(mean: 1, sd: 0), deadlineSeconds: 1)
        try readTaskFields(object, path, into: &shape)
        return shape
    }

    /// The fields of `task` a `task_changes` entry may change (all but `class`).
    static let taskFields = ["calls", "parallelism", "prompt_tokens", "completion_tokens", "deadline_s", "think_ms"]

    /// Reads the task fields `object` has into `shape`, each validated (the same ranges in `task` and in
    /// `task_changes`).
    func readTaskFields(_ object: JSONObject, _ path: String, into shape: inout TaskShape) throws(ScenarioError) {
        if let json = object["calls"] {
            let calls = try self.object(json, path + ".calls", keys: ["min", "max"], required: ["min", "max"])
            shape.minCalls = try integer(calls["min"], path + ".calls.min", 1...500)
            shape.maxCalls = try integer(calls["max"], path + ".calls.max", 1...500)
            guard shape.maxCalls >= shape.minCalls else {
                throw fail(path + ".calls.max", "must be at least calls.min (\(shape.minCalls))")
            }
        }
        if let json = object["parallelism"] { shape.parallelism = try integer(json, path + ".parallelism", 1...500) }
        if let json = object["prompt_tokens"] { shape.promptTokens = try tokens(json, path + ".prompt_tokens") }
        if let json = object["completion_tokens"] {
            shape.completionTokens = try tokens(json, path + ".completion_tokens")
        }
        if let json = object["deadline_s"] {
            shape.deadlineSeconds = try number(json, path + ".deadline_s", 1...Self.maxSeconds)
        }
        if let json = object["think_ms"] {
            shape.thinkSeconds = try number(json, path + ".think_ms", 0...3_600_000) / 1000
        }
    }

    /// One of `task_changes`: `at_s` and the task fields that change from `previous` (any of them but `class`; at
    /// least one), each validated as in `task`.
    func taskChange(_ json: JSON, _ path: String, from previous: TaskShape) throws(ScenarioError) -> TaskChange {
        if json.objectValue?["class"] != nil {
            throw fail(path + ".class", "a tenant's task class does not change: give the other class another tenant")
        }
        let object = try object(json, path, keys: ["at_s"] + Self.taskFields, required: ["at_s"])
        guard Self.taskFields.contains(where: { object[$0] != nil }) else {
            throw fail(path, "changes nothing: give at least one of \(Self.taskFields.joined(separator: ", "))")
        }
        let at = try number(object["at_s"], path + ".at_s", 0...Self.maxSeconds)
        var shape = previous
        try readTaskFields(object, path, into: &shape)
        return TaskChange(at: at, task: shape)
    }

    func tokens(_ json: JSON?, _ path: String) throws(ScenarioError) -> TokenShape {
        let object = try object(json, path, keys: ["mean", "sd"], required: ["mean"])
        return TokenShape(
            mean: try number(object["mean"], path + ".mean", 1...2_000_000),
            sd: try number(object["sd"], path + ".sd", 0...2_000_000, default: 0))
    }
}

extension CapacityStep {
    /// The capacity the engine allocates in `dimension` at this step, `(1 − safety_margin)` of it (`margin`); nil when
    /// there is none to judge against (0 or not finite).
    func allocable(_ dimension: RateDimension, margin: Double) -> Double? {
        let capacity = (dimension == .rpm ? rpm : tpm) * margin
        return capacity > 0 && capacity.isFinite ? capacity : nil
    }
}
