/// A fixed-capacity FIFO of telemetry events that drops the oldest when full.
///
/// Why drop the oldest: Allot's observer and classifier work on recent windows, so while Allot is unreachable
/// the newest events are the ones that will still matter when it comes back; the oldest are the least useful
/// (and may be outside every window by then). Drops are counted and reported, never silent.
struct EventRing: Sendable {
    private var slots: [TelemetryRecord?]
    private var head = 0
    private(set) var count = 0

    init(capacity: Int) {
        slots = Array(repeating: nil, count: max(1, capacity))
    }

    var capacity: Int { slots.count }

    /// Appends `event`; returns 1 if the oldest event was dropped to make room, else 0.
    mutating func append(_ event: TelemetryRecord) -> Int {
        var dropped = 0
        if count == capacity {
            slots[head] = nil
            head = (head + 1) % capacity
            count -= 1
            dropped = 1
        }
        slots[(head + count) % capacity] = event
        count += 1
        return dropped
    }

    /// Removes and returns up to `limit` events from the front (the oldest).
    mutating func takeFront(_ limit: Int) -> [TelemetryRecord] {
        let taken = min(limit, count)
        var events: [TelemetryRecord] = []
        events.reserveCapacity(taken)
        for _ in 0..<taken {
            events.append(slots[head]!)
            slots[head] = nil
            head = (head + 1) % capacity
        }
        count -= taken
        return events
    }
}
