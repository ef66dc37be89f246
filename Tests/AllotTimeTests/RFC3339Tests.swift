import Foundation
import Testing

@testable import AllotTime

@Suite("RFC 3339")
struct RFC3339Tests {
    @Test(
        "known instants",
        arguments: [
            ("1970-01-01T00:00:00Z", 0.0),
            ("2026-11-22T03:00:00Z", 1_795_316_400),
            ("2026-11-22T03:00:00.123Z", 1_795_316_400.123),
            ("1985-04-12T23:20:50.52Z", 482_196_050.52),  // RFC 3339 §5.8
            ("1996-12-19T16:39:57-08:00", 851_042_397),  // RFC 3339 §5.8
            ("1990-12-31T23:59:60Z", 662_688_000),  // leap second lands on the next minute
            ("1990-12-31T15:59:60-08:00", 662_688_000),
            ("1937-01-01T12:00:27.87+00:20", -1_041_337_172.13),  // RFC 3339 §5.8
            ("2000-02-29T00:00:00Z", 951_782_400),
            ("2400-02-29T00:00:00Z", 13_574_563_200),
            ("0001-01-01T00:00:00Z", -62_135_596_800),
            ("0000-01-01T00:00:00Z", -62_167_219_200),
            ("9999-12-31T23:59:59Z", 253_402_300_799),
            ("1969-12-31T23:59:59.5Z", -0.5),
            ("2200-01-01T00:00:00Z", 7_258_118_400),
            ("2026-11-22t03:00:00z", 1_795_316_400),
            ("2026-11-22 03:00:00Z", 1_795_316_400),
            ("2026-11-22T03:00:00-00:00", 1_795_316_400),
            ("2026-11-22T05:30:00+02:30", 1_795_316_400),
            ("2026-11-21T23:59:00-03:01", 1_795_316_400),
            ("2026-11-22T03:00:00.000000001Z", 1_795_316_400.000000001),
            ("2026-11-22T03:00:00.1234567890123456789012345Z", 1_795_316_400.123456789),
        ])
    func knownInstants(text: String, expected: Double) throws {
        let parsed = try #require(RFC3339.parse(text))
        #expect(abs(parsed - expected) < 1e-6, "\(text) → \(parsed)")
    }

    @Test(
        "hostile and invalid strings are nil",
        arguments: [
            "", "Z", "2026", "2026-11-22", "2026-11-22T", "2026-11-22T03:00", "2026-11-22T03:00:00",
            "2026-11-22T03:00:00.", "2026-11-22T03:00:00.Z", "2026-11-22T03:00:00.123", "2026-11-22T03:00:00+01",
            "2026-11-22T03:00:00+0100", "2026-11-22T03:00:00+01:00:00", "2026-11-22T03:00:00ZZ",
            "2026-11-22T03:00:00Z ", " 2026-11-22T03:00:00Z", "2026-02-30T00:00:00Z", "2026-02-29T00:00:00Z",
            "1900-02-29T00:00:00Z", "2100-02-29T00:00:00Z", "2026-04-31T00:00:00Z", "2026-13-01T00:00:00Z",
            "2026-00-01T00:00:00Z", "2026-01-00T00:00:00Z", "2026-01-32T00:00:00Z", "2026-01-01T24:00:00Z",
            "2026-01-01T23:60:00Z", "2026-01-01T23:59:61Z", "2026-01-01T00:00:00+24:00",
            "2026-01-01T00:00:00+23:60", "2026-01-01T00:00:00+-1:00", "2026-01-01X00:00:00Z",
            "2026/01/01T00:00:00Z", "20261-01-01T00:00:00Z", "-2026-01-01T00:00:00Z", "+2026-01-01T00:00:00Z",
            "２０２６-01-01T00:00:00Z", "2026-01-01T00:00:00.１Z", "2026-01-01T00:00:00,5Z",
            "2026-01-01T00:00:00." + String(repeating: "1", count: 33) + "Z",
            "2026-01-01T00:00:00." + String(repeating: "9", count: 10_000) + "Z",
            "garbage garbage garbage", "1795316400", "2026-01-01T00:00:00Z\u{0}", "2026-01-01T0a:00:00Z",
        ])
    func rejects(text: String) {
        #expect(RFC3339.parse(text) == nil, "\(text.prefix(60)) should not parse")
    }

    @Test("the longest accepted fraction parses; one more digit does not")
    func fractionLengthLimit() {
        let ok = "2026-01-01T00:00:00." + String(repeating: "5", count: RFC3339.maxFractionDigits) + "Z"
        let tooLong = "2026-01-01T00:00:00." + String(repeating: "5", count: RFC3339.maxFractionDigits + 1) + "Z"
        #expect(RFC3339.parse(ok).map { abs($0 - 1_767_225_600.555_555_555) < 1e-6 } == true)
        #expect(RFC3339.parse(tooLong) == nil)
    }

