/// RFC 3339 timestamps (`2026-11-22T03:00:00.123Z`) ↔ seconds since the Unix epoch.
///
/// Used for telemetry `ts` fields (SPEC §3), Anthropic's `*-reset` headers (SPEC §4) and log lines (SPEC §13), so
/// both directions are hand-written over UTF-8 bytes: no `DateFormatter` (slow, not `Sendable`), no allocation
/// when parsing a native string. Calendar maths is the proleptic Gregorian calendar (`CivilCalendar`).
///
/// Accepted grammar (RFC 3339 §5.6, with its §5.6 note allowing a space and lower-case letters):
///
///     YYYY-MM-DD ( "T" / "t" / " " ) hh:mm:ss [ "." 1*digits ] ( "Z" / "z" / ( "+" / "-" ) hh:mm )
///
/// - Dates are checked against the calendar (no Feb 30, Feb 29 only in leap years), hours are 00–23, minutes
///   00–59, and offsets at most ±23:59.
/// - Second `60` (a leap second, which RFC 3339 allows at any minute because of offsets) is accepted and, as
///   POSIX time has no leap seconds, lands on the first second of the next minute.
/// - The fraction may have any realistic length (1–``maxFractionDigits`` digits); digits past the 18th cannot
///   change a `Double` and are read but ignored. Longer fractions are treated as hostile input and rejected.
/// - `-00:00` ("offset unknown") is read as UTC.
public enum RFC3339 {
    /// Longest fraction accepted. Real producers write 0–9 digits (.NET writes 7, Go and Java up to 9).
    public static let maxFractionDigits = 32

    /// Seconds since the epoch for an RFC 3339 timestamp, or nil if `text` is not one.
    public static func parse(_ text: String) -> Double? {
        ASCII.withBytes(text) { parse(utf8: $0) }
    }

    /// ``parse(_:)`` over raw UTF-8 bytes (for callers that hold a byte buffer).
    public static func parse(utf8 b: UnsafeBufferPointer<UInt8>) -> Double? {
        let n = b.count
        guard n >= 20, n <= 26 + maxFractionDigits else { return nil }
        guard let year = ASCII.digits(b, 0, 4), b[4] == ASCII.minus,
            let month = ASCII.digits(b, 5, 2), b[7] == ASCII.minus,
            let day = ASCII.digits(b, 8, 2)
        else { return nil }
        let separator = b[10]
        guard separator == 0x54 || separator == 0x74 || separator == ASCII.space else { return nil }
        guard let hour = ASCII.digits(b, 11, 2), b[13] == ASCII.colon,
            let minute = ASCII.digits(b, 14, 2), b[16] == ASCII.colon,
            let second = ASCII.digits(b, 17, 2)
        else { return nil }

        var i = 19
        var fraction = 0.0
        if b[i] == ASCII.dot {
            i += 1
            let start = i
            var value: UInt64 = 0
            var used = 0
            while i < n, ASCII.isDigit(b[i]) {
                if used < 18 {
                    value = value * 10 + UInt64(b[i] &- ASCII.zero)
                    used += 1
                }
                i += 1
            }
            let count = i - start
            guard count >= 1, count <= maxFractionDigits else { return nil }
            fraction = Double(value) / ASCII.powersOfTen[used]
        }

        guard i < n else { return nil }
        var offset = 0
        switch b[i] {
        case 0x5A, 0x7A:  // Z z
            i += 1
        case ASCII.plus, ASCII.minus:
            guard i + 6 == n, let oh = ASCII.digits(b, i + 1, 2), b[i + 3] == ASCII.colon,
                let om = ASCII.digits(b, i + 4, 2), oh <= 23, om <= 59
            else { return nil }
            offset = (oh * 60 + om) * 60
            if b[i] == ASCII.minus { offset = -offset }
            i += 6
        default:
            return nil
        }
        guard i == n else { return nil }

        guard month >= 1, month <= 12, day >= 1, day <= CivilCalendar.daysInMonth(year: year, month: month),
            hour <= 23, minute <= 59, second <= 60
        else { return nil }

        let days = CivilCalendar.days(year: year, month: month, day: day)
        let seconds = days * 86_400 + hour * 3_600 + minute * 60 + second - offset
        return Double(seconds) + fraction
    }

    /// Earliest instant ``format(_:fractionDigits:)`` can write: 0000-01-01T00:00:00Z.
    public static let earliestFormattable: Double = -62_167_219_200
    /// Latest whole second ``format(_:fractionDigits:)`` can write: 9999-12-31T23:59:59Z.
    public static let latestFormattable: Double = 253_402_300_799

    /// Formats an instant as RFC 3339 in UTC with a `Z` suffix, e.g. `2026-11-22T03:00:00.123Z`.
    ///
    /// - Parameters:
    ///   - epochSeconds: seconds since the epoch. Values outside years 0000–9999 are clamped to that range and
    ///     NaN is written as the epoch, so a bad number in a log line never produces an unparseable timestamp.
    ///   - fractionDigits: digits after the decimal point, clamped to 0…9; 0 writes no fraction. The instant is
    ///     rounded to the nearest unit of that precision (not truncated, so `x.123` stored as `x.12299999`
    ///     still prints `.123`).
    public static func format(_ epochSeconds: Double, fractionDigits: Int = 3) -> String {
        let digits = min(max(fractionDigits, 0), 9)
        let scale = Int(ASCII.powersOfTen[digits])
        var t = epochSeconds.isNaN ? 0 : epochSeconds
        t = min(max(t, earliestFormattable), latestFormattable + 1)
        var whole = t.rounded(.down)
        var units = Int(((t - whole) * Double(scale)).rounded())
        if units >= scale {
            whole += 1
            units -= scale
        }
        if whole > latestFormattable {
            whole = latestFormattable
            units = scale - 1
        }
        let (days, secondOfDay) = CivilCalendar.floorDiv(Int(whole), 86_400)
        let (year, month, day) = CivilCalendar.date(days: days)
        let length = 20 + (digits > 0 ? digits + 1 : 0)
        return String(unsafeUninitializedCapacity: length) { out in
            var i = 0
            func put(_ value: Int, _ width: Int) {
                var v = value
                var k = width - 1
                while k >= 0 {
                    out[i + k] = ASCII.zero + UInt8(v % 10)
                    v /= 10
                    k -= 1
                }
                i += width
            }
            func put(byte: UInt8) {
                out[i] = byte
                i += 1
            }
            put(year, 4)
            put(byte: ASCII.minus)
            put(month, 2)
            put(byte: ASCII.minus)
            put(day, 2)
            put(byte: 0x54)
            put(secondOfDay / 3_600, 2)
            put(byte: ASCII.colon)
            put(secondOfDay / 60 % 60, 2)
            put(byte: ASCII.colon)
            put(secondOfDay % 60, 2)
            if digits > 0 {
                put(byte: ASCII.dot)
                put(units, digits)
            }
            put(byte: 0x5A)
            return i
        }
    }
}
