import AllotCore

/// Runaway-task counters (SPEC 6): calls and tokens per tenant and `task_id`, updated for every event
/// that carries a `task_id` (a third of the traffic in an agentic workload, or all of it).
///
/// Open addressing with linear probing over one flat array of counters keyed by a 64-bit hash of
/// the tenant and the task id: an update touches one slot (one cache line), with no standard-library
/// string hashing and no key storage to chase. The names live apart in `infos`, read only for alerts
/// and persistence.
///
/// A task is identified by its hash alone. Two distinct tasks colliding would share a counter; with
/// 64 bits the chance is about n²/2⁶⁵ (≈ 10⁻¹⁰ for 65,000 live tasks), far below any other error in
/// runaway detection, so the strings are not compared.
struct TaskTable: Sendable {
    /// One task's counters. `hash == 0` marks an empty slot (hashes are never 0).
    struct Slot: Sendable {
        var hash: UInt64 = 0
        var tokens: Int64 = 0
        var lastSeenAt: Double = 0
        /// When it first exceeded its budget; NaN while it has not.
        var exceededAt: Double = .nan
        var calls: Int32 = 0
        /// Position of its names in `infos`.
        var info: Int32 = 0
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

    private var slots: [Slot] = []
    private(set) var infos: [Info] = []
    /// Hashes of the tasks that exceeded their budget (few), so alerts need no full scan.
    private var exceeded: [UInt64] = []

    var count: Int { infos.count }

    init() {}

    /// The table holding `tasks` (as persisted).
    init(_ tasks: [TaskTrack], account: (String) -> Int) {
        reserve(tasks.count)
        for task in tasks {
            let hash = Self.hash(account: Int32(account(task.tenant)), task: task.task)
            let position = insertionSlot(hash)
            slots[position] = Slot(
                hash: hash, tokens: task.tokens, lastSeenAt: task.lastSeenAt, exceededAt: task.exceededAt ?? .nan,
                calls: Int32(clamping: task.calls), info: Int32(infos.count))
            if task.exceededAt != nil { exceeded.append(hash) }
            infos.append(
                Info(
                    tenant: task.tenant, task: task.task, upstream: task.upstream, taskClass: task.taskClass,
                    firstSeenAt: task.firstSeenAt))
        }
    }

    /// FNV-1a over the tenant's account number and the task id's UTF-8, then a final avalanche.
    static func hash(account: Int32, task: String) -> UInt64 {
        var hash: UInt64 = 0xCBF2_9CE4_8422_2325
        var value = UInt32(bitPattern: account)
        for _ in 0..<4 {
            hash = (hash ^ UInt64(value & 0xFF)) &* 0x0000_0100_0000_01B3
            value >>= 8
        }
        for byte in task.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
        hash ^= hash >> 33
        hash &*= 0xFF51_AFD7_ED55_8CCD
        hash ^= hash >> 33
        return hash == 0 ? 1 : hash
    }

    /// Counts one call of the task `hash`; `info` describes it when it is new. Returns whether the
    /// task is new.
    @discardableResult
    mutating func count(
        _ hash: UInt64, tokens: Int64, at: Double, budget: (calls: Int, tokens: Int64), info: () -> Info
    ) -> Bool {
        if (infos.count + 1) * 2 > slots.count { reserve(max(8, infos.count)) }
        let position = insertionSlot(hash)
        let new = slots[position].hash == 0
        if new {
            slots[position] = Slot(hash: hash, lastSeenAt: at, info: Int32(infos.count))
            infos.append(info())
        }
        slots[position].calls &+= 1
        slots[position].tokens &+= tokens
        if at > slots[position].lastSeenAt { slots[position].lastSeenAt = at }
        if slots[position].exceededAt.isNaN,
            Int(slots[position].calls) > budget.calls || slots[position].tokens > budget.tokens
        {
            slots[position].exceededAt = at
            exceeded.append(hash)
        }
        return new
    }

    /// Every task, in the order they were first seen.
    var tasks: [TaskTrack] {
        var result = infos.map { info in
            TaskTrack(
                tenant: info.tenant, task: info.task, taskClass: info.taskClass, upstream: info.upstream,
                firstSeenAt: info.firstSeenAt, lastSeenAt: info.firstSeenAt)
        }
        for slot in slots where slot.hash != 0 {
            let index = Int(slot.info)
            result[index].calls = Int(slot.calls)
            result[index].tokens = slot.tokens
            result[index].lastSeenAt = slot.lastSeenAt
            result[index].exceededAt = slot.exceededAt.isNaN ? nil : slot.exceededAt
        }
        return result
    }

    /// Calls `body` for each task that exceeded its budget and was seen at or after `since`.
    func forEachExceeded(seenSince since: Double, _ body: (Info, Slot) -> Void) {
        guard !slots.isEmpty else { return }
        for hash in exceeded {
            let slot = slots[insertionSlot(hash)]
            if slot.hash == hash, slot.lastSeenAt >= since { body(infos[Int(slot.info)], slot) }
        }
    }

    /// The oldest `lastSeenAt`, to decide cheaply whether anything expired.
    var oldestSeen: Double {
        var oldest = Double.infinity
        for slot in slots where slot.hash != 0 && slot.lastSeenAt < oldest { oldest = slot.lastSeenAt }
        return oldest
    }

    private func insertionSlot(_ hash: UInt64) -> Int {
        let mask = slots.count - 1
        var position = Int(truncatingIfNeeded: hash) & mask
        while slots[position].hash != 0 && slots[position].hash != hash { position = (position + 1) & mask }
        return position
    }

    /// Room for `extra` more tasks at a load factor of at most one half.
    private mutating func reserve(_ extra: Int) {
        var size = max(16, slots.count)
        while size < (infos.count + extra) * 2 { size *= 2 }
        guard size > slots.count else { return }
        let old = slots
        slots = [Slot](repeating: Slot(), count: size)
        for slot in old where slot.hash != 0 { slots[insertionSlot(slot.hash)] = slot }
    }
}
