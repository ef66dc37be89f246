import AllotProtocol
import AllotSignals

/// A burst credit lent by the snapshot (SPEC §6.5) and how much of it this gateway has used.
struct CreditState: Sendable {
    var grant: BurstCredit
    var usedCalls = 0.0
    var usedTokens = 0.0

    func calls(at now: Double) -> Double { now < grant.expiresAt ? max(0, grant.calls - usedCalls) : 0 }
    func tokens(at now: Double) -> Double { now < grant.expiresAt ? max(0, grant.tokens - usedTokens) : 0 }
    var isUsed: Bool { usedCalls > 0 || usedTokens > 0 }
}

/// Waiting requests of one tenant key, per task class.
struct ClassCounts: Sendable {
    var counts = (0, 0, 0, 0)

    subscript(rank: Int) -> Int {
        get {
            switch rank {
            case 0: counts.0
            case 1: counts.1
            case 2: counts.2
            default: counts.3
            }
        }
        set {
            switch rank {
            case 0: counts.0 = newValue
            case 1: counts.1 = newValue
            case 2: counts.2 = newValue
            default: counts.3 = newValue
            }
        }
    }

    /// Waiting requests at `rank` or more urgent.
    func atOrAbove(_ rank: Int) -> Int {
        var total = 0
        for index in 0...min(rank, 3) { total += self[index] }
        return total
    }

    var total: Int { counts.0 + counts.1 + counts.2 + counts.3 }
}

/// The buckets and counters of one (tenant, upstream), with the policy in force for it (kept here so that
/// admission needs one dictionary lookup per request).
struct TenantState: Sendable {
    var policy: TenantPolicy
    var rpm: TokenBucket
    var tpm: TokenBucket
    /// Charged requests in flight: what `max_concurrency` bounds.
    var inFlight = 0
    var credit: CreditState?
    /// What it may still borrow of the allocation others leave idle (``GatewayConfiguration/borrowShare``),
    /// created full; nil when borrowing is unbounded.
    var borrowable: (rpm: TokenBucket, tpm: TokenBucket)?
    /// What its ceiling (``TenantPolicy/ceiling``) leaves it above its own rate, per dimension with a ceiling:
    /// refilled at `ceiling − rate`, holding the allowance's window of that (at least a second), charged with every
    /// request it borrows or takes from a burst credit there (and what a borrowed one used beyond its reservation),
    /// whatever the allowance says. nil in a dimension without a ceiling.
    var ceilingRoom: (rpm: TokenBucket?, tpm: TokenBucket?) = (nil, nil)

    init(policy: TenantPolicy, now: Double, allowance: BorrowAllowance = .unbounded) {
        self.policy = policy
        rpm = TokenBucket(parameters: policy.limits.rpm, now: now)
        tpm = TokenBucket(parameters: policy.limits.tpm, now: now)
        credit = policy.burstCredit.map { CreditState(grant: $0) }
        fitAllowance(allowance, at: now)
        fitCeiling(window: allowance.window, at: now)
    }

    /// Sizes ``ceilingRoom`` for the policy in force, like ``fitAllowance(_:at:)``: retuned (no refill), new ones
    /// full, dropped where the ceiling went. Room within a millionth of the rate is none: a ceiling published at
    /// the rate (the tenant allocated its ceiling) differs from it by rounding only, and a bucket refilled at
    /// 1e-15 a minute admitted a request every time it was full (its debt bounded by its own tiny burst). A room
    /// closed (none) starts over empty, owing nothing: it never refills, and its debt would keep the state from
    /// being forgotten. Its burst is the window's, not its own bucket's seconds: a tenant at 1 rpm holds a request,
    /// 60 s of its rate, and a room of 179 rpm would have held 179 requests.
    private mutating func fitCeiling(window: Double, at instant: Double) {
        let seconds = window.isFinite ? max(1, window) : 1
        func room(_ ceiling: Double?, _ own: Bucket, _ current: TokenBucket?) -> TokenBucket? {
            guard let ceiling, ceiling.isFinite else { return nil }
            var rate = max(0, ceiling - own.rate)
            if rate <= 1e-6 * max(own.rate, 1) { rate = 0 }
            let parameters = Bucket(rate: rate, burst: rate * seconds / 60)
            guard rate > 0, var bucket = current else { return TokenBucket(parameters: parameters, now: instant) }
            bucket.retune(to: parameters, at: instant)
            return bucket
        }
        ceilingRoom = (
            room(policy.ceiling?.rpm, policy.limits.rpm, ceilingRoom.rpm),
            room(policy.ceiling?.tpm, policy.limits.tpm, ceilingRoom.tpm)
        )
    }

    /// Sizes ``borrowable`` for the policy in force: an allowance it had is retuned (no refill), a new one starts
    /// full, and one its policy no longer calls for is dropped.
    private mutating func fitAllowance(_ allowance: BorrowAllowance, at instant: Double) {
        guard let parameters = allowance.parameters(for: policy) else {
            borrowable = nil
            return
        }
        if borrowable == nil {
            borrowable = (
                TokenBucket(parameters: parameters.rpm, now: instant),
                TokenBucket(parameters: parameters.tpm, now: instant)
            )
        } else {
            borrowable!.rpm.retune(to: parameters.rpm, at: instant)
            borrowable!.tpm.retune(to: parameters.tpm, at: instant)
        }
    }

    /// Whether it may borrow one request of `amount` tokens in the dimensions it would borrow from `lender`:
    /// within its allowance, whenever the idle buckets have it; beyond it, only what leaves them at least a
    /// quarter full (``beyondAllowanceLevel``) — allocation the tenants within their allowances have left
    /// there. Work conservation is kept (what nobody else takes accrues, and then anyone may borrow it), and
    /// those within their share go first.
    /// Never beyond what its ceiling leaves (``ceilingRoom``).
    func mayBorrow(
        rpm borrowRPM: Bool, tpm borrowTPM: Bool, amount: Double, from lender: IdleCapacity?, at now: Double
    ) -> Bool {
        if borrowRPM, let room = ceilingRoom.rpm, !room.admits(1, at: now) { return false }
        if borrowTPM, let room = ceilingRoom.tpm, !room.admits(amount, at: now) { return false }
        guard let borrowable else { return true }
        func allowed(_ own: TokenBucket, _ idle: TokenBucket?, _ amount: Double) -> Bool {
            if own.admits(amount, at: now) { return true }
            guard let idle else { return false }
            return idle.level(at: now) - amount >= Self.beyondAllowanceLevel * idle.parameters.burst
        }
        return (!borrowRPM || allowed(borrowable.rpm, lender?.rpm, 1))
            && (!borrowTPM || allowed(borrowable.tpm, lender?.tpm, amount))
    }

    /// Beyond its allowance a tenant borrows only what leaves the idle buckets at least this full (a fraction of
    /// their burst).
    /// (A half left the estimate of a blind pool cut below its new limit at 83 % of it for ten minutes: its
    /// probe needs the pool used, and the tenant that wanted more could not borrow what the others left.)
    static let beyondAllowanceLevel = 0.25

    /// Full, idle and owing nothing: forgetting it changes nothing, because a new state starts full. That holds
    /// for its borrowing allowance too: a borrower's over-spend is charged to the allowance only, and forgetting
    /// it while its own buckets were full wiped that debt (round 14).
    func isIdle(at now: Double) -> Bool {
        guard inFlight == 0, !(credit?.isUsed ?? false), rpm.isFull(at: now), tpm.isFull(at: now),
            ceilingRoom.rpm?.isFull(at: now) ?? true, ceilingRoom.tpm?.isFull(at: now) ?? true
        else {
            return false
        }
        guard let borrowable else { return true }
        return borrowable.rpm.isFull(at: now) && borrowable.tpm.isFull(at: now)
    }

    /// The clock stepped by `step` to `now` (back when negative): every bucket's last update moves with it
    /// (``TokenBucket/rebase(to:step:)``).
    mutating func rebase(to now: Double, step: Double) {
        rpm.rebase(to: now, step: step)
        tpm.rebase(to: now, step: step)
        borrowable?.rpm.rebase(to: now, step: step)
        borrowable?.tpm.rebase(to: now, step: step)
        ceilingRoom.rpm?.rebase(to: now, step: step)
        ceilingRoom.tpm?.rebase(to: now, step: step)
    }

    /// Takes an admitted request's call and tokens from the buckets or the burst credit.
    mutating func charge(_ charge: Charge, amount: Double, now: Double) {
        inFlight += 1
        // Beyond its own buckets (borrowed, or a burst credit, which its rate does not include) counts against
        // its ceiling: a credit spent at once would otherwise leave the whole room to borrow on top of it.
        if charge.rpmFromCredit || charge.rpmBorrowed { ceilingRoom.rpm?.take(1, at: now) }
        if charge.tpmFromCredit || charge.tpmBorrowed { ceilingRoom.tpm?.take(amount, at: now) }
        if charge.rpmFromCredit {
            credit!.usedCalls += 1
        } else if !charge.rpmBorrowed {
            rpm.take(1, at: now)
        } else if borrowable?.rpm.admits(1, at: now) == true {
            borrowable!.rpm.take(1, at: now)  // borrowed within its allowance (beyond it, nothing to charge)
        }
        if charge.tpmFromCredit {
            credit!.usedTokens += amount
        } else if !charge.tpmBorrowed {
            tpm.take(amount, at: now)
        } else if borrowable?.tpm.admits(amount, at: now) == true {
            borrowable!.tpm.take(amount, at: now)
        }
    }

    /// Applies a new policy's parameters at `instant` without refilling (``TokenBucket/retune(to:at:)``), its
    /// borrow allowance, and its burst credit: the same grant (same expiry) keeps what was used, a new grant
    /// starts unused.
    mutating func retune(to policy: TenantPolicy, at instant: Double, allowance: BorrowAllowance) {
        // Listed for the first time: its buckets are what a state created now would hold less what it used on the
        // default entry. A swap never refills otherwise, and a premium customer's first task, arriving seconds
        // before the snapshot that listed it, started its own allocation from the default bucket's empty level
        // (its calls waited out their maximum wait while one request a gateway refilled).
        let listed = !self.policy.isListed && policy.isListed
        self.policy = policy
        if listed {
            rpm = Self.carried(rpm, to: policy.limits.rpm, at: instant)
            tpm = Self.carried(tpm, to: policy.limits.tpm, at: instant)
        } else {
            rpm.retune(to: policy.limits.rpm, at: instant)
            tpm.retune(to: policy.limits.tpm, at: instant)
        }
        fitAllowance(allowance, at: instant)
        fitCeiling(window: allowance.window, at: instant)
        if let grant = policy.burstCredit {
            if var existing = credit, existing.grant.expiresAt == grant.expiresAt {
                existing.grant = grant
                credit = existing
            } else {
                credit = CreditState(grant: grant)
            }
        } else {
            credit = nil
        }
    }
}

