import AllotCore
import AllotJSON

/// A scenario's results over one or more strategies: `report.json` (SPEC 12's shape and more),
/// the table printed on stdout, and the headline verdict.
public struct SimulationReport: Sendable {
    public var scenario: String
    /// The seed (the first of ``seeds`` for a report over several).
    public var seed: UInt64
    /// The seeds the metrics are the means of; one for a single run.
    public var seeds: [UInt64]
    public var headline: ScenarioHeadline
    /// The runs' traces (empty for a report over several seeds).
    public var traces: [SimulationTrace]
    /// Per strategy; for several seeds the means (``RunMetrics/mean(of:)``).
    public var metrics: [RunMetrics]
    /// Per seed, the strategies' metrics (empty for a single run).
    public var perSeed: [[RunMetrics]]
    /// Which policy `allot` ran with: `report.json`'s `policy` and the table's second line; nil leaves both out.
    public var policy: PolicyProvenance?

    public init(scenario: Scenario, seed: UInt64, traces: [SimulationTrace]) {
        self.scenario = scenario.name
        self.seed = seed
        self.seeds = [seed]
        self.headline = scenario.headline
        self.traces = traces
        self.metrics = traces.map(RunMetrics.init(trace:))
        self.perSeed = []
    }

    /// The strategies that do best on the headline metric, in the order listed: one, or several that tie
    /// exactly (100 % SLO attainment, 0 429s); nil values lose; empty when no strategy has a value, or when one
    /// strategy ran (`--strategy static`: nothing was compared, and "winner static" said it had won).
    public var headlineBest: [String] {
        guard metrics.count > 1 else { return [] }
        var best: [String] = []
        var bestValue: Double?
        for run in metrics {
            guard let value = headlineValue(run) else { continue }
            if let current = bestValue, value == current {
                best.append(run.strategy)
            } else if bestValue.map({ headline.higherIsBetter ? value > $0 : value < $0 }) ?? true {
                best = [run.strategy]
                bestValue = value
            }
        }
        return best
    }

    /// The one strategy that does best on the headline metric; nil on a tie (``headlineBest``) or without
    /// values. Whether `allot` beats every other strategy strictly is ``allotWinsHeadline``.
    public var headlineWinner: String? {
        let best = headlineBest
        return best.count == 1 ? best[0] : nil
    }

    /// "winner allot", "tie: allot, static, equal-split", "winner none", or "one strategy, no comparison".
    var headlineVerdict: String {
        guard metrics.count > 1 else { return "one strategy, no comparison" }
        let best = headlineBest
        return best.count > 1 ? "tie: " + best.joined(separator: ", ") : "winner \(best.first ?? "none")"
    }

    /// The headline value, with "never" (nil latency or convergence) counted as the worst.
    func headlineValue(_ run: RunMetrics) -> Double? {
        run.value(of: headline.metric, tier: headline.tier)
    }

    /// Whether `allot` is strictly better than every baseline on the headline (a baseline with no
    /// value — never converged, no allocation — counts as worse); nil (report.json's `null`) when `allot` did not
    /// run or ran alone.
    public var allotWinsHeadline: Bool? {
        guard let allot = metrics.first(where: { $0.strategy == "allot" }), metrics.count > 1 else { return nil }
        guard let mine = headlineValue(allot) else { return false }
        for other in metrics where other.strategy != "allot" {
            guard let theirs = headlineValue(other) else { continue }
            if headline.higherIsBetter ? !(mine > theirs) : !(mine < theirs) { return false }
        }
        return true
    }

    // MARK: report.json

