import AllotAssets
import AllotSQLite

/// Opens Allot's database with its schema up to date.
///
/// The schema's only source is `migrations/*.sql` (SPEC section 2), embedded in the binary by
/// `AllotAssets`; ``migrate(_:)`` applies the pending ones with ``AllotSQLite/Migrator``.
public enum StoreDatabase {
    /// Opens (creating if needed) the database at `path` as a writer + reader pool and migrates it.
    ///
    /// - Parameters:
    ///   - path: The database file, e.g. `allot-data/allot.sqlite`.
    ///   - configuration: Connection settings; `synchronous=FULL` by default, which is what makes
    ///     an acknowledged telemetry batch durable (SPEC section 3).
    /// - Throws: ``AllotSQLite/SQLiteError`` (cannot open) or ``AllotSQLite/MigrationError``.
    public static func open(path: String, configuration: SQLiteConfiguration = SQLiteConfiguration()) async throws
        -> DatabasePool
    {
        let pool = try DatabasePool(path: path, configuration: configuration)
        do {
            try await migrate(pool)
        } catch {
            await pool.close()
            throw error
        }
        return pool
    }

    /// A migrated database in a fresh temporary directory, removed when the pool is released
    /// (`synchronous=OFF` unless `configuration` says otherwise). For tests, simulations and
    /// benchmarks.
    public static func temporary(configuration: SQLiteConfiguration = SQLiteConfiguration(synchronous: .off))
        async throws -> DatabasePool
    {
        let pool = try DatabasePool.temporary(configuration: configuration)
        try await migrate(pool)
        return pool
    }

    /// Applies the pending embedded migrations on the pool's writer; returns the versions applied.
    @discardableResult
    public static func migrate(_ pool: DatabasePool) async throws -> [Int] {
        let migrator = try Migrator(files: AllotAssets.migrations.map { ($0.name, $0.text) })
        return try await pool.writer.access { connection in
            try migrator.migrate(connection).map(\.version)
        }
    }
}
