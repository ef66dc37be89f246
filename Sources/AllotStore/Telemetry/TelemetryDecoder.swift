import AllotCore
import AllotJSON
import AllotSignals
import AllotTime

/// Decodes and validates a `POST /v1/telemetry` body into a ``TelemetryBatch`` (SPEC section 3).
///
/// **All or nothing.** The whole body is decoded and every event validated before anything is
/// stored. The first problem ends decoding and is reported as a ``TelemetryRejection`` naming the
/// event's 0-based index, the field and the reason (the first, not all: a gateway that sends one
/// malformed event usually sends the same mistake in every event, and one precise message is what
/// its developer needs; it also bounds the work spent on a hostile body).
///
/// **Unknown members are ignored, counted and echoed back**, not rejected. Gateways and Allot are
/// upgraded independently; a gateway library that learns a new field must not have every batch
/// refused by an older server (losing all telemetry would starve the feedback loop, which is far
/// worse than losing one new field). To still catch misspellings early, the batch carries the count
/// and the distinct ignored names, which the HTTP response returns as `ignored_fields`. A member
/// that appears twice in one event is rejected: which value was meant is unknowable.
///
/// **Fields** (SPEC section 3; `null` is the same as absent for optional fields):
/// - `ts` (required): RFC 3339 string, or integer epoch milliseconds; not before
///   ``TelemetryValidation/earliestTimestamp``, not more than ``TelemetryValidation/maxFutureSkew``
///   ahead of `now`.
/// - `gateway` (required): 1–128 characters of `[A-Za-z0-9._:/-]`.
/// - `tenant` (required): 1–128 characters of `[A-Za-z0-9._:-]` (SPEC).
/// - `upstream` (required): 1–128 characters of `[A-Za-z0-9._:/@+-]`, e.g. `openai/gpt-4o`.
/// - `outcome`: one of the eight SPEC outcomes; when absent it is classified by
///   ``AllotSignals/ErrorClassifier`` from `status`, `error_type` and `error_body`, and then at
///   least one of those must be present.
/// - `status`: integer 100–599.
/// - `latency_ms`, `queue_ms`: finite number from 0 to ``TelemetryValidation/maxDurationMs``.
/// - `prompt_tokens`, `completion_tokens`, `estimated_tokens`: integer from 0 to
///   ``TelemetryValidation/maxTokens``.
/// - `retry`: integer from 0 to ``TelemetryValidation/maxRetry``.
/// - `task_class`: `realtime`, `interactive`, `batch` or `background`; default `interactive`.
/// - `task_id`, `model_version`, `error_type`: non-empty strings without control characters,
///   bounded in bytes.
/// - `headers`: object of header name → string value (a number is taken as its decimal text),
///   bounded in count and size; parsed by ``AllotSignals/ProviderSignals``. A recognised header
///   whose value cannot be read is counted in ``TelemetryEvent/unparseableHeaders``, never fatal.
/// - `error_body` (extension, not in the SPEC table): the provider's error body as a JSON object or
///   array, or as a string; bounded. Google reports rate limits only there (`RESOURCE_EXHAUSTED` with
///   `retryDelay` and quota violations), and it sharpens classification. It is read, not stored.
///
/// Integer fields accept integral numbers written with a fraction or exponent (`1200.0`, `1.2e3`),
/// which some JSON encoders produce; `1200.5` is refused.
///
/// Decoding walks the bytes once with ``AllotJSON/JSONScanner`` straight into the event struct,
/// never building a JSON tree per event (SPEC section 13: 100,000 events/s).
public struct TelemetryDecoder: Sendable {
    public var validation: TelemetryValidation

    public init(validation: TelemetryValidation = TelemetryValidation()) {
        self.validation = validation
    }