    /// `report.json`: sorted keys, numbers rounded to 6 significant digits, so the bytes are a
    /// function of the run.
    public func json() -> String {
        var headlineObject: JSONObject = [
            "metric": .string(headline.metric), "better": .string(headline.higherIsBetter ? "higher" : "lower"),
            "tier": headline.tier.map(JSON.string) ?? .null,
            "winner": headlineWinner.map(JSON.string) ?? .null, "best": .array(headlineBest.map(JSON.string)),
        ]
        headlineObject["allot_wins"] = allotWinsHeadline.map(JSON.bool) ?? .null
        var values = JSONObject()
        for run in metrics { values[run.strategy] = Self.number(headlineValue(run)) }
        headlineObject["values"] = .object(values)
        var root: JSONObject = [
            "scenario": .string(scenario), "strategies": Self.strategiesJSON(metrics),
            "headline": .object(headlineObject),
        ]
        if let policy {
            root["policy"] = .object(["source": .string(policy.source), "version": .string(policy.version)])
        }
        if perSeed.isEmpty {
            root["seed"] = .int(Int64(seed))
        } else {
            // Several seeds: "strategies" holds the means; "per_seed" each seed's own.
            root["seeds"] = .array(seeds.map { .int(Int64($0)) })
            root["per_seed"] = .array(
                zip(seeds, perSeed).map { seed, runs in
                    .object(["seed": .int(Int64(seed)), "strategies": Self.strategiesJSON(runs)])
                })
        }
        return JSON.object(root).serializedString(sortedKeys: true, pretty: true) + "\n"
    }

    static func strategiesJSON(_ metrics: [RunMetrics]) -> JSON {
        var strategies = JSONObject()
        for run in metrics {
            var tiers = JSONObject()
            for (name, tier) in run.tiers.sorted(by: { $0.key < $1.key }) {
                tiers[name] = .object([
                    "slo_attainment": Self.number(tier.sloAttainment),
                    "task_latency_p50_s": Self.number(tier.latencyP50),
                    "task_latency_p95_s": Self.number(tier.latencyP95),
                    "task_latency_p99_s": Self.number(tier.latencyP99),
                    "jain": Self.number(tier.jain),
                    "tasks": .int(Int64(tier.tasks)),
                    "allocated_share": Self.number(tier.allocatedShare),
                    "served_share": Self.number(tier.servedShare),
                ])
            }
            var pools = JSONObject()
            for (id, pool) in run.pools.sorted(by: { $0.key < $1.key }) {
                pools[id] = .object([
                    "utilisation": Self.number(pool.utilisation),
                    "upstream_429_rate": Self.number(pool.upstream429Rate),
                    "upstream_attempts": .int(Int64(pool.upstreamAttempts)),
                    "upstream_429s": .int(Int64(pool.upstream429s)),
                ])
            }
            strategies[run.strategy] = .object([
                "utilisation": Self.number(run.utilisation),
                "upstream_429_rate": Self.number(run.upstream429Rate),
                "upstream_attempts": .int(Int64(run.upstreamAttempts)),
                "upstream_429s": .int(Int64(run.upstream429s)),
                "starvation_tenant_minutes": Self.number(run.starvationTenantMinutes),
                "sustained_starvation_tenant_minutes": Self.number(run.sustainedStarvationTenantMinutes),
                "total_variation": Self.number(run.totalVariation),
                "convergence_s": Self.number(run.convergenceSeconds),
                "time_to_first_allocation_s": Self.number(run.timeToFirstAllocation),
                "tiers": .object(tiers),
                // Added beside the overall figures, which stay the whole scenario's.
                "pools": .object(pools),
                // Which tenants the starvation figure is made of (only those with some).
                "starved_tenants": .object(
                    JSONObject(run.starvedTenants.sorted { $0.key < $1.key }.map { ($0.key, Self.number($0.value)) })),
                // Added beside the keys, whose `null` stays: which of them are "never" rather than not applicable.
                "never": .array(run.neverReached.map(JSON.string)),
            ])
        }
        return .object(strategies)
    }

    static func number(_ value: Double?) -> JSON {
        guard let value, value.isFinite else { return .null }
        return .double(round6(value))
    }

    static func round6(_ value: Double) -> Double {
        guard value != 0 else { return 0 }
        let magnitude = (abs(value)).exponentBase10
        let scale = Double.powerOfTen(5 - magnitude)
        return (value * scale).rounded() / scale
    }

    // MARK: the table

