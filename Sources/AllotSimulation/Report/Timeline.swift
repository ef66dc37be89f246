/// `timeline.csv` and `timeline.svg`: what happened over time, per strategy.
extension SimulationReport {
    /// One row per strategy × interval × (pool or tenant), rates per minute.
    public func timelineCSV() -> String {
        var text =
            "strategy,t_s,kind,id,tier,true_rpm,true_tpm,estimated_rpm,estimated_tpm,demand_rpm,demand_tpm,"
            + "allocation_rpm,allocation_tpm,served_rpm,served_tpm,denials,upstream_429s,upstream_attempts,"
            + "arrived_rpm,arrived_tpm,entitled_rpm,entitled_tpm,pool,upstream_overloaded,held_back,long_queue_waits\n"
        // Four decimals: with two, a few sums over a trailing minute and 70 % crossings of the entitlement could not be
        // recomputed from the file exactly (outside evaluation round 33, L1: 25 of 3,031 values).
        func cell(_ value: Double?) -> String { value.map { Self.fixed($0, 4) } ?? "" }
        for trace in traces {
            let arrived = RunMetrics.arrivedDemand(trace: trace)
            let entitled = RunMetrics.entitlements(trace: trace, arrived: arrived)
            for (k, sample) in trace.samples.enumerated() {
                let t = Self.fixed(sample.start, 0)
                for (index, pool) in sample.pools.enumerated() {
                    // Its tenants' arrived demand summed (what they brought, against the nominal `demand_*`).
                    var poolArrived = (rpm: 0.0, tpm: 0.0)
                    for (tenant, info) in trace.tenants.enumerated() where info.pool == trace.pools[index].id {
                        poolArrived.rpm += arrived.rpm[k][tenant]
                        poolArrived.tpm += arrived.tpm[k][tenant]
                    }
                    text +=
                        "\(trace.strategy),\(t),pool,\(trace.pools[index].id),,\(cell(pool.trueRPM)),\(cell(pool.trueTPM)),"
                    text +=
                        "\(cell(pool.estimatedRPM)),\(cell(pool.estimatedTPM)),\(cell(pool.demandRPM)),\(cell(pool.demandTPM)),"
                    text += ",,\(cell(pool.servedRPM)),\(cell(pool.servedTPM)),,"
                    text += "\(pool.upstream429s),\(pool.upstreamAttempts),"
                    text += "\(cell(poolArrived.rpm)),\(cell(poolArrived.tpm)),,,\(trace.pools[index].id),"
                    text += "\(pool.upstreamOverloaded),,\n"
                }
                for (index, tenant) in sample.tenants.enumerated() {
                    let info = trace.tenants[index]
                    text +=
                        "\(trace.strategy),\(t),tenant,\(info.id),\(info.tier),,,,,\(cell(tenant.demandRPM)),\(cell(tenant.demandTPM)),"
                    text += "\(cell(tenant.allocationRPM)),\(cell(tenant.allocationTPM)),\(cell(tenant.servedRPM)),"
                    text += "\(cell(tenant.servedTPM)),\(tenant.denials),\(tenant.upstream429s),,"
                    text += "\(cell(arrived.rpm[k][index])),\(cell(arrived.tpm[k][index])),"
                    text += "\(cell(entitled.rpm[k][index])),\(cell(entitled.tpm[k][index])),\(info.pool),"
                    text += "\(tenant.upstreamOverloaded),\(tenant.heldBack ? 1 : 0),\(tenant.longQueueWaits)\n"
                }
            }
        }
        return text
    }

    /// `tasks.csv`: every task of every strategy's run, the rows `slo_attainment` and the task latency percentiles
    /// are computed from (`judged` 1: its deadline falls inside the run), times in seconds of the run.
    public func tasksCSV() -> String {
        var text = "strategy,tenant,tier,pool,class,arrival_s,deadline_s,finished_s,latency_s,met_deadline,judged\n"
        for trace in traces {
            for task in trace.tasks {
                let tenant = trace.tenants[task.tenant]
                let finished = task.finished.map { Self.fixed($0, 3) } ?? ""
                let latency = task.finished.map { Self.fixed($0 - task.arrival, 3) } ?? ""
                text += "\(trace.strategy),\(tenant.id),\(tenant.tier),\(tenant.pool),\(task.taskClass),"
                text += "\(Self.fixed(task.arrival, 3)),\(Self.fixed(task.deadline, 3)),\(finished),\(latency),"
                text += "\(task.metSLO ? 1 : 0),\(task.deadline <= trace.durationSeconds ? 1 : 0)\n"
            }
        }
        return text
    }

