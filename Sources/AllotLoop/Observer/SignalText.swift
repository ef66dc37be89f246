/// Numbers in human-readable signals, alert messages and reasons: whole numbers when large or
/// integral, otherwise rounded to `digits` decimals with trailing zeros trimmed.
enum SignalText {
    static func number(_ value: Double, digits: Int = 1) -> String {
        guard value.isFinite else { return value > 0 ? "∞" : "-∞" }
        // A ratio over a sliver (served against an allocation of 10⁻³⁰⁰) or a limit stated in a header can be
        // finite and past Int64, where the conversion would trap: such a number is written as a Double.
        guard abs(value) < 1e18 else { return String(value) }
        if abs(value) >= 100 || value == value.rounded() { return String(Int64(value.rounded())) }
        var scale = 1.0
        for _ in 0..<max(0, digits) { scale *= 10 }
        let rounded = (value * scale).rounded() / scale
        if rounded == rounded.rounded() { return String(Int64(rounded)) }
        var text = String(rounded)
        if text.contains("e") { return text }
        while text.hasSuffix("0") { text.removeLast() }
        return text
    }

    /// A fraction as a percentage: `0.333` → `33.3%`.
    static func percent(_ fraction: Double) -> String { number(fraction * 100) + "%" }

    /// Seconds: `60 s`.
    static func seconds(_ value: Double) -> String { number(value) + " s" }
}
