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

    public init(
        id: String, firstContact: Double, lastContact: Double, enforcedVersion: Int64? = nil, polls: Int64 = 0,
        instance: String? = nil
    ) {
        self.id = id
        self.firstContact = firstContact
        self.lastContact = lastContact
        self.enforcedVersion = enforcedVersion
        self.polls = polls
        self.instance = instance
    }
}

/// What came of a gateway's leaving (``AllocationPublisher/leave(gateway:instance:now:)``).
public enum GatewayLeave: Sendable, Equatable {
    /// It left: its contact as it was.
    case left(GatewayContact)
    /// No gateway of that id is known (it never polled, or was forgotten, or already left).
    case unknown
    /// The instance that asked is not the one polling under that id now (a replacement with the same id polled
    /// since): nothing was removed. The contact is the replacement's.
    case replaced(GatewayContact)
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

    /// When a gateway left, and the instance that said so (nil when it named none, or an SRE retired it): a poll of
    /// that same instance within ``latePollSeconds`` after was sent before it left (a long-poll still in flight)
    /// and does not bring it back; any other poll does, and so does that instance's own later.
    struct Departure: Sendable {
        var at: Double
        var instance: String?
    }

    private struct State {
        var contacts: [String: GatewayContact] = [:]
        var barrier: Barrier?
        var dirty: Set<String> = []
        /// Gateways that said they left (``leave(_:instance:now:)``): gone until they poll again.
        var left: [String: Departure] = [:]
        /// Left gateways whose saved contact is still to be marked left (at the next checkpoint).
        var unsaved: Set<String> = []
    }

    private let state = Locked(State())
    /// Most gateways remembered: a client inventing ids cannot grow the table without bound.
    let capacity: Int

    /// How long after an instance's leave a poll of that instance is taken for one sent before it: the longest
    /// long-poll (60 s) and a client's margin over it (10 s), and some. Longer, a leave sent by mistake (or by a
    /// process that reuses its instance id) would keep a live gateway out of the split until it was forgotten.
    static let latePollSeconds = 75.0

    init(capacity: Int = 20_000) {
        self.capacity = max(1, capacity)
    }

    /// Records a poll from `gateway` (its `instance`, when it names one) at `now`, enforcing `version` when it
    /// said so. A poll of the very instance that left, within ``latePollSeconds`` of its leave, is not recorded: it
    /// was sent before the leave.
    ///
    /// - Returns: true when this poll cleared the make-before-break barrier.
    func record(_ gateway: String, instance: String? = nil, enforcing version: Int64?, now: Double) -> Bool {
        state.withLock { state in
            if let instance, let departed = state.left[gateway], departed.instance == instance,
                now - departed.at < Self.latePollSeconds
            {
                return false
            }
            if var contact = state.contacts[gateway] {
                contact.lastContact = max(contact.lastContact, now)
                // What it says now, even below what it said before: a gateway restarted from an older
                // snapshot enforces that one, and its lag is real.
                if let version { contact.enforcedVersion = version }
                contact.polls += 1
                contact.instance = instance
                state.contacts[gateway] = contact
            } else {
                guard state.contacts.count < capacity else { return false }
                state.contacts[gateway] = GatewayContact(
                    id: gateway, firstContact: now, lastContact: now, enforcedVersion: version, polls: 1,
                    instance: instance)
            }
            state.dirty.insert(gateway)
            state.left[gateway] = nil
            state.unsaved.remove(gateway)
            guard var barrier = state.barrier, let version, version >= barrier.version,
                barrier.waiting.remove(gateway) != nil
            else { return false }
            state.barrier = barrier
            return barrier.waiting.isEmpty
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

    /// Every contact, sorted by id.
    var contacts: [GatewayContact] {
        state.withLock { $0.contacts.values.sorted { $0.id < $1.id } }
    }

    func contact(_ id: String) -> GatewayContact? { state.withLock { $0.contacts[id] } }

    /// Gateways heard from since `since`, sorted; and those heard from before but not since, or that left.
    func partition(activeSince since: Double) -> (active: [String], gone: Set<String>) {
        state.withLock { state in
            var active: [String] = []
            var gone = Set(state.left.keys)
            for contact in state.contacts.values {
                if contact.lastContact >= since { active.append(contact.id) } else { gone.insert(contact.id) }
            }
            return (active.sorted(), gone)
        }
    }

    /// A gateway that says it is leaving (scaled down, shut down) or that an SRE says is gone for good: its contact
    /// is dropped (no `gateway_lag` alert, not listed), it counts as gone for the next split (its slices go to the
    /// others) and no barrier waits for it. It rejoins when it polls again (not with a poll of the `instance` that
    /// left, which was sent before). When `instance` is not the one polling under that id now, nothing happens
    /// (``GatewayLeave/replaced(_:)``): an old process stopping after its replacement started.
    ///
    /// - Returns: What came of it, and whether it cleared the make-before-break barrier.
    func leave(_ gateway: String, instance: String? = nil, now: Double) -> (GatewayLeave, clearedBarrier: Bool) {
        state.withLock { state in
            guard let contact = state.contacts[gateway] else { return (.unknown, false) }
            if let instance, let polling = contact.instance, polling != instance { return (.replaced(contact), false) }
            state.contacts[gateway] = nil
            // Bounded like the contacts: a client polling with made-up ids and leaving with each cannot grow it.
            if state.left.count >= capacity, let oldest = state.left.min(by: { $0.value.at < $1.value.at })?.key {
                state.left[oldest] = nil
            }
            state.left[gateway] = Departure(at: now, instance: instance)
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
            return state.unsaved.sorted().compactMap { id in state.left[id].map { (id, $0.at) } }
        }
    }

    /// Hands back what ``takeLeft()`` gave when the checkpoint that was to mark them failed (those that have not
    /// polled again since).
    func returnLeft(_ gateways: [String]) {
        state.withLock { state in
            for id in gateways where state.left[id] != nil { state.unsaved.insert(id) }
        }
    }

    /// Loads saved contacts (a restart), keeping whichever is newer per gateway; one saved as left is gone again.
    func restore(_ records: [GatewayContactRecord]) {
        state.withLock { state in
            for record in records.prefix(capacity) {
                if let leftMs = record.leftMs {
                    if state.contacts[record.id] == nil {
                        let at = EpochTime.seconds(fromMilliseconds: leftMs)
                        state.left[record.id] = Departure(at: at, instance: nil)
                    }
                    continue
                }
                let restored = GatewayContact(
                    id: record.id, firstContact: EpochTime.seconds(fromMilliseconds: record.firstContactMs),
                    lastContact: EpochTime.seconds(fromMilliseconds: record.lastContactMs),
                    enforcedVersion: record.enforcedVersion, polls: record.polls)
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

    /// Forgets gateways not heard from since `before` (and returns them), and those that left before it (their
    /// demand shares have long faded).
    @discardableResult
    func forget(before: Double) -> [String] {
        state.withLock { state in
            let old = state.contacts.values.filter { $0.lastContact < before }.map(\.id)
            for id in old { state.contacts[id] = nil }
            state.left = state.left.filter { $0.value.at >= before }
            return old.sorted()
        }
    }

    static func record(_ contact: GatewayContact) -> GatewayContactRecord {
        GatewayContactRecord(
            id: contact.id, firstContactMs: EpochTime.milliseconds(fromSeconds: contact.firstContact),
            lastContactMs: EpochTime.milliseconds(fromSeconds: contact.lastContact),
            enforcedVersion: contact.enforcedVersion, polls: contact.polls)
    }
}
