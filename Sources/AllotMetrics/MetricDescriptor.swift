/// The Prometheus metric types this module exposes.
public enum MetricType: String, Sendable {
    case counter
    case gauge
    case histogram
}

/// What a family is: name, help text, type and label names, validated once at registration.
public struct MetricDescriptor: Sendable, Equatable {
    /// The family name, e.g. `allot_http_requests_total`.
    public let name: String
    /// One line for the `# HELP` line.
    public let help: String
    /// Counter, gauge or histogram.
    public let type: MetricType
    /// Label names in the order label values are given.
    public let labelNames: [String]

    /// Validates and creates a descriptor.
    ///
    /// Rules (Prometheus data model): names match `[a-zA-Z_:][a-zA-Z0-9_:]*`; counters end in
    /// `_total` (the OpenMetrics convention, so a counter is recognisable from its name alone);
    /// label names match `[a-zA-Z_][a-zA-Z0-9_]*`, do not start with `__` (reserved for Prometheus)
    /// and are unique; a histogram may not use `le`, which its buckets own.
    public init(name: String, help: String, type: MetricType, labelNames: [String] = []) throws(MetricsError) {
        guard MetricDescriptor.isValidMetricName(name) else {
            throw MetricsError(
                code: .invalidName, metric: name, message: "metric names must match [a-zA-Z_:][a-zA-Z0-9_:]*")
        }
        if type == .counter && !name.hasSuffix("_total") {
            throw MetricsError(code: .invalidName, metric: name, message: "counter names must end in _total")
        }
        var seen = Set<String>()
        for label in labelNames {
            guard MetricDescriptor.isValidLabelName(label) else {
                throw MetricsError(
                    code: .invalidLabelName, metric: name,
                    message: "label name \"\(label)\" must match [a-zA-Z_][a-zA-Z0-9_]* and not start with __")
            }
            guard seen.insert(label).inserted else {
                throw MetricsError(code: .invalidLabelName, metric: name, message: "label \"\(label)\" is repeated")
            }
            if type == .histogram && label == "le" {
                throw MetricsError(
                    code: .invalidLabelName, metric: name, message: "label \"le\" is reserved for histogram buckets")
            }
        }
        self.name = name
        self.help = help
        self.type = type
        self.labelNames = labelNames
    }

    /// The names of the samples this family writes (a histogram writes three).
    var sampleNames: [String] {
        type == .histogram ? [name + "_bucket", name + "_sum", name + "_count"] : [name]
    }

    /// `[a-zA-Z_:][a-zA-Z0-9_:]*`
    public static func isValidMetricName(_ name: String) -> Bool {
        isIdentifier(name, allowColon: true)
    }

    /// `[a-zA-Z_][a-zA-Z0-9_]*`, not starting with `__`.
    public static func isValidLabelName(_ name: String) -> Bool {
        isIdentifier(name, allowColon: false) && !name.hasPrefix("__")
    }

    private static func isIdentifier(_ name: String, allowColon: Bool) -> Bool {
        guard !name.isEmpty else { return false }
        for (index, byte) in name.utf8.enumerated() {
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "_"):
                continue
            case UInt8(ascii: "0")...UInt8(ascii: "9") where index > 0:
                continue
            case UInt8(ascii: ":") where allowColon:
                continue
            default:
                return false
            }
        }
        return true
    }
}
