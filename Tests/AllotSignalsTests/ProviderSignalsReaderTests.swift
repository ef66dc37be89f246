import AllotSignals
import Testing

/// ``ProviderSignalsReader`` (raw bytes, `now` given at the end) reads exactly what
/// ``ProviderSignals/init(headers:body:now:)`` reads.
@Suite struct ProviderSignalsReaderTests {
    static func read(_ fields: [(String, String)], body: ProviderErrorBody? = nil, now: Double) -> ProviderSignals {
        var reader = ProviderSignalsReader()
        for (name, value) in fields {
            var name = name
            var value = value
            name.withUTF8 { nameBytes in value.withUTF8 { reader.read(name: nameBytes, value: $0) } }
        }
        #expect(reader.fieldCount == fields.count)
        return reader.signals(body: body, now: now)
    }

    @Test(arguments: HeaderExample.all)
    func readsEveryExampleLikeTheStringParser(example: HeaderExample) {
        let body = example.body.map { ProviderErrorBody(text: $0) }
        let fields = example.headers.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
        let expected = ProviderSignals(headers: example.headers, body: body, now: HeaderExample.now)
        #expect(Self.read(fields, body: body, now: HeaderExample.now) == expected)
        #expect(Self.read(fields.reversed(), body: body, now: HeaderExample.now) == expected)
    }

    /// A later field wins over an earlier one for the same value, whether relative or absolute.
    @Test func theLaterOfTwoResetsOrRetryAftersWins() {
        let now = HeaderExample.now
        let relativeThenAbsolute = Self.read(
            [("x-ratelimit-reset-tokens", "30s"), ("anthropic-ratelimit-tokens-reset", "2026-11-22T03:00:10Z")],
            now: now)
        #expect(relativeThenAbsolute.tokens.reset == 10)
        let absoluteThenRelative = Self.read(
            [("anthropic-ratelimit-tokens-reset", "2026-11-22T03:00:10Z"), ("x-ratelimit-reset-tokens", "30s")],
            now: now)
        #expect(absoluteThenRelative.tokens.reset == 30)
        let dateThenSeconds = Self.read(
            [("retry-after", "Sun, 22 Nov 2026 03:00:40 GMT"), ("retry-after", "7")], now: now)
        #expect(dateThenSeconds.retryAfter == 7)
        let secondsThenDate = Self.read(
            [("retry-after", "7"), ("retry-after", "Sun, 22 Nov 2026 03:00:40 GMT")], now: now)
        #expect(secondsThenDate.retryAfter == 40)
        let pastReset = Self.read([("anthropic-ratelimit-requests-reset", "2026-11-22T02:00:00Z")], now: now)
        #expect(pastReset.requests.reset == 0)
    }

    /// `now` is only needed at the end: the same fields give resets relative to whichever time is
    /// given then, and an RFC 850 two-digit year is placed relative to it.
    @Test func timesAreResolvedAgainstTheTimeGivenAtTheEnd() {
        var reader = ProviderSignalsReader()
        let fields = [
            ("anthropic-ratelimit-tokens-reset", "2026-11-22T03:01:00Z"),
            ("retry-after", "Sunday, 22-Nov-26 03:00:30 GMT"),
        ]
        for (name, value) in fields {
            var name = name
            var value = value
            name.withUTF8 { nameBytes in value.withUTF8 { reader.read(name: nameBytes, value: $0) } }
        }
        #expect(reader.signals(now: HeaderExample.now).tokens.reset == 60)
        #expect(reader.signals(now: HeaderExample.now).retryAfter == 30)
        #expect(reader.signals(now: HeaderExample.now + 20).tokens.reset == 40)
        #expect(reader.signals(now: HeaderExample.now + 20).retryAfter == 10)
    }

    @Test func unparseableNamesAreKeptAsSent() {
        let signals = Self.read(
            [("X-RateLimit-Limit-Requests", "many"), ("x-unknown", "???"), ("Retry-After", "later")],
            now: HeaderExample.now)
        #expect(signals.unparseableHeaders == ["Retry-After", "X-RateLimit-Limit-Requests"])
        #expect(signals.requests.limit == nil)
    }
}