extension TenantState {
    /// A full bucket of `parameters` at `instant` less what `bucket` has used of its own burst (its debt
    /// included).
    static func carried(_ bucket: TokenBucket, to parameters: Bucket, at instant: Double) -> TokenBucket {
        let used = max(0, bucket.parameters.burst - bucket.level(at: instant))
        return TokenBucket(parameters: parameters, now: instant, level: TokenBucket.sanitized(parameters).burst - used)
    }
}

/// How much of others' idle allocation a tenant may borrow first (``GatewayConfiguration/borrowShare``,
/// ``GatewayConfiguration/borrowUnboundedPriority``): the same for every tenant of a gateway.
struct BorrowAllowance: Sendable {
    var share: Double
    var window: Double
    var unboundedPriority: Int

    /// No allowance for anyone: the idle buckets alone bound borrowing.
    static let unbounded = BorrowAllowance(share: .infinity, window: 0, unboundedPriority: -1)

    /// The allowance's buckets for a tenant under `policy`: `share` times its own rate, and as a burst `share`
    /// times the larger of its own burst and `window` seconds of its rate (the idle buckets' window: what is
    /// lent accrues that long). nil for an unbounded share, and for a tenant of priority `unboundedPriority` or
    /// before.
    func parameters(for policy: TenantPolicy) -> (rpm: Bucket, tpm: Bucket)? {
        guard share.isFinite, policy.priority > unboundedPriority else { return nil }
        let share = max(0, share)
        let window = window.isFinite ? max(0, window) : 0
        func scaled(_ bucket: Bucket) -> Bucket {
            Bucket(rate: bucket.rate * share, burst: max(bucket.burst, bucket.rate * window / 60) * share)
        }
        return (scaled(policy.limits.rpm), scaled(policy.limits.tpm))
    }
}

/// The queue's bookkeeping for one (tenant, upstream) while it has waiting requests.
struct QueueAccount: Sendable {
    var waiting = ClassCounts()
    /// Weighted-fair-queuing tag of this tenant's last enqueued request, per schedule (``TaskClass/schedule``:
    /// realtime, every other class).
    var lastTag = (0.0, 0.0)

    func tag(schedule: Int) -> Double {
        schedule == 0 ? lastTag.0 : lastTag.1
    }

    mutating func setTag(_ tag: Double, schedule: Int) {
        if schedule == 0 {
            lastTag.0 = tag
        } else {
            lastTag.1 = tag
        }
    }
}

/// A `task_id`'s usage, for the runaway-task guard.
struct TaskKey: Hashable, Sendable {
    let tenant: String
    let taskID: String
    /// Hashed once: the key is looked up several times per request.
    private let hash: Int

    init(tenant: String, taskID: String) {
        self.tenant = tenant
        self.taskID = taskID
        var hasher = Hasher()
        hasher.combine(tenant)
        hasher.combine(taskID)
        hash = hasher.finalize()
    }

    static func == (lhs: TaskKey, rhs: TaskKey) -> Bool {
        lhs.hash == rhs.hash && lhs.tenant == rhs.tenant && lhs.taskID == rhs.taskID
    }

    func hash(into hasher: inout Hasher) { hasher.combine(hash) }
}

struct TaskUsage: Sendable {
    var calls = 0
    var tokens = 0.0
    var lastSeen: Double
}

/// How an admitted request was charged, kept until it completes.
struct TicketRecord: Sendable {
    var ticket: Ticket
    var key: TenantKey
    var estimate: Double
    /// False for a shadow-mode would-be denial: admitted without touching buckets, permits or task usage.
    var charged: Bool
    var rpmFromCredit: Bool
    var tpmFromCredit: Bool
    /// Borrowed from the upstream's idle allocation (``IdleCapacity``) instead of the tenant's own bucket.
    var rpmBorrowed = false
    var tpmBorrowed = false
    /// Charged to the gateway's cap (``GatewayCap``), so a refund goes back there too.
    var capRPM = false
    var capTPM = false
    /// The credit grant drawn from (its expiry identifies it), so a refund goes back to the same grant.
    var creditExpiry: Double?
    /// Allot's clock's offset at admission: its telemetry is stamped on Allot's clock as it was read then (a step of
    /// the gateway's clock during the call moves the offset, not `admittedAt`).
    var serverOffset = 0.0
}

/// Why a request cannot be admitted now.
struct Failure: Sendable {
    var limit: LimitKind
    var code: String
    /// The message, formatted when read.
    var text: FailureText
    /// Advised retry, seconds.
    var retryAfter: Double?
    /// True when `retryAfter` is the bucket's exact refill time (a lower bound on the wait).
    var fromRefill: Bool
    /// False for failures that apply whatever the tenant's mode (circuit, the gateway's own cap, queue order).
    var shadowable: Bool
    /// For the gateway's cap holding a request its own buckets admit: until when it claims the cap
    /// (``EnforcerState/capHeldUntil``).
    var capHold: (limit: LimitKind, until: Double)?
    /// For a waiter that could borrow but finds too little idle allocation: until when, per dimension, it would
    /// hold the idle buckets (``EnforcerState/idleHeld``).
    var idleHold: (rpm: Double?, tpm: Double?)?
    /// With `fromRefill`: seconds until the request may pass by refill alone when that is sooner than
    /// `retryAfter`, which advises no less than ``EnforcerState/borrowRecheck`` (so that a pump does not spin)
    /// and ignores idle allocation a cap hold keeps from lending until the hold ends. Nil: `retryAfter`.
    var earliest: Double?

    /// A lower bound on the wait, given `retryAfter` is `delay`: nothing admits the request sooner unless
    /// something other than the clock changes (a completion, a snapshot).
    func possibleIn(_ delay: Double) -> Double { min(delay, earliest ?? delay) }

    init(
        limit: LimitKind, code: String, message: String, retryAfter: Double?, fromRefill: Bool, shadowable: Bool
    ) {
        self.init(
            limit: limit, code: code, text: .plain(message), retryAfter: retryAfter, fromRefill: fromRefill,
            shadowable: shadowable)
    }

    init(
        limit: LimitKind, code: String, text: FailureText, retryAfter: Double?, fromRefill: Bool, shadowable: Bool
    ) {
        self.limit = limit
        self.code = code
        self.text = text
        self.retryAfter = retryAfter
        self.fromRefill = fromRefill
        self.shadowable = shadowable
    }

    var message: String {
        get { text.formatted }
        set { text = .plain(newValue) }
    }
}

/// A failure's message, kept as its parts for the failures a pump meets on every waiting pair's head (a
/// bucket without room, a concurrency cap): a pump re-evaluates each head and keeps its failure, but the
/// message is read only when a denial is built, so formatting it every time was most of a pump's cost.
enum FailureText: Sendable {
    case plain(String)
    /// A bucket without room for `amount` (tokens, or one request) for another `delay` seconds.
    case bucket(key: TenantKey, limit: LimitKind, parameters: Bucket, amount: Double, delay: Double)
    /// A tenant the snapshot does not list, on the default entry, without room: retry after the next snapshot
    /// (in `delay` seconds), which may list it.
    case unlisted(key: TenantKey, limit: LimitKind, parameters: Bucket, amount: Double, delay: Double)
    /// The tenant's own `max_concurrency`.
    case tenantConcurrency(key: TenantKey, inFlight: Int, maximum: Int)
    /// The gateway's own cap per upstream.
    case gatewayConcurrency(upstream: String, cap: Int)
    /// The gateway's own share of an upstream (``GatewayCap``) without room for `amount` for `delay` seconds.
    case gatewayCap(
        upstream: String, limit: LimitKind, parameters: Bucket, amount: Double, reserve: CapReserve, delay: Double)

    /// "600 requests/min (burst 100) has no room for a request; retry in 0.1 s" (tokens for TPM); `retry` names
    /// what to wait for before the delay.
    private static func room(
        limit: LimitKind, parameters: Bucket, amount: Double, delay: Double, retry: String = "retry in",
        kept: String = ""
    ) -> String {
        let useTPM = limit == .tpm
        let unit = useTPM ? "tokens" : "requests"
        // The estimate is the caller's (any Int): formatted, not converted, so one near Int.max cannot trap.
        let what = useTPM ? "\(EnforcerState.format(amount.rounded(.up))) tokens" : "a request"
        return "\(EnforcerState.format(parameters.rate)) \(unit)/min (burst \(EnforcerState.format(parameters.burst))) "
            + "has no room for \(what)\(kept); \(retry) \(EnforcerState.format(delay)) s"
    }

    var formatted: String {
        switch self {
        case .plain(let message):
            return message
        case .bucket(let key, let limit, let parameters, let amount, let delay):
            return "tenant \(key.tenant) on \(key.upstream): \(limit.rawValue) limit "
                + Self.room(limit: limit, parameters: parameters, amount: amount, delay: delay)
        case .unlisted(let key, let limit, let parameters, let amount, let delay):
            return "tenant \(key.tenant) on \(key.upstream) is not in the snapshot yet: the default \(limit.rawValue) "
                + "limit " + Self.room(
                    limit: limit, parameters: parameters, amount: amount, delay: delay,
                    retry: "retry after the next snapshot, in")
        case .tenantConcurrency(let key, let inFlight, let maximum):
            return "tenant \(key.tenant) has \(inFlight) requests in flight on \(key.upstream) "
                + "(max_concurrency \(maximum))"
        case .gatewayConcurrency(let upstream, let cap):
            return "this gateway has \(cap) requests in flight on \(upstream), its maximum"
        case .gatewayCap(let upstream, let limit, let parameters, let amount, let reserve, let delay):
            let kept = reserve.isEmpty ? "" : " beside the room kept for \(reserve.purpose.rawValue)"
            return "this gateway's share of \(upstream) for all its tenants, "
                + Self.room(limit: limit, parameters: parameters, amount: amount, delay: delay, kept: kept)
        }
    }
}

/// The outcome of evaluating a request against the limits.
enum Verdict: Sendable {
    case admit(Charge)
    case deny(Failure)
}

/// How to charge an admitted request.
struct Charge: Sendable {
    var rpmFromCredit = false
    var tpmFromCredit = false
    /// Borrowed from the upstream's idle allocation (``IdleCapacity``).
    var rpmBorrowed = false
    var tpmBorrowed = false
    /// Shadow mode: the would-be denial; the request is admitted uncharged.
    var shadowFailure: Failure?
}

