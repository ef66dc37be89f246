import Foundation
import AllotProtocol
import AllotSignals
import Testing

@testable import AllotEnforcement

/// The admission queue driven synchronously with `submit` and `pump(now:)`, as a simulator drives it.
@Suite struct EnforcerQueueTests {
    static let patient = GatewayConfiguration(gatewayID: "gw-1", maxWait: PerTaskClass(all: 10))

    /// One request per second, burst 1.
    static let oneRPS = TenantEntry.make(rpm: Bucket(rate: 60, burst: 1), tpm: Bucket(rate: 600_000, burst: 100_000))

    @discardableResult
    func submit(
        _ enforcer: Enforcer, _ request: AdmissionRequest, now: Double, log: DecisionLog, label: String
    ) -> Enforcer.Submission {
        enforcer.submit(request, now: now, onDecision: log.callback(label))
    }

    @Test func waitersAreServedByTaskClassNotArrival() throws {
        let enforcer = Enforcer.make(.make(tenants: [Self.oneRPS]), configuration: Self.patient)
        let log = DecisionLog()
        _ = try enforcer.mustAdmit(now: 1_000)
        for (label, taskClass) in [
            ("background", TaskClass.background), ("batch", .batch), ("interactive", .interactive),
            ("realtime", .realtime),
        ] {
            let submission = submit(enforcer, .make(taskClass: taskClass), now: 1_000, log: log, label: label)
            guard case .queued = submission else {
                Issue.record("\(label) was not queued: \(submission)")
                return
            }
        }
        #expect(enforcer.status(now: 1_000).queueLength == 4)
        #expect(enforcer.nextWakeTime == 1_001)
        for second in 1...4 { enforcer.pump(now: 1_000 + Double(second)) }
        #expect(log.labels == ["realtime", "interactive", "batch", "background"])
        #expect(log.decisions.map { $0.1.ticket?.waited } == [1, 2, 3, 4])
        #expect(enforcer.statistics.admittedAfterWaiting == 4)
        #expect(enforcer.nextWakeTime == 1_300)  // only the lease end is left
    }

    @Test func arrivalsDoNotOvertakeEqualPriorityWaitersButHigherPriorityOnesDo() throws {
        let enforcer = Enforcer.make(.make(tenants: [Self.oneRPS]), configuration: Self.patient)
        let log = DecisionLog()
        _ = try enforcer.mustAdmit(now: 1_000)
        submit(enforcer, .make(taskClass: .batch), now: 1_000, log: log, label: "batch")
        // At t=1001 the token is there, but the batch waiter is first in line for it (it has not been pumped yet).
        let sameClass = try enforcer.mustDeny(.make(taskClass: .batch), now: 1_001)
        #expect(sameClass.limit == .rpm)
        #expect(sameClass.message.contains("queued ahead"))
        _ = try enforcer.mustAdmit(.make(taskClass: .realtime), now: 1_001)
        enforcer.pump(now: 1_001)
        #expect(log.labels.isEmpty)  // the realtime arrival took the token
        enforcer.pump(now: 1_002)
        #expect(log.labels == ["batch"])
        // Other tenants are not affected by acme's queue.
        _ = try enforcer.mustAdmit(.make("globex", taskClass: .batch, tokens: 10), now: 1_000.5)
    }

    @Test func anArrivalBehindAWaitingHeadIsToldTheHeadsRefillAsOfNow() throws {
        let enforcer = Enforcer.make(.make(tenants: [Self.oneRPS]), configuration: Self.patient)
        let log = DecisionLog()
        _ = try enforcer.mustAdmit(now: 1_000)
        submit(enforcer, .make(taskClass: .batch), now: 1_000, log: log, label: "batch")  // due at 1001
        let early = try enforcer.mustDeny(.make(taskClass: .batch), now: 1_000.25)
        #expect(early.message.contains("queued ahead"))
        #expect(approx(early.retryAfter, 0.75))
        enforcer.pump(now: 1_000.5)  // nothing due: the head keeps its failure of 1000
        let later = try enforcer.mustDeny(.make(taskClass: .batch), now: 1_000.6)
        #expect(approx(later.retryAfter, 0.4))
        enforcer.pump(now: 1_001)
        #expect(log.labels == ["batch"])
    }

