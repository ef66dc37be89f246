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
/// never building a JSON tree per event (SPEC section 13: 100,000 events/s). Member names, outcomes
/// and task classes are matched on their bytes; rate-limit headers go from the body's bytes straight
/// into ``AllotSignals/ProviderSignalsReader``; names that repeat across a batch (gateway, tenant,
/// upstream, model version, error type) become one `String` per batch (``BatchStrings``).
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
        // Said as such, not as "not an array" (outside evaluation round 22): JSON text exchanged between systems
        // carries no byte order mark (RFC 8259 section 8.1).
        if JSON.startsWithByteOrderMark(body) {
            throw TelemetryRejection(code: "invalid_json", message: JSON.byteOrderMarkInBody)
        }
        let result = body.withUnsafeBufferPointer { buffer -> Result<TelemetryBatch, TelemetryRejection> in
            var state = DecodingState(validation: validation, now: now, body: buffer)
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

    var name: String { "\(wireName)" }

    /// The member name as sent.
    var wireName: StaticString {
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
    ///
    /// Runs for every member of every event, so instead of hashing the name it picks the one
    /// candidate its length and a byte or two allow, then compares the bytes.
    @inline(__always)
    static func match(_ name: UnsafeBufferPointer<UInt8>) -> TelemetryField? {
        guard name.count >= 2 else { return nil }
        let first = name[0]
        let candidate: TelemetryField
        switch name.count {
        case 2: candidate = .ts
        case 5: candidate = .retry
        case 6: candidate = first == UInt8(ascii: "t") ? .tenant : .status
        case 7:
            switch first {
            case UInt8(ascii: "g"): candidate = .gateway
            case UInt8(ascii: "o"): candidate = .outcome
            case UInt8(ascii: "h"): candidate = .headers
            default: candidate = .taskID
            }
        case 8: candidate = first == UInt8(ascii: "u") ? .upstream : .queueMs
        case 10:
            switch first {
            case UInt8(ascii: "l"): candidate = .latencyMs
            case UInt8(ascii: "t"): candidate = .taskClass
            default: candidate = name[6] == UInt8(ascii: "t") ? .errorType : .errorBody
            }
        case 13: candidate = first == UInt8(ascii: "p") ? .promptTokens : .modelVersion
        case 16: candidate = .estimatedTokens
        case 17: candidate = .completionTokens
        default: return nil
        }
        return WireName.equals(name, candidate.wireName) ? candidate : nil
    }
}

/// Byte comparisons of wire names against `StaticString` literals, without making `String`s.
enum WireName {
    @inline(__always)
    static func equals(_ bytes: UnsafeBufferPointer<UInt8>, _ literal: StaticString) -> Bool {
        let count = literal.utf8CodeUnitCount
        guard bytes.count == count else { return false }
        let pointer = literal.utf8Start
        for position in 0..<count where bytes[position] != pointer[position] { return false }
        return true
    }

    /// The outcome whose wire name is exactly `bytes` (SPEC section 3).
    @inline(__always)
    static func outcome(_ bytes: UnsafeBufferPointer<UInt8>) -> Outcome? {
        let candidate: Outcome
        switch bytes.count {
        case 2: candidate = .ok
        case 6: candidate = .queued
        case 7: candidate = .timeout
        case 9: candidate = .spendCap
        case 10: candidate = .overloaded
        case 12: candidate = bytes[0] == UInt8(ascii: "s") ? .serverError : .deniedLocal
        case 15: candidate = .quotaExhausted
        default: return nil
        }
        return equals(bytes, wireName(candidate)) ? candidate : nil
    }

    static func wireName(_ outcome: Outcome) -> StaticString {
        switch outcome {
        case .ok: "ok"
        case .quotaExhausted: "quota_exhausted"
        case .spendCap: "spend_cap"
        case .overloaded: "overloaded"
        case .serverError: "server_error"
        case .timeout: "timeout"
        case .deniedLocal: "denied_local"
        case .queued: "queued"
        }
    }

    /// The task class whose wire name is exactly `bytes`.
    @inline(__always)
    static func taskClass(_ bytes: UnsafeBufferPointer<UInt8>) -> TaskClass? {
        let candidate: TaskClass
        switch bytes.count {
        case 5: candidate = .batch
        case 8: candidate = .realtime
        case 10: candidate = .background
        case 11: candidate = .interactive
        default: return nil
        }
        return equals(bytes, wireName(candidate)) ? candidate : nil
    }

    static func wireName(_ taskClass: TaskClass) -> StaticString {
        switch taskClass {
        case .realtime: "realtime"
        case .interactive: "interactive"
        case .batch: "batch"
        case .background: "background"
        }
    }
}

/// The bytes allowed in an identifier, as two 64-bit masks over ASCII (bit `b` of `low` for byte `b`
/// below 64, bit `b - 64` of `high` for the rest), so that checking a byte is a shift and a test
/// rather than a table lookup. The tests check the masks against the character classes spelt out in
/// ``description``.
struct IdentifierCharset: Sendable {
    let low: UInt64
    let high: UInt64
    let description: StaticString

    /// SPEC section 3 tenant ids: `[A-Za-z0-9._:-]`.
    static var tenant: IdentifierCharset {
        IdentifierCharset(low: 0x07FF_6000_0000_0000, high: 0x07FF_FFFE_87FF_FFFE, description: "[A-Za-z0-9._:-]")
    }
    /// Gateway ids: tenant characters plus `/` (instance ids such as `eu-west/gw-3`).
    static var gateway: IdentifierCharset {
        IdentifierCharset(low: 0x07FF_E000_0000_0000, high: 0x07FF_FFFE_87FF_FFFE, description: "[A-Za-z0-9._:/-]")
    }
    /// Upstream pools: `provider/model` names with versions: `[A-Za-z0-9._:/@+-]`.
    static var upstream: IdentifierCharset {
        IdentifierCharset(
            low: 0x07FF_E800_0000_0000, high: 0x07FF_FFFE_87FF_FFFF, description: "[A-Za-z0-9._:/@+-]")
    }

    /// True when every byte is in the set.
    @inline(__always)
    func allows(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
        for byte in bytes {
            let mask = byte < 64 ? low : byte < 128 ? high : 0
            if mask & (1 &<< UInt64(byte & 63)) == 0 { return false }
        }
        return true
    }

    /// True for `byte` in the set (for tests).
    func allows(_ byte: UInt8) -> Bool {
        withUnsafeBytes(of: byte) { allows($0.bindMemory(to: UInt8.self)) }
    }
}

/// The work of one ``TelemetryDecoder/decode(_:format:now:)`` call.
private struct DecodingState {
    let validation: TelemetryValidation
    let now: Double
    let latestTimestampMs: Int64
    let earliestTimestampMs: Int64
    /// The whole body: header names that lie in it can be kept by pointer until their value is read.
    let body: UnsafeBufferPointer<UInt8>
    var batch = TelemetryBatch(events: [])
    /// The event being decoded, for error messages.
    var index: Int?
    /// The known member whose value is being read, for syntax errors (`[3].latency_ms`).
    var member: TelemetryField?
    var strings = BatchStrings()

    init(validation: TelemetryValidation, now: Double, body: UnsafeBufferPointer<UInt8>) {
        self.validation = validation
        self.now = now
        self.body = body
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

    /// Names the member as well as the event where it can (outside evaluation round 20: a `1e400` in `latency_ms`
    /// was `field: "[0]"` while an override's was `floor.rpm`): the known member being read, and where inside its
    /// value (`[0].error_body.error["x a"][2]`) when the parser says.
    func syntaxRejection(_ error: JSONParseError) -> TelemetryRejection {
        let location = "line \(error.line), column \(error.column)"
        guard let index else {
            return TelemetryRejection(code: "invalid_json", message: "invalid JSON at \(location): \(error.message)")
        }
        var field = "[\(index)]"
        var at = ""
        if let member {
            field += "." + member.name
            if let inner = error.path { field += inner.hasPrefix("[") ? inner : "." + inner }
            at = " (\(field))"
        }
        return TelemetryRejection(
            code: "invalid_json", message: "event \(index): invalid JSON at \(location)\(at): \(error.message)",
            field: field, eventIndex: index)
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
            member = field
            try read(field, into: &fields, from: &scanner, index: index)
            member = nil
        }
        try appendEvent(&fields, index: index)
    }

    private mutating func read(
        _ field: TelemetryField, into fields: inout EventFields, from scanner: inout JSONScanner, index: Int
    ) throws {
        let kind = scanner.peekKind()
        if kind == .null {
            try scanner.skipValue()
            return  // `null` is absent; required fields then fail as missing
        }
        switch field {
        case .ts:
            fields.timestampMs = try readTimestamp(&scanner, kind: kind, index: index)
        case .gateway:
            fields.gateway = try readIdentifier(&scanner, kind: kind, index: index, field: field, charset: .gateway)
        case .tenant:
            fields.tenant = try readIdentifier(&scanner, kind: kind, index: index, field: field, charset: .tenant)
        case .upstream:
            fields.upstream = try readIdentifier(&scanner, kind: kind, index: index, field: field, charset: .upstream)
        case .outcome:
            try expectString(&scanner, kind: kind, index: index, field: field)
            guard let outcome = try scanner.readString({ WireName.outcome($0) }) else {
                let names = Outcome.allCases.map(\.rawValue).joined(separator: ", ")
                throw TelemetryRejection.invalidField(index, field.name, "must be one of \(names)")
            }
            fields.outcome = outcome
        case .status:
            let status = try readInteger(&scanner, kind: kind, index: index, field: field, range: 100...599)
            fields.status = Int(status)
        case .latencyMs:
            fields.latencyMs = try readDuration(&scanner, kind: kind, index: index, field: field)
        case .queueMs:
            fields.queueMs = try readDuration(&scanner, kind: kind, index: index, field: field)
        case .promptTokens:
            fields.promptTokens = try readInteger(
                &scanner, kind: kind, index: index, field: field, range: 0...validation.maxTokens)
        case .completionTokens:
            fields.completionTokens = try readInteger(
                &scanner, kind: kind, index: index, field: field, range: 0...validation.maxTokens)
        case .estimatedTokens:
            fields.estimatedTokens = try readInteger(
                &scanner, kind: kind, index: index, field: field, range: 0...validation.maxTokens)
        case .retry:
            fields.retry = Int(
                try readInteger(&scanner, kind: kind, index: index, field: field, range: 0...Int64(validation.maxRetry))
            )
        case .taskClass:
            try expectString(&scanner, kind: kind, index: index, field: field)
            guard let taskClass = try scanner.readString({ WireName.taskClass($0) }) else {
                throw TelemetryRejection.invalidField(
                    index, field.name, "must be one of realtime, interactive, batch, background")
            }
            fields.taskClass = taskClass
        case .taskID:
            fields.taskID = try readLabel(
                &scanner, kind: kind, index: index, field: field, maxBytes: validation.maxTaskIDBytes, intern: false)
        case .modelVersion:
            fields.modelVersion = try readLabel(
                &scanner, kind: kind, index: index, field: field, maxBytes: validation.maxLabelBytes, intern: true)
        case .errorType:
            fields.errorType = try readLabel(
                &scanner, kind: kind, index: index, field: field, maxBytes: validation.maxLabelBytes, intern: true)
        case .headers:
            try readHeaders(&scanner, kind: kind, index: index, into: &fields.headers)
            fields.hasHeaders = true
        case .errorBody:
            fields.errorBody = try readErrorBody(&scanner, kind: kind, index: index)
        }
    }

    /// `fields` is taken apart: its strings move into the event instead of being copied. (Copying
    /// them, or even comparing an optional string with nil, went through generic value witnesses
    /// at a few hundred instructions each: 5% of decoding.)
    ///
    /// Checks the required members, classifies the outcome if needed, and appends the event (built in
    /// place: returning it and appending the copy cost a copy and a destruction of the whole event).
    private mutating func appendEvent(_ fields: inout EventFields, index: Int) throws {
        guard let timestampMs = fields.timestampMs else {
            throw TelemetryRejection.invalidField(index, "ts", "is required")
        }
        guard let gateway = fields.gateway.take() else {
            throw TelemetryRejection.invalidField(index, "gateway", "is required")
        }
        guard let tenant = fields.tenant.take() else {
            throw TelemetryRejection.invalidField(index, "tenant", "is required")
        }
        guard let upstream = fields.upstream.take() else {
            throw TelemetryRejection.invalidField(index, "upstream", "is required")
        }
        let errorType = fields.errorType.take()
        let errorBody = fields.errorBody.take()
        var hasErrorBody = false
        if case .some = errorBody { hasErrorBody = true }
        let outcome: Outcome
        let classified: Bool
        if let reported = fields.outcome {
            outcome = reported
            classified = false
        } else {
            var hasErrorType = false
            if case .some = errorType { hasErrorType = true }
            guard fields.status != nil || hasErrorType || hasErrorBody else {
                throw TelemetryRejection.invalidField(
                    index, "outcome", "is required when 'status', 'error_type' and 'error_body' are all absent")
            }
            outcome = ErrorClassifier.classify(status: fields.status, errorType: errorType, body: errorBody)
            classified = true
        }
        var signals = EventSignals()
        var unparseable = 0
        if fields.hasHeaders || hasErrorBody {
            // Only now is the event's time certain (`ts` may follow `headers`): resets are relative to it.
            let parsed = fields.headers.signals(body: errorBody, now: EpochTime.seconds(fromMilliseconds: timestampMs))
            signals = EventSignals(parsed)
            unparseable = parsed.unparseableCount
        }
        batch.unparseableHeaders += unparseable
        if classified { batch.classifiedOutcomes += 1 }
        batch.events.append(
            TelemetryEvent(
                timestampMs: timestampMs, gateway: gateway, tenant: tenant, upstream: upstream, outcome: outcome,
                outcomeWasClassified: classified, status: fields.status, latencyMs: fields.latencyMs,
                queueMs: fields.queueMs, promptTokens: fields.promptTokens, completionTokens: fields.completionTokens,
                estimatedTokens: fields.estimatedTokens, taskClass: fields.taskClass, taskID: fields.taskID.take(),
                modelVersion: fields.modelVersion.take(), retry: fields.retry, errorType: errorType, signals: signals,
                unparseableHeaders: unparseable))
    }

    // MARK: Values

    /// Throws unless the value is a string. `kind` is the scanner's ``JSONScanner/peekKind()``; nil
    /// (no value can start here) throws the syntax error.
    @inline(__always)
    private func expectString(
        _ scanner: inout JSONScanner, kind: JSONScanner.Kind?, index: Int, field: TelemetryField
    ) throws {
        guard kind == .string else { try Self.notAString(&scanner, kind: kind, index: index, field: field.name) }
    }

    private static func notAString(
        _ scanner: inout JSONScanner, kind: JSONScanner.Kind?, index: Int, field: String
    ) throws -> Never {
        guard let kind else {
            _ = try scanner.readValue()  // throws the syntax error: no JSON value starts here
            throw TelemetryRejection.invalidField(index, field, "must be a string")
        }
        throw TelemetryRejection.invalidField(index, field, "must be a string, found \(Self.name(kind))")
    }

    private func readTimestamp(_ scanner: inout JSONScanner, kind: JSONScanner.Kind?, index: Int) throws -> Int64 {
        let milliseconds: Int64
        switch kind {
        case .string:
            let seconds = try scanner.readString { RFC3339.parse(utf8: $0) }
            guard let seconds, seconds.isFinite, abs(seconds) < 1e14 else {
                throw TelemetryRejection.invalidField(
                    index, "ts", "must be an RFC 3339 timestamp such as 2026-11-22T03:00:00.123Z")
            }
            milliseconds = Int64((seconds * 1_000).rounded())
        case .number:
            guard let value = Self.int64(try scanner.readValue()) else {
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

    private mutating func readIdentifier(
        _ scanner: inout JSONScanner, kind: JSONScanner.Kind?, index: Int, field: TelemetryField,
        charset: IdentifierCharset
    ) throws -> String {
        try expectString(&scanner, kind: kind, index: index, field: field)
        let value = try scanner.readString { bytes -> String? in
            guard !bytes.isEmpty, bytes.count <= TelemetryValidation.maxIdentifierLength, charset.allows(bytes) else {
                return nil
            }
            return strings.intern(bytes)
        }
        guard let value else {
            throw TelemetryRejection.invalidField(
                index, field.name,
                "must be 1-\(TelemetryValidation.maxIdentifierLength) characters of \(charset.description)")
        }
        return value
    }

    /// A free-text label. `intern`: the label repeats across a batch (model versions, error types), so it is
    /// made a `String` once per batch.
    private mutating func readLabel(
        _ scanner: inout JSONScanner, kind: JSONScanner.Kind?, index: Int, field: TelemetryField, maxBytes: Int,
        intern: Bool
    ) throws -> String {
        try expectString(&scanner, kind: kind, index: index, field: field)
        let value = try scanner.readString { bytes -> String? in
            guard !bytes.isEmpty, bytes.count <= maxBytes else { return nil }
            for byte in bytes where byte < 0x20 || byte == 0x7F { return nil }
            return intern ? strings.intern(bytes) : String(decoding: bytes, as: UTF8.self)
        }
        guard let value else {
            throw TelemetryRejection.invalidField(
                index, field.name, "must be 1-\(maxBytes) bytes of text without control characters")
        }
        return value
    }

    private func readInteger(
        _ scanner: inout JSONScanner, kind: JSONScanner.Kind?, index: Int, field: TelemetryField,
        range: ClosedRange<Int64>
    ) throws -> Int64 {
        func reason() -> String { "must be an integer from \(range.lowerBound) to \(range.upperBound)" }
        guard let kind else { _ = try scanner.readValue(); return 0 }
        guard kind == .number else {
            throw TelemetryRejection.invalidField(index, field.name, "\(reason()), found \(Self.name(kind))")
        }
        guard let value = Self.int64(try scanner.readValue()), range.contains(value) else {
            throw TelemetryRejection.invalidField(index, field.name, reason())
        }
        return value
    }

    private func readDuration(
        _ scanner: inout JSONScanner, kind: JSONScanner.Kind?, index: Int, field: TelemetryField
    ) throws -> Double {
        let maxDurationMs = validation.maxDurationMs
        func reason() -> String { "must be a number of milliseconds from 0 to \(Self.number(maxDurationMs))" }
        guard let kind else { _ = try scanner.readValue(); return 0 }
        guard kind == .number else {
            throw TelemetryRejection.invalidField(index, field.name, "\(reason()), found \(Self.name(kind))")
        }
        let value: Double?
        switch try scanner.readValue() {
        case .int(let number): value = Double(number)
        case .double(let number): value = number
        default: value = nil
        }
        guard let value, value.isFinite, value >= 0, value <= maxDurationMs else {
            throw TelemetryRejection.invalidField(index, field.name, reason())
        }
        return value
    }

    /// ``AllotJSON/JSON/int64Value`` with the common case (an integer) decided inline.
    @inline(__always)
    private static func int64(_ value: JSON) -> Int64? {
        if case .int(let number) = value { return number }
        return value.int64Value
    }

    /// Reads the `headers` object straight into `reader`: names and values go from the body's bytes to the
    /// signal parser, with no `String` per header. A name is only kept by pointer while its value is read, and
    /// only when it lies in the body itself; a name with escapes is decoded into the scanner's scratch space,
    /// which the value may reuse, so it is copied.
    private func readHeaders(
        _ scanner: inout JSONScanner, kind: JSONScanner.Kind?, index: Int, into reader: inout ProviderSignalsReader
    ) throws {
        guard let kind else { _ = try scanner.readValue(); return }
        guard kind == .object else {
            throw TelemetryRejection.invalidField(
                index, "headers", "must be an object of header name to string value, found \(Self.name(kind))")
        }
        let maxName = validation.maxHeaderNameBytes
        let maxValue = validation.maxHeaderValueBytes
        let body = self.body
        var count = 0
        try scanner.beginObject()
        while let name = try scanner.nextKey({ bytes -> HeaderName? in
            if bytes.isEmpty || bytes.count > maxName { return nil }
            if let start = bytes.baseAddress, let base = body.baseAddress, start >= base,
                start + bytes.count <= base + body.count
            {
                return .inBody(bytes)
            }
            return .copied(Array(bytes))
        }) {
            guard let name else {
                throw TelemetryRejection.invalidField(index, "headers", "header names must be 1-\(maxName) bytes")
            }
            guard count < validation.maxHeaders else {
                throw TelemetryRejection.invalidField(
                    index, "headers", "must have at most \(validation.maxHeaders) entries")
            }
            count += 1
            switch scanner.peekKind() {
            case .string:
                let fits = try scanner.readString { value -> Bool in
                    guard value.count <= maxValue else { return false }
                    name.withBytes { reader.read(name: $0, value: value) }
                    return true
                }
                guard fits else {
                    throw TelemetryRejection.invalidField(
                        index, "headers.\(name.string)", "must be at most \(maxValue) bytes")
                }
            case .number:
                // A number is read as its decimal text, as a header would carry it.
                var text: String
                switch try scanner.readValue() {
                case .int(let number): text = String(number)
                case .double(let number): text = number.description
                default: continue
                }
                text.withUTF8 { value in name.withBytes { reader.read(name: $0, value: value) } }
            case let kind?:
                throw TelemetryRejection.invalidField(
                    index, "headers.\(name.string)", "must be a string, found \(Self.name(kind))")
            case nil:
                _ = try scanner.readValue()
            }
        }
    }

    private func readErrorBody(_ scanner: inout JSONScanner, kind: JSONScanner.Kind?, index: Int) throws
        -> ProviderErrorBody
    {
        let limit = validation.maxErrorBodyBytes
        let reason = "must be a JSON object or a string of at most \(limit) bytes"
        switch kind {
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

/// A header name held while its value is read.
private enum HeaderName {
    /// A slice of the request body (valid for the whole decode).
    case inBody(UnsafeBufferPointer<UInt8>)
    /// A name that was decoded from escapes.
    case copied([UInt8])

    @inline(__always)
    func withBytes<T>(_ body: (UnsafeBufferPointer<UInt8>) -> T) -> T {
        switch self {
        case .inBody(let bytes): body(bytes)
        case .copied(let bytes): bytes.withUnsafeBufferPointer(body)
        }
    }

    /// The name for messages.
    var string: String { withBytes { String(decoding: $0, as: UTF8.self) } }
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
    var headers = ProviderSignalsReader()
    var hasHeaders = false
    var errorBody: ProviderErrorBody?
}
