/// A waiter's position in service order, small enough to sort and heap without touching the ``Waiter``.
///
/// Its order is the queue's strict service order: task class, then the fair-queuing tag, then arrival (ids
/// are unique and increasing, so the order is total and FIFO among equal tags).
struct QueuePlace: Comparable, Sendable {
    var rank: Int
    var tag: Double
    var id: UInt64
    /// Where the waiter is in ``WaitQueue``'s slab.
    var slot: Int

    init(_ waiter: Waiter, slot: Int) {
        rank = waiter.request.taskClass.rank
        tag = waiter.tag
        id = waiter.id
        self.slot = slot
    }

    static func < (lhs: QueuePlace, rhs: QueuePlace) -> Bool {
        if lhs.rank != rhs.rank { return lhs.rank < rhs.rank }
        if lhs.tag != rhs.tag { return lhs.tag < rhs.tag }
        return lhs.id < rhs.id
    }

    static func == (lhs: QueuePlace, rhs: QueuePlace) -> Bool { lhs.id == rhs.id }
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
/// to one pair is the lane's order, because both use ``QueuePlace``'s order.
///
/// Waiters live in a slab (`slots`) so lanes and heaps move small ``QueuePlace`` values, never a ``Waiter``.
/// Deadlines are kept in a heap with lazy deletion: an entry whose slot no longer holds its id is stale.
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

    /// The waiters, by slot; nil for a free slot.
    private(set) var slots: [Waiter?] = []
    private var freeSlots: [Int] = []
    private(set) var lanes: [Lane] = []
    /// Ids of the (tenant, upstream) keys that ever queued: a waiter's ``Waiter/keyID`` and its lane's index.
    private(set) var keyIDs: [TenantKey: Int] = [:]
    /// Lanes with waiters, in no particular order (a pump sorts their heads).
    private(set) var activeLanes: [Int] = []
    private var deadlines = MinHeap<QueueDeadline>()
    /// Counts pumps, so a lane can be marked blocked for one pump without clearing marks afterwards.
    private(set) var pumpSerial = 0
    private(set) var count = 0

    var isEmpty: Bool { count == 0 }

    /// The waiter in `slot`; the slot must be occupied.
    subscript(slot: Int) -> Waiter {
        get { slots[slot]! }
        _modify { yield &slots[slot]! }
    }

    /// True when `place` still names a waiting request (its slot was not freed or reused).
    func holds(_ place: QueuePlace) -> Bool { slots[place.slot]?.id == place.id }

    /// Adds `waiter` (its ``Waiter/keyID`` is set here) and returns its place.
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
        } else {
            slot = slots.count
            slots.append(waiter)
        }
        let place = QueuePlace(waiter, slot: slot)
        // Binary search for the first place the new one precedes (arrivals are mostly at the end).
        var low = lanes[keyID].start
        var high = lanes[keyID].places.count
        while low < high {
            let middle = (low + high) / 2
            if lanes[keyID].places[middle] < place { low = middle + 1 } else { high = middle }
        }
        if lanes[keyID].isEmpty {
            lanes[keyID].activeIndex = activeLanes.count
            activeLanes.append(keyID)
        }
        lanes[keyID].places.insert(place, at: low)
        deadlines.push(QueueDeadline(deadline: waiter.deadline, id: waiter.id, slot: slot))
        count += 1
        return place
    }

    /// The first waiter of `key` in service order.
    func head(of key: TenantKey) -> Waiter? {
        guard let keyID = keyIDs[key], let place = lanes[keyID].head else { return nil }
        return slots[place.slot]
    }

    /// Removes the waiter at `place` (which ``holds(_:)``) from its lane and the slab.
    @discardableResult
    mutating func remove(_ place: QueuePlace) -> Waiter {
        let waiter = slots[place.slot]!
        let keyID = waiter.keyID
        if lanes[keyID].places[lanes[keyID].start].id == place.id {
            lanes[keyID].start += 1
        } else {
            var low = lanes[keyID].start
            var high = lanes[keyID].places.count
            while low < high {
                let middle = (low + high) / 2
                if lanes[keyID].places[middle] < place { low = middle + 1 } else { high = middle }
            }
            precondition(lanes[keyID].places[low].id == place.id, "a waiter missing from its lane")
            lanes[keyID].places.remove(at: low)
        }
        compact(keyID)
        slots[place.slot] = nil
        freeSlots.append(place.slot)
        count -= 1
        if count == 0 {
            // Nothing waits: every remaining deadline entry is stale.
            deadlines = MinHeap()
        }
        return waiter
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
            if let waiter = slots[first.slot], waiter.id == first.id {
                visits.appendUnordered(QueuePlace(waiter, slot: first.slot))
            }
        }
        visits.heapify()
    }

    /// Marks a lane blocked for the current pump: its head stays, so its later waiters may only expire.
    mutating func block(_ keyID: Int) { lanes[keyID].blockedIn = pumpSerial }

    func isBlocked(_ keyID: Int) -> Bool { lanes[keyID].blockedIn == pumpSerial }

    /// The earliest deadline among the waiters (stale heap entries on top are dropped first).
    mutating func earliestDeadline() -> Double {
        while let first = deadlines.min, slots[first.slot]?.id != first.id { _ = deadlines.popMin() }
        if deadlines.count > 2 * count + 1_024 {
            // Stale entries of admitted waiters linger until their deadline; rebuild before they dominate.
            var live: [QueueDeadline] = []
            live.reserveCapacity(count)
            for (slot, waiter) in slots.enumerated() {
                if let waiter { live.append(QueueDeadline(deadline: waiter.deadline, id: waiter.id, slot: slot)) }
            }
            deadlines = MinHeap()
            for entry in live { deadlines.appendUnordered(entry) }
            deadlines.heapify()
        }
        return deadlines.min?.deadline ?? .infinity
    }

    /// The place of the waiter with `id`, if it is waiting.
    func place(of id: UInt64) -> QueuePlace? {
        guard let slot = slots.firstIndex(where: { $0?.id == id }) else { return nil }
        return QueuePlace(slots[slot]!, slot: slot)
    }

    /// Removes every waiter, returning them in service order.
    mutating func removeAll() -> [Waiter] {
        var places: [QueuePlace] = []
        places.reserveCapacity(count)
        for (slot, waiter) in slots.enumerated() {
            if let waiter { places.append(QueuePlace(waiter, slot: slot)) }
        }
        places.sort()
        let leaving = places.map { slots[$0.slot]! }
        self = WaitQueue()
        return leaving
    }
}