    /// `tenants.csv`: per strategy and tenant entry (a tenant on two pools has one for each), its first request and
    /// first allocation (seconds of the run, blank for never) and their difference, what
    /// `time_to_first_allocation_s` averages. (Starved tenant-minutes per tenant are report.json's `starved_tenants`.)
    public func tenantsCSV() -> String {
        var text = "strategy,tenant,tier,pool,weight,first_request_s,first_allocation_s,time_to_first_allocation_s\n"
        for trace in traces {
            for tenant in trace.tenants {
                let request = tenant.firstRequestAt.map { Self.fixed($0, 3) } ?? ""
                let allocation = tenant.firstAllocationAt.map { Self.fixed($0, 3) } ?? ""
                var wait = ""
                if let first = tenant.firstRequestAt, let allocated = tenant.firstAllocationAt {
                    wait = Self.fixed(max(0, allocated - first), 3)
                }
                text += "\(trace.strategy),\(tenant.id),\(tenant.tier),\(tenant.pool),\(Self.fixed(tenant.weight, 3)),"
                text += "\(request),\(allocation),\(wait)\n"
            }
        }
        return text
    }

    /// A self-contained SVG: for every pool, one panel per strategy in its binding dimension — the hidden true
    /// capacity, Allot's estimate, the total served, and each tenant's allocation (dashed) and served rate for the
    /// six tenants whose arrivals were largest (the rest summed as "others"). The panels of one pool share their
    /// scale, and a tenant keeps its colour in every panel: the tenants shown and their colours are chosen from
    /// the arrivals, which depend on the seed and not on the strategy.
    public func timelineSVG() -> String {
        let layout = ChartLayout()
        let traces = self.traces.filter { !$0.samples.isEmpty && !$0.pools.isEmpty }
        let pools = traces.first?.pools ?? []
        let height = layout.top + Double(traces.count * pools.count) * layout.panelHeight + 10
        var svg = """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(layout.width))" height="\(Int(height))" \
            viewBox="0 0 \(Int(layout.width)) \(Int(height))" font-family="sans-serif" font-size="11">
            <rect width="100%" height="100%" fill="#ffffff"/>
            <text x="\(layout.left)" y="22" font-size="15" font-weight="bold">\(Self.escape(scenario)) — seed \(seed)</text>

            """
        var panel = 0
        for poolIndex in pools.indices {
            let chart = PoolChart(traces: traces, pool: poolIndex)
            for trace in traces {
                svg += chart.panel(trace, top: layout.top + Double(panel) * layout.panelHeight, layout: layout)
                panel += 1
            }
        }
        svg += "</svg>\n"
        return svg
    }

    /// Whether tokens, not requests, are the scarcer dimension of pool `pool` (an index) over the run.
    static func tokensBind(_ trace: SimulationTrace, pool index: Int = 0) -> Bool {
        var rpm = 0.0
        var tpm = 0.0
        for sample in trace.samples {
            let pool = sample.pools[index]
            if pool.trueRPM > 0 { rpm += pool.demandRPM / pool.trueRPM }
            if pool.trueTPM > 0 { tpm += pool.demandTPM / pool.trueTPM }
        }
        return tpm > rpm
    }

    static func escape(_ text: String) -> String {
        text.replacingAll("&", "&amp;").replacingAll("<", "&lt;").replacingAll(">", "&gt;").replacingAll("\"", "&quot;")
    }

    static func compact(_ value: Double) -> String {
        if value >= 1_000_000 { return fixed(value / 1_000_000, 1) + "M" }
        if value >= 1_000 { return fixed(value / 1_000, 1) + "k" }
        return fixed(value, 0)
    }

    /// A round step for an axis from 0 to `maximum` in about `intervals` steps: 1, 2, 2.5 or 5 times a power of
    /// ten, so the grid lines fall on values a reader can name (a capacity of 1,000 on the "1.0k" line, not below
    /// a line at 1,025 labelled so).
    static func niceStep(_ maximum: Double, intervals: Double = 4) -> Double {
        guard maximum.isFinite, maximum > 0 else { return 1 }
        let raw = maximum / intervals
        var magnitude = 1.0
        while magnitude * 10 <= raw { magnitude *= 10 }
        while magnitude > raw { magnitude /= 10 }
        let step = [1, 2, 2.5, 5, 10].first { $0 * magnitude >= raw } ?? 10
        return step * magnitude
    }

