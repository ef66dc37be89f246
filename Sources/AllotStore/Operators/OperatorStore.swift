import AllotCore
import AllotJSON
import AllotSQLite
import AllotTime
import Foundation

/// An override as stored: the override (with its actor, reason, times and approval) and the
/// proposal an SRE approved for it, if it crossed a guardrail.
public struct StoredOverride: Sendable, Hashable {
    public var override: Override
    public var proposalID: String?

    public init(override: Override, proposalID: String? = nil) {
        self.override = override
        self.proposalID = proposalID
    }

    /// The operator API's shape of it (`openapi.json`'s `Override`): every audit entry that records an override,
    /// the service's own `override.expire` included, and every response that shows one (round 21: the expiry's
    /// entry held the storage form, camelCase epoch seconds).
    public var json: JSON {
        func time(_ seconds: Double) -> JSON { seconds.isFinite ? .string(RFC3339.format(seconds)) : .null }
        func quantities(_ value: PerDimension<Quantity?>) -> JSON {
            var object = JSONObject()
            for dimension in RateDimension.allCases {
                guard let amount = value[dimension] else { continue }
                if case .absolute(let number) = amount, number.isFinite {
                    object[dimension.rawValue] = .double(number)
                } else {
                    object[dimension.rawValue] = .string(amount.jsonText)
                }
            }
            return object.count == 0 ? .null : .object(object)
        }
        return [
            "tenant": .string(override.tenant), "upstream": override.upstream.map(JSON.string) ?? .null,
            "tier": override.tier.map(JSON.string) ?? .null,
            "weight": override.weight.flatMap { $0.isFinite ? .double($0) : nil } ?? .null,
            "floor": quantities(override.floor), "ceiling": quantities(override.ceiling),
            "actor": .string(override.actor), "reason": .string(override.reason),
            "created_at": time(override.createdAt), "expires_at": time(override.expiresAt),
            "approved": .bool(override.approved), "proposal_id": proposalID.map(JSON.string) ?? .null,
        ]
    }
}

/// A proposal as stored (SPEC 6.7, 6.8), with where it came from and its status in the record.
public struct StoredProposal: Sendable, Hashable {
    /// Who files it.
    public enum Source: String, Sendable, Hashable, CaseIterable {
        /// The engine's guardrail clamps, mirrored from each tick's decision.
        case engine
        /// Operator overrides that cross a guardrail, held by the server until an SRE decides.
        case override
    }

    /// Statuses in the record: the proposal statuses, plus `withdrawn` for an override proposal
    /// whose tenant's override was deleted while it was pending.
    public static let statuses = ["pending", "approved", "rejected", "expired", "withdrawn"]

    public var proposal: Proposal
    public var source: Source
    /// As stored: `pending`, `approved`, `rejected`, `expired` or `withdrawn`.
    public var storedStatus: String

    public init(proposal: Proposal, source: Source, storedStatus: String) {
        self.proposal = proposal
        self.source = source
        self.storedStatus = storedStatus
    }

    /// The status at `now` (seconds): a pending proposal whose time is up is `expired` even before
    /// the next tick records it.
    public func status(at now: Double) -> String {
        storedStatus == "pending" && now >= proposal.expiresAt ? "expired" : storedStatus
    }
}

/// A burst credit request as stored, with its outcome once a tick decided it.
public struct StoredBurst: Sendable, Hashable {
    public var request: BurstRequest
    public var requestedBy: String
    /// `pending`, then the `BurstDecision.Outcome` raw value.
    public var status: String
    public var decidedAt: Double?
    public var credit: BurstCredit?

    public init(
        request: BurstRequest, requestedBy: String, status: String, decidedAt: Double? = nil,
        credit: BurstCredit? = nil
    ) {
        self.request = request
        self.requestedBy = requestedBy
        self.status = status
        self.decidedAt = decidedAt
        self.credit = credit
    }
}