    /// One line per strategy: the global metrics, then per tier SLO attainment, p95 latency and Jain; for a
    /// scenario of several pools, then one line per strategy and pool (``poolRows``).
    public func table() -> String {
        let tiers = Array(Set(metrics.flatMap { $0.tiers.keys })).sorted { Self.tierOrder($0) < Self.tierOrder($1) }
        var header = ["strategy", "util", "429 rate", "starved min", "≥5 min", "TV %/min", "converge s", "1st alloc s"]
        for tier in tiers { header += ["\(tier) SLO", "\(tier) p95 s", "\(tier) jain"] }
        var rows = [header]
        for run in metrics {
            var row = [
                run.strategy, Self.percent(run.utilisation), Self.percent(run.upstream429Rate, digits: 2),
                Self.fixed(run.starvationTenantMinutes, 1), Self.fixed(run.sustainedStarvationTenantMinutes, 1),
                Self.fixed(run.totalVariation, 2),
                run.hasCapacityChange ? (run.convergenceSeconds.map { Self.fixed($0, 0) } ?? "never") : "-",
                Self.fixed(run.timeToFirstAllocation, 1),
            ]
            for tier in tiers {
                let t = run.tiers[tier]
                row += [
                    Self.percent(t?.sloAttainment),
                    t?.tasks == 0 ? "-" : (t?.latencyP95.map { Self.fixed($0, 1) } ?? "never"), Self.fixed(t?.jain, 3),
                ]
            }
            rows.append(row)
        }
        var text =
            "scenario \(scenario), \(seedLabel); headline \(headline.label) (\(headline.higherIsBetter ? "higher" : "lower") is better)"
        text += ": \(headlineVerdict)\n"
        if let policy { text += policy.line + "\n" }
        text += Self.aligned(rows, leftColumns: 1)
        let pools = poolRows
        if !pools.isEmpty {
            text += "\n" + Self.aligned([["strategy", "pool", "util", "429 rate"]] + pools, leftColumns: 2)
        }
        return text
    }

    /// Rows of a table, one line each: the first `leftColumns` columns padded on the right, the others on the left,
    /// two spaces apart.
    static func aligned(_ rows: [[String]], leftColumns: Int) -> String {
        var widths = Array(repeating: 0, count: rows.map(\.count).max() ?? 0)
        for row in rows { for (i, cell) in row.enumerated() { widths[i] = max(widths[i], cell.count) } }
        var text = ""
        for row in rows {
            let cells = row.enumerated().map { i, cell in
                i < leftColumns
                    ? cell.padding(toLength: widths[i]) : String(repeating: " ", count: widths[i] - cell.count) + cell
            }
            text += cells.joined(separator: "  ") + "\n"
        }
        return text
    }

    /// Per strategy (in the table's order) and pool (by id): strategy, pool, utilisation, 429 rate — when the
    /// scenario has more than one pool, else none: one pool's figures are the overall ones.
    var poolRows: [[String]] {
        let ids = Set(metrics.flatMap { $0.pools.keys }).sorted()
        guard ids.count > 1 else { return [] }
        return metrics.flatMap { run in
            ids.map { id in
                let pool = run.pools[id]
                return [
                    run.strategy, id, Self.percent(pool?.utilisation),
                    Self.percent(pool?.upstream429Rate, digits: 2),
                ]
            }
        }
    }

    /// "seed 3", or "means over seeds 1-8" / "means over seeds 1, 4, 9".
    var seedLabel: String {
        guard perSeed.count > 0 else { return "seed \(seed)" }
        let contiguous = seeds.count > 2 && zip(seeds, seeds.dropFirst()).allSatisfy { $1 == $0 + 1 }
        let list = contiguous ? "\(seeds[0])-\(seeds[seeds.count - 1])" : seeds.map(String.init).joined(separator: ", ")
        return "means over seeds \(list)"
    }

    static func tierOrder(_ tier: String) -> Int {
        ["critical": 0, "premium": 1, "standard": 2, "free": 3][tier] ?? 9
    }

    static func percent(_ value: Double?, digits: Int = 1) -> String {
        guard let value else { return "-" }
        return fixed(value * 100, digits) + "%"
    }

