import AllotProtocol
import AllotSignals
import Testing

@testable import AllotEnforcement

/// Task-aware admission: within one (tenant, upstream) and task class the calls of tasks that started earlier
/// go first, calls of late tasks go last (or are denied), a full queue displaces the newest task's call, and the
/// tenant's turns across tenants do not change. Driven synchronously on virtual time, as a simulator drives it.
@Suite struct TaskAwareQueueTests {
    static let patient = GatewayConfiguration(gatewayID: "gw-1", maxWait: PerTaskClass(all: 60))

    /// One request per second, burst 1.
    static let oneRPS = TenantEntry.make(rpm: Bucket(rate: 60, burst: 1), tpm: Bucket(rate: 600_000, burst: 100_000))

    static func call(
        _ tenant: String = "acme", taskClass: TaskClass = .interactive, tokens: Int = 100, started: Double? = nil,
        deadline: Double? = nil, taskID: String? = nil
    ) -> AdmissionRequest {
        AdmissionRequest(
            tenant: tenant, upstream: Snapshot.defaultUpstream, taskClass: taskClass, estimatedTokens: tokens,
            taskID: taskID, taskStartedAt: started, taskDeadline: deadline)
    }

    /// Queues `request` or fails the test.
    func queue(
        _ enforcer: Enforcer, _ request: AdmissionRequest, now: Double, log: DecisionLog, label: String,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let submission = enforcer.submit(request, now: now, onDecision: log.callback(label))
        guard case .queued = submission else {
            Issue.record("\(label) was not queued: \(submission)", sourceLocation: sourceLocation)
            return
        }
    }

    /// An enforcer whose only tenant, `acme`, has just spent its one request per second.
    func spentOneRPS(configuration: GatewayConfiguration = Self.patient) throws -> Enforcer {
        let enforcer = Enforcer.make(.make(tenants: [Self.oneRPS]), configuration: configuration)
        _ = try enforcer.mustAdmit(now: 1_000)
        return enforcer
    }

    // MARK: Order

    @Test func callsOfTasksThatStartedEarlierGoFirstWithinTheirClass() throws {
        let enforcer = try spentOneRPS()
        let log = DecisionLog()
        queue(enforcer, Self.call(started: 900), now: 1_000, log: log, label: "t900")
        queue(enforcer, Self.call(taskClass: .batch, started: 100), now: 1_000, log: log, label: "batch-t100")
        queue(enforcer, Self.call(started: 800), now: 1_000, log: log, label: "t800")
        queue(enforcer, Self.call(), now: 1_000, log: log, label: "no-context")  // a task starting now
        queue(enforcer, Self.call(started: 950), now: 1_000, log: log, label: "t950")
        queue(enforcer, Self.call(taskClass: .realtime), now: 1_000, log: log, label: "realtime")
        for second in 1...6 { enforcer.pump(now: 1_000 + Double(second)) }
        // Class first (realtime; batch last however old its task), then the task's start within the class.
        #expect(log.labels == ["realtime", "t800", "t900", "t950", "no-context", "batch-t100"])
        #expect(log.decisions.map { $0.1.ticket?.waited } == [1, 2, 3, 4, 5, 6])
    }

    @Test func callsWithoutTaskContextKeepArrivalOrderAndCountAsTasksStartingOnArrival() throws {
        let enforcer = try spentOneRPS()
        let log = DecisionLog()
        queue(enforcer, Self.call(), now: 1_000, log: log, label: "n1")
        queue(enforcer, Self.call(), now: 1_000.2, log: log, label: "n2")
        // Started before n1 arrived: ahead of both.
        queue(enforcer, Self.call(started: 999.9), now: 1_000.3, log: log, label: "t999.9")
        // Started between n1's and n2's arrival: between them.
        queue(enforcer, Self.call(started: 1_000.1), now: 1_000.4, log: log, label: "t1000.1")
        // A start in the future counts as the arrival (1000.5): after n2.
        queue(enforcer, Self.call(started: 2_000), now: 1_000.5, log: log, label: "future")
        queue(enforcer, Self.call(), now: 1_000.6, log: log, label: "n3")
        // Not a number: no task context.
        queue(enforcer, Self.call(started: .nan), now: 1_000.7, log: log, label: "nan")
        for second in 1...7 { enforcer.pump(now: 1_000 + Double(second)) }
        #expect(log.labels == ["t999.9", "n1", "t1000.1", "n2", "future", "n3", "nan"])
    }

