import AllotArguments
import AllotSQLite
import AllotServer
import AllotStore
import AllotTime

/// `allot tokens create|list|revoke [--data DIR]` (SPEC 8): manages API tokens directly in the
/// data directory's database (it works whether or not `allot serve` is running; WAL lets both
/// write). Whoever can read the data directory is the admin here, and is audited as `cli`.
///
/// - `create --role R --name N [--gateway-scope S]` prints the token once on stdout (nothing else there, so scripts
///   can capture it) and what it is on stderr; only its SHA-256 is stored.
/// - `list` prints id, name, role, created, last used, revoked and a gateway token's scope — never a secret.
/// - `revoke ID` revokes; a running server stops accepting the token within a second. A revoked token stays
///   revoked: revoking it again says so and changes nothing.
enum TokensCommand {
    static func run(_ command: ParsedCommand, output: CommandOutput, clock: any AllotClock = SystemClock()) async throws
        -> Int32
    {
        let directory = DataDirectory(path: command.string("data") ?? "./allot-data")
        let (pool, _) = try await directory.openDatabase(upgrading: false)
        let code: Int32
        do {
            code = try await run(
                command, issuer: TokenIssuer(store: TokenStore(pool: pool)), data: directory.absolutePath,
                output: output, now: clock.now)
        } catch {
            await pool.close()
            throw error
        }
        await pool.close()
        return code
    }

    private static func run(
        _ command: ParsedCommand, issuer: TokenIssuer, data: String, output: CommandOutput, now: Double
    ) async throws -> Int32 {
        switch command.path.last {
        case "create":
            let role = command.string("role") ?? ""
            let name = command.string("name") ?? ""
            let issued: TokenIssuer.Issued
            do {
                issued = try await issuer.create(
                    name: name, role: role, gatewayScope: command.string("gateway-scope"), actor: .cli, now: now)
            } catch let error as TokenError {
                let option = error.field.replacingOccurrences(of: "_", with: "-")
                output.err("allot tokens create: --\(option): \(error.message)")
                return 2
            }
            output.out(issued.secret)
            output.err(
                "created token \(issued.record.id) (role \(issued.record.role), name \"\(issued.record.name)\") in "
                    + "the data directory \(data): only a server run with that --data accepts it; the token above is "
                    + "shown only now: store it safely")
            return 0
        case "list":
            let tokens = try await issuer.store.all()
            output.out(table(tokens))
            return 0
        case "revoke":
            let id = command.positional("id") ?? ""
            guard let (revoked, changed) = try await issuer.revoke(id: id, actor: .cli, now: now) else {
                output.err("allot tokens revoke: no token \(id); see `allot tokens list`")
                return 1
            }
            guard changed else {
                let when = revoked.revokedMs.map {
                    RFC3339.format(EpochTime.seconds(fromMilliseconds: $0), fractionDigits: 0)
                }
                let by = revoked.revokedBy.map { " by \($0)" } ?? ""
                output.out(
                    "\(revoked.id) (\(revoked.name), \(revoked.role)) was already revoked at \(when ?? "?")\(by); "
                        + "nothing changed")
                return 0
            }
            output.out("revoked \(revoked.id) (\(revoked.name), \(revoked.role))")
            return 0
        default:
            return 2
        }
    }

    /// A fixed-width table with a header; times in RFC 3339 (seconds), `-` for never.
    static func table(_ tokens: [TokenRecord]) -> String {
        func time(_ milliseconds: Int64?) -> String {
            milliseconds.map { RFC3339.format(EpochTime.seconds(fromMilliseconds: $0), fractionDigits: 0) } ?? "-"
        }
        let rows =
            [["ID", "NAME", "ROLE", "CREATED", "LAST USED", "REVOKED", "GATEWAYS"]]
            + tokens.map { token in
                [
                    token.id, token.name, token.role, time(token.createdMs), time(token.lastUsedMs),
                    time(token.revokedMs), token.role == "gateway" ? token.gatewayScope ?? "*" : "-",
                ]
            }
        var widths = [Int](repeating: 0, count: 7)
        for row in rows {
            for (index, cell) in row.enumerated() { widths[index] = max(widths[index], cell.count) }
        }
        return rows.map { row in
            row.enumerated().map { index, cell in
                index == row.count - 1 ? cell : cell + String(repeating: " ", count: widths[index] - cell.count)
            }.joined(separator: "  ")
        }.joined(separator: "\n")
    }
}
