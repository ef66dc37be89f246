/// Severity of a log record (SPEC §13: JSON-lines logs on stderr "with a level", set by `--log-level` /
/// `ALLOT_LOG_LEVEL`). Ordered: a logger at `info` writes `info` and everything more severe.
public enum LogLevel: Int, Sendable, Hashable, Comparable, CaseIterable, CustomStringConvertible {
    case trace
    case debug
    case info
    case notice
    case warning
    case error
    case critical

    /// The name written in the `level` field and accepted by `--log-level`.
    public var name: String {
        switch self {
        case .trace: "trace"
        case .debug: "debug"
        case .info: "info"
        case .notice: "notice"
        case .warning: "warning"
        case .error: "error"
        case .critical: "critical"
        }
    }

    public var description: String { name }

    /// The level with this name, case-insensitively (`INFO`, `Warning`); nil for anything else.
    public init?(name: String) {
        let lowered = name.lowercased()
        guard let level = Self.allCases.first(where: { $0.name == lowered }) else { return nil }
        self = level
    }

    /// Like ``init(name:)`` but with an error that says what was expected, for flag and environment parsing.
    public init(parsing text: String) throws(InvalidLogLevel) {
        guard let level = LogLevel(name: text) else { throw InvalidLogLevel(value: text) }
        self = level
    }

    public static func < (lhs: LogLevel, rhs: LogLevel) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// A `--log-level` / `ALLOT_LOG_LEVEL` value that names no level.
public struct InvalidLogLevel: Error, Sendable, Hashable, CustomStringConvertible {
    /// The rejected text, verbatim.
    public var value: String

    public init(value: String) {
        self.value = value
    }

    public var description: String {
        "unknown log level '\(value)'; expected one of: "
            + LogLevel.allCases.map(\.name).joined(separator: ", ")
    }
}
