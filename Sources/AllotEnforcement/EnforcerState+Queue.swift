/// The admission queue: requests that could not be admitted at once wait — across tenants realtime first, then
/// every other class in turns by weighted fair queuing on `queue_weight`; within a tenant by task class, then the
/// age of the agent task they belong to — until they can be admitted or their class's maximum wait is over.
///
/// Rules, with their reasons:
/// - Only waitable limits queue (rpm, tpm, concurrency, no snapshot yet). A request whose bucket cannot refill
///   within its maximum wait, or whose allocation is zero, is denied at once: waiting could only end in the
///   same denial later, and the caller can act now (a smaller model, failing fast).
/// - Within one (tenant, upstream) and task class, calls of tasks that started earlier go first
///   (``AdmissionRequest/taskStartedAt``; a call without task context, or of a task that has not started,
///   counts as a task starting when it arrives, so such calls keep arrival order behind the started tasks).
///   An agent task is worth something only once all its calls are done: when the tenant wants more than it is
///   given, serving every task alike makes every task late, while finishing the started tasks before starting
///   new ones delivers about as many on time as the allocation allows (given 70% of its demand, about 70% of
///   its tasks instead of almost none). The newest tasks' calls are the ones left waiting, so they are the
///   ones a lane that cannot be served within the maximum wait denies.
/// - A call whose task deadline (``AdmissionRequest/taskDeadline``) has passed ranks behind every call of its
///   tenant and class that can still make its deadline, or is denied (``GatewayConfiguration/pastDeadline``):
///   capacity spent on a task that is late already is taken from one that is not. A waiter whose task deadline
///   passes while it waits moves back then (found through a heap of task deadlines at the start of the next
///   pump or arrival, so nothing scans the queue).
/// - Within one (tenant, upstream) nothing overtakes a waiting request of equal or higher priority (class, then
///   a task deadline not passed, then an older or the same task): otherwise small requests could keep a large
///   one's tokens from ever accumulating. Higher-priority arrivals may go first, as calls of a higher class
///   always did: a call of an older task is tried against the limits at once and, if it must wait, waits
///   ahead of the newer tasks' calls.
/// - Across tenants, waiters are ordered by a start-time-fair-queuing tag
///   (`tag = max(virtual time, tenant's last tag) + 1 / queue_weight`) in one schedule for every class but
///   realtime (which has its own, served first): where tenants compete for a shared resource (the allocation
///   other tenants leave idle, ``GatewayConfiguration/maxInFlightPerUpstream``, the gateway's cap) a tenant with
///   weight 4 is served four times as often as one with weight 1 whatever classes their calls carry, and no tenant
///   starves. A class orders only its own tenant's calls (which of them fills the tenant's turn). Until 2026-11-30
///   each class had its own schedule, served in class order across tenants: an honest batch pipeline got none of
///   the idle allocation lent while tenants that labelled bulk calls `interactive` took it all (outside evaluation
///   round 37: its SLO 64–84 % against `fifo-backoff`'s 100 %; the bulk tenant served 1.40× its entitlement).
///   The tags belong to the places of the tenant's lane, not
///   to its calls (``WaitQueue``): reordering a tenant's calls by task age never changes when that tenant is
///   served relative to the others. A call that leaves without a ticket (its maximum wait over, denied,
///   displaced, cancelled) gives its turn back, so a tenant's turns advance with what it is served, not with
///   what it queues: a newer task's call overtaken until its maximum wait ends and then retried would
///   otherwise push its tenant back one turn each time (cold-start: the incumbent whose calls expired most
///   lost the allocation lent when idle to the other, 1.2 starved tenant-minutes).
/// - When the queue is full (``GatewayConfiguration/maxQueueLength``), an arrival that ranks ahead of its own
///   tenant's last waiter takes that waiter's place (the displaced one is denied `queue_full`), rather than
///   being denied itself: it is the newest task's call (or the lowest class) that goes. Other tenants' waiters
///   are never displaced: how much of the queue each tenant holds is not this rule's business.
/// - A snapshot, a completion or a release re-examines the queue at once; the passage of time (refill,
///   deadlines) is handled by ``pump(now:effects:)`` at ``nextWakeTime()``.
extension EnforcerState {
    enum Submission {
        case decided(Admission)
        case queued(UInt64)
    }

