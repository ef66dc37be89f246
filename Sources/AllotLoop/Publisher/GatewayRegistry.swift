import AllotStore
import AllotTime

/// A gateway as the Publisher knows it from its snapshot polls (SPEC 7).
public struct GatewayContact: Sendable, Hashable {
    public var id: String
    public var firstContact: Double
    public var lastContact: Double
    /// The newest version the gateway said it enforces (the version in its `If-None-Match`).
    public var enforcedVersion: Int64?
    public var polls: Int64
    /// The instance its last poll named (`instance=`: one run of a gateway process), nil when it named none.
    public var instance: String?
    /// When `enforcedVersion` was superseded, noted while the Publisher still remembered its successor and kept past
    /// that (its memory holds the last 512 versions) and across restarts; nil until then.
    public var behindSince: Double?

    public init(
        id: String, firstContact: Double, lastContact: Double, enforcedVersion: Int64? = nil, polls: Int64 = 0,
        instance: String? = nil, behindSince: Double? = nil
    ) {
        self.id = id
        self.firstContact = firstContact
        self.lastContact = lastContact
        self.enforcedVersion = enforcedVersion
        self.polls = polls
        self.instance = instance
        self.behindSince = behindSince
    }
}

/// A gateway's clock as its polls said (`Allot-Gateway-Time`).
struct GatewayClock: Sendable, Equatable {
    /// Its clock minus Allot's, seconds, at its last poll (low by the request's way there).
    var offset: Double
    /// Since when its polls have said a clock beyond the `gateway_clock` alert's threshold; nil within it.
    var farSince: Double?
    /// When it was measured, on Allot's wall clock and on the steady clock (nil without one).
    var measuredAt: Double = 0
    var measuredSteady: Double? = nil

    /// The offset now: less any step of Allot's own wall clock since it was measured (what the wall clock moved
    /// beyond the steady one, when that is more than a second), the gateway's clock taken to have run on. Outside
    /// evaluation round 42, F-C: a poll held across the correction of a step back of Allot's clock said the gateway
    /// was 120 s ahead, and the alert was raised after Allot's clock was already right again.
    func offset(now: Double, steadyNow: Double?) -> Double {
        guard let steadyNow, let measuredSteady else { return offset }
        let step = (now - measuredAt) - (steadyNow - measuredSteady)
        return abs(step) > 1 ? offset - step : offset
    }
}

/// What came of a gateway's leaving (``AllocationPublisher/leave(gateway:instance:now:)``).
public enum GatewayLeave: Sendable, Equatable {
    /// It left: its contact as it was.
    case left(GatewayContact)
    /// No gateway of that id is known (it never polled, or was forgotten, or already left).
    case unknown
    /// Another instance polls under that id (``GatewayRegistry/leave(_:instance:now:)``: a replacement, or a second
    /// process sharing the id): the gateway stays, and a late poll of the instance that asked does not count. The
    /// contact is the gateway's; `by`, the other instance that polled last.
    case replaced(GatewayContact, by: String)
}

/// Every gateway that polled, with the version it enforces and its last contact; and the
/// make-before-break barrier: the gateways that must confirm a shrunk version before the growth
/// it held back may be published (SPEC 7).
///
/// Updated on every poll from request handlers, so it is a lock, not an actor.
final class GatewayRegistry: Sendable {
    /// A shrunk version and the gateways that have not confirmed enforcing it yet.
    struct Barrier: Sendable {
        var version: Int64
        var waiting: Set<String>
    }

    /// When an instance first polled under a gateway id, and when last.
    struct Polls: Sendable {
        var first: Double
        var last: Double
    }

    private struct State {
        var contacts: [String: GatewayContact] = [:]
        var barrier: Barrier?
        var dirty: Set<String> = []
        /// Per gateway, the instances that polled, when each first did and when last (at most
        /// ``instancesPerGateway``): a gateway whose instance leaves stays while another of them polls.
        var instances: [String: [String: Polls]] = [:]
        /// Per gateway, the instances that left within ``latePollSeconds`` and when: a poll of one of them was sent
        /// before it left (a long-poll still in flight) and is not recorded; any other poll is, and so is that
        /// instance's own later.
        var retired: [String: [String: Double]] = [:]
        /// Gateways that said they left (``leave(_:instance:now:)``), and when: gone until they poll again.
        var left: [String: Double] = [:]
        /// Left gateways whose saved contact is still to be marked left (at the next checkpoint).
        var unsaved: Set<String> = []
        /// Per gateway, its long-polls waiting now: a gateway waiting for the next version is not silent, however
        /// long ago its poll began (outside evaluation round 40: after the service was stopped for 45 s, a gateway
        /// held in a long-poll across the stop was alerted as silent). The split goes by the last contact alone.
        var waiting: [String: Int] = [:]
        /// Per gateway, its clock as its last poll said (`Allot-Gateway-Time`); absent when it said nothing. Not saved:
        /// the next poll says it again.
        var clocks: [String: GatewayClock] = [:]
        /// Per gateway, its last poll on the Publisher's steady clock (the monotonic clock in the service), when the
        /// Publisher has one; absent for a contact restored from disk until it polls. Not saved: another run's
        /// monotonic clock means nothing.
        var steady: [String: Double] = [:]
    }

