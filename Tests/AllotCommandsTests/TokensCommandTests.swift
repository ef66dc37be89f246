import AllotCommands
import AllotSQLite
import AllotStore
import Foundation
import Testing

/// `allot tokens create|list|revoke` against a data directory (SPEC 8).
@Suite struct TokensCommandTests {
    @Test func createPrintsTheTokenOnceListShowsNoSecretRevokeMarksIt() async throws {
        let data = try temporaryDirectory()
        let created = await runCLI(["tokens", "create", "--role", "sre", "--name", "alice", "--data", data])
        #expect(created.code == 0)
        let token = created.out.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(token.hasPrefix("allot_"))
        #expect(token.count == 58)
        #expect(created.err.contains("(role sre, name \"alice\")"))
        #expect(created.err.contains("shown only now"))
        // Which database it went to: a token made in another data directory than the server's is refused there
        // (outside evaluation round 36).
        let absolute = URL(fileURLWithPath: data).standardizedFileURL.path
        #expect(
            created.err.contains(" in the data directory \(absolute): only a server run with that --data accepts it;"),
            "\(created.err)")

        let listed = await runCLI(["tokens", "list", "--data", data])
        #expect(listed.code == 0)
        let lines = listed.out.split(separator: "\n")
        #expect(lines.first?.hasPrefix("ID") == true)
        #expect(lines.first?.contains("LAST USED") == true)
        #expect(lines.count == 2)
        #expect(lines[1].contains("alice"))
        #expect(lines[1].contains("sre"))
        #expect(!listed.out.contains(token))
        #expect(!listed.out.contains(String(token.dropFirst(6).prefix(12))))
        let id = String(lines[1].split(separator: " ").first ?? "")
        #expect(id.hasPrefix("tok-"))

        let revoked = await runCLI(["tokens", "revoke", id, "--data", data])
        #expect(revoked.code == 0)
        #expect(revoked.out == "revoked \(id) (alice, sre)")
        let after = await runCLI(["tokens", "list", "--data", data])
        let row = after.out.split(separator: "\n")[1]
        #expect(row.split(separator: " ").map(String.init)[5].hasPrefix("20"))  // the REVOKED column has a time now
        let again = await runCLI(["tokens", "revoke", id, "--data", data])
        #expect(again.code == 0)
        #expect(again.out.hasPrefix("\(id) (alice, sre) was already revoked at 20"))
        #expect(again.out.hasSuffix(" by cli; nothing changed"))
        #expect(await runCLI(["tokens", "list", "--data", data]).out == after.out)

        let unknown = await runCLI(["tokens", "revoke", "tok-000000000000", "--data", data])
        #expect(unknown.code == 1)
        #expect(unknown.err.contains("no token tok-000000000000"))
    }

    /// A database an older Allot wrote is refused, not upgraded: `allot tokens` may run beside a service of that
    /// release, and migrations are one-way (outside evaluation round 39: `tokens list` migrated 0003 → 0008 silently,
    /// under the running old service, and ruled out rolling back). A new database is still created.
    @Test func aDatabaseOfAnOlderReleaseIsNotUpgradedByTokens() async throws {
        let data = try temporaryDirectory()
        let path = data + "/allot.sqlite"
        let all = try DataDirectory.migrator().migrations
        let old = try Migrator(migrations: Array(all.prefix(3)))
        let queue = try await DatabaseQueue.open(path: path)
        _ = try await queue.access { (connection) throws(MigrationError) in try old.migrate(connection) }
        await queue.close()

        let listed = await runCLI(["tokens", "list", "--data", data])
        #expect(listed.code == 1)
        #expect(
            listed.err.contains(
                "the database is at migration \(all[2].identifier) and this allot needs \(all.last!.identifier); it is "
                    + "not upgraded here"), "\(listed.err)")
        #expect(listed.err.contains("then run `allot migrate` or start `allot serve`"))
        let check = try await DatabaseQueue.open(path: path)
        let applied = try await check.access { (connection) throws(MigrationError) in
            try old.appliedMigrations(connection).map(\.version)
        }
        await check.close()
        #expect(applied == [1, 2, 3])
        // `migrate --status` lists the rest as pending and exits 2 (0 once migrated).
        let status = await runCLI(["migrate", "--status", "--data", data])
        #expect(status.code == 3)
        #expect(status.out.contains("applied  \(all[2].identifier)\npending  \(all[3].identifier)\n"), "\(status.out)")
        // After `allot migrate`, tokens work.
        #expect(await runCLI(["migrate", "--data", data]).code == 0)
        #expect(await runCLI(["tokens", "list", "--data", data]).code == 0)
        #expect(await runCLI(["migrate", "--status", "--data", data]).code == 0)
    }

    @Test func createValidatesRoleAndName() async throws {
        let data = try temporaryDirectory()
        let role = await runCLI(["tokens", "create", "--role", "root", "--name", "x", "--data", data])
        #expect(role.code == 2)
        #expect(role.err.contains("root"))
        let name = await runCLI(["tokens", "create", "--role", "gateway", "--name", "  ", "--data", data])
        #expect(name.code == 2)
        #expect(name.err.contains("--name"))
        // A control character (a newline broke `tokens list`'s table) is refused.
        let control = await runCLI(["tokens", "create", "--role", "sre", "--name", "line\nbreak", "--data", data])
        #expect(control.code == 2)
        #expect(control.err.contains("cannot contain control characters"), "\(control.err)")
        let missing = await runCLI(["tokens", "create", "--name", "x", "--data", data])
        #expect(missing.code == 2)
        #expect(missing.err.contains("--role"))
        let bare = await runCLI(["tokens"])
        #expect(bare.code == 2)
        #expect(bare.err.contains("create"))
    }

    /// `--gateway-scope`: a gateway token limited to one gateway id or a prefix (`gw-eu-*`), shown in the list's
    /// GATEWAYS column (`*` for an unlimited gateway token, `-` for other roles); refused for other roles and when
    /// malformed, naming the option.
    @Test func aGatewayTokenCanBeLimitedToItsGateways() async throws {
        let data = try temporaryDirectory()
        let scoped = await runCLI(
            ["tokens", "create", "--role", "gateway", "--name", "eu", "--gateway-scope", "gw-eu-*", "--data", data])
        #expect(scoped.code == 0)
        #expect(await runCLI(["tokens", "create", "--role", "gateway", "--name", "any", "--data", data]).code == 0)
        #expect(await runCLI(["tokens", "create", "--role", "sre", "--name", "bob", "--data", data]).code == 0)
        let listed = await runCLI(["tokens", "list", "--data", data]).out.split(separator: "\n")
        #expect(listed.first?.hasSuffix("GATEWAYS") == true)
        let scopes = listed.dropFirst().map { $0.split(separator: " ").last.map(String.init) ?? "" }
        #expect(scopes == ["gw-eu-*", "*", "-"])

        let role = await runCLI(
            ["tokens", "create", "--role", "sre", "--name", "x", "--gateway-scope", "gw-1", "--data", data])
        #expect(role.code == 2)
        #expect(role.err == "allot tokens create: --gateway-scope: only a gateway token is limited to gateway ids")
        let malformed = await runCLI(
            ["tokens", "create", "--role", "gateway", "--name", "x", "--gateway-scope", "gw*eu", "--data", data])
        #expect(malformed.code == 2)
        #expect(malformed.err.contains("--gateway-scope: a gateway id"), "\(malformed.err)")
        #expect(await runCLI(["tokens", "list", "--data", data]).out.split(separator: "\n").count == 4)
    }
}
