import AllotCore
import AllotLoop
import AllotMetrics

/// Prometheus series drawn from the loop's latest reports at every scrape (SPEC 13 operations):
/// upstream capacity (estimated, declared, header, effective), state, attempts by outcome and latency
/// percentiles; tenants (allocation, demand, usage, denials, starvation); gateways and their lag;
/// alerts in force by kind; proposals, overrides and burst credits.
///
/// The loop itself exports tick durations, snapshot versions and watchers; the HTTP layer its
/// requests; the policy watcher its reloads and errors. Rates are per minute like everywhere in
/// Allot (`_per_minute`), latencies in seconds. Per-tenant series are capped to
/// ``tenantSeriesLimit`` tenant × upstream pairs (starved first, then by RPM allocation) so a
/// platform with 10,000 tenants cannot blow up the scrape; the counts by class cover everyone.
enum OperatorMetrics {
    static let tenantSeriesLimit = 50
    static let gatewaySeriesLimit = 200

    private static let families: [(String, String, MetricType, [String])] = [
        (
            "allot_upstream_capacity_estimate_per_minute", "The Observer's capacity estimate C_est.", .gauge,
            ["upstream", "dimension"]
        ),
        (
            "allot_upstream_capacity_declared_per_minute", "Capacity declared by the policy.", .gauge,
            ["upstream", "dimension"]
        ),
        (
            "allot_upstream_capacity_header_limit_per_minute", "Limit reported by the provider's rate-limit headers.",
            .gauge, ["upstream", "dimension"]
        ),
        (
            "allot_upstream_capacity_effective_per_minute", "C = C_est x (1 - safety_margin): what is allocated.",
            .gauge, ["upstream", "dimension"]
        ),
        (
            "allot_upstream_allocated_per_minute", "Sum of published allocations (without burst credits).", .gauge,
            ["upstream", "dimension"]
        ),
        ("allot_upstream_served_per_minute", "Served rate over the short window.", .gauge, ["upstream", "dimension"]),
        (
            "allot_upstream_degraded", "1 while the pool is in degraded mode (floors exceed capacity).", .gauge,
            ["upstream", "dimension"]
        ),
        ("allot_upstream_confidence_ratio", "Confidence in the capacity estimate, 0 to 1.", .gauge, ["upstream"]),
        (
            "allot_upstream_state", "1 for the upstream's current state (healthy, degrading, throttled, overloaded).",
            .gauge, ["upstream", "state"]
        ),
        ("allot_upstream_circuit_open", "1 while the circuit is open (state overloaded).", .gauge, ["upstream"]),
        (
            "allot_upstream_window_attempts", "Attempts in the Observer's short window by outcome (429s: outcome quota_exhausted).",
            .gauge, ["upstream", "outcome"]
        ),
        (
            "allot_upstream_latency_seconds", "Upstream latency percentiles by window (short, long).", .gauge,
            ["upstream", "window", "quantile"]
        ),
        ("allot_tenants", "Tenants by class across upstreams.", .gauge, ["class"]),
        ("allot_tenants_starved", "Tenant x upstream pairs currently starved.", .gauge, []),
        ("allot_tenants_suspect", "Tenant x upstream pairs flagged suspect.", .gauge, []),
        (
            "allot_tenant_allocation_per_minute", "Published allocation (top tenants only).", .gauge,
            ["tenant", "upstream", "dimension"]
        ),
        (
            "allot_tenant_demand_per_minute", "Smoothed demand (top tenants only).", .gauge,
            ["tenant", "upstream", "dimension"]
        ),
        (
            "allot_tenant_usage_per_minute", "Served rate, short window (top tenants only).", .gauge,
            ["tenant", "upstream", "dimension"]
        ),
        (
            "allot_tenant_denied_requests_per_minute", "Requests denied locally by gateways (top tenants only).",
            .gauge, ["tenant", "upstream"]
        ),
        (
            "allot_tenant_starved", "1 while the tenant is starved on the upstream (top tenants only).", .gauge,
            ["tenant", "upstream"]
        ),
        (
            "allot_tenant_series_omitted", "Tenant x upstream pairs left out of the per-tenant series by the cap.",
            .gauge, []
        ),
        ("allot_gateways", "Gateways by state (current, behind, lagging, silent, unknown).", .gauge, ["state"]),
        ("allot_gateway_lag_versions", "Snapshot versions a gateway is behind.", .gauge, ["gateway"]),
        (
            "allot_gateway_lag_seconds", "Seconds since the version a gateway enforces was superseded.", .gauge,
            ["gateway"]
        ),
        (
            "allot_gateway_clock_offset_seconds",
            "A gateway's clock minus Allot's, as its last poll said (Allot-Gateway-Time).", .gauge, ["gateway"]
        ),
        (
            "allot_alerts", "Alerts in force by kind and severity (starved, drift, gateway_lag, degraded_mode, ...).",
            .gauge, ["kind", "severity"]
        ),
        ("allot_proposals", "Engine guardrail proposals by status.", .gauge, ["status"]),
        ("allot_overrides_active", "Tenant x upstream allocations under an operator override.", .gauge, []),
        ("allot_burst_credits_active", "Burst credits in force.", .gauge, []),
    ]

