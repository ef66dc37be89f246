import AllotCore
import AllotSignals

/// A ring of fixed-length time slices aligned to the epoch (slice `i` covers `[i·seconds, (i+1)·seconds)`),
/// holding the most recent `slots.count` of them: the Observer's windows (SPEC 4) without keeping
/// events. A slot is reused when time moves past it; an event older than the ring is dropped.
struct SliceRing<Slice: TimeSlice>: Sendable, Codable, Hashable {
    /// Length of one slice, seconds.
    let seconds: Double
    /// The slots; mutate a slot in place through `slots[position]` (a copy would copy its arrays).
    var slots: [Slice]
    /// The newest slice index written (or advanced to).
    private(set) var newest: Int64

    /// A ring covering at least `window` seconds plus one slice of slack for late events.
    init(window: Double, slices: Int) {
        seconds = window / Double(slices)
        slots = Array(repeating: Slice(), count: slices + 2)
        newest = Int64.min
    }

    /// The slice index containing time `t`.
    ///
    /// A policy may set any positive window, so slices can be tiny and the quotient infinite: it is clamped to
    /// ±2⁵³ (where a Double still counts whole slices) instead of trapping in the conversion.
    func index(of t: Double) -> Int64 { Int64(min(max((t / seconds).rounded(.down), -0x1p53), 0x1p53)) }

    /// The slot for slice `index`, cleared if it held an older slice; nil when the slice is older
    /// than the ring holds.
    mutating func slot(for index: Int64) -> Int? {
        if newest == Int64.min || index > newest { newest = index }
        guard index > newest - Int64(slots.count) else { return nil }
        let position = Int(((index % Int64(slots.count)) + Int64(slots.count)) % Int64(slots.count))
        if slots[position].index != index {
            guard slots[position].index < index else { return nil }
            slots[position].reset(index: index)
        }
        return position
    }

    /// The slices of the window ending at `now`, oldest first: from the slice containing `now − window`
    /// to the one containing `now`, each with the seconds it covers up to `now` and not before
    /// `notBefore` (a pool's first event: a young pool's rate is not diluted by time it did not exist).
    /// Whole slices are counted with their whole span, so a rate (count / span) is unbiased and the
    /// window covers between `window` and `window + seconds`.
    func window(_ window: Double, now: Double, notBefore: Double) -> [(slice: Slice, span: Double)] {
        let last = index(of: now)
        let first = max(index(of: now - window), last - Int64(slots.count) + 1)
        var result: [(slice: Slice, span: Double)] = []
        result.reserveCapacity(Int(last - first + 1))
        for index in first...last {
            let start = max(Double(index) * seconds, notBefore)
            let end = min(Double(index + 1) * seconds, now)
            let position = Int(((index % Int64(slots.count)) + Int64(slots.count)) % Int64(slots.count))
            let slice = slots[position].index == index ? slots[position] : Slice()
            if end > start || slice.index == index { result.append((slice, max(0, end - start))) }
        }
        return result
    }
}

/// A slice's contents: resettable in place (slots are reused, not reallocated).
protocol TimeSlice: Sendable, Codable, Hashable {
    /// The slice index held, `Int64.min` when empty.
    var index: Int64 { get }
    init()
    mutating func reset(index: Int64)
}

/// Per-slice counters of one upstream pool (the fine ring, covering the short window).
struct CountSlice: TimeSlice {
    var index: Int64 = .min
    /// Attempts by outcome (indexed by `Outcome.ordinal`), inline (no nested array to copy-check per event).
    var outcomes = SIMD8<Int32>(repeating: 0)
    /// Served (outcome `ok`) requests and tokens.
    var servedRequests: Double = 0
    var servedTokens: Double = 0
    /// Quota-exhaustion evidence attributed to requests (`rpm`) or tokens (`tpm`), and evidence the
    /// provider did not attribute (a bare 429).
    var quotaRPM: Int32 = 0
    var quotaTPM: Int32 = 0
    var quotaUnattributed: Int32 = 0
    /// Headers the parser could not read.
    var unparseableHeaders: Int32 = 0
    /// Latency of served attempts, on `LogLinearScale.latency`; empty until the first sample.
    var latency: LatencyCounts = LatencyCounts()
    /// Answers that carried a provider's rate-limit headers.
    var statedAnswers: Int32 = 0