/// A change an operator asked for that the record does not allow: unknown subject (404),
/// conflicting state (409). `code` is the JSON error code.
public struct OperatorStoreError: Error, Sendable, Hashable, CustomStringConvertible {
    public enum Kind: String, Sendable, Hashable {
        case notFound
        case conflict
    }

    public var kind: Kind
    public var code: String
    public var message: String

    public init(_ kind: Kind, code: String, message: String) {
        self.kind = kind
        self.code = code
        self.message = message
    }

    public var description: String { message }
}

/// Overrides, proposals, proposal resolutions and burst requests (migration 0003): what operators
/// ask of the loop, and what the loop decided about it.
///
/// Every mutation an operator makes appends its audit record in the same transaction. The loop
/// reads the inputs each tick (``inputs(now:)``) and hands back its decision (``record(_:now:)``),
/// at least once: a tick that fails in between sees the same inputs again.
public struct OperatorStore: Sendable {
    public let pool: DatabasePool

    /// Decided burst requests are kept this long (seconds) for the tenant's page.
    public var burstRetentionSeconds: Double = 7 * 86_400
    /// Proposals no longer pending are kept this long (seconds) after their last update.
    public var proposalRetentionSeconds: Double = 30 * 86_400

    public init(pool: DatabasePool) {
        self.pool = pool
    }

    // MARK: Loop inputs

    /// The inputs for the tick at `now`: overrides in force, queued resolutions of engine
    /// proposals, pending burst requests. One read transaction, so the three agree.
    public func inputs(now: Double) async throws -> (
        overrides: [Override], resolutions: [ProposalResolution], burstRequests: [BurstRequest]
    ) {
        let nowMs = EpochTime.milliseconds(fromSeconds: now)
        return try await pool.read { connection in
            let overrides = try Self.overrides(on: connection, tenant: nil, nowMs: nowMs).map(\.override)
            let resolutions = try connection.queryAll(
                "SELECT proposal_id, verdict, actor, at_ms FROM proposal_resolutions ORDER BY at_ms, proposal_id"
            ) { row in
                ProposalResolution(
                    proposalID: row.string(0) ?? "",
                    verdict: ProposalResolution.Verdict(rawValue: row.string(1) ?? "") ?? .reject,
                    actor: row.string(2) ?? "", at: EpochTime.seconds(fromMilliseconds: row.int64(3)))
            }
            let bursts = try connection.queryAll(
                "SELECT \(Self.burstColumns) FROM burst_requests WHERE status = 'pending' ORDER BY requested_ms, id"
            ) { try Self.burst($0).request }
            return (overrides, resolutions, bursts)
        }
    }