    /// Decodes and validates `body`.
    ///
    /// - Parameters:
    ///   - body: The request body.
    ///   - format: From the request's `Content-Type` (``TelemetryFormat/init(contentType:)``).
    ///   - now: The server's time, seconds since the epoch, for the future-skew bound.
    /// - Throws: ``TelemetryRejection``: 400 (`invalid_json`, `invalid_event`, `empty_batch`) or
    ///   413 (`too_many_events`).
    public func decode(_ body: [UInt8], format: TelemetryFormat, now: Double) throws(TelemetryRejection)
        -> TelemetryBatch
    {
        let result = body.withUnsafeBufferPointer { buffer -> Result<TelemetryBatch, TelemetryRejection> in
            var state = DecodingState(validation: validation, now: now)
            // Events are a few hundred bytes each; reserving avoids copying the array as it grows.
            state.batch.events.reserveCapacity(min(validation.maxEvents, body.count / 200 + 1))
            do {
                switch format {
                case .jsonArray: try state.decodeArray(buffer)
                case .ndjson: try state.decodeLines(buffer)
                }
            } catch let rejection as TelemetryRejection {
                return .failure(rejection)
            } catch let error as JSONParseError {
                return .failure(state.syntaxRejection(error))
            } catch {
                return .failure(TelemetryRejection(code: "invalid_json", message: "\(error)"))
            }
            guard !state.batch.events.isEmpty else {
                return .failure(TelemetryRejection(code: "empty_batch", message: "the batch has no events"))
            }
            return .success(state.batch)
        }
        return try result.get()
    }
}

/// The members of an event object this server knows.
enum TelemetryField: Int, CaseIterable {
    case ts, gateway, tenant, upstream, outcome, status, latencyMs, queueMs, promptTokens, completionTokens
    case estimatedTokens, taskClass, taskID, modelVersion, retry, headers, errorType, errorBody

    var name: String {
        switch self {
        case .ts: "ts"
        case .gateway: "gateway"
        case .tenant: "tenant"
        case .upstream: "upstream"
        case .outcome: "outcome"
        case .status: "status"
        case .latencyMs: "latency_ms"
        case .queueMs: "queue_ms"
        case .promptTokens: "prompt_tokens"
        case .completionTokens: "completion_tokens"
        case .estimatedTokens: "estimated_tokens"
        case .taskClass: "task_class"
        case .taskID: "task_id"
        case .modelVersion: "model_version"
        case .retry: "retry"
        case .headers: "headers"
        case .errorType: "error_type"
        case .errorBody: "error_body"
        }
    }

    /// The field a member name denotes (exact, case-sensitive match), or nil.
    @inline(__always)
    static func match(_ name: UnsafeBufferPointer<UInt8>) -> TelemetryField? {
        guard let candidate = ByteNameTable.fields.candidate(name, caseInsensitive: false) else { return nil }
        return TelemetryField(rawValue: candidate)
    }
}

/// A small open-addressed table from names to indices for matching raw bytes without building a
/// `String` or hashing with `Hasher`: the first slot is chosen from the length and the first and
/// last bytes, collisions probe the following slots, and a full comparison confirms a match.
struct ByteNameTable: Sendable {
    private let names: [[UInt8]]
    private var slots: [Int16]
    private static let mask = 1_023

    init(_ names: [String]) {
        self.names = names.map { Array($0.lowercased().utf8) }
        slots = Array(repeating: -1, count: Self.mask + 1)
        for (index, name) in self.names.enumerated() {
            var slot = Self.slot(count: name.count, first: name[0], last: name[name.count - 1])
            while slots[slot] != -1 { slot = (slot + 1) & Self.mask }
            slots[slot] = Int16(index)
        }
    }

    @inline(__always)
    private static func slot(count: Int, first: UInt8, last: UInt8) -> Int {
        (count &* 67 &+ Int(first) &* 5 &+ Int(last) &* 11) & mask
    }

    /// The index of the name equal to `bytes` (in any letter case when `caseInsensitive`; the names
    /// were given in lower case), or nil.
    @inline(__always)
    func candidate(_ bytes: UnsafeBufferPointer<UInt8>, caseInsensitive: Bool) -> Int? {
        guard let first = bytes.first, let last = bytes.last else { return nil }
        let fold: (UInt8) -> UInt8 = { caseInsensitive && $0 >= 0x41 && $0 <= 0x5A ? $0 | 0x20 : $0 }
        var slot = Self.slot(count: bytes.count, first: fold(first), last: fold(last))
        while true {
            let index = slots[slot]
            if index < 0 { return nil }
            let name = names[Int(index)]
            if name.count == bytes.count {
                var equal = true
                for position in 0..<bytes.count where fold(bytes[position]) != name[position] {
                    equal = false
                    break
                }
                if equal { return Int(index) }
            }
            slot = (slot + 1) & Self.mask
        }
    }

