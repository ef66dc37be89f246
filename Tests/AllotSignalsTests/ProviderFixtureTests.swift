import AllotJSON
import AllotSignals
import AllotTime
import Foundation
import Testing

/// One case of `Fixtures/provider-headers.json` (shared with the team; copied into the project).
struct ProviderFixtureCase: Sendable, CustomTestStringConvertible {
    var name: String
    var status: Int
    var now: Double
    var errorType: String?
    var headers: JSONObject
    var body: JSON?
    var expect: JSONObject

    var testDescription: String { name }

    /// Every case in the fixture file, loaded through the test bundle.
    static let all: [ProviderFixtureCase] = {
        do {
            return try load()
        } catch {
            Issue.record("cannot load provider-headers.json: \(error)")
            return []
        }
    }()

    struct LoadError: Error, CustomStringConvertible {
        var description: String
    }

    static func load() throws -> [ProviderFixtureCase] {
        guard
            let url = Bundle.module.url(
                forResource: "provider-headers", withExtension: "json", subdirectory: "Fixtures")
        else { throw LoadError(description: "Fixtures/provider-headers.json is not in the test bundle") }
        let root = try JSON.parse(try Data(contentsOf: url))
        guard let cases = root["cases"]?.arrayValue else { throw LoadError(description: "no cases array") }
        return try cases.map { json in
            guard let name = json["name"]?.stringValue, let status = json["status"]?.intValue,
                let nowText = json["now"]?.stringValue, let now = RFC3339.parse(nowText),
                let headers = json["headers"]?.objectValue, let expect = json["expect"]?.objectValue
            else { throw LoadError(description: "malformed case \(json)") }
            return ProviderFixtureCase(
                name: name, status: status, now: now, errorType: json["error_type"]?.stringValue, headers: headers,
                body: json["body"], expect: expect)
        }
    }
}

@Suite("Provider header fixture")
struct ProviderFixtureTests {
    /// The `expect` keys this test knows how to check; an unknown key fails loudly instead of being skipped.
    static let knownKeys: Set<String> = [
        "limit_requests", "limit_tokens", "remaining_requests", "remaining_tokens", "reset_requests_s",
        "reset_tokens_s", "limit_input_tokens", "remaining_input_tokens", "reset_input_tokens_s",
        "limit_output_tokens", "remaining_output_tokens", "reset_output_tokens_s", "retry_after_s", "utilization",
        "class", "unparseable",
    ]

    @Test("the fixture loads and every expect key is understood")
    func fixtureShape() {
        #expect(ProviderFixtureCase.all.count == 15)
        for fixture in ProviderFixtureCase.all {
            let unknown = Set(fixture.expect.keys).subtracting(Self.knownKeys)
            #expect(unknown.isEmpty, "\(fixture.name): unknown expect keys \(unknown)")
        }
    }

    @Test("every fixture case parses and classifies as expected", arguments: ProviderFixtureCase.all)
    func fixtureCase(_ fixture: ProviderFixtureCase) {
        let body = fixture.body.map { ProviderErrorBody.json($0) }
        let signals = ProviderSignals(headers: fixture.headers, body: body, now: fixture.now)

        // The [String: String] entry point must agree with the JSON-object one.
        var dictionary: [String: String] = [:]
        for (name, value) in fixture.headers { dictionary[name] = value.stringValue }
        #expect(ProviderSignals(headers: dictionary, body: body, now: fixture.now) == signals)

        for (key, expected) in fixture.expect {
            switch key {
            case "limit_requests": check(signals.requests.limit, expected, key, fixture)
            case "limit_tokens": check(signals.tokens.limit, expected, key, fixture)
            case "remaining_requests": check(signals.requests.remaining, expected, key, fixture)
            case "remaining_tokens": check(signals.tokens.remaining, expected, key, fixture)
            case "reset_requests_s": check(signals.requests.reset, expected, key, fixture)
            case "reset_tokens_s": check(signals.tokens.reset, expected, key, fixture)
            case "limit_input_tokens": check(signals.inputTokens.limit, expected, key, fixture)
            case "remaining_input_tokens": check(signals.inputTokens.remaining, expected, key, fixture)
            case "reset_input_tokens_s": check(signals.inputTokens.reset, expected, key, fixture)
            case "limit_output_tokens": check(signals.outputTokens.limit, expected, key, fixture)
            case "remaining_output_tokens": check(signals.outputTokens.remaining, expected, key, fixture)
            case "reset_output_tokens_s": check(signals.outputTokens.reset, expected, key, fixture)
            case "retry_after_s": check(signals.retryAfter, expected, key, fixture)
            case "utilization": check(signals.utilization, expected, key, fixture)
            case "unparseable":
                #expect(signals.unparseableCount == expected.intValue, "\(fixture.name): \(signals.unparseableHeaders)")
            case "class":
                let outcome = ErrorClassifier.classify(status: fixture.status, errorType: fixture.errorType, body: body)
                #expect(outcome.rawValue == expected.stringValue, "\(fixture.name)")
            default:
                Issue.record("\(fixture.name): unknown expect key \(key)")
            }
        }
        // Cases that do not mention unparseable values have none.
        if fixture.expect["unparseable"] == nil {
            #expect(signals.unparseableCount == 0, "\(fixture.name): \(signals.unparseableHeaders)")
        }
    }

    private func check(_ actual: Int64?, _ expected: JSON, _ key: String, _ fixture: ProviderFixtureCase) {
        if expected.isNull {
            #expect(actual == nil, "\(fixture.name).\(key) must be unknown")
        } else {
            #expect(actual == expected.int64Value, "\(fixture.name).\(key)")
        }
    }

    private func check(_ actual: Double?, _ expected: JSON, _ key: String, _ fixture: ProviderFixtureCase) {
        if expected.isNull {
            #expect(actual == nil, "\(fixture.name).\(key) must be unknown")
        } else if let actual, let value = expected.doubleValue {
            #expect(abs(actual - value) < 1e-9, "\(fixture.name).\(key): \(actual) ≠ \(value)")
        } else {
            Issue.record("\(fixture.name).\(key): expected \(expected), got \(String(describing: actual))")
        }
    }
}
