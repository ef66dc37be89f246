import AllotCore
import AllotJSON
import AllotSignals
import Testing

@testable import AllotStore

/// The decoder's byte-level shortcuts agree with the plain definitions they replace.
@Suite struct DecoderFastPathTests {
    typealias F = TelemetryFixtures
    let decoder = TelemetryDecoder()

    @Test func identifierMasksAreTheCharacterClassesTheyDescribe() {
        let letters = Set(UInt8(ascii: "a")...UInt8(ascii: "z")).union(UInt8(ascii: "A")...UInt8(ascii: "Z"))
        let alphanumerics = letters.union(UInt8(ascii: "0")...UInt8(ascii: "9"))
        let classes: [(IdentifierCharset, String, String)] = [
            (.tenant, "._:-", "[A-Za-z0-9._:-]"), (.gateway, "._:-/", "[A-Za-z0-9._:/-]"),
            (.upstream, "._:/@+-", "[A-Za-z0-9._:/@+-]"),
        ]
        for (charset, extra, description) in classes {
            #expect("\(charset.description)" == description)
            let allowed = alphanumerics.union(extra.utf8)
            for byte in UInt8.min...UInt8.max {
                #expect(charset.allows(byte) == allowed.contains(byte), "\(description) byte \(byte)")
            }
        }
    }

    @Test func memberNamesMatchOnlyExactly() {
        for field in TelemetryField.allCases {
            var name = field.name
            #expect(name.withUTF8 { TelemetryField.match($0) } == field)
            for variant in [name.uppercased(), name + "s", String(name.dropLast()), "x" + name.dropFirst()] {
                var variant = variant
                #expect(variant.withUTF8 { TelemetryField.match($0) } == nil, "\(variant)")
            }
        }
        for outcome in Outcome.allCases {
            var name = outcome.rawValue
            #expect(name.withUTF8 { WireName.outcome($0) } == outcome)
            var upper = name.uppercased()
            #expect(upper.withUTF8 { WireName.outcome($0) } == nil)
        }
        for taskClass in TaskClass.allCases {
            var name = taskClass.rawValue
            #expect(name.withUTF8 { WireName.taskClass($0) } == taskClass)
        }
    }

    /// `ts` may come after `headers`: absolute resets are still relative to the event's time.
    @Test func headersBeforeTheTimestampAreReadRelativeToIt() throws {
        let body = Array(
            #"""
            [{"headers": {"anthropic-ratelimit-tokens-reset": "2026-11-22T03:00:20Z", "Retry-After": "Sun, 22 Nov 2026 03:00:05 GMT"},
              "gateway": "g", "tenant": "t", "upstream": "anthropic/claude", "status": 429,
              "ts": "2026-11-22T03:00:00Z"}]
            """#.utf8)
        let event = try #require(try decoder.decode(body, format: .jsonArray, now: F.now).events.first)
        #expect(event.signals.family == .anthropic)
        #expect(event.signals.resetTokensMs == 20_000)
        #expect(event.signals.retryAfterMs == 5_000)
        #expect(event.outcome == .quotaExhausted)
    }

    /// A header name with escapes is decoded into the scanner's scratch space, which the (escaped)
    /// value then reuses: the name must have been copied.
    @Test func escapedHeaderNamesAndValuesAreBothRead() throws {
        let body = Array(
            #"""
            [{"ts": 1795316399000, "gateway": "g", "tenant": "t", "upstream": "u", "outcome": "ok",
              "headers": {"x-ratelimit-limit-re\u0071uests": "1\u0030000", "x-ratelimit-remaining-requests": 17,
                          "x-ratelimit-limit-tokens": "lots"}}]
            """#.utf8)
        let batch = try decoder.decode(body, format: .jsonArray, now: F.now)
        let event = try #require(batch.events.first)
        #expect(event.signals.limitRequests == 10_000)
        #expect(event.signals.remainingRequests == 17)
        #expect(event.unparseableHeaders == 1)
        #expect(batch.unparseableHeaders == 1)
    }

    /// What the decoder makes of a `headers` object equals what ``ProviderSignals`` makes of the same
    /// fields given as strings.
    @Test func streamedHeadersGiveTheSameSignalsAsTheStringParser() throws {
        let sets: [[(String, String)]] = [
            [
                ("x-ratelimit-limit-requests", "10000"), ("x-ratelimit-remaining-requests", "0"),
                ("x-ratelimit-reset-requests", "6m0s"), ("X-RateLimit-Reset-Tokens", " 250ms "),
            ],
            [
                ("anthropic-ratelimit-input-tokens-limit", "80000"),
                ("anthropic-ratelimit-input-tokens-reset", "2026-11-22T02:59:00Z"),
                ("anthropic-ratelimit-output-tokens-remaining", "-1"), ("retry-after-ms", "1500"),
                ("retry-after", "3"),
            ],
            [
                ("x-ratelimit-remaining-tokens", "-1"), ("azure-openai-deployment-utilization", "87.5%"),
                ("x-ms-region", "swedencentral"), ("retry-after", "Sunday, 22-Nov-26 03:00:09 GMT"),
            ],
            [("x-ratelimit-limit-requests", "1e3"), ("retry-after", "soon"), ("x-unrelated", "1")],
            [],
        ]
        for headers in sets {
            var object = JSONObject()
            for (name, value) in headers { object[name] = .string(value) }
            let event = F.event(["headers": .object(object), "ts": "2026-11-22T03:00:00Z"], tsMs: 0)
            let decoded = try #require(try decoder.decode(F.array([event]), format: .jsonArray, now: F.now).events.first)
            let expected = ProviderSignals(headerFields: headers, now: F.now)
            #expect(decoded.signals == EventSignals(expected), "\(headers)")
            #expect(decoded.unparseableHeaders == expected.unparseableCount, "\(headers)")
        }
    }

    @Test func repeatedNamesDecodeToEqualStrings() throws {
        let long = "organisation-with-a-rather-long-name"
        let events = (0..<40).map { index in
            F.event(["tenant": .string(index % 2 == 0 ? long : "t\(index % 5)"), "upstream": "anthropic/claude-3-5"])
        }
        let batch = try decoder.decode(F.array(events), format: .jsonArray, now: F.now)
        #expect(batch.events.map(\.tenant) == (0..<40).map { $0 % 2 == 0 ? long : "t\($0 % 5)" })
        #expect(batch.events.allSatisfy { $0.upstream == "anthropic/claude-3-5" })
    }
}
