/// A waiter's place in service order, small enough to sort and heap without touching the ``Waiter``.
///
/// Its order (`<`) is the queue's strict service order across tenants: task class, then the fair-queuing
/// tag, then the arrival stamp that goes with the tag (`seq`; unique, so the order is total and FIFO among
/// equal tags). Within one (tenant, upstream) lane the waiters are kept in ``precedesInLane(_:)`` order —
/// class, then calls of tasks still within their deadline, then the oldest task, then the tag — and the
/// lane's (tag, seq) pairs are laid over its places in ascending order, so both orders agree on every lane.
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

    static func < (lhs: QueuePlace, rhs: QueuePlace) -> Bool {
        if lhs.rank != rhs.rank { return lhs.rank < rhs.rank }
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
/// The schedule belongs to the lane, not to its waiters: each class of a lane holds the fair-queuing tags its
/// tenant was given, in ascending order, one per waiter, and the i-th waiter in lane order has the i-th tag.
/// A call of an older task inserted in the middle takes the tag of the place it takes, and the waiters behind
/// it each move to the next tag (the new, largest tag goes to the last). So the tenant is served across
/// tenants exactly as often and as early as before; only which of its own calls fills each turn changes. The
/// shift costs O(waiters behind it in its lane and class), like the array insert itself; arrivals without
/// task context go to the end and shift nothing.
///
/// Waiters live in a slab (`slots`) so lanes and heaps move small ``QueuePlace`` values, never a ``Waiter``.
/// Deadlines are kept in heaps with lazy deletion: an entry whose slot no longer holds its id is stale. Task
/// deadlines have their own heap, so that waiters whose task became late are found without a scan.
struct WaitQueue {
    /// One (tenant, upstream)'s waiters in service order; `places[start...]` are live, so taking the head does
    /// not shift the rest.
    struct Lane {
        var places: [QueuePlace] = []
        var start = 0
        /// Index in ``WaitQueue/activeLanes`` while the lane has waiters.
        var activeIndex = -1
        /// The pump that found this lane's head staying (see ``WaitQueue/pumpSerial``).
        var blockedIn = 0

        var isEmpty: Bool { start == places.count }
        var count: Int { places.count - start }
        var head: QueuePlace? { isEmpty ? nil : places[start] }
    }

    /// The waiters, by slot; nil for a free slot. A waiter's `tag`, `seq` and `position` here are as it came
    /// in: the current ones are in ``placeBySlot`` (see ``waiter(inSlot:)``).
    private var slots: [Waiter?] = []
    /// Each occupied slot's place as it is now (its lane's (tag, seq) and position), and its lane: kept apart
    /// from the slab, so that moving pairs along a lane writes two numbers per waiter. Written through the
    /// optional `Waiter` instead, each write copied the waiter whole (its request and closure retained and
    /// released), and under a retry storm with lanes thousands long that was half the simulator's time.
    private var placeBySlot: [QueuePlace] = []
    private var keyIDBySlot: [Int] = []
    private var freeSlots: [Int] = []
    private(set) var lanes: [Lane] = []
    /// Ids of the (tenant, upstream) keys that ever queued: a waiter's ``Waiter/keyID`` and its lane's index.
    private(set) var keyIDs: [TenantKey: Int] = [:]
    /// Lanes with waiters, in no particular order (a pump sorts their heads).
    private(set) var activeLanes: [Int] = []
    private var deadlines = MinHeap<QueueDeadline>()
    /// Task deadlines (``AdmissionRequest/taskDeadline``) of the waiters not yet marked late.
    private var taskDeadlines = MinHeap<QueueDeadline>()
    /// Counts pumps, so a lane can be marked blocked for one pump without clearing marks afterwards.
    private(set) var pumpSerial = 0
    private(set) var count = 0

    var isEmpty: Bool { count == 0 }

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
        let place = placeBySlot[slot]
        waiter.tag = place.tag
        waiter.seq = place.seq
        waiter.position = place.position
        return waiter
    }

    /// The current place of the waiter in `slot`; nil for a free slot.
    private func occupant(_ slot: Int) -> QueuePlace? {
        placeBySlot[slot].id == Self.freeSlotID ? nil : placeBySlot[slot]
    }

    /// ``placeBySlot``'s id of a free slot (waiter ids count up from 1).
    private static let freeSlotID = UInt64.max

    /// True when `place` still names a waiting request (its slot was not freed or reused).
    func holds(_ place: QueuePlace) -> Bool { occupant(place.slot)?.id == place.id }

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
            lanes.append(Lane())
        }
        waiter.keyID = keyID
        let slot: Int
        if let free = freeSlots.popLast() {
            slot = free
            slots[slot] = waiter
            placeBySlot[slot] = QueuePlace(waiter, slot: slot)
            keyIDBySlot[slot] = keyID
        } else {
            slot = slots.count
            slots.append(waiter)
            placeBySlot.append(QueuePlace(waiter, slot: slot))
            keyIDBySlot.append(keyID)
        }
        if lanes[keyID].isEmpty {
            lanes[keyID].activeIndex = activeLanes.count
            activeLanes.append(keyID)
        }
        let index = place(QueuePlace(waiter, slot: slot), inLane: keyID)
        deadlines.push(QueueDeadline(deadline: waiter.deadline, id: waiter.id, slot: slot))
        if !waiter.position.late, let taskDeadline = waiter.request.taskDeadline, taskDeadline.isFinite {
            taskDeadlines.push(QueueDeadline(deadline: taskDeadline, id: waiter.id, slot: slot))
        }
        count += 1
        return lanes[keyID].places[index]
    }

    /// Puts `place` into its lane in lane order, then restores the ascending (tag, seq) pairs of its class by
    /// moving the pair it brought to where it belongs (the places in between each take their neighbour's);
    /// returns its index.
    private mutating func place(_ place: QueuePlace, inLane keyID: Int) -> Int {
        // Binary search for the first place the new one precedes (arrivals are mostly at the end).
        var low = lanes[keyID].start
        var high = lanes[keyID].places.count
        while low < high {
            let middle = (low + high) / 2
            if lanes[keyID].places[middle].precedesInLane(place) { low = middle + 1 } else { high = middle }
        }
        lanes[keyID].places.insert(place, at: low)
        var index = low
        while index + 1 < lanes[keyID].places.count, lanes[keyID].places[index + 1].rank == place.rank,
            lanes[keyID].places[index + 1].pairPrecedes(lanes[keyID].places[index])
        {
            swapPairs(keyID, index, index + 1)
            index += 1
        }
        index = low
        while index > lanes[keyID].start, lanes[keyID].places[index - 1].rank == place.rank,
            lanes[keyID].places[index].pairPrecedes(lanes[keyID].places[index - 1])
        {
            swapPairs(keyID, index - 1, index)
            index -= 1
        }
        return low
    }

    /// Exchanges the (tag, seq) of two places of a lane (the waiters stay where they are).
    private mutating func swapPairs(_ keyID: Int, _ first: Int, _ second: Int) {
        let a = lanes[keyID].places[first]
        let b = lanes[keyID].places[second]
        lanes[keyID].places[first].tag = b.tag
        lanes[keyID].places[first].seq = b.seq
        lanes[keyID].places[second].tag = a.tag
        lanes[keyID].places[second].seq = a.seq
        placeBySlot[a.slot].tag = b.tag
        placeBySlot[a.slot].seq = b.seq
        placeBySlot[b.slot].tag = a.tag
        placeBySlot[b.slot].seq = a.seq
    }

    /// The index in its lane of the waiter in `slot`.
    private func laneIndex(ofSlot slot: Int) -> Int {
        let keyID = keyIDBySlot[slot]
        let start = lanes[keyID].start
        if lanes[keyID].places[start].slot == slot { return start }
        let place = placeBySlot[slot]
        var low = start
        var high = lanes[keyID].places.count
        while low < high {
            let middle = (low + high) / 2
            if lanes[keyID].places[middle].precedesInLane(place) { low = middle + 1 } else { high = middle }
        }
        precondition(lanes[keyID].places[low].id == place.id, "a waiter missing from its lane")
        return low
    }

    /// The first waiter of `key` in service order.
    func head(of key: TenantKey) -> Waiter? {
        guard let keyID = keyIDs[key], let place = lanes[keyID].head else { return nil }
        return waiter(inSlot: place.slot)
    }

    /// The place of the first waiter of `key` in service order.
    func headPlace(of key: TenantKey) -> QueuePlace? {
        guard let keyID = keyIDs[key] else { return nil }
        return lanes[keyID].head
    }

    /// The place of the last waiter of `key` in service order: the one a full queue displaces first.
    func tailPlace(of key: TenantKey) -> QueuePlace? {
        guard let keyID = keyIDs[key], !lanes[keyID].isEmpty else { return nil }
        return lanes[keyID].places.last
    }

    /// Removes the waiter at `place` (which ``holds(_:)``) from its lane and the slab: the one served (the
    /// places behind it keep their (tag, seq), its own leaves with it). See ``removeUnserved(_:)`` for one
    /// that leaves without a ticket.
    @discardableResult
    mutating func remove(_ place: QueuePlace) -> Waiter {
        detach(slot: place.slot, at: laneIndex(ofSlot: place.slot))
    }

    /// Takes the waiter in `slot`, at `index` in its lane, out of the lane and the slab.
    private mutating func detach(slot: Int, at index: Int) -> Waiter {
        let waiter = waiter(inSlot: slot)
        let keyID = keyIDBySlot[slot]
        if index == lanes[keyID].start {
            lanes[keyID].start += 1
        } else {
            lanes[keyID].places.remove(at: index)
        }
        compact(keyID)
        slots[slot] = nil
        placeBySlot[slot].id = Self.freeSlotID
        freeSlots.append(slot)
        count -= 1
        if count == 0 {
            // Nothing waits: every remaining deadline entry is stale.
            deadlines = MinHeap()
            taskDeadlines = MinHeap()
        }
        return waiter
    }

    /// Removes the waiter at `place` (which ``holds(_:)``), which leaves without a ticket (its maximum wait
    /// ended, it was denied, displaced or cancelled), and gives its turn back: the waiters of its class behind
    /// it in its lane each move one place forward with the pair of the place they take, and the class's
    /// largest pair leaves instead of its own. Returns the waiter, the tag that left, and the largest tag its
    /// class still holds in the lane (nil when none is left), for the tenant's fair-queuing account.
    ///
    /// Why: a tenant's turns across tenants should advance with the calls it is served, not with the calls
    /// it queues. A call of a new task overtaken until its maximum wait ends, then retried, would otherwise
    /// take a fresh turn at the end of the schedule each time and leave its old one empty, pushing its tenant
    /// back behind the others (wherever tenants compete: the gateway's cap, the allocation lent when idle).
    @discardableResult
    mutating func removeUnserved(_ place: QueuePlace) -> (waiter: Waiter, droppedTag: Double, lastTag: Double?) {
        let keyID = keyIDBySlot[place.slot]
        let index = laneIndex(ofSlot: place.slot)
        let rank = lanes[keyID].places[index].rank
        var end = index + 1
        while end < lanes[keyID].places.count, lanes[keyID].places[end].rank == rank { end += 1 }
        var carried = (tag: lanes[keyID].places[index].tag, seq: lanes[keyID].places[index].seq)
        // O(waiters behind it): through buffers, so the loop pays no uniqueness check per element.
        lanes[keyID].places.withUnsafeMutableBufferPointer { places in
            placeBySlot.withUnsafeMutableBufferPointer { placeBySlot in
                for behind in (index + 1)..<end {
                    let own = (tag: places[behind].tag, seq: places[behind].seq)
                    places[behind].tag = carried.tag
                    places[behind].seq = carried.seq
                    placeBySlot[places[behind].slot].tag = carried.tag
                    placeBySlot[places[behind].slot].seq = carried.seq
                    carried = own
                }
            }
        }
        // The leaving waiter takes the largest pair with it.
        let lastTag = end - 1 > index ? lanes[keyID].places[end - 1].tag : nil
        var waiter = detach(slot: place.slot, at: index)
        waiter.tag = carried.tag
        waiter.seq = carried.seq
        return (waiter, carried.tag, lastTag)
    }

    /// Marks the waiter in `slot` late (its task's deadline passed) and moves it behind its lane's timely
    /// waiters of its class. Its (tag, seq) stays in the lane's schedule: the waiters it passes each move
    /// one place forward with the pair of the place they take, so the tenant's turns across tenants do not
    /// change.
    mutating func markLate(slot: Int) {
        let keyID = keyIDBySlot[slot]
        let index = laneIndex(ofSlot: slot)
        var moving = lanes[keyID].places.remove(at: index)
        placeBySlot[slot].position.late = true
        moving.position.late = true
        _ = place(moving, inLane: keyID)
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
            if let place = occupant(first.slot), place.id == first.id, !place.position.late {
                late.append(first.slot)
            }
        }
        return late
    }

    /// The earliest task deadline among the waiters not marked late (stale heap entries on top are dropped).
    mutating func earliestTaskDeadline() -> Double {
        while let first = taskDeadlines.min,
            occupant(first.slot).map({ $0.id != first.id || $0.position.late }) ?? true
        {
            _ = taskDeadlines.popMin()
        }
        return taskDeadlines.min?.deadline ?? .infinity
    }

    /// Drops the lane's consumed prefix once it is most of the array, and retires an emptied lane.
    private mutating func compact(_ keyID: Int) {
        if lanes[keyID].isEmpty {
            lanes[keyID].places.removeAll(keepingCapacity: true)
            lanes[keyID].start = 0
            let index = lanes[keyID].activeIndex
            let last = activeLanes.removeLast()
            if last != keyID {
                activeLanes[index] = last
                lanes[last].activeIndex = index
            }
            lanes[keyID].activeIndex = -1
        } else if lanes[keyID].start >= 16, lanes[keyID].start * 2 >= lanes[keyID].places.count {
            lanes[keyID].places.removeFirst(lanes[keyID].start)
            lanes[keyID].start = 0
        }
    }

    /// The next waiter of the lane whose head was `place`, once `place` has been removed.
    func head(ofLane keyID: Int) -> QueuePlace? { lanes[keyID].head }

    /// Starts a pump: puts in `visits` the places it must visit, each waiting pair's head and every waiter whose
    /// deadline is at or before `now` (a head may appear twice: the second visit finds it gone).
    mutating func beginPump(now: Double, into visits: inout MinHeap<QueuePlace>) {
        pumpSerial += 1
        for keyID in activeLanes { visits.appendUnordered(lanes[keyID].places[lanes[keyID].start]) }
        while let first = deadlines.min, first.deadline <= now {
            _ = deadlines.popMin()
            if let place = occupant(first.slot), place.id == first.id { visits.appendUnordered(place) }
        }
        visits.heapify()
    }

    /// Marks a lane blocked for the current pump: its head stays, so its later waiters may only expire.
    mutating func block(_ keyID: Int) { lanes[keyID].blockedIn = pumpSerial }

    func isBlocked(_ keyID: Int) -> Bool { lanes[keyID].blockedIn == pumpSerial }

    /// The earliest deadline among the waiters (stale heap entries on top are dropped first).
    mutating func earliestDeadline() -> Double {
        while let first = deadlines.min, occupant(first.slot)?.id != first.id { _ = deadlines.popMin() }
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
                if let waiter, !placeBySlot[slot].position.late, let taskDeadline = waiter.request.taskDeadline,
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
        return placeBySlot[slot]
    }

    /// Removes every waiter, returning them in service order.
    mutating func removeAll() -> [Waiter] {
        var places: [QueuePlace] = []
        places.reserveCapacity(count)
        for (slot, waiter) in slots.enumerated() where waiter != nil { places.append(placeBySlot[slot]) }
        places.sort()
        let leaving = places.map { waiter(inSlot: $0.slot) }
        self = WaitQueue()
        return leaving
    }
}
