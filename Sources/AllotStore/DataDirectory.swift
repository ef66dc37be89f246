import AllotAssets
import AllotSQLite
import Foundation

/// The service's data directory (`--data`, default `./allot-data`): the SQLite database and the
/// admin token file live here. Created with mode 0700 because both are secrets' neighbours.
public struct DataDirectory: Sendable {
    /// The directory, as given (relative paths resolve against the working directory).
    public let path: String

    /// `DIR/allot.sqlite`.
    public var databasePath: String { path + "/allot.sqlite" }
    /// `DIR/admin-token`, written once (mode 0600) when `allot serve` creates the first admin token.
    public var adminTokenPath: String { path + "/admin-token" }

    public init(path: String) {
        self.path = path
    }

    /// Whether the directory exists; throws when something else is at its path.
    public func exists() throws(StoreSetupError) -> Bool {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { return false }
        guard isDirectory.boolValue else {
            throw StoreSetupError(message: "data directory \(path) exists but is not a directory")
        }
        return true
    }

    /// Creates the directory (and parents) if it does not exist, each with mode 0700; a failure says why in the
    /// system's words ("Permission denied", "No such file or directory"), naming the part that could not be made.
    public func create() throws(StoreSetupError) {
        if try exists() { return }
        var prefix = path.hasPrefix("/") ? "/" : ""
        for part in path.split(separator: "/", omittingEmptySubsequences: true) {
            prefix += (prefix.isEmpty || prefix.hasSuffix("/") ? "" : "/") + part
            if mkdir(prefix, 0o700) != 0 && errno != EEXIST {
                let reason = String(cString: strerror(errno))
                let what = prefix == path ? "" : " (making \(prefix))"
                throw StoreSetupError(message: "cannot create data directory \(path)\(what): \(reason)")
            }
        }
        guard try exists() else {
            throw StoreSetupError(message: "cannot create data directory \(path): something else is at its path")
        }
    }

    /// The migrations built into this binary (`migrations/*.sql`, embedded at build time).
    public static func migrator() throws(StoreSetupError) -> Migrator {
        do {
            return try Migrator(files: AllotAssets.migrations.map { (name: $0.name, sql: $0.text) })
        } catch {
            throw StoreSetupError(message: "the embedded migrations are invalid: \(error)")
        }
    }

    /// Creates the directory if needed, opens the database (writer and reader on one WAL file)
    /// and applies pending migrations. Returns the pool and the migrations applied now.
    ///
    /// Refuses a directory whose database file is missing while its write-ahead log is there: the file
    /// was moved or deleted (a running server says so in `/readyz` and asks for a restart), and opening
    /// would create an empty database — no tokens, no overrides, the snapshot version back at 1 — beside
    /// a log that holds the latest transactions of the one that went (outside evaluation round 27).
    public func openDatabase(
        configuration: SQLiteConfiguration = SQLiteConfiguration()
    ) async throws(StoreSetupError) -> (pool: DatabasePool, applied: [Migration]) {
        try create()
        try checkNotOrphaned()
        let migrator = try Self.migrator()
        let pool: DatabasePool
        do {
            pool = try await DatabasePool.open(path: databasePath, configuration: configuration)
        } catch {
            throw StoreSetupError(message: "cannot open database \(databasePath): \(error)")
        }
        do {
            let applied = try await pool.writer.access { (connection) throws(MigrationError) -> [Migration] in
                try migrator.migrate(connection)
            }
            return (pool, applied)
        } catch {
            await pool.close()
            throw StoreSetupError(message: "\(databasePath): \(error)")
        }
    }
}

extension DataDirectory {
    /// Throws when `allot.sqlite` is missing and a non-empty `allot.sqlite-wal` is there.
    func checkNotOrphaned() throws(StoreSetupError) {
        let log = databasePath + "-wal"
        let manager = FileManager.default
        guard !manager.fileExists(atPath: databasePath), manager.fileExists(atPath: log) else { return }
        let size = ((try? manager.attributesOfItem(atPath: log))?[.size] as? NSNumber)?.int64Value ?? 0
        guard size > 0 else { return }
        throw StoreSetupError(
            message: "\(databasePath) is missing but its write-ahead log \(log) (\(size) bytes) is there: the "
                + "database file was moved or deleted. Put it back and start again (the log holds its latest "
                + "transactions); to start from an empty database instead, remove \(log) and \(databasePath)-shm")
    }
}

/// The data directory or database could not be prepared; the message says what and where.
public struct StoreSetupError: Error, Sendable, CustomStringConvertible {
    public var message: String

    public init(message: String) {
        self.message = message
    }

    public var description: String { message }
}