    private let state = Locked(State())
    /// Most gateways remembered: a client inventing ids cannot grow the table without bound.
    let capacity: Int

    /// How long after an instance's leave a poll of that instance is taken for one sent before it: the longest
    /// long-poll (60 s) and a client's margin over it (10 s), and some. Longer, a leave sent by mistake (or by a
    /// process that reuses its instance id) would keep a live gateway out of the split until it was forgotten.
    static let latePollSeconds = 75.0
    /// Most instances remembered per gateway (those polling now, those just left): a client inventing instance ids
    /// cannot grow them without bound.
    static let instancesPerGateway = 16

    init(capacity: Int = 20_000) {
        self.capacity = max(1, capacity)
    }

    /// Records a poll from `gateway` (its `instance`, when it names one) at `now`, enforcing `version` when it
    /// said so. A poll of an instance that left, within ``latePollSeconds`` of its leave, is not recorded: it was
    /// sent before the leave.
    ///
    /// What came of a poll: whether it was recorded (not a late poll of an instance that left, not a new id beyond
    /// ``capacity``), and whether it cleared the make-before-break barrier.
    struct Recorded: Equatable {
        var recorded: Bool
        var clearedBarrier: Bool
    }

    /// - Returns: Whether the poll was recorded, and whether it cleared the make-before-break barrier.
    func record(
        _ gateway: String, instance: String? = nil, enforcing version: Int64?, clockOffset: Double? = nil, now: Double,
        steadyNow: Double? = nil
    ) -> Recorded {
        state.withLock { state in
            if let instance, let at = state.retired[gateway]?[instance], now - at < Self.latePollSeconds {
                return Recorded(recorded: false, clearedBarrier: false)
            }
            if var contact = state.contacts[gateway] {
                contact.lastContact = max(contact.lastContact, now)
                // What it says now, even below what it said before: a gateway restarted from an older
                // snapshot enforces that one, and its lag is real.
                if let version, version != contact.enforcedVersion {
                    contact.enforcedVersion = version
                    contact.behindSince = nil
                }
                contact.polls += 1
                contact.instance = instance
                state.contacts[gateway] = contact
            } else {
                guard state.contacts.count < capacity else { return Recorded(recorded: false, clearedBarrier: false) }
                state.contacts[gateway] = GatewayContact(
                    id: gateway, firstContact: now, lastContact: now, enforcedVersion: version, polls: 1,
                    instance: instance)
            }
            if let instance { Self.notePoll(instance, at: now, in: &state.instances[gateway, default: [:]]) }
            // The latest: a poll that read the clock first may take the lock last.
            if let steadyNow { state.steady[gateway] = max(state.steady[gateway] ?? steadyNow, steadyNow) }
            state.clocks[gateway] = clockOffset.map { offset in
                let threshold = AllocationPublisher.gatewayClockAlertSeconds
                // Far since the first poll that said so, unless the last one, read now (less any step of Allot's
                // clock since), was near.
                let previous = state.clocks[gateway]
                let wasFar = previous.map { abs($0.offset(now: now, steadyNow: steadyNow)) > threshold } ?? false
                return GatewayClock(
                    offset: offset, farSince: abs(offset) > threshold ? (wasFar ? previous?.farSince : nil) ?? now : nil,
                    measuredAt: now, measuredSteady: steadyNow)
            }
            state.dirty.insert(gateway)
            state.left[gateway] = nil
            state.unsaved.remove(gateway)
            guard var barrier = state.barrier, let version, version >= barrier.version,
                barrier.waiting.remove(gateway) != nil
            else { return Recorded(recorded: true, clearedBarrier: false) }
            state.barrier = barrier
            return Recorded(recorded: true, clearedBarrier: barrier.waiting.isEmpty)
        }
    }

