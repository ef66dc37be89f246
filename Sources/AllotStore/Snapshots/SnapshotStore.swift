import AllotSQLite

/// One persisted allocation snapshot (a row of `snapshots`, `migrations/0002_snapshots_state.sql`).
///
/// The store keeps bytes only: the snapshot and its slice plan in AllotLoop's binary forms. The
/// loop owns their meaning, so storage does not depend on the wire model.
public struct SnapshotRecord: Sendable, Equatable {
    /// How a version came to be published (SPEC section 7).
    public enum Kind: String, Sendable, CaseIterable {
        /// A tick's decision, published as computed.
        case tick
        /// The first half of a make-before-break transition: shrinks published, growth held back.
        case shrink
        /// The second half: the held-back growth, once the shrink is enforced (or the wait ended).
        case growth
        /// `allot drain`: a lease that has already expired, so gateways move to `fallback`.
        case drain
    }

    public var version: Int64
    public var generatedMs: Int64
    public var expiresMs: Int64
    public var kind: Kind
    public var policyVersion: String
    /// The global view (AllotLoop's binary form of the snapshot).
    public var body: [UInt8]
    /// The per-gateway slice plan (binary, written and read by AllotLoop).
    public var slices: [UInt8]
    /// For a `shrink`: the target to publish once the shrink is enforced (body, slices).
    public var pending: (body: [UInt8], slices: [UInt8])?

    public init(
        version: Int64, generatedMs: Int64, expiresMs: Int64, kind: Kind, policyVersion: String, body: [UInt8],
        slices: [UInt8], pending: (body: [UInt8], slices: [UInt8])? = nil
    ) {
        self.version = version
        self.generatedMs = generatedMs
        self.expiresMs = expiresMs
        self.kind = kind
        self.policyVersion = policyVersion
        self.body = body
        self.slices = slices
        self.pending = pending
    }

    public static func == (lhs: SnapshotRecord, rhs: SnapshotRecord) -> Bool {
        lhs.version == rhs.version && lhs.generatedMs == rhs.generatedMs && lhs.expiresMs == rhs.expiresMs
            && lhs.kind == rhs.kind && lhs.policyVersion == rhs.policyVersion && lhs.body == rhs.body
            && lhs.slices == rhs.slices && lhs.pending?.body == rhs.pending?.body
            && lhs.pending?.slices == rhs.pending?.slices
    }
}

/// A snapshot could not be stored because its version does not exceed the newest stored one:
/// versions must strictly increase, across restarts too (SPEC section 7).
public struct SnapshotVersionError: Error, Sendable, Equatable, CustomStringConvertible {
    public var version: Int64
    public var newest: Int64

    public init(version: Int64, newest: Int64) {
        self.version = version
        self.newest = newest
    }

    public var description: String {
        "snapshot version \(version) does not exceed the newest stored version \(newest)"
    }
}

/// The `snapshots` table: persisted snapshots, newest kept, versions that never go back.
///
/// The Publisher calls ``save(_:keep:)`` and makes a version visible only after it returns (the
/// row is committed, with the pool's `synchronous` setting: FULL in service). On start it serves
/// ``latest()`` before the first tick.
public struct SnapshotStore: Sendable {
    public let pool: DatabasePool

    public init(pool: DatabasePool) {
        self.pool = pool
    }

    /// Stores `record` and prunes older rows so that at most `keep` remain (the newest is never
    /// pruned, so the version sequence survives).
    ///
    /// - Throws: ``SnapshotVersionError`` when `record.version` is not above every stored version
    ///   (nothing is written), or the database's error.
    public func save(_ record: SnapshotRecord, keep: Int = 16) async throws {
        let keep = Int64(max(1, keep))
        try await pool.write { connection in
            let newest = try connection.queryValue("SELECT max(version) FROM snapshots")?.int64 ?? 0
            guard record.version > newest else { throw SnapshotVersionError(version: record.version, newest: newest) }
            try connection.run(
                """
                INSERT INTO snapshots (version, generated_ms, expires_ms, kind, policy_version, body, slices,
                    pending_body, pending_slices)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
                record.version, record.generatedMs, record.expiresMs, record.kind.rawValue, record.policyVersion,
                record.body, record.slices, record.pending?.body, record.pending?.slices)
            try connection.run("DELETE FROM snapshots WHERE version <= ?", record.version - keep)
        }
    }

    /// The newest stored snapshot, or nil before the first publish.
    public func latest() async throws -> SnapshotRecord? {
        try await pool.read { connection in
            try connection.queryOne("\(Self.selectSQL) ORDER BY version DESC LIMIT 1") { Self.record($0) } ?? nil
        }
    }

    /// The stored snapshot `version`, if it was not pruned.
    public func snapshot(version: Int64) async throws -> SnapshotRecord? {
        try await pool.read { connection in
            try connection.queryOne("\(Self.selectSQL) WHERE version = ?", version) { Self.record($0) } ?? nil
        }
    }

    /// The newest stored version, 0 when none.
    public func newestVersion() async throws -> Int64 {
        try await pool.read { connection in
            try connection.queryValue("SELECT max(version) FROM snapshots")?.int64 ?? 0
        }
    }

    /// Every stored version, oldest first.
    public func versions() async throws -> [Int64] {
        try await pool.read { connection in
            try connection.queryAll("SELECT version FROM snapshots ORDER BY version") { $0.int64(0) }
        }
    }

    private static let selectSQL =
        "SELECT version, generated_ms, expires_ms, kind, policy_version, body, slices, pending_body, pending_slices "
        + "FROM snapshots"

    private static func record(_ row: SQLiteRow) -> SnapshotRecord? {
        guard let kind = SnapshotRecord.Kind(rawValue: row.string(3) ?? "") else { return nil }
        var pending: (body: [UInt8], slices: [UInt8])?
        if let body = row.blob(7) { pending = (body, row.blob(8) ?? []) }
        return SnapshotRecord(
            version: row.int64(0), generatedMs: row.int64(1), expiresMs: row.int64(2), kind: kind,
            policyVersion: row.string(4) ?? "", body: row.blob(5) ?? [], slices: row.blob(6) ?? [], pending: pending)
    }
}