    /// Records what a tick decided: resolutions applied (their queue entries go), the engine's
    /// proposals (upserted, except the status of one an SRE resolved since the tick read its
    /// inputs), proposals that expired, burst outcomes; then prunes expired overrides, expired
    /// override proposals and old rows.
    public func record(_ decision: Decision, now: Double) async throws {
        let nowMs = EpochTime.milliseconds(fromSeconds: now)
        let proposals = try decision.proposals.map { ($0, try Self.encode($0)) }
        let expired = try decision.expiredProposals.map { ($0, try Self.encode($0)) }
        let bursts = try decision.burstDecisions.map { ($0, try $0.credit.map(Self.encode)) }
        let resolutions = decision.resolutions
        let detected = decision.detectedBursts
        let burstCutoff = nowMs - Int64(burstRetentionSeconds * 1000)
        let proposalCutoff = nowMs - Int64(proposalRetentionSeconds * 1000)
        try await pool.write { connection in
            for outcome in resolutions {
                try connection.run(
                    "DELETE FROM proposal_resolutions WHERE proposal_id = ?", outcome.resolution.proposalID)
                if !outcome.applied {
                    // The engine no longer had it pending (expired meanwhile): undo the optimistic
                    // status; the upsert below restores the engine's own if it still holds it.
                    try connection.run(
                        """
                        UPDATE proposals SET status = 'expired', updated_ms = ?
                        WHERE id = ? AND source = 'engine' AND status IN ('approved', 'rejected')
                        """, nowMs, outcome.resolution.proposalID)
                }
            }
            for (proposal, body) in proposals {
                try Self.upsertEngineProposal(proposal, status: proposal.status.rawValue, body: body, on: connection)
            }
            for (proposal, body) in expired {
                try Self.upsertEngineProposal(proposal, status: "expired", body: body, on: connection)
            }
            // A credit the engine lent unasked is stored like a request, decided in the same tick.
            for request in detected {
                try Self.insertBurst(request, requestedBy: Self.detectedBy, orIgnore: true, on: connection)
            }
            for (decision, credit) in bursts {
                try connection.run(
                    "UPDATE burst_requests SET status = ?, decided_ms = ?, credit = ? WHERE id = ? AND status = 'pending'",
                    decision.outcome.rawValue, nowMs, credit, decision.requestID)
            }
            try connection.run(
                """
                UPDATE proposals SET status = 'expired', updated_ms = ?
                WHERE status = 'pending' AND source = 'override' AND expires_ms <= ?
                """, nowMs, nowMs)
            // An override that expires leaves a trace in the audit log, as every change to a tenant's terms does
            // (round 14: customer success could not tell an override had ended).
            let ended = try connection.queryAll(
                "SELECT tenant, body, proposal_id FROM overrides WHERE expires_ms <= ? ORDER BY tenant, upstream",
                nowMs
            ) { row in
                (
                    tenant: row.string(0) ?? "",
                    // The API's shape; a body this version cannot decode is recorded as stored rather than lost.
                    before: (try? Self.decode(Override.self, row.string(1) ?? "")).map {
                        StoredOverride(override: $0, proposalID: row.string(2)).json
                    } ?? (try? JSON.parse(Array((row.string(1) ?? "").utf8)))
                )
            }
            for override in ended {
                try AuditLog.append(
                    AuditEntry(
                        atMs: nowMs, actor: "allot", action: "override.expire", subject: override.tenant,
                        tenant: override.tenant, before: override.before, reason: "expired"),
                    on: connection)
            }
            try connection.run("DELETE FROM overrides WHERE expires_ms <= ?", nowMs)
            try connection.run(
                "DELETE FROM burst_requests WHERE status <> 'pending' AND requested_ms < ?", burstCutoff)
            try connection.run(
                "DELETE FROM proposals WHERE status <> 'pending' AND updated_ms < ? AND expires_ms < ?",
                proposalCutoff, nowMs)
        }
    }

    private static func upsertEngineProposal(
        _ proposal: Proposal, status: String, body: String, on connection: SQLiteConnection
    ) throws {
        // While an SRE's resolution waits in the queue, the SRE's status and decision stand: the
        // engine has not seen the resolution yet and still reports the proposal as pending.
        try connection.run(
            """
            INSERT INTO proposals
                (id, source, kind, tenant, upstream, status, body, filed_ms, updated_ms, expires_ms, decided_by,
                 decided_ms)
            VALUES (?1, 'engine', ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
            ON CONFLICT (id) DO UPDATE SET
                body = excluded.body, updated_ms = excluded.updated_ms,
                status = CASE WHEN queued THEN proposals.status ELSE excluded.status END,
                expires_ms = CASE WHEN queued THEN proposals.expires_ms ELSE excluded.expires_ms END,
                decided_by = CASE WHEN queued THEN proposals.decided_by
                    ELSE coalesce(excluded.decided_by, proposals.decided_by) END,
                decided_ms = CASE WHEN queued THEN proposals.decided_ms
                    ELSE coalesce(excluded.decided_ms, proposals.decided_ms) END
            """.replacingOccurrences(
                of: "queued", with: "EXISTS (SELECT 1 FROM proposal_resolutions WHERE proposal_id = excluded.id)"),
            proposal.id, proposal.kind.rawValue, proposal.tenant, proposal.upstream, status, body,
            EpochTime.milliseconds(fromSeconds: proposal.filedAt),
            EpochTime.milliseconds(fromSeconds: proposal.updatedAt),
            EpochTime.milliseconds(fromSeconds: proposal.expiresAt), proposal.decidedBy,
            proposal.decidedAt.map { EpochTime.milliseconds(fromSeconds: $0) })
    }