/// A request waiting in the admission queue.
struct Waiter: Sendable {
    var id: UInt64
    var request: AdmissionRequest
    var key: TenantKey
    var estimate: Int
    var enqueuedAt: Double
    /// When its class's maximum wait is over.
    var deadline: Double
    /// Weighted-fair-queuing tag of its place in its tenant's schedule: orders waiters of one task class
    /// across tenants by `queue_weight`. It belongs to the place, not to the request: when a call of an older
    /// task goes ahead, the waiters behind it move one place back in the schedule with their tags (see
    /// ``WaitQueue``), so reordering a tenant's own calls never changes when the tenant is served.
    var tag: Double
    /// The arrival stamp that goes with `tag` (the id of the waiter that was given the tag): breaks ties
    /// between equal tags by arrival, across tenants as before.
    var seq: UInt64
    /// Its rank among its tenant's waiters of its class (task deadline passed, task start).
    var position: LanePosition
    /// Reported `queued` once it had waited ``GatewayConfiguration/queuedReportAfter``
    /// (``EnforcerState/reportLongWaits(now:effects:)``).
    var reported = false
    /// The request as its attempt or denial is reported: once reported `queued`, with `retry` one higher, so
    /// that Allot counts it once as demand.
    var reportedRequest: AdmissionRequest {
        guard reported else { return request }
        var request = request
        request.retry += 1
        return request
    }
    /// What blocked it at its last evaluation, and when that was.
    var failure: Failure
    var failureAt: Double

    /// Seconds still to go, at `now`, of the refill its failure waits for (nil: it waits for no refill).
    func refillLeft(at now: Double) -> Double? {
        guard failure.fromRefill, let delay = failure.retryAfter else { return nil }
        return max(0, delay - (now - failureAt))
    }
    var onDecision: @Sendable (Admission) -> Void
    /// Its (tenant, upstream)'s lane in ``WaitQueue`` (set when it is inserted there).
    var keyID: Int = 0

    /// - Parameter position: nil for the position of a call without task context arriving at `enqueuedAt`.
    init(
        id: UInt64, request: AdmissionRequest, key: TenantKey, estimate: Int, enqueuedAt: Double, deadline: Double,
        tag: Double, failure: Failure, onDecision: @escaping @Sendable (Admission) -> Void,
        position: LanePosition? = nil
    ) {
        self.id = id
        self.request = request
        self.key = key
        self.estimate = estimate
        self.enqueuedAt = enqueuedAt
        self.deadline = deadline
        self.tag = tag
        self.seq = id
        self.position = position ?? LanePosition(late: false, started: enqueuedAt)
        self.failure = failure
        self.failureAt = enqueuedAt
        self.onDecision = onDecision
    }
}

/// A waiter to report `queued` at `due` if it still waits then (``EnforcerState/waitReports``).
struct WaitReport: Sendable {
    var due: Double
    var id: UInt64
    var slot: Int
}

/// When a pump must look at a lane's head again (``EnforcerState/laneChecks``).
struct LaneCheck: Comparable, Sendable {
    var at: Double
    var lane: Int

    static func < (lhs: LaneCheck, rhs: LaneCheck) -> Bool { lhs.at != rhs.at ? lhs.at < rhs.at : lhs.lane < rhs.lane }
}

/// What a state change asks the ``Enforcer`` to do once its lock is released.
struct Effects {
    var decisions: [(@Sendable (Admission) -> Void, Admission)] = []
    var telemetry: [TelemetryRecord] = []
    var events: [GatewayEvent] = []
    /// The earliest instant the queue or the lease needs attention moved earlier than the waker's alarm.
    var wakeEarlier = false
}

/// Everything an ``Enforcer`` knows, mutated only under its lock. Every method takes `now` (common rules: no
/// clock reads inside the maths), so the same calls on the same inputs give the same answers.
struct EnforcerState {
    let configuration: GatewayConfiguration
    /// The limits in force: ``snapshotTable`` with the brakes applied.
    var table: LimitTable
    /// The limits of the snapshot (or fallback, or bootstrap) in force.
    var snapshotTable: LimitTable
    /// Per upstream, the fraction of the snapshot's limits in force per dimension (absent: no brake).
    var brakes: [String: DimensionValues] = [:]
    typealias StateIndex = Dictionary<TenantKey, TenantState>.Index
    var states: [TenantKey: TenantState] = [:]
    /// Waiting counts and fair-queuing tags of the pairs that have waiters.
    var queueAccounts: [TenantKey: QueueAccount] = [:]
    var tasks: [TaskKey: TaskUsage] = [:]
    var tickets: [UInt64: TicketRecord] = [:]
    /// Requests in flight per upstream (all of them, charged or not): the gateway's own cap counts these.
    var upstreamInFlight: [String: Int] = [:]
    /// Per upstream: the allocation this gateway's tenants leave idle, which others may borrow.
    var idle: [String: IdleCapacity] = [:]
    /// Per upstream: the gateway's own cap, the sum of its slices (``GatewayCap``).
    var caps: [String: GatewayCap] = [:]
    /// Per upstream and dimension: until when (gateway time) a request that its own buckets admit is held by
    /// the cap (``GatewayCap``) in that dimension. Nobody borrows idle allocation in it there until then: the
    /// idle allocation is what that request is waiting to use, and borrowers with smaller requests would take
    /// every refill of the cap before it.
    var capHeldUntil: [String: CapHold] = [:]
    /// Per upstream: the waiters holding its idle buckets for their requests (``IdleHold``).
    var idleHeld: [String: IdleHold] = [:]
    /// Per upstream: when the last realtime call came and its tokens (``GatewayConfiguration/capRealtimeReserve``);
    /// entries older than ``GatewayConfiguration/capRealtimeMemory`` are dropped at each snapshot.
    var realtimeSeen: [String: RealtimeSeen] = [:]
    /// Per upstream: the limits its responses stated, for the brake (``GatewayConfiguration/followStatedLimits``).
    var stated: [String: StatedLimits] = [:]
    /// Waiting requests, one lane per (tenant, upstream).
    var queue = WaitQueue()
    /// The waiters not yet reported `queued` (``GatewayConfiguration/queuedReportAfter``), in the order they
    /// came (so by the time their report is due), from ``waitReportsStart`` on; entries of waiters that left
    /// are skipped when reached.
    var waitReports: [WaitReport] = []
    var waitReportsStart = 0
    /// The places a pump visits, kept between pumps so that their storage is reused.
    var pumpVisits = MinHeap<QueuePlace>()
    /// The earliest deadline among the waiters or refill time of a pair's head (exact after a pump, never
    /// later than the true minimum otherwise), so ``nextWakeTime()`` does not scan the queue.
    var queueWake: Double = .infinity
    /// When to look again at each lane whose head stayed at its last evaluation: the soonest it may pass by
    /// refill alone (``Failure/possibleIn(_:)``, no sooner than the retry-after or ``borrowRecheck``, whichever
    /// is shorter, so that a pump does not spin). Entries of lanes since served are left to go stale: a
    /// look at a lane is never wrong, only wasted.
    var laneChecks = MinHeap<LaneCheck>()
    /// True when every head waits for a refill (``laneChecks``) and nothing but the clock changed since each
    /// was evaluated (no limits installed, no completion): a pump for the passage of time then visits only
    /// the lanes due in `laneChecks` and the expired waiters. True of an empty queue.
    var headsWaitForRefill = true
    /// Per schedule (``TaskClass/schedule``: realtime, every other class): the tag of the last waiter served
    /// (weighted fair queuing's virtual time).
    var virtualTime = (0.0, 0.0)
    var nextID: UInt64 = 1
    var statistics = EnforcementStatistics()
    /// The instant the waker sleeps until; enqueueing something due earlier rings it.
    var armedWake: Double? = nil
    var stateCollectionThreshold = 4_096
    /// The latest instant seen (``noticeClock(_:monotonic:forward:effects:)``), and the steady clock's reading with it.
    var latestNow = -Double.infinity
    var latestMonotonic: Double?
    /// Allot's clock as measured on the answers to the gateway's polls.
    var serverClock = ServerClock()

    /// False when nobody receives telemetry: the events are then not even built.
    let reportsTelemetry: Bool

    init(configuration: GatewayConfiguration, reportsTelemetry: Bool = true) {
        self.configuration = configuration
        self.reportsTelemetry = reportsTelemetry
        self.table = LimitTable.bootstrap(configuration)
        self.snapshotTable = table
    }

    /// How far ahead of the gateway's clock a snapshot's `generated_at` may be and still be believed when versions go
    /// back (an hour: servers and gateways on NTP are within a second; a stray may be dated year 9999).
    static let futureTolerance = 3_600.0

    /// Allot's clock as the gateway reads it at `now`.
    func serverNow(_ now: Double) -> Double { serverClock.serverNow(now) }

    /// The enforced lease's end on the gateway's clock (``ServerClock/leaseEnd(_:)``); nil without a lease.
    var leaseEnd: Double? {
        guard let snapshot = table.snapshot, !table.inFallback else { return nil }
        return serverClock.leaseEnd(snapshot)
    }

    /// Takes a `304`'s measure of Allot's clock: `measure` is Allot's time in the answer (`Allot-Server-Time`) minus
    /// the gateway's when it arrived (nil: the server sent none). A lease judged over on the gateway's clock alone is
    /// enforced again; one that runs out sooner by Allot's ends sooner.
    mutating func observeServerClock(offset measure: Double?, now: Double, effects: inout Effects) {
        adopt(serverClock.measuring(measure, at: now), now: now, effects: &effects)
        resumeLeaseOrCheck(now: now, effects: &effects)
    }

    /// Puts `clock` in force, and says so when its offset moved.
    private mutating func adopt(_ clock: ServerClock, now: Double, effects: inout Effects) {
        serverClock = clock
        if let offset = serverClock.report() { effects.events.append(.serverClock(offset: offset)) }
    }

    /// After Allot's clock was measured again: the enforced snapshot, on its floors by the gateway's clock alone, is a
    /// lease again if it is live by Allot's (never a drain); otherwise the lease is checked. The waker is rung when the
    /// lease now ends sooner than it is set for.
    private mutating func resumeLeaseOrCheck(now: Double, effects: inout Effects) {
        if table.inFallback, let snapshot = table.snapshot, !snapshot.bornExpired, now < serverClock.leaseEnd(snapshot)
        {
            install(LimitTable.lease(snapshot, configuration), at: now)
            effects.events.append(.leaseResumed(version: snapshot.version))
            collectIdle(now: now)
            pump(now: now, effects: &effects)
        } else {
            checkLease(now: now, effects: &effects)
        }
        if let end = leaseEnd, armedWake.map({ end < $0 }) ?? true { effects.wakeEarlier = true }
    }

    /// How far back the clock must step before the buckets are rebased: below it, instants out of order by a
    /// little (callers reading the clock before taking the lock) change nothing.
    static let clockStepTolerance = 1.0

