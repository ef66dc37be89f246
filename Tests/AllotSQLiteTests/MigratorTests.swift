import AllotAssets
import AllotSQLite
import Testing

@Suite struct MigratorTests {
    static let one = (
        name: "0001_create_tenant.sql", sql: "CREATE TABLE tenant(id TEXT PRIMARY KEY, tier TEXT NOT NULL);"
    )
    static let two = (
        name: "0002_create_override.sql",
        sql: """
        CREATE TABLE override(tenant TEXT NOT NULL REFERENCES tenant(id), weight REAL);
        CREATE INDEX override_tenant ON override(tenant);
        INSERT INTO tenant(id, tier) VALUES ('seed', 'standard');
        """
    )
    static let three = (name: "0003_create_snapshot.sql", sql: "CREATE TABLE snapshot(version INTEGER PRIMARY KEY);")
    /// The second migration with a mistake after statements that succeed.
    static let brokenTwo = (
        name: "0002_create_override.sql",
        sql: """
        CREATE TABLE override(tenant TEXT NOT NULL REFERENCES tenant(id), weight REAL);
        INSERT INTO tenant(id, tier) VALUES ('seed', 'standard');
        CREATE INDXE override_tenant ON override(tenant);
        """
    )

    private func makeMigrator(_ files: [(name: String, sql: String)]) throws -> Migrator {
        try Migrator(files: files)
    }

    @Test func freshDatabaseGetsEveryMigrationInOrder() throws {
        let directory = try TemporaryDirectory.make()
        let connection = try SQLiteConnection.make(in: directory)
        // Given out of order: the migrator sorts by version.
        let migrator = try makeMigrator([Self.three, Self.one, Self.two])
        let applied = try migrator.migrate(connection, nowMilliseconds: 1_700_000_000_123)
        #expect(applied.map(\.fileName) == [Self.one.name, Self.two.name, Self.three.name])
        #expect(applied.map(\.version) == [1, 2, 3])
        #expect(try connection.tableExists("tenant"))
        #expect(try connection.tableExists("override"))
        #expect(try connection.tableExists("snapshot"))
        let recorded = try migrator.appliedMigrations(connection)
        #expect(recorded.map(\.identifier) == ["0001_create_tenant", "0002_create_override", "0003_create_snapshot"])
        #expect(recorded.map(\.appliedAt) == [1_700_000_000_123, 1_700_000_000_123, 1_700_000_000_123])
        #expect(recorded.map(\.checksum) == applied.map(\.checksum))
        #expect(try migrator.pendingMigrations(connection).isEmpty)
    }

    @Test func rerunningIsANoOp() throws {
        let directory = try TemporaryDirectory.make()
        let connection = try SQLiteConnection.make(in: directory)
        let migrator = try makeMigrator([Self.one, Self.two, Self.three])
        try migrator.migrate(connection)
        let changesBefore = connection.totalChanges
        #expect(try migrator.migrate(connection).isEmpty)
        #expect(connection.totalChanges == changesBefore)
        #expect(try connection.count("tenant") == 1)  // the seed row was inserted once
        #expect(try connection.count("schema_migrations") == 3)
    }

    @Test func onlyNewMigrationsAreAppliedLater() throws {
        let directory = try TemporaryDirectory.make()
        let connection = try SQLiteConnection.make(in: directory)
        try makeMigrator([Self.one]).migrate(connection)
        let applied = try makeMigrator([Self.one, Self.two, Self.three]).migrate(connection)
        #expect(applied.map(\.version) == [2, 3])
    }

    @Test func aFailingMigrationIsRolledBackEntirelyAndStopsTheRun() throws {
        let directory = try TemporaryDirectory.make()
        let connection = try SQLiteConnection.make(in: directory)
        let broken = try makeMigrator([Self.one, Self.brokenTwo, Self.three])
        let error = #expect(throws: MigrationError.self) { try broken.migrate(connection) }
        #expect(error?.kind == .migrationFailed)
        #expect(error?.file == "0002_create_override.sql")
        #expect(error?.underlying?.message == "near \"INDXE\": syntax error")
        #expect(
            error?.message
                == "migration 0002_create_override.sql failed and was rolled back: near \"INDXE\": syntax error "
                + "(in: CREATE INDXE override_tenant ON override(tenant);)"
        )
        // 0001 stays applied; none of 0002's earlier statements survived; 0003 was not attempted.
        #expect(try connection.tableExists("tenant"))
        #expect(try !connection.tableExists("override"))
        #expect(try connection.count("tenant") == 0)
        #expect(try !connection.tableExists("snapshot"))
        #expect(try broken.appliedMigrations(connection).map(\.version) == [1])
        #expect(!connection.isInTransaction)

