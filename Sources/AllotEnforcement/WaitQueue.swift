/// A waiter's place in service order, small enough to sort and heap without touching the ``Waiter``.
///
/// Its order (`<`) is the queue's service order across tenants: the schedule (realtime, then every other class:
/// ``TaskClass/schedule(ofRank:)``), then the fair-queuing tag, then the arrival stamp that goes with the tag (`seq`;
/// unique, so the order is total and FIFO among equal tags). Within one (tenant, upstream) lane the waiters are kept
/// in ``precedesInLane(_:)`` order — class, then calls of tasks still within their deadline, then the oldest task,
/// then the tag — and each schedule's (tag, seq) pairs of the lane are laid over its places in ascending order, so
/// both orders agree on every lane.
struct QueuePlace: Comparable, Sendable {
    var rank: Int
    var tag: Double
    var seq: UInt64
    var position: LanePosition
    var id: UInt64
    /// Where the waiter is in ``WaitQueue``'s slab.
    var slot: Int

    init(_ waiter: Waiter, slot: Int) {
        rank = waiter.request.taskClass.rank
        tag = waiter.tag
        seq = waiter.seq
        position = waiter.position
        id = waiter.id
        self.slot = slot
    }

    /// The schedule it takes turns in across tenants (``TaskClass/schedule(ofRank:)``).
    var schedule: Int { TaskClass.schedule(ofRank: rank) }

    static func < (lhs: QueuePlace, rhs: QueuePlace) -> Bool {
        if lhs.schedule != rhs.schedule { return lhs.schedule < rhs.schedule }
        if lhs.tag != rhs.tag { return lhs.tag < rhs.tag }
        return lhs.seq < rhs.seq
    }

    static func == (lhs: QueuePlace, rhs: QueuePlace) -> Bool { lhs.id == rhs.id }

    /// The order within one lane: class, then lateness and task start (``LanePosition``), then the schedule
    /// pair (which, among calls of one task or without task context, is arrival order).
    func precedesInLane(_ other: QueuePlace) -> Bool {
        if rank != other.rank { return rank < other.rank }
        if position.late != other.position.late { return !position.late }
        if position.started != other.position.started { return position.started < other.position.started }
        return pairPrecedes(other)
    }

    /// True when this place's (tag, seq) comes before `other`'s.
    func pairPrecedes(_ other: QueuePlace) -> Bool {
        tag != other.tag ? tag < other.tag : seq < other.seq
    }
}

/// A waiter's deadline, for finding the expired waiters without scanning the queue.
struct QueueDeadline: Comparable, Sendable {
    var deadline: Double
    var id: UInt64
    var slot: Int

    static func < (lhs: QueueDeadline, rhs: QueueDeadline) -> Bool {
        lhs.deadline != rhs.deadline ? lhs.deadline < rhs.deadline : lhs.id < rhs.id
    }

    static func == (lhs: QueueDeadline, rhs: QueueDeadline) -> Bool { lhs.id == rhs.id }
}

/// A binary min-heap.
struct MinHeap<Element: Comparable> {
    private(set) var elements: [Element] = []

    var count: Int { elements.count }
    var isEmpty: Bool { elements.isEmpty }
    var min: Element? { elements.first }

    mutating func push(_ element: Element) {
        elements.append(element)
        siftUp(elements.count - 1)
    }

    mutating func popMin() -> Element? {
        guard !elements.isEmpty else { return nil }
        if elements.count == 1 { return elements.removeLast() }
        let first = elements[0]
        elements[0] = elements.removeLast()
        siftDown(0)
        return first
    }

    /// Adds `element` without restoring the heap order; call ``heapify()`` before the next pop or push.
    mutating func appendUnordered(_ element: Element) { elements.append(element) }

    /// Restores the heap order in O(n) after ``appendUnordered(_:)``.
    mutating func heapify() {
        var index = elements.count / 2
        while index > 0 {
            index -= 1
            siftDown(index)
        }
    }

    /// Empties the heap, keeping its storage for reuse.
    mutating func removeAll() { elements.removeAll(keepingCapacity: true) }