    /// Sees every instant the enforcer is given. When the clock stepped back by more than ``clockStepTolerance``
    /// (NTP, an operator), every bucket is rebased at `now`: refill resumes at once instead of waiting for the
    /// clock to pass the instants recorded before the step (round 14: a step back of an hour denied every
    /// tenant for that hour). The queue's own instants move back by the step: a waiter's maximum wait, the wait
    /// report, the lanes' next looks (round 32: an interactive call that may wait 5 s was still queued 40 s
    /// after a step back of an hour, and would have been for the hour). Leases and task deadlines are the
    /// server's and the caller's instants, and stay (a measured offset of Allot's clock grows by the step, so a
    /// lease still ends when Allot's clock reaches its `expires_at`); so does a waiter's rank among its tenant's
    /// calls (its task's start, or its arrival for a call without one): a call arriving after the step ranks ahead
    /// of the tenant's calls without a task that waited through it, until they leave (their maximum wait at most).
    ///
    /// `monotonic`: seconds on a clock that is never stepped, read with `now`. The step is measured from where the
    /// wall clock should be, the latest instant plus the steady time since it; without it, from the latest instant,
    /// and an idle gateway whose sleep noticed the step late would shift its waits by its idle time too.
    ///
    /// With `forward` (the instants are the wall clock's: ``Enforcer``'s `detectsStepsForward`), an instant further
    /// ahead of where the wall clock should be than ``clockStepTolerance`` is a step forward, handled alike: the
    /// gateway's own instants move with it, the buckets are rebased (the step refills nothing), and the measured offset
    /// of Allot's clock shrinks by it, so that a lease still ends when Allot's clock reaches its `expires_at` (round
    /// 41 F5: the lease ended early by the step until the next answer). `monotonic` must then count time suspended
    /// (`CLOCK_BOOTTIME`): a gateway suspended for an hour has not stepped its clock, and its lease has run out.
    mutating func noticeClock(_ now: Double, monotonic: Double? = nil, forward: Bool = false, effects: inout Effects) {
        if forward, let monotonic, let before = latestMonotonic {
            // Against where the wall clock should be, both ways: a step back shorter than the time since the latest
            // instant is one too (review of session 57, L2: 10 s back, 20 s after the last call, went unseen).
            let step = now - (latestNow + max(0, monotonic - before))
            if abs(step) > Self.clockStepTolerance {
                stepped(by: step, now: now, monotonic: monotonic, effects: &effects)
                if step > 0 { statistics.clockStepsForward += 1 } else { statistics.clockStepsBack += 1 }
                return
            }
        }
        // The latest instant, so that steps back each under the tolerance add up to one that is not.
        guard now < latestNow - Self.clockStepTolerance else {
            if now >= latestNow {
                latestNow = now
                latestMonotonic = monotonic
            }
            return
        }
        var expected = latestNow
        if let monotonic, let before = latestMonotonic, monotonic > before { expected += monotonic - before }
        stepped(by: min(0, now - expected), now: now, monotonic: monotonic, effects: &effects)
        statistics.clockStepsBack += 1
    }

    /// The gateway's clock stepped by `step` (``noticeClock(_:monotonic:forward:effects:)``).
    private mutating func stepped(by step: Double, now: Double, monotonic: Double?, effects: inout Effects) {
        shiftInstants(by: step)
        // Allot's clock did not move with ours: it is now further from it by the step (the next poll measures it
        // again).
        serverClock.gatewayStepped(by: step)
        // Said now, not at the next answer (second review of round 42, L-1).
        if let offset = serverClock.report() { effects.events.append(.serverClock(offset: offset)) }
        latestNow = now
        latestMonotonic = monotonic
        for index in states.indices { states.values[index].rebase(to: now, step: step) }
        for upstream in idle.keys {
            idle[upstream]?.rpm?.rebase(to: now, step: step)
            idle[upstream]?.tpm?.rebase(to: now, step: step)
        }
        for upstream in caps.keys {
            caps[upstream]?.rpm?.rebase(to: now, step: step)
            caps[upstream]?.tpm?.rebase(to: now, step: step)
        }
    }

    /// Moves the gateway's own instants by `step` (the wall clock stepped, back when negative;
    /// ``noticeClock(_:monotonic:forward:effects:)``): the queue's (maximum waits, wait reports, the lanes' next
    /// looks, the waker's), the holds waiters placed on the idle and cap buckets, and what the gateway saw when
    /// (realtime calls for the cap's reserve, stated limits for the brake, tasks).
    private mutating func shiftInstants(by step: Double) {
        if !queue.isEmpty {
            queue.shiftInstants(by: step)
            laneChecks.updateInOrder { $0.at += step }
            for index in waitReports.indices { waitReports[index].due += step }
        }
        // Not later with a step forward: it may be a caller's task deadline, which does not move, and waking early is
        // harmless (the pump works it out again).
        if queueWake.isFinite, step < 0 { queueWake += step }
        armedWake = armedWake.map { $0 + step }
        for upstream in idleHeld.keys {
            idleHeld[upstream]?.rpm?.until += step
            idleHeld[upstream]?.tpm?.until += step
        }
        for upstream in capHeldUntil.keys {
            capHeldUntil[upstream]?.rpm += step
            capHeldUntil[upstream]?.tpm += step
        }
        for upstream in realtimeSeen.keys { realtimeSeen[upstream]?.at += step }
        for upstream in stated.keys {
            stated[upstream]?.requests.shift(by: step)
            stated[upstream]?.tokens.shift(by: step)
        }
        for key in tasks.keys { tasks[key]?.lastSeen += step }
    }

    // MARK: Limits

    /// Switches to `fallback` if the lease has ended by `now`. The buckets are retuned at the expiry instant,
    /// not at `now`, so the result does not depend on when the expiry is noticed.
    mutating func checkLease(now: Double, effects: inout Effects) {
        guard let end = leaseEnd, now >= end, let snapshot = table.snapshot else { return }
        install(LimitTable.fallback(snapshot, configuration), at: end)
        statistics.leaseExpiries += 1
        effects.events.append(.leaseExpired(version: snapshot.version, expiresAt: snapshot.expiresAt))
    }

    /// Replaces the limits in force, retuning every known tenant's buckets at `instant` (no refill).
    mutating func install(_ newTable: LimitTable, at instant: Double) {
        snapshotTable = newTable
        for upstream in brakes.keys { brakes[upstream] = brakeFractions(upstream, at: instant) }
        brakes = brakes.filter { $0.value != Self.noBrake }
        enforceSnapshotTable(at: instant)
    }

    /// Puts ``snapshotTable`` with the brakes in force at `instant`: every known tenant's buckets, the idle
    /// buckets and the caps are retuned (no refill).
    private mutating func enforceSnapshotTable(at instant: Double) {
        headsWaitForRefill = false
        let newTable = brakes.isEmpty ? snapshotTable : snapshotTable.braked(brakes)
        table = newTable
        for index in states.indices {
            guard let policy = newTable.policy(for: states.keys[index]) else { continue }
            states.values[index].retune(to: policy, at: instant, allowance: configuration.borrowAllowance)
        }
        let borrow = configuration.borrowIdle
        let capped = configuration.capWindow > 0
        guard borrow || capped else { return }
        let sums = IdleCapacity.sums(
            for: newTable.tenants.lazy.map { (upstream: $0.key.upstream, limits: $0.value.limits) })
        var nextIdle: [String: IdleCapacity] = [:]
        var nextCaps: [String: GatewayCap] = [:]
        for (upstream, sum) in sums {
            if borrow, let capacity = Self.sized(idle[upstream], sum, window: configuration.borrowWindow, at: instant) {
                nextIdle[upstream] = capacity
            }
            if capped, let cap = Self.sized(caps[upstream], sum, window: configuration.capWindow, at: instant) {
                nextCaps[upstream] = cap
            }
        }
        if capped, configuration.newcomerCapShare > 0, let newcomers = newTable.defaultPolicy?.limits {
            // Upstreams where every tenant is a newcomer: a share of the upstream's capacity.
            for (upstream, entry) in newTable.upstreams where sums[upstream] == nil {
                let sum = GatewayCap.newcomerSum(
                    capacity: entry.capacity, share: configuration.newcomerCapShare, newcomer: newcomers)
                if let cap = Self.sized(caps[upstream], sum, window: configuration.capWindow, at: instant) {
                    nextCaps[upstream] = cap
                }
            }
        }
        idle = nextIdle
        caps = nextCaps
        if !realtimeSeen.isEmpty {
            realtimeSeen = realtimeSeen.filter { instant - $0.value.at <= configuration.capRealtimeMemory }
        }
    }

    /// `existing` (or new buckets) retuned at `instant` to `window` seconds of the summed rates; nil when neither
    /// dimension has a finite, positive sum.
    private static func sized<Buckets: SummedBuckets>(
        _ existing: Buckets?, _ sum: (rpm: Bucket?, tpm: Bucket?), window: Double, at instant: Double
    ) -> Buckets? {
        let rpm = IdleCapacity.sized(sum.rpm, window: window)
        let tpm = IdleCapacity.sized(sum.tpm, window: window)
        guard rpm != nil || tpm != nil else { return nil }
        var buckets = existing ?? Buckets()
        buckets.retune(rpm: rpm, tpm: tpm, at: instant)
        return buckets
    }

    /// What an answer carrying a snapshot said of Allot's clock (review of round 42, L-3: a `Double??` whose `nil` and
    /// `.some(nil)` meant opposite things).
    enum ClockReading {
        /// Nothing: the clock stays as it is (``Enforcer/apply(_:now:)``).
        case unchanged
        /// The answer carried no time (a server before `Allot-Server-Time`): leases go back on the gateway's clock.
        case noTime
        /// Allot's time in the answer minus the gateway's when it arrived
        /// (``observeServerClock(offset:now:effects:)``).
        case measured(Double)
    }

