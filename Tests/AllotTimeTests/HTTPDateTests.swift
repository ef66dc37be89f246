import Testing

@testable import AllotTime

@Suite("HTTP dates")
struct HTTPDateTests {
    @Test(
        "the three RFC 9110 forms",
        arguments: [
            ("Sun, 06 Nov 1994 08:49:37 GMT", 784_111_777.0),
            ("Sunday, 06-Nov-94 08:49:37 GMT", 784_111_777),
            ("Sun Nov  6 08:49:37 1994", 784_111_777),
            ("Sun Nov 06 08:49:37 1994", 784_111_777),
            ("Sun, 22 Nov 2026 03:00:30 GMT", 1_795_316_430),
            ("  Sun, 22 Nov 2026 03:00:30 GMT\t", 1_795_316_430),
            ("sun, 22 nov 2026 03:00:30 GMT", 1_795_316_430),
            ("Wednesday, 29-Feb-12 00:00:00 GMT", 1_330_473_600),
            ("Thu, 01 Jan 1970 00:00:00 GMT", 0),
            ("Wed, 31 Dec 1969 23:59:59 GMT", -1),
            ("Sat, 31 Dec 2016 23:59:60 GMT", 1_483_228_800),
        ])
    func parses(text: String, expected: Double) {
        #expect(HTTPDate.parse(text) == expected)
    }

    @Test(
        "invalid dates and hostile strings are nil",
        arguments: [
            "", "GMT", "8", "Sun, 06 Nov 1994 08:49:37", "Sun, 06 Nov 1994 08:49:37 UTC",
            "Sun, 06 Nov 1994 08:49:37 GMT+1", "Sun, 6 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 94 08:49:37 GMT",
            "Xyz, 06 Nov 1994 08:49:37 GMT", "Sun, 06 Foo 1994 08:49:37 GMT", "Sun, 30 Feb 1994 08:49:37 GMT",
            "Sun, 06 Nov 1994 24:00:00 GMT", "Sun, 06 Nov 1994 08:60:00 GMT", "Sun, 06 Nov 1994 08:49:61 GMT",
            "Sun, 00 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-1994 08:49:37 GMT", "Sundae, 06-Nov-94 08:49:37 GMT",
            "Sun Nov 6 08:49:37 1994", "Sun Nov  6 08:49:37 94", "Sun Nov 31 08:49:37 1994",
            "Sun, 06 Nov 1994 08:49:37 GMT GMT", "Sun, 06 Nov 1994 08:49:37 gmt", "Sun, ０6 Nov 1994 08:49:37 GMT",
            "2026-11-22T03:00:00Z", String(repeating: "Sun, ", count: 1_000),
        ])
    func rejects(text: String) {
        #expect(HTTPDate.parse(text) == nil, "\(text.prefix(60))")
    }

    @Test("an RFC 850 two-digit year more than 50 years ahead of now is in the past century")
    func twoDigitYears() {
        let now2026 = 1_795_316_400.0
        let y76 = HTTPDate.parse("Sunday, 01-Nov-76 00:00:00 GMT", now: now2026)
        let y77 = HTTPDate.parse("Monday, 01-Nov-77 00:00:00 GMT", now: now2026)
        let y26 = HTTPDate.parse("Sunday, 01-Nov-26 00:00:00 GMT", now: now2026)
        #expect(y76 == RFC3339.parse("2076-11-01T00:00:00Z"))  // exactly 50 years ahead: kept
        #expect(y77 == RFC3339.parse("1977-11-01T00:00:00Z"))
        #expect(y26 == RFC3339.parse("2026-11-01T00:00:00Z"))
        #expect(HTTPDate.parse("Sunday, 01-Nov-76 00:00:00 GMT") == RFC3339.parse("1976-11-01T00:00:00Z"))
        #expect(HTTPDate.parse("Sunday, 01-Nov-30 00:00:00 GMT", now: .nan) == RFC3339.parse("2030-11-01T00:00:00Z"))
    }

    @Test("format writes IMF-fixdate with the right weekday and parses back", arguments: [0.0, 784_111_777.9, -1])
    func formatKnown(seconds: Double) {
        let expected = [
            0.0: "Thu, 01 Jan 1970 00:00:00 GMT",
            784_111_777.9: "Sun, 06 Nov 1994 08:49:37 GMT",
            -1: "Wed, 31 Dec 1969 23:59:59 GMT",
        ]
        #expect(HTTPDate.format(seconds) == expected[seconds])
    }

    @Test("format and parse round-trip a seeded sample of whole seconds across 1970–2200")
    func roundTrip() {
        var rng = SeededGenerator(seed: 7)
        for _ in 0..<10_000 {
            let seconds = Double(Int64.random(in: 0..<7_258_118_400, using: &rng))
            let text = HTTPDate.format(seconds)
            #expect(text.utf8.count == 29)
            #expect(HTTPDate.parse(text) == seconds, "\(text)")
        }
    }
}