    /// Changes every element by `change`, which must keep their order (adding one constant to every key does).
    mutating func updateInOrder(_ change: (inout Element) -> Void) {
        for index in elements.indices { change(&elements[index]) }
    }

    private mutating func siftUp(_ start: Int) {
        var child = start
        let element = elements[child]
        while child > 0 {
            let parent = (child - 1) / 2
            guard element < elements[parent] else { break }
            elements[child] = elements[parent]
            child = parent
        }
        elements[child] = element
    }

    private mutating func siftDown(_ start: Int) {
        var parent = start
        let element = elements[parent]
        let count = elements.count
        while true {
            var child = 2 * parent + 1
            guard child < count else { break }
            if child + 1 < count, elements[child + 1] < elements[child] { child += 1 }
            guard elements[child] < element else { break }
            elements[parent] = elements[child]
            parent = child
        }
        elements[parent] = element
    }
}

/// The admission queue's storage: one lane per (tenant, upstream) holding that pair's waiters in service order,
/// so a pump visits each waiting pair's head instead of every waiter.
///
/// Why lanes give the same answers as one list in service order: a pump decides a pair's waiters strictly in
/// order and stops at the first that stays (nothing overtakes it), after which the pair's later waiters can
/// only leave by expiring. Merging the lanes' heads (and the expired waiters) by ``QueuePlace`` therefore
/// decides exactly the waiters the single list would, in the same order. The global service order restricted
/// to one pair is the lane's order, because a lane's (tag, seq) pairs ascend along it.
///
/// The schedule belongs to the lane, not to its waiters: each schedule of a lane (realtime, the other classes)
/// holds the fair-queuing pairs (tag, seq) its tenant was given, in ascending order, one per waiter, and the i-th
/// waiter of the schedule in lane order has the i-th pair (the schedule's waiters are contiguous in lane order:
/// realtime first). A call of an older task inserted in the middle takes the pair of the place it
/// takes, and the waiters behind it each move to the next pair (the new, largest pair goes to the last). So
/// the tenant is served across tenants exactly as often and as early as before; only which of its own calls
/// fills each turn changes.
///
/// The pairs are therefore not stored with the waiters: a lane keeps its waiters' slots in lane order, and
/// per schedule a sorted run of pairs (``Pairs``); a waiter's pair is read off by its index. Moving a waiter (an
/// older task's call inserted in the middle, a waiter leaving, a late task moving back) moves one slot number
/// and at most one pair, whatever the number of waiters behind it: O(log n) to find the place and one
/// `memmove` of machine words. (Written into each waiter instead, every insert in the middle rewrote the pair
/// of every waiter behind it: under a retry storm with lanes thousands long, most of the simulator's time.)
///
/// The order within a lane is ``QueuePlace/precedesInLane(_:)`` applied to keys that do not move
/// (``arrivalBySlot``): class, then lateness and task start, then arrival (`seq` = the waiter's id); among
/// late waiters with the same task start, the one marked late last goes first. That is the order the pairs
/// gave when each waiter carried its own: the enforcer gives an arrival a pair above every pair its tenant
/// holds in the schedule, so it went behind the waiters of equal rank, and one just marked late held a smaller
/// pair than those already late. (Not the arrival pair itself: after turns are given back, a waiter's arrival
/// pair can exceed the pairs of later arrivals.)
///
/// Waiters live in a slab (`slots`) so lanes and heaps move small values, never a ``Waiter``. Deadlines are
/// kept in heaps with lazy deletion: an entry whose slot no longer holds its id is stale. Task deadlines have
/// their own heap, so that waiters whose task became late are found without a scan.
struct WaitQueue {
    /// The (tag, seq) pairs of one schedule of a lane, ascending; `items[start...]` are live, so taking the first
    /// does not shift the rest.
    struct Pairs {
        private(set) var items: [(tag: Double, seq: UInt64)] = []
        private(set) var start = 0

        var count: Int { items.count - start }

        /// The pair at `offset` from the first.
        subscript(offset: Int) -> (tag: Double, seq: UInt64) { items[start + offset] }

