import AllotProtocol
import AllotSignals
import AllotTime
import Foundation
import Testing

@testable import AllotEnforcement

/// The async facade on a manual clock: waiting admissions, the queue's timer, lease expiry, stop.
@Suite struct GatewayTests {
    static let oneRPS = TenantEntry.make(rpm: Bucket(rate: 60, burst: 1), tpm: Bucket(rate: 600_000, burst: 100_000))

    func makeGateway(
        clock: ManualClock, collector: EventCollector, maxWait: Double = 10,
        telemetryTransport: (any TelemetryTransport)? = nil
    ) -> Gateway {
        Gateway(
            configuration: GatewayConfiguration(
                gatewayID: "gw-1", maxWait: PerTaskClass(all: maxWait), onEvent: { collector.note($0) }),
            clock: clock, telemetryTransport: telemetryTransport, telemetrySink: collector, seed: 1)
    }

    /// An Allot that takes the last telemetry batch and never answers holds `stop()` for its timeout only, and the
    /// leave goes out meanwhile (round 32: 30 s, the leave never sent in a 30-s grace period).
    @Test(.timeLimit(.minutes(8))) func stopIsBoundedWhenAllotDoesNotAnswer() async throws {
        let clock = ManualClock(now: 1_000)
        let telemetry = HangingTelemetryTransport(clock: clock)
        let snapshots = ScriptedSnapshotTransport(clock: clock)
        let gateway = Gateway(
            configuration: GatewayConfiguration(gatewayID: "gw-1"), clock: clock, snapshotTransport: snapshots,
            telemetryTransport: telemetry, seed: 1)
        gateway.apply(.make(tenants: [Self.oneRPS]))
        // A denial: an event buffered for the reporter.
        _ = gateway.tryAdmit(AdmissionRequest(tenant: "acme", upstream: Snapshot.defaultUpstream))
        _ = gateway.tryAdmit(AdmissionRequest(tenant: "acme", upstream: Snapshot.defaultUpstream))
        let stopped = Task { await gateway.stop(timeout: 5) }
        #expect(await eventually { telemetry.posts == 1 && snapshots.left == ["gw-1"] })
        #expect(await eventually { clock.nextDeadline == 1_005 })
        clock.advance(by: 5)
        await stopped.value
        #expect(clock.now == 1_005)
    }

    @Test func aWaitingAdmissionIsGrantedWhenTheBucketRefills() async throws {
        let clock = ManualClock(now: 1_000)
        let gateway = makeGateway(clock: clock, collector: EventCollector())
        gateway.apply(.make(tenants: [Self.oneRPS]))
        gateway.start()
        let first = try await gateway.admit(tenant: "acme", upstream: Snapshot.defaultUpstream)
        #expect(first.ticket != nil)
        let waiting = Task { try await gateway.admit(tenant: "acme", upstream: Snapshot.defaultUpstream) }
        #expect(await eventually { gateway.status.queueLength == 1 })
        #expect(await eventually { clock.nextDeadline == 1_001 })
        clock.advance(by: 1)
        let ticket = try #require(try await waiting.value.ticket)
        #expect(ticket.waited == 1)
        #expect(ticket.admittedAt == 1_001)
        await gateway.stop()
    }

    @Test func waitingAdmissionsOfStartedTasksGoBeforeNewOnes() async throws {
        let clock = ManualClock(now: 1_000)
        let gateway = makeGateway(clock: clock, collector: EventCollector())
        gateway.apply(.make(tenants: [Self.oneRPS]))
        gateway.start()
        _ = try await gateway.admit(tenant: "acme", upstream: Snapshot.defaultUpstream)
        // A new task's call waits first; then a call of a task started at 990 arrives and goes ahead of it.
        let newTask = Task {
            try await gateway.admit(tenant: "acme", upstream: Snapshot.defaultUpstream, taskDeadline: 1_060)
        }
        #expect(await eventually { gateway.status.queueLength == 1 })
        let started = Task {
            try await gateway.admit(
                tenant: "acme", upstream: Snapshot.defaultUpstream, taskID: "t-1", taskStartedAt: 990,
                taskDeadline: 1_050)
        }
        #expect(await eventually { gateway.status.queueLength == 2 })
        #expect(await eventually { clock.nextDeadline == 1_001 })
        clock.advance(by: 1)
        let first = try #require(try await started.value.ticket)
        #expect(first.taskID == "t-1")
        #expect(first.admittedAt == 1_001)
        #expect(gateway.status.queueLength == 1)
        #expect(await eventually { clock.nextDeadline == 1_002 })
        clock.advance(by: 1)
        #expect(try await newTask.value.ticket?.admittedAt == 1_002)
        await gateway.stop()
    }

