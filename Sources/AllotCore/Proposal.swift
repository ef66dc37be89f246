import AllotTime

/// A change the engine will not make on its own, awaiting an SRE (SPEC 6.7): the allocation it
/// would have published across a tier guardrail, or an operator override that crosses one (6.8).
public struct Proposal: Sendable, Hashable, Codable {
    /// What is proposed.
    public enum Kind: String, Sendable, Hashable, Codable, CaseIterable {
        /// Raise a tenant above its tier's `guard_max` (demand wants more).
        case raiseAboveGuardMax = "raise_above_guard_max"
        /// Let a tenant be squeezed below its tier's `guard_min` (contention).
        case lowerBelowGuardMin = "lower_below_guard_min"
        /// Apply an operator override that crosses a guardrail.
        case override
    }

    /// Where it is in its life.
    public enum Status: String, Sendable, Hashable, Codable, CaseIterable {
        /// Waiting for an SRE; expires after `proposals.ttl_s`.
        case pending
        /// Approved: the guardrail is suspended for this tenant, pool and dimension until `expiresAt`.
        case approved
        /// Rejected: the same proposal is not filed again until `expiresAt` (the cool-down).
        case rejected
        /// Nobody decided in time; reported once, then forgotten.
        case expired
    }

    /// Deterministic: a hash of tenant, pool, dimension, kind and filing time.
    public var id: String
    public var kind: Kind
    public var tenant: String
    public var upstream: String
    /// The dimension (nil for override proposals, which may span several).
    public var dimension: RateDimension?
    /// The value the engine would publish without the guardrail (per minute); refreshed every tick
    /// while the proposal is pending and the condition persists.
    public var value: Double?
    /// The guardrail crossed (per minute).
    public var guardrail: Double?
    /// A sentence for people.
    public var reason: String
    /// The inputs behind `value`.
    public var evidence: AllocationExplanation?
    /// For override proposals: the override awaiting approval and the guardrails it crosses.
    public var override: Override?
    public var crossings: [Guardrails.Crossing]
    public var status: Status
    public var filedAt: Double
    public var updatedAt: Double
    /// Pending: when it expires; approved: when the approval lapses; rejected: when the cool-down ends.
    public var expiresAt: Double
    public var decidedBy: String?
    public var decidedAt: Double?

    public init(
        id: String, kind: Kind, tenant: String, upstream: String, dimension: RateDimension?, value: Double?,
        guardrail: Double?, reason: String, evidence: AllocationExplanation?, override: Override? = nil,
        crossings: [Guardrails.Crossing] = [], status: Status = .pending, filedAt: Double, updatedAt: Double,
        expiresAt: Double, decidedBy: String? = nil, decidedAt: Double? = nil
    ) {
        self.id = id
        self.kind = kind
        self.tenant = tenant
        self.upstream = upstream
        self.dimension = dimension
        self.value = value
        self.guardrail = guardrail
        self.reason = reason
        self.evidence = evidence
        self.override = override
        self.crossings = crossings
        self.status = status
        self.filedAt = filedAt
        self.updatedAt = updatedAt
        self.expiresAt = expiresAt
        self.decidedBy = decidedBy
        self.decidedAt = decidedAt
    }

    /// A proposal to apply an override that crosses guardrails (the server files and keeps it;
    /// on approval it activates the override with `approved = true`). It expires after `proposals.ttl_s`, or with
    /// the override it proposes if that comes first: approved later, it would apply nothing (outside evaluation
    /// round 20: an SRE approved one, `200 approved`, "applies at the next tick", after its override had expired).
    public static func forOverride(
        _ override: Override, crossings: [Guardrails.Crossing], settings: ProposalSettings
    ) -> Proposal {
        let what = crossings.map { "\($0.kind.rawValue) on \($0.upstream) \($0.dimension.rawValue)" }
            .joined(separator: ", ")
        return Proposal(
            id: ProposalID.make(
                override.tenant, override.upstream ?? "*", "", Kind.override.rawValue,
                override.actor, override.createdAt),
            kind: .override, tenant: override.tenant, upstream: override.upstream ?? "*", dimension: nil, value: nil,
            guardrail: nil, reason: "override by \(override.actor) (\(override.reason)) crosses guardrails: \(what)",
            evidence: nil, override: override, crossings: crossings, filedAt: override.createdAt,
            updatedAt: override.createdAt, expiresAt: min(override.createdAt + settings.ttlSeconds, override.expiresAt))
    }
}

/// An SRE's decision on a proposal, handed to the next decision.
public struct ProposalResolution: Sendable, Hashable, Codable {
    public enum Verdict: String, Sendable, Hashable, Codable {
        case approve
        case reject
    }

    public var proposalID: String
    public var verdict: Verdict
    public var actor: String
    /// When the SRE decided.
    public var at: Double

    public init(proposalID: String, verdict: Verdict, actor: String, at: Double) {
        self.proposalID = proposalID
        self.verdict = verdict
        self.actor = actor
        self.at = at
    }
}

/// The engine's proposals, one record per tenant, pool, dimension and kind (SPEC 6.7): filing,
/// refreshing, approval, rejection cool-downs and expiry. Part of `EngineState`.
public struct ProposalBook: Sendable, Hashable, Codable {
    /// Records by key (`tenant`, pool, dimension, kind).
    public private(set) var records: [String: Proposal] = [:]

    public init() {}

    /// All records, by id.
    public var all: [Proposal] { records.values.sorted { $0.id < $1.id } }