    /// Enforces `snapshot` from `now` on, unless its version is below the enforced one (rejected) or equal (unchanged).
    /// `reading`: what the answer said of Allot's clock (``ClockReading``), taken only with a snapshot that is not
    /// rejected, and before its lease is judged. The rules for a lower version read Allot's clock as it stood before
    /// the answer: an answer does not vouch for its own snapshot.
    mutating func apply(
        _ snapshot: Snapshot, now: Double, reading: ClockReading = .unchanged, effects: inout Effects
    ) -> SnapshotApplyResult {
        let clock: ServerClock
        switch reading {
        case .unchanged: clock = serverClock
        case .noTime: clock = serverClock.measuring(nil, at: now)
        case .measured(let measure): clock = serverClock.measuring(measure, at: now)
        }
        let previous = table.version
        if let previous {
            // On its fallback (the enforced lease ended), a gateway takes a lower version whose lease is live: the
            // server's history went back (restored from a backup) and a live allocation beats the floors. Before,
            // a fleet stayed on its floors until the server's versions passed theirs again (round 14).
            // Whether the enforced lease is over, judged on the clock before this answer and not yet enforced: the
            // answer's clock may keep it (review of round 42, L-2: putting the floors in force here lowered every
            // bucket to the floors' bursts before the same version or its successor, live on the answer's clock,
            // was enforced again).
            let leaseOver = table.inFallback || leaseEnd.map { now >= $0 } == true
            let serverNow = serverNow(now)
            let serverWentBack = leaseOver && serverNow < snapshot.expiresAt
            // Nor is a lower version the server generated after the one enforced (by its own clock) stale: its
            // history went back, or the enforced one was a stray (round 32: one response carrying version 2^62, from
            // a proxy or another deployment, had every real snapshot rejected until its lease ran out); a response
            // delivered late is older by both. Only with a live lease (a late one would put the gateway on its
            // floors), and from a server whose clock is not far ahead of ours: a stray dated in the future would
            // otherwise win, or, enforced, keep winning (``futureTolerance``).
            let enforcedAt = table.snapshot?.generatedAt ?? .infinity
            let generatedLater =
                serverNow < snapshot.expiresAt && snapshot.generatedAt <= serverNow + Self.futureTolerance
                && (snapshot.generatedAt > enforcedAt || enforcedAt > serverNow + Self.futureTolerance)
            if snapshot.version < previous && !serverWentBack && !generatedLater {
                checkLease(now: now, effects: &effects)
                statistics.snapshotsRejected += 1
                let reason = "version \(snapshot.version) is below the enforced version \(previous)"
                effects.events.append(
                    .snapshotRejected(version: snapshot.version, enforced: previous, reason: reason))
                return .rejected(reason: reason)
            }
        }
        adopt(clock, now: now, effects: &effects)
        if snapshot.version == previous {
            resumeLeaseOrCheck(now: now, effects: &effects)
            return .unchanged
        }
        checkLease(now: now, effects: &effects)
        let expired = snapshot.bornExpired || now >= serverClock.leaseEnd(snapshot)
        install(
            expired ? LimitTable.fallback(snapshot, configuration) : LimitTable.lease(snapshot, configuration),
            at: now)
        statistics.snapshotsApplied += 1
        effects.events.append(.snapshotApplied(version: snapshot.version, previous: previous))
        if expired {
            statistics.leaseExpiries += 1
            effects.events.append(.leaseExpired(version: snapshot.version, expiresAt: snapshot.expiresAt))
        }
        collectIdle(now: now)
        pump(now: now, effects: &effects)
        if let end = leaseEnd, armedWake.map({ end < $0 }) ?? true { effects.wakeEarlier = true }
        return .applied
    }

    /// Forgets tenant states that are full and idle, and tasks unseen for `taskIdleTimeout` (then the least
    /// recently seen beyond `maxTrackedTasks`), so memory follows the active set, not every tenant ever seen.
    ///
    /// Idle states are removed in place, so the dictionary keeps its capacity and the active set does not pay
    /// for re-growing it; the next collection on growth waits until twice the larger of the listed tenants
    /// and what survived, so a gateway with many active tenants does not collect on every new one.
    mutating func collectIdle(now: Double) {
        var idle: [TenantKey] = []
        for (key, state) in states where queueAccounts[key] == nil && state.isIdle(at: now) { idle.append(key) }
        for key in idle { states.removeValue(forKey: key) }
        stateCollectionThreshold = max(4_096, 2 * table.tenants.count, 2 * states.count)
        collectTasks(now: now)
    }

    /// Forgets tasks unseen for `taskIdleTimeout`, then the least recently seen beyond `maxTrackedTasks` (ties
    /// broken by tenant and task id, so the result does not depend on dictionary order).
    mutating func collectTasks(now: Double) {
        let horizon = now - configuration.taskIdleTimeout
        tasks = tasks.filter { $0.value.lastSeen >= horizon }
        if tasks.count > configuration.maxTrackedTasks {
            let keep = tasks.sorted { lhs, rhs in
                if lhs.value.lastSeen != rhs.value.lastSeen { return lhs.value.lastSeen > rhs.value.lastSeen }
                return (lhs.key.tenant, lhs.key.taskID) < (rhs.key.tenant, rhs.key.taskID)
            }
            .prefix(configuration.maxTrackedTasks)
            tasks = Dictionary(uniqueKeysWithValues: keep.map { ($0.key, $0.value) })
        }
    }

    // MARK: Evaluation

    /// Reservation for a request: the caller's estimate, else prompt + the snapshot's learned completion
    /// percentile, else prompt + the configured default.
    func estimate(for request: AdmissionRequest, learned: TokenEstimate?) -> Int {
        if let estimated = request.estimatedTokens { return max(0, estimated) }
        let completion: Double
        if let learned {
            completion = configuration.estimatePercentile == .p50 ? learned.p50 : learned.p95
        } else {
            completion = Double(configuration.defaultCompletionEstimate)
        }
        let safeCompletion = completion.isFinite ? max(0, completion.rounded(.up)) : 0
        return .saturatingTokenSum(request.promptTokens ?? 0, Int(min(safeCompletion, 1e12)))
    }

    /// Where the tenant's state is, created full on first sight (a new bucket starts at its burst); nil when no
    /// limits apply to it (no snapshot yet and no bootstrap limits). The index stays valid until `states` is
    /// next inserted into or filtered.
    mutating func stateIndex(_ key: TenantKey, now: Double) -> StateIndex? {
        if let index = states.index(forKey: key) { return index }
        guard let policy = table.policy(for: key) else { return nil }
        if states.count >= stateCollectionThreshold { collectIdle(now: now) }
        states[key] = TenantState(policy: policy, now: now, allowance: configuration.borrowAllowance)
        return states.index(forKey: key)
    }

