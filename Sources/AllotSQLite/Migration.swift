/// One schema change: a numbered SQL script from `migrations/` (SPEC section 2: numbered `.sql`
/// files are the single source of truth for the schema).
///
/// A migration is identified by its version; once applied to a database it must never change,
/// which the ``Migrator`` enforces with a ``checksum`` of its exact text.
public struct Migration: Sendable, Equatable {
    /// The number that orders migrations; unique, from 1.
    public let version: Int
    /// The descriptive part of the file name, e.g. `init` for `0001_init.sql`.
    public let name: String
    /// The SQL script (several statements separated by `;`).
    public let sql: String
    /// The file the migration came from, e.g. `0001_init.sql`; used in every message about it.
    public let fileName: String
    /// FNV-1a 64-bit hash of the SQL's UTF-8 bytes, as 16 lower-case hex digits.
    public let checksum: String

    /// A migration built in code; ``fileName`` is `NNNN_name.sql`.
    public init(version: Int, name: String, sql: String) {
        self.version = version
        self.name = name
        self.sql = sql
        self.fileName = Migration.identifier(version: version, name: name) + ".sql"
        self.checksum = Migration.checksum(of: sql)
    }

    /// A migration from a file called `NNNN_name.sql`: at least four digits (the version, from 1),
    /// an underscore, then a name of lower-case letters, digits and underscores.
    ///
    /// - Throws: ``MigrationError`` (`badFileName`) explaining what is wrong with the name.
    public init(fileName: String, sql: String) throws(MigrationError) {
        let (version, name) = try Migration.parse(fileName: fileName)
        self.version = version
        self.name = name
        self.sql = sql
        self.fileName = fileName
        self.checksum = Migration.checksum(of: sql)
    }

    /// `NNNN_name`, e.g. `0007_add_overrides`: how the migration is named in the database and
    /// in messages about a recorded migration.
    public var identifier: String { Migration.identifier(version: version, name: name) }

    /// The version padded to four digits, an underscore and the name.
    public static func identifier(version: Int, name: String) -> String {
        let digits = String(version)
        return String(repeating: "0", count: max(0, 4 - digits.count)) + digits + "_" + name
    }

    /// The checksum the ``Migrator`` records: FNV-1a 64 over the UTF-8 bytes, 16 hex digits.
    ///
    /// Not cryptographic, and it need not be: it detects accidental edits of an applied
    /// migration, and it is stable across platforms and releases (a defined algorithm, unlike
    /// `Hasher`). <http://www.isthe.com/chongo/tech/comp/fnv/>
    public static func checksum(of sql: String) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in sql.utf8 {
            hash ^= UInt64(byte)
            hash = hash &* 0x0000_0100_0000_01b3
        }
        let hex = String(hash, radix: 16)
        return String(repeating: "0", count: 16 - hex.count) + hex
    }

    private static func parse(fileName: String) throws(MigrationError) -> (version: Int, name: String) {
        func bad(_ reason: String) -> MigrationError {
            MigrationError(
                kind: .badFileName,
                file: fileName,
                message: "bad migration file name \"\(fileName)\": \(reason)"
            )
        }
        let expected =
            "expected NNNN_name.sql (at least four digits, an underscore, "
            + "then lower-case letters, digits or underscores)"
        guard fileName.hasSuffix(".sql") else { throw bad(expected) }
        let stem = fileName.utf8.dropLast(4)
        let digits = stem.prefix { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
        let rest = stem.dropFirst(digits.count)
        guard digits.count >= 4, rest.first == UInt8(ascii: "_") else { throw bad(expected) }
        let name = rest.dropFirst()
        let allowed = { (byte: UInt8) in
            (byte >= UInt8(ascii: "a") && byte <= UInt8(ascii: "z"))
                || (byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")) || byte == UInt8(ascii: "_")
        }
        guard !name.isEmpty, name.allSatisfy(allowed) else { throw bad(expected) }
        guard digits.count <= 9, let version = Int(String(decoding: digits, as: UTF8.self)) else {
            throw bad("the version number is too long")
        }
        guard version >= 1 else { throw bad("versions start at 1") }
        return (version, String(decoding: name, as: UTF8.self))
    }
}

/// A migration as recorded in a database's `schema_migrations` table.
public struct AppliedMigration: Sendable, Equatable {
    public let version: Int
    public let name: String
    public let checksum: String
    /// When it was applied, in milliseconds since the Unix epoch.
    public let appliedAt: Int64

    public init(version: Int, name: String, checksum: String, appliedAt: Int64) {
        self.version = version
        self.name = name
        self.checksum = checksum
        self.appliedAt = appliedAt
    }

    /// `NNNN_name`.
    public var identifier: String { Migration.identifier(version: version, name: name) }
}