    /// Member names of an event object.
    static let fields = ByteNameTable(TelemetryField.allCases.map(\.name))
    /// Outcome wire names, in `Outcome.allCases` order.
    static let outcomes = ByteNameTable(Outcome.allCases.map(\.rawValue))
    /// Task class wire names, in `TaskClass.allCases` order.
    static let taskClasses = ByteNameTable(TaskClass.allCases.map(\.rawValue))
    /// Rate-limit header names (``RateLimitHeaderName``).
    static let headers = ByteNameTable(RateLimitHeaderName.names)
}

/// The rate-limit header names of SPEC section 4, so that a header name in a batch becomes one of
/// these shared strings instead of a new allocation per event (the names are longer than Swift's
/// inline small strings). Matching is case-insensitive; the canonical lower-case name is returned,
/// which ``AllotSignals/ProviderSignals`` reads the same way. Names not listed here are still passed
/// on as sent: this table only saves allocations, it decides nothing.
enum RateLimitHeaderName {
    static let names: [String] = {
        var names = [
            "retry-after", "retry-after-ms", "azure-openai-deployment-utilization",
        ]
        for kind in ["limit", "remaining", "reset"] {
            for dimension in ["requests", "tokens"] { names.append("x-ratelimit-\(kind)-\(dimension)") }
        }
        for dimension in ["requests", "tokens", "input-tokens", "output-tokens"] {
            for kind in ["limit", "remaining", "reset"] { names.append("anthropic-ratelimit-\(dimension)-\(kind)") }
        }
        return names
    }()

    /// The shared string for `bytes` when it is a known name in any letter case.
    @inline(__always)
    static func match(_ bytes: UnsafeBufferPointer<UInt8>) -> String? {
        ByteNameTable.headers.candidate(bytes, caseInsensitive: true).map { names[$0] }
    }
}

/// Byte classes for identifiers (one table lookup per byte).
enum IdentifierCharset {
    /// SPEC section 3 tenant ids: `[A-Za-z0-9._:-]`.
    static let tenant = table(extra: "._:-")
    /// Gateway ids: tenant characters plus `/` (instance ids such as `eu-west/gw-3`).
    static let gateway = table(extra: "._:-/")
    /// Upstream pools: `provider/model` names with versions: `[A-Za-z0-9._:/@+-]`.
    static let upstream = table(extra: "._:-/@+")

    static let tenantDescription = "[A-Za-z0-9._:-]"
    static let gatewayDescription = "[A-Za-z0-9._:/-]"
    static let upstreamDescription = "[A-Za-z0-9._:/@+-]"

    private static func table(extra: String) -> [Bool] {
        var allowed = [Bool](repeating: false, count: 256)
        for byte in UInt8(ascii: "a")...UInt8(ascii: "z") { allowed[Int(byte)] = true }
        for byte in UInt8(ascii: "A")...UInt8(ascii: "Z") { allowed[Int(byte)] = true }
        for byte in UInt8(ascii: "0")...UInt8(ascii: "9") { allowed[Int(byte)] = true }
        for byte in extra.utf8 { allowed[Int(byte)] = true }
        return allowed
    }
}

/// The work of one ``TelemetryDecoder/decode(_:format:now:)`` call.
private struct DecodingState {
    let validation: TelemetryValidation
    let now: Double
    let latestTimestampMs: Int64
    let earliestTimestampMs: Int64
    var batch = TelemetryBatch(events: [])
    /// The event being decoded, for error messages.
    var index: Int?

    init(validation: TelemetryValidation, now: Double) {
        self.validation = validation
        self.now = now
        self.latestTimestampMs = EpochTime.milliseconds(fromSeconds: now + validation.maxFutureSkew)
        self.earliestTimestampMs = EpochTime.milliseconds(fromSeconds: validation.earliestTimestamp)
    }

    mutating func decodeArray(_ buffer: UnsafeBufferPointer<UInt8>) throws {
        try JSONScanner.scan(buffer, maxDepth: validation.maxDepth) { (scanner: inout JSONScanner) throws in
            if scanner.isAtEnd() { return }  // an empty body is an empty batch
            guard scanner.peekKind() == .array else {
                let hint =
                    scanner.peekKind() == .object
                    ? "; for one event per line, send Content-Type: application/x-ndjson" : ""
                throw TelemetryRejection(
                    code: "invalid_json", message: "the body must be a JSON array of event objects\(hint)")
            }
            try scanner.beginArray()
            while try scanner.nextElement() {
                try startEvent()
                try decodeEvent(&scanner)
            }
            index = nil
            try scanner.finish()
        }
    }