    /// Admits now, denies now, or (when `wait`) queues `request`; queued requests are decided later through
    /// `onDecision`.
    mutating func submit(
        _ request: AdmissionRequest, now: Double, wait: Bool, report: Bool,
        onDecision: (@Sendable (Admission) -> Void)?, effects: inout Effects
    ) -> Submission {
        checkLease(now: now, effects: &effects)
        settleLateWaiters(now: now, effects: &effects)
        let key = TenantKey(tenant: request.tenant, upstream: request.upstream)
        let index = stateIndex(key, now: now)
        let estimate = self.estimate(for: request, learned: index.flatMap { states.values[$0].policy.tokenEstimate })
        if request.taskClass == .realtime, configuration.capRealtimeReserve > 0, configuration.capWindow > 0 {
            realtimeSeen[request.upstream] = RealtimeSeen(at: now, tokens: Double(estimate))
        }
        let position = request.lanePosition(at: now)
        if position.late { statistics.lateCalls += 1 }
        var failure: Failure
        switch evaluate(request, key: key, at: index, estimate: estimate, now: now, arrival: position) {
        case .admit(let charge):
            let ticket = admit(
                request, key: key, at: index!, estimate: estimate, charge: charge, now: now, waited: 0)
            return .decided(.admitted(ticket))
        case .deny(let denied):
            failure = denied
            holdCap(failure, upstream: key.upstream)
        }
        let maxWait = configuration.maxWait[request.taskClass]
        var queueable = wait && onDecision != nil && failure.limit.isWaitable && maxWait > 0
        if queueable, failure.code == "zero_allocation" { queueable = false }
        if queueable, failure.fromRefill, let delay = failure.retryAfter, delay > maxWait {
            failure.message +=
                "; beyond the \(EnforcerState.format(maxWait)) s maximum wait of "
                + "\(request.taskClass.rawValue) requests"
            queueable = false
        }
        let rank = request.taskClass.rank
        var displaced: QueuePlace?
        if queueable, queue.count >= configuration.maxQueueLength {
            if let tail = queue.tailPlace(of: key),
                tail.rank > rank || (tail.rank == rank && position.precedes(tail.position))
            {
                // The newest task's call of this tenant makes room for a call of an older one.
                displaced = tail
            } else {
                failure.code = "queue_full"
                failure.message =
                    "the admission queue is full (\(configuration.maxQueueLength) requests); "
                    + failure.message
                queueable = false
            }
        }
        guard queueable, let onDecision else {
            let denial = deny(
                request, estimate: estimate, failure: failure, now: now, waited: 0, report: report,
                effects: &effects)
            return .decided(.denied(denial))
        }
        if let displaced {
            // It gives its turn back (``WaitQueue/removeUnserved(_:)``), which the arrival then takes: a full
            // queue does not move the tenant's turns.
            let leaving = leaveUnserved(displaced)
            var pushedOut = leaving.failure
            pushedOut.code = "queue_full"
            pushedOut.message =
                "the admission queue is full (\(configuration.maxQueueLength) requests) and a call of tenant "
                + "\(key.tenant) that ranks ahead (an older task or a higher class) took this request's place; "
                + pushedOut.message
            finish(leaving, failure: pushedOut, now: now, effects: &effects)
            statistics.displaced += 1
        }
        let id = nextID
        nextID += 1
        let weight = index.map { states.values[$0].policy.queueWeight }.map { $0.isFinite ? max($0, 0.001) : 1 } ?? 1
        var account = queueAccounts[key] ?? QueueAccount()
        let schedule = request.taskClass.schedule
        let tag = max(virtualTime(schedule: schedule), account.tag(schedule: schedule)) + 1 / weight
        account.setTag(tag, schedule: schedule)
        account.waiting[rank] += 1
        queueAccounts[key] = account
        let waiter = Waiter(
            id: id, request: request, key: key, estimate: estimate, enqueuedAt: now, deadline: now + maxWait,
            tag: tag, failure: failure, onDecision: onDecision, position: position)
        let place = queue.insert(waiter)
        var checkAt: Double?
        if queue.headPlace(of: key)?.id == place.id {
            // A new head: when to look at its lane again.
            checkAt = scheduleCheck(failure, lane: queue.keyID(ofSlot: place.slot), now: now)
            if checkAt == nil { headsWaitForRefill = false }
        }
        var due = min(waiter.deadline, checkAt ?? .infinity)
        let reportAt = now + configuration.queuedReportAfter
        if reportsTelemetry, reportAt < waiter.deadline {
            waitReports.append(WaitReport(due: reportAt, id: id, slot: place.slot))
            due = min(due, reportAt)
        }
        if configuration.pastDeadline == .deny, !position.late, let taskDeadline = request.taskDeadline,
            taskDeadline.isFinite
        {
            due = min(due, taskDeadline)
        }
        queueWake = min(queueWake, due)
        if armedWake.map({ due < $0 }) ?? true { effects.wakeEarlier = true }
        return .queued(id)
    }

