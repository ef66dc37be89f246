import AllotArguments
import AllotSQLite
import AllotStore

/// `allot migrate [--data DIR] [--status]`.
enum MigrateCommand {
    static func run(_ command: ParsedCommand, output: CommandOutput) async throws -> Int32 {
        let directory = DataDirectory(path: command.string("data") ?? "./allot-data")
        if command.flag("status") {
            return try await status(directory, output: output)
        }
        let (pool, applied) = try await directory.openDatabase()
        await pool.close()
        if applied.isEmpty {
            output.out("\(directory.databasePath): up to date")
        } else {
            for migration in applied { output.out("applied \(migration.fileName)") }
            output.out("\(directory.databasePath): \(applied.count) migration(s) applied")
        }
        return 0
    }

    private static func status(_ directory: DataDirectory, output: CommandOutput) async throws -> Int32 {
        let migrator = try DataDirectory.migrator()
        try directory.create()
        let pool = try await DatabasePool.open(path: directory.databasePath)
        defer { Task { await pool.close() } }
        let (applied, pending) = try await pool.writer.access {
            (connection) throws(MigrationError) -> ([AppliedMigration], [Migration]) in
            (try migrator.appliedMigrations(connection), try migrator.pendingMigrations(connection))
        }
        for migration in applied {
            let number = String(migration.version)
            output.out("applied  \(String(repeating: "0", count: max(0, 4 - number.count)))\(number)_\(migration.name)")
        }
        for migration in pending { output.out("pending  \(migration.fileName)") }
        return 0
    }
}