    mutating func decodeLines(_ buffer: UnsafeBufferPointer<UInt8>) throws {
        var lineStart = 0
        while lineStart < buffer.count {
            var lineEnd = lineStart
            while lineEnd < buffer.count && buffer[lineEnd] != UInt8(ascii: "\n") { lineEnd += 1 }
            let range = lineStart..<lineEnd
            lineStart = lineEnd + 1
            let record = batch.events.count
            try JSONScanner.scan(buffer, range: range, maxDepth: validation.maxDepth, record: record) {
                (scanner: inout JSONScanner) throws in
                if scanner.isAtEnd() { return }  // blank line
                try startEvent()
                try decodeEvent(&scanner)
                try scanner.finish()
            }
        }
        index = nil
    }

    private mutating func startEvent() throws {
        let next = batch.events.count
        guard next < validation.maxEvents else {
            index = nil
            throw TelemetryRejection(
                code: "too_many_events", message: "a batch holds at most \(validation.maxEvents) events",
                status: 413)
        }
        index = next
    }

    func syntaxRejection(_ error: JSONParseError) -> TelemetryRejection {
        let location = "line \(error.line), column \(error.column)"
        guard let index else {
            return TelemetryRejection(code: "invalid_json", message: "invalid JSON at \(location): \(error.message)")
        }
        return TelemetryRejection(
            code: "invalid_json", message: "event \(index): invalid JSON at \(location): \(error.message)",
            field: "[\(index)]", eventIndex: index)
    }

    // MARK: One event

    private mutating func decodeEvent(_ scanner: inout JSONScanner) throws {
        let index = self.index ?? 0
        guard let kind = scanner.peekKind() else {
            _ = try scanner.readValue()  // throws the syntax error
            return
        }
        guard kind == .object else {
            throw TelemetryRejection(
                code: "invalid_event", message: "event \(index): must be an object, found \(Self.name(kind))",
                field: "[\(index)]", eventIndex: index)
        }
        var fields = EventFields()
        var seen: UInt32 = 0
        var members = 0
        var unknownName: String?
        let reportMore = batch.ignoredFields.count < validation.maxReportedIgnoredFields
        try scanner.beginObject()
        while let match = try scanner.nextKey({ name -> TelemetryField? in
            let field = TelemetryField.match(name)
            if field == nil && reportMore { unknownName = String(decoding: name, as: UTF8.self) }
            return field
        }) {
            members += 1
            guard members <= validation.maxMembers else {
                throw TelemetryRejection(
                    code: "invalid_event",
                    message: "event \(index): has more than \(validation.maxMembers) members",
                    field: "[\(index)]", eventIndex: index)
            }
            guard let field = match else {
                batch.ignoredFieldCount += 1
                if let name = unknownName, !batch.ignoredFields.contains(name),
                    batch.ignoredFields.count < validation.maxReportedIgnoredFields
                {
                    batch.ignoredFields.append(name)
                }
                unknownName = nil
                try scanner.skipValue()
                continue
            }
            let bit: UInt32 = 1 << UInt32(field.rawValue)
            guard seen & bit == 0 else { throw TelemetryRejection.invalidField(index, field.name, "appears twice") }
            seen |= bit
            try read(field, into: &fields, from: &scanner, index: index)
        }
        let event = try finishEvent(fields, index: index)
        batch.unparseableHeaders += event.unparseableHeaders
        if event.outcomeWasClassified { batch.classifiedOutcomes += 1 }
        batch.events.append(event)
    }