    static func fixed(_ value: Double?, _ digits: Int) -> String {
        guard let value, value.isFinite else { return "-" }
        let scale = Double.powerOfTen(digits)
        let rounded = (abs(value) * scale).rounded()
        let whole = Int64(rounded / scale)
        let fraction = Int64(rounded - Double(whole) * scale)
        let sign = value < 0 && rounded > 0 ? "-" : ""
        guard digits > 0 else { return sign + String(whole) }
        let fractionText = String(fraction)
        return sign + String(whole) + "." + String(repeating: "0", count: digits - fractionText.count) + fractionText
    }
}

/// The policy a simulation ran with, as `report.json` and the printed table name it.
public struct PolicyProvenance: Sendable, Hashable {
    /// `built-in` (the policies compiled into the binary), or the directory as given to `--policy`.
    public var source: String
    /// The policy's version as `allot serve` names it in snapshots and `/readyz` (`policy_version`: the first
    /// 16 hex digits of the SHA-256 of its canonical form, whatever the file layout).
    public var version: String

    public init(source: String, version: String) {
        self.source = source
        self.version = version
    }

    /// The built-in policies' source name.
    public static let builtIn = "built-in"

    /// `policy built-in, policy_version 0123456789abcdef`.
    public var line: String { "policy \(source), policy_version \(version)" }
}

extension String {
    fileprivate func padding(toLength length: Int) -> String {
        count >= length ? self : self + String(repeating: " ", count: length - count)
    }
}

extension SimulationReport {
    /// The README results table's header (`results.md`).
    public static let markdownHeader = """
        | scenario | headline (better) | strategy | headline value | utilisation | 429 rate | starved tenant-min | of which ≥ 5 min | TV %/min | SLO (all tiers) |
        |---|---|---|---:|---:|---:|---:|---:|---:|---:|
        """

    /// This scenario's rows of the results table, one per strategy; the best on the headline in bold (all of
    /// them on a tie).
    public func markdownRows() -> String {
        let best = Set(headlineBest)
        var text = ""
        for run in metrics {
            let value = headlineValue(run)
            let isRate = ["utilisation", "upstream_429_rate", "slo_attainment"].contains(headline.metric)
            var valueText = isRate ? Self.percent(value, digits: 1) : Self.fixed(value, 2)
            if value == nil,
                ["convergence_s", "task_latency_p50_s", "task_latency_p95_s", "task_latency_p99_s"].contains(
                    headline.metric)
            {
                valueText = "never"
            }
            if best.contains(run.strategy) { valueText = "**\(valueText)**" }
            let judged = run.tiers.values.reduce(0) { $0 + $1.tasks }
            let met = run.tiers.values.reduce(0.0) { $0 + ($1.sloAttainment ?? 0) * Double($1.tasks) }
            text +=
                "| \(scenario) | \(headline.label) (\(headline.higherIsBetter ? "higher" : "lower")) | \(run.strategy) | \(valueText) | "
            text += "\(Self.percent(run.utilisation)) | \(Self.percent(run.upstream429Rate, digits: 2)) | "
            text +=
                "\(Self.fixed(run.starvationTenantMinutes, 1)) | \(Self.fixed(run.sustainedStarvationTenantMinutes, 1)) | "
            text += "\(Self.fixed(run.totalVariation, 2)) | "
            text += "\(judged > 0 ? Self.percent(met / Double(judged)) : "-") |\n"
        }
        return text
    }

    /// `results.md`'s per-pool table, after the rows and a blank line: strategy, pool, utilisation and 429 rate
    /// (``poolRows``); empty for a scenario of one pool. Not part of ``markdownRows()``, which the README's results
    /// table is pasted from (scripts/sim-results stops at the blank line).
    public func markdownPoolTable() -> String {
        let rows = poolRows
        guard !rows.isEmpty else { return "" }
        var text = "\n| strategy | pool | utilisation | 429 rate |\n|---|---|---:|---:|\n"
        for row in rows { text += "| " + row.joined(separator: " | ") + " |\n" }
        return text
    }
}