    @Test func callsOfOneTaskKeepArrivalOrder() throws {
        let enforcer = try spentOneRPS()
        let log = DecisionLog()
        for index in 0..<3 {
            queue(enforcer, Self.call(started: 900, taskID: "t"), now: 1_000, log: log, label: "t-\(index)")
        }
        queue(enforcer, Self.call(started: 800), now: 1_000.5, log: log, label: "older")
        for index in 3..<5 {
            queue(enforcer, Self.call(started: 900, taskID: "t"), now: 1_000.5, log: log, label: "t-\(index)")
        }
        for second in 1...6 { enforcer.pump(now: 1_000 + Double(second)) }
        #expect(log.labels == ["older", "t-0", "t-1", "t-2", "t-3", "t-4"])
    }

    @Test func anArrivalOfAnOlderTaskIsTriedAtOnceAndANewerOneWaitsBehind() throws {
        // 10 tokens per second, burst 100: a large call waits for its tokens.
        let entry = TenantEntry.make(rpm: Bucket(rate: 6_000, burst: 100), tpm: Bucket(rate: 600, burst: 100))
        let enforcer = Enforcer.make(.make(tenants: [entry]), configuration: Self.patient)
        let log = DecisionLog()
        _ = try enforcer.mustAdmit(.make(tokens: 100), now: 1_000)
        queue(enforcer, Self.call(tokens: 80, started: 900), now: 1_000, log: log, label: "large")
        // At 1001 there are 10 tokens. A call of a newer task (or of the same one) must not take them ...
        let newer = try enforcer.mustDeny(Self.call(tokens: 5, started: 950), now: 1_001)
        #expect(newer.message.contains("queued ahead"))
        let sameTask = try enforcer.mustDeny(Self.call(tokens: 5, started: 900), now: 1_001)
        #expect(sameTask.message.contains("queued ahead"))
        let noContext = try enforcer.mustDeny(Self.call(tokens: 5), now: 1_001)
        #expect(noContext.message.contains("queued ahead"))
        // ... but one of an older task goes first, like a call of a higher class.
        let older = try enforcer.mustAdmit(Self.call(tokens: 5, started: 800), now: 1_001)
        #expect(older.waited == 0)
        // An older task's call that does not fit waits ahead of the large one: 5 tokens left, 30 by 1003.5.
        queue(enforcer, Self.call(tokens: 30, started: 700), now: 1_001, log: log, label: "oldest")
        #expect(enforcer.nextWakeTime.map { approx($0, 1_003.5) } == true)
        enforcer.pump(now: 1_003.4)
        #expect(log.labels.isEmpty)
        enforcer.pump(now: 1_003.5)
        #expect(log.labels == ["oldest"])
        // Then the large call: 80 tokens from 0 at 10 per second.
        enforcer.pump(now: 1_011.4)
        #expect(log.labels == ["oldest"])
        enforcer.pump(now: 1_011.5)
        #expect(log.labels == ["oldest", "large"])
    }

    @Test func theNewestTasksCallsAreTheOnesThatWaitTooLong() throws {
        // One request per second, 3 s maximum wait: of five calls queued at once, three can be served.
        let configuration = GatewayConfiguration(gatewayID: "gw-1", maxWait: PerTaskClass(all: 3))
        let enforcer = try spentOneRPS(configuration: configuration)
        let log = DecisionLog()
        for started in [950.0, 910, 990, 900, 930] {
            queue(enforcer, Self.call(started: started), now: 1_000, log: log, label: "t\(Int(started))")
        }
        enforcer.pump(now: 1_001)
        enforcer.pump(now: 1_002)
        enforcer.pump(now: 1_003)
        let admitted = log.decisions.filter { $0.1.ticket != nil }.map(\.0)
        let denied = log.decisions.filter { $0.1.denial != nil }.map(\.0)
        #expect(admitted == ["t900", "t910", "t930"])
        #expect(denied == ["t950", "t990"])
        #expect(log.decisions.compactMap { $0.1.denial?.code } == ["max_wait_exceeded", "max_wait_exceeded"])
        #expect(enforcer.status(now: 1_003).queueLength == 0)
    }

    // MARK: A full queue

