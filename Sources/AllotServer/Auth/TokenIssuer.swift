import AllotCore
import AllotCrypto
import AllotJSON
import AllotStore
import AllotTime

#if canImport(Glibc)
    import Glibc
#endif

/// Creates and revokes API tokens (SPEC 8) for `allot tokens`, `POST /v1/tokens` and the first
/// start of `allot serve`. The secret is generated here (256 random bits, `APIToken`), handed back
/// once to be shown, and only its SHA-256 reaches the database.
public struct TokenIssuer: Sendable {
    public let store: TokenStore

    public init(store: TokenStore) {
        self.store = store
    }

    /// Who asks for a change, for the audit record.
    public struct Actor: Sendable, Hashable {
        public var name: String
        public var role: String?

        public init(name: String, role: String? = nil) {
            self.name = name
            self.role = role
        }

        /// `allot tokens` on the command line (whoever can read the data directory).
        public static let cli = Actor(name: "cli")
    }

    /// A token just created: its record and the secret, to be shown exactly once.
    public struct Issued: Sendable {
        public var record: TokenRecord
        public var secret: String
    }

    /// Longest token name accepted.
    public static let maxNameLength = 128

    /// Creates a token with `role` and `name`, audited as `token.create` by `actor`.
    ///
    /// - Throws: ``TokenError`` for an empty or overlong name or an unknown role; the database's
    ///   error otherwise.
    public func create(name: String, role: String, gatewayScope: String? = nil, actor: Actor, now: Double) async throws
        -> Issued
    {
        var (record, secret, hash) = try Self.mint(name: name, role: role, createdBy: actor.name, now: now)
        if let gatewayScope {
            guard role == "gateway" else {
                throw TokenError(field: "gateway_scope", message: "only a gateway token is limited to gateway ids")
            }
            guard GatewayScope.isValid(gatewayScope) else {
                throw TokenError(
                    field: "gateway_scope",
                    message: "a gateway id (1-\(GatewayIdentifier.maxLength) characters of \(GatewayIdentifier.charset)) "
                        + "or a prefix ending in *, got '\(gatewayScope.prefix(64))'")
            }
            record.gatewayScope = gatewayScope
        }
        try await store.create(record, hash: hash, audit: Self.audit(record, actor: actor, nowMs: record.createdMs))
        return Issued(record: record, secret: secret)
    }

    /// Revokes token `id`, audited as `token.revoke`. Returns the record after revocation, or nil
    /// for an unknown id. Revoking twice is harmless (and audited once).
    /// - Throws: ``LastAdminToken`` when `keepingAnAdmin` (the HTTP route) and `id` is the last admin token in
    ///   force; a database error otherwise.
    public func revoke(
        id: String, actor: Actor, now: Double, keepingAnAdmin: Bool = false
    ) async throws -> (record: TokenRecord, changed: Bool)? {
        let nowMs = EpochTime.milliseconds(fromSeconds: now)
        let result = try await store.revoke(id: id, atMs: nowMs, by: actor.name, keepingAnAdmin: keepingAnAdmin) {
            before, after in
            AuditEntry(
                atMs: nowMs, actor: actor.name, actorRole: actor.role, action: "token.revoke", subject: before.id,
                before: before.json, after: after.json)
        }
        return result.map { ($0.after, $0.before != $0.after) }
    }

    /// First start (SPEC 8): when the database holds no admin token (tokens of other roles, e.g.
    /// created with `allot tokens create` before the first `allot serve`, do not count), creates one
    /// and writes it to `path` with mode 0600. Never overwrites an existing file (`O_EXCL`): if one
    /// is there, the token is still created and returned (to be printed once), and `wroteFile` is
    /// false.
    ///
    /// - Returns: nil when an admin token (even a revoked one) already exists (nothing to do).
    public func bootstrapAdmin(tokenFile path: String, now: Double) async throws -> (
        issued: Issued, wroteFile: Bool, fileError: String?
    )? {
        let (record, secret, hash) = try Self.mint(name: "admin", role: "admin", createdBy: "first-start", now: now)
        let audit = Self.audit(record, actor: Actor(name: "first-start"), nowMs: record.createdMs)
        guard try await store.createFirst(record, hash: hash, audit: audit) else { return nil }
        let issued = Issued(record: record, secret: secret)
        switch Self.writeSecretFile(path, contents: secret + "\n") {
        case .written: return (issued, true, nil)
        case .exists: return (issued, false, "\(path) exists and was not overwritten")
        case .failed(let message): return (issued, false, message)
        }
    }

    static func mint(name: String, role: String, createdBy: String, now: Double) throws -> (
        TokenRecord, String, String
    ) {
        let trimmed = name.trimmingCharacters(in: .whitespaces)
        guard !trimmed.isEmpty else { throw TokenError(field: "name", message: "a token needs a name") }
        guard trimmed.count <= maxNameLength else {
            throw TokenError(field: "name", message: "a token name has at most \(maxNameLength) characters")
        }
        // Shown in `allot tokens list`'s table, the audit log and the dashboard: a newline broke the table (round 13).
        guard !trimmed.unicodeScalars.contains(where: { $0.properties.generalCategory == .control }) else {
            throw TokenError(field: "name", message: "a token name cannot contain control characters")
        }
        guard ["gateway", "operator", "sre", "admin"].contains(role) else {
            throw TokenError(
                field: "role", message: "unknown role '\(role)'; roles are gateway, operator, sre, admin")
        }
        let secret = try APIToken.generate()
        let record = TokenRecord(
            id: "tok-" + Hex.encode(try SecureRandom.bytes(6)), name: trimmed, role: role,
            createdMs: EpochTime.milliseconds(fromSeconds: now), createdBy: createdBy)
        return (record, secret, APIToken.storageHash(of: secret))
    }

    static func audit(_ record: TokenRecord, actor: Actor, nowMs: Int64) -> AuditEntry {
        AuditEntry(
            atMs: nowMs, actor: actor.name, actorRole: actor.role, action: "token.create", subject: record.id,
            after: record.json)
    }

    enum WriteOutcome: Equatable {
        case written
        case exists
        case failed(String)
    }

    /// Creates `path` with mode 0600 and writes `contents`; never replaces an existing file.
    static func writeSecretFile(_ path: String, contents: String) -> WriteOutcome {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            let code = errno
            if code == EEXIST { return .exists }
            return .failed("cannot create \(path): \(String(cString: strerror(code)))")
        }
        defer { close(descriptor) }
        // The umask cannot widen 0600, but make the mode explicit whatever the umask was.
        fchmod(descriptor, 0o600)
        var bytes = Array(contents.utf8)[...]
        while !bytes.isEmpty {
            let written = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress, $0.count) }
            if written < 0 {
                if errno == EINTR { continue }
                return .failed("cannot write \(path): \(String(cString: strerror(errno)))")
            }
            bytes = bytes.dropFirst(written)
        }
        guard fsync(descriptor) == 0 else { return .failed("cannot sync \(path): \(String(cString: strerror(errno)))") }
        return .written
    }
}

/// Invalid input to token creation, naming the field.
public struct TokenError: Error, Sendable, Hashable, CustomStringConvertible {
    public var field: String
    public var message: String

    public init(field: String, message: String) {
        self.field = field
        self.message = message
    }

    public var description: String { message }
}
