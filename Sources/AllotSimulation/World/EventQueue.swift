/// A binary min-heap of simulation events ordered by time, then by insertion order, so equal
/// times are processed first-in first-out and a run never depends on heap layout.
struct EventQueue {
    enum Kind {
        /// A task of tenant `Int` arrives.
        case arrival(Int)
        /// Call `Int` is ready to be dispatched (first try, after think time, after a retry delay).
        case ready(Int)
        /// The upstream's answer to call `Int` arrives.
        case done(Int)
        /// Gateway `Int`'s admission queue may admit someone (a bucket refilled, a wait expired).
        case wake(Int)
        /// The strategy's tick (the loop, or equal-split's re-division).
        case tick
    }

    struct Event {
        var time: Double
        var sequence: UInt64
        var kind: Kind

        func precedes(_ other: Event) -> Bool {
            time != other.time ? time < other.time : sequence < other.sequence
        }
    }

    private var heap: [Event] = []
    private var sequence: UInt64 = 0

    var isEmpty: Bool { heap.isEmpty }
    var count: Int { heap.count }
    var nextTime: Double? { heap.first?.time }

    mutating func push(_ time: Double, _ kind: Kind) {
        sequence += 1
        heap.append(Event(time: time, sequence: sequence, kind: kind))
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].precedes(heap[parent]) else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    mutating func pop() -> Event? {
        guard !heap.isEmpty else { return nil }
        let top = heap[0]
        let last = heap.removeLast()
        if !heap.isEmpty {
            heap[0] = last
            var parent = 0
            let count = heap.count
            while true {
                let left = 2 * parent + 1
                guard left < count else { break }
                var best = left
                if left + 1 < count, heap[left + 1].precedes(heap[left]) { best = left + 1 }
                guard heap[best].precedes(heap[parent]) else { break }
                heap.swapAt(best, parent)
                parent = best
            }
        }
        return top
    }
}
