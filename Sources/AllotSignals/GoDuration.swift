/// Go-style durations (`1s`, `6m0s`, `2m59.56s`, `250ms`, `1h2m3.5s`) → seconds.
///
/// OpenAI and Azure write `x-ratelimit-reset-*` with Go's `time.Duration.String()`, and Google writes
/// `RetryInfo.retryDelay` as protobuf JSON (`22s`, `3.5s`), a subset of the same grammar (SPEC §4).
///
/// Grammar, slightly stricter than Go's `time.ParseDuration` so that garbage is noticed rather than summed:
///
///     duration  = "0" / 1*( number unit )       ; no sign: a negative wait is meaningless here
///     number    = 1*DIGIT [ "." *DIGIT ] / "." 1*DIGIT
///     unit      = "h" / "m" / "s" / "ms" / "us" / "µs" (U+00B5) / "μs" (U+03BC) / "ns"
///
/// - Units must appear in strictly decreasing size, each at most once (`1s1s` and `1s1m` are rejected: Go
///   accepts them, but no Go program writes them, so they signal a corrupted value).
/// - Any component may have a fraction (`1.5h`); the total may not exceed Go's maximum duration (about 292
///   years); more than 19 significant integer digits in a component is overflow.
/// - A bare number other than `0` is rejected, as in Go. Only ASCII digits count (no Unicode digits).
public enum GoDuration {
    /// Largest duration Go can represent, in seconds (`math.MaxInt64` nanoseconds).
    public static let maximumSeconds = 9_223_372_036.854_775_807

    /// Seconds for a Go duration string, or nil when it is not one.
    public static func parse(_ text: String) -> Double? {
        ByteScan.withBytes(text) { parse(utf8: $0) }
    }

    /// ``parse(_:)`` over raw UTF-8 bytes.
    public static func parse(utf8 b: UnsafeBufferPointer<UInt8>) -> Double? {
        let n = b.count
        guard n > 0, n <= 64 else { return nil }
        if n == 1, b[0] == ByteScan.zero { return 0 }
        var i = 0
        var total = 0.0
        var previousRank = Int.max
        while i < n {
            guard let (value, next) = ByteScan.decimal(b, from: i), next > i else { return nil }
            i = next
            guard let (rank, factor, afterUnit) = unit(b, at: i), rank < previousRank else { return nil }
            previousRank = rank
            i = afterUnit
            total += value * factor
        }
        guard total <= maximumSeconds else { return nil }
        return total
    }

    /// Reads a unit at `i`: its rank (larger = bigger unit), seconds per unit, and the index after it.
    private static func unit(_ b: UnsafeBufferPointer<UInt8>, at i: Int) -> (Int, Double, Int)? {
        let n = b.count
        guard i < n else { return nil }
        let next: UInt8 = i + 1 < n ? b[i + 1] : 0
        switch b[i] {
        case 0x68: return (6, 3_600, i + 1)  // h
        case 0x6D:  // m, ms
            return next == 0x73 ? (3, 1e-3, i + 2) : (5, 60, i + 1)
        case 0x73: return (4, 1, i + 1)  // s
        case 0x75: return next == 0x73 ? (2, 1e-6, i + 2) : nil  // us
        case 0x6E: return next == 0x73 ? (1, 1e-9, i + 2) : nil  // ns
        case 0xC2, 0xCE:  // µs (C2 B5), μs (CE BC)
            guard i + 2 < n, b[i + 2] == 0x73,
                (b[i] == 0xC2 && next == 0xB5) || (b[i] == 0xCE && next == 0xBC)
            else { return nil }
            return (2, 1e-6, i + 3)
        default: return nil
        }
    }
}