    // MARK: Overrides

    /// Overrides in force at `now` (created, not expired), for `tenant` or for everyone.
    public func overrides(tenant: String? = nil, now: Double) async throws -> [StoredOverride] {
        let nowMs = EpochTime.milliseconds(fromSeconds: now)
        return try await pool.read { connection in try Self.overrides(on: connection, tenant: tenant, nowMs: nowMs) }
    }

    private static func overrides(on connection: SQLiteConnection, tenant: String?, nowMs: Int64) throws
        -> [StoredOverride]
    {
        let sql =
            "SELECT body, proposal_id FROM overrides WHERE expires_ms > ?1 AND created_ms <= ?1"
            + (tenant == nil ? "" : " AND tenant = ?2") + " ORDER BY tenant, upstream"
        var bindings: [SQLiteValue] = [.integer(nowMs)]
        if let tenant { bindings.append(.text(tenant)) }
        var result: [StoredOverride] = []
        try connection.query(sql, bindings: bindings.map { $0 }) { row in
            result.append(
                StoredOverride(override: try decode(Override.self, row.string(0) ?? ""), proposalID: row.string(1)))
        }
        return result
    }

    /// Sets (replaces) the override for its tenant and upstream and audits it. `audit` receives the
    /// override it replaces (nil when none was in force). Returns that previous override.
    ///
    /// - Throws: ``OperatorStoreError`` `proposal_pending` (409) while an override proposal for the
    ///   same tenant and upstream awaits an SRE: one decision at a time.
    @discardableResult
    public func setOverride(
        _ override: Override, proposalID: String? = nil, now: Double,
        audit: @escaping @Sendable (StoredOverride?) -> AuditEntry
    ) async throws -> StoredOverride? {
        let body = try Self.encode(override)
        let nowMs = EpochTime.milliseconds(fromSeconds: now)
        return try await pool.write { connection in
            if let pending = try Self.pendingOverrideProposal(
                on: connection, tenant: override.tenant, upstream: override.upstream ?? "*", nowMs: nowMs)
            {
                throw Self.pendingConflict(pending)
            }
            let previous = try Self.override(
                on: connection, tenant: override.tenant, upstream: override.upstream, nowMs: nowMs)
            try Self.upsert(override, body: body, proposalID: proposalID, on: connection)
            try AuditLog.append(audit(previous), on: connection)
            return previous
        }
    }

    /// Deletes the override of `tenant` on `upstream` (nil: the override for every upstream) and
    /// withdraws a pending override proposal for the same key. `audit` receives what was removed
    /// and withdrawn; nothing is audited (and nil returned) when there was neither.
    public func deleteOverride(
        tenant: String, upstream: String?, now: Double, actor: String,
        audit: @escaping @Sendable (StoredOverride?, StoredProposal?) -> AuditEntry
    ) async throws -> (removed: StoredOverride?, withdrawn: StoredProposal?)? {
        let nowMs = EpochTime.milliseconds(fromSeconds: now)
        return try await pool.write { connection in
            let removed = try Self.override(on: connection, tenant: tenant, upstream: upstream, nowMs: nowMs)
            var withdrawn = try Self.pendingOverrideProposal(
                on: connection, tenant: tenant, upstream: upstream ?? "*", nowMs: nowMs)
            guard removed != nil || withdrawn != nil else { return nil }
            try connection.run("DELETE FROM overrides WHERE tenant = ? AND upstream = ?", tenant, upstream ?? "")
            if let pending = withdrawn {
                try connection.run(
                    "UPDATE proposals SET status = 'withdrawn', updated_ms = ?, decided_by = ?, decided_ms = ? WHERE id = ?",
                    nowMs, actor, nowMs, pending.proposal.id)
                withdrawn?.storedStatus = "withdrawn"
                withdrawn?.proposal.decidedBy = actor
                withdrawn?.proposal.decidedAt = now
            }
            try AuditLog.append(audit(removed, withdrawn), on: connection)
            return (removed, withdrawn)
        }
    }

