/// Conversions between the two representations of an instant used across Allot: `Double` seconds since the
/// Unix epoch (the maths and the clocks) and `Int64` milliseconds since the epoch (SQLite columns, telemetry
/// `ts` given as an integer, SPEC §3).
public enum EpochTime {
    /// Milliseconds for an instant in seconds, rounded to the nearest millisecond (so `x.123` held as
    /// `x.12299999` stores `…123`). NaN is 0 and values beyond `Int64` are clamped, so a stray value can never
    /// trap on the way into storage.
    public static func milliseconds(fromSeconds seconds: Double) -> Int64 {
        guard !seconds.isNaN else { return 0 }
        let ms = (seconds * 1_000).rounded()
        if ms >= 0x1p63 { return .max }
        if ms <= -0x1p63 { return .min }
        return Int64(ms)
    }

    /// Seconds for an instant in milliseconds (exact to the microsecond for any date in years 0–9999).
    public static func seconds(fromMilliseconds milliseconds: Int64) -> Double {
        Double(milliseconds) / 1_000
    }
}