    static func key(_ tenant: String, _ upstream: String, _ dimension: RateDimension, _ kind: Proposal.Kind) -> String {
        "\(tenant)\u{1F}\(upstream)\u{1F}\(dimension.rawValue)\u{1F}\(kind.rawValue)"
    }

    /// Applies SREs' decisions to pending proposals. Returns, per resolution, whether it applied
    /// (an unknown or already decided proposal is ignored, and so is a decision made at or after the
    /// proposal's expiry, compared in milliseconds as the server stores both). A decision made before
    /// the expiry applies even when the tick that reads it comes after: the server accepted it while the
    /// proposal was pending, and the tick runs before ``expire(now:)`` (outside evaluation round 27: an
    /// approval 1.5 s before the expiry was answered 200 and audited, then the proposal expired unapplied
    /// and was filed again at once). The approval and the cool-down run from the decision, as the API's
    /// answer said: one read after a long shutdown may already be over (``expire(now:)`` then drops it).
    public mutating func resolve(
        _ resolutions: [ProposalResolution], now: Double, settings: ProposalSettings
    ) -> [(resolution: ProposalResolution, applied: Bool)] {
        var index: [String: String] = [:]
        for (key, record) in records { index[record.id] = key }
        let ordered = resolutions.sorted { ($0.at, $0.proposalID, $0.actor) < ($1.at, $1.proposalID, $1.actor) }
        return ordered.map { resolution in
            guard let key = index[resolution.proposalID], var record = records[key], record.status == .pending,
                EpochTime.milliseconds(fromSeconds: resolution.at)
                    < EpochTime.milliseconds(fromSeconds: record.expiresAt)
            else { return (resolution, false) }
            record.decidedBy = resolution.actor
            record.decidedAt = resolution.at
            record.updatedAt = now
            switch resolution.verdict {
            case .approve:
                record.status = .approved
                record.expiresAt = resolution.at + settings.approvalTTLSeconds
            case .reject:
                record.status = .rejected
                record.expiresAt = resolution.at + settings.rejectCooldownSeconds
            }
            records[key] = record
            return (resolution, true)
        }
    }

    /// Drops records whose time is up: pending ones expire (returned with status `expired`, for
    /// the server to record), approvals lapse and cool-downs end (dropped silently).
    public mutating func expire(now: Double) -> [Proposal] {
        var expired: [Proposal] = []
        for key in records.keys.sorted() {
            guard var record = records[key], now >= record.expiresAt else { continue }
            records[key] = nil
            if record.status == .pending {
                record.status = .expired
                record.updatedAt = now
                expired.append(record)
            }
        }
        return expired
    }

    /// Whether an approval currently suspends the guardrail of this kind.
    public func isApproved(tenant: String, upstream: String, dimension: RateDimension, kind: Proposal.Kind) -> Bool {
        records[Self.key(tenant, upstream, dimension, kind)]?.status == .approved
    }

    /// The approvals in force, for fast lookups during a decision (usually few or none).
    var approvals: Set<Approval> {
        Set(
            records.values.lazy.filter { $0.status == .approved }.compactMap { record in
                record.dimension.map {
                    Approval(tenant: record.tenant, upstream: record.upstream, dimension: $0, kind: record.kind)
                }
            })
    }

    /// An approved guardrail crossing: tenant, pool, dimension and kind.
    struct Approval: Hashable {
        var tenant: String
        var upstream: String
        var dimension: RateDimension
        var kind: Proposal.Kind
    }

    /// Files a proposal for a guardrail clamp, or refreshes the pending one; suppressed while a
    /// rejection cools down. Returns the record as it now stands, or nil when suppressed.
    @discardableResult
    public mutating func file(
        kind: Proposal.Kind, tenant: String, upstream: String, dimension: RateDimension, value: Double,
        guardrail: Double, evidence: AllocationExplanation, now: Double, settings: ProposalSettings
    ) -> Proposal? {
        let key = Self.key(tenant, upstream, dimension, kind)
        let verb = kind == .raiseAboveGuardMax ? "raise" : "lower"
        let side = kind == .raiseAboveGuardMax ? "above guard_max" : "below guard_min"
        let reason =
            "\(verb) \(tenant) on \(upstream) to \(Quantity.formatMeasured(value)) \(dimension.rawValue), "
            + "\(side) (\(Quantity.formatMeasured(guardrail)))"
        if var record = records[key] {
            guard record.status == .pending else { return nil }
            record.value = value
            record.guardrail = guardrail
            record.evidence = evidence
            record.reason = reason
            record.updatedAt = now
            records[key] = record
            return record
        }
        let record = Proposal(
            id: ProposalID.make(tenant, upstream, dimension.rawValue, kind.rawValue, "", now), kind: kind,
            tenant: tenant, upstream: upstream, dimension: dimension, value: value, guardrail: guardrail,
            reason: reason, evidence: evidence, filedAt: now, updatedAt: now, expiresAt: now + settings.ttlSeconds)
        records[key] = record
        return record
    }

    /// Forgets every record of the tenants `drop` selects (state ageing).
    mutating func removeTenants(where drop: (String) -> Bool) {
        for (key, record) in records where drop(record.tenant) { records[key] = nil }
    }
}

/// Deterministic proposal ids: `p-` and 16 hex digits of FNV-1a 64 over the identifying fields.
enum ProposalID {
    static func make(
        _ tenant: String, _ upstream: String, _ dimension: String, _ kind: String, _ actor: String, _ time: Double
    ) -> String {
        var hash = StableHash()
        let millis = Int64((time * 1000).rounded())
        for part in [tenant, upstream, dimension, kind, actor, String(millis)] {
            hash.add(part)
            hash.add(0x1F)
        }
        return "p-" + hash.hex
    }
}
