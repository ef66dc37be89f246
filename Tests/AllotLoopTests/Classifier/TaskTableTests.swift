import AllotCore
import Testing

@testable import AllotLoop

@Suite("Consumption Classifier: the runaway-task table")
struct TaskTableTests {
    /// A deterministic generator (the same tasks on every run).
    struct Generator {
        var state: UInt64

        mutating func next(_ bound: Int) -> Int {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return Int((state >> 33) % UInt64(bound))
        }
    }

    /// Tasks of a few tenants whose last sightings repeat (ties at the cut-off), some over budget.
    static func tasks(_ count: Int, seed: UInt64) -> [TaskTrack] {
        var generator = Generator(state: seed)
        return (0..<count).map { index in
            let first = Double(1000 + generator.next(50))
            var task = TaskTrack(
                tenant: "tenant-\(generator.next(7))", task: "task-\(index)",
                taskClass: TaskClass.allCases[generator.next(TaskClass.allCases.count)], upstream: "pool-\(index % 2)",
                firstSeenAt: first, lastSeenAt: first + Double(generator.next(40)))
            task.calls = 1 + generator.next(30)
            task.tokens = Int64(generator.next(100_000))
            if generator.next(5) == 0 { task.exceededAt = first + 1 }
            return task
        }
    }

    static func account(_ tenant: String) -> Int { Int(tenant.dropFirst("tenant-".count)) ?? 0 }

    /// What the Classifier did before `retain`: filter, keep the most recently seen (the first seen
    /// among equals) in their order, rebuild the table from that list.
    static func trimmed(_ tasks: [TaskTrack], since: Double, maximum: Int) -> [TaskTrack] {
        let tasks = tasks.filter { $0.lastSeenAt >= since }
        guard tasks.count > maximum else { return tasks }
        let keep = tasks.indices.sorted {
            tasks[$0].lastSeenAt != tasks[$1].lastSeenAt ? tasks[$0].lastSeenAt > tasks[$1].lastSeenAt : $0 < $1
        }.prefix(maximum).sorted()
        return keep.map { tasks[$0] }
    }

    static func describe(_ task: TaskTrack) -> String {
        "\(task.tenant)/\(task.task)/\(task.calls)/\(task.tokens)/\(task.exceededAt ?? .nan)"
    }

    static func exceeded(_ table: TaskTable, seenSince since: Double = -.infinity) -> [String] {
        var names: [String] = []
        table.forEachExceeded(seenSince: since) { info, counter in
            var task = TaskTrack(
                tenant: info.tenant, task: info.task, taskClass: info.taskClass, upstream: info.upstream,
                firstSeenAt: info.firstSeenAt, lastSeenAt: counter.lastSeenAt)
            task.calls = Int(counter.calls)
            task.tokens = counter.tokens
            task.exceededAt = counter.exceededAt
            names.append(describe(task))
        }
        return names
    }

    /// The table's behaviour in the plainest terms: the tasks in a list in first-seen order, found by
    /// a linear search, trimmed by filtering and sorting (as the Classifier once did).
    struct Reference {
        var tasks: [TaskTrack] = []
        /// Positions in `tasks` by tenant and task.
        var positions: [[String]: Int] = [:]
        /// Positions of the tasks in the order they exceeded their budget; in list order after a trim.
        var exceeded: [Int] = []

        func contains(tenant: String, task: String) -> Bool { positions[[tenant, task]] != nil }

        mutating func count(
            tenant: String, task: String, upstream: String, tokens: Int64, at: Double,
            budget: (calls: Int, tokens: Int64)
        ) {
            var index = positions[[tenant, task]]
            if index == nil {
                positions[[tenant, task]] = tasks.count
                tasks.append(
                    TaskTrack(
                        tenant: tenant, task: task, taskClass: .interactive, upstream: upstream, firstSeenAt: at,
                        lastSeenAt: at))
                index = tasks.count - 1
            }
            tasks[index!].calls += 1
            tasks[index!].tokens += tokens
            if at > tasks[index!].lastSeenAt { tasks[index!].lastSeenAt = at }
            if tasks[index!].exceededAt == nil,
                tasks[index!].calls > budget.calls || tasks[index!].tokens > budget.tokens
            {
                tasks[index!].exceededAt = tasks[index!].lastSeenAt  // the latest call so far
                exceeded.append(index!)
            }
        }

        mutating func trim(since: Double, maximum: Int) {
            tasks = TaskTableTests.trimmed(tasks, since: since, maximum: maximum)
            positions = Dictionary(uniqueKeysWithValues: tasks.enumerated().map { ([$1.tenant, $1.task], $0) })
            exceeded = tasks.indices.filter { tasks[$0].exceededAt != nil }
        }

        func exceeded(seenSince since: Double) -> [String] {
            exceeded.map { tasks[$0] }.filter { $0.lastSeenAt >= since }.map(TaskTableTests.describe)
        }

        var oldestSeen: Double { tasks.map(\.lastSeenAt).min() ?? .infinity }
    }

