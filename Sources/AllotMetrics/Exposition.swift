/// Writing the Prometheus text exposition format, version 0.0.4.
///
/// Reference: <https://prometheus.io/docs/instrumenting/exposition_formats/#text-based-format>.
/// Every family is a `# HELP` line, a `# TYPE` line and its samples, one per line, each line ending
/// in `\n`. Label values escape backslash, double quote and line feed; HELP text escapes backslash
/// and line feed. Values are Go-parsable floats: `+Inf`, `-Inf`, `NaN`, integers without a
/// fraction, everything else in Swift's shortest round-tripping form (`0.005`, `1e-05`).
enum Exposition {
    /// The `Content-Type` of a rendered exposition.
    static let contentType = "text/plain; version=0.0.4; charset=utf-8"

    static func appendHeader(_ descriptor: MetricDescriptor, to out: inout String) {
        out += "# HELP "
        out += descriptor.name
        out += " "
        appendEscaped(descriptor.help, quotes: false, to: &out)
        out += "\n# TYPE "
        out += descriptor.name
        out += " "
        out += descriptor.type.rawValue
        out += "\n"
    }

    /// One sample line: `name{a="x",b="y",extra="z"} value`.
    static func appendSample(
        name: String, labelNames: [String], labelValues: [String], extra: (name: String, value: String)? = nil,
        value: Double, to out: inout String
    ) {
        out += name
        if !labelNames.isEmpty || extra != nil {
            out += "{"
            var first = true
            for (label, labelValue) in zip(labelNames, labelValues) {
                if !first { out += "," }
                first = false
                out += label
                out += "=\""
                appendEscaped(labelValue, quotes: true, to: &out)
                out += "\""
            }
            if let extra {
                if !first { out += "," }
                out += extra.name
                out += "=\""
                out += extra.value
                out += "\""
            }
            out += "}"
        }
        out += " "
        out += format(value)
        out += "\n"
    }

    /// Formats a sample value or bucket bound.
    static func format(_ value: Double) -> String {
        if value.isNaN { return "NaN" }
        if value.isInfinite { return value > 0 ? "+Inf" : "-Inf" }
        // Integral values up to 2^53 print exactly as integers (`3`, not `3.0`).
        if value == value.rounded(), abs(value) <= 9_007_199_254_740_992 {
            return String(Int64(value))
        }
        return value.description
    }

    static func appendEscaped(_ text: String, quotes: Bool, to out: inout String) {
        // Fast path: most label values need no escaping.
        if !text.utf8.contains(where: { $0 == 0x5c || $0 == 0x0a || (quotes && $0 == 0x22) }) {
            out += text
            return
        }
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\"" where quotes: out += "\\\""
            default: out.unicodeScalars.append(scalar)
            }
        }
    }
}

/// Orders series by their label values, element by element, so output is deterministic.
func labelValuesPrecede(_ lhs: [String], _ rhs: [String]) -> Bool {
    for (a, b) in zip(lhs, rhs) where a != b {
        return a < b
    }
    return lhs.count < rhs.count
}
