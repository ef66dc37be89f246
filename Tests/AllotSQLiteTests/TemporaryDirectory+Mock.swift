import AllotSQLite
import Foundation

/// A fresh directory under the system temporary directory, removed when released.
/// Tests run in parallel, so each test makes its own.
final class TemporaryDirectory: Sendable {
    let path: String

    private init(path: String) {
        self.path = path
    }

    static func make() throws -> TemporaryDirectory {
        let url = FileManager.default.temporaryDirectory.appendingPathComponent(
            "allot-sqlite-tests-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: url, withIntermediateDirectories: true)
        return TemporaryDirectory(path: url.path)
    }

    /// A path inside the directory.
    func file(_ name: String = "test.sqlite") -> String { path + "/" + name }

    deinit {
        try? FileManager.default.removeItem(atPath: path)
    }
}

extension SQLiteConnection {
    /// A connection on a new file in `directory`, with a table `t` for general use.
    static func make(
        in directory: TemporaryDirectory,
        name: String = "test.sqlite",
        configuration: SQLiteConfiguration = SQLiteConfiguration(synchronous: .normal)
    ) throws -> SQLiteConnection {
        try SQLiteConnection(path: directory.file(name), configuration: configuration)
    }

    /// `SELECT count(*) FROM table`.
    func count(_ table: String) throws -> Int64 {
        try queryOne("SELECT count(*) FROM \(table)") { $0.int64(0) } ?? -1
    }

    /// Whether a table called `name` exists.
    func tableExists(_ name: String) throws -> Bool {
        try queryOne("SELECT count(*) FROM sqlite_schema WHERE type = 'table' AND name = ?", name) { $0.int64(0) } == 1
    }
}

/// An error thrown on purpose from inside transactions.
struct Boom: Error, Equatable {}