    @Test func aCallThatGaveUpBehindItsTenantsQueueIsToldWhenItsTurnWouldCome() throws {
        // One request per second; an interactive head due at 1001 and three batch calls behind it that may
        // wait half a second. Told the head's refill alone (1 s at 1000), they would be back at 1000.5 + 0.5
        // to queue behind the same line.
        let enforcer = Enforcer.make(
            .make(tenants: [Self.oneRPS]),
            configuration: GatewayConfiguration(
                gatewayID: "gw-1", maxWait: PerTaskClass(realtime: 10, interactive: 10, batch: 0.5, background: 10),
                borrowIdle: false))
        let log = DecisionLog()
        _ = try enforcer.mustAdmit(now: 1_000)
        submit(enforcer, .make(), now: 1_000, log: log, label: "head")
        for index in 1...3 { submit(enforcer, .make(taskClass: .batch), now: 1_000, log: log, label: "b\(index)") }
        enforcer.pump(now: 1_000.5)
        #expect(log.labels == ["b1", "b2", "b3"])
        // The head's remaining 0.5 s, then one second per call ahead (the RPM bucket binds: 100 tokens of
        // 10,000 per second take 0.01 s).
        for (label, expected) in [("b1", 1.5), ("b2", 2.5), ("b3", 3.5)] {
            let denial = try #require(log.admission(label)?.denial)
            #expect(denial.code == "max_wait_exceeded")
            #expect(approx(denial.retryAfter, expected), "\(label)")
        }
        enforcer.pump(now: 1_001)
        #expect(log.labels == ["b1", "b2", "b3", "head"])
    }

    @Test func aLargeWaiterIsNotStarvedBySmallOnes() throws {
        // 10 tokens per second, burst 100.
        let entry = TenantEntry.make(rpm: Bucket(rate: 6_000, burst: 100), tpm: Bucket(rate: 600, burst: 100))
        let enforcer = Enforcer.make(.make(tenants: [entry]), configuration: Self.patient)
        let log = DecisionLog()
        _ = try enforcer.mustAdmit(.make(tokens: 100), now: 1_000)
        submit(enforcer, .make(tokens: 80), now: 1_000, log: log, label: "large")
        submit(enforcer, .make(tokens: 5), now: 1_000, log: log, label: "small")
        enforcer.pump(now: 1_001)  // 10 tokens: enough for "small", but "large" is ahead
        #expect(log.labels.isEmpty)
        enforcer.pump(now: 1_008)
        #expect(log.labels == ["large"])
        enforcer.pump(now: 1_008.5)
        #expect(log.labels == ["large", "small"])
    }