    /// Sets the barrier, keeping only the gateways that have not already confirmed `version`.
    ///
    /// - Returns: true when nobody has to confirm anything (the barrier is clear at once).
    func setBarrier(version: Int64, gateways: Set<String>) -> Bool {
        state.withLock { state in
            // Not for a gateway that left (a leave between the caller's look at the contacts and this).
            let waiting = gateways.filter {
                state.left[$0] == nil && (state.contacts[$0]?.enforcedVersion ?? .min) < version
            }
            state.barrier = Barrier(version: version, waiting: waiting)
            return waiting.isEmpty
        }
    }

    /// Removes gateways from the barrier (they left: no contact for too long). Returns true when it
    /// is then clear.
    func release(from barrierGateways: Set<String>) -> Bool {
        state.withLock { state in
            guard var barrier = state.barrier else { return false }
            barrier.waiting.subtract(barrierGateways)
            state.barrier = barrier
            return barrier.waiting.isEmpty
        }
    }

    func clearBarrier() {
        state.withLock { $0.barrier = nil }
    }

    var barrier: Barrier? { state.withLock { $0.barrier } }

    /// A long-poll of `gateway` begins waiting.
    func beginWaiting(_ gateway: String) {
        state.withLock { $0.waiting[gateway, default: 0] += 1 }
    }

    /// A long-poll of `gateway` is answered (or ends). Its last contact stays when the poll began: a gateway that
    /// crashed during the wait is no closer to being re-split than before
    /// (``partition(activeWithin:now:steadyNow:)`` does not count waiting), and a live one polls again at once.
    func endWaiting(_ gateway: String) {
        state.withLock { state in
            if let count = state.waiting[gateway] { state.waiting[gateway] = count > 1 ? count - 1 : nil }
        }
    }

    /// Per gateway, its clock as its last poll said (absent when it said nothing).
    var clocks: [String: GatewayClock] {
        state.withLock { $0.clocks }
    }

    /// Gateways with a long-poll waiting now.
    var waitingGateways: Set<String> {
        state.withLock { Set($0.waiting.keys) }
    }

    /// Every contact, sorted by id.
    var contacts: [GatewayContact] {
        state.withLock { $0.contacts.values.sorted { $0.id < $1.id } }
    }

    func contact(_ id: String) -> GatewayContact? { state.withLock { $0.contacts[id] } }

    /// A contact as read at one instant: how long ago it polled (``silence(of:in:now:steadyNow:)``; below 0 for a
    /// poll recorded after the instant), and its clock's offset then (``GatewayClock/offset(now:steadyNow:)``).
    struct Reading {
        var contact: GatewayContact
        var silence: Double
        var clockOffset: Double?
    }

    /// Every contact, sorted by id, read at `now` (`steadyNow`: the steady clock then), in one look.
    func readings(now: Double, steadyNow: Double?) -> [Reading] {
        state.withLock { state in
            state.contacts.values.sorted { $0.id < $1.id }.map { contact in
                Reading(
                    contact: contact, silence: Self.silence(of: contact, in: state, now: now, steadyNow: steadyNow),
                    clockOffset: state.clocks[contact.id]?.offset(now: now, steadyNow: steadyNow))
            }
        }
    }

    /// How long ago `contact` last polled: on the steady clock when its poll was noted on it (`steadyNow` is that
    /// clock's time now), else on the wall clock (`now`). A step of the wall clock does not move the first: after
    /// Allot's clock stepped back and forward again, gateways that polled all along read as silent for the step on
    /// the wall clock and were left out of the next versions' split (outside evaluation round 42, F-B).
    private static func silence(of contact: GatewayContact, in state: State, now: Double, steadyNow: Double?)
        -> Double
    {
        if let steadyNow, let polled = state.steady[contact.id] { return steadyNow - polled }
        return now - contact.lastContact
    }

    /// Whether `contact` has been silent for more than `seconds` (on the wall clock as `lastContact < now − seconds`,
    /// the comparison the simulator's figures were made with).
    private static func silent(
        _ contact: GatewayContact, beyond seconds: Double, in state: State, now: Double, steadyNow: Double?
    ) -> Bool {
        if let steadyNow, let polled = state.steady[contact.id] { return steadyNow - polled > seconds }
        return contact.lastContact < now - seconds
    }

    /// Gateways heard from within `seconds` of `now` (``silence(of:now:steadyNow:)``), sorted; and those heard from
    /// before but not since, or that left.
    func partition(activeWithin seconds: Double, now: Double, steadyNow: Double?) -> (
        active: [String], gone: Set<String>
    ) {
        state.withLock { state in
            var active: [String] = []
            var gone = Set(state.left.keys)
            for contact in state.contacts.values {
                if Self.silent(contact, beyond: seconds, in: state, now: now, steadyNow: steadyNow) {
                    gone.insert(contact.id)
                } else {
                    active.append(contact.id)
                }
            }
            return (active.sorted(), gone)
        }
    }