        // Fixed, a later run applies the rest.
        let fixed = try makeMigrator([Self.one, Self.two, Self.three])
        #expect(try fixed.migrate(connection).map(\.version) == [2, 3])
        #expect(try connection.tableExists("override"))
        #expect(try connection.count("tenant") == 1)
    }

    @Test func aMigrationThatViolatesAConstraintIsRolledBack() throws {
        let connection = try SQLiteConnection.inMemory()
        let bad = (
            name: "0002_bad_reference.sql", sql: "CREATE TABLE x(a); INSERT INTO tenant(id, tier) VALUES ('a', NULL);"
        )
        let error = #expect(throws: MigrationError.self) { try makeMigrator([Self.one, bad]).migrate(connection) }
        #expect(error?.file == "0002_bad_reference.sql")
        #expect(error?.underlying?.isConstraint == true)
        #expect(
            error?.message.hasPrefix(
                "migration 0002_bad_reference.sql failed and was rolled back: NOT NULL constraint failed: tenant.tier")
                == true)
        #expect(try !connection.tableExists("x"))
    }

    @Test func aDatabaseFromANewerAllotIsRefused() throws {
        let directory = try TemporaryDirectory.make()
        let connection = try SQLiteConnection.make(in: directory)
        let migrator = try makeMigrator([Self.one, Self.two, Self.three])
        try migrator.migrate(connection)
        try connection.run(
            "INSERT INTO schema_migrations(version, name, checksum, applied_at) VALUES (?, ?, ?, ?)",
            7, "x", "0123456789abcdef", 0
        )
        let error = #expect(throws: MigrationError.self) { try migrator.migrate(connection) }
        #expect(error?.kind == .unknownMigration)
        #expect(error?.file == "0007_x")
        #expect(
            error?.message
                == "database has migration 0007_x which this binary does not know; it was written by a newer Allot "
                + "— refusing to open"
        )
        #expect(throws: MigrationError.self) { try migrator.pendingMigrations(connection) }
    }

    @Test func anUnknownOlderMigrationIsRefused() throws {
        let connection = try SQLiteConnection.inMemory()
        try makeMigrator([Self.one, Self.two, Self.three]).migrate(connection)
        let error = #expect(throws: MigrationError.self) {
            try makeMigrator([Self.one, Self.three]).migrate(connection)
        }
        #expect(error?.kind == .unknownMigration)
        #expect(
            error?.message
                == "database has migration 0002_create_override which this binary does not know; this binary has no "
                + "migration 2 (was a migration file removed or renumbered?) — refusing to open"
        )
    }

    @Test func aChangedAppliedMigrationIsRefused() throws {
        let directory = try TemporaryDirectory.make()
        let connection = try SQLiteConnection.make(in: directory)
        try makeMigrator([Self.one, Self.two]).migrate(connection)
        let edited = (name: Self.one.name, sql: Self.one.sql + "\n-- a harmless-looking edit\n")
        let error = #expect(throws: MigrationError.self) {
            try makeMigrator([edited, Self.two, Self.three]).migrate(connection)
        }
        #expect(error?.kind == .modifiedMigration)
        #expect(error?.file == "0001_create_tenant.sql")
        let recorded = Migration.checksum(of: Self.one.sql)
        let now = Migration.checksum(of: edited.sql)
        #expect(
            error?.message
                == "migration 0001_create_tenant.sql was changed after it was applied to this database (checksum "
                + "\(recorded) recorded, \(now) now); applied migrations must not change, add a new migration instead "
                + "— refusing to open"
        )
        #expect(try !connection.tableExists("snapshot"))  // nothing was applied
    }

    @Test func aRenamedAppliedMigrationIsRefused() throws {
        let connection = try SQLiteConnection.inMemory()
        try makeMigrator([Self.one]).migrate(connection)
        let renamed = (name: "0001_create_tenants.sql", sql: Self.one.sql)
        let error = #expect(throws: MigrationError.self) { try makeMigrator([renamed]).migrate(connection) }
        #expect(error?.kind == .modifiedMigration)
        #expect(
            error?.message
                == "database has migration 0001_create_tenant applied, but this binary's migration 1 is "
                + "0001_create_tenants.sql — refusing to open"
        )
    }

    @Test(arguments: [
        "1_x.sql", "001_x.sql", "0001-x.sql", "0001_X.sql", "0001_.sql", "0001_x.txt", "0001_x.sql.bak", "abcd_x.sql",
        "0001_a b.sql", "0001_naïve.sql", "", ".sql", "0001x.sql", "_0001_x.sql", "0001_x-y.sql",
    ])
    func badFileNamesAreRefused(_ name: String) throws {
        let error = #expect(throws: MigrationError.self) {
            try Migrator(files: [Self.one, (name: name, sql: "SELECT 1")])
        }
        #expect(error?.kind == .badFileName)
        #expect(error?.file == name)
        #expect(
            error?.message
                == "bad migration file name \"\(name)\": expected NNNN_name.sql (at least four digits, an underscore, "
                + "then lower-case letters, digits or underscores)"
        )
    }

    @Test func versionZeroAndHugeVersionsAreRefused() throws {
        let zero = #expect(throws: MigrationError.self) { try Migrator(files: [(name: "0000_x.sql", sql: "")]) }
        #expect(zero?.message == "bad migration file name \"0000_x.sql\": versions start at 1")
        let huge = #expect(throws: MigrationError.self) { try Migrator(files: [(name: "12345678901_x.sql", sql: "")]) }
        #expect(huge?.message == "bad migration file name \"12345678901_x.sql\": the version number is too long")
    }

    @Test func goodFileNamesParse() throws {
        let migration = try Migration(fileName: "00012_add_gateway_2.sql", sql: "SELECT 1")
        #expect(migration.version == 12)
        #expect(migration.name == "add_gateway_2")
        #expect(migration.identifier == "0012_add_gateway_2")
        #expect(migration.fileName == "00012_add_gateway_2.sql")
        #expect(Migration(version: 3, name: "x", sql: "").fileName == "0003_x.sql")
    }

    @Test func duplicateVersionsAreRefused() throws {
        let error = #expect(throws: MigrationError.self) {
            try Migrator(files: [Self.one, (name: "0002_b.sql", sql: ""), (name: "0002_a.sql", sql: "")])
        }
        #expect(error?.kind == .duplicateVersion)
        #expect(error?.message == "migrations 0002_a.sql and 0002_b.sql have the same version 2")
        let padded = #expect(throws: MigrationError.self) {
            try Migrator(files: [(name: "0001_a.sql", sql: ""), (name: "00001_a.sql", sql: "")])
        }
        #expect(padded?.kind == .duplicateVersion)
    }

    @Test func checksumIsFNV1a64() {
        // Reference values of FNV-1a 64 (http://www.isthe.com/chongo/tech/comp/fnv/).
        #expect(Migration.checksum(of: "") == "cbf29ce484222325")
        #expect(Migration.checksum(of: "a") == "af63dc4c8601ec8c")
        #expect(Migration.checksum(of: "foobar") == "85944171f73967e8")
        #expect(Migration.checksum(of: "CREATE TABLE t(x);") != Migration.checksum(of: "CREATE TABLE t(x); "))
    }

    @Test func emptyMigrationListAndEmptyMigrationWork() throws {
        let connection = try SQLiteConnection.inMemory()
        #expect(try Migrator(migrations: []).migrate(connection).isEmpty)
        #expect(try connection.tableExists("schema_migrations"))
        let commentOnly = try Migrator(files: [(name: "0001_nothing_yet.sql", sql: "-- reserved\n")])
        #expect(try commentOnly.migrate(connection).map(\.version) == [1])
    }

    @Test func aMigrationMayNotManageItsOwnTransaction() throws {
        let connection = try SQLiteConnection.inMemory()
        let error = #expect(throws: MigrationError.self) {
            try Migrator(files: [(name: "0001_tx.sql", sql: "BEGIN; CREATE TABLE a(x); COMMIT;")]).migrate(connection)
        }
        #expect(error?.underlying?.message == "cannot start a transaction within a transaction")
        #expect(try !connection.tableExists("a"))
    }

    @Test func aReadOnlyDatabaseIsReportedAsADatabaseError() throws {
        let directory = try TemporaryDirectory.make()
        _ = try SQLiteConnection.make(in: directory)
        let reader = try SQLiteConnection(path: directory.file(), configuration: SQLiteConfiguration(readOnly: true))
        let error = #expect(throws: MigrationError.self) { try makeMigrator([Self.one]).migrate(reader) }
        #expect(error?.kind == .database)
        #expect(error?.underlying?.isReadOnly == true)
    }

    @Test func theEmbeddedMigrationsApplyToAFreshDatabase() throws {
        let directory = try TemporaryDirectory.make()
        let connection = try SQLiteConnection.make(in: directory)
        let files = AllotAssets.migrations.map { (name: $0.name, sql: $0.text) }
        #expect(!files.isEmpty)
        let migrator = try Migrator(files: files)
        let applied = try migrator.migrate(connection)
        #expect(applied.map(\.fileName) == files.map(\.name))
        #expect(try migrator.migrate(connection).isEmpty)
        #expect(try connection.integrityProblems().isEmpty)
        #expect(try connection.queryValues("PRAGMA foreign_key_check").isEmpty)
    }
}
