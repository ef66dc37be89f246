import AllotJSON
import AllotSignals
import AllotTime
import Foundation
import Testing

@testable import AllotEnforcement

@Suite struct TelemetryReporterTests {
    @Test func eventsAreEncodedWithTheSpecFieldNames() {
        let event = TelemetryRecord(
            ts: 1_764_000_000.123, gateway: "gw-1", tenant: "acme", upstream: "openai/gpt-4o",
            outcome: .quotaExhausted, status: 429, latency: 0.2505, queueWait: 0.01, promptTokens: 900,
            completionTokens: 0, estimatedTokens: 1_200, taskClass: .batch, taskID: "t-1",
            modelVersion: "gpt-4o-2024-08-06", retry: 1,
            headers: [ResponseHeader(name: "x-ratelimit-remaining-requests", value: "0")],
            errorType: "rate_limit_exceeded")
        let minimal = TelemetryRecord(
            ts: 1_764_000_000, gateway: "gw-1", tenant: "acme", upstream: "openai/gpt-4o", outcome: .deniedLocal)
        let text = String(decoding: TelemetryRecord.encodeBatch([event, minimal]), as: UTF8.self)
        #expect(
            text
                == #"[{"ts":1764000000123,"gateway":"gw-1","tenant":"acme","upstream":"openai/gpt-4o","#
                + #""outcome":"quota_exhausted","status":429,"latency_ms":250.5,"queue_ms":10.0,"prompt_tokens":900,"#
                + #""completion_tokens":0,"estimated_tokens":1200,"task_class":"batch","task_id":"t-1","#
                + #""model_version":"gpt-4o-2024-08-06","retry":1,"#
                + #""headers":{"x-ratelimit-remaining-requests":"0"},"error_type":"rate_limit_exceeded"},"#
                + #"{"ts":1764000000000,"gateway":"gw-1","tenant":"acme","upstream":"openai/gpt-4o","#
                + #""outcome":"denied_local","task_class":"interactive","retry":0}]"#)
        #expect((try? JSON.parse(text))?.arrayValue?.count == 2)
    }

    @Test func validationDropsUnusableEventsAndTrimsOptionalFields() {
        #expect(TelemetryRecord.make(0, tenant: "bad tenant").validated() == nil)
        #expect(TelemetryRecord.make(0, tenant: String(repeating: "a", count: 129)).validated() == nil)
        #expect(TelemetryRecord.make(0, tenant: "a.b:c-d_e").validated() != nil)
        var event = TelemetryRecord.make(0)
        event.upstream = "bedrock/anthropic.claude-3@v2+x"
        event.status = 42
        event.latency = -.infinity
        event.queueWait = 1e9
        event.completionTokens = -5
        event.retry = 5_000
        event.taskID = "line\nbreak"
        event.modelVersion = ""
        event.headers = [
            ResponseHeader(name: "x-ratelimit-limit-requests", value: "100"),
            ResponseHeader(name: "bad name", value: "1"),
            ResponseHeader(name: "retry-after", value: String(repeating: "9", count: 2_000)),
        ]
        let cleaned = try! #require(event.validated())
        #expect(cleaned.status == nil)
        #expect(cleaned.latency == nil)
        #expect(cleaned.queueWait == 86_400)
        #expect(cleaned.completionTokens == 0)
        #expect(cleaned.retry == 1_000)
        #expect(cleaned.taskID == nil)
        #expect(cleaned.modelVersion == nil)
        #expect(cleaned.headers == [ResponseHeader(name: "x-ratelimit-limit-requests", value: "100")])
        var gateway = TelemetryRecord.make(0)
        gateway.gateway = "eu-west/gw-3"
        #expect(gateway.validated() != nil)
        gateway.gateway = "gw@3"
        #expect(gateway.validated() == nil)
    }

