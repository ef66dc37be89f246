import AllotCore

/// Runaway-task counters (SPEC 6): calls and tokens per tenant and `task_id`, updated for every event
/// that carries a `task_id` (a third of the traffic in an agentic workload, or all of it).
///
/// The tasks are *entries* in the order they were first seen: their counters (`counters`) and apart
/// their names (`names`, read only for alerts and persistence), both in blocks of 4,096 entries. An
/// open addressing table with linear probing (`slots`, 8 bytes each: the low half of the hash and
/// the entry) maps a 64-bit hash of the tenant and the task id to the entry: an update is a probe
/// in a small array and one counter, with no standard-library string hashing and no key storage to
/// chase.
///
/// Why the counters are not in the hash slots: a workload with more live tasks than the Classifier
/// keeps (`ClassificationRules.maximumTrackedTasks`) trims the table every tick, and the trim reads
/// every task's last sighting. In entry order that is one sequential pass; through the hash table it
/// was a random access per task, plus a rebuild of the whole table, which cost more than all the
/// rest of the Classifier's tick. A trim leaves holes in the entries (removed, their names
/// released) that are squeezed out once they are a fifth of the table.
///
/// Why blocks: a catch-up tick adds a quarter of a million tasks before its trim removes as many.
/// Flat arrays grew by reallocation and were compacted into new arrays, each time holding the old
/// and the new copy (tens of MB at the loop's peak); blocks grow without moving anything, and a
/// compaction moves entries down in place and frees the blocks left empty.
///
/// A task is identified by its hash alone. Two distinct tasks colliding would share a counter; with
/// 64 bits the chance is about n²/2⁶⁵ (≈ 10⁻¹⁰ for 65,000 live tasks), far below any other error in
/// runaway detection, so the strings are not compared.
struct TaskTable: Sendable {
    /// One task's counters. `hash == 0` marks a removed entry (hashes are never 0).
    struct Counter: Sendable {
        var hash: UInt64
        var tokens: Int64 = 0
        var lastSeenAt: Double
        /// When it first exceeded its budget; NaN while it has not.
        var exceededAt: Double = .nan
        var calls: Int32 = 0
        /// A restored task whose hash a later restored task took (see `init(_:account:)`): listed,
        /// never counted.
        var orphan = false
    }

    /// What a task is, for alerts and persistence.
    struct Info: Sendable {
        var tenant: String
        var task: String
        /// The upstream of its first call.
        var upstream: String
        var taskClass: TaskClass
        var firstSeenAt: Double
    }

    /// An ``Info`` as stored: the tenant and upstream as a position in `keys` (tasks are many, the
    /// tenants and upstreams they belong to few), 32 bytes instead of 64.
    private struct Name: Sendable {
        var task: String
        var key: Int32
        var taskClass: TaskClass
        var firstSeenAt: Double
    }

    /// An entry of the hash table: the low 32 bits of the task's hash (its home slot, and a filter
    /// before the full hash in `counters` is compared) and the entry. `entry < 0` marks an empty slot.
    private struct Slot: Sendable {
        var tag: UInt32 = 0
        var entry: Int32 = -1
    }

    private var slots: [Slot] = []
    private var counters = Blocks<Counter>()
    private var names = Blocks<Name>()
    /// The tenants and upstreams of the tasks, and their positions.
    private var keys: [AllocationKey] = []
    private var keyIndex: [AllocationKey: Int32] = [:]
    /// Positions in `keys` by the caller's hint (the Classifier's track), checked before hashing
    /// the key: a tick brings thousands of new tasks. −1: unknown.
    private var keyByHint: [Int32] = []
    /// Entries not removed (orphans included), and orphans.
    private(set) var count = 0
    private var orphans = 0
    /// Hashes of the tasks that exceeded their budget (few), so alerts need no full scan.
    private var exceeded: [UInt64] = []

    init() {}

    /// The table holding `tasks` (as persisted), in their order.
    ///
    /// Two tasks with the same hash (the same tenant and task id twice in a saved state) keep the
    /// later one's counters, as the table always has; the earlier stays listed as an orphan, with no
    /// counts.
    init(_ tasks: [TaskTrack], account: (String) -> Int) {
        reserve(newTasks: tasks.count)
        for task in tasks {
            let hash = Self.hash(account: Int32(account(task.tenant)), task: task.task)
            let position = insertionSlot(hash)
            if slots[position].entry >= 0 {
                let earlier = Int(slots[position].entry)
                counters[earlier] = Counter(hash: hash, lastSeenAt: names[earlier].firstSeenAt, orphan: true)
                orphans += 1
            }
            slots[position] = Slot(tag: UInt32(truncatingIfNeeded: hash), entry: Int32(counters.count))
            counters.append(
                Counter(
                    hash: hash, tokens: task.tokens, lastSeenAt: task.lastSeenAt, exceededAt: task.exceededAt ?? .nan,
                    calls: Int32(clamping: task.calls)))
            if task.exceededAt != nil { exceeded.append(hash) }
            names.append(
                name(
                    Info(
                        tenant: task.tenant, task: task.task, upstream: task.upstream, taskClass: task.taskClass,
                        firstSeenAt: task.firstSeenAt)))
            count += 1
        }
    }