    @Test(
        "format writes UTC with the requested digits, rounding to the nearest unit",
        arguments: [
            (1_795_316_400.123, 3, "2026-11-22T03:00:00.123Z"),  // stored as …0.12299990654
            (1_795_316_400.123, 0, "2026-11-22T03:00:00Z"),
            (1_795_316_400.123, 6, "2026-11-22T03:00:00.123000Z"),
            (1_795_316_400.9996, 3, "2026-11-22T03:00:01.000Z"),
            (1_795_316_399.9999, 0, "2026-11-22T03:00:00Z"),
            (0, 3, "1970-01-01T00:00:00.000Z"),
            (-0.5, 1, "1969-12-31T23:59:59.5Z"),
            (-62_135_596_800, 0, "0001-01-01T00:00:00Z"),
            (951_782_400, 0, "2000-02-29T00:00:00Z"),
            (1_795_316_400.5, -4, "2026-11-22T03:00:01Z"),  // digits clamp to 0; half rounds up
            (1_795_316_400.123456789, 42, "2026-11-22T03:00:00.123456717Z"),  // clamp to 9; the Double's own value
            (.nan, 3, "1970-01-01T00:00:00.000Z"),
            (.infinity, 3, "9999-12-31T23:59:59.999Z"),
            (-.infinity, 0, "0000-01-01T00:00:00Z"),
            (1e300, 0, "9999-12-31T23:59:59Z"),
        ])
    func format(seconds: Double, digits: Int, expected: String) {
        #expect(RFC3339.format(seconds, fractionDigits: digits) == expected)
    }

    @Test("format then parse round-trips a seeded sample of instants across 1970–2200 to the millisecond")
    func roundTripSample() throws {
        var rng = SeededGenerator(seed: 0xA110_7001)
        let upper: Int64 = 7_258_118_400_000  // 2200-01-01 in ms
        for _ in 0..<20_000 {
            let ms = Int64.random(in: 0..<upper, using: &rng)
            let seconds = EpochTime.seconds(fromMilliseconds: ms)
            let text = RFC3339.format(seconds)
            let parsed = try #require(RFC3339.parse(text), "\(text)")
            #expect(EpochTime.milliseconds(fromSeconds: parsed) == ms, "\(text)")
            #expect(RFC3339.format(parsed) == text)
        }
    }

    @Test("format agrees with Foundation's ISO 8601 style on a seeded sample (an independent oracle)")
    func agreesWithFoundation() throws {
        var rng = SeededGenerator(seed: 42)
        let utc = try #require(TimeZone(identifier: "UTC"))
        let style = Date.ISO8601FormatStyle(timeZone: utc)
        for _ in 0..<2_000 {
            let seconds = Double(Int64.random(in: -2_208_988_800..<7_258_118_400, using: &rng))  // 1900–2200
            let ours = RFC3339.format(seconds, fractionDigits: 0)
            #expect(ours == Date(timeIntervalSince1970: seconds).formatted(style))
            #expect(RFC3339.parse(ours) == seconds)
        }
    }

    @Test("calendar arithmetic matches a day-by-day walk over every date from 1600 to 2400")
    func calendarWalk() {
        var days = CivilCalendar.days(year: 1600, month: 1, day: 1)
        #expect(days == -135_140)
        for year in 1600...2400 {
            for month in 1...12 {
                for day in 1...CivilCalendar.daysInMonth(year: year, month: month) {
                    guard CivilCalendar.days(year: year, month: month, day: day) == days,
                        CivilCalendar.date(days: days) == (year, month, day)
                    else {
                        Issue.record("mismatch at \(year)-\(month)-\(day)")
                        return
                    }
                    days += 1
                }
            }
        }
        #expect(CivilCalendar.isLeap(2000) && CivilCalendar.isLeap(2024) && CivilCalendar.isLeap(2400))
        #expect(!CivilCalendar.isLeap(1900) && !CivilCalendar.isLeap(2100) && !CivilCalendar.isLeap(2026))
        #expect(CivilCalendar.weekday(days: 0) == 4)  // Thursday
        #expect(CivilCalendar.weekday(days: -1) == 3)
    }

    @Test("every Feb 29 from 1970 to 2200 parses exactly in leap years")
    func leapDays() {
        for year in 1970...2200 {
            let yyyy = String(year)
            let text = String(repeating: "0", count: 4 - yyyy.count) + yyyy + "-02-29T12:00:00Z"
            #expect((RFC3339.parse(text) != nil) == CivilCalendar.isLeap(year), "\(text)")
        }
    }

    @Test("millisecond helpers round to the nearest millisecond and never trap")
    func milliseconds() {
        #expect(EpochTime.milliseconds(fromSeconds: 1_795_316_400.123) == 1_795_316_400_123)
        #expect(EpochTime.milliseconds(fromSeconds: 1_795_316_400.1229999) == 1_795_316_400_123)
        #expect(EpochTime.milliseconds(fromSeconds: -0.0015) == -2)
        #expect(EpochTime.milliseconds(fromSeconds: .nan) == 0)
        #expect(EpochTime.milliseconds(fromSeconds: .infinity) == .max)
        #expect(EpochTime.milliseconds(fromSeconds: -1e300) == .min)
        #expect(EpochTime.seconds(fromMilliseconds: 1_795_316_400_123) == 1_795_316_400.123)
        #expect(EpochTime.seconds(fromMilliseconds: -500) == -0.5)
    }
}