    /// The time axis' step: the first of 10 s … 12 h that gives at most `maximumTicks` intervals (labels on
    /// whole minutes where the run is long enough, not at sixths of it: "6m40s").
    static func timeStep(_ duration: Double, maximumTicks: Double = 8) -> Double {
        let steps: [Double] = [10, 15, 30, 60, 120, 300, 600, 900, 1_200, 1_800, 3_600, 7_200, 10_800, 21_600, 43_200]
        return steps.first { duration / $0 <= maximumTicks } ?? (duration / maximumTicks).rounded(.up)
    }

    static func clock(_ seconds: Double) -> String {
        let total = Int(seconds.rounded())
        return "\(total / 60)m" + (total % 60 == 0 ? "" : "\(total % 60)s")
    }
}

/// The geometry of timeline.svg.
private struct ChartLayout {
    let width = 960.0
    let panelHeight = 260.0
    let left = 70.0
    let right = 190.0
    let top = 40.0
    var plotWidth: Double { width - left - right }
    var plotHeight: Double { panelHeight - 60 }
}

/// What every strategy's panel of one pool shares: the dimension, the tenants drawn and their colours (chosen by
/// arrivals, which depend on the seed and not on the strategy), and the scale.
private struct PoolChart {
    /// No red among the tenants: it is the estimate's.
    static let palette = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2"]

    let pool: Int
    let id: String
    let useTPM: Bool
    let shown: [Int]
    let others: [Int]
    /// The top of the value axis, and the value between its grid lines (round numbers).
    let maxValue: Double
    let step: Double

    init(traces: [SimulationTrace], pool: Int) {
        let reference = traces[0]
        let useTPM = SimulationReport.tokensBind(reference, pool: pool)
        let id = reference.pools[pool].id
        let members = reference.tenants.indices.filter { reference.tenants[$0].pool == id }
        let arrived = members.map { m in
            reference.samples.reduce(0.0) { $0 + (useTPM ? $1.tenants[m].arrivedTPM : $1.tenants[m].arrivedRPM) }
        }
        let ranked = zip(members, arrived).sorted { $0.1 != $1.1 ? $0.1 > $1.1 : $0.0 < $1.0 }.map(\.0)
        self.pool = pool
        self.id = id
        self.useTPM = useTPM
        shown = Array(ranked.prefix(Self.palette.count))
        others = Array(ranked.dropFirst(Self.palette.count))
        var maxValue = 1.0
        for trace in traces {
            for sample in trace.samples {
                let p = Self.pick(sample.pools[pool], useTPM)
                maxValue = max(maxValue, p.truth, p.served, p.estimate ?? 0)
                for m in shown {
                    maxValue = max(
                        maxValue, (useTPM ? sample.tenants[m].allocationTPM : sample.tenants[m].allocationRPM) ?? 0)
                }
            }
        }
        // Room above the highest line, up to the next round grid line.
        step = SimulationReport.niceStep(maxValue * 1.05)
        self.maxValue = (maxValue * 1.05 / step).rounded(.up) * step
    }

    static func pick(_ sample: PoolSample, _ useTPM: Bool) -> (truth: Double, estimate: Double?, served: Double) {
        useTPM
            ? (sample.trueTPM, sample.estimatedTPM, sample.servedTPM)
            : (sample.trueRPM, sample.estimatedRPM, sample.servedRPM)
    }