    @Test func rateLimitHeadersAreSelectedByName() {
        let selected = RateLimitHeaders.select(from: [
            ("Content-Type", "application/json"), ("X-RateLimit-Limit-Tokens", "30000"),
            ("anthropic-ratelimit-output-tokens-reset", "2026-11-22T03:00:00Z"), ("Retry-After-Ms", "250"),
            ("azure-openai-deployment-utilization", "87.5%"), ("x-request-id", "abc"), ("x-ms-region", "eastus"),
        ])
        #expect(
            selected.map(\.name) == [
                "X-RateLimit-Limit-Tokens", "anthropic-ratelimit-output-tokens-reset", "Retry-After-Ms",
                "azure-openai-deployment-utilization", "x-ms-region",
            ])
    }

    @Test func ringDropsTheOldest() {
        var ring = EventRing(capacity: 3)
        #expect(ring.append(.make(0)) == 0)
        #expect(ring.append(.make(1)) == 0)
        #expect(ring.append(.make(2)) == 0)
        #expect(ring.append(.make(3)) == 1)
        let taken = ring.takeFront(2)
        #expect(taken.map(\.promptTokens) == [1, 2])
        #expect(ring.append(.make(4)) == 0)
        #expect(ring.append(.make(5)) == 0)
        #expect(ring.append(.make(6)) == 1)
        #expect(ring.takeFront(10).map(\.promptTokens) == [4, 5, 6])
        #expect(ring.count == 0)
    }

    @Test func boundedBufferDropsTheOldestAndCountsThem() {
        let dropped = DropLog()
        let reporter = TelemetryReporter(
            transport: nil, clock: ManualClock(now: 1_000),
            configuration: .init(capacity: 5, batchSize: 100, flushInterval: 1), seed: 1,
            onEvent: { dropped.note($0) })
        for index in 0..<8 { reporter.record(.make(index)) }
        reporter.record(.make(99, tenant: "not valid!"))
        let statistics = reporter.statistics
        #expect(statistics.recorded == 8)
        #expect(statistics.dropped == 3)
        #expect(statistics.invalid == 1)
        #expect(statistics.buffered == 5)
        #expect(dropped.counts == [1, 2])  // logarithmic reporting: after the 1st and 2nd drop, not the 3rd
        #expect(reporter.drain().map(\.promptTokens) == [3, 4, 5, 6, 7])
    }

    @Test func batchesGoOutWhenFullAndOnTheInterval() async throws {
        let clock = ManualClock(now: 1_000)
        let transport = RecordingTelemetryTransport()
        let reporter = TelemetryReporter(
            transport: transport, clock: clock, configuration: .init(capacity: 100, batchSize: 3, flushInterval: 1),
            seed: 1)
        let loop = Task { await reporter.run() }
        defer { loop.cancel() }
        await clock.waitForSleepers(1)
        // Size: the third event triggers a flush without time passing.
        for index in 0..<3 { reporter.record(.make(index)) }
        #expect(await eventually { transport.batches.count == 1 })
        #expect(transport.batches[0].map(\.promptTokens) == [0, 1, 2])
        // Interval: two events wait for the next tick.
        reporter.record(.make(3))
        reporter.record(.make(4))
        #expect(await eventually { clock.nextDeadline == 1_001 })
        #expect(transport.batches.count == 1)
        clock.advance(by: 1)
        #expect(await eventually { transport.batches.count == 2 })
        #expect(transport.batches[1].map(\.promptTokens) == [3, 4])
        #expect(reporter.statistics.sent == 5)
        #expect(reporter.statistics.batches == 2)
    }

    /// A wall clock stepped back an hour: the next flush is an interval away, not the hour (round 32: every event
    /// stayed buffered through the step). ``ManualClock/stepBack(by:)`` ends the sleep as ``SystemClock`` does.
    @Test func aClockSteppedBackDoesNotHoldTheEventsForTheStep() async throws {
        let clock = ManualClock(now: 5_000)
        let transport = RecordingTelemetryTransport()
        let reporter = TelemetryReporter(
            transport: transport, clock: clock, configuration: .init(capacity: 100, batchSize: 50, flushInterval: 1),
            seed: 1)
        let loop = Task { await reporter.run() }
        defer { loop.cancel() }
        await clock.waitForSleepers(1)
        reporter.record(.make(0))
        clock.stepBack(by: 3_600)
        #expect(await eventually { clock.nextDeadline == 1_401 })
        #expect(transport.batches.isEmpty)
        clock.advance(by: 1)
        #expect(await eventually { transport.batches.count == 1 })
        #expect(transport.batches[0].map(\.promptTokens) == [0])
    }

    @Test func failedPostsAreRetriedWithSeededBackoffKeepingOrder() async throws {
        let clock = ManualClock(now: 1_000)
        let transport = RecordingTelemetryTransport()
        transport.failNext(
            TransportError(.unreachable, "connection refused"), TransportError(.status, "busy", status: 503))
        let backoff = Backoff(initial: 0.5, maximum: 30)
        let reporter = TelemetryReporter(
            transport: transport, clock: clock,
            configuration: .init(capacity: 100, batchSize: 2, flushInterval: 10, backoff: backoff), seed: 7)
        var random = SplitMix64(seed: 7)
        let first = backoff.delay(failures: 1, unit: random.unit())
        let second = backoff.delay(failures: 2, unit: random.unit())
        #expect(first >= 0.25 && first <= 0.5)
        #expect(second >= 0.5 && second <= 1)
        let loop = Task { await reporter.run() }
        defer { loop.cancel() }
        await clock.waitForSleepers(1)
        reporter.record(.make(0))
        reporter.record(.make(1))
        #expect(await eventually { transport.attemptCount == 1 })
        #expect(await eventually { clock.nextDeadline == 1_000 + first })
        reporter.record(.make(2))
        clock.advance(by: first * 0.99)
        #expect(transport.attemptCount == 1)
        clock.advance(to: 1_000 + first)
        #expect(await eventually { transport.attemptCount == 2 })
        #expect(await eventually { clock.nextDeadline == 1_000 + first + second })
        clock.advance(by: second)
        #expect(await eventually { transport.batches.count == 2 })
        #expect(transport.batches.map { $0.map(\.promptTokens) } == [[0, 1], [2]])
        let statistics = reporter.statistics
        #expect(statistics.failedPosts == 2)
        #expect(statistics.consecutiveFailures == 0)
        #expect(statistics.sent == 3)
    }

    @Test func theServersRetryAfterIsHonoured() async throws {
        let clock = ManualClock(now: 1_000)
        let transport = RecordingTelemetryTransport()
        transport.failNext(TransportError(.status, "slow down", status: 429, retryAfter: 20))
        let reporter = TelemetryReporter(
            transport: transport, clock: clock, configuration: .init(batchSize: 1, flushInterval: 10), seed: 7)
        let loop = Task { await reporter.run() }
        defer { loop.cancel() }
        await clock.waitForSleepers(1)
        reporter.record(.make(0))
        #expect(await eventually { transport.attemptCount == 1 })
        #expect(await eventually { clock.nextDeadline == 1_020 })
    }

    @Test func anEventTheServerRefusesIsDroppedAndTheRestResent() async {
        let transport = RecordingTelemetryTransport()
        transport.failNext(
            TransportError(.status, "event 1: field 'tenant'", status: 400, rejectedIndex: 1))
        let reporter = TelemetryReporter(transport: transport, clock: ManualClock(now: 1_000), seed: 1)
        for index in 0..<3 { reporter.record(.make(index)) }
        #expect(await reporter.flush())
        #expect(transport.batches.map { $0.map(\.promptTokens) } == [[0, 2]])
        #expect(reporter.statistics.rejected == 1)
        #expect(reporter.statistics.sent == 2)

        transport.failNext(TransportError(.status, "invalid_json", status: 400))
        for index in 3..<5 { reporter.record(.make(index)) }
        #expect(await reporter.flush())
        #expect(reporter.statistics.rejected == 3)
        #expect(reporter.statistics.buffered == 0)
        #expect(transport.batches.count == 1)
    }

    @Test func aRetryIsTheSameBatchUnderTheSameKeyAndANewBatchGetsANewOne() async throws {
        let transport = RecordingTelemetryTransport()
        transport.failNext(TransportError(.timeout, "no answer"), TransportError(.unreachable, "refused"))
        let reporter = TelemetryReporter(
            transport: transport, clock: ManualClock(now: 1_000), configuration: .init(batchSize: 2), seed: 1)
        for index in 0..<2 { reporter.record(.make(index)) }
        #expect(await !reporter.flush())
        // Events recorded meanwhile do not join the batch being retried: its body, and so its key, stay the same.
        reporter.record(.make(2))
        #expect(reporter.statistics.buffered == 3)
        #expect(await !reporter.flush())
        #expect(await reporter.flush())
        #expect(transport.batches.map { $0.map(\.promptTokens) } == [[0, 1], [2]])
        let keys = transport.keys.compactMap { $0 }
        #expect(keys.count == 4)
        #expect(Set(keys[0...2]).count == 1)
        #expect(keys[3] != keys[0])
        // What Allot accepts: 1–128 characters of [A-Za-z0-9._:-].
        #expect(
            keys.allSatisfy {
                $0.count <= 128 && $0.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "._:-".contains($0)) }
            })
        #expect(keys[0].hasSuffix("-1") && keys[3].hasSuffix("-2"))

        // A batch the server refused in part is another body: the rest goes under a new key.
        transport.failNext(TransportError(.status, "event 0: field 'tenant'", status: 400, rejectedIndex: 0))
        for index in 3..<5 { reporter.record(.make(index)) }
        #expect(await reporter.flush())
        let later = transport.keys.suffix(2).compactMap { $0 }
        #expect(later.count == 2 && later[0] != later[1])
        #expect(transport.batches.last?.map(\.promptTokens) == [4])

        // A key Allot says was used for another body: the batch was not stored, and goes again under a new key.
        transport.failNext(TransportError(.status, "idempotency_key_reused", status: 422))
        reporter.record(.make(5))
        #expect(await reporter.flush())
        let reused = transport.keys.suffix(2).compactMap { $0 }
        #expect(reused.count == 2 && reused[0] != reused[1])
        #expect(transport.batches.last?.map(\.promptTokens) == [5])
        #expect(reporter.statistics.rejected == 1)

        // Two reporters given the same seed do not share keys.
        let other = RecordingTelemetryTransport()
        let twin = TelemetryReporter(transport: other, clock: ManualClock(now: 1_000), seed: 1)
        twin.record(.make(0))
        #expect(await twin.flush())
        #expect(other.keys.first! != keys[0])
    }

    @Test func aFailedFlushKeepsTheEvents() async {
        let transport = RecordingTelemetryTransport()
        transport.failNext(TransportError(.timeout, "no answer"))
        let reporter = TelemetryReporter(transport: transport, clock: ManualClock(now: 1_000), seed: 1)
        for index in 0..<3 { reporter.record(.make(index)) }
        #expect(await !reporter.flush())
        #expect(reporter.statistics.buffered == 3)
        #expect(await reporter.flush())
        #expect(transport.batches.map { $0.map(\.promptTokens) } == [[0, 1, 2]])
    }
}

/// Records the counts of drop events.
final class DropLog: @unchecked Sendable {
    // `@unchecked Sendable`: `values` is only touched under `lock`.
    private let lock = NSLock()
    private var values: [Int] = []

    func note(_ event: GatewayEvent) {
        if case .telemetryDropped(let count, _) = event { lock.withLock { values.append(count) } }
    }

    var counts: [Int] { lock.withLock { values } }
}