    private static func override(
        on connection: SQLiteConnection, tenant: String, upstream: String?, nowMs: Int64
    ) throws -> StoredOverride? {
        try connection.queryOne(
            "SELECT body, proposal_id FROM overrides WHERE tenant = ? AND upstream = ? AND expires_ms > ?",
            tenant, upstream ?? "", nowMs
        ) { row in
            StoredOverride(override: try decode(Override.self, row.string(0) ?? ""), proposalID: row.string(1))
        }
    }

    private static func upsert(
        _ override: Override, body: String, proposalID: String?, on connection: SQLiteConnection
    ) throws {
        try connection.run(
            """
            INSERT OR REPLACE INTO overrides
                (tenant, upstream, body, actor, reason, created_ms, expires_ms, approved, proposal_id)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
            """,
            override.tenant, override.upstream ?? "", body, override.actor, override.reason,
            EpochTime.milliseconds(fromSeconds: override.createdAt),
            EpochTime.milliseconds(fromSeconds: override.expiresAt), override.approved ? 1 : 0, proposalID)
    }

    // MARK: Proposals

    /// Files an override that crosses a guardrail as a proposal (SPEC 6.8) and audits it.
    ///
    /// - Throws: ``OperatorStoreError`` `conflict` when an override proposal for the same tenant
    ///   and upstream is pending (`proposal_pending`), or was rejected and is cooling down
    ///   (`proposal_rejected`): a rejection suppresses the same proposal for the cool-down (6.7).
    public func fileOverrideProposal(_ proposal: Proposal, now: Double, audit: AuditEntry) async throws {
        let body = try Self.encode(proposal)
        let nowMs = EpochTime.milliseconds(fromSeconds: now)
        try await pool.write { connection in
            if let pending = try Self.pendingOverrideProposal(
                on: connection, tenant: proposal.tenant, upstream: proposal.upstream, nowMs: nowMs)
            {
                throw Self.pendingConflict(pending)
            }
            if let rejected = try connection.queryOne(
                """
                SELECT id, decided_by, expires_ms FROM proposals
                WHERE source = 'override' AND tenant = ? AND upstream = ? AND status = 'rejected' AND expires_ms > ?
                ORDER BY expires_ms DESC LIMIT 1
                """, proposal.tenant, proposal.upstream, nowMs, map: { ($0.string(0) ?? "", $0.string(1), $0.int64(2)) }
            ) {
                let which =
                    proposal.upstream == "*" ? "tenant-wide override of it" : "override of it on \(proposal.upstream)"
                let until = RFC3339.format(EpochTime.seconds(fromMilliseconds: rejected.2))
                throw OperatorStoreError(
                    .conflict, code: "proposal_rejected",
                    message: "an override of \(proposal.tenant) crossing a guardrail was rejected by "
                        + "\(rejected.1 ?? "an SRE") (proposal \(rejected.0)); no \(which) that crosses a guardrail can "
                        + "be filed until \(until) (one within the guardrails applies at once)")
            }
            try Self.insert(proposal, source: .override, status: "pending", body: body, on: connection)
            try AuditLog.append(audit, on: connection)
        }
    }

    private static func pendingConflict(_ pending: StoredProposal) -> OperatorStoreError {
        OperatorStoreError(
            .conflict, code: "proposal_pending",
            message:
                "an override of \(pending.proposal.tenant) awaits an SRE already (proposal \(pending.proposal.id), "
                + "filed by \(pending.proposal.override?.actor ?? "?")); approve or reject it, or delete the "
                + "override to withdraw it")
    }

