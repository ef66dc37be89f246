/// HTTP dates (RFC 9110 §5.6.7) ↔ seconds since the Unix epoch.
///
/// Needed for `Retry-After: <HTTP-date>` (SPEC §4). Recipients must accept all three historical forms:
///
///     IMF-fixdate   Sun, 06 Nov 1994 08:49:37 GMT     (the only form senders may generate)
///     RFC 850       Sunday, 06-Nov-94 08:49:37 GMT    (obsolete, two-digit year)
///     asctime       Sun Nov  6 08:49:37 1994          (obsolete, no zone: UTC)
///
/// Day and month names are matched case-insensitively (RFC 9110 makes them case-sensitive, but leniency costs
/// nothing and real servers are sloppy); the day name is checked to be a day name but not cross-checked with the
/// date, as RFC 9110 does not ask recipients to. Second `60` (a leap second, allowed by the grammar) lands on the
/// next minute. Leading and trailing spaces/tabs (HTTP's optional whitespace) are ignored.
public enum HTTPDate {
    /// Seconds since the epoch for an HTTP date, or nil if `text` is not one.
    ///
    /// - Parameters:
    ///   - now: the receiving time, used only to place an RFC 850 two-digit year: RFC 9110 says a year that
    ///     appears to be more than 50 years in the future is in the past century. Without `now`, years 70–99
    ///     are 19xx and 00–69 are 20xx (the POSIX `%y` convention).
    public static func parse(_ text: String, now: Double? = nil) -> Double? {
        ASCII.withBytes(text) { parse(utf8: $0, now: now) }
    }

    /// ``parse(_:now:)`` over raw UTF-8 bytes.
    public static func parse(utf8 all: UnsafeBufferPointer<UInt8>, now: Double? = nil) -> Double? {
        var lo = 0
        var hi = all.count
        while lo < hi, all[lo] == ASCII.space || all[lo] == ASCII.tab { lo += 1 }
        while hi > lo, all[hi - 1] == ASCII.space || all[hi - 1] == ASCII.tab { hi -= 1 }
        guard hi - lo >= 24, hi - lo <= 40 else { return nil }
        let b = UnsafeBufferPointer(rebasing: all[lo..<hi])

        guard let weekday = dayName(b, 0) else { return nil }
        if b[3] == ASCII.comma {
            return parseIMFFixdate(b)
        } else if b[3] == ASCII.space {
            return parseAsctime(b)
        } else {
            return parseRFC850(b, weekday: weekday, now: now)
        }
    }

    /// `Sun, 06 Nov 1994 08:49:37 GMT` — exactly 29 bytes.
    private static func parseIMFFixdate(_ b: UnsafeBufferPointer<UInt8>) -> Double? {
        guard b.count == 29, b[4] == ASCII.space, let day = ASCII.digits(b, 5, 2), b[7] == ASCII.space,
            let month = monthName(b, 8), b[11] == ASCII.space, let year = ASCII.digits(b, 12, 4),
            b[16] == ASCII.space, isGMT(b, 26), b[25] == ASCII.space
        else { return nil }
        return instant(year: year, month: month, day: day, b, timeAt: 17)
    }

    /// `Sunday, 06-Nov-94 08:49:37 GMT`.
    private static func parseRFC850(_ b: UnsafeBufferPointer<UInt8>, weekday: Int, now: Double?) -> Double? {
        let fullLength = longDayNames[weekday].count
        guard b.count == fullLength + 24 else { return nil }
        for k in 3..<fullLength where ASCII.lower(b[k]) != longDayNames[weekday][k] { return nil }
        var i = fullLength
        guard b[i] == ASCII.comma, b[i + 1] == ASCII.space, let day = ASCII.digits(b, i + 2, 2),
            b[i + 4] == ASCII.minus, let month = monthName(b, i + 5), b[i + 8] == ASCII.minus,
            let yy = ASCII.digits(b, i + 9, 2), b[i + 11] == ASCII.space, b[i + 20] == ASCII.space,
            isGMT(b, i + 21)
        else { return nil }
        i += 12
        var year = yy < 70 ? 2000 + yy : 1900 + yy
        if let now, now.isFinite {
            // RFC 9110 §5.6.7: the most recent year with these last two digits that is not > 50 years ahead.
            let clamped = max(min(now, RFC3339.latestFormattable), RFC3339.earliestFormattable)
            let (days, _) = CivilCalendar.floorDiv(Int(clamped), 86_400)
            let currentYear = CivilCalendar.date(days: days).year
            year = currentYear - ((currentYear % 100 - yy + 100) % 100)
            if year + 100 - currentYear <= 50 { year += 100 }
        }
        return instant(year: year, month: month, day: day, b, timeAt: i)
    }