    func virtualTime(schedule: Int) -> Double {
        schedule == 0 ? virtualTime.0 : virtualTime.1
    }

    mutating func advanceVirtualTime(to tag: Double, schedule: Int) {
        if schedule == 0 {
            virtualTime.0 = max(virtualTime.0, tag)
        } else {
            virtualTime.1 = max(virtualTime.1, tag)
        }
    }

    /// Re-examines the queue in service order at `now`: admits the waiters that fit, denies those whose maximum
    /// wait is over (or that hit a limit waiting cannot clear, e.g. a new snapshot set `deny`), and keeps the
    /// rest. Once a waiter of a (tenant, upstream) stays, the later waiters of that pair stay too, unless their
    /// maximum wait is over.
    ///
    /// Only each pair's head and the expired waiters are visited (``WaitQueue``), merged in service order, so a
    /// pump costs O(waiting pairs + decisions), not O(waiters), and decides the same waiters in the same order
    /// as a pass over the whole queue: shared limits (the gateway's cap per upstream, task budgets) see the
    /// same sequence of admissions, and the decisions reach their callers in the same order.
    ///
    /// When every head waits for a refill (``headsWaitForRefill``), a pump looks only at the lanes `scope` says
    /// may have changed, the lanes due in ``laneChecks`` and the waiters whose deadline is over: the head of
    /// any other lane cannot have become admissible, so re-evaluating it would only restate its failure. Its
    /// stored failure (what a request queued behind it is told, aged to `now`) stays the one of its last
    /// evaluation. A wake for the passage of time changes nothing but the clock; a release, or a completion
    /// that frees room other tenants share (a refund to the idle or cap buckets, a permit of the gateway's own
    /// concurrency cap, a brake released), changes its upstream's lanes; any other completion and a
    /// cancellation their own lane; a snapshot everything.
    mutating func pump(now: Double, effects: inout Effects, changed scope: PumpScope = .everything) {
        var scope = scope
        if case .lane(let key) = scope, let lender = idle[key.upstream], lender.hasRoom(at: now) {
            // The lane could borrow what its upstream's tenants leave idle: the upstream's waiters are looked at too,
            // in service order, so that the loan goes to whoever is first in the queue, not to the tenant whose own
            // event (a completion, a cancellation) happened to come first. A client that retries every 0.2 s has a
            // call completing every moment: looked at alone, its lane took nearly every loan while honest tenants'
            // waiters, checked when their refill was due, got none (outside review: 1.55× its due).
            scope = .upstream(key.upstream)
        }
        checkLease(now: now, effects: &effects)
        settleLateWaiters(now: now, effects: &effects)
        guard !queue.isEmpty else {
            queueWake = .infinity
            laneChecks.removeAll()
            headsWaitForRefill = true
            waitReports.removeAll(keepingCapacity: true)
            waitReportsStart = 0
            return
        }
        var visits = MinHeap<QueuePlace>()
        swap(&visits, &pumpVisits)
        if scope != .everything && headsWaitForRefill && laneChecks.count <= 2 * queue.activeLanes.count + 1_024 {
            var due: [Int]
            switch scope {
            case .everything, .time: due = []
            case .upstream(let upstream): due = queue.activeLanes(on: upstream)
            case .lane(let key): due = queue.keyIDs[key].map { [$0] } ?? []
            }
            while let first = laneChecks.min, first.at <= now {
                _ = laneChecks.popMin()
                due.append(first.lane)
            }
            queue.beginPartialPump(now: now, lanes: due, into: &visits)
        } else {
            // Every head is looked at, and rescheduled if it stays.
            laneChecks.removeAll()
            queue.beginPump(now: now, into: &visits)
        }
        var waitForRefill = true
        // Per lane, the waiters behind its head that gave up in this pump (they keep their turns in the estimate
        // of those behind them, so that they do not all come back at once).
        var gaveUp: [Int: Int] = [:]
        while let place = visits.popMin() {
            // A head whose deadline is over is listed twice; the second visit finds it decided.
            guard queue.holds(place) else { continue }
            statistics.pumpVisits += 1
            let keyID = queue.keyID(ofSlot: place.slot)
            if queue.isBlocked(keyID) {
                // Behind a waiter of its own pair that stays: listed only because its maximum wait is over.
                let retryAfter = turnComes(place, lane: keyID, gaveUpAhead: gaveUp[keyID, default: 0], now: now)
                gaveUp[keyID, default: 0] += 1
                let waiter = leaveUnserved(place)
                var failure = expired(waiter)
                if let retryAfter { failure.retryAfter = retryAfter }
                finish(waiter, failure: failure, now: now, effects: &effects)
                continue
            }
            // Not blocked: every earlier waiter of its pair has left, so it is the pair's head.
            let waiter = queue[place.slot]
            let waited = now - waiter.enqueuedAt
            let index = stateIndex(waiter.key, now: now)
            switch evaluate(
                waiter.request, key: waiter.key, at: index, estimate: waiter.estimate, now: now, arrival: nil)
            {
            case .admit(let charge):
                queue.remove(place)
                leaveQueue(waiter)
                advanceVirtualTime(to: waiter.tag, schedule: waiter.request.taskClass.schedule)
                let ticket = admit(
                    waiter.reportedRequest, key: waiter.key, at: index!, estimate: waiter.estimate, charge: charge,
                    now: now, waited: waited)
                effects.decisions.append((waiter.onDecision, .admitted(ticket)))
                if let next = queue.head(ofLane: keyID) { visits.push(next) }
            case .deny(let failure):
                holdCap(failure, upstream: waiter.key.upstream)
                if !failure.limit.isWaitable || failure.code == "zero_allocation" {
                    leaveUnserved(place)
                    finish(waiter, failure: failure, now: now, effects: &effects)
                    if let next = queue.head(ofLane: keyID) { visits.push(next) }
                } else if now >= waiter.deadline {
                    var waiter = leaveUnserved(place)
                    waiter.failure = failure
                    var denial = expired(waiter)
                    // A head whose predecessors gave up in this pump comes back after their turns too: a burst
                    // that arrived together expires head after head, and each was told its own refill, the same
                    // instant for all (round 32: fifteen calls told 0.99 s, fourteen denied again on return).
                    let ahead = gaveUp[keyID, default: 0]
                    if ahead > 0, let refill = failure.retryAfter,
                        let perCall = callSpacing(waiter.key, estimate: waiter.estimate)
                    {
                        denial.retryAfter = min(max(refill + Double(ahead) * perCall, Self.borrowRecheck), Self.turnCap)
                    }
                    gaveUp[keyID, default: 0] += 1
                    finish(waiter, failure: denial, now: now, effects: &effects)
                    if let next = queue.head(ofLane: keyID) { visits.push(next) }
                } else {
                    holdIdle(
                        failure, key: waiter.key, rank: waiter.request.taskClass.rank, until: waiter.deadline, now: now)
                    queue[place.slot].failure = failure
                    queue[place.slot].failureAt = now
                    queue.block(keyID)
                    if scheduleCheck(failure, lane: keyID, now: now) == nil { waitForRefill = false }
                }
            }
        }
        visits.removeAll()
        pumpVisits = visits
        // (After a partial pump, the heads not visited wait for a refill: that is why it was partial.)
        headsWaitForRefill = waitForRefill
        reportLongWaits(now: now, effects: &effects)
        queueWake = min(laneChecks.min?.at ?? .infinity, queue.earliestDeadline(), nextWaitReport)
        if configuration.pastDeadline == .deny { queueWake = min(queueWake, queue.earliestTaskDeadline()) }
    }

