import AllotAssets
import AllotCommands
import AllotStore
import Foundation
import Synchronization
import Testing

/// Captures what a command writes to stdout and stderr.
final class CapturedOutput: Sendable {
    private let lines = Mutex<(out: [String], err: [String])>(([], []))

    var output: CommandOutput {
        CommandOutput(
            out: { text in self.lines.withLock { $0.out.append(text) } },
            err: { text in self.lines.withLock { $0.err.append(text) } })
    }

    var out: String { lines.withLock { $0.out.joined(separator: "\n") } }
    var err: String { lines.withLock { $0.err.joined(separator: "\n") } }
}

func runCLI(_ arguments: [String], environment: [String: String] = [:]) async -> (code: Int32, out: String, err: String) {
    let captured = CapturedOutput()
    let code = await AllotCLI.run(arguments: arguments, environment: environment, output: captured.output)
    return (code, captured.out, captured.err)
}

func temporaryDirectory() throws -> String {
    let path = NSTemporaryDirectory() + "allot-cli-\(UUID().uuidString)"
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

@Suite struct CLITests {
    /// What the user gave, quoted in a diagnostic, shows its control and bidirectional-formatting characters
    /// escaped on stderr: a NUL or a right-to-left override (U+202E) in a tenant id cut or reversed the line.
    @Test func diagnosticsShowHiddenCharactersEscaped() {
        #expect(CommandOutput.printable("tenant \"a\u{0}b\u{202E}c\"") == #"tenant "a\u{0}b\u{202E}c""#)
        #expect(CommandOutput.printable("x\u{1B}[31m\u{7F}\u{85}\u{2066}") == #"x\u{1B}[31m\u{7F}\u{85}\u{2066}"#)
        // Newlines and tabs lay messages out; other text, accents and emoji included, is left as it is.
        let plain = "policy rejected:\n\ttenants.json: Zoë 🚀 \"gold\""
        #expect(CommandOutput.printable(plain) == plain)
    }

    @Test func topLevelHelpListsEveryCommand() async {
        let result = await runCLI(["--help"])
        #expect(result.code == 0)
        for command in ["serve", "migrate", "plan", "simulate", "tokens", "drain", "bench"] {
            #expect(result.out.contains("\n  \(command) "), "missing \(command)")
        }
    }

    @Test func versionPrintsTheReleaseAndTheNewestMigration() async throws {
        let result = await runCLI(["--version"])
        #expect(result.code == 0)
        let newest = try #require(AllotAssets.migrations.map(\.name).max())
        #expect(newest.hasSuffix(".sql"))
        #expect(result.out.hasPrefix("allot \(AllotCLI.version)\ndatabase schema: \(newest)"))
        #expect(await runCLI(["--help"]).out.contains("--version"))
        // Only at the top, alone: a command does not take it, and it takes no command.
        #expect(await runCLI(["serve", "--version"]).code == 2)
        let before = await runCLI(["--version", "serve"])
        #expect(before.code == 2)
        #expect(before.err.contains("--version takes no command (got 'serve')"))
    }

    @Test func serveHelpShowsEveryFlagWithDefaultsAndEnvironment() async {
        let result = await runCLI(["serve", "--help"])
        #expect(result.code == 0)
        for flag in ["--listen", "--data", "--policies", "--log-level", "--dev", "--max-body-bytes"] {
            #expect(result.out.contains(flag), "missing \(flag)")
        }
        for variable in ["ALLOT_LISTEN", "ALLOT_DATA", "ALLOT_POLICIES", "ALLOT_LOG_LEVEL", "ALLOT_DEV"] {
            #expect(result.out.contains(variable), "missing \(variable)")
        }
        #expect(result.out.contains("127.0.0.1:8080"))
        #expect(result.out.contains("./allot-data"))
    }

    @Test func unknownCommandAndFlagExitTwoWithUsage() async {
        let command = await runCLI(["serv"])
        #expect(command.code == 2)
        #expect(command.err.contains("serve"))  // suggestion
        let flag = await runCLI(["serve", "--bogus"])
        #expect(flag.code == 2)
        #expect(flag.err.contains("unknown option '--bogus'"))
        #expect(flag.err.contains("Usage: allot serve"))
    }

    @Test func badValueNamesTheFlagAndItsSource() async {
        let result = await runCLI(["serve"], environment: ["ALLOT_LISTEN": "nowhere"])
        #expect(result.code == 2)
        #expect(result.err.contains("--listen"))
        #expect(result.err.contains("ALLOT_LISTEN"))
    }

    @Test func devIsRefusedOffLoopback() async throws {
        let data = try temporaryDirectory()
        let result = await runCLI(["serve", "--dev", "--listen", "0.0.0.0:0", "--data", data])
        #expect(result.code == 1)
        #expect(result.err.contains("--dev disables authentication and is refused on 0.0.0.0"))
    }

    @Test func migrateAppliesOnceThenReportsUpToDate() async throws {
        let data = try temporaryDirectory()
        let first = await runCLI(["migrate", "--data", data])
        #expect(first.code == 0)
        #expect(first.out.contains("applied 0001_telemetry.sql"))
        let second = await runCLI(["migrate", "--data", data])
        #expect(second.code == 0)
        #expect(second.out.hasSuffix("up to date"))
        let status = await runCLI(["migrate", "--data", data, "--status"])
        #expect(status.code == 0)
        #expect(status.out.contains("applied  0001_telemetry"))
        #expect(!status.out.contains("pending"))
        // Not beside a running service, which holds the directory's lock; `--status` still reads.
        let held = try DataDirectoryLock.acquire(DataDirectory(path: data))
        let refused = await runCLI(["migrate", "--data", data])
        #expect(refused.code == 1)
        #expect(refused.err.contains("data directory \(data) is in use by another allot serve or migrate (process "))
        #expect(await runCLI(["migrate", "--data", data, "--status"]).code == 0)
        held.release()
        #expect(await runCLI(["migrate", "--data", data]).code == 0)
    }

    @Test func migrateStatusCreatesNothingWhereThereIsNoDatabase() async throws {
        let data = try temporaryDirectory() + "/absent/allot-data"
        let status = await runCLI(["migrate", "--data", data, "--status"])
        // Pending: a script can tell it from "up to date" (0), an error (1) and a usage error (2).
        #expect(status.code == 3)
        #expect(status.out.contains("no database yet (not created)"))
        #expect(status.out.contains("pending  0001_telemetry\n"))
        #expect(!status.out.contains("0001_telemetry.sql"))
        #expect(!FileManager.default.fileExists(atPath: data))
        #expect(!FileManager.default.fileExists(atPath: (data as NSString).deletingLastPathComponent))
        // Once migrated, the same names are listed as applied.
        #expect(await runCLI(["migrate", "--data", data]).code == 0)
        let after = await runCLI(["migrate", "--data", data, "--status"])
        #expect(after.code == 0)
        #expect(after.out.contains("applied  0001_telemetry\n"))
        #expect(!after.out.contains("pending"))
        // A file where the directory should be is an error, as for `migrate` itself (it said "no database yet").
        let file = try temporaryDirectory() + "/afile"
        try "x".write(toFile: file, atomically: true, encoding: .utf8)
        let onFile = await runCLI(["migrate", "--data", file, "--status"])
        #expect(onFile.code == 1)
        #expect(onFile.err.contains("data directory \(file) exists but is not a directory"), "\(onFile.err)")
        #expect(onFile.out.isEmpty)
    }

    @Test func planPrintsTheSpecExample() async throws {
        let directory = try temporaryDirectory()
        let file = directory + "/plan.json"
        try """
        {"capacity": {"rpm": 1000, "tpm": 200000},
         "settings": {"safety_margin": 0, "demand_headroom": 0, "surplus": "hold"},
         "tenants": [{"id": "a", "tier": "premium", "weight": 2, "floor": {"rpm": 10}, "ceiling": {"rpm": 500},
                      "demand": {"rpm": 300, "tpm": 50000}}]}
        """.write(toFile: file, atomically: true, encoding: .utf8)
        let result = await runCLI(["plan", file])
        #expect(result.code == 0)
        #expect(
            result.out
                == #"{"allocations":[{"id":"a","rpm":300.0,"tpm":50000.0,"reason":{"rpm":"demand","tpm":"demand"}}],"unallocated":{"rpm":700.0,"tpm":150000.0},"degraded":{"rpm":false,"tpm":false}}"#
        )
        // Saved with a UTF-8 byte order mark (some Windows editors write one): the same plan.
        let original = try #require(FileManager.default.contents(atPath: file))
        try (Data([0xEF, 0xBB, 0xBF]) + original).write(to: URL(fileURLWithPath: file))
        let marked = await runCLI(["plan", file])
        #expect(marked.code == 0, "\(marked.err)")
        #expect(marked.out == result.out)
    }

    @Test func planRejectsBadInputNamingTenantAndField() async throws {
        let directory = try temporaryDirectory()
        let file = directory + "/plan.json"
        try #"{"capacity": {"rpm": 100}, "tenants": [{"id": "x", "floor": {"rpm": 50}, "ceiling": {"rpm": 10}}]}"#
            .write(toFile: file, atomically: true, encoding: .utf8)
        let result = await runCLI(["plan", file])
        #expect(result.code == 1)
        #expect(result.err.contains("x"))
        #expect(result.err.contains("floor"))
        let missing = await runCLI(["plan", directory + "/absent.json"])
        #expect(missing.code == 1)
        #expect(missing.err.contains("cannot read"))
    }

    /// `--policy FILE` (a policy file where a directory is wanted) or a directory that is not there: the command names
    /// the path and what it expected, and exits 1 before doing anything.
    @Test func aPolicyPathThatIsNotADirectoryIsNamedWithWhatIsExpected() async throws {
        let directory = try temporaryDirectory()
        let file = directory + "/tiers.json"
        try #"{"tiers": {"gold": {"priority": 0}}, "default_tier": "gold"}"#
            .write(toFile: file, atomically: true, encoding: .utf8)
        let plan = directory + "/plan.json"
        try #"{"capacity": {"rpm": 100}, "tenants": []}"#.write(toFile: plan, atomically: true, encoding: .utf8)
        let expected = " (expected a directory holding the policy's *.json files: tiers.json, engine.json, "
            + "upstreams.json, tenants.json, …)"
        let cases = [(file, "it is a file, not a directory"), (directory + "/none", "there is no such directory")]
        for (path, problem) in cases {
            let message = "cannot read policy directory \(path): \(problem)\(expected)"
            let simulate = await runCLI(["simulate", "--scenario", "cold-start", "--policy", path])
            #expect(simulate.code == 1)
            #expect(simulate.err == "allot simulate: " + message)
            #expect(simulate.out.isEmpty)
            let check = await runCLI(["simulate", "--scenario", "cold-start", "--check", "--policy", path])
            #expect(check.code == 1)
            #expect(check.err == "allot simulate: " + message)
            let planned = await runCLI(["plan", plan, "--policy", path])
            #expect(planned.code == 1)
            #expect(planned.err == "allot plan: " + message)
            #expect(planned.out.isEmpty)
        }
    }

    /// A plan file that cannot be read is named with the system's reason (outside evaluation round 27: a bare
    /// "cannot read").
    @Test func anUnreadablePlanFileSaysWhy() async throws {
        let directory = try temporaryDirectory()
        for (path, reason) in [(directory + "/none.json", "No such file or directory"), (directory, "Is a directory")] {
            let planned = await runCLI(["plan", path])
            #expect(planned.code == 1)
            #expect(planned.err == "allot plan: cannot read \(path): \(reason)")
            #expect(planned.out.isEmpty)
        }
    }

    /// `migrate --status` on a database lost beside its log says so, as `migrate`, `tokens` and `serve` refuse it
    /// (review: it listed every migration as pending, "no database yet").
    @Test func migrateStatusRefusesADatabaseLostBesideItsLog() async throws {
        let directory = try temporaryDirectory()
        try Data(repeating: 1, count: 100).write(to: URL(fileURLWithPath: directory + "/allot.sqlite-wal"))
        for arguments in [["migrate", "--status", "--data", directory], ["migrate", "--data", directory]] {
            let migrated = await runCLI(arguments)
            #expect(migrated.code == 1)
            #expect(
                migrated.err.hasPrefix(
                    "allot migrate: \(directory)/allot.sqlite is missing but its write-ahead log "
                        + "\(directory)/allot.sqlite-wal (100 bytes) is there"))
            #expect(migrated.out.isEmpty)
        }
    }
}
