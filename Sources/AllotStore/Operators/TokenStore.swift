import AllotCore
import AllotJSON
import AllotSQLite

/// An API token as the database knows it (SPEC 8): never the secret, only its metadata. The
/// secret's SHA-256 is stored beside it but never leaves ``TokenStore`` except for the
/// constant-time comparison at authentication.
public struct TokenRecord: Sendable, Hashable {
    /// Public, non-secret id (`tok-` and 12 hex digits): what `allot tokens list` shows and
    /// `allot tokens revoke` takes.
    public var id: String
    /// Who or what the token is for; the audit log's "who".
    public var name: String
    /// `gateway`, `operator`, `sre` or `admin`.
    public var role: String
    public var createdMs: Int64
    /// `cli`, `first-start`, or the admin token name that created it over HTTP.
    public var createdBy: String
    /// Last successful authentication (refreshed at most about once a minute).
    public var lastUsedMs: Int64?
    public var revokedMs: Int64?
    public var revokedBy: String?
    /// For a `gateway` token, the gateway ids it may speak for: an exact id, or a prefix ending in `*`
    /// (``GatewayScope``). nil: any.
    public var gatewayScope: String?

    public init(
        id: String, name: String, role: String, createdMs: Int64, createdBy: String, lastUsedMs: Int64? = nil,
        revokedMs: Int64? = nil, revokedBy: String? = nil, gatewayScope: String? = nil
    ) {
        self.gatewayScope = gatewayScope
        self.id = id
        self.name = name
        self.role = role
        self.createdMs = createdMs
        self.createdBy = createdBy
        self.lastUsedMs = lastUsedMs
        self.revokedMs = revokedMs
        self.revokedBy = revokedBy
    }

    public var isRevoked: Bool { revokedMs != nil }

    /// The record as JSON for listings and audit records (no secret, no hash).
    public var json: JSON {
        [
            "id": .string(id), "name": .string(name), "role": .string(role), "created_ms": .int(createdMs),
            "created_by": .string(createdBy), "last_used_ms": lastUsedMs.map(JSON.int) ?? .null,
            "revoked": .bool(isRevoked), "revoked_ms": revokedMs.map(JSON.int) ?? .null,
            "revoked_by": revokedBy.map(JSON.string) ?? .null,
            "gateway_scope": gatewayScope.map(JSON.string) ?? .null,
        ]
    }
}

/// Revoking this token would leave no admin token in force (``TokenStore/revoke(id:atMs:by:keepingAnAdmin:audit:)``).
public struct LastAdminToken: Error, Sendable, Equatable {
    public var id: String
}

/// Which gateway ids a `gateway` token may speak for (`gateway_scope`): an exact id, or a prefix ending in `*`
/// (`gw-eu-*`; a lone `*` is any id). Written in gateway ids' characters (`[A-Za-z0-9._:/-]`, at most 128).
public enum GatewayScope {
    /// Whether `scope` is well formed: a gateway id, or at most 127 characters of one and `*`.
    public static func isValid(_ scope: String) -> Bool {
        guard scope.hasSuffix("*") else { return GatewayIdentifier.isValid(scope) }
        guard scope.utf8.count <= GatewayIdentifier.maxLength else { return false }
        let stem = scope.dropLast()
        return stem.isEmpty || GatewayIdentifier.isValid(String(stem))
    }

    /// Why `gateway` is refused to a token of `scope`: the one wording of the telemetry route's and the others'.
    public static func refusal(_ scope: String, gateway: String) -> String {
        "may speak only for gateways \(scope), not \(gateway)"
    }

    /// Whether `gateway` is within `scope` (nil: any).
    public static func allows(_ scope: String?, gateway: String) -> Bool {
        guard let scope else { return true }
        if scope.hasSuffix("*") { return gateway.hasPrefix(scope.dropLast()) }
        return gateway == scope
    }
}

/// The `api_tokens` table. Creation and revocation append their audit record in the same
/// transaction.
public struct TokenStore: Sendable {
    public let pool: DatabasePool

    public init(pool: DatabasePool) {
        self.pool = pool
    }

    /// Stores a new token by its hash (lowercase hex SHA-256, 64 characters) and audits it.
    /// The caller generated the secret and shows it once; it never reaches this function.
    public func create(_ record: TokenRecord, hash: String, audit: AuditEntry) async throws {
        try await pool.write { connection in
            try connection.run(
                """
                INSERT INTO api_tokens (id, name, role, token_hash, created_ms, created_by, gateway_scope)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                """,
                record.id, record.name, record.role, hash, record.createdMs, record.createdBy, record.gatewayScope)
            try AuditLog.append(audit, on: connection)
        }
    }