    /// Reports each waiter that has waited ``GatewayConfiguration/queuedReportAfter`` as `queued`, once, with the
    /// time it arrived and its wait so far: what a standing queue holds is demand Allot should see when it
    /// arrives. Reported only at its attempt or denial, a critical tenant's burst of batch calls (143 rpm
    /// arriving, each call waiting up to a minute) was seen at its idle-time allocation's pace (29 rpm), and its
    /// allocation reached the arrival rate four minutes later. Its later event carries `retry` one higher
    /// (``Waiter/reportedRequest``).
    mutating func reportLongWaits(now: Double, effects: inout Effects) {
        while waitReportsStart < waitReports.count, waitReports[waitReportsStart].due <= now {
            let report = waitReports[waitReportsStart]
            waitReportsStart += 1
            guard queue.holds(slot: report.slot, id: report.id) else { continue }
            queue[report.slot].reported = true
            let waiter = queue[report.slot]
            statistics.reportedWhileQueued += 1
            effects.telemetry.append(
                TelemetryRecord(
                    ts: serverNow(waiter.enqueuedAt), gateway: configuration.gatewayID, tenant: waiter.request.tenant,
                    upstream: waiter.request.upstream, outcome: .queued, queueWait: now - waiter.enqueuedAt,
                    estimatedTokens: waiter.estimate, taskClass: waiter.request.taskClass,
                    taskID: waiter.request.taskID, retry: waiter.request.retry,
                    errorType: waiter.failure.limit == .budget ? waiter.failure.code : waiter.failure.limit.rawValue))
        }
        if waitReportsStart == waitReports.count {
            waitReports.removeAll(keepingCapacity: true)
            waitReportsStart = 0
        } else if waitReportsStart >= 1_024, waitReportsStart * 2 >= waitReports.count {
            waitReports.removeFirst(waitReportsStart)
            waitReportsStart = 0
        }
    }

