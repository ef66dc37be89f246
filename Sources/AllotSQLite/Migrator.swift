#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Brings a database's schema up to date by applying the pending migrations, in version order,
/// each exactly once and in its own transaction.
///
/// What has been applied is recorded in
/// `schema_migrations(version INTEGER PRIMARY KEY, name TEXT NOT NULL, checksum TEXT NOT NULL,
/// applied_at INTEGER NOT NULL)`. Before applying anything the migrator refuses (with a
/// ``MigrationError`` naming the migration):
/// - a database with a migration this binary does not know: it was written by a newer Allot,
///   and running an older binary against a newer schema would corrupt data silently;
/// - a database where an applied migration's file has changed since (another checksum or
///   name): the schema is no longer what the files say.
///
/// Each migration runs in an IMMEDIATE transaction together with its `schema_migrations` row,
/// so a failing migration leaves no trace (SQLite DDL is transactional) and a crash between
/// migrations leaves a consistent version. Because the row is checked again inside the
/// transaction, two processes migrating at once apply each migration once. A migration must
/// therefore not contain `BEGIN`/`COMMIT`, `VACUUM` or `PRAGMA journal_mode`, and
/// `PRAGMA foreign_keys` has no effect inside it.
///
/// Running it again is a no-op: it returns an empty list.
///
/// ```swift
/// let migrator = try Migrator(files: AllotAssets.migrations.map { ($0.name, $0.text) })
/// let applied = try await database.writer.access { try migrator.migrate($0) }
/// ```
public struct Migrator: Sendable {
    /// The known migrations, in version order.
    public let migrations: [Migration]

    /// - Throws: ``MigrationError`` (`duplicateVersion`) when two migrations share a version.
    public init(migrations: [Migration]) throws(MigrationError) {
        let sorted = migrations.sorted { ($0.version, $0.fileName) < ($1.version, $1.fileName) }
        for (previous, next) in zip(sorted, sorted.dropFirst()) where previous.version == next.version {
            throw MigrationError(
                kind: .duplicateVersion,
                file: next.fileName,
                message: "migrations \(previous.fileName) and \(next.fileName) have the same version \(next.version)"
            )
        }
        self.migrations = sorted
    }

    /// Migrations from files named `NNNN_name.sql` (e.g. `AllotAssets.migrations`).
    ///
    /// - Throws: ``MigrationError`` for the first bad file name or duplicated version.
    public init(files: [(name: String, sql: String)]) throws(MigrationError) {
        var migrations: [Migration] = []
        for file in files {
            migrations.append(try Migration(fileName: file.name, sql: file.sql))
        }
        try self.init(migrations: migrations)
    }

    /// The table that records applied migrations.
    public static let tableName = "schema_migrations"

    static let createTable = """
        CREATE TABLE IF NOT EXISTS schema_migrations (
            version INTEGER PRIMARY KEY,
            name TEXT NOT NULL,
            checksum TEXT NOT NULL,
            applied_at INTEGER NOT NULL
        )
        """

    /// Applies every pending migration, in version order, and returns those it applied.
    ///
    /// - Parameters:
    ///   - connection: A writable connection (not inside a transaction).
    ///   - nowMilliseconds: The `applied_at` to record, in milliseconds since the Unix epoch.
    /// - Throws: ``MigrationError``: the database is refused (unknown or modified migration), or a
    ///   migration failed (rolled back; the ones before it stay applied, none after it ran).
    @discardableResult
    public func migrate(
        _ connection: SQLiteConnection,
        nowMilliseconds: Int64 = Migrator.wallClockMilliseconds()
    ) throws(MigrationError) -> [Migration] {
        do {
            try connection.execute(Self.createTable)
        } catch {
            throw MigrationError(
                kind: .database,
                file: nil,
                message: "cannot create the \(Self.tableName) table: \(error.message)",
                underlying: error
            )
        }
        var applied: [Migration] = []
        for migration in try pendingMigrations(connection) {
            if try apply(migration, to: connection, nowMilliseconds: nowMilliseconds) {
                applied.append(migration)
            }
        }
        return applied
    }