    /// Evaluates `request` against every limit, in the order: budget `deny`, circuit, task budget, a passed
    /// task deadline (with ``PastDeadlinePolicy/deny``), queue order (for new arrivals, at `arrival`; nil for a
    /// waiter), tenant concurrency, the gateway's own cap, then the RPM and TPM buckets (with the burst credit
    /// as a second source). The non-waitable limits come first so that a request that can never pass is told
    /// so at once rather than queued.
    ///
    /// In `shadow` mode the first failure of the tenant's own limits is recorded and the request is admitted
    /// uncharged — exactly what enforcing would have denied, since a denied request would not have consumed
    /// anything either. Limits that are not the tenant's (an open circuit, the gateway's own cap) apply in
    /// every mode.
    func evaluate(
        _ request: AdmissionRequest, key: TenantKey, at index: StateIndex?, estimate: Int, now: Double,
        arrival: LanePosition?
    ) -> Verdict {
        guard let index else {
            return .deny(
                Failure(
                    limit: .noSnapshot, code: "no_snapshot",
                    message: "no allocation snapshot received yet", retryAfter: configuration.defaultRetryAfter,
                    fromRefill: false, shadowable: false))
        }
        let tenantState = states.values[index]
        let policy = tenantState.policy
        var shadowFailure: Failure?

        func check(_ failure: Failure) -> Verdict? {
            if policy.shadow && failure.shadowable {
                if shadowFailure == nil { shadowFailure = failure }
                return nil
            }
            return .deny(failure)
        }

        if let deny = policy.deny {
            let failure = Failure(
                limit: .budget, code: deny,
                message: "tenant \(key.tenant) is denied on \(key.upstream): \(deny)",
                retryAfter: table.refreshInterval, fromRefill: false, shadowable: true)
            if let verdict = check(failure) { return verdict }
        }
        if table.hasOpenCircuit, let upstream = table.upstreams[key.upstream], upstream.circuitOpen,
            upstream.shed.contains(request.taskClass.rawValue)
        {
            return .deny(
                Failure(
                    limit: .circuit, code: "circuit_open",
                    message: "the circuit of \(key.upstream) is open (\(upstream.state)); "
                        + "\(request.taskClass.rawValue) requests are shed",
                    retryAfter: table.refreshInterval, fromRefill: false, shadowable: false))
        }
        if let taskID = request.taskID, let budget = table.taskBudgets[request.taskClass] {
            let usage = tasks[TaskKey(tenant: key.tenant, taskID: taskID)]
            let calls = usage?.calls ?? 0
            let tokens = usage?.tokens ?? 0
            if calls + 1 > budget.maxCalls || tokens + Double(estimate) > Double(budget.maxTokens) {
                // The tokens are summed from the provider's usage: formatted, not converted to Int, so a usage
                // report near Int.max cannot trap here.
                let failure = Failure(
                    limit: .taskBudget, code: "task_budget_exceeded",
                    message: "task \(taskID) of tenant \(key.tenant) has used \(calls) calls and "
                        + "\(Self.format(tokens)) tokens; the \(request.taskClass.rawValue) budget is "
                        + "\(budget.maxCalls) calls and \(budget.maxTokens) tokens",
                    retryAfter: nil, fromRefill: false, shadowable: true)
                if let verdict = check(failure) { return verdict }
            }
        }
        if configuration.pastDeadline == .deny, request.isLate(at: now) {
            if let verdict = check(deadlinePassed(request, now: now)) { return verdict }
        }
        let rank = request.taskClass.rank
        if let arrival, !queueAccounts.isEmpty, let account = queueAccounts[key], account.waiting.atOrAbove(rank) > 0,
            let head = queue.headPlace(of: key), head.rank < rank || !arrival.precedes(head.position)
        {
            // Never overtake a waiting request of the same tenant and equal or higher priority (class, then a
            // task deadline not passed, then an older or the same task): it would take the tokens the waiter is
            // accumulating for, and a large request could starve behind small ones. The lane is in service
            // order, so its head is the most urgent of them; an arrival that ranks before it goes on to the
            // limits (a call of an older task goes first, as one of a higher class does).
            let waitingHead = queue[head.slot]
            var failure = waitingHead.failure
            if let left = waitingHead.refillLeft(at: now), let delay = failure.retryAfter {
                // The head's refill as of now: its failure may be from a while ago (``pump(now:effects:changed:)``).
                failure.retryAfter = max(left, min(delay, Self.borrowRecheck))
            }
            failure.message =
                "requests of tenant \(key.tenant) on \(key.upstream) are queued ahead (\(failure.limit.rawValue))"
            failure.fromRefill = false
            failure.shadowable = false
            return .deny(failure)
        }
        let maxConcurrency = policy.maxConcurrency ?? configuration.defaultMaxConcurrency
        if let maxConcurrency, tenantState.inFlight >= maxConcurrency {
            let failure = Failure(
                limit: .concurrency, code: "concurrency_limited",
                text: .tenantConcurrency(key: key, inFlight: tenantState.inFlight, maximum: maxConcurrency),
                retryAfter: configuration.defaultRetryAfter, fromRefill: false, shadowable: true)
            if let verdict = check(failure) { return verdict }
        }
        if let cap = configuration.maxInFlightPerUpstream, upstreamInFlight[key.upstream, default: 0] >= cap {
            return .deny(
                Failure(
                    limit: .concurrency, code: "gateway_concurrency_limited",
                    text: .gatewayConcurrency(upstream: key.upstream, cap: cap),
                    retryAfter: configuration.defaultRetryAfter, fromRefill: false, shadowable: false))
        }
        var charge = Charge()
        if shadowFailure == nil {
            let amount = Double(estimate)
            let rpmFits = tenantState.rpm.admits(1, at: now)
            let tpmFits = tenantState.tpm.admits(amount, at: now)
            let credit = tenantState.credit
            // A credit's expiry is Allot's instant, like a lease's.
            charge.rpmFromCredit = !rpmFits && (credit?.calls(at: serverNow(now)) ?? 0) >= 1
            charge.tpmFromCredit = !tpmFits && (credit?.tokens(at: serverNow(now)) ?? 0) >= amount
            var rpmOK = rpmFits || charge.rpmFromCredit
            var tpmOK = tpmFits || charge.tpmFromCredit
            var lender: IdleCapacity?
            var idleHold: (rpm: Double?, tpm: Double?)?
            var idleHeldUntil: (rpm: Double?, tpm: Double?) = (nil, nil)
            func later(_ idleDelay: Double?, _ allowance: TokenBucket?, _ amount: Double, ceiling: TokenBucket?)
                -> Double?
            {
                guard let idleDelay = idleDelay.flatMap({ Self.afterRoom($0, ceiling, amount, at: now) }) else {
                    return nil
                }
                guard let allowance else { return idleDelay }
                return allowance.delay(until: amount, at: now).map { max(idleDelay, $0) }
            }
            if !rpmOK || !tpmOK, !idle.isEmpty, policy.deny == nil, !tenantState.rpm.isClosed,
                !tenantState.tpm.isClosed
            {
                // Work conservation: what the others leave idle (never from their own buckets), except in a
                // dimension where a request with room of its own is held by the cap: that is its allocation.
                lender = idle[key.upstream]
                if let held = capHeldUntil[key.upstream] {
                    if now <= held.rpm { lender?.rpm = nil }
                    if now <= held.tpm { lender?.tpm = nil }
                }
                // Idle allocation another waiter holds (``IdleHold``) is not lent now; it may be once the hold ends.
                var available = lender
                if let held = idleHeld[key.upstream] {
                    if IdleHold.excludes(held.rpm, key, rank: rank, at: now) {
                        available?.rpm = nil
                        idleHeldUntil.rpm = held.rpm!.until
                    }
                    if IdleHold.excludes(held.tpm, key, rank: rank, at: now) {
                        available?.tpm = nil
                        idleHeldUntil.tpm = held.tpm!.until
                    }
                }
                let rpmBorrow = !rpmOK && IdleCapacity.lends(available?.rpm, 1, at: now)
                let tpmBorrow = !tpmOK && IdleCapacity.lends(available?.tpm, amount, at: now)
                if (rpmOK || rpmBorrow) && (tpmOK || tpmBorrow),
                    tenantState.mayBorrow(rpm: rpmBorrow, tpm: tpmBorrow, amount: amount, from: available, at: now)
                {
                    charge.rpmBorrowed = rpmBorrow
                    charge.tpmBorrowed = tpmBorrow
                    rpmOK = true
                    tpmOK = true
                } else if arrival == nil, let available {
                    // A waiter short of idle allocation only (within its allowance): the hold it would take.
                    idleHold = Self.idleShortfall(
                        available, tenantState.borrowable, ceiling: tenantState.ceilingRoom, amount: amount,
                        rpm: rpmOK || rpmBorrow, tpm: tpmOK || tpmBorrow, at: now)
                }
            }
            if !rpmOK || !tpmOK {
                var failure = bucketFailure(
                    tenantState, key: key, amount: amount, rpmOK: rpmOK, tpmOK: tpmOK, now: now)
                failure.idleHold = idleHold
                if let lender, failure.fromRefill, let own = failure.retryAfter {
                    // Idle allocation may come sooner than the own refill (a lower bound: others draw on it too).
                    // …and no sooner than its own borrow allowance has room.
                    let allowance = tenantState.borrowable
                    let rpmDelay =
                        rpmOK
                        ? 0
                        : later(
                            IdleCapacity.delay(lender.rpm, 1, at: now), allowance?.rpm, 1,
                            ceiling: tenantState.ceilingRoom.rpm)
                            .map { max($0, (idleHeldUntil.rpm ?? now) - now) }
                    let tpmDelay =
                        tpmOK
                        ? 0
                        : later(
                            IdleCapacity.delay(lender.tpm, amount, at: now), allowance?.tpm, amount,
                            ceiling: tenantState.ceilingRoom.tpm)
                            .map { max($0, (idleHeldUntil.tpm ?? now) - now) }
                    if let rpmDelay, let tpmDelay {
                        failure.retryAfter = min(own, max(rpmDelay, tpmDelay, Self.borrowRecheck))
                    }
                    // The soonest it may pass by refill alone, the dimensions apart: in each, its own refill or
                    // idle allocation (after a cap hold; beyond the allowance too, ``TenantState/mayBorrow``).
                    func soonest(
                        _ ok: Bool, _ own: TokenBucket, _ idle: TokenBucket?, _ allowance: TokenBucket?,
                        _ amount: Double, heldUntil: Double, ceiling: TokenBucket?
                    ) -> Double {
                        guard !ok else { return 0 }
                        let borrow = Self.borrowable(idle, allowance, amount, ceiling: ceiling, at: now)
                            .map { max($0, heldUntil - now) }
                        return min(own.delay(until: amount, at: now) ?? .infinity, borrow ?? .infinity)
                    }
                    // The idle buckets as they are, a cap hold aside (a hold past, or none, delays nothing).
                    let unheld = idle[key.upstream]
                    var held = capHeldUntil[key.upstream] ?? CapHold()
                    if let until = idleHeldUntil.rpm { held.extend(.rpm, until: until) }
                    if let until = idleHeldUntil.tpm { held.extend(.tpm, until: until) }
                    let earliest = max(
                        soonest(
                            rpmOK, tenantState.rpm, unheld?.rpm, allowance?.rpm, 1, heldUntil: held.rpm,
                            ceiling: tenantState.ceilingRoom.rpm),
                        soonest(
                            tpmOK, tenantState.tpm, unheld?.tpm, allowance?.tpm, amount, heldUntil: held.tpm,
                            ceiling: tenantState.ceilingRoom.tpm))
                    if earliest.isFinite { failure.earliest = earliest }
                }
                if !policy.isListed, failure.fromRefill, let delay = failure.retryAfter,
                    delay > table.refreshInterval, case .bucket(_, let limit, let parameters, _, _) = failure.text
                {
                    // Not in the snapshot yet: on the default entry only until the next snapshot, which may list
                    // it. A premium customer's first task waited out the default bucket's refill (30 s at 2 rpm)
                    // although its own allocation came 3 s later.
                    failure.retryAfter = table.refreshInterval
                    failure.text = .unlisted(
                        key: key, limit: limit, parameters: parameters, amount: amount, delay: table.refreshInterval)
                }
                if let verdict = check(failure) { return verdict }
                charge = Charge()
            } else if !caps.isEmpty, let cap = caps[key.upstream],
                case let reserve = capReserve(for: request, charge: charge, cap: cap, upstream: key.upstream, now: now),
                !cap.admits(
                    amount: amount, reserve: reserve, skipRPM: charge.rpmFromCredit, skipTPM: charge.tpmFromCredit,
                    at: now)
            {
                let blocking = cap.blocking(amount: amount, reserve: reserve, at: now)
                let delay = max(blocking.delay, Self.borrowRecheck)
                var failure = Failure(
                    limit: blocking.limit, code: "gateway_rate_limited",
                    text: .gatewayCap(
                        upstream: key.upstream, limit: blocking.limit, parameters: blocking.bucket, amount: amount,
                        reserve: reserve, delay: delay),
                    retryAfter: delay, fromRefill: true, shadowable: true)
                // A lower bound whatever happens meanwhile: with a reserve, the refill without it (a realtime call's
                // own bucket may refill and use the reserve, the next realtime call may be smaller, the reserve lapses).
                failure.earliest = reserve.isEmpty ? blocking.delay : cap.blocking(amount: amount, at: now).delay
                if !charge.rpmBorrowed && !charge.tpmBorrowed { failure.capHold = (blocking.limit, now + delay) }
                if let verdict = check(failure) { return verdict }
                charge = Charge()
            }
        }
        charge.shadowFailure = shadowFailure
        return .admit(charge)
    }

    /// What `request` must leave in `cap`: for realtime calls (``GatewayConfiguration/capRealtimeReserve``), nothing
    /// for a realtime call within its own allocation, nor where no realtime call came to the upstream within
    /// ``GatewayConfiguration/capRealtimeMemory``; for everything else the reserve's share of each burst, but at
    /// least one request and the last realtime call's tokens. A borrowed request leaves at least one request, for the
    /// tenants it borrows from (``GatewayCap`` has the reasons).
    private func capReserve(
        for request: AdmissionRequest, charge: Charge, cap: GatewayCap, upstream: String, now: Double
    ) -> CapReserve {
        // A borrowed request leaves one request of room: the lender's own bucket is whole (borrowing never takes
        // from it), and a lender coming back must not find the gateway's cap emptied by its borrower.
        let borrowed = charge.rpmBorrowed || charge.tpmBorrowed
        let lender = borrowed ? CapReserve(rpm: 1, tpm: 0, for: .lenders) : .none
        let share = configuration.capRealtimeReserve
        guard share > 0, let seen = realtimeSeen[upstream], now - seen.at <= configuration.capRealtimeMemory else {
            return lender
        }
        // The realtime reserve keeps at least one request: it covers the lenders' too.
        if request.taskClass == .realtime && !borrowed { return .none }
        return CapReserve(
            rpm: max(1, share * (cap.rpm?.parameters.burst ?? 0)),
            tpm: max(seen.tokens, share * (cap.tpm?.parameters.burst ?? 0)))
    }