    /// When the next waiter is due to be reported `queued` (infinity when none is).
    var nextWaitReport: Double {
        waitReportsStart < waitReports.count ? waitReports[waitReportsStart].due : .infinity
    }

    /// What changed since the last look at the queue, besides the clock: which lanes a pump must look at.
    enum PumpScope: Equatable {
        /// Anything (limits installed, a snapshot): every lane.
        case everything
        /// Only the clock: the lanes due in ``laneChecks``.
        case time
        /// Room on one upstream (a release, a completion that refunds to the idle or cap buckets or frees a
        /// permit of the gateway's own concurrency cap): its lanes.
        case upstream(String)
        /// One lane's order (a cancelled waiter): that lane.
        case lane(TenantKey)
    }

    /// Schedules the next look at `lane`, whose head stays with `failure`: when it may pass by refill alone
    /// (``Failure/possibleIn(_:)``), but no sooner than its retry-after or ``borrowRecheck``, whichever is
    /// shorter. Nil when the failure is not a refill's: only an event (a completion, a snapshot) clears it.
    mutating func scheduleCheck(_ failure: Failure, lane: Int, now: Double) -> Double? {
        guard failure.fromRefill, let delay = failure.retryAfter else { return nil }
        let at = now + max(failure.possibleIn(delay), min(delay, Self.borrowRecheck))
        laneChecks.push(LaneCheck(at: at, lane: lane))
        return at
    }