    /// The migrations not yet applied to the database, after checking the applied ones.
    ///
    /// - Throws: ``MigrationError`` when the database is refused or cannot be read.
    public func pendingMigrations(_ connection: SQLiteConnection) throws(MigrationError) -> [Migration] {
        let recorded = try appliedMigrations(connection)
        try validate(recorded)
        let appliedVersions = Set(recorded.map(\.version))
        return migrations.filter { !appliedVersions.contains($0.version) }
    }

    /// What the database's `schema_migrations` table records, by version (empty when there is
    /// no such table yet).
    public func appliedMigrations(_ connection: SQLiteConnection) throws(MigrationError) -> [AppliedMigration] {
        do {
            let exists = try connection.queryValue(
                "SELECT 1 FROM sqlite_schema WHERE type = 'table' AND name = ?", Self.tableName)
            guard exists != nil else { return [] }
            return try connection.queryAll(
                "SELECT version, name, checksum, applied_at FROM schema_migrations ORDER BY version"
            ) { row in
                AppliedMigration(
                    version: row.int(0), name: row.string(1) ?? "", checksum: row.string(2) ?? "",
                    appliedAt: row.int64(3))
            }
        } catch {
            let sqliteError = error as? SQLiteError
            throw MigrationError(
                kind: .database,
                file: nil,
                message:
                    "cannot read the applied migrations from \(Self.tableName): \(sqliteError?.message ?? "\(error)")",
                underlying: sqliteError
            )
        }
    }

    /// Refuses a database whose recorded migrations do not match this binary's files.
    private func validate(_ recorded: [AppliedMigration]) throws(MigrationError) {
        let known = Dictionary(uniqueKeysWithValues: migrations.map { ($0.version, $0) })
        let newestKnown = migrations.last?.version ?? 0
        for record in recorded {
            guard let migration = known[record.version] else {
                let reason =
                    record.version > newestKnown
                    ? "it was written by a newer Allot"
                    : "this binary has no migration \(record.version) (was a migration file removed or renumbered?)"
                throw MigrationError(
                    kind: .unknownMigration,
                    file: record.identifier,
                    message: "database has migration \(record.identifier) which this binary does not know; "
                        + "\(reason) — refusing to open"
                )
            }
            guard migration.name == record.name else {
                throw MigrationError(
                    kind: .modifiedMigration,
                    file: migration.fileName,
                    message: "database has migration \(record.identifier) applied, but this binary's migration "
                        + "\(record.version) is \(migration.fileName) — refusing to open"
                )
            }
            guard migration.checksum == record.checksum else {
                throw MigrationError(
                    kind: .modifiedMigration,
                    file: migration.fileName,
                    message: "migration \(migration.fileName) was changed after it was applied to this database "
                        + "(checksum \(record.checksum) recorded, \(migration.checksum) now); applied migrations "
                        + "must not change, add a new migration instead — refusing to open"
                )
            }
        }
    }

    /// Runs one migration and records it, in one transaction. Returns false when another
    /// process recorded it first.
    private func apply(
        _ migration: Migration,
        to connection: SQLiteConnection,
        nowMilliseconds: Int64
    ) throws(MigrationError) -> Bool {
        do {
            return try connection.transaction(.immediate) { connection in
                let recorded = try connection.queryValue(
                    "SELECT 1 FROM schema_migrations WHERE version = ?", migration.version)
                if recorded != nil { return false }
                try connection.execute(migration.sql)
                try connection.run(
                    "INSERT INTO schema_migrations(version, name, checksum, applied_at) VALUES (?, ?, ?, ?)",
                    migration.version, migration.name, migration.checksum, nowMilliseconds
                )
                return true
            }
        } catch let error as SQLiteError {
            var message = "migration \(migration.fileName) failed and was rolled back: \(error.message)"
            if let sql = error.sql, !sql.isEmpty { message += " (in: \(SQLiteError.abbreviated(sql)))" }
            throw MigrationError(kind: .migrationFailed, file: migration.fileName, message: message, underlying: error)
        } catch {
            throw MigrationError(
                kind: .migrationFailed,
                file: migration.fileName,
                message: "migration \(migration.fileName) failed and was rolled back: \(error)"
            )
        }
    }

    /// The wall clock in milliseconds since the Unix epoch (`CLOCK_REALTIME`).
    public static func wallClockMilliseconds() -> Int64 {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
    }
}
