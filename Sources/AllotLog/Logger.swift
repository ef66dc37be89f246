import AllotJSON
import AllotTime

/// Structured JSON-lines logging (SPEC §13): every record is one line on standard error,
///
///     {"ts":"2026-11-22T03:00:00.123Z","level":"info","msg":"snapshot published","logger":"loop","version":42}
///
/// — `ts` (RFC 3339, UTC, milliseconds), `level`, `msg`, `logger` (the label, omitted when empty), then the
/// logger's metadata and the call's fields in order. A value type: `with(_:)`
/// returns a child with more metadata, so components pass loggers down without shared mutable state.
///
/// Filtering is cheap: the message and fields are autoclosures, evaluated only when the level is enabled.
/// Escaping uses AllotJSON's writer, so any string (quotes, control characters, newlines, any Unicode) stays
/// inside its one line. Field names `ts`, `level`, `msg` and `logger` are reserved: a field with one of those
/// names is written with a leading underscore (`_msg`) rather than producing a duplicate key. A call's field
/// replaces a metadata field of the same name.
public struct Logger: Sendable {
    /// Names the component (`http`, `loop`, `store`); written as `logger`.
    public var label: String
    /// Records below this level are dropped before anything is formatted.
    public var minimumLevel: LogLevel
    /// Fields written on every record of this logger, in order.
    public private(set) var metadata: [(key: String, value: LogValue)]
    /// Where lines go.
    public var sink: any LogSink
    /// Source of `ts`; a `ManualClock` makes lines deterministic in tests.
    public var clock: any AllotClock

    /// - Parameters:
    ///   - label: the component's name; empty to omit the `logger` field.
    ///   - minimumLevel: the least severe level written; default `info`.
    ///   - sink: where lines go; default standard error, through a queue (``QueuedLogSink/standardError``).
    ///   - clock: the source of timestamps; default the system clock.
    public init(
        label: String, minimumLevel: LogLevel = .info, sink: any LogSink = QueuedLogSink.standardError,
        clock: any AllotClock = SystemClock()
    ) {
        self.label = label
        self.minimumLevel = minimumLevel
        self.metadata = []
        self.sink = sink
        self.clock = clock
    }

    /// A logger that writes nothing, for code under test whose logs do not matter.
    public static var disabled: Logger {
        Logger(label: "", minimumLevel: .critical, sink: DiscardingLogSink())
    }

    /// A child logger whose records also carry `fields` (replacing metadata of the same name).
    public func with(_ fields: KeyValuePairs<String, LogValue>) -> Logger {
        with(fields.map { ($0.key, $0.value) })
    }

    /// `with(_:)` for fields built at run time.
    public func with(_ fields: [(String, LogValue)]) -> Logger {
        var child = self
        for (key, value) in fields {
            if let index = child.metadata.firstIndex(where: { $0.key == key }) {
                child.metadata[index].value = value
            } else {
                child.metadata.append((key, value))
            }
        }
        return child
    }

    /// A child logger with another label.
    public func labelled(_ label: String) -> Logger {
        var child = self
        child.label = label
        return child
    }

    /// True when records at `level` are written; check it before expensive work that only feeds a log record.
    @inlinable
    public func isEnabled(_ level: LogLevel) -> Bool { level >= minimumLevel }

    /// Writes one record if `level` is enabled.
    @inlinable
    public func log(
        _ level: LogLevel, _ message: @autoclosure () -> String,
        _ fields: @autoclosure () -> KeyValuePairs<String, LogValue> = [:]
    ) {
        guard level >= minimumLevel else { return }
        emit(level, message(), fields().map { ($0.key, $0.value) })
    }

    /// Writes one record with fields built at run time, if `level` is enabled.
    @inlinable
    public func log(
        _ level: LogLevel, _ message: @autoclosure () -> String, fields: @autoclosure () -> [(String, LogValue)]
    ) {
        guard level >= minimumLevel else { return }
        emit(level, message(), fields())
    }

    @usableFromInline
    func emit(_ level: LogLevel, _ message: String, _ fields: [(String, LogValue)]) {
        sink.write(line: line(level: level, message: message, fields: fields, at: clock.now))
    }

    /// The exact bytes of one record, newline included (what ``log(_:_:_:)`` hands to the sink).
    public func line(level: LogLevel, message: String, fields: [(String, LogValue)], at time: Double) -> [UInt8] {
        var writer = JSONWriter(capacity: 128 + message.utf8.count)
        writer.beginObject()
        writer.field("ts", RFC3339.format(time, fractionDigits: 3))
        writer.field("level", level.name)
        writer.field("msg", message)
        if !label.isEmpty { writer.field("logger", label) }
        for (key, value) in metadata where !fields.contains(where: { $0.0 == key }) {
            writer.key(Self.fieldName(key))
            value.write(to: &writer)
        }
        for (index, (key, value)) in fields.enumerated() {
            // A repeated name within one call: the last one wins, like metadata.
            if fields[(index + 1)...].contains(where: { $0.0 == key }) { continue }
            writer.key(Self.fieldName(key))
            value.write(to: &writer)
        }
        writer.endObject()
        var bytes = writer.bytes
        bytes.append(0x0A)
        return bytes
    }

    private static func fieldName(_ key: String) -> String {
        switch key {
        case "ts", "level", "msg", "logger": "_" + key
        default: key
        }
    }
}

extension Logger {
    @inlinable
    public func trace(
        _ message: @autoclosure () -> String, _ fields: @autoclosure () -> KeyValuePairs<String, LogValue> = [:]
    ) {
        log(.trace, message(), fields())
    }

    @inlinable
    public func debug(
        _ message: @autoclosure () -> String, _ fields: @autoclosure () -> KeyValuePairs<String, LogValue> = [:]
    ) {
        log(.debug, message(), fields())
    }

    @inlinable
    public func info(
        _ message: @autoclosure () -> String, _ fields: @autoclosure () -> KeyValuePairs<String, LogValue> = [:]
    ) {
        log(.info, message(), fields())
    }

    @inlinable
    public func notice(
        _ message: @autoclosure () -> String, _ fields: @autoclosure () -> KeyValuePairs<String, LogValue> = [:]
    ) {
        log(.notice, message(), fields())
    }

    @inlinable
    public func warning(
        _ message: @autoclosure () -> String, _ fields: @autoclosure () -> KeyValuePairs<String, LogValue> = [:]
    ) {
        log(.warning, message(), fields())
    }

    @inlinable
    public func error(
        _ message: @autoclosure () -> String, _ fields: @autoclosure () -> KeyValuePairs<String, LogValue> = [:]
    ) {
        log(.error, message(), fields())
    }

    @inlinable
    public func critical(
        _ message: @autoclosure () -> String, _ fields: @autoclosure () -> KeyValuePairs<String, LogValue> = [:]
    ) {
        log(.critical, message(), fields())
    }
}