        /// Adds `pair` in order (an arrival's pair is the largest, so this is almost always an append).
        mutating func insert(_ pair: (tag: Double, seq: UInt64)) {
            var low = start
            var high = items.count
            if high > low, Self.precedes(pair, items[high - 1]) {
                while low < high {
                    let middle = (low + high) / 2
                    if Self.precedes(items[middle], pair) { low = middle + 1 } else { high = middle }
                }
            } else {
                low = high
            }
            items.insert(pair, at: low)
        }

        /// Removes and returns the pair at `offset` from the first.
        @discardableResult
        mutating func remove(at offset: Int) -> (tag: Double, seq: UInt64) {
            let pair: (tag: Double, seq: UInt64)
            if offset == 0 {
                pair = items[start]
                start += 1
            } else {
                pair = items.remove(at: start + offset)
            }
            compact()
            return pair
        }

        /// Removes and returns the largest pair.
        @discardableResult
        mutating func removeLast() -> (tag: Double, seq: UInt64) {
            let pair = items.removeLast()
            compact()
            return pair
        }

        private mutating func compact() {
            if start == items.count {
                items.removeAll(keepingCapacity: true)
                start = 0
            } else {
                WaitQueue.dropConsumedPrefix(&items, start: &start)
            }
        }

        static func precedes(_ a: (tag: Double, seq: UInt64), _ b: (tag: Double, seq: UInt64)) -> Bool {
            a.tag != b.tag ? a.tag < b.tag : a.seq < b.seq
        }
    }

    /// One (tenant, upstream)'s waiters in service order; `slots[start...]` are live, so taking the head does
    /// not shift the rest.
    struct Lane {
        var slots: [Int] = []
        var start = 0
        /// Per schedule (``TaskClass/schedule(ofRank:)``: realtime, every other class), the pairs of the lane's
        /// waiters in it.
        var pairs = [Pairs](repeating: Pairs(), count: 2)
        /// Index in ``WaitQueue/activeLanes`` while the lane has waiters.
        var activeIndex = -1
        /// The pump that found this lane's head staying (see ``WaitQueue/pumpSerial``).
        var blockedIn = 0
        /// The pump that listed this lane's head (``WaitQueue/beginPartialPump(now:lanes:into:)``).
        var listedIn = 0
        /// Its upstream's index in ``WaitQueue/upstreamIDs``.
        var upstream = 0

        var isEmpty: Bool { start == slots.count }
        var count: Int { slots.count - start }

        mutating func dropConsumedPrefix() { WaitQueue.dropConsumedPrefix(&slots, start: &start) }
    }

    /// The waiters, by slot; nil for a free slot. A waiter's `tag`, `seq` and `position` here are as it came
    /// in: the current ones are its lane's (see ``waiter(inSlot:)``).
    private var slots: [Waiter?] = []
    /// Each occupied slot's key in lane order: its place with its current position (lateness), but in place of
    /// its pair (0, id), or (−n, id) for the n-th waiter marked late. Its current pair: ``currentPlace(_:)``.
    private var arrivalBySlot: [QueuePlace] = []
    private var keyIDBySlot: [Int] = []
    private var freeSlots: [Int] = []
    private(set) var lanes: [Lane] = []
    /// Ids of the (tenant, upstream) keys that ever queued: a waiter's ``Waiter/keyID`` and its lane's index.
    private(set) var keyIDs: [TenantKey: Int] = [:]
    /// Lanes with waiters, in no particular order (a pump sorts their heads).
    private(set) var activeLanes: [Int] = []
    /// Ids of the upstreams that ever queued (a lane's ``Lane/upstream``).
    private var upstreamIDs: [String: Int] = [:]
    private var deadlines = MinHeap<QueueDeadline>()
    /// Task deadlines (``AdmissionRequest/taskDeadline``) of the waiters not yet marked late.
    private var taskDeadlines = MinHeap<QueueDeadline>()
    /// Counts pumps, so a lane can be marked blocked for one pump without clearing marks afterwards.
    private(set) var pumpSerial = 0
    private(set) var count = 0
    /// Counts the waiters marked late, for their order among the late ones (``markLate(slot:)``).
    private var lateMarks = 0

