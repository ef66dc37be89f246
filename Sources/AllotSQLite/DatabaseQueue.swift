import Dispatch
import Synchronization

/// The owner of one ``SQLiteConnection``, for use from async code: every access runs on the
/// queue's own serial `DispatchQueue`, one at a time.
///
/// An actor, because a connection is long-lived state that must never be used by two threads at
/// once (it is opened with `SQLITE_OPEN_NOMUTEX`). Its executor is a dedicated dispatch queue
/// (``DispatchQueueExecutor``) so that blocking SQLite calls never occupy Swift's cooperative
/// thread pool.
///
/// ```swift
/// let database = try DatabaseQueue(path: "allot-data/allot.sqlite")
/// try await database.write { connection in
///     try connection.run("INSERT INTO tenant(id) VALUES (?)", "acme")
/// }
/// let count = try await database.read { connection in
///     try connection.queryOne("SELECT count(*) FROM tenant") { $0.int64(0) } ?? 0
/// }
/// ```
///
/// The closures are `@Sendable` and their results `Sendable`: the connection cannot escape.
/// For a writer with concurrent readers on the same file, see ``DatabasePool``.
public actor DatabaseQueue {
    /// The path given at open.
    public nonisolated let path: String
    /// The configuration the connection was opened with.
    public nonisolated let configuration: SQLiteConfiguration

    private let executor: DispatchQueueExecutor
    private let connection: SQLiteConnection
    /// The error of the last ``write(_:)`` that failed because the database itself is unusable
    /// (``SQLiteError/isDatabaseUnavailable``: locked, full, gone…); cleared when a write commits.
    private let writeFailure = Mutex<SQLiteError?>(nil)

    /// Why the last write failed, while no write has committed since: the database is unusable for
    /// writes (another process holds its lock, the disk is full, the file is gone), which a read probe
    /// cannot see — in WAL mode readers go on reading under another process's write lock. Read without
    /// waiting for the queue (`/readyz` must answer while a write waits out `busy_timeout`).
    public nonisolated var lastWriteFailure: SQLiteError? { writeFailure.withLock { $0 } }

    /// Runs this actor's jobs on its own dispatch queue.
    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    /// Opens the database at `path` (see ``SQLiteConnection/init(path:configuration:)`` for what
    /// opening configures), on the calling thread. For start-up code and tools; from async code
    /// prefer ``open(path:configuration:label:)``, which opens on the queue's own thread.
    ///
    /// - Parameters:
    ///   - path: The database file, or `:memory:`.
    ///   - configuration: How to open and configure the connection.
    ///   - label: The dispatch queue's label, shown in debuggers and crash reports.
    public init(
        path: String,
        configuration: SQLiteConfiguration = SQLiteConfiguration(),
        label: String = "allot.sqlite"
    ) throws(SQLiteError) {
        try self.init(path: path, configuration: configuration, queue: DispatchQueue(label: label, qos: .userInitiated))
    }

    private init(path: String, configuration: SQLiteConfiguration, queue: DispatchQueue) throws(SQLiteError) {
        self.path = path
        self.configuration = configuration
        self.executor = DispatchQueueExecutor(queue: queue)
        self.connection = try SQLiteConnection(path: path, configuration: configuration)
    }

    /// Opens the database at `path` on the new queue's own thread, so that opening (which may
    /// wait up to `busy_timeout` for another process's lock, or recover a WAL after a crash)
    /// never blocks a thread of Swift's cooperative pool.
    ///
    /// - Parameters:
    ///   - path: The database file, or `:memory:`.
    ///   - configuration: How to open and configure the connection.
    ///   - label: The dispatch queue's label, shown in debuggers and crash reports.
    public static func open(
        path: String,
        configuration: SQLiteConfiguration = SQLiteConfiguration(),
        label: String = "allot.sqlite"
    ) async throws(SQLiteError) -> DatabaseQueue {
        let queue = DispatchQueue(label: label, qos: .userInitiated)
        let result = await withCheckedContinuation {
            (continuation: CheckedContinuation<Result<DatabaseQueue, SQLiteError>, Never>) in
            queue.async {
                continuation.resume(
                    returning: Result { () throws(SQLiteError) in
                        try DatabaseQueue(path: path, configuration: configuration, queue: queue)
                    })
            }
        }
        return try result.get()
    }

    /// A queue over a private in-memory database: one connection, no WAL, gone when closed.
    /// For tests that need a single connection; ``DatabasePool/temporary(configuration:)`` gives a
    /// writer and reader pair.
    public static func inMemory(configuration: SQLiteConfiguration = SQLiteConfiguration()) throws(SQLiteError)
        -> DatabaseQueue
    {
        try DatabaseQueue(path: SQLiteConnection.memoryPath, configuration: configuration)
    }

    /// Runs `body` with the connection, outside any transaction (each statement is then its own
    /// transaction). For migrations (which manage their own), checkpoints, probes and pragmas.
    /// Throws exactly what `body` throws.
    public func access<T: Sendable, E: Error>(_ body: @Sendable (SQLiteConnection) throws(E) -> T) throws(E) -> T {
        try body(connection)
    }

    /// Runs `body` in an IMMEDIATE transaction: committed when it returns, rolled back when it
    /// throws (see ``SQLiteConnection/transaction(_:_:)``). Throws the body's error or a
    /// ``SQLiteError`` from BEGIN/COMMIT.
    public func write<T: Sendable>(_ body: @Sendable (SQLiteConnection) throws -> T) throws -> T {
        do {
            let result = try connection.transaction(.immediate, body)
            writeFailure.withLock { $0 = nil }
            return result
        } catch let error as SQLiteError where error.isDatabaseUnavailable {
            writeFailure.withLock { $0 = error }
            throw error
        }
    }

    /// Runs `body` in a DEFERRED transaction: all its SELECTs see one consistent snapshot, and
    /// in WAL mode it neither blocks nor waits for the writer.
    public func read<T: Sendable>(_ body: @Sendable (SQLiteConnection) throws -> T) throws -> T {
        try connection.transaction(.deferred, body)
    }

    /// Closes the connection. Later accesses throw ``SQLiteError`` (`SQLITE_MISUSE`, "closed").
    public func close() {
        connection.close()
    }

    /// True when called from this queue's dispatch queue, i.e. from inside one of its accesses.
    /// Lets tests (and assertions) check that database work runs there, off the cooperative pool.
    public nonisolated var isCurrent: Bool { executor.isCurrent }

    /// False once closed.
    public var isOpen: Bool { connection.isOpen }
}
