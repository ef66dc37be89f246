import AllotCore
import AllotLoop
import AllotStore

/// Every tenant the service knows, with what the loop last said about it: the rows of
/// `GET /v1/tenants` and the dashboard's tenant table.
///
/// Tenants come from four places: the telemetry registry (every tenant that ever reported), the
/// policy's assignments, the loop's latest reports and decision, and the overrides in force. Per
/// upstream figures are summed over the tenant's upstreams; `reason` is the reason on the upstream
/// where it holds the largest RPM allocation.
struct TenantSummary: Sendable {
    var id: String
    var tier: String
    var priority: Int
    /// The policy's `group` for the tenant (one customer's keys), nil for none.
    var group: String?
    /// The most pressing class across its upstreams (sustained_over, bursting, cold_start, steady,
    /// idle), nil when the Classifier has not seen it.
    var tenantClass: TenantClass?
    var suspect = false
    var upstreams: [String] = []
    var demand = PerDimension<Double>(0)
    var usage = PerDimension<Double>(0)
    var denied: Double = 0
    var allocation = PerDimension<Double?>(nil)
    var reason: PerDimension<AllocationReason?> = PerDimension(nil)
    var reasons: Set<String> = []
    var alerts: Set<String> = []
    var starved = false
    var override = false
    var burstCredit = false
    var deny: String?
    var firstSeen: Double?
    var lastSeen: Double?

    /// Severity order of classes for the summary class.
    static func rank(_ tenantClass: TenantClass) -> Int {
        switch tenantClass {
        case .sustainedOver: 4
        case .bursting: 3
        case .coldStart: 2
        case .steady: 1
        case .idle: 0
        }
    }
}

/// Indexes of the loop's latest view by tenant, built once per request.
struct TenantDirectory: Sendable {
    var summaries: [String: TenantSummary] = [:]
    var statuses: [String: [TenantStatus]] = [:]
    var allocations: [String: [TenantAllocation]] = [:]
    var alerts: [String: [LoopAlert]] = [:]

    init(
        view: LoopView?, policy: Policy, registry: [AllotStore.TenantRecord], overrides: [StoredOverride]
    ) {
        if let view {
            for status in view.classifier?.statuses ?? [] { statuses[status.key.tenant, default: []].append(status) }
            for allocation in view.decision?.allocations ?? [] {
                allocations[allocation.tenant, default: []].append(allocation)
            }
            for alert in view.alerts { if let tenant = alert.tenant { alerts[tenant, default: []].append(alert) } }
        }
        var ids = Set(statuses.keys).union(allocations.keys)
        for record in registry { ids.insert(record.id) }
        for tenant in policy.tenants { ids.insert(tenant.id) }
        let overridden = Set(overrides.map(\.override.tenant))
        ids.formUnion(overridden)
        let seen = Dictionary(registry.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        let overrideTiers = Dictionary(
            overrides.compactMap { stored in stored.override.tier.map { (stored.override.tenant, $0) } },
            uniquingKeysWith: { first, _ in first })
        for id in ids {
            let allocated = allocations[id] ?? []
            let tier = allocated.first?.tier ?? overrideTiers[id] ?? policy.tierName(ofTenant: id)
            var summary = TenantSummary(id: id, tier: tier, priority: policy.tier(named: tier)?.priority ?? Int.max)
            summary.group = policy.tenant(id)?.group
            if let record = seen[id] {
                summary.firstSeen = Double(record.firstSeenMs) / 1000
                summary.lastSeen = Double(record.lastSeenMs) / 1000
            }
            var upstreams = Set<String>()
            for status in statuses[id] ?? [] {
                upstreams.insert(status.key.upstream)
                if summary.tenantClass.map({ TenantSummary.rank(status.tenantClass) > TenantSummary.rank($0) }) ?? true
                {
                    summary.tenantClass = status.tenantClass
                }
                summary.suspect = summary.suspect || status.suspect
                summary.demand.rpm += status.demand.rpm
                summary.demand.tpm += status.demand.tpm
                summary.usage.rpm += status.servedShort.rpm
                summary.usage.tpm += status.servedShort.tpm
                summary.denied += status.deniedRPM
                summary.starved = summary.starved || status.starved
                if let last = status.lastActivityAt { summary.lastSeen = max(summary.lastSeen ?? last, last) }
            }
            var largest = -1.0
            for allocation in allocated {
                upstreams.insert(allocation.upstream)
                // What the snapshot publishes: where the pool has no capacity for a dimension a spend budget or an
                // absolute ceiling may still limit the tenant; else it is unlimited there and adds nothing.
                var reason = PerDimension<AllocationReason?>(nil)
                for dimension in RateDimension.allCases {
                    guard let published = allocation.published(dimension) else { continue }
                    reason[dimension] = published.reason
                    summary.allocation[dimension] = (summary.allocation[dimension] ?? 0) + published.rate
                    summary.reasons.insert(published.reason.rawValue)
                }
                let rpm = allocation.published(.rpm)?.rate ?? 0
                if rpm > largest {
                    largest = rpm
                    summary.reason = reason
                }
                if allocation.burstCredit != nil { summary.burstCredit = true }
                if let deny = allocation.deny { summary.deny = deny }
                if summary.tenantClass == nil { summary.tenantClass = allocation.tenantClass }
            }
            for alert in alerts[id] ?? [] { summary.alerts.insert(alert.kind) }
            if summary.starved { summary.alerts.insert("starved") }
            summary.override = overridden.contains(id)
            summary.upstreams = upstreams.sorted()
            summaries[id] = summary
        }
    }
}
