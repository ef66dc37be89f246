import AllotSQLite

/// Opens a database file (or a throwaway one) with its schema up to date, for the places that have
/// no data directory: tests, simulations and benchmarks. `allot serve` uses
/// ``DataDirectory/openDatabase(configuration:)``; both apply the same embedded migrations
/// (``DataDirectory/migrator()``, `migrations/*.sql`, the schema's only source: SPEC section 2).
public enum StoreDatabase {
    /// Opens (creating if needed) the database at `path` as a writer + reader pool and migrates it.
    ///
    /// - Parameters:
    ///   - path: The database file.
    ///   - configuration: Connection settings; `synchronous=FULL` by default, which is what makes
    ///     an acknowledged telemetry batch durable (SPEC section 3).
    /// - Throws: ``AllotSQLite/SQLiteError`` (cannot open) or ``StoreSetupError`` (migrations).
    public static func open(path: String, configuration: SQLiteConfiguration = SQLiteConfiguration()) async throws
        -> DatabasePool
    {
        let pool = try await DatabasePool.open(path: path, configuration: configuration)
        do {
            try await migrate(pool)
        } catch {
            await pool.close()
            throw error
        }
        return pool
    }

    /// A migrated database in a fresh temporary directory, removed when the pool is released
    /// (`synchronous=OFF` unless `configuration` says otherwise).
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
        let migrator = try DataDirectory.migrator()
        return try await pool.writer.access { connection in
            try migrator.migrate(connection).map(\.version)
        }
    }
}