    /// The RPM or TPM failure, whichever takes longer to clear; its retry-after is the refill time (the
    /// snapshot's refresh interval when the refill never gets there: a zero allocation).
    private func bucketFailure(
        _ state: TenantState, key: TenantKey, amount: Double, rpmOK: Bool, tpmOK: Bool, now: Double
    ) -> Failure {
        let rpmDelay: Double?? = rpmOK ? .none : .some(state.rpm.delay(until: 1, at: now))
        let tpmDelay: Double?? = tpmOK ? .none : .some(state.tpm.delay(until: amount, at: now))
        // nil inside means "never by refill": it dominates any finite delay.
        let useTPM: Bool
        switch (rpmDelay, tpmDelay) {
        case (.none, _): useTPM = true
        case (_, .none): useTPM = false
        // Both never: named by its requests (round 32: a tenant with 0 in both was told it had no tpm allocation).
        case (.some(let rpm), .some(let tpm)): useTPM = (tpm == nil && rpm != nil) || (rpm != nil && tpm! > rpm!)
        }
        let limit: LimitKind = useTPM ? .tpm : .rpm
        let bucket = useTPM ? state.tpm : state.rpm
        let delay = useTPM ? tpmDelay! : rpmDelay!
        if let delay {
            return Failure(
                limit: limit, code: "rate_limited",
                text: .bucket(key: key, limit: limit, parameters: bucket.parameters, amount: amount, delay: delay),
                retryAfter: delay, fromRefill: true, shadowable: true)
        }
        let neither = rpmDelay.map { $0 == nil } == true && tpmDelay.map { $0 == nil } == true
        return Failure(
            limit: limit, code: "zero_allocation",
            message:
                "tenant \(key.tenant) has no \(neither ? "rpm or tpm" : limit.rawValue) allocation on \(key.upstream)",
            retryAfter: table.refreshInterval, fromRefill: false, shadowable: true)
    }

    /// Until when a waiter whose request fails only for want of idle allocation would hold the idle buckets, per
    /// dimension it is short in (nil: it is not such a waiter). `rpm`, `tpm`: whether that dimension is covered
    /// (its own bucket, or a loan that fits). Not short where its own borrow allowance lacks room: beyond its
    /// allowance a tenant borrows only what is left over (``TenantState/mayBorrow``), and holds nothing.
    static func idleShortfall(
        _ lender: IdleCapacity, _ allowance: (rpm: TokenBucket, tpm: TokenBucket)?,
        ceiling: (rpm: TokenBucket?, tpm: TokenBucket?), amount: Double, rpm: Bool, tpm: Bool,
        at now: Double
    ) -> (rpm: Double?, tpm: Double?)? {
        // When the idle bucket will hold `amount`, if the allowance and the ceiling have room for it (nil: nothing
        // to hold for).
        func until(_ idle: TokenBucket?, _ allowance: TokenBucket?, _ ceiling: TokenBucket?, _ amount: Double)
            -> Double?
        {
            guard let idle, allowance?.admits(amount, at: now) ?? true, ceiling?.admits(amount, at: now) ?? true,
                let delay = IdleCapacity.delay(idle, amount, at: now)
            else { return nil }
            return now + delay
        }
        var hold: (rpm: Double?, tpm: Double?) = (nil, nil)
        if !rpm {
            guard let until = until(lender.rpm, allowance?.rpm, ceiling.rpm, 1) else { return nil }
            hold.rpm = until
        }
        if !tpm {
            guard let until = until(lender.tpm, allowance?.tpm, ceiling.tpm, amount) else { return nil }
            hold.tpm = until
        }
        return hold.rpm == nil && hold.tpm == nil ? nil : hold
    }

    /// Seconds until `amount` may be borrowed from `idle` by refill alone (nil: never): once the idle bucket
    /// holds it and the tenant's `allowance` has room for it, or once the idle bucket holds it beyond
    /// ``TenantState/beyondAllowanceLevel`` of its burst — and, either way, its `ceiling` room
    /// (``TenantState/ceilingRoom``) has it.
    static func borrowable(
        _ idle: TokenBucket?, _ allowance: TokenBucket?, _ amount: Double, ceiling: TokenBucket?,
        at now: Double
    ) -> Double? {
        guard let lent = IdleCapacity.delay(idle, amount, at: now) else { return nil }
        guard let allowance, let idle else { return afterRoom(lent, ceiling, amount, at: now) }
        let withinAllowance = allowance.delay(until: amount, at: now).map { max(lent, $0) } ?? .infinity
        let beyondAllowance =
            IdleCapacity.delay(idle, amount + TenantState.beyondAllowanceLevel * idle.parameters.burst, at: now)
            ?? .infinity
        let earliest = min(withinAllowance, beyondAllowance)
        return earliest.isFinite ? afterRoom(earliest, ceiling, amount, at: now) : nil
    }

    /// `delay`, or later when the tenant's ceiling room (``TenantState/ceilingRoom``) holds `amount` only after it;
    /// nil when the room never does.
    static func afterRoom(_ delay: Double, _ ceiling: TokenBucket?, _ amount: Double, at now: Double) -> Double? {
        guard let ceiling else { return delay }
        return ceiling.delay(until: amount, at: now).map { max(delay, $0) }
    }

    /// The shortest retry-after advised for idle allocation (seconds): others' admissions also draw on it, so
    /// its refill time is a lower bound, and a pump must not spin.
    static let borrowRecheck = 0.05

    static func format(_ value: Double) -> String {
        if value == value.rounded() && abs(value) < 1e15 { return String(Int64(value)) }
        return String((value * 1000).rounded() / 1000)
    }

    /// Charges an admitted request and records its ticket.
    mutating func admit(
        _ request: AdmissionRequest, key: TenantKey, at index: StateIndex, estimate: Int, charge: Charge, now: Double,
        waited: Double
    ) -> Ticket {
        let id = nextID
        nextID += 1
        let charged = charge.shadowFailure == nil
        var creditExpiry: Double?
        var capRPM = false
        var capTPM = false
        if charged {
            let amount = Double(estimate)
            states.values[index].charge(charge, amount: amount, now: now)
            if !idle.isEmpty, idle[key.upstream] != nil {
                idle[key.upstream]!.take(calls: 1, tokens: amount, at: now)
                if charge.rpmBorrowed || charge.tpmBorrowed { statistics.borrowed += 1 }
            }
            if !caps.isEmpty, caps[key.upstream] != nil {
                capRPM = !charge.rpmFromCredit
                capTPM = !charge.tpmFromCredit
                if capRPM { caps[key.upstream]!.rpm?.take(1, at: now) }
                if capTPM { caps[key.upstream]!.tpm?.take(amount, at: now) }
            }
            if charge.rpmFromCredit || charge.tpmFromCredit {
                creditExpiry = states.values[index].credit?.grant.expiresAt
            }
            if let taskID = request.taskID {
                let taskKey = TaskKey(tenant: key.tenant, taskID: taskID)
                var usage = tasks[taskKey] ?? TaskUsage(lastSeen: now)
                usage.calls += 1
                usage.tokens += amount
                usage.lastSeen = max(usage.lastSeen, now)
                tasks[taskKey] = usage
                if tasks.count > configuration.maxTrackedTasks + configuration.maxTrackedTasks / 4 {
                    collectTasks(now: now)
                }
            }
        } else if let failure = charge.shadowFailure {
            statistics.shadowWouldDeny[failure.limit, default: 0] += 1
        }
        if configuration.maxInFlightPerUpstream != nil { upstreamInFlight[key.upstream, default: 0] += 1 }
        statistics.admitted += 1
        if waited > 0 { statistics.admittedAfterWaiting += 1 }
        let ticket = Ticket(
            id: id, request: request, reservedTokens: estimate, admittedAt: now, waited: waited,
            snapshotVersion: table.version, shadowDenial: charge.shadowFailure?.limit)
        tickets[id] = TicketRecord(
            ticket: ticket, key: key, estimate: Double(estimate), charged: charged,
            rpmFromCredit: charge.rpmFromCredit, tpmFromCredit: charge.tpmFromCredit,
            rpmBorrowed: charge.rpmBorrowed, tpmBorrowed: charge.tpmBorrowed, capRPM: capRPM, capTPM: capTPM,
            creditExpiry: creditExpiry, serverOffset: serverClock.offset)
        return ticket
    }

    /// Builds the denial (and its telemetry event) for `failure`.
    mutating func deny(
        _ request: AdmissionRequest, estimate: Int, failure: Failure, now: Double, waited: Double,
        report: Bool, effects: inout Effects
    ) -> Denial {
        statistics.denied[failure.limit, default: 0] += 1
        if report && reportsTelemetry {
            effects.telemetry.append(
                TelemetryRecord(
                    ts: serverNow(now), gateway: configuration.gatewayID, tenant: request.tenant,
                    upstream: request.upstream,
                    outcome: .deniedLocal, queueWait: waited, estimatedTokens: estimate,
                    taskClass: request.taskClass, taskID: request.taskID, retry: request.retry,
                    errorType: failure.limit == .budget ? failure.code : failure.limit.rawValue))
        }
        return Denial(
            limit: failure.limit, code: failure.code, message: failure.message, retryAfter: failure.retryAfter,
            snapshotVersion: table.version, fallback: table.inFallback, waited: waited, tenant: request.tenant,
            upstream: request.upstream, taskClass: request.taskClass)
    }

    // MARK: Completion

    /// Reconciles a finished attempt: frees its permit, turns the reservation into actual usage (over-spend is
    /// debt in the TPM bucket, under-spend is refunded up to the burst; a quota 429 without usage keeps its
    /// reservation; an overload refusal gives back its request too), and reports the attempt.
    mutating func complete(_ ticket: Ticket, _ result: AttemptResult, now: Double, effects: inout Effects) -> Bool {
        guard let record = tickets.removeValue(forKey: ticket.id) else { return false }
        if configuration.maxInFlightPerUpstream != nil { upstreamInFlight[record.key.upstream, default: 1] -= 1 }
        let outcome =
            result.outcome
            ?? ErrorClassifier.classify(status: result.status, errorType: result.errorType, body: result.errorBody)
        // Usage unknown: a served attempt keeps its reservation; a failed one used nothing. So does a quota 429
        // upstream, but its reservation stays charged all the same: the provider had no room, and refunding it
        // kept the gateway's buckets full while the provider's were empty, so every refill met another 429.
        // After an open circuit had held a backlog back, a TPM-bound pool answered 20–50% of the attempts with
        // 429s for 70 s that way (the Observer's estimate fell from 6.0M to 4.6M tpm meanwhile); charged, the
        // burst is spent once.
        let served = outcome == .ok && (result.status.map { (200..<300).contains($0) } ?? false)
        let keepsReservation = served || outcome == .quotaExhausted
        let actual = result.actualTokens.map { Double(max(0, $0)) } ?? (keepsReservation ? record.estimate : 0)
        // What the completion frees for other tenants' waiters: a permit of the gateway's own concurrency cap,
        // tokens refunded to the upstream's idle or cap buckets, a brake released. Anything else (its own
        // permit, its own refund) concerns its own lane alone.
        var sharedRoom = configuration.maxInFlightPerUpstream != nil
        if record.charged, reconcile(record, actualTokens: actual, now: now) { sharedRoom = true }
        // An overload refusal (503, 529) is the provider's capacity for everyone, not this key's quota: it spent
        // none of the rate limit the allocation is a slice of, so its request goes back like its tokens. Charged,
        // a 35 % overload for a minute held a contended pool at 61 % of its capacity while the retries waited for
        // allocation; the pacing of the retries is the client's backoff and, for the classes it sheds, the
        // circuit. (A stream the provider broke off after its 200 did count: it keeps its request.)
        let overloadRefusal = outcome == .overloaded && !(result.status.map { (200..<300).contains($0) } ?? false)
        if record.charged, overloadRefusal, let index = states.index(forKey: record.key),
            refundRequest(record, at: index, now: now)
        {
            sharedRoom = true
        }
        // The headers are parsed once, and only for what reads them: the cap's hold after a refusal, and the brake
        // (which needs a capacity to compare with: the snapshot must list the upstream).
        let upstream = record.key.upstream
        let holding = outcome == .quotaExhausted && configuration.capHoldsAfterRefusal && caps[upstream] != nil
        let braking =
            configuration.followStatedLimits && !result.headers.isEmpty && snapshotTable.upstreams[upstream] != nil
        let signals = holding || braking ? ProviderSignals(headerFields: result.headers, now: now) : nil
        if holding {
            caps[upstream]!.holdAfterRefusal(retryAfter: signals?.retryAfter, tokens: record.estimate, at: now)
        }
        if braking, let signals, noteStatedLimits(signals, upstream: upstream, now: now, effects: &effects) {
            sharedRoom = true
        }
        statistics.completed += 1
        if reportsTelemetry {
            effects.telemetry.append(
                TelemetryRecord(
                    ts: ticket.admittedAt + record.serverOffset, gateway: configuration.gatewayID,
                    tenant: ticket.tenant, upstream: ticket.upstream, outcome: outcome, status: result.status,
                    latency: result.latency,
                    queueWait: ticket.waited, promptTokens: result.promptTokens,
                    completionTokens: result.completionTokens,
                    estimatedTokens: ticket.reservedTokens, taskClass: ticket.taskClass, taskID: ticket.taskID,
                    modelVersion: result.modelVersion, retry: ticket.retry,
                    headers: RateLimitHeaders.select(from: result.headers), errorType: result.errorType))
        }
        pump(now: now, effects: &effects, changed: sharedRoom ? .upstream(record.key.upstream) : .lane(record.key))
        return true
    }

