/// New tenants registered by telemetry over the last minute, and by which gateways: a gateway that invents
/// tenant ids (a bug that puts a request id in `tenant`, a leaked token) registers thousands at once, and each is
/// an active tenant with a fair share of its pool until it goes idle (outside evaluation round 22: one batch of
/// 10,000 invented ids held a real tenant wanting 270 rpm at 1 rpm for five minutes, with no alert).
public struct RegistrationWindow: Sendable {
    /// More new tenants than this within ``seconds`` is a flood.
    public static let threshold = 500
    /// The window, seconds.
    public static let seconds = 60.0

    /// A flood in progress: how many tenants were registered in the window, by which gateways, since when.
    public struct Flood: Sendable, Equatable {
        public var tenants: Int
        public var gateways: [String]
        public var since: Double
    }

    private var entries: [(at: Double, count: Int, gateways: Set<String>)] = []
    private var floodSince: Double?

    public init() {}

    /// Records `count` tenants registered at `now` by a batch from `gateways`.
    public mutating func record(_ count: Int, gateways: Set<String>, now: Double) {
        guard count > 0 else { return }
        entries.append((now, count, gateways))
        prune(now: now)
        if floodSince == nil, total > Self.threshold { floodSince = now }
    }

    /// The flood in force at `now`, if the window holds more than ``threshold`` registrations.
    public mutating func flood(now: Double) -> Flood? {
        prune(now: now)
        guard total > Self.threshold else {
            floodSince = nil
            return nil
        }
        var gateways = Set<String>()
        for entry in entries { gateways.formUnion(entry.gateways) }
        return Flood(tenants: total, gateways: gateways.sorted(), since: floodSince ?? now)
    }

    private var total: Int { entries.reduce(0) { $0 + $1.count } }

    private mutating func prune(now: Double) {
        let cutoff = now - Self.seconds
        if let keep = entries.firstIndex(where: { $0.at > cutoff }) {
            if keep > 0 { entries.removeFirst(keep) }
        } else {
            entries.removeAll()
        }
    }
}