    /// FNV-1a over the tenant's account number and the task id's UTF-8, then a final avalanche.
    static func hash(account: Int32, task: String) -> UInt64 {
        var hash = StableHash()
        var value = UInt32(bitPattern: account)
        for _ in 0..<4 {
            hash.add(UInt8(value & 0xFF))
            value >>= 8
        }
        hash.add(task)
        let mixed = hash.mixed
        return mixed == 0 ? 1 : mixed
    }

    /// Counts one call of the task `hash`; `info` describes it when it is new. Returns whether the
    /// task is new. `keyHint`: a small number that usually comes with the same tenant and upstream
    /// (the Classifier passes its track), or −1.
    @discardableResult
    mutating func count(
        _ hash: UInt64, tokens: Int64, at: Double, budget: (calls: Int, tokens: Int64), keyHint: Int = -1,
        info: () -> Info
    ) -> Bool {
        if (count - orphans + 1) * 2 > slots.count { reserve(newTasks: max(8, count)) }
        let position = insertionSlot(hash)
        let new = slots[position].entry < 0
        if new {
            slots[position] = Slot(tag: UInt32(truncatingIfNeeded: hash), entry: Int32(counters.count))
            counters.append(Counter(hash: hash, lastSeenAt: at))
            names.append(name(info(), keyHint: keyHint))
            count += 1
        }
        let entry = Int(slots[position].entry)
        var counter = counters[entry]
        counter.calls &+= 1
        counter.tokens &+= tokens
        if at > counter.lastSeenAt { counter.lastSeenAt = at }
        if counter.exceededAt.isNaN, Int(counter.calls) > budget.calls || counter.tokens > budget.tokens {
            // The latest call seen so far, not this one's time: telemetry need not arrive in time order, and the
            // budget was crossed no earlier than the latest of the calls that crossed it (round 21: a batch posted
            // out of order put `since` at the task's first call).
            counter.exceededAt = counter.lastSeenAt
            exceeded.append(hash)
        }
        counters[entry] = counter
        return new
    }

    /// Every task, in the order they were first seen.
    var tasks: [TaskTrack] {
        var result: [TaskTrack] = []
        result.reserveCapacity(count)
        for entry in 0..<counters.count where counters[entry].hash != 0 {
            let counter = counters[entry]
            let info = self.info(entry)
            var task = TaskTrack(
                tenant: info.tenant, task: info.task, taskClass: info.taskClass, upstream: info.upstream,
                firstSeenAt: info.firstSeenAt, lastSeenAt: info.firstSeenAt)
            if !counter.orphan {
                task.calls = Int(counter.calls)
                task.tokens = counter.tokens
                task.lastSeenAt = counter.lastSeenAt
                task.exceededAt = counter.exceededAt.isNaN ? nil : counter.exceededAt
            }
            result.append(task)
        }
        return result
    }

    /// Calls `body` with every task's names, in the order they were first seen.
    func forEachInfo(_ body: (Info) -> Void) {
        for entry in 0..<counters.count where counters[entry].hash != 0 { body(info(entry)) }
    }

    /// Calls `body` for each task that exceeded its budget and was seen at or after `since`.
    func forEachExceeded(seenSince since: Double, _ body: (Info, Counter) -> Void) {
        guard !slots.isEmpty else { return }
        for hash in exceeded {
            let slot = slots[insertionSlot(hash)]
            guard slot.entry >= 0 else { continue }
            let counter = counters[Int(slot.entry)]
            if counter.lastSeenAt >= since { body(info(Int(slot.entry)), counter) }
        }
    }

    private func info(_ entry: Int) -> Info {
        let name = names[entry]
        let key = keys[Int(name.key)]
        return Info(
            tenant: key.tenant, task: name.task, upstream: key.upstream, taskClass: name.taskClass,
            firstSeenAt: name.firstSeenAt)
    }

