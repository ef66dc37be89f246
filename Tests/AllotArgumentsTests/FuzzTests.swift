import AllotArguments
import Testing

@Suite("Fuzzing")
struct FuzzTests {
    /// Random argument vectors built from real and near-miss tokens (seeded): every one either
    /// parses, asks for help, or raises a usage error with a message and exit code 2.
    @Test("random argument vectors never crash the parser (seeded)")
    func randomVectors() {
        let pool = [
            "serve", "tokens", "create", "list", "revoke", "simulate", "help", "serv", "--listen", "--listen=",
            "--listen=a:1", "127.0.0.1:80", "--dev", "--dev=0", "--dev=x", "-w", "-h", "--help", "--", "-", "",
            "--data", "--data=/x", "--role", "sre", "-r", "--label", "x", "--=", "---", "-5", "--seed", "--out",
            "-o", "é", "🚀", "\u{0}", "\n", "--log-level", "debug", "--bogus", "-xyz", "=", "--lo", "a=b",
        ]
        let environments: [[String: String]] = [
            [:], ["ALLOT_DEV": "yes"], ["ALLOT_DEV": "perhaps"], ["ALLOT_LOG_LEVEL": "warn"],
            ["ALLOT_LOG_LEVEL": "x"], ["ALLOT_LISTEN": "", "ALLOT_DATA": "/d"],
        ]
        // Valid starts make the random tails reach deep into option parsing and resolution.
        let starts: [[String]] = [
            [], ["serve"], ["simulate"], ["tokens", "list"], ["tokens", "create", "--role", "sre", "n"],
        ]
        var random = SplitMix(seed: 2024)
        var outcomes = [0, 0, 0]
        for _ in 0..<3000 {
            let start = starts[Int(random.next() % UInt64(starts.count))]
            let count = Int(random.next() % 4)
            let arguments = start + (0..<count).map { _ in pool[Int(random.next() % UInt64(pool.count))] }
            let environment = environments[Int(random.next() % UInt64(environments.count))]
            do {
                switch try SampleCommands.parser.parse(arguments, environment: environment) {
                case .command(let command):
                    outcomes[0] += 1
                    #expect(command.commandPath.first == "allot")
                case .help(let text):
                    outcomes[1] += 1
                    #expect(text.contains("Usage: allot"))
                }
            } catch {
                outcomes[2] += 1
                #expect(error.exitCode == 2)
                #expect(!error.message.isEmpty)
                #expect(error.formatted.hasPrefix("allot: error: "))
                #expect(error.usage.contains("Usage: allot"))
            }
        }
        // The pool is rich enough to reach all three outcomes often.
        #expect(outcomes.allSatisfy { $0 > 100 }, "\(outcomes)")
    }
}

/// SplitMix64, for seeded property tests.
struct SplitMix: RandomNumberGenerator {
    private var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9e37_79b9_7f4a_7c15
        var z = state
        z = (z ^ (z >> 30)) &* 0xbf58_476d_1ce4_e5b9
        z = (z ^ (z >> 27)) &* 0x94d0_49bb_1331_11eb
        return z ^ (z >> 31)
    }
}
