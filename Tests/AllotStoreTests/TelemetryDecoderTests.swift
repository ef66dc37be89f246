import AllotJSON
import AllotSignals
import Testing

@testable import AllotStore

@Suite struct TelemetryDecoderTests {
    let decoder = TelemetryDecoder()
    typealias F = TelemetryFixtures

    func decode(_ body: [UInt8], _ format: TelemetryFormat = .jsonArray) throws(TelemetryRejection) -> TelemetryBatch {
        try decoder.decode(body, format: format, now: F.now)
    }

    func rejection(_ body: [UInt8], _ format: TelemetryFormat = .jsonArray) -> TelemetryRejection? {
        do {
            _ = try decode(body, format)
            return nil
        } catch {
            return error
        }
    }

    @Test func decodesEveryFieldOfAValidEvent() throws {
        let batch = try decode(F.array([F.event()]))
        #expect(batch.events.count == 1)
        let event = try #require(batch.events.first)
        #expect(
            event
                == TelemetryEvent(
                    timestampMs: F.nowMs - 1_000, gateway: "gw-eu-1", tenant: "acme", upstream: "openai/gpt-4o",
                    outcome: .ok, status: 200, latencyMs: 812.5, queueMs: 3.25, promptTokens: 1200,
                    completionTokens: 350, estimatedTokens: 1600, taskClass: .interactive, taskID: "task-1",
                    modelVersion: "gpt-4o-2024-08-06", retry: 0,
                    signals: EventSignals(
                        family: .openai, limitRequests: 10_000, remainingRequests: 9_998, resetRequestsMs: 12,
                        limitTokens: 2_000_000, remainingTokens: 1_999_000, resetTokensMs: 179_560)))
        #expect(batch.unparseableHeaders == 0)
        #expect(batch.ignoredFieldCount == 0)
    }

    @Test func arrayAndNDJSONFormsDecodeTheSameEvents() throws {
        let events = (0..<5).map { F.event(["tenant": .string("t\($0)"), "retry": .int(Int64($0))]) }
        let fromArray = try decode(F.array(events))
        let fromLines = try decode(F.ndjson(events), .ndjson)
        #expect(fromArray.events.count == 5)
        #expect(fromArray == fromLines)
        #expect(fromLines.events.map(\.tenant) == ["t0", "t1", "t2", "t3", "t4"])
        // Blank lines and CRLF line ends are fine in NDJSON.
        let crlf = Array(events.map { $0.serializedString() }.joined(separator: "\r\n\r\n  \r\n").utf8)
        #expect(try decode(crlf, .ndjson) == fromArray)
    }

    @Test func rfc3339TimestampsAndDefaults() throws {
        let event = F.event([
            "ts": "2026-11-22T02:59:59.123Z", "task_class": nil, "task_id": nil, "model_version": .null, "headers": nil,
            "latency_ms": 12,
        ])
        let decoded = try #require(try decode(F.array([event])).events.first)
        #expect(decoded.timestampMs == 1_795_316_399_123)
        #expect(decoded.taskClass == .interactive)
        #expect(decoded.taskID == nil)
        #expect(decoded.modelVersion == nil)
        #expect(decoded.latencyMs == 12)
        #expect(decoded.signals == EventSignals())
        // Offsets are honoured.
        let offset = try #require(try decode(F.array([F.event(["ts": "2026-11-22T04:59:59+02:00"])])).events.first)
        #expect(offset.timestampMs == 1_795_316_399_000)
        // Integral numbers are accepted for integer fields.
        let integral = try #require(
            try decode(F.array([F.event(["prompt_tokens": 1.2e3, "ts": 1.7953164e12])])).events.first)
        #expect(integral.promptTokens == 1_200)
        #expect(integral.timestampMs == 1_795_316_400_000)
    }

    /// Every field × a bad value: the rejection names the event's index, the field and the reason.
    @Test(
        arguments: [
            ("ts", "yesterday", "must be an RFC 3339 timestamp such as 2026-11-22T03:00:00.123Z"),
            ("ts", 1_795_316_400, "is before 2000-01-01T00:00:00Z (seconds sent as milliseconds?)"),
            ("ts", 1_795_316_701_000, "is more than 300 seconds in the future"),
            ("ts", "2126-11-22T03:00:00Z", "is more than 300 seconds in the future"),
            ("ts", 1_795_316_400_000.5, "must be integer epoch milliseconds"),
            ("ts", true, "must be an RFC 3339 string or integer epoch milliseconds, found boolean"),
            ("ts", .null, "is required"),
            ("gateway", "", "must be 1-128 characters of [A-Za-z0-9._:/-]"),
            ("gateway", 42, "must be a string, found number"),
            ("tenant", "acme corp", "must be 1-128 characters of [A-Za-z0-9._:-]"),
            ("tenant", "acme/corp", "must be 1-128 characters of [A-Za-z0-9._:-]"),
            ("tenant", "ténant", "must be 1-128 characters of [A-Za-z0-9._:-]"),
            ("tenant", .string(String(repeating: "a", count: 129)), "must be 1-128 characters of [A-Za-z0-9._:-]"),
            ("tenant", ["acme"], "must be a string, found array"),
            ("upstream", "", "must be 1-128 characters of [A-Za-z0-9._:/@+-]"),
            ("upstream", "openai gpt", "must be 1-128 characters of [A-Za-z0-9._:/@+-]"),
            (
                "outcome", "fine",
                "must be one of ok, quota_exhausted, spend_cap, overloaded, server_error, timeout, denied_local, queued"
            ),
            ("outcome", 1, "must be a string, found number"),
            ("status", 99, "must be an integer from 100 to 599"),
            ("status", 600, "must be an integer from 100 to 599"),
            ("status", 200.5, "must be an integer from 100 to 599"),
            ("status", "200", "must be an integer from 100 to 599, found string"),
            ("latency_ms", -1, "must be a number of milliseconds from 0 to 86400000"),
            ("latency_ms", 1e12, "must be a number of milliseconds from 0 to 86400000"),
            ("latency_ms", "fast", "must be a number of milliseconds from 0 to 86400000, found string"),
            ("queue_ms", -0.5, "must be a number of milliseconds from 0 to 86400000"),
            ("prompt_tokens", -1, "must be an integer from 0 to 1000000000"),
            ("prompt_tokens", 1.5, "must be an integer from 0 to 1000000000"),
            ("prompt_tokens", 2e9, "must be an integer from 0 to 1000000000"),
            ("prompt_tokens", "10", "must be an integer from 0 to 1000000000, found string"),
            ("completion_tokens", -1, "must be an integer from 0 to 1000000000"),
            ("estimated_tokens", ["n": 1], "must be an integer from 0 to 1000000000, found object"),
            ("task_class", "urgent", "must be one of realtime, interactive, batch, background"),
            ("task_id", "", "must be 1-256 bytes of text without control characters"),
            (
                "task_id", .string(String(repeating: "x", count: 257)),
                "must be 1-256 bytes of text without control characters"
            ),
            ("task_id", "a\u{1}b", "must be 1-256 bytes of text without control characters"),
            ("model_version", 5, "must be a string, found number"),
            ("retry", -1, "must be an integer from 0 to 1000"),
            ("retry", 1_001, "must be an integer from 0 to 1000"),
            (
                "headers", "x-ratelimit-limit-requests: 5",
                "must be an object of header name to string value, found string"
            ),
            ("headers", [], "must be an object of header name to string value, found array"),
            ("error_type", "", "must be 1-256 bytes of text without control characters"),
            ("error_body", 5, "must be a JSON object or a string of at most 16384 bytes, found number"),
            (
                "error_body", .string(String(repeating: "x", count: 16_385)),
                "must be a JSON object or a string of at most 16384 bytes"
            ),
        ] as [(String, JSON, String)])
    func rejectsAnInvalidField(field: String, value: JSON, reason: String) {
        let events = [F.event(), F.event(), F.event([field: value]), F.event()]
        for (body, format) in [(F.array(events), TelemetryFormat.jsonArray), (F.ndjson(events), .ndjson)] {
            let error = rejection(body, format)
            #expect(error?.code == "invalid_event")
            #expect(error?.message == "event 2: field '\(field)': \(reason)")
            #expect(error?.field == "[2].\(field)")
            #expect(error?.eventIndex == 2)
            #expect(error?.status == 400)
        }
    }

    @Test(arguments: ["ts", "gateway", "tenant", "upstream"])
    func requiredFieldsMustBePresent(field: String) {
        let error = rejection(F.array([F.event([field: nil])]))
        #expect(error?.message == "event 0: field '\(field)': is required")
        #expect(error?.field == "[0].\(field)")
    }

    @Test func headerValuesAreBoundedAndMustBeText() {
        let long = rejection(F.array([F.event(["headers": ["x-note": .string(String(repeating: "v", count: 1_025))]])]))
        #expect(long?.message == "event 0: field 'headers.x-note': must be at most 1024 bytes")
        #expect(long?.field == "[0].headers.x-note")
        let boolean = rejection(F.array([F.event(["headers": ["retry-after": true]])]))
        #expect(boolean?.message == "event 0: field 'headers.retry-after': must be a string, found boolean")
        var many = JSONObject()
        for index in 0..<65 { many["x-h\(index)"] = "1" }
        let tooMany = rejection(F.array([F.event(["headers": .object(many)])]))
        #expect(tooMany?.message == "event 0: field 'headers': must have at most 64 entries")
    }

    @Test func unparseableHeaderValuesAreCountedNotFatal() throws {
        let headers: JSON = [
            "x-ratelimit-limit-requests": "lots", "x-ratelimit-reset-tokens": "soon",
            "x-ratelimit-remaining-tokens": "12.5.6", "x-ratelimit-remaining-requests": 59, "x-unrelated": "whatever",
        ]
        let batch = try decode(F.array([F.event(["headers": headers]), F.event()]))
        #expect(batch.unparseableHeaders == 3)
        #expect(batch.events[0].unparseableHeaders == 3)
        #expect(batch.events[0].signals.limitRequests == nil)
        #expect(batch.events[0].signals.remainingRequests == 59)  // a JSON number is read as its text
        #expect(batch.events[1].unparseableHeaders == 0)
    }

    @Test func duplicateMembersAreRejected() {
        let body = Array(
            #"[{"ts": 1795316399000, "tenant": "a", "tenant": "b", "gateway": "g", "upstream": "u"}]"#.utf8)
        let error = rejection(body)
        #expect(error?.message == "event 0: field 'tenant': appears twice")
    }

    @Test func unknownMembersAreIgnoredCountedAndNamed() throws {
        let events = [
            F.event(["prompt_token": 5, "vendor_extra": ["a": 1]]), F.event(["prompt_token": 7]),
        ]
        let batch = try decode(F.array(events))
        #expect(batch.events.count == 2)
        #expect(batch.ignoredFieldCount == 3)
        #expect(batch.ignoredFields.sorted() == ["prompt_token", "vendor_extra"])
    }

    // MARK: Outcome classification (SPEC section 4)

    @Test(
        arguments: [
            (429, "rate_limit_exceeded", Outcome.quotaExhausted),
            (429, "insufficient_quota", .spendCap),
            (529, nil, .overloaded),
            (503, nil, .overloaded),
            (500, nil, .serverError),
            (504, nil, .timeout),
            (200, nil, .ok),
            (nil, "timeout", .timeout),
        ] as [(Int?, String?, Outcome)])
    func outcomeIsClassifiedWhenAbsent(status: Int?, errorType: String?, expected: Outcome) throws {
        let event = F.event([
            "outcome": nil, "status": status.map { .int(Int64($0)) }, "error_type": errorType.map { .string($0) },
        ])
        let batch = try decode(F.array([event]))
        #expect(batch.events[0].outcome == expected)
        #expect(batch.events[0].outcomeWasClassified)
        #expect(batch.classifiedOutcomes == 1)
    }

    @Test func aReportedOutcomeWins() throws {
        let batch = try decode(F.array([F.event(["outcome": "denied_local", "status": 429])]))
        #expect(batch.events[0].outcome == .deniedLocal)
        #expect(!batch.events[0].outcomeWasClassified)
        #expect(batch.classifiedOutcomes == 0)
    }

    @Test func outcomeIsRequiredWhenNothingCanClassifyIt() {
        let error = rejection(F.array([F.event(["outcome": nil, "status": nil])]))
        #expect(
            error?.message
                == "event 0: field 'outcome': is required when 'status', 'error_type' and 'error_body' are all absent")
    }

    @Test func googleErrorBodyGivesRetryDelayQuotaAndClass() throws {
        let body: JSON = [
            "error": [
                "code": 429, "status": "RESOURCE_EXHAUSTED", "message": "Resource has been exhausted",
                "details": [
                    [
                        "@type": "type.googleapis.com/google.rpc.QuotaFailure",
                        "violations": [
                            [
                                "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
                                "quotaId": "GenerateRequestsPerMinutePerProjectPerModel-FreeTier",
                                "quotaValue": "15",
                            ]
                        ],
                    ],
                    ["@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "22s"],
                ],
            ]
        ]
        for errorBody in [body, .string(body.serializedString())] {
            let event = F.event([
                "upstream": "google/gemini-2.0-flash", "outcome": nil, "status": 429, "headers": nil,
                "error_body": errorBody,
            ])
            let decoded = try decode(F.array([event])).events[0]
            #expect(decoded.outcome == .quotaExhausted)
            #expect(decoded.signals.family == .google)
            #expect(decoded.signals.retryAfterMs == 22_000)
            #expect(decoded.signals.limitRequests == 15)
            #expect(decoded.signals.windowRequestsMs == 60_000)
        }
    }

    @Test func anthropicResetsAreRelativeToTheEventTime() throws {
        let event = F.event(
            [
                "upstream": "anthropic/claude-sonnet", "ts": "2026-11-22T03:00:00Z",
                "headers": [
                    "anthropic-ratelimit-tokens-remaining": "0",
                    "anthropic-ratelimit-tokens-reset": "2026-11-22T03:00:20Z",
                    "retry-after": "20",
                ],
                "outcome": nil, "status": 429,
            ], tsMs: 0)
        let decoded = try decode(F.array([event])).events[0]
        #expect(decoded.signals.family == .anthropic)
        #expect(decoded.signals.remainingTokens == 0)
        #expect(decoded.signals.resetTokensMs == 20_000)
        #expect(decoded.signals.retryAfterMs == 20_000)
        #expect(decoded.outcome == .quotaExhausted)
    }

    // MARK: Batch-level errors

    @Test func emptyBatchesAreRejected() {
        for (body, format) in [("[]", TelemetryFormat.jsonArray), ("", .jsonArray), ("  \n", .ndjson), ("", .ndjson)] {
            let error = rejection(Array(body.utf8), format)
            #expect(error?.code == "empty_batch")
            #expect(error?.status == 400)
        }
    }

    @Test func tooManyEventsIs413() {
        let small = TelemetryDecoder(validation: TelemetryValidation(maxEvents: 3))
        for (body, format) in [
            (F.array(Array(repeating: F.event(), count: 4)), TelemetryFormat.jsonArray),
            (F.ndjson(Array(repeating: F.event(), count: 4)), .ndjson),
        ] {
            #expect(
                throws: TelemetryRejection(
                    code: "too_many_events", message: "a batch holds at most 3 events", status: 413)
            ) {
                try small.decode(body, format: format, now: F.now)
            }
        }
        #expect(throws: Never.self) {
            try small.decode(F.array(Array(repeating: F.event(), count: 3)), format: .jsonArray, now: F.now)
        }
    }

    @Test func syntaxErrorsNameTheEventAndPosition() {
        let valid = F.event().serializedString()
        let array = rejection(Array("[\(valid), \(valid), {\"tenant\": \"a\",}]".utf8))
        #expect(array?.code == "invalid_json")
        #expect(array?.field == "[2]")
        #expect(array?.message.hasPrefix("event 2: invalid JSON at line 1, column ") == true)
        #expect(array?.message.hasSuffix("expected a member name string") == true)

        // In a member's value: the member too (outside evaluation round 20), and where inside it.
        let lines = rejection(Array("\(valid)\n\n\(valid)\n{\"ts\": \n".utf8), .ndjson)
        #expect(lines?.field == "[2].ts")
        #expect(
            lines?.message
                == "event 2: invalid JSON at line 4, column 8 ([2].ts): expected a JSON value, found end of input")
        let huge = rejection(Array(#"[{"tenant": "a", "latency_ms": 1e400}]"#.utf8))
        #expect(huge?.field == "[0].latency_ms")
        #expect(huge?.message == "event 0: invalid JSON at line 1, column 32 ([0].latency_ms): number out of range")
        let nested = rejection(Array(#"[{"tenant": "a", "headers": {"x-a": "1",}}]"#.utf8))
        #expect(nested?.field == "[0].headers")
        #expect(nested?.message.hasSuffix("expected a member name string") == true)
        let body = rejection(Array(#"[{"tenant": "a", "error_body": {"error": {"x a": [1, 2,]}}}]"#.utf8))
        #expect(body?.field == #"[0].error_body.error["x a"][2]"#)

        let trailing = rejection(Array("[\(valid)] x".utf8))
        #expect(trailing?.field == nil)
        #expect(trailing?.message.hasSuffix("unexpected character 'x' after the JSON value") == true)

        let twoPerLine = rejection(Array("\(valid) \(valid)\n".utf8), .ndjson)
        #expect(twoPerLine?.field == "[0]")
    }

    @Test func theBodyMustBeAnArrayOfObjects() {
        let object = rejection(F.event().serialized())
        #expect(
            object?.message
                == "the body must be a JSON array of event objects; for one event per line, send Content-Type: application/x-ndjson"
        )
        let scalar = rejection(Array("[{}, 5]".utf8))
        #expect(scalar?.message == "event 0: field 'ts': is required")
        let second = rejection(Array("[\(F.event().serializedString()), 5]".utf8))
        #expect(second?.message == "event 1: must be an object, found number")
        #expect(second?.field == "[1]")
        let line = rejection(Array("[1]\n".utf8), .ndjson)
        #expect(line?.message == "event 0: must be an object, found array")
    }

    // MARK: Hostile bodies

    @Test func deepNestingIsRejectedWithoutRecursingFar() {
        let deep = Array(repeating: UInt8(ascii: "["), count: 200_000)
        #expect(rejection(deep)?.message == "event 0: must be an object, found array")
        let nestedInEvent = Array(
            ("[{\"x\": " + String(repeating: "{\"a\": ", count: 100_000)).utf8)
        let error = rejection(nestedInEvent)
        #expect(error?.code == "invalid_json")
        #expect(error?.field == "[0]")
        #expect(error?.message.contains("nesting too deep (more than 16 levels)") == true)
    }

    @Test func hugeStringsAreRejectedByTheirBound() {
        let huge = String(repeating: "a", count: 2_000_000)
        let error = rejection(F.array([F.event(["tenant": .string(huge)])]))
        #expect(error?.field == "[0].tenant")
    }

    @Test func wrongTypesEverywhereNameTheFirstField() {
        var object = JSONObject()
        for field in TelemetryField.allCases { object[field.name] = [[1]] }
        let error = rejection(F.array([.object(object)]))
        #expect(
            error?.message
                == "event 0: field 'ts': must be an RFC 3339 string or integer epoch milliseconds, found array")
    }

    @Test func tenThousandMembersAreRefused() {
        var object = JSONObject()
        if case .object(let valid) = F.event() { object = valid }
        for index in 0..<10_000 { object["k\(index)"] = .int(Int64(index)) }
        let error = rejection(F.array([.object(object)]))
        #expect(error?.message == "event 0: has more than 64 members")
        #expect(error?.field == "[0]")
    }

    @Test func invalidUTF8AndControlBytesAreRejected() {
        let invalid: [UInt8] = Array("[{\"tenant\": \"".utf8) + [0xFF, 0xFE] + Array("\"}]".utf8)
        #expect(rejection(invalid)?.code == "invalid_json")
        let nul: [UInt8] = Array("[{\"tenant\": \"a".utf8) + [0x00] + Array("\"}]".utf8)
        #expect(rejection(nul)?.code == "invalid_json")
        #expect(rejection([0xEF, 0xBB, 0xBF] + F.array([F.event()]))?.code == "invalid_json")
    }

    @Test func mutatedBodiesNeverCrash() {
        var rng = SeededGenerator(seed: 0x7E1E)
        let base = F.array([F.event(), F.event(["outcome": nil, "status": 429]), F.event(["tenant": "beta"])])
        let alphabet = Array("{}[]\",:.-+eE0123456789tfnul \\/\nx".utf8) + [0x00, 0xFF, 0xC3]
        var accepted = 0
        for _ in 0..<1_000 {
            var bytes = base
            for _ in 0..<Int.random(in: 1...3, using: &rng) {
                let position = Int.random(in: 0..<bytes.count, using: &rng)
                switch Int.random(in: 0..<3, using: &rng) {
                case 0: bytes[position] = alphabet.randomElement(using: &rng)!
                case 1: bytes.remove(at: position)
                default: bytes.insert(alphabet.randomElement(using: &rng)!, at: position)
                }
            }
            do {
                let batch = try decode(bytes)
                #expect(!batch.events.isEmpty)
                accepted += 1
            } catch {
                #expect([400, 413].contains(error.status))
                #expect(!error.message.isEmpty)
            }
        }
        #expect(accepted > 0)
    }

    // MARK: Content types

    @Test func contentTypesChooseTheFormat() throws {
        #expect(try TelemetryFormat(contentType: nil) == .jsonArray)
        #expect(try TelemetryFormat(contentType: "application/json") == .jsonArray)
        #expect(try TelemetryFormat(contentType: "Application/JSON; charset=utf-8") == .jsonArray)
        #expect(try TelemetryFormat(contentType: "application/x-ndjson") == .ndjson)
        #expect(try TelemetryFormat(contentType: "application/ndjson ;charset=UTF-8") == .ndjson)
        for unsupported in ["text/plain", "application/x-www-form-urlencoded", "", "application/xml"] {
            do {
                _ = try TelemetryFormat(contentType: unsupported)
                Issue.record("accepted \(unsupported)")
            } catch {
                #expect(error.status == 415)
                #expect(error.code == "unsupported_media_type")
            }
        }
    }
}

/// SplitMix64, for repeatable fuzzing.
struct SeededGenerator: RandomNumberGenerator {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
