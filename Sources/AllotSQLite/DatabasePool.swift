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

    /// Opens the writer (creating and configuring the file, WAL on) and then the reader, on the
    /// calling thread. From async code prefer ``open(path:configuration:)``.
    ///
    /// - Parameters:
    ///   - path: The database file (not `:memory:`, which cannot be shared between connections).
    ///   - configuration: The writer's configuration; the reader uses the same with `readOnly`.
    public convenience init(path: String, configuration: SQLiteConfiguration = SQLiteConfiguration())
        throws(SQLiteError)
    {
        try self.init(path: path, configuration: configuration, temporaryDirectory: nil)
    }

    private convenience init(
        path: String,
        configuration: SQLiteConfiguration,
        temporaryDirectory: String?
    ) throws(SQLiteError) {
        try Self.checkShareable(path)
        let (writerConfiguration, readerConfiguration) = Self.split(configuration)
        self.init(
            writer: try DatabaseQueue(path: path, configuration: writerConfiguration, label: Self.writerLabel),
            reader: try DatabaseQueue(path: path, configuration: readerConfiguration, label: Self.readerLabel),
            path: path,
            temporaryDirectory: temporaryDirectory
        )
    }

    private init(writer: DatabaseQueue, reader: DatabaseQueue, path: String, temporaryDirectory: String?) {
        self.writer = writer
        self.reader = reader
        self.path = path
        self.temporaryDirectory = temporaryDirectory
    }

    /// Opens the writer and then the reader, each on its own queue's thread (see
    /// ``DatabaseQueue/open(path:configuration:label:)``). How `allot serve` opens its database.
    public static func open(
        path: String,
        configuration: SQLiteConfiguration = SQLiteConfiguration()
    ) async throws(SQLiteError) -> DatabasePool {
        try checkShareable(path)
        let (writerConfiguration, readerConfiguration) = split(configuration)
        let writer = try await DatabaseQueue.open(path: path, configuration: writerConfiguration, label: writerLabel)
        let reader = try await DatabaseQueue.open(path: path, configuration: readerConfiguration, label: readerLabel)
        return DatabasePool(writer: writer, reader: reader, path: path, temporaryDirectory: nil)
    }

    private static let writerLabel = "allot.sqlite.writer"
    private static let readerLabel = "allot.sqlite.reader"

    private static func checkShareable(_ path: String) throws(SQLiteError) {
        guard path != SQLiteConnection.memoryPath, !path.isEmpty else {
            throw SQLiteError(
                code: SQLITE_MISUSE,
                message: "a pool needs a database file; use DatabasePool.temporary() for a throwaway one"
            )
        }
    }

    /// The writer's configuration (never read-only) and the reader's (always read-only).
    private static func split(
        _ configuration: SQLiteConfiguration
    ) -> (writer: SQLiteConfiguration, reader: SQLiteConfiguration) {
        var writer = configuration
        writer.readOnly = false
        var reader = configuration
        reader.readOnly = true
        return (writer, reader)
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
