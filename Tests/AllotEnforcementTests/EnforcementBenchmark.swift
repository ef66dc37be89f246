import AllotProtocol
import AllotTime
import Foundation
import Testing

@testable import AllotEnforcement

/// Rough cost of the gateway's hot path. Runs only with `ALLOT_BENCH=1` (tests never assert on speed):
///
///     ALLOT_BENCH=1 swift test -c release --filter EnforcementBenchmark
@Suite("Enforcement benchmark", .enabled(if: ProcessInfo.processInfo.environment["ALLOT_BENCH"] != nil))
struct EnforcementBenchmark {
    /// Median nanoseconds per operation over seven rounds.
    private func measure(_ label: String, iterations: Int, _ round: () -> Void) {
        var rounds: [Double] = []
        for _ in 0..<7 {
            let start = MonotonicClock.now()
            round()
            rounds.append(Double(MonotonicClock.now() - start) / Double(iterations))
        }
        rounds.sort()
        print(
            String(format: "EnforcementBenchmark %@: median %.0f ns/op, best %.0f ns/op", label, rounds[3], rounds[0]))
    }

    static func snapshot(tenants: Int) -> Snapshot {
        Snapshot.make(
            expiresAt: 1e12,
            tenants: (0..<tenants).map {
                TenantEntry.make("t\($0)", rpm: Bucket(rate: 1e6, burst: 1e6), tpm: Bucket(rate: 1e9, burst: 1e9))
            })
    }

    @Test("tryAdmit + complete", arguments: [50, 10_000])
    func admitAndComplete(tenants: Int) {
        let enforcer = Enforcer(configuration: GatewayConfiguration(gatewayID: "gw-1"), telemetry: nil)
        enforcer.apply(Self.snapshot(tenants: tenants), now: 1_000)
        let requests = (0..<tenants).map { AdmissionRequest.make("t\($0)", tokens: 500, taskID: "task-\($0 % 977)") }
        let result = AttemptResult(status: 200, promptTokens: 300, completionTokens: 150, latency: 0.4)
        var now = 1_000.0
        measure("tryAdmit+complete, \(tenants) tenants", iterations: 100_000) {
            for index in 0..<100_000 {
                now += 0.000_01
                if let ticket = enforcer.tryAdmit(requests[index % requests.count], now: now).ticket {
                    enforcer.complete(ticket, result, now: now)
                }
            }
        }
    }

    @Test("snapshot hot swap, 10,000 tenants")
    func hotSwap() {
        let enforcer = Enforcer(configuration: GatewayConfiguration(gatewayID: "gw-1"), telemetry: nil)
        var snapshot = Self.snapshot(tenants: 10_000)
        enforcer.apply(snapshot, now: 1_000)
        for index in 0..<10_000 { _ = enforcer.tryAdmit(.make("t\(index)", tokens: 500), now: 1_000) }
        var version: Int64 = 1
        measure("apply (per snapshot)", iterations: 1) {
            version += 1
            snapshot.version = version
            enforcer.apply(snapshot, now: 1_000)
        }
    }

    @Test("record telemetry")
    func record() {
        let reporter = TelemetryReporter(transport: nil, clock: ManualClock(), configuration: .init(capacity: 10_000))
        let event = TelemetryRecord(
            ts: 1_000, gateway: "gw-1", tenant: "acme", upstream: "openai/gpt-4o", outcome: .ok, status: 200,
            latency: 0.4, promptTokens: 300, completionTokens: 150, estimatedTokens: 500, taskID: "task-1",
            headers: [ResponseHeader(name: "x-ratelimit-remaining-requests", value: "99")])
        measure("record", iterations: 100_000) {
            for _ in 0..<100_000 { reporter.record(event) }
        }
        measure("encode batch of 500", iterations: 500) {
            _ = TelemetryRecord.encodeBatch(reporter.drain(max: 500))
            for _ in 0..<500 { reporter.record(event) }
        }
    }
}
