/// Proleptic Gregorian calendar arithmetic on day numbers relative to 1970-01-01.
///
/// The algorithms are Howard Hinnant's `days_from_civil` / `civil_from_days`
/// (<https://howardhinnant.github.io/date_algorithms.html>): branch-light integer maths that is exact for every
/// year this project can meet, needs no tables and no Foundation calendar (which is slow and not `Sendable`).
enum CivilCalendar {
    /// Day number (days since 1970-01-01, negative before) of a valid civil date.
    @inline(__always)
    static func days(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yoe = y - era * 400  // [0, 399]
        let mp = (month + 9) % 12  // March = 0
        let doy = (153 * mp + 2) / 5 + day - 1  // [0, 365]
        let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy  // [0, 146096]
        return era * 146_097 + doe - 719_468
    }

    /// The civil date of a day number; inverse of ``days(year:month:day:)``.
    @inline(__always)
    static func date(days: Int) -> (year: Int, month: Int, day: Int) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097  // [0, 146096]
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365  // [0, 399]
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)  // [0, 365]
        let mp = (5 * doy + 2) / 153  // [0, 11]
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        return (yoe + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    static func isLeap(_ year: Int) -> Bool {
        year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
    }

    static func daysInMonth(year: Int, month: Int) -> Int {
        switch month {
        case 2: return isLeap(year) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Day of week of a day number, 0 = Sunday (1970-01-01 was a Thursday).
    static func weekday(days: Int) -> Int {
        let w = (days + 4) % 7
        return w < 0 ? w + 7 : w
    }

    /// Floor division, so that instants before 1970 fall on the right day.
    @inline(__always)
    static func floorDiv(_ a: Int, _ b: Int) -> (quotient: Int, remainder: Int) {
        var q = a / b
        var r = a % b
        if r < 0 {
            q -= 1
            r += b
        }
        return (q, r)
    }
}

/// ASCII byte constants and small scanning helpers shared by the parsers in this module.
enum ASCII {
    static let zero: UInt8 = 0x30
    static let nine: UInt8 = 0x39
    static let space: UInt8 = 0x20
    static let tab: UInt8 = 0x09
    static let plus: UInt8 = 0x2B
    static let comma: UInt8 = 0x2C
    static let minus: UInt8 = 0x2D
    static let dot: UInt8 = 0x2E
    static let colon: UInt8 = 0x3A

    @inline(__always)
    static func isDigit(_ b: UInt8) -> Bool { b &- zero < 10 }

    @inline(__always)
    static func lower(_ b: UInt8) -> UInt8 { b >= 0x41 && b <= 0x5A ? b | 0x20 : b }

    /// Reads exactly `count` decimal digits at `offset`; nil if any byte is not a digit or the buffer is short.
    @inline(__always)
    static func digits(_ bytes: UnsafeBufferPointer<UInt8>, _ offset: Int, _ count: Int) -> Int? {
        guard offset >= 0, offset + count <= bytes.count else { return nil }
        var value = 0
        for i in offset..<(offset + count) {
            let d = bytes[i] &- zero
            guard d < 10 else { return nil }
            value = value * 10 + Int(d)
        }
        return value
    }

    /// Exact powers of ten as doubles (all exactly representable up to 1e22).
    static let powersOfTen: [Double] = [
        1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18,
    ]

    /// Runs `body` over the UTF-8 bytes of `text` without copying when the string is native.
    @inline(__always)
    static func withBytes<R>(_ text: String, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        if let result = text.utf8.withContiguousStorageIfAvailable(body) {
            return result
        }
        return Array(text.utf8).withUnsafeBufferPointer(body)
    }
}
