/// A registration error: the metric definition is wrong, not the traffic.
///
/// Raised only when a family or collector is registered, never on the increment path.
public struct MetricsError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What is wrong with the definition.
    public enum Code: String, Sendable {
        /// Not `[a-zA-Z_:][a-zA-Z0-9_:]*`, or a counter without the `_total` suffix.
        case invalidName = "invalid_name"
        /// Not `[a-zA-Z_][a-zA-Z0-9_]*`, starts with the reserved `__`, repeated, or `le` on a histogram.
        case invalidLabelName = "invalid_label_name"
        /// Histogram bounds that are empty, not finite or not strictly increasing.
        case invalidBuckets = "invalid_buckets"
        /// The name (or one of the sample names it produces) is already taken by a different definition.
        case duplicateName = "duplicate_name"
        /// Any other invalid parameter, such as a series cap below 1.
        case invalidParameter = "invalid_parameter"
    }

    /// The kind of problem.
    public let code: Code
    /// The metric family at fault.
    public let metric: String
    /// What exactly is wrong.
    public let message: String

    /// Creates an error value.
    public init(code: Code, metric: String, message: String) {
        self.code = code
        self.metric = metric
        self.message = message
    }

    public var description: String { "\(code.rawValue): \(metric): \(message)" }
}