    private func read(
        _ field: TelemetryField, into fields: inout EventFields, from scanner: inout JSONScanner, index: Int
    ) throws {
        if scanner.peekKind() == .null {
            try scanner.skipValue()
            return  // `null` is absent; required fields then fail as missing
        }
        switch field {
        case .ts:
            fields.timestampMs = try readTimestamp(&scanner, index: index)
        case .gateway:
            fields.gateway = try readIdentifier(
                &scanner, index: index, field: field, allowed: IdentifierCharset.gateway,
                description: IdentifierCharset.gatewayDescription)
        case .tenant:
            fields.tenant = try readIdentifier(
                &scanner, index: index, field: field, allowed: IdentifierCharset.tenant,
                description: IdentifierCharset.tenantDescription)
        case .upstream:
            fields.upstream = try readIdentifier(
                &scanner, index: index, field: field, allowed: IdentifierCharset.upstream,
                description: IdentifierCharset.upstreamDescription)
        case .outcome:
            try expectString(&scanner, index: index, field: field)
            let outcome = try scanner.readString { bytes in
                ByteNameTable.outcomes.candidate(bytes, caseInsensitive: false).map { Outcome.allCases[$0] }
            }
            guard let outcome else {
                let names = Outcome.allCases.map(\.rawValue).joined(separator: ", ")
                throw TelemetryRejection.invalidField(index, field.name, "must be one of \(names)")
            }
            fields.outcome = outcome
        case .status:
            let status = try readInteger(&scanner, index: index, field: field, range: 100...599)
            fields.status = Int(status)
        case .latencyMs:
            fields.latencyMs = try readDuration(&scanner, index: index, field: field)
        case .queueMs:
            fields.queueMs = try readDuration(&scanner, index: index, field: field)
        case .promptTokens:
            fields.promptTokens = try readInteger(&scanner, index: index, field: field, range: 0...validation.maxTokens)
        case .completionTokens:
            fields.completionTokens = try readInteger(
                &scanner, index: index, field: field, range: 0...validation.maxTokens)
        case .estimatedTokens:
            fields.estimatedTokens = try readInteger(
                &scanner, index: index, field: field, range: 0...validation.maxTokens)
        case .retry:
            fields.retry = Int(
                try readInteger(&scanner, index: index, field: field, range: 0...Int64(validation.maxRetry)))
        case .taskClass:
            try expectString(&scanner, index: index, field: field)
            let taskClass = try scanner.readString { bytes in
                ByteNameTable.taskClasses.candidate(bytes, caseInsensitive: false).map { TaskClass.allCases[$0] }
            }
            guard let taskClass else {
                throw TelemetryRejection.invalidField(
                    index, field.name, "must be one of realtime, interactive, batch, background")
            }
            fields.taskClass = taskClass
        case .taskID:
            fields.taskID = try readLabel(&scanner, index: index, field: field, maxBytes: validation.maxTaskIDBytes)
        case .modelVersion:
            fields.modelVersion = try readLabel(
                &scanner, index: index, field: field, maxBytes: validation.maxLabelBytes)
        case .errorType:
            fields.errorType = try readLabel(&scanner, index: index, field: field, maxBytes: validation.maxLabelBytes)
        case .headers:
            fields.headers = try readHeaders(&scanner, index: index)
            fields.hasHeaders = true
        case .errorBody:
            fields.errorBody = try readErrorBody(&scanner, index: index)
        }
    }

    private func finishEvent(_ fields: EventFields, index: Int) throws -> TelemetryEvent {
        guard let timestampMs = fields.timestampMs else {
            throw TelemetryRejection.invalidField(index, "ts", "is required")
        }
        guard let gateway = fields.gateway else {
            throw TelemetryRejection.invalidField(index, "gateway", "is required")
        }
        guard let tenant = fields.tenant else { throw TelemetryRejection.invalidField(index, "tenant", "is required") }
        guard let upstream = fields.upstream else {
            throw TelemetryRejection.invalidField(index, "upstream", "is required")
        }
        let outcome: Outcome
        let classified: Bool
        if let reported = fields.outcome {
            outcome = reported
            classified = false
        } else {
            guard fields.status != nil || fields.errorType != nil || fields.errorBody != nil else {
                throw TelemetryRejection.invalidField(
                    index, "outcome", "is required when 'status', 'error_type' and 'error_body' are all absent")
            }
            outcome = ErrorClassifier.classify(
                status: fields.status, errorType: fields.errorType, body: fields.errorBody)
            classified = true
        }
        var signals = EventSignals()
        var unparseable = 0
        if fields.hasHeaders || fields.errorBody != nil {
            let parsed = ProviderSignals(
                headerFields: fields.headers, body: fields.errorBody,
                now: EpochTime.seconds(fromMilliseconds: timestampMs))
            signals = EventSignals(parsed)
            unparseable = parsed.unparseableCount
        }
        return TelemetryEvent(
            timestampMs: timestampMs, gateway: gateway, tenant: tenant, upstream: upstream, outcome: outcome,
            outcomeWasClassified: classified, status: fields.status, latencyMs: fields.latencyMs,
            queueMs: fields.queueMs, promptTokens: fields.promptTokens, completionTokens: fields.completionTokens,
            estimatedTokens: fields.estimatedTokens, taskClass: fields.taskClass, taskID: fields.taskID,
            modelVersion: fields.modelVersion, retry: fields.retry, errorType: fields.errorType, signals: signals,
            unparseableHeaders: unparseable)
    }

