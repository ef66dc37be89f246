import AllotJSON
import AllotSQLite

/// One record of the audit log (SPEC 8): who did what to which subject, the state before and
/// after, when, and why.
///
/// Records are appended in the same transaction as the change they describe, so the log and the
/// state can never disagree (a change that rolls back leaves no record, a record always has its
/// change). `id` is 0 until stored.
public struct AuditEntry: Sendable, Hashable {
    public var id: Int64
    /// When, milliseconds since the Unix epoch.
    public var atMs: Int64
    /// Who: the token's name, `dev` (auth disabled), `cli`, `first-start` or `policy-watcher`.
    public var actor: String
    /// The acting token's role, when a token acted.
    public var actorRole: String?
    /// What, as `noun.verb`: `override.set`, `override.propose`, `override.delete`,
    /// `proposal.approve`, `proposal.reject`, `burst.request`, `token.create`, `token.revoke`,
    /// `policy.reload`, `drain.start`, `drain.end`.
    public var action: String
    /// The object acted on: a tenant id, proposal id, token id or policy source.
    public var subject: String
    /// The tenant concerned, if any (for `GET /v1/audit?tenant=`).
    public var tenant: String?
    /// The state before (nil when there was none).
    public var before: JSON?
    /// The state after (nil when there is none, e.g. a deletion).
    public var after: JSON?
    /// Why, as the actor gave it.
    public var reason: String?

    public init(
        id: Int64 = 0, atMs: Int64, actor: String, actorRole: String? = nil, action: String, subject: String,
        tenant: String? = nil, before: JSON? = nil, after: JSON? = nil, reason: String? = nil
    ) {
        self.id = id
        self.atMs = atMs
        self.actor = actor
        self.actorRole = actorRole
        self.action = action
        self.subject = subject
        self.tenant = tenant
        self.before = before
        self.after = after
        self.reason = reason
    }
}

/// Filters and paging for reading the audit log, newest first.
public struct AuditQuery: Sendable, Hashable {
    /// Exactly this actor.
    public var actor: String?
    /// An action (`override.set`) or an action family (`override`, matching `override.*`).
    public var action: String?
    /// Records about this tenant.
    public var tenant: String?
    /// Records about this subject (tenant, proposal, token).
    public var subject: String?
    /// Records at or after this instant (ms).
    public var fromMs: Int64?
    /// Records before this instant (ms).
    public var toMs: Int64?
    /// Paging cursor: records with an id below this one (the previous page's `next_cursor`).
    public var beforeID: Int64?
    /// At most this many records.
    public var limit: Int

    public init(
        actor: String? = nil, action: String? = nil, tenant: String? = nil, subject: String? = nil,
        fromMs: Int64? = nil, toMs: Int64? = nil, beforeID: Int64? = nil, limit: Int = 100
    ) {
        self.actor = actor
        self.action = action
        self.tenant = tenant
        self.subject = subject
        self.fromMs = fromMs
        self.toMs = toMs
        self.beforeID = beforeID
        self.limit = limit
    }
}

/// The append-only `audit_log` table.
public struct AuditLog: Sendable {
    public let pool: DatabasePool

    public init(pool: DatabasePool) {
        self.pool = pool
    }

    /// Appends one record in its own transaction (for changes that have no other row, such as a
    /// policy reload). Returns its id.
    @discardableResult
    public func append(_ entry: AuditEntry) async throws -> Int64 {
        try await pool.write { connection in try Self.append(entry, on: connection) }
    }

    /// Appends one record on `connection`, inside the caller's transaction. Returns its id.
    @discardableResult
    public static func append(_ entry: AuditEntry, on connection: SQLiteConnection) throws -> Int64 {
        try connection.run(
            """
            INSERT INTO audit_log (at_ms, actor, actor_role, action, subject, tenant, before, after, reason)
            VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
            """,
            entry.atMs, entry.actor, entry.actorRole, entry.action, entry.subject, entry.tenant,
            entry.before.map { $0.serializedString(sortedKeys: false) },
            entry.after.map { $0.serializedString(sortedKeys: false) }, entry.reason)
        return connection.lastInsertRowID
    }

    /// Records matching `query`, newest first.
    public func entries(_ query: AuditQuery) async throws -> [AuditEntry] {
        var conditions: [String] = []
        var bindings: [SQLiteValue] = []
        if let actor = query.actor {
            conditions.append("actor = ?")
            bindings.append(.text(actor))
        }
        if let action = query.action {
            if action.contains(".") {
                conditions.append("action = ?")
                bindings.append(.text(action))
            } else {
                // A family: `override` matches `override.set`, `override.delete`, … (substr, not
                // LIKE, so `_` and `%` in the filter are literal).
                conditions.append("substr(action, 1, ?) = ?")
                bindings.append(.integer(Int64(action.utf8.count + 1)))
                bindings.append(.text(action + "."))
            }
        }
        if let tenant = query.tenant {
            conditions.append("tenant = ?")
            bindings.append(.text(tenant))
        }
        if let subject = query.subject {
            conditions.append("subject = ?")
            bindings.append(.text(subject))
        }
        if let fromMs = query.fromMs {
            conditions.append("at_ms >= ?")
            bindings.append(.integer(fromMs))
        }
        if let toMs = query.toMs {
            conditions.append("at_ms < ?")
            bindings.append(.integer(toMs))
        }
        if let beforeID = query.beforeID {
            conditions.append("id < ?")
            bindings.append(.integer(beforeID))
        }
        let filter = conditions.isEmpty ? "" : "WHERE " + conditions.joined(separator: " AND ") + " "
        bindings.append(.integer(Int64(max(0, query.limit))))
        let sql =
            "SELECT id, at_ms, actor, actor_role, action, subject, tenant, before, after, reason FROM audit_log "
            + filter + "ORDER BY id DESC LIMIT ?"
        let values = bindings
        return try await pool.read { connection in
            var entries: [AuditEntry] = []
            try connection.query(sql, bindings: values.map { $0 }) { row in
                entries.append(
                    AuditEntry(
                        id: row.int64(0), atMs: row.int64(1), actor: row.string(2) ?? "", actorRole: row.string(3),
                        action: row.string(4) ?? "", subject: row.string(5) ?? "", tenant: row.string(6),
                        before: row.string(7).flatMap { try? JSON.parse($0) },
                        after: row.string(8).flatMap { try? JSON.parse($0) }, reason: row.string(9)))
            }
            return entries
        }
    }

    /// How many records the log holds.
    public func count() async throws -> Int {
        try await pool.read { connection in
            Int(try connection.queryValue("SELECT count(*) FROM audit_log")?.int64 ?? 0)
        }
    }
}
