import AllotCore

/// How ``ClassifierState/tasks`` is persisted: one array per field ("columns") instead of one keyed
/// object per task.
///
/// Why: a busy service tracks up to `ClassificationRules.maximumTrackedTasks` (200,000) tasks, and as
/// keyed objects each one repeated its nine field names, its tenant, its upstream and its class:
/// about 170 bytes per task, 34 MB of a 42 MB Classifier checkpoint at 10,000 tenants, encoded
/// field by field through `Codable` (most of the checkpoint's CPU time), and held three times
/// while SQLite saved it. As columns a task costs about 67 bytes: its tenant and upstream are an
/// index into the distinct pairs, its class an index into the class names.
///
/// Checkpoints written before (an array of task objects) still decode.
@propertyWrapper
struct TaskColumns: Sendable, Hashable, Codable {
    var wrappedValue: [TaskTrack]

    init(wrappedValue: [TaskTrack]) {
        self.wrappedValue = wrappedValue
    }

    private enum CodingKeys: String, CodingKey {
        /// The distinct (tenant, upstream) pairs, as two parallel arrays.
        case tenants, upstreams
        /// The class names `taskClass` refers to.
        case classes
        /// Per task: its position in `tenants`/`upstreams`, its id, its position in `classes`, its
        /// counts, its times (`exceeded_at` null while within its budget).
        case key, task
        case taskClass = "class"
        case calls, tokens
        case firstSeenAt = "first_seen_at"
        case lastSeenAt = "last_seen_at"
        case exceededAt = "exceeded_at"
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        var pairs: [AllocationKey: Int] = [:]
        var tenants: [String] = []
        var upstreams: [String] = []
        var classes: [TaskClass: Int] = [:]
        var classNames: [String] = []
        var keys: [Int] = []
        var taskClasses: [Int] = []
        keys.reserveCapacity(wrappedValue.count)
        taskClasses.reserveCapacity(wrappedValue.count)
        for task in wrappedValue {
            let pair = AllocationKey(tenant: task.tenant, upstream: task.upstream)
            if let index = pairs[pair] {
                keys.append(index)
            } else {
                pairs[pair] = tenants.count
                keys.append(tenants.count)
                tenants.append(task.tenant)
                upstreams.append(task.upstream)
            }
            if let index = classes[task.taskClass] {
                taskClasses.append(index)
            } else {
                classes[task.taskClass] = classNames.count
                taskClasses.append(classNames.count)
                classNames.append(task.taskClass.rawValue)
            }
        }
        try container.encode(tenants, forKey: .tenants)
        try container.encode(upstreams, forKey: .upstreams)
        try container.encode(classNames, forKey: .classes)
        // Each column element by element with the concrete `encode` overloads: `encode([Int])` goes
        // through `Array.encode(to:)`, which encodes every element through a single-value container
        // of its own (about a thousand instructions per number, two thirds of a checkpoint). The
        // encoded form is the same.
        var column = container.nestedUnkeyedContainer(forKey: .key)
        for key in keys { try column.encode(key) }
        keys = []
        column = container.nestedUnkeyedContainer(forKey: .task)
        for task in wrappedValue { try column.encode(task.task) }
        column = container.nestedUnkeyedContainer(forKey: .taskClass)
        for taskClass in taskClasses { try column.encode(taskClass) }
        taskClasses = []
        column = container.nestedUnkeyedContainer(forKey: .calls)
        for task in wrappedValue { try column.encode(task.calls) }
        column = container.nestedUnkeyedContainer(forKey: .tokens)
        for task in wrappedValue { try column.encode(task.tokens) }
        column = container.nestedUnkeyedContainer(forKey: .firstSeenAt)
        for task in wrappedValue { try column.encode(task.firstSeenAt) }
        column = container.nestedUnkeyedContainer(forKey: .lastSeenAt)
        for task in wrappedValue { try column.encode(task.lastSeenAt) }
        column = container.nestedUnkeyedContainer(forKey: .exceededAt)
        for task in wrappedValue {
            if let exceededAt = task.exceededAt { try column.encode(exceededAt) } else { try column.encodeNil() }
        }
    }

    init(from decoder: any Decoder) throws {
        guard let container = try? decoder.container(keyedBy: CodingKeys.self) else {
            // Written before the columns: an array of task objects.
            wrappedValue = try [TaskTrack](from: decoder)
            return
        }
        let tenants = try container.decode([String].self, forKey: .tenants)
        let upstreams = try container.decode([String].self, forKey: .upstreams)
        let classes = try container.decode([String].self, forKey: .classes).map { name in
            guard let taskClass = TaskClass(rawValue: name) else {
                throw DecodingError.dataCorruptedError(
                    forKey: .classes, in: container, debugDescription: "unknown task class \(name)")
            }
            return taskClass
        }
        let keys = try container.decode([Int].self, forKey: .key)
        let ids = try container.decode([String].self, forKey: .task)
        let taskClasses = try container.decode([Int].self, forKey: .taskClass)
        let calls = try container.decode([Int].self, forKey: .calls)
        let tokens = try container.decode([Int64].self, forKey: .tokens)
        let firstSeen = try container.decode([Double].self, forKey: .firstSeenAt)
        let lastSeen = try container.decode([Double].self, forKey: .lastSeenAt)
        let exceeded = try container.decode([Double?].self, forKey: .exceededAt)
        let count = ids.count
        guard tenants.count == upstreams.count,
            [keys.count, taskClasses.count, calls.count, tokens.count, firstSeen.count, lastSeen.count, exceeded.count]
                .allSatisfy({ $0 == count }),
            keys.allSatisfy({ $0 >= 0 && $0 < tenants.count }),
            taskClasses.allSatisfy({ $0 >= 0 && $0 < classes.count })
        else {
            throw DecodingError.dataCorruptedError(
                forKey: .task, in: container, debugDescription: "task columns of different lengths or out of range")
        }
        var tasks: [TaskTrack] = []
        tasks.reserveCapacity(count)
        for index in 0..<count {
            var task = TaskTrack(
                tenant: tenants[keys[index]], task: ids[index], taskClass: classes[taskClasses[index]],
                upstream: upstreams[keys[index]], firstSeenAt: firstSeen[index], lastSeenAt: lastSeen[index])
            task.calls = calls[index]
            task.tokens = tokens[index]
            task.exceededAt = exceeded[index]
            tasks.append(task)
        }
        wrappedValue = tasks
    }
}
