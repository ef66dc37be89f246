import AllotSignals
import Testing

@Suite("Go durations")
struct GoDurationTests {
    @Test(
        "real reset and retry values",
        arguments: [
            ("0", 0.0), ("1s", 1), ("6m0s", 360), ("2m59.56s", 179.56), ("250ms", 0.25), ("12ms", 0.012),
            ("9ms", 0.009), ("1h2m3.5s", 3_723.5), ("7.66s", 7.66), ("22s", 22), ("1.5h", 5_400), (".5s", 0.5),
            ("1.s", 1), ("100us", 0.0001), ("100µs", 0.0001), ("100μs", 0.0001), ("1500ns", 0.0000015),
            ("1h0m0s", 3_600), ("23h59m59.999s", 86_399.999), ("1m1s1ms1us1ns", 61.001001001),
            ("0.000000000000000000000001s", 0), ("2562047h47m16.854775807s", GoDuration.maximumSeconds),
        ])
    func parses(text: String, seconds: Double) throws {
        let parsed = try #require(GoDuration.parse(text), "\(text)")
        #expect(abs(parsed - seconds) < 1e-9 * max(1, seconds), "\(text) → \(parsed)")
    }

    @Test(
        "garbage is rejected",
        arguments: [
            "", "soon", "12.5.6", "1", "60", "-1s", "+1s", "1s1s", "1m1h", "1ms1s", "1s ", " 1s", "1 s", "1S", "1sec",
            "1m0", "s", "ms", ".s", "..5s", "1..5s", "1e3s", "0x10s", "１s", "1µ", "1μ", "1u", "1n", "1\u{0}s",
            "2562048h", "99999999999999999999s", "10000000000s", String(repeating: "9", count: 100) + "s",
            String(repeating: "1h", count: 40), "1h2m3s4ms5us6ns7", "NaNs", "infs",
        ])
    func rejects(text: String) {
        #expect(GoDuration.parse(text) == nil, "\(text.prefix(40))")
    }
}