    private mutating func name(_ info: Info, keyHint: Int = -1) -> Name {
        let key = AllocationKey(tenant: info.tenant, upstream: info.upstream)
        if keyHint >= 0, keyHint < keyByHint.count, keyByHint[keyHint] >= 0, keys[Int(keyByHint[keyHint])] == key {
            return Name(
                task: info.task, key: keyByHint[keyHint], taskClass: info.taskClass, firstSeenAt: info.firstSeenAt)
        }
        var index = keyIndex[key]
        if index == nil {
            index = Int32(keys.count)
            keys.append(key)
            keyIndex[key] = index
        }
        if keyHint >= 0, keyHint < 1 << 24 {
            if keyHint >= keyByHint.count {
                keyByHint.append(contentsOf: repeatElement(-1, count: keyHint + 1 - keyByHint.count))
            }
            keyByHint[keyHint] = index!
        }
        return Name(task: info.task, key: index!, taskClass: info.taskClass, firstSeenAt: info.firstSeenAt)
    }

    /// The oldest `lastSeenAt`, to decide cheaply whether anything expired.
    var oldestSeen: Double {
        var oldest = Double.infinity
        counters.forEach { _, counter in
            if counter.hash != 0, !counter.orphan, counter.lastSeenAt < oldest { oldest = counter.lastSeenAt }
        }
        return oldest
    }

    // MARK: Trimming

    /// Keeps the tasks seen at or after `since`, at most `maximum` of them — the most recently seen,
    /// and among tasks seen at the same time the first seen — in their order: the table that
    /// `TaskTable(tasks)` gives for `tasks` filtered and trimmed that way, with the same counters and
    /// the same order of `exceeded` (see the type's note on why not that rebuild).
    ///
    /// Returns false, changing nothing, when the table holds orphans (two restored tasks' hashes
    /// collided); the caller then rebuilds from `tasks`, which decides that case.
    mutating func retain(seenSince since: Double, maximum: Int) -> Bool {
        guard orphans == 0 else { return false }
        // The cut-off: every task seen after `cutoff` is kept, and of those seen at `cutoff` the
        // first `ties`.
        var cutoff = since
        var ties = Int.max
        var seen: [Double] = []
        seen.reserveCapacity(count)
        counters.forEach { _, counter in
            if counter.hash != 0, counter.lastSeenAt >= since { seen.append(counter.lastSeenAt) }
        }
        if seen.count > maximum, maximum <= 0 {
            cutoff = .infinity
            ties = 0
        } else if seen.count > maximum {
            cutoff = Self.select(&seen, rank: seen.count - maximum)
            var newer = 0
            for value in seen where value > cutoff { newer += 1 }
            ties = maximum - newer
        }
        seen = []

        var kept: [UInt64] = []
        var removed: [Int] = []
        counters.forEach { entry, counter in
            guard counter.hash != 0 else { return }
            var keep = counter.lastSeenAt >= since && counter.lastSeenAt >= cutoff
            if keep, counter.lastSeenAt == cutoff {
                keep = ties > 0
                ties -= 1
            }
            if !keep {
                removed.append(entry)
            } else if !counter.exceededAt.isNaN {
                kept.append(counter.hash)
            }
        }
        exceeded = kept
        for entry in removed {
            removeSlot(counters[entry].hash)
            counters[entry].hash = 0
            names[entry].task = ""
        }
        count -= removed.count
        if (counters.count - count) * 5 > counters.count { compact() }
        return true
    }

    /// The value at position `rank` (0-based) of `values` sorted ascending, reordering `values`
    /// (a selection: expected linear time; none of the values is NaN).
    static func select(_ values: inout [Double], rank: Int) -> Double {
        precondition(rank >= 0 && rank < values.count)
        var low = 0
        var high = values.count  // the rank lies in low..<high
        while high - low > 16 {
            // Median of three as the pivot, then a three-way partition: [< pivot][= pivot][> pivot]
            // (timestamps repeat, so equal values must not make a side empty forever).
            let a = values[low]
            let b = values[low + (high - low) / 2]
            let c = values[high - 1]
            let pivot = max(min(a, b), min(max(a, b), c))
            var less = low
            var index = low
            var greater = high
            while index < greater {
                let value = values[index]
                if value < pivot {
                    values.swapAt(less, index)
                    less += 1
                    index += 1
                } else if value > pivot {
                    greater -= 1
                    values.swapAt(index, greater)
                } else {
                    index += 1
                }
            }
            if rank < less {
                high = less
            } else if rank >= greater {
                low = greater
            } else {
                return pivot
            }
        }
        values[low..<high].sort()
        return values[rank]
    }