    var isEmpty: Bool { count == 0 }

    /// Moves the queue's own instants — each waiter's arrival, maximum-wait deadline and last failure, and the heap of
    /// deadlines — by `delta` seconds: the wall clock stepped
    /// (``EnforcerState/noticeClock(_:monotonic:forward:effects:)``). Task deadlines are the caller's instants and
    /// stay.
    mutating func shiftInstants(by delta: Double) {
        for slot in slots.indices where slots[slot] != nil {
            slots[slot]!.enqueuedAt += delta
            slots[slot]!.deadline += delta
            slots[slot]!.failureAt += delta
        }
        deadlines.updateInOrder { $0.deadline += delta }
    }

    /// The waiter in `slot`; the slot must be occupied. Write only what the queue does not order by (its
    /// `failure`): the place's (tag, seq) and position are the queue's own.
    subscript(slot: Int) -> Waiter {
        get { waiter(inSlot: slot) }
        _modify { yield &slots[slot]! }
    }

    /// The lane (``Waiter/keyID``) of the waiter in `slot`; the slot must be occupied.
    func keyID(ofSlot slot: Int) -> Int { keyIDBySlot[slot] }

    /// The waiter in `slot` with its place's current (tag, seq) and position.
    private func waiter(inSlot slot: Int) -> Waiter {
        var waiter = slots[slot]!
        let place = currentPlace(slot)
        waiter.tag = place.tag
        waiter.seq = place.seq
        waiter.position = place.position
        return waiter
    }

    /// The place of the waiter in `slot` as it is now: its lane's pair at its index.
    private func currentPlace(_ slot: Int) -> QueuePlace {
        currentPlace(slot, at: laneIndex(ofSlot: slot))
    }

    private func currentPlace(_ slot: Int, at index: Int) -> QueuePlace {
        var place = arrivalBySlot[slot]
        let keyID = keyIDBySlot[slot]
        let pair = lanes[keyID].pairs[place.schedule][scheduleOffset(index, lane: keyID, schedule: place.schedule)]
        place.tag = pair.tag
        place.seq = pair.seq
        return place
    }

    /// The offset within its schedule of the waiter at `index` of lane `keyID` (the lane's schedules come in
    /// order: its waiters are in class order, realtime first).
    private func scheduleOffset(_ index: Int, lane keyID: Int, schedule: Int) -> Int {
        var offset = index - lanes[keyID].start
        for lower in 0..<schedule { offset -= lanes[keyID].pairs[lower].count }
        return offset
    }

    /// True when the slot holds a waiter (``arrivalBySlot`` of a free slot has ``freeSlotID``).
    private func isOccupied(_ slot: Int, by id: UInt64) -> Bool { arrivalBySlot[slot].id == id }

    /// ``arrivalBySlot``'s id of a free slot (waiter ids count up from 1).
    private static let freeSlotID = UInt64.max

    /// True when `place` still names a waiting request (its slot was not freed or reused).
    func holds(_ place: QueuePlace) -> Bool { isOccupied(place.slot, by: place.id) }

    /// True when the waiter `id` still waits in `slot`.
    func holds(slot: Int, id: UInt64) -> Bool { isOccupied(slot, by: id) }

