import AllotSQLite
import CSQLite
import Testing

@Suite struct BindingTests {
    /// A table with one column of each kind, no type affinity on `v` so values keep their class.
    private func makeTable() throws -> SQLiteConnection {
        let connection = try SQLiteConnection.inMemory()
        try connection.execute("CREATE TABLE t(id INTEGER PRIMARY KEY, v)")
        return connection
    }

    private func roundTrip(_ value: (any SQLiteBindable)?) throws -> SQLiteValue {
        let connection = try makeTable()
        try connection.run("INSERT INTO t(v) VALUES (?)", value)
        return try #require(try connection.queryOne("SELECT v FROM t") { $0.value(0) })
    }

    @Test(arguments: [Int64.min, -1, 0, 1, Int64(Int32.max) + 1, Int64.max])
    func int64RoundTrips(_ value: Int64) throws {
        #expect(try roundTrip(value) == .integer(value))
        let connection = try makeTable()
        try connection.run("INSERT INTO t(v) VALUES (?)", value)
        #expect(try connection.queryOne("SELECT v FROM t") { $0.int64(0) } == value)
        #expect(try connection.queryOne("SELECT v FROM t") { $0.optionalInt64(0) } == value)
        #expect(try connection.queryOne("SELECT v FROM t") { try $0.int64("v") } == value)
    }

    @Test func intAndInt32AndBoolBindAsIntegers() throws {
        #expect(try roundTrip(Int.max) == .integer(Int64(Int.max)))
        #expect(try roundTrip(Int.min) == .integer(Int64(Int.min)))
        #expect(try roundTrip(Int32.min) == .integer(Int64(Int32.min)))
        #expect(try roundTrip(true) == .integer(1))
        #expect(try roundTrip(false) == .integer(0))
        let connection = try makeTable()
        try connection.run("INSERT INTO t(v) VALUES (?), (?)", true, false)
        #expect(try connection.queryAll("SELECT v FROM t ORDER BY id") { $0.bool(0) } == [true, false])
        #expect(try connection.queryAll("SELECT v FROM t ORDER BY id") { $0.int(0) } == [1, 0])
    }

    @Test(arguments: [0.0, -0.5, 1.0 / 3.0, Double.greatestFiniteMagnitude, -Double.leastNonzeroMagnitude, .infinity])
    func doubleRoundTrips(_ value: Double) throws {
        #expect(try roundTrip(value) == .real(value))
        let connection = try makeTable()
        try connection.run("INSERT INTO t(v) VALUES (?)", value)
        #expect(try connection.queryOne("SELECT v FROM t") { $0.double(0) } == value)
        #expect(try connection.queryOne("SELECT v FROM t") { $0.optionalDouble(0) } == value)
    }

    @Test func nanIsStoredAsNullBySQLite() throws {
        // SQLite converts NaN to NULL on binding; documented SQLite behaviour, checked here so a
        // caller relying on it learns if it changes.
        #expect(try roundTrip(Double.nan) == .null)
    }

    @Test(arguments: [
        "", "a", "tenant-acme:eu.1", "naïve café", "日本語のテキスト", "emoji 🧑‍🚀 and flags 🇫🇷", "tab\tnew\nline",
        "quote ' and \"",
    ])
    func stringRoundTrips(_ value: String) throws {
        #expect(try roundTrip(value) == .text(value))
        let connection = try makeTable()
        try connection.run("INSERT INTO t(v) VALUES (?)", value)
        #expect(try connection.queryOne("SELECT v FROM t") { $0.string(0) } == value)
        #expect(try connection.queryOne("SELECT v FROM t") { $0.isNull(0) } == false)
        #expect(try connection.queryOne("SELECT length(CAST(v AS BLOB)) FROM t") { $0.int(0) } == value.utf8.count)
    }

    @Test func stringWithEmbeddedNULKeepsAllBytes() throws {
        let value = "before\u{0}after"
        #expect(try roundTrip(value) == .text(value))
    }

    @Test(arguments: [[UInt8](), [0], [0, 255, 1, 254], [UInt8](repeating: 0xAB, count: 100_000)])
    func blobRoundTrips(_ value: [UInt8]) throws {
        #expect(try roundTrip(value) == .blob(value))
        let connection = try makeTable()
        try connection.run("INSERT INTO t(v) VALUES (?)", value)
        #expect(try connection.queryOne("SELECT v FROM t") { $0.blob(0) } == value)
        #expect(try connection.queryOne("SELECT typeof(v) FROM t") { $0.string(0) } == "blob")
    }

    @Test func nullAndOptionalsBindNull() throws {
        let missingInt: Int? = nil
        let missingString: String? = nil
        let missingBlob: [UInt8]? = nil
        let presentInt: Int? = 7
        #expect(try roundTrip(nil) == .null)
        #expect(try roundTrip(missingInt) == .null)
        #expect(try roundTrip(missingString) == .null)
        #expect(try roundTrip(missingBlob) == .null)
        #expect(try roundTrip(SQLiteValue.null) == .null)
        #expect(try roundTrip(presentInt) == .integer(7))

        let connection = try makeTable()
        try connection.run("INSERT INTO t(v) VALUES (?)", nil)
        try connection.queryOne("SELECT v FROM t") { row in
            #expect(row.isNull(0))
            #expect(row.string(0) == nil)
            #expect(row.blob(0) == nil)
            #expect(row.optionalInt64(0) == nil)
            #expect(row.optionalDouble(0) == nil)
            #expect(row.int64(0) == 0)
            #expect(row.double(0) == 0)
            #expect(row.value(0) == .null)
        }
    }