    /// Records a request held by the gateway's cap although its own buckets admit it: borrowing stops on that
    /// upstream until the cap has had the chance to admit it (``capHeldUntil``).
    mutating func holdCap(_ failure: Failure, upstream: String) {
        guard let hold = failure.capHold else { return }
        capHeldUntil[upstream, default: CapHold()].extend(hold.limit, until: hold.until)
    }

    /// Records a waiter short of idle allocation only (``Failure/idleHold``) as holding the idle buckets of its
    /// upstream until they would cover its request, where nobody holds them yet (the first in service order keeps
    /// them) and it can still be waiting then (`until`: its maximum wait's end). A hold lasts until its time even
    /// when its waiter is admitted or leaves sooner: the waiters it kept out were told they could not borrow before
    /// then, and a pump for the passage of time looks at them no sooner (``Failure/earliest``).
    mutating func holdIdle(_ failure: Failure, key: TenantKey, rank: Int, until deadline: Double, now: Double) {
        guard let hold = failure.idleHold else { return }
        var held = idleHeld[key.upstream] ?? IdleHold()
        func claim(_ current: IdleHold.Claim?, _ until: Double?) -> IdleHold.Claim? {
            guard let until, until <= deadline else { return current }
            // Another tenant's claim stands while it lasts, unless this one is realtime over a claim of another class
            // (across tenants a class buys no turn but realtime's). A claim that replaces or renews one lasts at least
            // as long (the waiters the old one kept out were told it would).
            guard let current, current.until >= now else { return IdleHold.Claim(until: until, key: key, rank: rank) }
            if current.key != key, TaskClass.schedule(ofRank: current.rank) <= TaskClass.schedule(ofRank: rank) {
                return current
            }
            return IdleHold.Claim(until: max(until, current.until), key: key, rank: rank)
        }
        held.rpm = claim(held.rpm, hold.rpm)
        held.tpm = claim(held.tpm, hold.tpm)
        idleHeld[key.upstream] = held
    }

    /// Deals with the waiters whose task deadline has passed since the last look: with
    /// ``PastDeadlinePolicy/rankLast`` they move behind their lane's timely waiters of their class, with
    /// ``PastDeadlinePolicy/deny`` they are denied `deadline_passed` (a tenant in shadow mode only moves them).
    /// Runs before a pump or an arrival looks at any lane's head, so every decision sees the order as of
    /// `now`. Each waiter is taken at most once, at O(log waiters + its lane's length), like a decision.
    mutating func settleLateWaiters(now: Double, effects: inout Effects) {
        guard queue.hasTaskDeadline(atOrBefore: now) else { return }
        for slot in queue.takeLateTasks(atOrBefore: now) {
            let waiter = queue[slot]
            statistics.lateCalls += 1
            if queue.isHead(slot: slot) {
                // Leaving or moving back, it may uncover a head nobody has evaluated: look at the lane now.
                laneChecks.push(LaneCheck(at: now, lane: queue.keyID(ofSlot: slot)))
            }
            if configuration.pastDeadline == .deny, !(states[waiter.key]?.policy.shadow ?? false) {
                let leaving = leaveUnserved(QueuePlace(waiter, slot: slot))
                finish(leaving, failure: deadlinePassed(leaving.request, now: now), now: now, effects: &effects)
            } else {
                queue.markLate(slot: slot)
            }
        }
    }