    /// A gateway that says it is leaving (scaled down, shut down) or that an SRE says is gone for good: its contact
    /// is dropped (no `gateway_lag` alert, not listed), it counts as gone for the next split (its slices go to the
    /// others) and no barrier waits for it. It rejoins when it polls again (not with a poll of the `instance` that
    /// left, which was sent before). When another instance than `instance` polled under that id within
    /// ``latePollSeconds`` (a long-poll's reach: it is polling still) and after `instance` first did, only `instance`
    /// goes (``GatewayLeave/replaced(_:by:)``): an old process stopping after its replacement started, or one of two
    /// processes sharing an id. One whose last poll came before `instance` first polled does not keep it — a process
    /// killed without a word before its successor started; nor does the other of two sharing an id whose long-poll
    /// was sent before the leaving one first polled (until its next poll: at most a long-poll's wait). Without
    /// `instance` (an SRE, an older library) the gateway goes whoever polls.
    ///
    /// - Returns: What came of it, and whether it cleared the make-before-break barrier.
    func leave(_ gateway: String, instance: String? = nil, now: Double) -> (GatewayLeave, clearedBarrier: Bool) {
        state.withLock { state in
            guard var contact = state.contacts[gateway] else { return (.unknown, false) }
            if let instance {
                // Remembered for a late poll of it whatever comes of the gateway.
                if state.retired[gateway] == nil, state.retired.count >= capacity { boundRetired(&state, now: now) }
                Self.note(instance, at: now, in: &state.retired[gateway, default: [:]])
                var known = state.instances[gateway] ?? [:]
                let since = known.removeValue(forKey: instance)?.first ?? -.infinity
                state.instances[gateway] = known
                let others = known.filter { now - $0.value.last < Self.latePollSeconds && $0.value.last >= since }
                if let newest = others.max(by: { ($0.value.last, $1.key) < ($1.value.last, $0.key) }) {
                    if contact.instance == instance {
                        contact.instance = newest.key
                        state.contacts[gateway] = contact
                    }
                    return (.replaced(contact, by: newest.key), false)
                }
            }
            state.contacts[gateway] = nil
            state.instances[gateway] = nil
            state.clocks[gateway] = nil
            state.steady[gateway] = nil
            // Bounded like the contacts: a client polling with made-up ids and leaving with each cannot grow it.
            if state.left.count >= capacity, let oldest = state.left.min(by: { $0.value < $1.value })?.key {
                state.left[oldest] = nil
            }
            state.left[gateway] = now
            state.dirty.remove(gateway)
            state.unsaved.insert(gateway)
            guard var barrier = state.barrier, barrier.waiting.remove(gateway) != nil else {
                return (.left(contact), false)
            }
            state.barrier = barrier
            return (.left(contact), barrier.waiting.isEmpty)
        }
    }

    /// The gateways that left since the last call, and when, whose saved contacts are to be marked so (for the
    /// checkpoint).
    func takeLeft() -> [(id: String, at: Double)] {
        state.withLock { state in
            defer { state.unsaved = [] }
            return state.unsaved.sorted().compactMap { id in state.left[id].map { (id, $0) } }
        }
    }

    /// Hands back what ``takeLeft()`` gave when the checkpoint that was to mark them failed (those that have not
    /// polled again since).
    func returnLeft(_ gateways: [String]) {
        state.withLock { state in
            for id in gateways where state.left[id] != nil { state.unsaved.insert(id) }
        }
    }

    /// Notes, for each gateway whose enforced version has no `behindSince` yet, when that version was superseded, if
    /// `supersededAt` knows it exactly (the Publisher remembers its successor). Called every tick, so a version is
    /// noted long before its successor leaves that memory.
    func noteSuperseded(_ supersededAt: (Int64) -> Double?) {
        state.withLock { state in
            for (id, contact) in state.contacts where contact.behindSince == nil {
                guard let version = contact.enforcedVersion, let at = supersededAt(version) else { continue }
                state.contacts[id]?.behindSince = at
                state.dirty.insert(id)
            }
        }
    }

