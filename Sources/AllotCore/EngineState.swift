/// A tenant on an upstream pool: the unit the engine allocates and remembers.
public struct TenantUpstream: Sendable, Hashable, Codable, Comparable {
    public var tenant: String
    public var upstream: String

    public init(tenant: String, upstream: String) {
        self.tenant = tenant
        self.upstream = upstream
    }

    /// Ordered by upstream, then tenant: the order of every list the engine produces.
    public static func < (lhs: TenantUpstream, rhs: TenantUpstream) -> Bool {
        lhs.upstream != rhs.upstream ? lhs.upstream < rhs.upstream : lhs.tenant < rhs.tenant
    }
}

/// What the engine remembers about one tenant on one pool between ticks.
public struct TenantRecord: Sendable, Hashable, Codable {
    /// The damper per dimension; nil until the dimension is first allocated.
    public var dampers: PerDimension<DamperState?>
    /// Whether the tenant was idle last tick (leaving idle enters at target, like a new tenant).
    public var wasIdle: Bool
    /// The last tick the classifier reported the tenant on this pool.
    public var lastSeen: Double
    /// Burst credit, debt and repayment record.
    public var burst: BurstAccount

    public init(lastSeen: Double) {
        dampers = PerDimension(nil)
        wasIdle = false
        self.lastSeen = lastSeen
        burst = BurstAccount()
    }

    /// The values published last tick (0 where nothing was).
    public var published: PerDimension<Double> { dampers.map { $0?.published ?? 0 } }
}

/// The Policy Engine's memory between ticks: dampers, burst ledgers and proposals (SPEC 6.5–6.7,
/// 6.10). `Codable` so the loop can persist it and a restarted server resumes where it stopped
/// (SPEC 7: "resumes from persisted estimator state … burst debts"); encoding is deterministic
/// (tenants sorted by pool, then id).
public struct EngineState: Sendable, Hashable, Codable {
    /// The previous tick's `now`; nil before the first decision.
    public var lastTick: Double?
    /// Per tenant and pool.
    public var tenants: [TenantUpstream: TenantRecord]
    /// Guardrail proposals and their lifecycle.
    public var proposals: ProposalBook

    public init() {
        lastTick = nil
        tenants = [:]
        proposals = ProposalBook()
    }

    private enum CodingKeys: String, CodingKey {
        case lastTick = "last_tick"
        case tenants
        case proposals
    }

    private struct Entry: Codable {
        var tenant: String
        var upstream: String
        var record: TenantRecord
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encodeIfPresent(lastTick, forKey: .lastTick)
        let entries = tenants.sorted { $0.key < $1.key }.map {
            Entry(tenant: $0.key.tenant, upstream: $0.key.upstream, record: $0.value)
        }
        try container.encode(entries, forKey: .tenants)
        try container.encode(proposals, forKey: .proposals)
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        lastTick = try container.decodeIfPresent(Double.self, forKey: .lastTick)
        let entries = try container.decode([Entry].self, forKey: .tenants)
        tenants = Dictionary(
            entries.map { (TenantUpstream(tenant: $0.tenant, upstream: $0.upstream), $0.record) },
            uniquingKeysWith: { _, last in last })
        proposals = try container.decode(ProposalBook.self, forKey: .proposals)
    }
}