    @Test func emptyStringAndEmptyBlobAreNotNull() throws {
        let connection = try makeTable()
        try connection.run("INSERT INTO t(v) VALUES (?)", "")
        try connection.run("INSERT INTO t(v) VALUES (?)", [UInt8]())
        let rows = try connection.queryAll("SELECT typeof(v), v IS NULL, v FROM t ORDER BY id") { row in
            (row.string(0), row.bool(1), row.value(2))
        }
        #expect(rows.map(\.0) == ["text", "blob"])
        #expect(rows.map(\.1) == [false, false])
        #expect(rows.map(\.2) == [.text(""), .blob([])])
    }

    @Test func sqliteValueBindsEveryStorageClass() throws {
        let values: [SQLiteValue] = [.null, .integer(-3), .real(2.5), .text("x"), .blob([1, 2])]
        for value in values {
            #expect(try roundTrip(value) == value)
        }
    }

    @Test func namedParametersBindWithOrWithoutPrefix() throws {
        let connection = try makeTable()
        try connection.execute("CREATE TABLE n(a, b, c)")
        try connection.run("INSERT INTO n VALUES (:a, @b, $c)", named: [":a": 1, "b": "two", "c": nil])
        try connection.run("INSERT INTO n VALUES (:a, :a, :b)", named: ["a": 5, "b": 2.5])
        let rows = try connection.queryAll("SELECT a, b, c FROM n ORDER BY rowid") {
            [$0.value(0), $0.value(1), $0.value(2)]
        }
        #expect(rows == [[.integer(1), .text("two"), .null], [.integer(5), .integer(5), .real(2.5)]])

        var names: [String] = []
        try connection.query("SELECT a FROM n WHERE b = :b", named: [":b": "two"]) { row in
            names.append(row.columnName(0))
        }
        #expect(names == ["a"])

        let statement = try connection.cachedStatement("SELECT :x + :y")
        try statement.bind(2, named: "x")
        try statement.bind(40, named: ":y")
        #expect(try statement.step())
        #expect(statement.row.int64(0) == 42)
        statement.reset()
        #expect(statement.parameterIndex(named: "y") == 2)
        #expect(statement.parameterIndex(named: "z") == nil)
    }

    @Test func bindingMistakesAreErrors() throws {
        let connection = try makeTable()
        let tooFew = #expect(throws: SQLiteError.self) { try connection.run("INSERT INTO t(id, v) VALUES (?, ?)", 1) }
        #expect(tooFew?.code == SQLITE_RANGE)
        #expect(tooFew?.message == "statement has 2 parameter(s) but 1 value(s) were given")
        let tooMany = #expect(throws: SQLiteError.self) { try connection.run("INSERT INTO t(v) VALUES (?)", 1, 2) }
        #expect(tooMany?.code == SQLITE_RANGE)
        #expect(try connection.count("t") == 0)

        let missing = #expect(throws: SQLiteError.self) {
            try connection.run("INSERT INTO t(id, v) VALUES (:id, :v)", named: ["id": 1])
        }
        #expect(missing?.message == "no value given for parameter :v")
        let unknown = #expect(throws: SQLiteError.self) {
            try connection.run("INSERT INTO t(v) VALUES (:v)", named: ["v": 1, "w": 2, "x": 3])
        }
        #expect(unknown?.message == "no parameter named w, x")
        let positional = #expect(throws: SQLiteError.self) {
            try connection.run("INSERT INTO t(v) VALUES (?)", named: ["v": 1])
        }
        #expect(positional?.message == "parameter 1 is positional: bind it by index")

        let statement = try connection.cachedStatement("INSERT INTO t(v) VALUES (?)")
        let outOfRange = #expect(throws: SQLiteError.self) { try statement.bind(Int64(1), at: 2) }
        #expect(outOfRange?.message == "parameter index 2 is out of range 1...1")
        let zero = #expect(throws: SQLiteError.self) { try statement.bind("x", at: 0) }
        #expect(zero?.code == SQLITE_RANGE)
        let badName = #expect(throws: SQLiteError.self) { try statement.bind(1, named: "nope") }
        #expect(badName?.message == "no parameter named nope")
        #expect(try connection.count("t") == 0)
    }

    @Test func columnsByNameAndUnknownNames() throws {
        let connection = try makeTable()
        try connection.run("INSERT INTO t(id, v) VALUES (?, ?)", 3, "three")
        try connection.query("SELECT id AS Ident, v, NULL AS absent, 1.5 AS ratio, x'00ff' AS bytes FROM t") {
            row throws in
            #expect(row.count == 5)
            #expect(try row.int("Ident") == 3)
            #expect(try row.int64("ident") == 3)  // identifiers are case-insensitive
            #expect(try row.string("v") == "three")
            #expect(try row.isNull("absent"))
            #expect(try row.string("absent") == nil)
            #expect(try row.optionalInt64("absent") == nil)
            #expect(try row.optionalDouble("ratio") == 1.5)
            #expect(try row.double("ratio") == 1.5)
            #expect(try row.blob("bytes") == [0, 255])
            #expect(try row.value("bytes") == .blob([0, 255]))
            #expect(try row.bool("Ident"))
            #expect(row.columnName(3) == "ratio")
            let error = #expect(throws: SQLiteError.self) { try row.int64("missing") }
            #expect(error?.code == SQLITE_RANGE)
            #expect(error?.message == "no column named missing")
        }
    }

    @Test func typeConversionsFollowSQLite() throws {
        let connection = try SQLiteConnection.inMemory()
        try connection.queryOne("SELECT '42', 7, 2.75, 'text'") { row in
            #expect(row.int64(0) == 42)
            #expect(row.string(1) == "7")
            #expect(row.int64(2) == 2)
            #expect(row.double(3) == 0)
            #expect(row.blob(3) == Array("text".utf8))
        }
    }
}