    /// Adds `waiter` (its ``Waiter/keyID`` is set here) at its place in its lane and returns that place: its
    /// (tag, seq) is then the one of the place it took (see the type's comment).
    @discardableResult
    mutating func insert(_ waiter: Waiter) -> QueuePlace {
        var waiter = waiter
        let keyID: Int
        if let known = keyIDs[waiter.key] {
            keyID = known
        } else {
            keyID = lanes.count
            keyIDs[waiter.key] = keyID
            let upstream = upstreamIDs[waiter.key.upstream] ?? upstreamIDs.count
            upstreamIDs[waiter.key.upstream] = upstream
            lanes.append(Lane(upstream: upstream))
        }
        waiter.keyID = keyID
        let slot: Int
        if let free = freeSlots.popLast() {
            slot = free
            slots[slot] = waiter
            arrivalBySlot[slot] = Self.arrival(waiter, slot: slot)
            keyIDBySlot[slot] = keyID
        } else {
            slot = slots.count
            slots.append(waiter)
            arrivalBySlot.append(Self.arrival(waiter, slot: slot))
            keyIDBySlot.append(keyID)
        }
        if lanes[keyID].isEmpty {
            lanes[keyID].activeIndex = activeLanes.count
            activeLanes.append(keyID)
        }
        lanes[keyID].pairs[arrivalBySlot[slot].schedule].insert((waiter.tag, waiter.seq))
        let index = place(slot, inLane: keyID)
        deadlines.push(QueueDeadline(deadline: waiter.deadline, id: waiter.id, slot: slot))
        if !waiter.position.late, let taskDeadline = waiter.request.taskDeadline, taskDeadline.isFinite {
            taskDeadlines.push(QueueDeadline(deadline: taskDeadline, id: waiter.id, slot: slot))
        }
        count += 1
        return currentPlace(slot, at: index)
    }

    /// The waiter's key in lane order (see ``arrivalBySlot``).
    private static func arrival(_ waiter: Waiter, slot: Int) -> QueuePlace {
        var place = QueuePlace(waiter, slot: slot)
        place.tag = 0
        place.seq = waiter.id
        return place
    }

    /// Puts `slot` into its lane in lane order and returns its index.
    private mutating func place(_ slot: Int, inLane keyID: Int) -> Int {
        let index = searchLane(keyID, for: arrivalBySlot[slot])
        lanes[keyID].slots.insert(slot, at: index)
        return index
    }

    /// The first index of lane `keyID` whose waiter does not come before `key` in lane order.
    private func searchLane(_ keyID: Int, for key: QueuePlace) -> Int {
        lanes[keyID].slots.withUnsafeBufferPointer { slots in
            arrivalBySlot.withUnsafeBufferPointer { arrival in
                // Arrivals are mostly at the end.
                var low = lanes[keyID].start
                var high = slots.count
                if high > low, !arrival[slots[high - 1]].precedesInLane(key) {
                    while low < high {
                        let middle = (low + high) / 2
                        if arrival[slots[middle]].precedesInLane(key) { low = middle + 1 } else { high = middle }
                    }
                } else {
                    low = high
                }
                return low
            }
        }
    }

    /// The index in its lane of the waiter in `slot`.
    private func laneIndex(ofSlot slot: Int) -> Int {
        let keyID = keyIDBySlot[slot]
        let start = lanes[keyID].start
        if lanes[keyID].slots[start] == slot { return start }
        let index = searchLane(keyID, for: arrivalBySlot[slot])
        precondition(lanes[keyID].slots[index] == slot, "a waiter missing from its lane")
        return index
    }

    /// The live places of lane `keyID` in lane order, as they are now.
    func places(ofLane keyID: Int) -> [QueuePlace] {
        (lanes[keyID].start..<lanes[keyID].slots.count).map { currentPlace(lanes[keyID].slots[$0], at: $0) }
    }

    /// The first waiter of `key` in service order.
    func head(of key: TenantKey) -> Waiter? {
        guard let place = headPlace(of: key) else { return nil }
        return waiter(inSlot: place.slot)
    }

    /// The place of the first waiter of `key` in service order.
    func headPlace(of key: TenantKey) -> QueuePlace? {
        guard let keyID = keyIDs[key] else { return nil }
        return head(ofLane: keyID)
    }

    /// The place of the last waiter of `key` in service order: the one a full queue displaces first.
    func tailPlace(of key: TenantKey) -> QueuePlace? {
        guard let keyID = keyIDs[key], !lanes[keyID].isEmpty else { return nil }
        let index = lanes[keyID].slots.count - 1
        return currentPlace(lanes[keyID].slots[index], at: index)
    }

