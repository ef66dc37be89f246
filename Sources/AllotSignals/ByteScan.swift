#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Allocation-free scanning of header values over UTF-8 bytes: the ingest path parses headers for up to
/// 100,000 events per second (SPEC §13), so no regex, no `Scanner`, no intermediate strings.
enum ByteScan {
    static let zero: UInt8 = 0x30
    static let space: UInt8 = 0x20
    static let tab: UInt8 = 0x09
    static let dot: UInt8 = 0x2E
    static let minus: UInt8 = 0x2D
    static let percent: UInt8 = 0x25

    /// Exact powers of ten.
    static let powersOfTen: [Double] = [
        1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19,
    ]

    /// Runs `body` over the UTF-8 bytes of `text`, without copying when the string is native.
    @inline(__always)
    static func withBytes<R>(_ text: String, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        if let result = text.utf8.withContiguousStorageIfAvailable(body) {
            return result
        }
        return Array(text.utf8).withUnsafeBufferPointer(body)
    }

    /// The bytes without leading and trailing spaces and tabs (HTTP's optional whitespace, RFC 9110 §5.5,
    /// which is not part of a field value).
    @inline(__always)
    static func trimmed(_ b: UnsafeBufferPointer<UInt8>) -> UnsafeBufferPointer<UInt8> {
        var lo = 0
        var hi = b.count
        while lo < hi, b[lo] == space || b[lo] == tab { lo += 1 }
        while hi > lo, b[hi - 1] == space || b[hi - 1] == tab { hi -= 1 }
        if lo == 0 && hi == b.count { return b }
        return UnsafeBufferPointer(rebasing: b[lo..<hi])
    }

    /// A whole non-negative decimal integer (ASCII digits only, at most 18 of them so it cannot overflow).
    @inline(__always)
    static func integer(_ b: UnsafeBufferPointer<UInt8>) -> Int64? {
        let n = b.count
        guard n > 0, n <= 18 else { return nil }
        var value: Int64 = 0
        for i in 0..<n {
            let d = b[i] &- zero
            guard d < 10 else { return nil }
            value = value &* 10 &+ Int64(d)
        }
        return value
    }

    /// A non-negative decimal `1*DIGIT ["." *DIGIT] / "." 1*DIGIT` starting at `start`; returns the value and
    /// the index after it, or nil if there is no number there or its integer part has more than 19 significant
    /// digits. Fraction digits past the 19th (significant or not) are read but cannot change a `Double` that
    /// matters here, and are ignored.
    @inline(__always)
    static func decimal(_ b: UnsafeBufferPointer<UInt8>, from start: Int) -> (Double, Int)? {
        let n = b.count
        var i = start
        var mantissa: UInt64 = 0
        var significant = 0
        var integerDigits = 0
        while i < n, b[i] &- zero < 10 {
            if significant < 19 {
                mantissa = mantissa * 10 + UInt64(b[i] &- zero)
                if mantissa > 0 { significant += 1 }
            } else {
                return nil  // more than 19 significant integer digits
            }
            integerDigits += 1
            i += 1
        }
        var fractionDigits = 0
        var fractionSeen = 0
        if i < n, b[i] == dot {
            i += 1
            while i < n, b[i] &- zero < 10 {
                if significant < 19 && fractionDigits < 19 {
                    mantissa = mantissa * 10 + UInt64(b[i] &- zero)
                    if mantissa > 0 { significant += 1 }
                    fractionDigits += 1
                }
                fractionSeen += 1
                i += 1
            }
        }
        guard integerDigits + fractionSeen > 0 else { return nil }
        return (Double(mantissa) / powersOfTen[fractionDigits], i)
    }

    /// A whole value that is exactly one ``decimal(_:from:)``.
    @inline(__always)
    static func wholeDecimal(_ b: UnsafeBufferPointer<UInt8>) -> Double? {
        guard let (value, end) = decimal(b, from: 0), end == b.count else { return nil }
        return value
    }

    /// ASCII lower-casing of one byte.
    @inline(__always)
    static func lower(_ byte: UInt8) -> UInt8 {
        byte &- 0x41 < 26 ? byte | 0x20 : byte
    }

    /// Case-insensitive (ASCII) equality of `b` with an already lower-case literal.
    @inline(__always)
    static func equalsLowercase(_ b: UnsafeBufferPointer<UInt8>, _ literal: [UInt8]) -> Bool {
        guard b.count == literal.count else { return false }
        for i in 0..<b.count where lower(b[i]) != literal[i] { return false }
        return true
    }

    /// ``equalsLowercase(_:_:)`` comparing from the end, for literals that share long prefixes.
    @inline(__always)
    static func equalsLowercaseBackwards(_ b: UnsafeBufferPointer<UInt8>, _ literal: [UInt8]) -> Bool {
        guard b.count == literal.count else { return false }
        return literal.withUnsafeBufferPointer { l in
            // Fast path: HTTP/2 and most clients send lower-case names already.
            if memcmp(b.baseAddress!, l.baseAddress!, l.count) == 0 { return true }
            var i = l.count
            while i > 0 {
                i -= 1
                if lower(b[i]) != l[i] { return false }
            }
            return true
        }
    }

    /// Case-insensitive (ASCII) substring search for an already lower-case needle.
    static func containsLowercase(_ b: UnsafeBufferPointer<UInt8>, _ needle: [UInt8]) -> Bool {
        let m = needle.count
        guard m > 0, b.count >= m else { return m == 0 }
        outer: for start in 0...(b.count - m) {
            for k in 0..<m where lower(b[start + k]) != needle[k] { continue outer }
            return true
        }
        return false
    }
}