    // MARK: Values

    private func expectString(_ scanner: inout JSONScanner, index: Int, field: TelemetryField) throws {
        let kind = scanner.peekKind()
        guard kind == .string else {
            guard let kind else { _ = try scanner.readValue(); return }
            throw TelemetryRejection.invalidField(index, field.name, "must be a string, found \(Self.name(kind))")
        }
    }

    private func readTimestamp(_ scanner: inout JSONScanner, index: Int) throws -> Int64 {
        let milliseconds: Int64
        switch scanner.peekKind() {
        case .string:
            let seconds = try scanner.readString { RFC3339.parse(utf8: $0) }
            guard let seconds, seconds.isFinite, abs(seconds) < 1e14 else {
                throw TelemetryRejection.invalidField(
                    index, "ts", "must be an RFC 3339 timestamp such as 2026-11-22T03:00:00.123Z")
            }
            milliseconds = Int64((seconds * 1_000).rounded())
        case .number:
            guard let value = try scanner.readValue().int64Value else {
                throw TelemetryRejection.invalidField(index, "ts", "must be integer epoch milliseconds")
            }
            milliseconds = value
        case let kind?:
            throw TelemetryRejection.invalidField(
                index, "ts", "must be an RFC 3339 string or integer epoch milliseconds, found \(Self.name(kind))")
        case nil:
            _ = try scanner.readValue()
            return 0
        }
        if milliseconds < earliestTimestampMs {
            let earliest = RFC3339.format(validation.earliestTimestamp, fractionDigits: 0)
            let hint = (1_000_000_000...9_999_999_999).contains(milliseconds) ? " (seconds sent as milliseconds?)" : ""
            throw TelemetryRejection.invalidField(index, "ts", "is before \(earliest)\(hint)")
        }
        if milliseconds > latestTimestampMs {
            throw TelemetryRejection.invalidField(
                index, "ts", "is more than \(Self.number(validation.maxFutureSkew)) seconds in the future")
        }
        return milliseconds
    }

    private func readIdentifier(
        _ scanner: inout JSONScanner, index: Int, field: TelemetryField, allowed: [Bool], description: String
    ) throws -> String {
        try expectString(&scanner, index: index, field: field)
        let value = try scanner.readString { bytes -> String? in
            guard !bytes.isEmpty, bytes.count <= TelemetryValidation.maxIdentifierLength else { return nil }
            for byte in bytes where !allowed[Int(byte)] { return nil }
            return String(decoding: bytes, as: UTF8.self)
        }
        guard let value else {
            throw TelemetryRejection.invalidField(
                index, field.name, "must be 1-\(TelemetryValidation.maxIdentifierLength) characters of \(description)")
        }
        return value
    }

    private func readLabel(_ scanner: inout JSONScanner, index: Int, field: TelemetryField, maxBytes: Int) throws
        -> String
    {
        try expectString(&scanner, index: index, field: field)
        let value = try scanner.readString { bytes -> String? in
            guard !bytes.isEmpty, bytes.count <= maxBytes else { return nil }
            for byte in bytes where byte < 0x20 || byte == 0x7F { return nil }
            return String(decoding: bytes, as: UTF8.self)
        }
        guard let value else {
            throw TelemetryRejection.invalidField(
                index, field.name, "must be 1-\(maxBytes) bytes of text without control characters")
        }
        return value
    }

    private func readInteger(
        _ scanner: inout JSONScanner, index: Int, field: TelemetryField, range: ClosedRange<Int64>
    ) throws -> Int64 {
        func reason() -> String { "must be an integer from \(range.lowerBound) to \(range.upperBound)" }
        guard let kind = scanner.peekKind() else { _ = try scanner.readValue(); return 0 }
        guard kind == .number else {
            throw TelemetryRejection.invalidField(index, field.name, "\(reason()), found \(Self.name(kind))")
        }
        guard let value = try scanner.readValue().int64Value, range.contains(value) else {
            throw TelemetryRejection.invalidField(index, field.name, reason())
        }
        return value
    }