    /// Removes the waiter at `place` (which ``holds(_:)``) from its lane and the slab: the one served (the
    /// places behind it keep their (tag, seq), its own leaves with it). See ``removeUnserved(_:)`` for one
    /// that leaves without a ticket.
    @discardableResult
    mutating func remove(_ place: QueuePlace) -> Waiter {
        let slot = place.slot
        let keyID = keyIDBySlot[slot]
        let index = laneIndex(ofSlot: slot)
        let schedule = arrivalBySlot[slot].schedule
        let pair = lanes[keyID].pairs[schedule].remove(at: scheduleOffset(index, lane: keyID, schedule: schedule))
        return detach(slot: slot, at: index, pair: pair)
    }

    /// Takes the waiter in `slot`, at `index` in its lane, out of the lane and the slab; its pair (already
    /// taken out of the lane's) is `pair`.
    private mutating func detach(slot: Int, at index: Int, pair: (tag: Double, seq: UInt64)) -> Waiter {
        var waiter = slots[slot]!
        waiter.tag = pair.tag
        waiter.seq = pair.seq
        waiter.position = arrivalBySlot[slot].position
        let keyID = keyIDBySlot[slot]
        takeOut(index, ofLane: keyID)
        compact(keyID)
        slots[slot] = nil
        arrivalBySlot[slot].id = Self.freeSlotID
        freeSlots.append(slot)
        count -= 1
        if count == 0 {
            // Nothing waits: every remaining deadline entry is stale.
            deadlines = MinHeap()
            taskDeadlines = MinHeap()
        }
        return waiter
    }

    /// Takes the slot at `index` out of lane `keyID`, shifting the shorter side: waiters expire behind a
    /// blocked head in arrival order, near the front of a lane that may be thousands long.
    private mutating func takeOut(_ index: Int, ofLane keyID: Int) {
        let start = lanes[keyID].start
        if index - start < lanes[keyID].slots.count - index {
            lanes[keyID].slots.withUnsafeMutableBufferPointer { slots in
                var position = index
                while position > start {
                    slots[position] = slots[position - 1]
                    position -= 1
                }
            }
            lanes[keyID].start += 1
        } else {
            lanes[keyID].slots.remove(at: index)
        }
    }

    /// Removes the waiter at `place` (which ``holds(_:)``), which leaves without a ticket (its maximum wait
    /// ended, it was denied, displaced or cancelled), and gives its turn back: the waiters of its schedule
    /// (``TaskClass/schedule(ofRank:)``) behind it in its lane each move one place forward with the pair of the
    /// place they take, and the schedule's largest pair leaves instead of its own. Returns the waiter, the tag that
    /// left, and the largest tag its schedule still holds behind where it was in the lane (nil when it was the
    /// schedule's last), for the tenant's fair-queuing account.
    ///
    /// Why: a tenant's turns across tenants should advance with the calls it is served, not with the calls
    /// it queues. A call of a new task overtaken until its maximum wait ends, then retried, would otherwise
    /// take a fresh turn at the end of the schedule each time and leave its old one empty, pushing its tenant
    /// back behind the others (wherever tenants compete: the gateway's cap, the allocation lent when idle).
    @discardableResult
    mutating func removeUnserved(_ place: QueuePlace) -> (waiter: Waiter, droppedTag: Double, lastTag: Double?) {
        let slot = place.slot
        let keyID = keyIDBySlot[slot]
        let index = laneIndex(ofSlot: slot)
        let schedule = arrivalBySlot[slot].schedule
        let offset = scheduleOffset(index, lane: keyID, schedule: schedule)
        let scheduleCount = lanes[keyID].pairs[schedule].count
        // The leaving waiter takes the largest pair with it; the largest left behind it is the one before.
        let lastTag = offset < scheduleCount - 1 ? lanes[keyID].pairs[schedule][scheduleCount - 2].tag : nil
        let pair = lanes[keyID].pairs[schedule].removeLast()
        return (detach(slot: slot, at: index, pair: pair), pair.tag, lastTag)
    }