    /// Creates `record` only when the table has no token of its role yet (`allot serve` creating the
    /// first admin token: tokens of other roles, e.g. made with `allot tokens create` before the first
    /// start, do not count). Returns false, changing nothing, when a token of that role (even a revoked
    /// one) exists.
    public func createFirst(_ record: TokenRecord, hash: String, audit: AuditEntry) async throws -> Bool {
        try await pool.write { connection in
            let count =
                try connection.queryValue("SELECT count(*) FROM api_tokens WHERE role = ?", record.role)?.int64 ?? 0
            guard count == 0 else { return false }
            try connection.run(
                """
                INSERT INTO api_tokens (id, name, role, token_hash, created_ms, created_by, gateway_scope)
                VALUES (?, ?, ?, ?, ?, ?, ?)
                """,
                record.id, record.name, record.role, hash, record.createdMs, record.createdBy, record.gatewayScope)
            try AuditLog.append(audit, on: connection)
            return true
        }
    }

    /// Every token, oldest first.
    public func all() async throws -> [TokenRecord] {
        try await pool.read { connection in
            try connection.queryAll("SELECT \(Self.columns) FROM api_tokens ORDER BY created_ms, id") {
                Self.record($0)
            }
        }
    }

    /// The token `id`, or nil.
    public func token(id: String) async throws -> TokenRecord? {
        try await pool.read { connection in
            try connection.queryOne("SELECT \(Self.columns) FROM api_tokens WHERE id = ?", id) { Self.record($0) }
        }
    }

    /// The token whose stored hash is `hash`, with that stored hash (for the caller's
    /// constant-time comparison), or nil. Revoked tokens are returned too: the caller refuses them.
    public func token(hash: String) async throws -> (record: TokenRecord, storedHash: String)? {
        try await pool.read { connection in
            try connection.queryOne("SELECT \(Self.columns), token_hash FROM api_tokens WHERE token_hash = ?", hash) {
                (Self.record($0), $0.string(9) ?? "")
            }
        }
    }

    /// Revokes token `id` and audits it. Returns the record before and after; nil when there is no
    /// such token. Revoking a revoked token changes nothing and appends no record (`before ==
    /// after`).
    public func revoke(
        id: String, atMs: Int64, by actor: String, keepingAnAdmin: Bool = false,
        audit: @escaping @Sendable (TokenRecord, TokenRecord) -> AuditEntry
    ) async throws -> (before: TokenRecord, after: TokenRecord)? {
        try await pool.write { connection in
            guard
                let before = try connection.queryOne(
                    "SELECT \(Self.columns) FROM api_tokens WHERE id = ?", id, map: { Self.record($0) })
            else { return nil }
            guard !before.isRevoked else { return (before, before) }
            if keepingAnAdmin, before.role == "admin",
                try connection.queryValue(
                    "SELECT count(*) FROM api_tokens WHERE role = 'admin' AND revoked_ms IS NULL")?.int64 ?? 0 <= 1
            {
                throw LastAdminToken(id: id)
            }
            try connection.run(
                "UPDATE api_tokens SET revoked_ms = ?, revoked_by = ? WHERE id = ?", atMs, actor, id)
            var after = before
            after.revokedMs = atMs
            after.revokedBy = actor
            try AuditLog.append(audit(before, after), on: connection)
            return (before, after)
        }
    }

    /// Records a successful use (not audited: it is not a change anyone made).
    public func touch(id: String, atMs: Int64) async throws {
        try await pool.write { connection in
            try connection.run(
                "UPDATE api_tokens SET last_used_ms = ? WHERE id = ? AND (last_used_ms IS NULL OR last_used_ms < ?)",
                atMs, id, atMs)
        }
    }

    /// How many tokens exist, revoked ones included.
    public func count() async throws -> Int {
        try await pool.read { connection in
            Int(try connection.queryValue("SELECT count(*) FROM api_tokens")?.int64 ?? 0)
        }
    }

    private static let columns =
        "id, name, role, created_ms, created_by, last_used_ms, revoked_ms, revoked_by, gateway_scope"

    private static func record(_ row: SQLiteRow) -> TokenRecord {
        TokenRecord(
            id: row.string(0) ?? "", name: row.string(1) ?? "", role: row.string(2) ?? "", createdMs: row.int64(3),
            createdBy: row.string(4) ?? "", lastUsedMs: row.optionalInt64(5), revokedMs: row.optionalInt64(6),
            revokedBy: row.string(7), gatewayScope: row.string(8))
    }
}
