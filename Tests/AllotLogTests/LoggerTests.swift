import AllotJSON
import AllotTime
import Foundation
import Testing

@testable import AllotLog

@Suite("Logger")
struct LoggerTests {
    static let now = 1_795_316_400.123  // 2026-11-22T03:00:00.123Z

    func makeLogger(level: LogLevel = .trace, label: String = "test") -> (Logger, CapturingLogSink) {
        let sink = CapturingLogSink()
        return (Logger(label: label, minimumLevel: level, sink: sink, clock: ManualClock(now: Self.now)), sink)
    }

    @Test("exact line format: ts, level, msg, logger, metadata, fields, newline")
    func exactFormat() {
        let (logger, sink) = makeLogger()
        logger.with(["pool": "openai/gpt-4o"]).info(
            "snapshot published", ["version": 42, "ratio": 0.5, "dev": true, "gone": nil, "note": "a\tb"])
        #expect(
            sink.lines == [
                #"{"ts":"2026-11-22T03:00:00.123Z","level":"info","msg":"snapshot published","logger":"test","#
                    + #""pool":"openai/gpt-4o","version":42,"ratio":0.5,"dev":true,"gone":null,"note":"a\tb"}"# + "\n"
            ])
    }

    @Test("no label, no fields: the four mandatory keys only")
    func minimal() {
        let (logger, sink) = makeLogger(label: "")
        logger.warning("disk almost full")
        #expect(sink.lines == [#"{"ts":"2026-11-22T03:00:00.123Z","level":"warning","msg":"disk almost full"}"# + "\n"])
    }

    @Test("nested JSON, huge and non-finite numbers")
    func values() {
        let (logger, sink) = makeLogger(label: "")
        let details: JSON = ["index": 3, "field": "tenant", "ok": false]
        logger.error(
            "batch rejected",
            [
                "details": .json(details), "max": .int(.max), "min": .int(.min), "nan": .double(.nan),
                "inf": .double(.infinity),
                "big": LogValue(UInt64.max), "small": LogValue(-7), "list": .json([1, "two", nil]),
            ])
        let expected: String =
            #"{"ts":"2026-11-22T03:00:00.123Z","level":"error","msg":"batch rejected","#
            + #""details":{"index":3,"field":"tenant","ok":false},"max":9223372036854775807,"#
            + #""min":-9223372036854775808,"nan":null,"inf":null,"big":"18446744073709551615","small":-7,"#
            + #""list":[1,"two",null]}"# + "\n"
        #expect(sink.lines.first == expected)
    }

    static let hostileStrings = [
        "quote \" backslash \\ slash /", "newline \n carriage \r tab \t", "nul \u{0} bell \u{7} esc \u{1B} del \u{7F}",
        "unicode: café 日本語 🙂 \u{2028}\u{2029} \u{FEFF}", "}\n{\"level\":\"critical\",\"msg\":\"forged\"}",
        String(repeating: "\u{1}", count: 100), "", " ",
    ]

    @Test(
        "hostile strings in messages, field names and values stay on one line and round-trip", arguments: hostileStrings
    )
    func escaping(hostile: String) throws {
        let (logger, sink) = makeLogger()
        logger.info(hostile, [hostile: .string(hostile), "k": "\(hostile)"])
        let line = try #require(sink.lines.first)
        #expect(line.utf8.filter { $0 == 0x0A }.count == 1 && line.hasSuffix("\n"))
        #expect(!line.utf8.dropLast().contains { $0 < 0x20 }, "raw control characters must be escaped")
        let record = try #require(sink.records.first ?? nil)
        #expect(record["msg"]?.stringValue == hostile)
        #expect(record["k"]?.stringValue == hostile)
        let expectedKey = ["ts", "level", "msg", "logger"].contains(hostile) ? "_" + hostile : hostile
        #expect(record[expectedKey]?.stringValue == hostile)
        #expect(record["level"]?.stringValue == "info")
    }

    @Test("level filtering: below the minimum nothing is written and nothing is evaluated")
    func filtering() {
        let (logger, sink) = makeLogger(level: .notice)
        var evaluated = 0
        func expensive() -> String {
            evaluated += 1
            return "expensive"
        }
        func expensiveFields() -> KeyValuePairs<String, LogValue> {
            evaluated += 1
            return ["a": 1]
        }
        logger.trace(expensive(), expensiveFields())
        logger.debug(expensive(), expensiveFields())
        logger.info(expensive(), expensiveFields())
        logger.log(.info, expensive(), fields: [("a", .int(Int64(evaluated)))])
        #expect(evaluated == 0)
        #expect(sink.lines.isEmpty)
        logger.notice("n")
        logger.warning("w")
        logger.error("e")
        logger.critical("c")
        logger.log(.notice, expensive(), fields: [("x", 1)])
        #expect(
            sink.records.compactMap { $0?["level"]?.stringValue } == [
                "notice", "warning", "error", "critical", "notice",
            ])
        #expect(evaluated == 1)
        #expect(logger.isEnabled(.notice) && !logger.isEnabled(.info))
        #expect(Logger.disabled.isEnabled(.critical) && !Logger.disabled.isEnabled(.error))
    }

    @Test("child loggers add and replace metadata; call fields win; reserved names are prefixed")
    func metadata() throws {
        let (root, sink) = makeLogger(label: "root")
        let child = root.with(["tenant": "a", "pool": "p1"]).with(["tenant": "b"]).labelled("child")
        #expect(child.metadata.map(\.key) == ["tenant", "pool"])
        #expect(root.metadata.isEmpty)
        child.info("m", ["pool": "p2", "msg": "sneaky", "level": "critical", "x": 1, "x": 2])
        #expect(
            sink.lines == [
                #"{"ts":"2026-11-22T03:00:00.123Z","level":"info","msg":"m","logger":"child","tenant":"b","#
                    + #""pool":"p2","_msg":"sneaky","_level":"critical","x":2}"# + "\n"
            ])
    }

    @Test("timestamps come from the logger's clock")
    func clock() {
        let sink = CapturingLogSink()
        let clock = ManualClock(now: 0)
        let logger = Logger(label: "", sink: sink, clock: clock)
        logger.info("a")
        clock.advance(by: 86_400.5)
        logger.info("b")
        #expect(
            sink.records.map { $0?["ts"]?.stringValue } == ["1970-01-01T00:00:00.000Z", "1970-01-02T00:00:00.500Z"])
        sink.removeAll()
        #expect(sink.lines.isEmpty)
    }

    @Test("log levels parse case-insensitively and say what they expect otherwise")
    func levels() throws {
        #expect(LogLevel(name: "INFO") == .info)
        #expect(LogLevel(name: "Warning") == .warning)
        #expect(LogLevel(name: "trace") == .trace)
        #expect(LogLevel(name: "warn") == nil)
        #expect(LogLevel(name: "") == nil)
        #expect(try LogLevel(parsing: "CRITICAL") == .critical)
        #expect(throws: InvalidLogLevel(value: "verbose")) { try LogLevel(parsing: "verbose") }
        #expect(
            InvalidLogLevel(value: "verbose").description
                == "unknown log level 'verbose'; expected one of: trace, debug, info, notice, warning, error, critical")
        #expect(LogLevel.allCases.sorted() == LogLevel.allCases)
        #expect(
            LogLevel.allCases.map(\.description) == [
                "trace", "debug", "info", "notice", "warning", "error", "critical",
            ])
    }

    @Test("concurrent logging from many tasks produces only whole, parseable lines")
    func concurrentCapture() async throws {
        let (logger, sink) = makeLogger()
        await withTaskGroup(of: Void.self) { group in
            for task in 0..<16 {
                group.addTask {
                    for i in 0..<250 { logger.info("message \(i)", ["task": .int(Int64(task)), "i": .int(Int64(i))]) }
                }
            }
        }
        let records = sink.records
        #expect(records.count == 4_000)
        #expect(records.allSatisfy { $0 != nil })
        var seen = Set<Int64>()
        for record in records.compactMap({ $0 }) {
            seen.insert((record["task"]?.int64Value ?? -1) * 1_000 + (record["i"]?.int64Value ?? -1))
        }
        #expect(seen.count == 4_000)
    }
}