    /// Loads saved contacts (a restart), keeping whichever is newer per gateway; one saved as left is gone again.
    func restore(_ records: [GatewayContactRecord]) {
        state.withLock { state in
            for record in records.prefix(capacity) {
                if let leftMs = record.leftMs {
                    if state.contacts[record.id] == nil {
                        state.left[record.id] = EpochTime.seconds(fromMilliseconds: leftMs)
                    }
                    continue
                }
                let restored = GatewayContact(
                    id: record.id, firstContact: EpochTime.seconds(fromMilliseconds: record.firstContactMs),
                    lastContact: EpochTime.seconds(fromMilliseconds: record.lastContactMs),
                    enforcedVersion: record.enforcedVersion, polls: record.polls,
                    behindSince: record.behindSinceMs.map(EpochTime.seconds(fromMilliseconds:)))
                if let existing = state.contacts[record.id], existing.lastContact >= restored.lastContact { continue }
                state.contacts[record.id] = restored
            }
        }
    }

    /// The contacts changed since the last call, as records to save.
    func takeChanged() -> [GatewayContactRecord] {
        state.withLock { state in
            defer { state.dirty = [] }
            return state.dirty.sorted().compactMap { state.contacts[$0] }.map(Self.record)
        }
    }

    /// Forgets gateways not heard from for more than `seconds` (``silence(of:now:steadyNow:)``; and returns them),
    /// and those that left before then (their demand shares have long faded); and the instances that left longer
    /// than ``latePollSeconds`` before `now`.
    @discardableResult
    func forget(after seconds: Double, now: Double, steadyNow: Double? = nil) -> [String] {
        state.withLock { state in
            let old = state.contacts.values.filter {
                Self.silent($0, beyond: seconds, in: state, now: now, steadyNow: steadyNow)
            }.map(\.id)
            for id in old {
                state.contacts[id] = nil
                state.instances[id] = nil
                state.clocks[id] = nil
                state.steady[id] = nil
            }
            state.left = state.left.filter { $0.value >= now - seconds }
            Self.pruneRetired(&state, before: now - Self.latePollSeconds)
            return old.sorted()
        }
    }

    /// Makes room for one more of at most ``instancesPerGateway`` per gateway: those older than ``latePollSeconds``
    /// go, and if that is not enough the one seen longest ago (`at` says when each was).
    private static func makeRoom<Value>(
        for instance: String, in seen: inout [String: Value], now: Double, at: (Value) -> Double
    ) {
        guard seen[instance] == nil, seen.count >= instancesPerGateway else { return }
        seen = seen.filter { now - at($0.value) < latePollSeconds }
        if seen.count >= instancesPerGateway, let oldest = seen.min(by: { at($0.value) < at($1.value) })?.key {
            seen[oldest] = nil
        }
    }

    /// Notes a poll of `instance` at `now`.
    private static func notePoll(_ instance: String, at now: Double, in seen: inout [String: Polls]) {
        makeRoom(for: instance, in: &seen, now: now, at: \.last)
        seen[instance] = Polls(first: seen[instance]?.first ?? now, last: now)
    }

    /// Notes that `instance` left at `now`.
    private static func note(_ instance: String, at now: Double, in seen: inout [String: Double]) {
        makeRoom(for: instance, in: &seen, now: now, at: { $0 })
        seen[instance] = now
    }

    /// Drops the instances that left before `before` (and a gateway with none left).
    private static func pruneRetired(_ state: inout State, before: Double) {
        state.retired = state.retired.compactMapValues { instances in
            let recent = instances.filter { $0.value >= before }
            return recent.isEmpty ? nil : recent
        }
    }

    /// Makes room for one more gateway's retired instances: those older than ``latePollSeconds`` go, and if that is
    /// not enough, the gateway whose newest leave is oldest (bounded like the contacts: a client polling with
    /// made-up ids and leaving with each cannot grow it).
    private func boundRetired(_ state: inout State, now: Double) {
        Self.pruneRetired(&state, before: now - Self.latePollSeconds)
        guard state.retired.count >= capacity,
            let oldest = state.retired.min(by: { ($0.value.values.max() ?? 0) < ($1.value.values.max() ?? 0) })?.key
        else { return }
        state.retired[oldest] = nil
    }

    static func record(_ contact: GatewayContact) -> GatewayContactRecord {
        GatewayContactRecord(
            id: contact.id, firstContactMs: EpochTime.milliseconds(fromSeconds: contact.firstContact),
            lastContactMs: EpochTime.milliseconds(fromSeconds: contact.lastContact),
            enforcedVersion: contact.enforcedVersion, polls: contact.polls,
            behindSinceMs: contact.behindSince.map(EpochTime.milliseconds(fromSeconds:)))
    }
}
