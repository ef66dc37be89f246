import AllotCore

/// How urgent a request is, as the gateway's caller classifies it (SPEC §3 `task_class`): `realtime`,
/// `interactive`, `batch`, `background`.
///
/// The same type as the policy engine's (`AllotCore.TaskClass`), so a simulator or server that imports both
/// modules sees one task class. The admission queue serves a tenant's waiting requests in this order (``rank``),
/// and across tenants realtime first, then every other class in turns by `queue_weight` (``schedule(ofRank:)``);
/// each class has its own maximum wait (``GatewayConfiguration/maxWait``): a real-time request
/// waits at most a moment, a background job may wait minutes. When an upstream's circuit is open the snapshot
/// lists the classes to shed, lowest first.
public typealias TaskClass = AllotCore.TaskClass

extension TaskClass {
    /// 0 for `realtime` (served first) … 3 for `background`.
    var rank: Int {
        switch self {
        case .realtime: 0
        case .interactive: 1
        case .batch: 2
        case .background: 3
        }
    }

    /// The fair-queuing schedule a class's calls take turns in across tenants: `realtime` its own, served before
    /// any other; every other class one schedule, so that across tenants the turns follow `queue_weight` whatever
    /// class a tenant labels its calls, and a class orders only a tenant's own calls (which of them fills its turn).
    static func schedule(ofRank rank: Int) -> Int { rank == 0 ? 0 : 1 }

    /// ``schedule(ofRank:)`` of this class.
    var schedule: Int { Self.schedule(ofRank: rank) }
}

/// One value per task class, for settings such as the maximum queue wait.
public struct PerTaskClass<Value: Sendable & Equatable>: Sendable, Equatable {
    public var realtime: Value
    public var interactive: Value
    public var batch: Value
    public var background: Value

    public init(realtime: Value, interactive: Value, batch: Value, background: Value) {
        self.realtime = realtime
        self.interactive = interactive
        self.batch = batch
        self.background = background
    }

    /// The same value for every class.
    public init(all value: Value) {
        self.init(realtime: value, interactive: value, batch: value, background: value)
    }

    public subscript(taskClass: TaskClass) -> Value {
        get {
            switch taskClass {
            case .realtime: realtime
            case .interactive: interactive
            case .batch: batch
            case .background: background
            }
        }
        set {
            switch taskClass {
            case .realtime: realtime = newValue
            case .interactive: interactive = newValue
            case .batch: batch = newValue
            case .background: background = newValue
            }
        }
    }
}
