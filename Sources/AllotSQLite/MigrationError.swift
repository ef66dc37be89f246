/// Why the schema could not be brought up to date, naming the migration file at fault.
///
/// Every case refuses to go on: the service must not run against a schema it does not
/// understand (a database from a newer Allot, or with an applied migration that has since been
/// edited), and a migration that fails is rolled back entirely so the database stays at the
/// previous version.
public struct MigrationError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of problem it is.
    public enum Kind: String, Sendable, Equatable {
        /// A file name is not `NNNN_name.sql`.
        case badFileName = "bad_file_name"
        /// Two files have the same version number.
        case duplicateVersion = "duplicate_version"
        /// A migration's SQL failed; it was rolled back and later ones were not attempted.
        case migrationFailed = "migration_failed"
        /// The database has a migration applied that this binary does not have.
        case unknownMigration = "unknown_migration"
        /// An applied migration's file has changed since (checksum or name differs).
        case modifiedMigration = "modified_migration"
        /// The migrations table could not be created or read.
        case database = "database"
    }

    /// What kind of problem it is.
    public let kind: Kind
    /// The migration file (or recorded migration, `NNNN_name`) at fault, if any.
    public let file: String?
    /// A complete, human-readable explanation (printed by `allot migrate` and at start-up).
    public let message: String
    /// SQLite's error, when SQLite reported the problem.
    public let underlying: SQLiteError?

    public init(kind: Kind, file: String?, message: String, underlying: SQLiteError? = nil) {
        self.kind = kind
        self.file = file
        self.message = message
        self.underlying = underlying
    }

    public var description: String { message }
}