    @Test func aFullQueueDisplacesTheNewestTaskOfTheSameTenantNotTheArrival() throws {
        let configuration = GatewayConfiguration(
            gatewayID: "gw-1", maxWait: PerTaskClass(all: 60), maxQueueLength: 3)
        let collector = EventCollector()
        let others = ["globex", "initech"].map { TenantEntry.make($0, rpm: Bucket(rate: 60, burst: 1)) }
        let enforcer = Enforcer.make(
            .make(tenants: [Self.oneRPS] + others), collector: collector, configuration: configuration)
        let log = DecisionLog()
        for tenant in ["acme", "globex", "initech"] { _ = try enforcer.mustAdmit(.make(tenant), now: 1_000) }
        queue(enforcer, Self.call(started: 990), now: 1_000, log: log, label: "t990")
        queue(enforcer, Self.call(started: 995), now: 1_000, log: log, label: "t995")
        queue(enforcer, Self.call("globex", started: 1), now: 1_000, log: log, label: "globex-t1")
        // Full. A call of an older task takes the place of acme's newest.
        queue(enforcer, Self.call(started: 900), now: 1_000.5, log: log, label: "t900")
        let displaced = try #require(log.admission("t995")?.denial)
        #expect(displaced.code == "queue_full")
        #expect(displaced.limit == .rpm)
        #expect(approx(displaced.waited, 0.5))
        #expect(
            displaced.message.hasPrefix(
                "the admission queue is full (3 requests) and a call of tenant acme that ranks ahead"))
        #expect(collector.telemetry.last?.outcome == .deniedLocal)
        #expect(enforcer.statistics.displaced == 1)
        // A call that ranks behind acme's last waiter is denied itself, as is one with nothing to displace:
        // another tenant's waiters are never displaced, however new their tasks.
        func submitted(_ request: AdmissionRequest) -> String? {
            guard case .decided(.denied(let denial)) = enforcer.submit(request, now: 1_000.5, onDecision: { _ in })
            else { return nil }
            return denial.code
        }
        #expect(submitted(Self.call(started: 999)) == "queue_full")
        #expect(submitted(Self.call(started: 990)) == "queue_full")
        #expect(submitted(Self.call("initech", started: 0)) == "queue_full")
        #expect(enforcer.status(now: 1_000.5).queueLength == 3)
        for second in 1...2 { enforcer.pump(now: 1_000 + Double(second)) }
        // t900 took t995's turn in acme's schedule: acme's first turn still comes before globex's.
        #expect(log.labels == ["t995", "t900", "globex-t1", "t990"])
        #expect(enforcer.statistics.displaced == 1)
    }

    @Test func aFullQueueDisplacesALowerClassOfTheSameTenant() throws {
        let configuration = GatewayConfiguration(
            gatewayID: "gw-1", maxWait: PerTaskClass(all: 60), maxQueueLength: 2)
        let enforcer = try spentOneRPS(configuration: configuration)
        let log = DecisionLog()
        queue(enforcer, Self.call(started: 990), now: 1_000, log: log, label: "interactive")
        queue(enforcer, Self.call(taskClass: .batch, started: 1), now: 1_000, log: log, label: "batch")
        queue(enforcer, Self.call(started: 995), now: 1_000, log: log, label: "newer-interactive")
        #expect(log.admission("batch")?.denial?.code == "queue_full")
        enforcer.pump(now: 1_001)
        enforcer.pump(now: 1_002)
        #expect(log.labels == ["batch", "interactive", "newer-interactive"])
    }

    // MARK: Deadlines

    @Test func aCallOfALateTaskRanksBehindEveryCallThatCanStillMakeItsDeadline() throws {
        let enforcer = try spentOneRPS()
        let log = DecisionLog()
        queue(enforcer, Self.call(started: 800, deadline: 999), now: 1_000, log: log, label: "late-t800")
        queue(enforcer, Self.call(started: 700, deadline: 1_000), now: 1_000, log: log, label: "late-t700")
        queue(enforcer, Self.call(started: 900, deadline: 2_000), now: 1_000, log: log, label: "live-t900")
        queue(enforcer, Self.call(), now: 1_000, log: log, label: "no-context")
        queue(enforcer, Self.call(started: 950, deadline: .infinity), now: 1_000, log: log, label: "no-deadline")
        for second in 1...5 { enforcer.pump(now: 1_000 + Double(second)) }
        // Late ones last, the older task first among them; a deadline that is not a number never passes.
        #expect(log.labels == ["live-t900", "no-deadline", "no-context", "late-t700", "late-t800"])
        #expect(log.decisions.allSatisfy { $0.1.ticket != nil })
        #expect(enforcer.statistics.lateCalls == 2)
    }

    @Test func aLateArrivalIsAdmittedWhenNothingTimelyWaitsAndItFits() throws {
        let enforcer = Enforcer.make(.make(tenants: [Self.oneRPS]), configuration: Self.patient)
        let ticket = try enforcer.mustAdmit(Self.call(started: 800, deadline: 900), now: 1_000)
        #expect(ticket.waited == 0)
        // With a timely waiter, a late arrival waits behind it; a timely arrival goes ahead of a late waiter.
        let log = DecisionLog()
        queue(enforcer, Self.call(started: 800, deadline: 900), now: 1_000, log: log, label: "late")
        queue(enforcer, Self.call(started: 999, deadline: 2_000), now: 1_000, log: log, label: "live")
        #expect(try enforcer.mustDeny(Self.call(started: 1, deadline: 2), now: 1_000).message.contains("queued ahead"))
        enforcer.pump(now: 1_001)
        enforcer.pump(now: 1_002)
        #expect(log.labels == ["live", "late"])
    }

    @Test func aWaiterWhoseTaskDeadlinePassesWhileItWaitsMovesBackWithoutAnExtraWake() throws {
        let enforcer = try spentOneRPS()
        let log = DecisionLog()
        queue(enforcer, Self.call(started: 800, deadline: 1_000.5), now: 1_000, log: log, label: "soon-late")
        queue(enforcer, Self.call(started: 850, deadline: 1_001), now: 1_000, log: log, label: "late-at-1001")
        queue(enforcer, Self.call(started: 900, deadline: 2_000), now: 1_000, log: log, label: "live")
        queue(enforcer, Self.call(started: 950), now: 1_000, log: log, label: "no-deadline")
        // Ranking late is decided when the queue is next looked at: no wake of its own.
        #expect(enforcer.nextWakeTime == 1_001)
        enforcer.pump(now: 1_001)
        #expect(log.labels == ["live"])
        // An arrival sees the order as of its arrival: a timely call of a task started after "soon-late"
        // still waits behind "no-deadline" (started earlier), and ahead of the two late ones.
        queue(enforcer, Self.call(started: 960, deadline: 2_000), now: 1_001.5, log: log, label: "live-t960")
        for second in 2...5 { enforcer.pump(now: 1_000 + Double(second)) }
        #expect(log.labels == ["live", "no-deadline", "live-t960", "soon-late", "late-at-1001"])
        #expect(enforcer.statistics.lateCalls == 2)
    }

    @Test func withDenyALateCallIsDeniedDeadlinePassedAtArrivalAndWhenItsDeadlinePassesWhileItWaits() throws {
        let collector = EventCollector()
        let configuration = GatewayConfiguration(
            gatewayID: "gw-1", maxWait: PerTaskClass(all: 60), pastDeadline: .deny)
        let enforcer = Enforcer.make(.make(tenants: [Self.oneRPS]), collector: collector, configuration: configuration)
        // Denied at once even though the bucket has room: the caller said the answer is useless now.
        let late = try enforcer.mustDeny(Self.call(started: 800, deadline: 999.5, taskID: "t-7"), now: 1_000)
        #expect(late.limit == .deadline)
        #expect(late.code == "deadline_passed")
        #expect(late.retryAfter == nil)
        #expect(late.retryAfterHeader == nil)
        #expect(
            late.message
                == "the deadline of task t-7 of tenant acme on \(Snapshot.defaultUpstream) passed 0.5 s ago; calls of late tasks are not admitted"
        )
        #expect(collector.telemetry.last?.errorType == "deadline")
        #expect(collector.telemetry.last?.outcome == .deniedLocal)
        _ = try enforcer.mustAdmit(Self.call(started: 900, deadline: 2_000), now: 1_000)
        let log = DecisionLog()
        queue(enforcer, Self.call(started: 900, deadline: 1_000.5), now: 1_000, log: log, label: "soon-late")
        queue(enforcer, Self.call(started: 950, deadline: 2_000), now: 1_000, log: log, label: "live")
        // The task deadline wakes the queue, so the caller hears at once.
        #expect(enforcer.nextWakeTime == 1_000.5)
        enforcer.pump(now: 1_000.5)
        let denial = try #require(log.admission("soon-late")?.denial)
        #expect(denial.code == "deadline_passed")
        #expect(denial.waited == 0.5)
        #expect(enforcer.nextWakeTime == 1_001)
        enforcer.pump(now: 1_001)
        #expect(log.labels == ["soon-late", "live"])
        #expect(enforcer.statistics.denied[.deadline] == 2)
        #expect(enforcer.statistics.lateCalls == 2)
    }

    @Test func withDenyATenantInShadowModeIsOnlyCounted() throws {
        let configuration = GatewayConfiguration(gatewayID: "gw-1", pastDeadline: .deny)
        let enforcer = Enforcer.make(
            .make(tenants: [TenantEntry.make(mode: "shadow")]), configuration: configuration)
        let ticket = try enforcer.mustAdmit(Self.call(started: 800, deadline: 900), now: 1_000)
        #expect(ticket.shadowDenial == .deadline)
        #expect(enforcer.statistics.shadowWouldDeny == [.deadline: 1])
    }

    // MARK: Across tenants

    @Test func reorderingATenantsCallsDoesNotChangeItsTurnsAcrossTenants() throws {
        // The shared-cap test of EnforcerQueueTests with heavy's calls arriving newest task first: heavy is
        // served as often and as early as there (4:1 by weight), and its own calls oldest task first.
        let heavy = TenantEntry.make("heavy", queueWeight: 4)
        let light = TenantEntry.make("light", queueWeight: 1)
        let enforcer = Enforcer.make(
            .make(tenants: [heavy, light]),
            configuration: GatewayConfiguration(
                gatewayID: "gw-1", maxWait: PerTaskClass(all: 60), maxInFlightPerUpstream: 1))
        let log = DecisionLog()
        var current = try enforcer.mustAdmit(.make("heavy"), now: 1_000)
        for index in 0..<10 {
            queue(
                enforcer, Self.call("heavy", started: 900 - Double(index)), now: 1_000, log: log,
                label: "heavy-\(index)")
            queue(enforcer, Self.call("light"), now: 1_000, log: log, label: "light-\(index)")
        }
        var now = 1_000.0
        for _ in 0..<10 {
            now += 0.1
            enforcer.complete(current, AttemptResult(status: 200, promptTokens: 50, completionTokens: 50), now: now)
            current = try #require(log.decisions.last?.1.ticket)
        }
        let served = log.labels.map { $0.hasPrefix("heavy") ? "H" : "L" }.joined()
        #expect(served == "HHHLHHHHLH")
        #expect(log.labels.filter { $0.hasPrefix("heavy") } == (2...9).reversed().map { "heavy-\($0)" })
    }

    @Test func aCallThatLeavesWithoutATicketGivesItsTenantsTurnBack() throws {
        // Two tenants of equal weight share a cap of one request in flight. acme's first waiter is cancelled:
        // its second takes its turn, so acme is served as early as if the first had never queued. (Calls of
        // new tasks overtaken until their maximum wait ends and then retried would otherwise push their
        // tenant back a turn each time.)
        let enforcer = Enforcer.make(
            .make(tenants: [TenantEntry.make("acme"), TenantEntry.make("globex")]),
            configuration: GatewayConfiguration(
                gatewayID: "gw-1", maxWait: PerTaskClass(all: 60), maxInFlightPerUpstream: 1))
        let log = DecisionLog()
        var current = try enforcer.mustAdmit(.make("acme"), now: 1_000)
        let first = enforcer.submit(Self.call("acme"), now: 1_000, onDecision: log.callback("acme-1"))
        queue(enforcer, Self.call("globex"), now: 1_000, log: log, label: "globex-1")
        queue(enforcer, Self.call("acme"), now: 1_000, log: log, label: "acme-2")
        queue(enforcer, Self.call("globex"), now: 1_000, log: log, label: "globex-2")
        guard case .queued(let id) = first else {
            Issue.record("acme-1 was not queued")
            return
        }
        #expect(enforcer.cancel(id, now: 1_000.1))
        queue(enforcer, Self.call("acme"), now: 1_000.2, log: log, label: "acme-3")
        var now = 1_000.2
        for _ in 0..<4 {
            now += 0.1
            enforcer.complete(current, AttemptResult(status: 200), now: now)
            current = try #require(log.decisions.last?.1.ticket)
        }
        #expect(log.labels == ["acme-1", "acme-2", "globex-1", "globex-2", "acme-3"])
    }

    // MARK: Determinism and a reference model

    /// A small deterministic generator (the tests must not depend on the system's random source).
    struct Generator {
        var state: UInt64

        mutating func next(_ bound: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(bound))
        }
    }

    /// Random calls of one tenant: class, task start (or none), deadline (passed, to come, or none).
    static func randomCalls(count: Int, seed: UInt64) -> [(label: String, request: AdmissionRequest)] {
        var generator = Generator(state: seed)
        let classes: [TaskClass] = [.realtime, .interactive, .batch, .background]
        return (0..<count).map { index in
            let started: Double? = generator.next(4) == 0 ? nil : Double(900 + generator.next(60))
            let deadline: Double?
            switch generator.next(3) {
            case 0: deadline = nil
            case 1: deadline = Double(950 + generator.next(40))  // passed at 1000
            default: deadline = Double(2_000 + generator.next(100))
            }
            return (
                "c\(index)",
                call(taskClass: classes[generator.next(4)], started: started, deadline: deadline)
            )
        }
    }

    @Test(arguments: [1, 2, 3, 4] as [UInt64])
    func theServiceOrderIsClassThenTimelyThenTaskStartThenArrival(seed: UInt64) throws {
        let enforcer = try spentOneRPS(
            configuration: GatewayConfiguration(gatewayID: "gw-1", maxWait: PerTaskClass(all: 300)))
        let log = DecisionLog()
        let calls = Self.randomCalls(count: 40, seed: seed)
        for (label, request) in calls { queue(enforcer, request, now: 1_000, log: log, label: label) }
        for second in 1...40 { enforcer.pump(now: 1_000 + Double(second)) }
        // The reference: one list sorted by the rule, ties by arrival.
        let expected = calls.enumerated().sorted { lhs, rhs in
            func key(_ request: AdmissionRequest) -> (Int, Int, Double) {
                let late = (request.taskDeadline.map { $0 <= 1_000 } ?? false) ? 1 : 0
                return (request.taskClass.rank, late, request.taskStartedAt ?? 1_000)
            }
            let (a, b) = (key(lhs.element.request), key(rhs.element.request))
            if a != b { return a < b }
            return lhs.offset < rhs.offset
        }.map(\.element.label)
        #expect(log.labels == expected)
    }

    @Test func decisionsAreTheSameForTheSameCalls() throws {
        func run() throws -> [String] {
            let tenants = ["a", "b", "c"]
            let enforcer = Enforcer.make(
                .make(tenants: tenants.map { TenantEntry.make($0, rpm: Bucket(rate: 120, burst: 1)) }),
                configuration: GatewayConfiguration(
                    gatewayID: "gw-1", maxWait: PerTaskClass(realtime: 1, interactive: 4, batch: 8, background: 20),
                    maxQueueLength: 25))
            let log = DecisionLog()
            var generator = Generator(state: 99)
            var now = 1_000.0
            for index in 0..<200 {
                now += Double(generator.next(300)) / 1_000
                let tenant = tenants[generator.next(3)]
                var request = Self.randomCalls(count: 1, seed: UInt64(index) &+ 7)[0].request
                request.tenant = tenant
                request.taskStartedAt = request.taskStartedAt.map { $0 + now - 1_000 }
                request.taskDeadline = request.taskDeadline.map { $0 + now - 1_000 }
                // Answers given at once go through the log too, so that it holds every decision in order.
                let callback = log.callback("\(index)")
                if case .decided(let admission) = enforcer.submit(request, now: now, onDecision: callback) {
                    callback(admission)
                }
                if generator.next(3) == 0 { enforcer.pump(now: now) }
            }
            enforcer.pump(now: now + 30)
            #expect(enforcer.status(now: now + 30).queueLength == 0)
            return log.decisions.map { label, admission in
                "\(label):\(admission.ticket.map { "admit@\($0.admittedAt)" } ?? admission.denial!.code)"
            }
        }
        let first = try run()
        #expect(first.count == 200)
        #expect(Set(first.map { $0.split(separator: ":")[1] }).count >= 3)  // admissions and two kinds of denial
        #expect(try run() == first)
    }
}