    init() {}

    mutating func reset(index: Int64) {
        self.index = index
        outcomes = SIMD8(repeating: 0)
        servedRequests = 0
        servedTokens = 0
        quotaRPM = 0
        quotaTPM = 0
        quotaUnattributed = 0
        unparseableHeaders = 0
        latency.clear()
        statedAnswers = 0
    }

    private enum CodingKeys: String, CodingKey {
        case index, outcomes, servedRequests, servedTokens, quotaRPM, quotaTPM, quotaUnattributed
        case unparseableHeaders, latency, statedAnswers
    }

    /// Checkpoints written before the stated answers were counted decode with none.
    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        index = try container.decode(Int64.self, forKey: .index)
        outcomes = try container.decode(SIMD8<Int32>.self, forKey: .outcomes)
        servedRequests = try container.decode(Double.self, forKey: .servedRequests)
        servedTokens = try container.decode(Double.self, forKey: .servedTokens)
        quotaRPM = try container.decode(Int32.self, forKey: .quotaRPM)
        quotaTPM = try container.decode(Int32.self, forKey: .quotaTPM)
        quotaUnattributed = try container.decode(Int32.self, forKey: .quotaUnattributed)
        unparseableHeaders = try container.decode(Int32.self, forKey: .unparseableHeaders)
        latency = try container.decode(LatencyCounts.self, forKey: .latency)
        statedAnswers = try container.decodeIfPresent(Int32.self, forKey: .statedAnswers) ?? 0
    }

    func quota(_ dimension: RateDimension) -> Int32 { dimension == .rpm ? quotaRPM : quotaTPM }
}

/// Per-slice latency and served tokens (the coarse ring, covering the long window's baseline).
struct LatencySlice: TimeSlice {
    var index: Int64 = .min
    var latency: LatencyCounts = LatencyCounts()
    /// Tokens served in the slice: the baseline token load a latency rise is judged against (a rise
    /// that comes with a rise of our own load is not degradation). nil in checkpoints written before it.
    var servedTokens: Double?

    init() {}

    mutating func reset(index: Int64) {
        self.index = index
        latency.clear()
        servedTokens = nil
    }
}

/// Latency counts on `LogLinearScale.latency`, allocated on the first sample and encoded sparsely
/// (persisted state stays small: most buckets are empty).
struct LatencyCounts: Sendable, Hashable, Codable {
    private(set) var counts: [UInt32] = []
    private(set) var total: UInt32 = 0

    init() {}

    mutating func add(bucket: Int) {
        if counts.isEmpty { counts = Array(repeating: 0, count: LogLinearScale.latency.count) }
        counts[bucket] &+= 1
        total &+= 1
    }

    mutating func clear() {
        guard total > 0 else { return }
        for position in counts.indices { counts[position] = 0 }
        total = 0
    }

    /// Adds these counts into `merged` (laid out on `LogLinearScale.latency`).
    func merge(into merged: inout [Double]) {
        guard total > 0 else { return }
        for position in counts.indices where counts[position] != 0 { merged[position] += Double(counts[position]) }
    }

    private enum CodingKeys: String, CodingKey {
        case buckets
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let pairs = try container.decode([[UInt32]].self, forKey: .buckets)
        for pair in pairs where pair.count == 2 && Int(pair[0]) < LogLinearScale.latency.count {
            if counts.isEmpty { counts = Array(repeating: 0, count: LogLinearScale.latency.count) }
            counts[Int(pair[0])] &+= pair[1]
            total &+= pair[1]
        }
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        let pairs = counts.indices.filter { counts[$0] != 0 }.map { [UInt32($0), counts[$0]] }
        try container.encode(pairs, forKey: .buckets)
    }
}

extension Outcome {
    /// Position in `allCases`: an array index for per-outcome counters.
    var ordinal: Int {
        switch self {
        case .ok: 0
        case .quotaExhausted: 1
        case .spendCap: 2
        case .overloaded: 3
        case .serverError: 4
        case .timeout: 5
        case .deniedLocal: 6
        case .queued: 7
        }
    }
}