    /// Marks the waiter in `slot` late (its task's deadline passed) and moves it behind its lane's timely
    /// waiters of its class. The pairs stay in the lane's schedule: the waiters it passes each move one place
    /// forward with the pair of the place they take, so the tenant's turns across tenants do not change.
    mutating func markLate(slot: Int) {
        let keyID = keyIDBySlot[slot]
        takeOut(laneIndex(ofSlot: slot), ofLane: keyID)
        arrivalBySlot[slot].position.late = true
        // Among the late waiters of its class whose tasks started at the same time it goes first (the order
        // this queue has always had: a waiter just marked late held the smallest pair of them).
        lateMarks += 1
        arrivalBySlot[slot].tag = -Double(lateMarks)
        _ = place(slot, inLane: keyID)
    }

    /// True when some waiter's task deadline may be at or before `now` (a stale entry can make it true).
    func hasTaskDeadline(atOrBefore now: Double) -> Bool {
        guard let first = taskDeadlines.min else { return false }
        return first.deadline <= now
    }

    /// Takes the waiters whose task deadline is at or before `now` and that are not marked late yet, in order
    /// of that deadline (then arrival): their slots.
    mutating func takeLateTasks(atOrBefore now: Double) -> [Int] {
        var late: [Int] = []
        while let first = taskDeadlines.min, first.deadline <= now {
            _ = taskDeadlines.popMin()
            if isOccupied(first.slot, by: first.id), !arrivalBySlot[first.slot].position.late {
                late.append(first.slot)
            }
        }
        return late
    }

    /// The earliest task deadline among the waiters not marked late (stale heap entries on top are dropped).
    mutating func earliestTaskDeadline() -> Double {
        while let first = taskDeadlines.min,
            !isOccupied(first.slot, by: first.id) || arrivalBySlot[first.slot].position.late
        {
            _ = taskDeadlines.popMin()
        }
        return taskDeadlines.min?.deadline ?? .infinity
    }

    /// Drops the lane's consumed prefix once it is most of the array, and retires an emptied lane.
    private mutating func compact(_ keyID: Int) {
        if lanes[keyID].isEmpty {
            lanes[keyID].slots.removeAll(keepingCapacity: true)
            lanes[keyID].start = 0
            let index = lanes[keyID].activeIndex
            let last = activeLanes.removeLast()
            if last != keyID {
                activeLanes[index] = last
                lanes[last].activeIndex = index
            }
            lanes[keyID].activeIndex = -1
        } else {
            lanes[keyID].dropConsumedPrefix()
        }
    }

    /// Drops `items[..<start]` once it is at least 16 and half of the array (amortised O(1) per element taken
    /// from the front; a lane's slots and its schedules' pairs alike).
    static func dropConsumedPrefix<Item>(_ items: inout [Item], start: inout Int) {
        guard start >= 16, start * 2 >= items.count else { return }
        items.removeFirst(start)
        start = 0
    }

    /// The first waiter's place of lane `keyID` (the first pair of the lowest class it holds); nil when empty.
    func head(ofLane keyID: Int) -> QueuePlace? {
        guard !lanes[keyID].isEmpty else { return nil }
        let start = lanes[keyID].start
        return currentPlace(lanes[keyID].slots[start], at: start)
    }

    /// Starts a pump: puts in `visits` the places it must visit, each waiting pair's head and every waiter whose
    /// deadline is at or before `now` (a head may appear twice: the second visit finds it gone).
    mutating func beginPump(now: Double, into visits: inout MinHeap<QueuePlace>) {
        pumpSerial += 1
        for keyID in activeLanes { visits.appendUnordered(head(ofLane: keyID)!) }
        while let first = deadlines.min, first.deadline <= now {
            _ = deadlines.popMin()
            if isOccupied(first.slot, by: first.id) { visits.appendUnordered(currentPlace(first.slot)) }
        }
        visits.heapify()
    }