    private func readDuration(_ scanner: inout JSONScanner, index: Int, field: TelemetryField) throws -> Double {
        let maxDurationMs = validation.maxDurationMs
        func reason() -> String { "must be a number of milliseconds from 0 to \(Self.number(maxDurationMs))" }
        guard let kind = scanner.peekKind() else { _ = try scanner.readValue(); return 0 }
        guard kind == .number else {
            throw TelemetryRejection.invalidField(index, field.name, "\(reason()), found \(Self.name(kind))")
        }
        guard let value = try scanner.readValue().doubleValue, value.isFinite, value >= 0, value <= maxDurationMs
        else {
            throw TelemetryRejection.invalidField(index, field.name, reason())
        }
        return value
    }

    private func readHeaders(_ scanner: inout JSONScanner, index: Int) throws -> [(String, String)] {
        guard let kind = scanner.peekKind() else { _ = try scanner.readValue(); return [] }
        guard kind == .object else {
            throw TelemetryRejection.invalidField(
                index, "headers", "must be an object of header name to string value, found \(Self.name(kind))")
        }
        var headers: [(String, String)] = []
        headers.reserveCapacity(8)
        let maxName = validation.maxHeaderNameBytes
        try scanner.beginObject()
        while let name = try scanner.nextKey({ bytes -> String? in
            if bytes.isEmpty || bytes.count > maxName { return nil }
            return RateLimitHeaderName.match(bytes) ?? String(decoding: bytes, as: UTF8.self)
        }) {
            guard let name else {
                throw TelemetryRejection.invalidField(index, "headers", "header names must be 1-\(maxName) bytes")
            }
            guard headers.count < validation.maxHeaders else {
                throw TelemetryRejection.invalidField(
                    index, "headers", "must have at most \(validation.maxHeaders) entries")
            }
            var field: String { "headers.\(name)" }
            switch scanner.peekKind() {
            case .string:
                let maxValue = validation.maxHeaderValueBytes
                let value = try scanner.readString { bytes in
                    bytes.count > maxValue ? nil : String(decoding: bytes, as: UTF8.self)
                }
                guard let value else {
                    throw TelemetryRejection.invalidField(index, field, "must be at most \(maxValue) bytes")
                }
                headers.append((name, value))
            case .number:
                switch try scanner.readValue() {
                case .int(let number): headers.append((name, String(number)))
                case .double(let number): headers.append((name, number.description))
                default: break
                }
            case let kind?:
                throw TelemetryRejection.invalidField(index, field, "must be a string, found \(Self.name(kind))")
            case nil:
                _ = try scanner.readValue()
            }
        }
        return headers
    }

    private func readErrorBody(_ scanner: inout JSONScanner, index: Int) throws -> ProviderErrorBody {
        let limit = validation.maxErrorBodyBytes
        let reason = "must be a JSON object or a string of at most \(limit) bytes"
        switch scanner.peekKind() {
        case .string:
            let text = try scanner.readString { bytes in
                bytes.count > limit ? nil : String(decoding: bytes, as: UTF8.self)
            }
            guard let text else { throw TelemetryRejection.invalidField(index, "error_body", reason) }
            return ProviderErrorBody(text: text)
        case .object, .array:
            let start = scanner.offset
            let value = try scanner.readValue()
            guard scanner.offset - start <= limit else {
                throw TelemetryRejection.invalidField(index, "error_body", reason)
            }
            return .json(value)
        case let kind?:
            throw TelemetryRejection.invalidField(index, "error_body", "\(reason), found \(Self.name(kind))")
        case nil:
            _ = try scanner.readValue()
            return .text("")
        }
    }

    // MARK: Formatting

    static func name(_ kind: JSONScanner.Kind) -> String {
        switch kind {
        case .object: "object"
        case .array: "array"
        case .string: "string"
        case .number: "number"
        case .bool: "boolean"
        case .null: "null"
        }
    }

    /// `300` rather than `300.0` in messages.
    static func number(_ value: Double) -> String {
        value == value.rounded() && abs(value) < 1e15 ? String(Int64(value)) : String(value)
    }
}

/// The members of one event object as read, before the required ones are checked.
private struct EventFields {
    var timestampMs: Int64?
    var gateway: String?
    var tenant: String?
    var upstream: String?
    var outcome: Outcome?
    var status: Int?
    var latencyMs: Double?
    var queueMs: Double?
    var promptTokens: Int64?
    var completionTokens: Int64?
    var estimatedTokens: Int64?
    var taskClass: TaskClass = .interactive
    var taskID: String?
    var modelVersion: String?
    var retry: Int?
    var errorType: String?
    var headers: [(String, String)] = []
    var hasHeaders = false
    var errorBody: ProviderErrorBody?
}