    /// Reads the limits a response's headers state (`signals`) and brakes the upstream
    /// (``GatewayConfiguration/followStatedLimits``) when they are well below the capacity the snapshot allocates
    /// from, or releases the brake. Returns true when the brake changed.
    mutating func noteStatedLimits(
        _ signals: ProviderSignals, upstream: String, now: Double, effects: inout Effects
    ) -> Bool {
        // Without a capacity to compare with (no snapshot, or it does not list the upstream) there is nothing to
        // brake (the caller does not parse the headers then).
        guard snapshotTable.upstreams[upstream] != nil else { return false }
        guard signals.requests.limit != nil || signals.tokens.limit != nil else { return false }
        var limits = stated[upstream] ?? StatedLimits()
        // A limit of 0 states nothing a rate could follow (a broken proxy, a suspended key): the refusals tell.
        if let limit = signals.requests.limit, limit > 0 { limits.requests.note(Double(limit), at: now) }
        if let limit = signals.tokens.limit, limit > 0 { limits.tokens.note(Double(limit), at: now) }
        stated[upstream] = limits
        let brake = brakeFractions(upstream, at: now)
        guard brake != brakes[upstream] ?? Self.noBrake else { return false }
        brakes[upstream] = brake == Self.noBrake ? nil : brake
        enforceSnapshotTable(at: now)
        statistics.brakes += 1
        effects.events.append(
            .statedLimitBrake(
                upstream: upstream, rpmFraction: brake.rpm, tpmFraction: brake.tpm,
                statedRPM: limits.requests.believed(at: now, maxAge: Self.statementMaxAge),
                statedTPM: limits.tokens.believed(at: now, maxAge: Self.statementMaxAge)))
        return true
    }

    /// Per dimension, the believed stated limit (``RecentStatements``) as a fraction of the snapshot's capacity
    /// when it is below ``brakeThreshold`` of it, else 1 (no brake: jitter in the statements, or a capacity
    /// Allot already lowered for another client of a shared key, must not move the limits).
    func brakeFractions(_ upstream: String, at now: Double) -> DimensionValues {
        guard let limits = stated[upstream], let capacity = snapshotTable.upstreams[upstream]?.capacity else {
            return Self.noBrake
        }
        func fraction(_ statements: RecentStatements, _ allocated: Double) -> Double {
            guard allocated > 0, let limit = statements.believed(at: now, maxAge: Self.statementMaxAge) else {
                return 1
            }
            let ratio = limit / allocated
            return ratio < Self.brakeThreshold ? max(Self.brakeFloor, ratio) : 1
        }
        return DimensionValues(
            rpm: fraction(limits.requests, capacity.rpm), tpm: fraction(limits.tokens, capacity.tpm))
    }

    /// The fractions in force on an upstream without a brake.
    static let noBrake = DimensionValues(rpm: 1, tpm: 1)

    /// A stated limit brakes only below this fraction of the snapshot's capacity.
    static let brakeThreshold = 0.9
    /// The brake never scales below this fraction: a wrong statement cannot close the upstream before Allot has
    /// weighed it.
    static let brakeFloor = 0.1
    /// Statements older than this (seconds) are not believed.
    static let statementMaxAge = 30.0

    /// Hands back a ticket whose request was never sent: everything it reserved is returned.
    mutating func release(_ ticket: Ticket, now: Double, effects: inout Effects) -> Bool {
        guard let record = tickets.removeValue(forKey: ticket.id) else { return false }
        if configuration.maxInFlightPerUpstream != nil { upstreamInFlight[record.key.upstream, default: 1] -= 1 }
        if record.charged, let index = states.index(forKey: record.key) {
            states.values[index].inFlight -= 1
            refundRequest(record, at: index, now: now)
            refundTokens(record, record.estimate, at: index, now: now)
            if let taskID = ticket.taskID {
                let taskKey = TaskKey(tenant: record.key.tenant, taskID: taskID)
                tasks[taskKey]?.calls -= 1
                tasks[taskKey]?.tokens -= record.estimate
            }
        }
        statistics.released += 1
        pump(now: now, effects: &effects, changed: .upstream(record.key.upstream))
        return true
    }

    /// Returns a request to where it came from: the burst credit (if the same grant is still in force) or the RPM
    /// bucket (not a borrowed one's: it came from the idle buckets), and the upstream's idle and cap buckets.
    /// Returns true when it went back to the upstream's idle or cap buckets, which other tenants draw on.
    @discardableResult
    private mutating func refundRequest(_ record: TicketRecord, at index: StateIndex, now: Double) -> Bool {
        var shared = false
        if record.rpmBorrowed || record.rpmFromCredit { states.values[index].ceilingRoom.rpm?.refund(1, at: now) }
        if record.rpmFromCredit {
            if states.values[index].credit?.grant.expiresAt == record.creditExpiry {
                states.values[index].credit!.usedCalls -= 1
            }
        } else if !record.rpmBorrowed {
            states.values[index].rpm.refund(1, at: now)
        }
        if !idle.isEmpty, idle[record.key.upstream] != nil {
            idle[record.key.upstream]!.refund(calls: 1, tokens: 0, at: now)
            shared = true
        }
        if record.capRPM, caps[record.key.upstream] != nil {
            caps[record.key.upstream]!.rpm?.refund(1, at: now)
            shared = true
        }
        return shared
    }

    /// Returns true when it refunded tokens to the upstream's idle or cap buckets (room for other tenants).
    private mutating func reconcile(_ record: TicketRecord, actualTokens actual: Double, now: Double) -> Bool {
        guard let index = states.index(forKey: record.key) else { return false }
        states.values[index].inFlight -= 1
        let delta = actual - record.estimate
        if delta > 0 {
            if record.tpmBorrowed {
                // A loan's use past its reservation counts against the ceiling too (a credited call's goes to its
                // own bucket, below: within its rate).
                states.values[index].ceilingRoom.tpm?.take(delta, at: now)
            }
            if !record.tpmBorrowed {
                states.values[index].tpm.take(delta, at: now)
            } else if states.values[index].borrowable != nil {
                // A loan larger than declared counts against the borrower's allowance: a client declaring half its
                // tokens would otherwise borrow twice its allowance.
                states.values[index].borrowable!.tpm.take(delta, at: now)
            }
            if !idle.isEmpty, idle[record.key.upstream] != nil {
                idle[record.key.upstream]!.take(calls: 0, tokens: delta, at: now)
            }
            if record.capTPM, caps[record.key.upstream] != nil {
                caps[record.key.upstream]!.tpm?.take(delta, at: now)
            }
            statistics.debtTokens += delta
        }
        let shared = delta < 0 && refundTokens(record, -delta, at: index, now: now)
        if let taskID = record.ticket.taskID {
            let taskKey = TaskKey(tenant: record.key.tenant, taskID: taskID)
            if var usage = tasks[taskKey] {
                usage.tokens += delta
                usage.lastSeen = max(usage.lastSeen, now)
                tasks[taskKey] = usage
            }
        }
        return shared
    }

    /// Returns unused tokens to where they came from: the burst credit (if the same grant is still in force)
    /// or the TPM bucket, never above its burst.
    /// Returns true when some went back to the upstream's idle or cap buckets, which other tenants draw on.
    @discardableResult
    private mutating func refundTokens(
        _ record: TicketRecord, _ amount: Double, at index: StateIndex, now: Double
    ) -> Bool {
        guard amount > 0 else { return false }
        var shared = false
        if !idle.isEmpty, idle[record.key.upstream] != nil {
            idle[record.key.upstream]!.refund(calls: 0, tokens: amount, at: now)
            shared = true
        }
        if record.capTPM, caps[record.key.upstream] != nil {
            caps[record.key.upstream]!.tpm?.refund(amount, at: now)
            shared = true
        }
        if record.tpmBorrowed || record.tpmFromCredit {
            states.values[index].ceilingRoom.tpm?.refund(amount, at: now)
        }
        if record.tpmBorrowed { return shared }
        if record.tpmFromCredit {
            if let credit = states.values[index].credit, credit.grant.expiresAt == record.creditExpiry {
                states.values[index].credit!.usedTokens = max(0, credit.usedTokens - amount)
            }
        } else {
            let before = states.values[index].tpm.level(at: now)
            states.values[index].tpm.refund(amount, at: now)
            statistics.refundedTokens += states.values[index].tpm.level - before
        }
        return shared
    }
}

/// What happened to a snapshot handed to the enforcer.
public enum SnapshotApplyResult: Sendable, Equatable {
    /// It is now enforced.
    case applied
    /// Its version is the one already enforced.
    case unchanged
    /// Its version is below the enforced one; the enforced snapshot stays.
    case rejected(reason: String)
}