    private static func pendingOverrideProposal(
        on connection: SQLiteConnection, tenant: String, upstream: String, nowMs: Int64
    ) throws -> StoredProposal? {
        try connection.queryOne(
            """
            SELECT \(proposalColumns) FROM proposals
            WHERE source = 'override' AND tenant = ? AND upstream = ? AND status = 'pending' AND expires_ms > ?
            """, tenant, upstream, nowMs, map: proposal)
    }

    private static func insert(
        _ proposal: Proposal, source: StoredProposal.Source, status: String, body: String,
        on connection: SQLiteConnection
    ) throws {
        try connection.run(
            """
            INSERT INTO proposals
                (id, source, kind, tenant, upstream, status, body, filed_ms, updated_ms, expires_ms, decided_by,
                 decided_ms)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
            """,
            proposal.id, source.rawValue, proposal.kind.rawValue, proposal.tenant, proposal.upstream, status, body,
            EpochTime.milliseconds(fromSeconds: proposal.filedAt),
            EpochTime.milliseconds(fromSeconds: proposal.updatedAt),
            EpochTime.milliseconds(fromSeconds: proposal.expiresAt), proposal.decidedBy,
            proposal.decidedAt.map { EpochTime.milliseconds(fromSeconds: $0) })
    }

    /// Proposals, newest filed first.
    ///
    /// - Parameters:
    ///   - statuses: Only these statuses as of `now` (a pending one past its expiry counts as
    ///     `expired`); nil for all.
    ///   - tenant: Only this tenant's.
    public func proposals(
        statuses: Set<String>? = nil, tenant: String? = nil, now: Double, limit: Int = 500
    ) async throws -> [StoredProposal] {
        let all = try await pool.read { connection in
            if let tenant {
                return try connection.queryAll(
                    "SELECT \(Self.proposalColumns) FROM proposals WHERE tenant = ? ORDER BY filed_ms DESC, id", tenant,
                    map: Self.proposal)
            }
            return try connection.queryAll(
                "SELECT \(Self.proposalColumns) FROM proposals ORDER BY filed_ms DESC, id", map: Self.proposal)
        }
        let filtered = statuses.map { wanted in all.filter { wanted.contains($0.status(at: now)) } } ?? all
        return Array(filtered.prefix(max(0, limit)))
    }

    /// The override proposals awaiting an SRE at `now`, newest first: what `override_proposal` alerts list, read on
    /// every `/metrics` scrape, so only those rows are read.
    public func pendingOverrideProposals(now: Double) async throws -> [StoredProposal] {
        let nowMs = EpochTime.milliseconds(fromSeconds: now)
        return try await pool.read { connection in
            try connection.queryAll(
                """
                SELECT \(Self.proposalColumns) FROM proposals
                WHERE source = 'override' AND status = 'pending' AND expires_ms > ? ORDER BY filed_ms DESC, id
                """, nowMs, map: Self.proposal)
        }.filter { $0.status(at: now) == "pending" }
    }

    /// The proposal `id`, or nil.
    public func proposal(id: String) async throws -> StoredProposal? {
        try await pool.read { connection in
            try connection.queryOne(
                "SELECT \(Self.proposalColumns) FROM proposals WHERE id = ?", id, map: Self.proposal)
        }
    }