    static func register(_ console: OperatorConsole) {
        let descriptors = families.compactMap {
            try? MetricDescriptor(name: $0.0, help: $0.1, type: $0.2, labelNames: $0.3)
        }
        try? console.metrics.registerCollector(descriptors) { [weak console] in
            guard let console else { return [] }
            return collect(console)
        }
    }

    static func collect(_ console: OperatorConsole) -> [CollectedSample] {
        guard let view = console.view else { return [] }
        console.capacityHistory.withLock { $0.sample(view) }
        var samples: [CollectedSample] = []
        func add(_ family: String, _ labels: [String], _ value: Double?) {
            guard let value, value.isFinite else { return }
            samples.append(CollectedSample(family: family, labelValues: labels, value: value))
        }
        let dimensions = RateDimension.allCases
        for status in view.observer?.upstreams ?? [] {
            let id = status.upstream
            for dimension in dimensions {
                let labels = [id, dimension.rawValue]
                add("allot_upstream_capacity_estimate_per_minute", labels, status.estimate[dimension])
                add("allot_upstream_capacity_declared_per_minute", labels, status.declared[dimension])
                add("allot_upstream_capacity_header_limit_per_minute", labels, status.headerLimit[dimension])
                add("allot_upstream_served_per_minute", labels, status.served[dimension])
            }
            add("allot_upstream_confidence_ratio", [id], status.confidence)
            for state in UpstreamState.allCases {
                add("allot_upstream_state", [id, state.rawValue], state == status.state ? 1 : 0)
            }
            add("allot_upstream_circuit_open", [id], status.circuitOpen ? 1 : 0)
            for (outcome, count) in status.outcomes {
                add("allot_upstream_window_attempts", [id, outcome], Double(count))
            }
            for (window, latency) in [("short", status.latencyShort), ("long", status.latencyLong)] {
                add("allot_upstream_latency_seconds", [id, window, "0.5"], latency.p50.map { $0 / 1000 })
                add("allot_upstream_latency_seconds", [id, window, "0.95"], latency.p95.map { $0 / 1000 })
                add("allot_upstream_latency_seconds", [id, window, "0.99"], latency.p99.map { $0 / 1000 })
            }
        }
        for pool in view.decision?.pools ?? [] {
            for dimension in dimensions {
                let labels = [pool.upstream, dimension.rawValue]
                add("allot_upstream_capacity_effective_per_minute", labels, pool.capacity[dimension])
                add("allot_upstream_allocated_per_minute", labels, pool.allocated[dimension])
                add("allot_upstream_degraded", labels, pool.degraded[dimension] ? 1 : 0)
            }
        }

        let statuses = view.classifier?.statuses ?? []
        var classes: [TenantClass: Int] = [:]
        for status in statuses { classes[status.tenantClass, default: 0] += 1 }
        for tenantClass in TenantClass.allCases {
            add("allot_tenants", [tenantClass.rawValue], Double(classes[tenantClass] ?? 0))
        }
        add("allot_tenants_starved", [], Double(statuses.filter(\.starved).count))
        add("allot_tenants_suspect", [], Double(statuses.filter(\.suspect).count))

        var allocations: [AllocationKey: TenantAllocation] = [:]
        for allocation in view.decision?.allocations ?? [] {
            allocations[AllocationKey(tenant: allocation.tenant, upstream: allocation.upstream)] = allocation
        }
        var keys = Set(allocations.keys)
        var byKey: [AllocationKey: TenantStatus] = [:]
        for status in statuses {
            byKey[status.key] = status
            keys.insert(status.key)
        }
        let ranked = keys.sorted { lhs, rhs in
            let left = (byKey[lhs]?.starved ?? false ? 1 : 0, allocations[lhs]?.published(.rpm)?.rate ?? 0)
            let right = (byKey[rhs]?.starved ?? false ? 1 : 0, allocations[rhs]?.published(.rpm)?.rate ?? 0)
            return left != right ? left > right : lhs < rhs
        }
        for key in ranked.prefix(tenantSeriesLimit) {
            let status = byKey[key]
            let allocation = allocations[key]
            for dimension in dimensions {
                let labels = [key.tenant, key.upstream, dimension.rawValue]
                add("allot_tenant_allocation_per_minute", labels, allocation?.published(dimension)?.rate)
                add("allot_tenant_demand_per_minute", labels, status?.demand[dimension])
                add("allot_tenant_usage_per_minute", labels, status?.servedShort[dimension])
            }
            add("allot_tenant_denied_requests_per_minute", [key.tenant, key.upstream], status?.deniedRPM)
            add("allot_tenant_starved", [key.tenant, key.upstream], status.map { $0.starved ? 1 : 0 })
        }
        add("allot_tenant_series_omitted", [], Double(max(0, ranked.count - tenantSeriesLimit)))

        if let loop = console.loop {
            let gateways = loop.publisher.gatewayStatuses(now: console.clock.now, policy: view.policy)
            var states: [GatewayStatus.State: Int] = [:]
            for gateway in gateways { states[gateway.state, default: 0] += 1 }
            for state in GatewayStatus.State.allCases {
                add("allot_gateways", [state.rawValue], Double(states[state] ?? 0))
            }
            for gateway in gateways.prefix(gatewaySeriesLimit) {
                add("allot_gateway_lag_versions", [gateway.id], gateway.lagVersions.map(Double.init))
                add("allot_gateway_lag_seconds", [gateway.id], gateway.lagSeconds)
                add("allot_gateway_clock_offset_seconds", [gateway.id], gateway.clockOffsetSeconds)
            }
        }
        var alerts: [[String]: Int] = [:]
        for alert in view.alerts + console.lastServiceAlerts.value {
            alerts[[alert.kind, alert.severity.rawValue], default: 0] += 1
        }
        for (labels, count) in alerts { add("allot_alerts", labels, Double(count)) }

        var proposals: [Proposal.Status: Int] = [:]
        for proposal in view.decision?.proposals ?? [] { proposals[proposal.status, default: 0] += 1 }
        for status in Proposal.Status.allCases where status != .expired {
            add("allot_proposals", [status.rawValue], Double(proposals[status] ?? 0))
        }
        add("allot_overrides_active", [], Double(allocations.values.filter { $0.override != nil }.count))
        add("allot_burst_credits_active", [], Double(allocations.values.filter { $0.burstCredit != nil }.count))
        return samples
    }
}