    @Test(arguments: [
        (since: -Double.infinity, maximum: 10_000), (since: 1020, maximum: 10_000),
        (since: -Double.infinity, maximum: 500),
        (since: 1030, maximum: 300), (since: 1000, maximum: 1), (since: 1000, maximum: 0), (since: 2000, maximum: 10),
    ])
    func retainKeepsWhatTheRebuildKept(since: Double, maximum: Int) throws {
        let tasks = Self.tasks(2_000, seed: 7)
        var table = TaskTable(tasks, account: Self.account)
        let retained = table.retain(seenSince: since, maximum: maximum)
        #expect(retained)
        let expected = Self.trimmed(tasks, since: since, maximum: maximum)
        #expect(table.count == expected.count)
        #expect(table.tasks == expected)
        #expect(Self.exceeded(table) == expected.filter { $0.exceededAt != nil }.map(Self.describe))
        #expect(table.oldestSeen == expected.map(\.lastSeenAt).min() ?? .infinity)
    }

    /// Counting, trimming (often, with ties at the cut-off, expiring), compacting and growing, the
    /// table agrees with ``Reference`` at every step.
    @Test(arguments: [
        (tasks: 300, maximum: 120), (tasks: 3_000, maximum: 1_000), (tasks: 50, maximum: 1_000),
        (tasks: 15_000, maximum: 6_000),  // several blocks of entries
    ])
    func countingAndTrimmingAgreeWithTheReference(tasks: Int, maximum: Int) {
        var generator = Generator(state: UInt64(tasks))
        var table = TaskTable()
        var reference = Reference()
        var now = 0.0
        for round in 0..<60 {
            for _ in 0..<(tasks / 3) {
                // Tenants come and go (their names leave the table with their last task).
                let tenant = "tenant-\(generator.next(5) + round / 10)"
                let upstream = "pool-\(generator.next(2))"
                let task = "task-\(generator.next(tasks))"
                let tokens = Int64(generator.next(2_000))
                let at = now + Double(generator.next(4))
                let budget = (calls: 3 + generator.next(20), tokens: Int64(5_000 + generator.next(20_000)))
                let isNew = table.count(
                    TaskTable.hash(account: Int32(Self.account(tenant)), task: task), tokens: tokens, at: at,
                    budget: budget, keyHint: Self.account(tenant) % 3  // shared by several tenants: checked
                ) {
                    TaskTable.Info(
                        tenant: tenant, task: task, upstream: upstream, taskClass: .interactive, firstSeenAt: at)
                }
                #expect(isNew == !reference.contains(tenant: tenant, task: task))
                reference.count(
                    tenant: tenant, task: task, upstream: upstream, tokens: tokens, at: at, budget: budget)
            }
            now += 2
            let since = round % 4 == 0 ? now - 10 : -.infinity
            if table.count > maximum || round % 4 == 0 {
                let retained = table.retain(seenSince: since, maximum: maximum)
                #expect(retained)
                reference.trim(since: since, maximum: maximum)
            }
            #expect(table.count == reference.tasks.count, "round \(round)")
            #expect(table.tasks == reference.tasks, "round \(round)")
            #expect(
                Self.exceeded(table, seenSince: now - 6) == reference.exceeded(seenSince: now - 6), "round \(round)")
            #expect(table.oldestSeen == reference.oldestSeen)
        }
        // What a restart restores is the same table.
        let restored = TaskTable(table.tasks, account: Self.account)
        #expect(restored.tasks == table.tasks)
    }

    @Test func aRestoredTableWithACollisionKeepsTheLaterTaskAndLeavesTrimmingToTheRebuild() {
        // The same tenant and task twice (a hand-edited state): the second one's counters count, the
        // first stays listed without counts.
        let tasks = Self.tasks(3, seed: 1)
        var duplicate = tasks[0]
        duplicate.calls += 1
        duplicate.exceededAt = duplicate.lastSeenAt
        var table = TaskTable(tasks + [duplicate], account: Self.account)
        let listed = table.tasks
        #expect(listed.count == 4)
        #expect(listed[0].calls == 0 && listed[0].tokens == 0 && listed[0].exceededAt == nil)
        #expect(listed[0].lastSeenAt == listed[0].firstSeenAt)
        #expect(listed[3] == duplicate)
        #expect(table.oldestSeen == tasks[1...].map(\.lastSeenAt).min())
        let retained = table.retain(seenSince: 0, maximum: 2)
        #expect(!retained)
        #expect(table.tasks == listed)
    }

    @Test func selectFindsTheValueOfEachRank() {
        var generator = Generator(state: 3)
        for count in [1, 2, 15, 16, 17, 100, 1_000, 5_000] {
            for spread in [1, 3, 50, 1_000_000] {
                let values = (0..<count).map { _ in Double(generator.next(spread)) }
                let sorted = values.sorted()
                for rank in Set([0, count / 3, count / 2, count - 1]) {
                    var scratch = values
                    #expect(TaskTable.select(&scratch, rank: rank) == sorted[rank], "\(count) values, rank \(rank)")
                }
            }
        }
    }
}