    @Test func cancellingAWaitingAdmissionThrowsAndReportsItAsQueued() async throws {
        let clock = ManualClock(now: 1_000)
        let collector = EventCollector()
        let gateway = makeGateway(clock: clock, collector: collector)
        gateway.apply(.make(tenants: [Self.oneRPS]))
        gateway.start()
        _ = try await gateway.admit(tenant: "acme", upstream: Snapshot.defaultUpstream)
        let waiting = Task { try await gateway.admit(tenant: "acme", upstream: Snapshot.defaultUpstream) }
        #expect(await eventually { gateway.status.queueLength == 1 })
        waiting.cancel()
        await #expect(throws: CancellationError.self) { try await waiting.value }
        #expect(gateway.status.queueLength == 0)
        #expect(collector.telemetry.last?.outcome == .queued)
        #expect(gateway.enforcer.statistics.cancelledWhileQueued == 1)
        await gateway.stop()
    }

    @Test func theLeaseExpiresOnTimeWithoutTraffic() async throws {
        let clock = ManualClock(now: 1_000)
        let collector = EventCollector()
        let gateway = makeGateway(clock: clock, collector: collector)
        gateway.apply(.make(expiresAt: 1_300, tenants: [Self.oneRPS]))
        gateway.start()
        #expect(await eventually { clock.nextDeadline == 1_300 })
        clock.advance(to: 1_300)
        #expect(await eventually { collector.events.contains(.leaseExpired(version: 1, expiresAt: 1_300)) })
        #expect(gateway.status.inFallback)
        await gateway.stop()
    }

    @Test func stoppingDeniesWaitersAndFlushesTelemetry() async throws {
        let clock = ManualClock(now: 1_000)
        let collector = EventCollector()
        let transport = RecordingTelemetryTransport()
        let gateway = makeGateway(clock: clock, collector: collector, telemetryTransport: transport)
        gateway.apply(.make(tenants: [Self.oneRPS]))
        gateway.start()
        let ticket = try #require(try await gateway.admit(tenant: "acme", upstream: Snapshot.defaultUpstream).ticket)
        gateway.complete(ticket, status: 200, promptTokens: 10, completionTokens: 20, latency: 0.5)
        let waiting = Task { try await gateway.admit(tenant: "acme", upstream: Snapshot.defaultUpstream) }
        #expect(await eventually { gateway.status.queueLength == 1 })
        await gateway.stop()
        let denial = try #require(try await waiting.value.denial)
        #expect(denial.code == "gateway_stopping")
        let sent = transport.batches.flatMap { $0 }
        #expect(sent.map(\.outcome) == [.ok, .deniedLocal])
        #expect(sent.first?.completionTokens == 20)
        #expect(sent.first?.latency == 0.5)
    }

    @Test func concurrentCallersNeverExceedMaxConcurrency() async throws {
        let clock = ManualClock(now: 1_000)
        let gateway = makeGateway(clock: clock, collector: EventCollector(), maxWait: 60)
        let entry = TenantEntry.make(
            rpm: Bucket(rate: 1e6, burst: 1e6), tpm: Bucket(rate: 1e9, burst: 1e9), maxConcurrency: 5)
        gateway.apply(.make(tenants: [entry]))
        gateway.start()
        let gauge = InFlightGauge()
        try await withThrowingTaskGroup(of: Bool.self) { group in
            for _ in 0..<200 {
                group.addTask {
                    let admission = try await gateway.admit(tenant: "acme", upstream: Snapshot.defaultUpstream)
                    guard let ticket = admission.ticket else { return false }
                    gauge.enter()
                    await Task.yield()
                    gauge.leave()
                    gateway.complete(ticket, status: 200, promptTokens: 1, completionTokens: 1)
                    return true
                }
            }
            var admitted = 0
            for try await granted in group where granted { admitted += 1 }
            #expect(admitted == 200)
        }
        #expect(gauge.peak <= 5)
        #expect(gauge.peak >= 1)
        #expect(gateway.status.inFlight == 0)
        #expect(gateway.enforcer.statistics.completed == 200)
        await gateway.stop()
    }
}

/// Tracks how many callers hold a ticket at once.
final class InFlightGauge: @unchecked Sendable {
    // `@unchecked Sendable`: `current` and `highest` are only touched under `lock`.
    private let lock = NSLock()
    private var current = 0
    private var highest = 0

    func enter() {
        lock.withLock {
            current += 1
            highest = max(highest, current)
        }
    }

    func leave() { lock.withLock { current -= 1 } }

    var peak: Int { lock.withLock { highest } }
}