    /// One strategy's panel, its top at `y0`.
    func panel(_ trace: SimulationTrace, top y0: Double, layout: ChartLayout) -> String {
        let fixed = SimulationReport.fixed
        let left = layout.left
        let plotWidth = layout.plotWidth
        let plotHeight = layout.plotHeight
        let maxValue = self.maxValue
        let useTPM = self.useTPM
        let duration = trace.durationSeconds
        func x(_ t: Double) -> Double { left + plotWidth * t / duration }
        func y(_ v: Double) -> Double { y0 + 20 + plotHeight * (1 - min(v, maxValue) / maxValue) }
        func path(_ values: [Double?]) -> String {
            var d = ""
            var pen = false
            for (k, value) in values.enumerated() {
                guard let value else {
                    pen = false
                    continue
                }
                let t = trace.samples[k].start + trace.sampleIntervalSeconds / 2
                d += (pen ? " L" : " M") + fixed(x(t), 1) + " " + fixed(y(value), 1)
                pen = true
            }
            return d
        }
        let unit = useTPM ? "tokens/min" : "requests/min"
        var svg = "<text x=\"\(left)\" y=\"\(fixed(y0 + 14, 1))\" font-size=\"13\" font-weight=\"bold\">"
        svg += "\(SimulationReport.escape(trace.strategy)) — \(SimulationReport.escape(id)), \(unit)</text>\n"
        // Axes and grid.
        for i in 0...Int((maxValue / step).rounded()) {
            let v = step * Double(i)
            let yy = fixed(y(v), 1)
            svg += "<line x1=\"\(left)\" y1=\"\(yy)\" x2=\"\(fixed(left + plotWidth, 1))\" y2=\"\(yy)\" stroke=\"#e5e5e5\"/>"
            svg +=
                "<text x=\"\(fixed(left - 6, 1))\" y=\"\(yy)\" text-anchor=\"end\" dy=\"4\">\(SimulationReport.compact(v))</text>\n"
        }
        let every = SimulationReport.timeStep(duration)
        for i in 0...Int((duration / every).rounded(.down)) {
            let t = every * Double(i)
            svg +=
                "<text x=\"\(fixed(x(t), 1))\" y=\"\(fixed(y0 + 20 + plotHeight + 14, 1))\" text-anchor=\"middle\">\(SimulationReport.clock(t))</text>\n"
        }
        svg +=
            "<rect x=\"\(left)\" y=\"\(fixed(y0 + 20, 1))\" width=\"\(fixed(plotWidth, 1))\" height=\"\(fixed(plotHeight, 1))\" fill=\"none\" stroke=\"#999\"/>\n"
        var legend: [(String, String)] = []
        var allocationsDrawn = false
        // Tenants: served solid thin, allocation dashed.
        for (i, m) in shown.enumerated() {
            let color = Self.palette[i]
            let served = trace.samples.map { Optional(useTPM ? $0.tenants[m].servedTPM : $0.tenants[m].servedRPM) }
            let allocation = trace.samples.map { useTPM ? $0.tenants[m].allocationTPM : $0.tenants[m].allocationRPM }
            svg += "<path d=\"\(path(served))\" fill=\"none\" stroke=\"\(color)\" stroke-width=\"1.2\" opacity=\"0.8\"/>\n"
            if allocation.contains(where: { $0 != nil }) {
                allocationsDrawn = true
                svg +=
                    "<path d=\"\(path(allocation))\" fill=\"none\" stroke=\"\(color)\" stroke-width=\"1\" stroke-dasharray=\"4 3\"/>\n"
            }
            legend.append((color, trace.tenants[m].id + " (" + trace.tenants[m].tier + ")"))
        }
        if !others.isEmpty {
            let served = trace.samples.map { sample in
                Optional(others.reduce(0.0) { $0 + (useTPM ? sample.tenants[$1].servedTPM : sample.tenants[$1].servedRPM) })
            }
            svg += "<path d=\"\(path(served))\" fill=\"none\" stroke=\"#17becf\" stroke-width=\"1.2\"/>\n"
            legend.append(("#17becf", "\(others.count) others (sum)"))
        }
        let pool = trace.samples.map { Self.pick($0.pools[self.pool], useTPM) }
        svg += "<path d=\"\(path(pool.map { $0.served }))\" fill=\"none\" stroke=\"#000000\" stroke-width=\"1.5\" opacity=\"0.55\"/>\n"
        svg += "<path d=\"\(path(pool.map { $0.truth }))\" fill=\"none\" stroke=\"#000000\" stroke-width=\"2.5\"/>\n"
        var head = [("#000000", "true capacity (hidden)")]
        if pool.contains(where: { $0.estimate != nil }) {
            svg +=
                "<path d=\"\(path(pool.map(\.estimate)))\" fill=\"none\" stroke=\"#d62728\" stroke-width=\"2\" stroke-dasharray=\"6 3\"/>\n"
            head.append(("#d62728", "Allot's estimate (dashed)"))
        }
        head.append(("#737373", "served, all tenants"))
        legend = head + legend + (allocationsDrawn ? [("#999999", "dashed: tenant allocation")] : [])
        for (i, item) in legend.enumerated() {
            let ly = y0 + 28 + Double(i) * 15
            let lx = left + plotWidth + 12
            svg += "<rect x=\"\(fixed(lx, 1))\" y=\"\(fixed(ly - 8, 1))\" width=\"12\" height=\"3\" fill=\"\(item.0)\"/>"
            svg += "<text x=\"\(fixed(lx + 18, 1))\" y=\"\(fixed(ly, 1))\">\(SimulationReport.escape(item.1))</text>\n"
        }
        return svg
    }
}

extension String {
    fileprivate func replacingAll(_ target: Character, _ replacement: String) -> String {
        var result = ""
        for character in self { if character == target { result += replacement } else { result.append(character) } }
        return result
    }
}