    /// An SRE's approval or rejection (SPEC 6.7), audited with the proposal before and after.
    ///
    /// - Engine proposals: the resolution is queued for the next tick (the engine applies it then:
    ///   an approval suspends the guardrail for `approval_ttl_s`, a rejection suppresses the
    ///   proposal for `reject_cooldown_s`); the record shows the decision at once.
    /// - Override proposals: approval puts the override in force at once, `approved`, until its own
    ///   expiry or the approval TTL, whichever comes first (the loop applies it at the next tick);
    ///   rejection starts the cool-down during which the same override cannot be proposed again.
    ///
    /// - Throws: ``OperatorStoreError``: `not_found` (404) for an unknown id; `proposal_expired`
    ///   or `proposal_resolved` (409) when it is no longer pending.
    public func resolve(
        id: String, verdict: ProposalResolution.Verdict, actor: String, now: Double, settings: ProposalSettings,
        audit: @escaping @Sendable (_ before: StoredProposal, _ after: StoredProposal) -> AuditEntry
    ) async throws -> StoredProposal {
        let nowMs = EpochTime.milliseconds(fromSeconds: now)
        return try await pool.write { connection in
            guard
                let before = try connection.queryOne(
                    "SELECT \(Self.proposalColumns) FROM proposals WHERE id = ?", id, map: Self.proposal)
            else {
                throw OperatorStoreError(.notFound, code: "not_found", message: "no proposal \(id)")
            }
            switch before.status(at: now) {
            case "pending": break
            case "expired":
                throw OperatorStoreError(
                    .conflict, code: "proposal_expired",
                    message: "proposal \(id) expired at \(RFC3339.format(before.proposal.expiresAt)) "
                        + "without a decision")
            case let status:
                let by = before.proposal.decidedBy.map { " by \($0)" } ?? ""
                let at = before.proposal.decidedAt.map { " at \(RFC3339.format($0))" } ?? ""
                throw OperatorStoreError(
                    .conflict, code: "proposal_resolved", message: "proposal \(id) was already \(status)\(by)\(at)")
            }
            var after = before
            after.proposal.decidedBy = actor
            after.proposal.decidedAt = now
            after.proposal.updatedAt = now
            switch (before.source, verdict) {
            case (.engine, _):
                try connection.run(
                    "INSERT OR REPLACE INTO proposal_resolutions (proposal_id, verdict, actor, at_ms) VALUES (?, ?, ?, ?)",
                    id, verdict.rawValue, actor, nowMs)
                after.proposal.expiresAt =
                    now + (verdict == .approve ? settings.approvalTTLSeconds : settings.rejectCooldownSeconds)
            case (.override, .approve):
                guard var override = before.proposal.override else {
                    throw OperatorStoreError(
                        .conflict, code: "proposal_invalid", message: "proposal \(id) carries no override")
                }
                override.approved = true
                override.expiresAt = min(override.expiresAt, now + settings.approvalTTLSeconds)
                try Self.upsert(override, body: try Self.encode(override), proposalID: id, on: connection)
                after.proposal.override = override
                after.proposal.expiresAt = override.expiresAt
            case (.override, .reject):
                after.proposal.expiresAt = now + settings.rejectCooldownSeconds
            }
            after.storedStatus = verdict == .approve ? "approved" : "rejected"
            after.proposal.status = verdict == .approve ? .approved : .rejected
            try connection.run(
                """
                UPDATE proposals SET status = ?, body = ?, updated_ms = ?, expires_ms = ?, decided_by = ?, decided_ms = ?
                WHERE id = ?
                """,
                after.storedStatus, try Self.encode(after.proposal), nowMs,
                EpochTime.milliseconds(fromSeconds: after.proposal.expiresAt), actor, nowMs, id)
            try AuditLog.append(audit(before, after), on: connection)
            return after
        }
    }

    private static let proposalColumns = "body, source, status, decided_by, decided_ms, expires_ms, updated_ms"

    private static func proposal(_ row: SQLiteRow) throws -> StoredProposal {
        var proposal = try decode(Proposal.self, row.string(0) ?? "")
        // The columns are authoritative (the body is the engine's or the filer's view).
        proposal.decidedBy = row.string(3)
        proposal.decidedAt = row.optionalInt64(4).map(EpochTime.seconds(fromMilliseconds:))
        proposal.expiresAt = EpochTime.seconds(fromMilliseconds: row.int64(5))
        proposal.updatedAt = EpochTime.seconds(fromMilliseconds: row.int64(6))
        let status = row.string(2) ?? "pending"
        if let known = Proposal.Status(rawValue: status) { proposal.status = known }
        return StoredProposal(
            proposal: proposal, source: StoredProposal.Source(rawValue: row.string(1) ?? "") ?? .engine,
            storedStatus: status)
    }