    @Test func maxWaitEndsInADenialTheCallerCanActOn() throws {
        let collector = EventCollector()
        let enforcer = Enforcer.make(
            .make(tenants: [TenantEntry.make(maxConcurrency: 1)]), collector: collector,
            configuration: GatewayConfiguration(gatewayID: "gw-1"))  // interactive waits at most 5 s
        let log = DecisionLog()
        _ = try enforcer.mustAdmit(now: 1_000)
        #expect(submit(enforcer, .make(taskID: "t-1"), now: 1_000, log: log, label: "late") == .queued(2))
        #expect(enforcer.nextWakeTime == 1_005)
        enforcer.pump(now: 1_004.9)
        #expect(log.labels.isEmpty)
        enforcer.pump(now: 1_005)
        let denial = try #require(log.admission("late")?.denial)
        #expect(denial.limit == .concurrency)
        #expect(denial.code == "max_wait_exceeded")
        #expect(denial.waited == 5)
        #expect(denial.retryAfter == 1)
        #expect(denial.snapshotVersion == 1)
        #expect(denial.taskClass == .interactive)
        #expect(denial.message.hasPrefix("waited the 5 s maximum of interactive requests"))
        #expect(
            collector.telemetry.last
                == TelemetryRecord(
                    ts: 1_005, gateway: "gw-1", tenant: "acme", upstream: Snapshot.defaultUpstream,
                    outcome: .deniedLocal, queueWait: 5, estimatedTokens: 100, taskClass: .interactive,
                    taskID: "t-1", errorType: "concurrency"))
        #expect(enforcer.statistics.denied == [.concurrency: 1])
    }

    /// The wall clock stepped back an hour while a call waited: its maximum wait and its wait report move back with
    /// it (round 32: an interactive call that may wait 5 s was still queued 40 s after such a step).
    @Test func aClockSteppedBackMovesTheQueuesInstantsWithIt() throws {
        let collector = EventCollector()
        // The steady clock, as the gateway's process would read it (seconds since the enforcer was made).
        let steady = SteadySeconds()
        let enforcer = Enforcer.make(
            .make(expiresAt: 1e10, tenants: [TenantEntry.make(maxConcurrency: 1)]), now: 5_000, collector: collector,
            configuration: GatewayConfiguration(gatewayID: "gw-1"), monotonic: { steady.value })
        let log = try queueTwoBehindAHeldPermit(enforcer)
        #expect(enforcer.nextWakeTime == 5_005)
        // One second later the clock is stepped back by an hour (5,001 reads 1,401), and nobody looks until 3 s later
        // (a `SystemClock` sleep notices a step only when it ends): the step is measured from where the wall clock
        // should be, 5,004, not from the last instant the enforcer saw.
        steady.value = 4
        enforcer.pump(now: 1_404)
        #expect(enforcer.statistics.clockStepsBack == 1)
        #expect(log.labels.isEmpty)
        #expect(enforcer.nextWakeTime == 1_405)
        steady.value = 5
        enforcer.pump(now: 1_405)
        // The background call was reported waiting at its fifth second too, with its arrival moved back.
        try expectFiveSecondsWaited(log: log, collector: collector, arrival: 1_400)
        #expect(enforcer.statistics.reportedWhileQueued == 1)
    }

    /// The wall clock stepped forward an hour while a call waited, at a gateway on the system clock: its maximum wait
    /// and its wait report move forward with it, so it still waits its 5 s (it was denied at once, "waited 3,601 s").
    @Test func aClockSteppedForwardMovesTheQueuesInstantsWithIt() throws {
        let collector = EventCollector()
        let steady = SteadySeconds()
        let enforcer = Enforcer(
            configuration: GatewayConfiguration(gatewayID: "gw-1"), telemetry: collector, wakeHandler: nil,
            monotonic: { steady.value }, detectsStepsForward: true)
        enforcer.apply(.make(expiresAt: 1e10, tenants: [TenantEntry.make(maxConcurrency: 1)]), now: 5_000)
        let log = try queueTwoBehindAHeldPermit(enforcer)
        // One second later the clock reads an hour ahead.
        steady.value = 1
        enforcer.pump(now: 8_601)
        #expect(enforcer.statistics.clockStepsForward == 1)
        #expect(log.labels.isEmpty)
        #expect(enforcer.nextWakeTime == 8_605)
        steady.value = 5
        enforcer.pump(now: 8_605)
        try expectFiveSecondsWaited(log: log, collector: collector, arrival: 8_600)
    }

    /// Takes the one permit (`max_concurrency` 1) at 5,000 and queues an interactive call (5 s maximum wait) and a
    /// background one behind it.
    func queueTwoBehindAHeldPermit(_ enforcer: Enforcer) throws -> DecisionLog {
        let log = DecisionLog()
        _ = try enforcer.mustAdmit(now: 5_000)
        #expect(submit(enforcer, .make(), now: 5_000, log: log, label: "interactive") == .queued(2))
        #expect(submit(enforcer, .make(taskClass: .background), now: 5_000, log: log, label: "bg") == .queued(3))
        return log
    }

    /// The interactive call was denied having waited its 5 s, and the background one reported waiting 5 s since
    /// `arrival` (its arrival as the step moved it).
    func expectFiveSecondsWaited(
        log: DecisionLog, collector: EventCollector, arrival: Double, sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let denial = try #require(log.admission("interactive")?.denial, sourceLocation: sourceLocation)
        #expect(denial.code == "max_wait_exceeded", sourceLocation: sourceLocation)
        #expect(denial.waited == 5, sourceLocation: sourceLocation)
        let queued = try #require(collector.telemetry.last { $0.outcome == .queued }, sourceLocation: sourceLocation)
        #expect(queued.ts == arrival, sourceLocation: sourceLocation)
        #expect(queued.queueWait == 5, sourceLocation: sourceLocation)
    }

    /// A burst that arrived together and expires head after head in one pump is told staggered turns: the first its
    /// refill, each next one a call's refill later (round 32: fifteen calls were all told 0.99 s and came back
    /// together).
    @Test func aBurstThatExpiresTogetherIsToldStaggeredTurns() throws {
        let enforcer = Enforcer.make(
            .make(expiresAt: 1e10, tenants: [Self.oneRPS]), configuration: GatewayConfiguration(gatewayID: "gw-1"))
        let log = DecisionLog()
        _ = try enforcer.mustAdmit(now: 1_000)
        for index in 0..<10 { submit(enforcer, .make(), now: 1_000, log: log, label: "c\(index)") }
        for second in 1...5 { enforcer.pump(now: 1_000 + Double(second)) }
        #expect(log.labels.prefix(5) == ["c0", "c1", "c2", "c3", "c4"])
        #expect(log.decisions.prefix(5).allSatisfy { $0.1.ticket != nil })
        let denials = log.decisions.dropFirst(5).compactMap { $0.1.denial }
        #expect(denials.map(\.code) == Array(repeating: "max_wait_exceeded", count: 5))
        #expect(denials.map(\.retryAfter) == [1, 2, 3, 4, 5])
    }

    @Test func aWaitLongerThanTheMaximumIsDeniedAtOnce() throws {
        // One request per 10 s; interactive may wait 5 s: waiting could only end in a denial.
        let slow = TenantEntry.make(rpm: Bucket(rate: 6, burst: 1))
        let enforcer = Enforcer.make(.make(tenants: [slow]))
        let log = DecisionLog()
        _ = try enforcer.mustAdmit(now: 1_000)
        let submission = submit(enforcer, .make(), now: 1_001, log: log, label: "x")
        guard case .decided(.denied(let denial)) = submission else {
            Issue.record("expected an immediate denial, got \(submission)")
            return
        }
        #expect(denial.limit == .rpm)
        #expect(denial.code == "rate_limited")
        #expect(denial.retryAfter == 9)
        #expect(denial.waited == 0)
        #expect(denial.message.hasSuffix("retry in 9 s; beyond the 5 s maximum wait of interactive requests"))
        // A background request (300 s) waits instead, and gets in after the refill.
        guard case .queued = submit(enforcer, .make(taskClass: .background), now: 1_001, log: log, label: "bg") else {
            Issue.record("background was not queued")
            return
        }
        // Five seconds in, it is reported as waiting (``GatewayConfiguration/queuedReportAfter``); then the refill.
        #expect(enforcer.nextWakeTime == 1_006)
        enforcer.pump(now: 1_006)
        #expect(enforcer.statistics.reportedWhileQueued == 1)
        #expect(enforcer.nextWakeTime == 1_010)
        enforcer.pump(now: 1_010)
        #expect(log.admission("bg")?.ticket?.waited == 9)
    }

    @Test func realtimeIsNeverQueuedPastItsShortMaximum() throws {
        let enforcer = Enforcer.make(.make(tenants: [Self.oneRPS]))  // realtime: 0.5 s
        let log = DecisionLog()
        _ = try enforcer.mustAdmit(now: 1_000)
        guard
            case .decided(.denied(let denial)) = submit(
                enforcer, .make(taskClass: .realtime), now: 1_000, log: log, label: "rt")
        else {
            Issue.record("expected a denial")
            return
        }
        #expect(denial.retryAfter == 1)
        guard case .queued = submit(enforcer, .make(taskClass: .realtime), now: 1_000.6, log: log, label: "rt2") else {
            Issue.record("expected the second realtime request to wait 0.4 s")
            return
        }
        enforcer.pump(now: 1_001)
        #expect(log.admission("rt2")?.ticket != nil)
    }

    @Test func aFullQueueDeniesWaitableRequests() throws {
        let enforcer = Enforcer.make(
            .make(tenants: [Self.oneRPS]),
            configuration: GatewayConfiguration(gatewayID: "gw-1", maxWait: PerTaskClass(all: 10), maxQueueLength: 1))
        let log = DecisionLog()
        _ = try enforcer.mustAdmit(now: 1_000)
        #expect(submit(enforcer, .make(), now: 1_000, log: log, label: "a") == .queued(2))
        guard
            case .decided(.denied(let denial)) = submit(
                enforcer, .make(), now: 1_000, log: log, label: "b")
        else {
            Issue.record("expected queue_full")
            return
        }
        #expect(denial.code == "queue_full")
        #expect(denial.limit == .rpm)
        // A request of the same tenant that ranks higher takes the place of its lowest-ranked waiter rather than
        // being denied (TaskAwareQueueTests has the rule in full); another tenant's request is still denied.
        #expect(submit(enforcer, .make(taskClass: .realtime), now: 1_000, log: log, label: "c") == .queued(3))
        #expect(log.admission("a")?.denial?.code == "queue_full")
        for _ in 0..<2 { _ = try enforcer.mustAdmit(.make("globex"), now: 1_000) }  // its default burst
        guard
            case .decided(.denied(let other)) = submit(
                enforcer, .make("globex", taskClass: .realtime), now: 1_000, log: log, label: "d")
        else {
            Issue.record("expected queue_full")
            return
        }
        #expect(other.code == "queue_full")
    }

    @Test func aRequestWaitingFiveSecondsIsReportedQueuedOnceAndItsAttemptAsARetry() throws {
        let collector = EventCollector()
        // A request every 10 s; the default configuration: batch requests wait up to 60 s, reported after 5.
        let slow = TenantEntry.make(rpm: Bucket(rate: 6, burst: 1))
        let enforcer = Enforcer.make(.make(tenants: [slow]), collector: collector)
        let log = DecisionLog()
        _ = try enforcer.mustAdmit(now: 1_000)
        submit(enforcer, .make(taskClass: .batch, taskID: "t-1"), now: 1_001, log: log, label: "first")
        guard case .queued(let second) = submit(enforcer, .make(taskClass: .batch), now: 1_003, log: log, label: "2")
        else {
            Issue.record("not queued")
            return
        }
        #expect(collector.telemetry.filter { $0.outcome == .queued }.isEmpty)
        #expect(enforcer.nextWakeTime == 1_006)
        enforcer.pump(now: 1_006)
        var queued = collector.telemetry.filter { $0.outcome == .queued }
        #expect(queued.count == 1)
        // Stamped with its arrival, its wait so far, its own attempt number and the limit it waits on.
        #expect(queued.first?.ts == 1_001)
        #expect(queued.first?.queueWait == 5)
        #expect(queued.first?.retry == 0)
        #expect(queued.first?.errorType == "rpm")
        #expect(queued.first?.taskID == "t-1")
        #expect(enforcer.nextWakeTime == 1_008)  // the second one's report
        enforcer.pump(now: 1_008)
        queued = collector.telemetry.filter { $0.outcome == .queued }
        #expect(queued.map(\.ts) == [1_001, 1_003])
        enforcer.pump(now: 1_009)
        #expect(collector.telemetry.filter { $0.outcome == .queued }.count == 2)  // each once
        enforcer.pump(now: 1_010)
        let ticket = try #require(log.admission("first")?.ticket)
        #expect(ticket.waited == 9)
        enforcer.complete(ticket, AttemptResult(status: 200, promptTokens: 50, completionTokens: 50), now: 1_011)
        // Its attempt is its second report: Allot counts the request once, at the first.
        let attempt = try #require(collector.telemetry.last)
        #expect(attempt.outcome == .ok)
        #expect(attempt.retry == 1)
        #expect(attempt.queueWait == 9)
        // A reported waiter whose caller gives up is not reported again.
        let before = collector.telemetry.count
        #expect(enforcer.cancel(second, now: 1_012))
        #expect(collector.telemetry.count == before)
        #expect(enforcer.statistics.reportedWhileQueued == 2)
        #expect(enforcer.statistics.cancelledWhileQueued == 1)
    }

    @Test func anInteractiveRequestIsDeniedBeforeItWouldBeReportedAndAShortWaitIsNotReported() throws {
        let collector = EventCollector()
        let enforcer = Enforcer.make(.make(tenants: [Self.oneRPS]), collector: collector)
        let log = DecisionLog()
        _ = try enforcer.mustAdmit(now: 1_000)
        // Interactive: at most 5 s in the queue, so never reported as waiting; batch admitted within a second.
        submit(enforcer, .make(taskClass: .interactive), now: 1_000, log: log, label: "interactive")
        submit(enforcer, .make(taskClass: .batch), now: 1_000, log: log, label: "batch")
        for second in 1...6 { enforcer.pump(now: 1_000 + Double(second)) }
        #expect(log.labels == ["interactive", "batch"])
        #expect(collector.telemetry.filter { $0.outcome == .queued }.isEmpty)
        #expect(enforcer.statistics.reportedWhileQueued == 0)
        #expect(enforcer.nextWakeTime == 1_300)  // only the lease end is left
    }

    @Test func aCancelledWaiterIsReportedAsQueued() throws {
        let collector = EventCollector()
        let enforcer = Enforcer.make(.make(tenants: [Self.oneRPS]), collector: collector, configuration: Self.patient)
        let log = DecisionLog()
        _ = try enforcer.mustAdmit(now: 1_000)
        guard case .queued(let id) = submit(enforcer, .make(taskClass: .batch), now: 1_000, log: log, label: "a")
        else {
            Issue.record("not queued")
            return
        }
        submit(enforcer, .make(taskClass: .batch), now: 1_000, log: log, label: "b")
        #expect(enforcer.cancel(id, now: 1_000.5))
        #expect(!enforcer.cancel(id, now: 1_000.5))
        #expect(log.admission("a")?.denial?.code == "cancelled")
        #expect(collector.telemetry.last?.outcome == .queued)
        #expect(collector.telemetry.last?.queueWait == 0.5)
        #expect(enforcer.statistics.cancelledWhileQueued == 1)
        enforcer.pump(now: 1_001)
        #expect(log.labels == ["a", "b"])
        #expect(log.admission("b")?.ticket != nil)
    }

    @Test func aWakeBeforeAnyRefillIsDueDecidesOnlyTheExpiredWaiters() throws {
        // Twenty tenants and "x" at one request per second, each with a waiting head due at 1001 (nobody
        // borrows); behind x's head, a batch call that may wait only half a second.
        let tenants = (0..<20).map { TenantEntry.make("t\($0)", rpm: Bucket(rate: 60, burst: 1)) }
        let enforcer = Enforcer.make(
            .make(tenants: tenants + [TenantEntry.make("x", rpm: Bucket(rate: 60, burst: 1))]),
            configuration: GatewayConfiguration(
                gatewayID: "gw-1", maxWait: PerTaskClass(realtime: 10, interactive: 10, batch: 0.5, background: 10),
                borrowIdle: false))
        let log = DecisionLog()
        for tenant in ["x"] + tenants.map(\.id) {
            _ = try enforcer.mustAdmit(.make(tenant), now: 1_000)
            submit(enforcer, .make(tenant), now: 1_000, log: log, label: tenant)
        }
        submit(enforcer, .make("x", taskClass: .batch), now: 1_000, log: log, label: "x-batch")
        #expect(enforcer.nextWakeTime == 1_000.5)
        enforcer.pump(now: 1_000.5)
        // Only the expired waiter was looked at; the heads keep waiting for 1001.
        #expect(enforcer.statistics.pumpVisits == 1)
        #expect(log.labels == ["x-batch"])
        let denial = try #require(log.admission("x-batch")?.denial)
        #expect(denial.code == "max_wait_exceeded")
        #expect(denial.limit == .rpm)
        #expect(
            denial.message
                == "waited the 0.5 s maximum of batch requests; requests of tenant x on \(Snapshot.defaultUpstream) "
                + "are queued ahead (rpm)")
        #expect(enforcer.nextWakeTime == 1_001)
        enforcer.pump(now: 1_001)
        #expect(enforcer.statistics.pumpVisits == 22)
        #expect(Set(log.labels) == Set(["x-batch", "x"] + tenants.map(\.id)))
        #expect(log.labels.count == 22)
        #expect(log.decisions.dropFirst().allSatisfy { $0.1.ticket?.waited == 1 })
        #expect(enforcer.status(now: 1_001).queueLength == 0)
    }

    @Test func aWakeLooksOnlyAtTheLanesWhoseRefillIsDue() throws {
        // "soon" refills a request every second, "late" every ten; nobody borrows.
        let enforcer = Enforcer.make(
            .make(tenants: [
                TenantEntry.make("soon", rpm: Bucket(rate: 60, burst: 1)),
                TenantEntry.make("late", rpm: Bucket(rate: 6, burst: 1)),
            ]),
            // No report of long waits (``GatewayConfiguration/queuedReportAfter``): its wake is not a refill's.
            configuration: GatewayConfiguration(
                gatewayID: "gw-1", maxWait: PerTaskClass(all: 20), queuedReportAfter: .infinity, borrowIdle: false))
        let log = DecisionLog()
        for tenant in ["soon", "late"] {
            _ = try enforcer.mustAdmit(.make(tenant), now: 1_000)
            submit(enforcer, .make(tenant), now: 1_000, log: log, label: tenant)
        }
        #expect(enforcer.nextWakeTime == 1_001)
        enforcer.pump(now: 1_001)
        #expect(log.labels == ["soon"])
        #expect(enforcer.statistics.pumpVisits == 1)  // "late" is not due until 1010
        submit(enforcer, .make("soon"), now: 1_001, log: log, label: "soon-2")
        enforcer.pump(now: 1_002)
        #expect(log.labels == ["soon", "soon-2"])
        #expect(enforcer.statistics.pumpVisits == 2)
        #expect(approx(enforcer.nextWakeTime, 1_010))
        enforcer.pump(now: try #require(enforcer.nextWakeTime))
        #expect(log.labels == ["soon", "soon-2", "late"])
        #expect(enforcer.statistics.pumpVisits == 3)
    }

    @Test func aCompletionLooksAtTheLanesOfItsUpstreamOnly() throws {
        // acme on u1: 10 tokens per second, burst 100; globex on u2: one request per 10 s; nobody borrows.
        let enforcer = Enforcer.make(
            .make(tenants: [
                TenantEntry.make("acme", upstream: "u1", tpm: Bucket(rate: 600, burst: 100)),
                TenantEntry.make("globex", upstream: "u2", rpm: Bucket(rate: 6, burst: 1)),
            ]),
            configuration: GatewayConfiguration(gatewayID: "gw-1", maxWait: PerTaskClass(all: 20), borrowIdle: false))
        let log = DecisionLog()
        let running = try enforcer.mustAdmit(.make("acme", upstream: "u1", tokens: 100), now: 1_000)
        submit(enforcer, .make("acme", upstream: "u1", tokens: 50), now: 1_000, log: log, label: "acme")  // 1005
        _ = try enforcer.mustAdmit(.make("globex", upstream: "u2"), now: 1_000)
        submit(enforcer, .make("globex", upstream: "u2"), now: 1_000, log: log, label: "globex")  // 1010
        // It used 10 of its 100 tokens: the refund lets acme's waiter in at once.
        enforcer.complete(running, AttemptResult(status: 200, promptTokens: 5, completionTokens: 5), now: 1_000.5)
        #expect(log.labels == ["acme"])
        #expect(log.admission("acme")?.ticket?.waited == 0.5)
        #expect(enforcer.statistics.pumpVisits == 1)  // globex's lane, on u2, was not looked at
        enforcer.pump(now: 1_010)
        #expect(log.labels == ["acme", "globex"])
    }

    @Test(arguments: [(capWindow: 0.0, used: 100, visits: 1), (capWindow: 10, used: 100, visits: 1),
                      (capWindow: 0, used: 10, visits: 1), (capWindow: 10, used: 10, visits: 2)])
    func aCompletionLooksAtOtherTenantsLanesOnlyWhenItFreesRoomTheyShare(
        capWindow: Double, used: Int, visits: Int
    ) throws {
        // acme and globex on one upstream; nobody borrows. acme's 100-token call completes at 1000.5 having used
        // `used` tokens: a refund is acme's own (its waiter's) and, with the gateway's cap on, room in the cap,
        // which globex's head draws on too; using what it reserved frees nothing but acme's permit.
        let enforcer = Enforcer.make(
            .make(tenants: [
                TenantEntry.make("acme", upstream: "u1", tpm: Bucket(rate: 600, burst: 100)),
                TenantEntry.make("globex", upstream: "u1", rpm: Bucket(rate: 6, burst: 1)),
            ]),
            configuration: GatewayConfiguration(
                gatewayID: "gw-1", maxWait: PerTaskClass(all: 20), borrowIdle: false, capWindow: capWindow))
        let log = DecisionLog()
        let running = try enforcer.mustAdmit(.make("acme", upstream: "u1", tokens: 100), now: 1_000)
        submit(enforcer, .make("acme", upstream: "u1", tokens: 50), now: 1_000, log: log, label: "acme")  // 1005
        _ = try enforcer.mustAdmit(.make("globex", upstream: "u1"), now: 1_000)
        submit(enforcer, .make("globex", upstream: "u1"), now: 1_000, log: log, label: "globex")  // 1010
        let before = enforcer.statistics.pumpVisits
        enforcer.complete(
            running, AttemptResult(status: 200, promptTokens: used / 2, completionTokens: used - used / 2),
            now: 1_000.5)
        #expect(enforcer.statistics.pumpVisits - before == visits)
        #expect(log.labels == (used < 100 ? ["acme"] : []))
        enforcer.pump(now: 1_010)
        #expect(Set(log.labels) == ["acme", "globex"])
    }

    @Test func anExpiredHeadIsDecidedAfreshAndTheNextWaiterOfItsLaneGetsItsTurn() throws {
        // acme: 10 tokens per second, burst 100; y: one request per 10 s; nobody borrows. Batch calls may wait
        // 5 s.
        let acme = TenantEntry.make(rpm: Bucket(rate: 6_000, burst: 100), tpm: Bucket(rate: 600, burst: 100))
        let enforcer = Enforcer.make(
            .make(tenants: [acme, TenantEntry.make("y", rpm: Bucket(rate: 6, burst: 1))]),
            configuration: GatewayConfiguration(
                gatewayID: "gw-1", maxWait: PerTaskClass(realtime: 20, interactive: 20, batch: 5, background: 20),
                borrowIdle: false))
        let log = DecisionLog()
        _ = try enforcer.mustAdmit(.make(tokens: 100), now: 1_000)
        _ = try enforcer.mustAdmit(.make("y"), now: 1_000)
        submit(enforcer, .make("y"), now: 1_000, log: log, label: "y")
        submit(enforcer, .make(tokens: 10), now: 1_000, log: log, label: "first")
        submit(enforcer, .make(taskClass: .batch, tokens: 90), now: 1_000, log: log, label: "large")
        enforcer.pump(now: 1_001)  // "first" goes; "large" is now acme's head, due at 1010, past its 1005
        #expect(log.labels == ["first"])
        let visits = enforcer.statistics.pumpVisits
        submit(enforcer, .make(taskClass: .batch, tokens: 20), now: 1_002, log: log, label: "small")
        #expect(enforcer.nextWakeTime == 1_005)
        enforcer.pump(now: 1_005)
        // "large" was evaluated at 1005 (retry after 5 s, not the 9 s of 1001); "small" then fits in the 40
        // tokens refilled since 1001. y's head was not looked at.
        let large = try #require(log.admission("large")?.denial)
        #expect(large.code == "max_wait_exceeded")
        #expect(large.limit == .tpm)
        #expect(approx(large.retryAfter, 5))
        #expect(log.admission("small")?.ticket?.waited == 3)
        #expect(log.labels == ["first", "large", "small"])
        #expect(enforcer.statistics.pumpVisits == visits + 2)
        #expect(approx(enforcer.nextWakeTime, 1_010))
    }

    @Test func completionAdmitsTheNextWaiterAtOnce() throws {
        let enforcer = Enforcer.make(.make(tenants: [TenantEntry.make(maxConcurrency: 1)]))
        let log = DecisionLog()
        let first = try enforcer.mustAdmit(now: 1_000)
        submit(enforcer, .make(), now: 1_000, log: log, label: "next")
        enforcer.complete(first, AttemptResult(status: 200, promptTokens: 10, completionTokens: 90), now: 1_000.3)
        let ticket = try #require(log.admission("next")?.ticket)
        #expect(approx(ticket.waited, 0.3))
        #expect(ticket.admittedAt == 1_000.3)
    }

    @Test func aSnapshotThatRaisesLimitsAdmitsWaitersAndOneThatDeniesEndsTheirWait() throws {
        let enforcer = Enforcer.make(.make(tenants: [Self.oneRPS]), configuration: Self.patient)
        let log = DecisionLog()
        _ = try enforcer.mustAdmit(now: 1_000)
        submit(enforcer, .make(), now: 1_000, log: log, label: "a")
        submit(enforcer, .make(), now: 1_000, log: log, label: "b")
        // The raise takes effect from its instant: no refill, but a faster rate (10/s).
        let faster = TenantEntry.make(rpm: Bucket(rate: 600, burst: 5))
        enforcer.apply(.make(version: 2, tenants: [faster]), now: 1_000)
        #expect(enforcer.nextWakeTime.map { approx($0, 1_000.1) } == true)
        enforcer.pump(now: 1_000.2)
        #expect(log.labels == ["a", "b"])
        submit(enforcer, .make(), now: 1_000.2, log: log, label: "c")
        submit(enforcer, .make(), now: 1_000.2, log: log, label: "d")
        enforcer.apply(.make(version: 3, tenants: [TenantEntry.make(deny: "budget_exhausted")]), now: 1_000.2)
        #expect(log.admission("c")?.denial?.limit == .budget)
        #expect(log.admission("d")?.denial?.code == "budget_exhausted")
    }

    @Test func requestsWaitForTheFirstSnapshot() throws {
        let enforcer = Enforcer.make(configuration: Self.patient)
        let log = DecisionLog()
        guard case .queued = submit(enforcer, .make(), now: 1_000, log: log, label: "early") else {
            Issue.record("not queued")
            return
        }
        enforcer.apply(.make(tenants: [Self.oneRPS]), now: 1_002)
        #expect(log.admission("early")?.ticket?.waited == 2)
        #expect(log.admission("early")?.ticket?.snapshotVersion == 1)
    }

    @Test func queueWeightSharesAGatewayCapacityAcrossTenants() throws {
        let heavy = TenantEntry.make("heavy", queueWeight: 4)
        let light = TenantEntry.make("light", queueWeight: 1)
        let enforcer = Enforcer.make(
            .make(tenants: [heavy, light]),
            configuration: GatewayConfiguration(
                gatewayID: "gw-1", maxWait: PerTaskClass(all: 60), maxInFlightPerUpstream: 1))
        let log = DecisionLog()
        var current = try enforcer.mustAdmit(.make("heavy"), now: 1_000)
        for index in 0..<10 {
            submit(enforcer, .make("heavy"), now: 1_000, log: log, label: "heavy-\(index)")
            submit(enforcer, .make("light"), now: 1_000, log: log, label: "light-\(index)")
        }
        #expect(try enforcer.mustDeny(.make("other"), now: 1_000).code == "gateway_concurrency_limited")
        var now = 1_000.0
        for _ in 0..<10 {
            now += 0.1
            enforcer.complete(current, AttemptResult(status: 200, promptTokens: 50, completionTokens: 50), now: now)
            current = try #require(log.decisions.last?.1.ticket)
        }
        let served = log.labels.map { $0.hasPrefix("heavy") ? "H" : "L" }.joined()
        #expect(served == "HHHLHHHHLH")  // 4:1 by weight, with ties going to the earlier arrival
        // A realtime request of the light tenant goes before every waiting interactive one.
        submit(enforcer, .make("light", taskClass: .realtime), now: now, log: log, label: "light-rt")
        enforcer.complete(current, AttemptResult(status: 200), now: now + 0.1)
        #expect(log.labels.last == "light-rt")
    }
}

/// A steady clock a test sets by hand (the seconds an ``Enforcer`` reads as its monotonic time).
final class SteadySeconds: @unchecked Sendable {
    private let lock = NSLock()
    private var seconds = 0.0

    var value: Double {
        get { lock.withLock { seconds } }
        set { lock.withLock { seconds = newValue } }
    }
}