    /// The denial of a call whose task deadline has passed (``PastDeadlinePolicy/deny``): nothing to retry.
    func deadlinePassed(_ request: AdmissionRequest, now: Double) -> Failure {
        let task = request.taskID.map { "task \($0)" } ?? "the task"
        let ago = EnforcerState.format(max(0, now - (request.taskDeadline ?? now)))
        return Failure(
            limit: .deadline, code: "deadline_passed",
            message: "the deadline of \(task) of tenant \(request.tenant) on \(request.upstream) passed \(ago) s "
                + "ago; calls of late tasks are not admitted",
            retryAfter: nil, fromRefill: false, shadowable: true)
    }

    /// Seconds until the waiter at `place`, behind its lane's head, could have its turn by the tenant's own
    /// refill: the head's refill, then one request's refill for each waiter ahead of it, counting those that
    /// gave up before it in the same pump (`gaveUpAhead`), at the tenant's RPM or TPM, whichever is slower for
    /// its size. What a caller that gave up waiting is told to wait before asking again, rather than the
    /// head's refill alone, which would send it straight back to the end of the same line; capped at
    /// ``turnCap``. Nil when the head waits for no refill.
    func turnComes(_ place: QueuePlace, lane keyID: Int, gaveUpAhead: Int, now: Double) -> Double? {
        guard let headPlace = queue.head(ofLane: keyID) else { return nil }
        let head = queue[headPlace.slot]
        guard let headLeft = head.refillLeft(at: now), let state = states[head.key] else { return nil }
        let waiter = queue[place.slot]
        // At least the head is ahead of it (so an unlimited wait per call never meets a zero count).
        let ahead = Double(max(1, queue.waitersAhead(ofSlot: place.slot) + gaveUpAhead))
        let perCall = Self.callSpacing(state, estimate: waiter.estimate)
        let turn = headLeft + ahead * perCall
        return min(max(turn, Self.borrowRecheck), Self.turnCap)
    }

    /// Seconds between two calls of `estimate` tokens by the tenant's own refill (the slower dimension).
    static func callSpacing(_ state: TenantState, estimate: Int) -> Double {
        max(
            state.rpm.ratePerSecond > 0 ? 1 / state.rpm.ratePerSecond : .infinity,
            state.tpm.ratePerSecond > 0 ? Double(estimate) / state.tpm.ratePerSecond : .infinity)
    }

    /// ``callSpacing(_:estimate:)`` of `key`'s buckets, nil when it has none or refills never.
    func callSpacing(_ key: TenantKey, estimate: Int) -> Double? {
        guard let state = states[key] else { return nil }
        let spacing = Self.callSpacing(state, estimate: estimate)
        return spacing.isFinite ? spacing : nil
    }

    /// The longest wait ``turnComes(_:lane:gaveUpAhead:now:)`` advises (seconds).
    static let turnCap = 60.0

    private func expired(_ waiter: Waiter) -> Failure {
        var failure = waiter.failure
        failure.code = "max_wait_exceeded"
        let maxWait = EnforcerState.format(configuration.maxWait[waiter.request.taskClass])
        failure.message =
            "waited the \(maxWait) s maximum of \(waiter.request.taskClass.rawValue) requests; "
            + failure.message
        return failure
    }

    /// Denies a waiter that leaves the queue without a ticket.
    private mutating func finish(_ waiter: Waiter, failure: Failure, now: Double, effects: inout Effects) {
        leaveQueue(waiter)
        let denial = deny(
            waiter.reportedRequest, estimate: waiter.estimate, failure: failure, now: now,
            waited: now - waiter.enqueuedAt, report: true, effects: &effects)
        effects.decisions.append((waiter.onDecision, .denied(denial)))
    }