    // MARK: Burst requests

    /// `requested_by` of a credit the engine lent unasked (id `detected-<tenant>-<upstream>-<epoch ms>`) to a
    /// tenant detected mid-task (SPEC 6.5).
    public static let detectedBy = "allot:fan-out"

    /// Stores a burst credit request (pending until the next tick) and audits it.
    public func requestBurst(_ request: BurstRequest, requestedBy: String, audit: AuditEntry) async throws {
        try await pool.write { connection in
            try Self.insertBurst(request, requestedBy: requestedBy, orIgnore: false, on: connection)
            try AuditLog.append(audit, on: connection)
        }
    }

    /// Inserts `request` as pending (`orIgnore`: unless its id is stored already).
    private static func insertBurst(
        _ request: BurstRequest, requestedBy: String, orIgnore: Bool, on connection: SQLiteConnection
    ) throws {
        try connection.run(
            """
            INSERT \(orIgnore ? "OR IGNORE " : "")INTO burst_requests
                (id, tenant, upstream, calls, tokens, ttl_s, task_id, requested_ms, requested_by, status)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'pending')
            """,
            request.id, request.tenant, request.upstream, request.calls, request.tokens, request.ttlSeconds,
            request.taskID, EpochTime.milliseconds(fromSeconds: request.requestedAt), requestedBy)
    }

    /// The tenant's burst requests, newest first.
    public func bursts(tenant: String, limit: Int = 50) async throws -> [StoredBurst] {
        try await pool.read { connection in
            try connection.queryAll(
                "SELECT \(Self.burstColumns) FROM burst_requests WHERE tenant = ? ORDER BY requested_ms DESC, id LIMIT ?",
                tenant, max(0, limit), map: Self.burst)
        }
    }

    /// The burst request `id`, or nil.
    public func burst(id: String) async throws -> StoredBurst? {
        try await pool.read { connection in
            try connection.queryOne(
                "SELECT \(Self.burstColumns) FROM burst_requests WHERE id = ?", id, map: Self.burst)
        }
    }

    private static let burstColumns =
        "id, tenant, upstream, calls, tokens, ttl_s, task_id, requested_ms, requested_by, status, decided_ms, credit"

    private static func burst(_ row: SQLiteRow) throws -> StoredBurst {
        StoredBurst(
            request: BurstRequest(
                id: row.string(0) ?? "", tenant: row.string(1) ?? "", upstream: row.string(2) ?? "",
                calls: row.double(3), tokens: row.double(4), ttlSeconds: row.double(5), taskID: row.string(6),
                requestedAt: EpochTime.seconds(fromMilliseconds: row.int64(7))),
            requestedBy: row.string(8) ?? "", status: row.string(9) ?? "pending",
            decidedAt: row.optionalInt64(10).map(EpochTime.seconds(fromMilliseconds:)),
            credit: try row.string(11).map { try decode(BurstCredit.self, $0) })
    }

    // MARK: Encoding

    /// Stored bodies are Codable JSON (control-plane volumes: a few rows per operator action or
    /// per tick). Non-finite numbers are written as strings rather than failing.
    static func encode<T: Encodable>(_ value: T) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        encoder.nonConformingFloatEncodingStrategy = .convertToString(
            positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        return String(decoding: try encoder.encode(value), as: UTF8.self)
    }

    static func decode<T: Decodable>(_ type: T.Type, _ text: String) throws -> T {
        let decoder = JSONDecoder()
        decoder.nonConformingFloatDecodingStrategy = .convertFromString(
            positiveInfinity: "inf", negativeInfinity: "-inf", nan: "nan")
        return try decoder.decode(type, from: Data(text.utf8))
    }
}
