import CSQLite

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// One writer connection and one read-only reader connection on the same WAL database, each
/// owned by its own ``DatabaseQueue`` (its own dispatch queue).
///
/// In WAL mode readers do not block the writer and the writer does not block readers: the
/// loop's tick reads telemetry on ``reader`` while ingest commits batches on ``writer``. A read
/// sees the database as of its transaction's start: committed transactions only, never part of
/// one. One reader is enough on this two-core machine; the loop's actors share it.
///
/// SQLite documentation: <https://www.sqlite.org/wal.html#concurrency>
public final class DatabasePool: Sendable {
    /// The only connection that writes.
    public let writer: DatabaseQueue
    /// A read-only connection for queries that must not wait for writes.
    public let reader: DatabaseQueue
    /// The database file.
    public let path: String
    /// For a ``temporary(configuration:)`` pool: the directory removed with the pool.
    private let temporaryDirectory: String?

    /// Opens the writer (creating and configuring the file, WAL on) and then the reader.
    ///
    /// - Parameters:
    ///   - path: The database file (not `:memory:`, which cannot be shared between connections).
    ///   - configuration: The writer's configuration; the reader uses the same with `readOnly`.
    public convenience init(path: String, configuration: SQLiteConfiguration = SQLiteConfiguration())
        throws(SQLiteError)
    {
        try self.init(path: path, configuration: configuration, temporaryDirectory: nil)
    }

    private init(path: String, configuration: SQLiteConfiguration, temporaryDirectory: String?) throws(SQLiteError) {
        guard path != SQLiteConnection.memoryPath, !path.isEmpty else {
            throw SQLiteError(
                code: SQLITE_MISUSE,
                message: "a pool needs a database file; use DatabasePool.temporary() for a throwaway one"
            )
        }
        var writerConfiguration = configuration
        writerConfiguration.readOnly = false
        var readerConfiguration = configuration
        readerConfiguration.readOnly = true
        self.path = path
        self.temporaryDirectory = temporaryDirectory
        self.writer = try DatabaseQueue(path: path, configuration: writerConfiguration, label: "allot.sqlite.writer")
        self.reader = try DatabaseQueue(path: path, configuration: readerConfiguration, label: "allot.sqlite.reader")
    }

    /// A pool over a new database in a fresh temporary directory, removed when the pool is
    /// released. The "in-memory" mode for tests and simulations.
    ///
    /// Why a file and not a shared in-memory database: SQLite's shared-cache in-memory databases
    /// (`file:name?mode=memory&cache=shared`) cannot use WAL and report conflicts between a
    /// writer and a reader as table-level `SQLITE_LOCKED`, which `busy_timeout` does not wait on,
    /// so reads would fail while ingest writes instead of running beside it; and the `memdb` VFS
    /// has no WAL either. A small file with `synchronous=OFF` (the default here) behaves exactly
    /// like the production database and stays in the page cache, at close to in-memory speed.
    public static func temporary(
        configuration: SQLiteConfiguration = SQLiteConfiguration(synchronous: .off)
    ) throws(SQLiteError) -> DatabasePool {
        let directory = try makeTemporaryDirectory()
        do {
            return try DatabasePool(
                path: directory + "/allot.sqlite", configuration: configuration, temporaryDirectory: directory)
        } catch {
            removeDatabaseFiles(in: directory)
            throw error
        }
    }

    deinit {
        if let temporaryDirectory { Self.removeDatabaseFiles(in: temporaryDirectory) }
    }

    /// Reads on the reader connection, in a DEFERRED transaction (one consistent snapshot).
    public func read<T: Sendable>(_ body: @Sendable (SQLiteConnection) throws -> T) async throws -> T {
        try await reader.read(body)
    }

    /// Writes on the writer connection, in an IMMEDIATE transaction.
    public func write<T: Sendable>(_ body: @Sendable (SQLiteConnection) throws -> T) async throws -> T {
        try await writer.write(body)
    }

    /// Closes the reader, then the writer (the last connection to close checkpoints the WAL
    /// and removes it). Later accesses throw ``SQLiteError`` ("closed").
    public func close() async {
        await reader.close()
        await writer.close()
    }

    private static func makeTemporaryDirectory() throws(SQLiteError) -> String {
        let base = getenv("TMPDIR").map { String(cString: $0) }.flatMap { $0.isEmpty ? nil : $0 } ?? "/tmp"
        var template = Array((base + "/allot-sqlite-XXXXXX").utf8CString)
        let created = template.withUnsafeMutableBufferPointer { buffer -> Bool in
            guard let base = buffer.baseAddress else { return false }
            return mkdtemp(base) != nil
        }
        guard created else {
            throw SQLiteError(
                code: SQLITE_CANTOPEN, message: "cannot create a temporary directory in \(base): errno \(errno)")
        }
        return template.withUnsafeBufferPointer { buffer in
            String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        }
    }

    /// Removes the files SQLite may leave in a temporary directory, then the directory.
    private static func removeDatabaseFiles(in directory: String) {
        for suffix in ["", "-wal", "-shm", "-journal"] {
            unlink(directory + "/allot.sqlite" + suffix)
        }
        rmdir(directory)
    }
}