    /// Squeezes the removed entries out, moving the others down in place (order kept) and freeing
    /// the blocks left empty; drops the tenants and upstreams no task refers to any more; renumbers
    /// the hash slots in one pass, or rebuilds a smaller hash table when this one is more than twice
    /// the size it needs (after a catch-up).
    private mutating func compact() {
        var renumbered = [Int32](repeating: -1, count: counters.count)
        var keptKeys: [AllocationKey] = []
        var newKey = [Int32](repeating: -1, count: keys.count)
        var kept = 0
        for entry in 0..<counters.count where counters[entry].hash != 0 {
            renumbered[entry] = Int32(kept)
            var name = names[entry]
            let key = Int(name.key)
            if newKey[key] < 0 {
                newKey[key] = Int32(keptKeys.count)
                keptKeys.append(keys[key])
            }
            name.key = newKey[key]
            if kept != entry { counters[kept] = counters[entry] }
            names[kept] = name
            kept += 1
        }
        counters.removeLast(counters.count - kept)
        names.removeLast(names.count - kept)
        if keptKeys != keys {
            keys = keptKeys
            keyIndex = Dictionary(uniqueKeysWithValues: keys.enumerated().map { ($1, Int32($0)) })
            for hint in keyByHint.indices where keyByHint[hint] >= 0 { keyByHint[hint] = newKey[Int(keyByHint[hint])] }
        }
        if slots.count > 4 * max(8, count) {
            slots = []
            reserve(newTasks: 0)
            for entry in 0..<counters.count {
                place(Slot(tag: UInt32(truncatingIfNeeded: counters[entry].hash), entry: Int32(entry)))
            }
        } else {
            for position in slots.indices where slots[position].entry >= 0 {
                slots[position].entry = renumbered[Int(slots[position].entry)]
            }
        }
    }

    // MARK: Hash table

    /// The slot holding `hash`, else the empty slot where it would go.
    private func insertionSlot(_ hash: UInt64) -> Int {
        let mask = slots.count - 1
        let tag = UInt32(truncatingIfNeeded: hash)
        var position = Int(tag) & mask
        while slots[position].entry >= 0 {
            if slots[position].tag == tag, counters[Int(slots[position].entry)].hash == hash { return position }
            position = (position + 1) & mask
        }
        return position
    }

    /// Puts `slot` in the first empty slot from its home (its task is not in the table).
    private mutating func place(_ slot: Slot) {
        let mask = slots.count - 1
        var position = Int(slot.tag) & mask
        while slots[position].entry >= 0 { position = (position + 1) & mask }
        slots[position] = slot
    }

    /// Removes `hash` (which must be present) by backward shifting: each later slot of the probe run
    /// whose home is not between the hole and itself moves into the hole, so lookups never need
    /// tombstones.
    private mutating func removeSlot(_ hash: UInt64) {
        let mask = slots.count - 1
        var hole = insertionSlot(hash)
        var next = (hole + 1) & mask
        while slots[next].entry >= 0 {
            let home = Int(slots[next].tag) & mask
            // Distances along the probe order: `next` may fill the hole when its home is no later
            // than the hole (seen from `next`).
            if (next &- home) & mask >= (next &- hole) & mask {
                slots[hole] = slots[next]
                hole = next
            }
            next = (next + 1) & mask
        }
        slots[hole] = Slot()
    }

    /// Room in the hash table for `newTasks` more tasks at a load factor of at most one half (the
    /// Classifier reserves for a tick's events before counting their task calls). The entries need
    /// no room: they grow by blocks.
    mutating func reserve(newTasks: Int) {
        var size = max(16, slots.count)
        while size < (count - orphans + newTasks) * 2 { size *= 2 }
        guard size > slots.count else { return }
        let old = slots
        slots = [Slot](repeating: Slot(), count: size)
        for slot in old where slot.entry >= 0 { place(slot) }
    }
}

/// An array stored in blocks of 4,096 elements: appending never moves what is stored (no
/// reallocation holding two copies), and removing from the end frees whole blocks.
private struct Blocks<Element>: Sendable where Element: Sendable {
    private static var shift: Int { 12 }
    private static var mask: Int { (1 << shift) - 1 }

    private var blocks: [[Element]] = []
    private(set) var count = 0

    subscript(index: Int) -> Element {
        get { blocks[index >> Self.shift][index & Self.mask] }
        set { blocks[index >> Self.shift][index & Self.mask] = newValue }
    }

    mutating func append(_ element: Element) {
        if count & Self.mask == 0 {
            var block: [Element] = []
            block.reserveCapacity(Self.mask + 1)
            blocks.append(block)
        }
        blocks[blocks.count - 1].append(element)
        count += 1
    }

    /// Calls `body` with each element and its index, in order (block by block: cheaper than
    /// indexing).
    func forEach(_ body: (Int, Element) -> Void) {
        var index = 0
        for block in blocks {
            for element in block {
                body(index, element)
                index += 1
            }
        }
    }

    /// Removes the last `removed` elements.
    mutating func removeLast(_ removed: Int) {
        var remaining = removed
        while remaining > 0 {
            let last = blocks[blocks.count - 1].count
            if last <= remaining {
                blocks.removeLast()
                remaining -= last
            } else {
                blocks[blocks.count - 1].removeLast(remaining)
                remaining = 0
            }
        }
        count -= removed
    }
}
