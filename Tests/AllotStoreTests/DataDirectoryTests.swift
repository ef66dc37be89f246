import Foundation
import Testing

@testable import AllotStore

/// The data directory's guard against starting from scratch beside a lost database (outside evaluation round 27).
@Suite struct DataDirectoryTests {
    func scratch() throws -> DataDirectory {
        let path = NSTemporaryDirectory() + "allot-data-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return DataDirectory(path: path)
    }

    @Test func aMissingDatabaseBesideItsWriteAheadLogIsRefused() async throws {
        let directory = try scratch()
        defer { try? FileManager.default.removeItem(atPath: directory.path) }
        try Data(repeating: 7, count: 4_096).write(to: URL(fileURLWithPath: directory.databasePath + "-wal"))
        do {
            let (pool, _) = try await directory.openDatabase()
            await pool.close()
            Issue.record("opened a new database beside an orphaned write-ahead log")
        } catch {
            #expect(
                error.message
                    == "\(directory.databasePath) is missing but its write-ahead log \(directory.databasePath)-wal "
                    + "(4096 bytes) is there: the database file was moved or deleted. Put it back and start again "
                    + "(the log holds its latest transactions); to start from an empty database instead, remove "
                    + "\(directory.databasePath)-wal and \(directory.databasePath)-shm")
        }
        #expect(!FileManager.default.fileExists(atPath: directory.databasePath))

        // An empty log holds nothing: a fresh start is what it looks like.
        try Data().write(to: URL(fileURLWithPath: directory.databasePath + "-wal"))
        let (fresh, applied) = try await directory.openDatabase()
        #expect(!applied.isEmpty)
        await fresh.close()
    }

    @Test func aDatabaseWithItsLogOpensAsBefore() async throws {
        let directory = try scratch()
        defer { try? FileManager.default.removeItem(atPath: directory.path) }
        let (first, applied) = try await directory.openDatabase()
        #expect(!applied.isEmpty)
        await first.close()
        try Data(repeating: 0, count: 32).write(to: URL(fileURLWithPath: directory.databasePath + "-wal"))
        let (again, none) = try await directory.openDatabase()
        #expect(none.isEmpty)
        await again.close()
    }
}