    /// Takes a waiter that leaves without a ticket out of `queue`, giving its turn in its tenant's schedule
    /// back (``WaitQueue/removeUnserved(_:)``): the tenant's last tag in the schedule goes back to the largest it
    /// still holds there, or one step before the one that left. So a tenant's turns across tenants advance with
    /// the calls it is served, not with those that expire and come back.
    @discardableResult
    private mutating func leaveUnserved(_ place: QueuePlace) -> Waiter {
        let (waiter, droppedTag, lastTag) = queue.removeUnserved(place)
        let schedule = waiter.request.taskClass.schedule
        if var account = queueAccounts[waiter.key] {
            let weight = states[waiter.key].map { $0.policy.queueWeight }.map { $0.isFinite ? max($0, 0.001) : 1 } ?? 1
            account.setTag(min(account.tag(schedule: schedule), lastTag ?? (droppedTag - 1 / weight)), schedule: schedule)
            queueAccounts[waiter.key] = account
        }
        return waiter
    }

    /// Updates the waiting counts of a waiter that left the queue (the caller removes it from `queue`).
    private mutating func leaveQueue(_ waiter: Waiter) {
        guard var account = queueAccounts[waiter.key] else { return }
        account.waiting[waiter.request.taskClass.rank] -= 1
        queueAccounts[waiter.key] = account.waiting.total > 0 ? account : nil
    }

    /// Removes a waiter whose caller gave up; reports it as `queued` (demand that was neither served nor
    /// denied) unless it was reported so while it waited. False when it already left the queue.
    mutating func cancel(_ id: UInt64, now: Double, effects: inout Effects) -> Bool {
        guard let place = queue.place(of: id) else { return false }
        let waiter = leaveUnserved(place)
        leaveQueue(waiter)
        statistics.cancelledWhileQueued += 1
        let waited = now - waiter.enqueuedAt
        // One that was reported `queued` while it waited was counted then.
        if reportsTelemetry, !waiter.reported {
            effects.telemetry.append(
                TelemetryRecord(
                    ts: serverNow(now), gateway: configuration.gatewayID, tenant: waiter.request.tenant,
                    upstream: waiter.request.upstream, outcome: .queued, queueWait: waited,
                    estimatedTokens: waiter.estimate, taskClass: waiter.request.taskClass,
                    taskID: waiter.request.taskID, retry: waiter.request.retry))
        }
        var failure = waiter.failure
        failure.code = "cancelled"
        failure.message = "the caller stopped waiting"
        let denial = Denial(
            limit: failure.limit, code: failure.code, message: failure.message, retryAfter: nil,
            snapshotVersion: table.version, fallback: table.inFallback, waited: waited, tenant: waiter.request.tenant,
            upstream: waiter.request.upstream, taskClass: waiter.request.taskClass)
        effects.decisions.append((waiter.onDecision, .denied(denial)))
        // Its departure may unblock later waiters of the same tenant.
        pump(now: now, effects: &effects, changed: .lane(waiter.key))
        return true
    }

    /// Denies every waiting request (the gateway is stopping: nothing would wake them any more).
    mutating func denyAllWaiting(now: Double, effects: inout Effects) {
        let leaving = queue.removeAll()
        queueWake = .infinity
        for waiter in leaving {
            var failure = waiter.failure
            failure.code = "gateway_stopping"
            failure.message = "the gateway is stopping"
            finish(waiter, failure: failure, now: now, effects: &effects)
        }
    }

    /// The earliest instant at which the queue or the lease needs attention: a waiter's refill time or
    /// deadline, or the lease end. nil when nothing is pending.
    func nextWakeTime() -> Double? {
        let next = min(leaseEnd ?? .infinity, queue.isEmpty ? .infinity : queueWake)
        return next.isFinite ? next : nil
    }
}