    /// Starts a pump that visits only the heads of `lanes` (each once) and the waiters whose deadline is at or
    /// before `now`, and marks blocked the lanes where such a waiter stands behind a head that is neither listed
    /// nor expiring, so it leaves with its own stored failure as it would behind a head that stays. A lane
    /// whose head expires is not marked: the head is re-evaluated, and so is each next head while it expires or
    /// is admitted. The caller must know that the heads of the other lanes cannot be admitted at `now`
    /// (``EnforcerState/pump(now:effects:changed:)``).
    mutating func beginPartialPump(now: Double, lanes due: [Int], into visits: inout MinHeap<QueuePlace>) {
        pumpSerial += 1
        for keyID in due where lanes[keyID].listedIn != pumpSerial {
            guard let head = head(ofLane: keyID) else { continue }
            lanes[keyID].listedIn = pumpSerial
            visits.appendUnordered(head)
        }
        var behind: [Int] = []
        while let first = deadlines.min, first.deadline <= now {
            _ = deadlines.popMin()
            guard isOccupied(first.slot, by: first.id) else { continue }
            let place = currentPlace(first.slot)
            visits.appendUnordered(place)
            let keyID = keyIDBySlot[first.slot]
            if head(ofLane: keyID)?.id != place.id { behind.append(keyID) }
        }
        for keyID in behind where lanes[keyID].listedIn != pumpSerial {
            // Every waiter whose deadline is over was just listed, so a head past its deadline is in `visits`.
            if let head = head(ofLane: keyID), slots[head.slot]!.deadline > now { block(keyID) }
        }
        visits.heapify()
    }

    /// The lanes with waiters on `upstream`.
    func activeLanes(on upstream: String) -> [Int] {
        guard let id = upstreamIDs[upstream] else { return [] }
        return activeLanes.filter { lanes[$0].upstream == id }
    }

    /// How many waiters of its lane are ahead of the one in `slot` (occupied).
    func waitersAhead(ofSlot slot: Int) -> Int { laneIndex(ofSlot: slot) - lanes[keyIDBySlot[slot]].start }

    /// True when the waiter in `slot` (occupied) is its lane's head.
    func isHead(slot: Int) -> Bool { head(ofLane: keyIDBySlot[slot])?.slot == slot }

    /// Marks a lane blocked for the current pump: its head stays, so its later waiters may only expire.
    mutating func block(_ keyID: Int) { lanes[keyID].blockedIn = pumpSerial }

    func isBlocked(_ keyID: Int) -> Bool { lanes[keyID].blockedIn == pumpSerial }

    /// The earliest deadline among the waiters (stale heap entries on top are dropped first).
    mutating func earliestDeadline() -> Double {
        while let first = deadlines.min, !isOccupied(first.slot, by: first.id) { _ = deadlines.popMin() }
        if deadlines.count > 2 * count + 1_024 {
            // Stale entries of admitted waiters linger until their deadline; rebuild before they dominate.
            deadlines = MinHeap()
            for (slot, waiter) in slots.enumerated() {
                if let waiter {
                    deadlines.appendUnordered(QueueDeadline(deadline: waiter.deadline, id: waiter.id, slot: slot))
                }
            }
            deadlines.heapify()
        }
        if taskDeadlines.count > 2 * count + 1_024 {
            // The same for task deadlines, which can be minutes away.
            taskDeadlines = MinHeap()
            for (slot, waiter) in slots.enumerated() {
                if let waiter, !arrivalBySlot[slot].position.late, let taskDeadline = waiter.request.taskDeadline,
                    taskDeadline.isFinite
                {
                    taskDeadlines.appendUnordered(QueueDeadline(deadline: taskDeadline, id: waiter.id, slot: slot))
                }
            }
            taskDeadlines.heapify()
        }
        return deadlines.min?.deadline ?? .infinity
    }

    /// The place of the waiter with `id`, if it is waiting.
    func place(of id: UInt64) -> QueuePlace? {
        guard let slot = slots.firstIndex(where: { $0?.id == id }) else { return nil }
        return currentPlace(slot)
    }

    /// Removes every waiter, returning them in service order.
    mutating func removeAll() -> [Waiter] {
        var places: [QueuePlace] = []
        places.reserveCapacity(count)
        for keyID in activeLanes { places += self.places(ofLane: keyID) }
        places.sort()
        let leaving = places.map { waiter(inSlot: $0.slot) }
        self = WaitQueue()
        return leaving
    }
}