    /// `Sun Nov  6 08:49:37 1994` — exactly 24 bytes, day padded with a space.
    private static func parseAsctime(_ b: UnsafeBufferPointer<UInt8>) -> Double? {
        guard b.count == 24, let month = monthName(b, 4), b[7] == ASCII.space, b[10] == ASCII.space,
            b[19] == ASCII.space, let year = ASCII.digits(b, 20, 4)
        else { return nil }
        let day: Int
        if b[8] == ASCII.space, ASCII.isDigit(b[9]) {
            day = Int(b[9] - ASCII.zero)
        } else if let d = ASCII.digits(b, 8, 2) {
            day = d
        } else {
            return nil
        }
        return instant(year: year, month: month, day: day, b, timeAt: 11)
    }

    private static func instant(year: Int, month: Int, day: Int, _ b: UnsafeBufferPointer<UInt8>, timeAt t: Int)
        -> Double?
    {
        guard let hour = ASCII.digits(b, t, 2), b[t + 2] == ASCII.colon, let minute = ASCII.digits(b, t + 3, 2),
            b[t + 5] == ASCII.colon, let second = ASCII.digits(b, t + 6, 2),
            day >= 1, day <= CivilCalendar.daysInMonth(year: year, month: month),
            hour <= 23, minute <= 59, second <= 60
        else { return nil }
        let days = CivilCalendar.days(year: year, month: month, day: day)
        return Double(days * 86_400 + hour * 3_600 + minute * 60 + second)
    }

    private static func isGMT(_ b: UnsafeBufferPointer<UInt8>, _ i: Int) -> Bool {
        i + 3 == b.count && b[i] == 0x47 && b[i + 1] == 0x4D && b[i + 2] == 0x54
    }

    private static let shortDayNames: [[UInt8]] = ["sun", "mon", "tue", "wed", "thu", "fri", "sat"].map {
        Array($0.utf8)
    }
    private static let longDayNames: [[UInt8]] = [
        "sunday", "monday", "tuesday", "wednesday", "thursday", "friday", "saturday",
    ].map { Array($0.utf8) }
    private static let monthNames: [[UInt8]] = [
        "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
    ].map { Array($0.utf8) }

    /// Index 0–6 (Sunday first) of the three-letter day name at `i`.
    private static func dayName(_ b: UnsafeBufferPointer<UInt8>, _ i: Int) -> Int? {
        threeLetterName(b, i, shortDayNames)
    }

    /// Month 1–12 of the three-letter month name at `i`.
    private static func monthName(_ b: UnsafeBufferPointer<UInt8>, _ i: Int) -> Int? {
        threeLetterName(b, i, monthNames).map { $0 + 1 }
    }

    private static func threeLetterName(_ b: UnsafeBufferPointer<UInt8>, _ i: Int, _ names: [[UInt8]]) -> Int? {
        guard i + 3 <= b.count else { return nil }
        let c0 = ASCII.lower(b[i])
        let c1 = ASCII.lower(b[i + 1])
        let c2 = ASCII.lower(b[i + 2])
        for (index, name) in names.enumerated() where name[0] == c0 && name[1] == c1 && name[2] == c2 {
            return index
        }
        return nil
    }

    /// Formats an instant as an IMF-fixdate (`Sun, 22 Nov 2026 03:00:30 GMT`), truncated to whole seconds and
    /// clamped to years 0000–9999 like ``RFC3339/format(_:fractionDigits:)``.
    public static func format(_ epochSeconds: Double) -> String {
        var t = epochSeconds.isNaN ? 0 : epochSeconds
        t = min(max(t, RFC3339.earliestFormattable), RFC3339.latestFormattable).rounded(.down)
        let (days, secondOfDay) = CivilCalendar.floorDiv(Int(t), 86_400)
        let (year, month, day) = CivilCalendar.date(days: days)
        return String(unsafeUninitializedCapacity: 29) { out in
            var i = 0
            func put(_ bytes: [UInt8], capitalised: Bool) {
                for (k, c) in bytes.enumerated() {
                    out[i] = k == 0 && capitalised ? c & ~0x20 : c
                    i += 1
                }
            }
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
            put(shortDayNames[CivilCalendar.weekday(days: days)], capitalised: true)
            put(Array(", ".utf8), capitalised: false)
            put(day, 2)
            put([ASCII.space], capitalised: false)
            put(monthNames[month - 1], capitalised: true)
            put([ASCII.space], capitalised: false)
            put(year, 4)
            put([ASCII.space], capitalised: false)
            put(secondOfDay / 3_600, 2)
            put([ASCII.colon], capitalised: false)
            put(secondOfDay / 60 % 60, 2)
            put([ASCII.colon], capitalised: false)
            put(secondOfDay % 60, 2)
            put(Array(" GMT".utf8), capitalised: false)
            return i
        }
    }
}
