/// Where a resolved value came from: reported in error messages so that a bad value in the
/// environment is not blamed on the command line.
public enum ValueSource: Sendable, Equatable {
    /// Given on the command line.
    case commandLine
    /// Read from this environment variable.
    case environment(String)
    /// The option's declared default.
    case defaultValue
}

/// The outcome of parsing: the selected command with every option, flag and positional resolved.
///
/// Accessors take the long name of an option or flag declared on the command or inherited from
/// a parent, or the name of a positional. Asking for a name that was never declared is a
/// programming error and stops the process (like an index out of range), because it can only be
/// fixed in code. Typed accessors validate and throw a `UsageError` that names the option, the
/// bad value and, if it did not come from the command line, where it came from.
public struct ParsedCommand: Sendable {
    /// Command names after the program name (`["tokens", "create"]`; empty for the root).
    public let path: [String]
    /// The full path including the program name, as used in messages.
    public let commandPath: [String]
    /// The selected command's spec.
    public let spec: CommandSpec
    /// The usage text errors about this command print.
    public let usage: String

    struct ResolvedOption: Sendable {
        let spec: OptionSpec
        let values: [String]
        let source: ValueSource?
    }

    struct ResolvedFlag: Sendable {
        let value: Bool
        let source: ValueSource?
    }

    let options: [String: ResolvedOption]
    let flags: [String: ResolvedFlag]
    let positionalValues: [String: [String]]

    /// The long names of the options given on the command line (not by the environment or a default), sorted.
    public var optionsOnCommandLine: [String] {
        options.filter { $0.value.source == .commandLine }.keys.sorted()
    }

    // MARK: Strings

    /// The option's value (the last one for a repeatable option), or nil when no source gave one.
    public func string(_ name: String) -> String? {
        option(name).values.last
    }

    /// Every value of a (repeatable) option in command-line order; the environment or default
    /// contributes a single value only when the command line gave none.
    public func strings(_ name: String) -> [String] {
        option(name).values
    }

    /// Where the option's or flag's value came from; nil if it has none (flags: off by default).
    public func source(of name: String) -> ValueSource? {
        if let flag = flags[name] { return flag.source }
        return option(name).source
    }

    // MARK: Typed values

    /// The option as an integer (decimal, optional sign), optionally within `range`.
    public func int(_ name: String, in range: ClosedRange<Int>? = nil) throws(UsageError) -> Int? {
        guard let text = string(name) else { return nil }
        let expectation = range.map { "an integer from \($0.lowerBound) to \($0.upperBound)" } ?? "an integer"
        guard let value = Int(text) else { throw invalid(name, text, expected: expectation) }
        if let range, !range.contains(value) { throw invalid(name, text, expected: expectation) }
        return value
    }

    /// The option as a finite number, optionally within `range`.
    public func double(_ name: String, in range: ClosedRange<Double>? = nil) throws(UsageError) -> Double? {
        guard let text = string(name) else { return nil }
        let expectation =
            range.map { "a number from \(format($0.lowerBound)) to \(format($0.upperBound))" } ?? "a number"
        // Swift's Double(_:) also accepts "nan", "inf" and hex floats: none of those is a sensible setting.
        guard text.allSatisfy({ $0.isASCII && ($0.isNumber || "+-.eE".contains($0)) }), let value = Double(text),
            value.isFinite
        else { throw invalid(name, text, expected: expectation) }
        if let range, !range.contains(value) { throw invalid(name, text, expected: expectation) }
        return value
    }

    /// The option as a case of a string-backed enum (e.g. a log level).
    public func choice<T: RawRepresentable & CaseIterable>(_ name: String, as type: T.Type) throws(UsageError) -> T?
    where T.RawValue == String {
        guard let text = string(name) else { return nil }
        guard let value = T(rawValue: text) else {
            let names = T.allCases.map(\.rawValue).joined(separator: ", ")
            throw invalid(name, text, expected: "one of \(names)")
        }
        return value
    }

    /// The option as `HOST:PORT`.
    public func hostPort(_ name: String) throws(UsageError) -> HostPort? {
        guard let text = string(name) else { return nil }
        switch HostPort.parse(text) {
        case .success(let value): return value
        case .failure(let error): throw invalid(name, text, expected: "HOST:PORT (\(error.reason))")
        }
    }

    // MARK: Flags and positionals

    /// Whether the flag is on.
    public func flag(_ name: String) -> Bool {
        guard let flag = flags[name] else { preconditionFailure("flag --\(name) is not declared for \(pathText)") }
        return flag.value
    }

    /// The value of a single positional (nil if an optional one was not given).
    public func positional(_ name: String) -> String? {
        positionals(name).first
    }

    /// The values of a positional (several for a variadic one).
    public func positionals(_ name: String) -> [String] {
        guard let values = positionalValues[name] else {
            preconditionFailure("positional <\(name)> is not declared for \(pathText)")
        }
        return values
    }

    // MARK: Errors raised by the command itself

    /// A usage error for this command, for checks the parser cannot make (e.g. "--dev is refused
    /// on a non-loopback address"): same format and exit code as the parser's own errors.
    public func usageError(_ message: String) -> UsageError {
        UsageError(message: message, usage: usage, commandPath: commandPath)
    }

    /// The standard "invalid value" error for option `name`, naming where the value came from.
    public func invalidValue(_ name: String, _ value: String, expected: String) -> UsageError {
        invalid(name, value, expected: expected)
    }

    private func invalid(_ name: String, _ value: String, expected: String) -> UsageError {
        let origin: String
        switch option(name).source {
        case .environment(let variable): origin = " (from \(variable))"
        case .defaultValue: origin = " (the default)"
        case .commandLine, nil: origin = ""
        }
        return usageError("invalid value \(quoted(value)) for --\(name)\(origin): expected \(expected)")
    }

    private func option(_ name: String) -> ResolvedOption {
        guard let option = options[name] else {
            preconditionFailure("option --\(name) is not declared for \(pathText)")
        }
        return option
    }

    private var pathText: String { commandPath.joined(separator: " ") }

    private func format(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }
}
