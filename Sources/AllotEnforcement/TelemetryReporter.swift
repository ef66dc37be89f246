import AllotTime
import Foundation

/// Batches telemetry events in bounded memory and delivers them to Allot (SPEC §3), retrying with backoff.
///
/// - **Recording is synchronous and cheap** (``record(_:)``): a bounds check (``TelemetryRecord/validated()``,
///   so one bad event cannot get a whole batch refused) and an append under a lock; it never waits for the
///   network.
/// - **Bounded memory**: at most ``Configuration/capacity`` events wait, plus the one batch being sent or
///   retried (kept whole: it is resent exactly). When full, the *oldest* waiting event is dropped (see
///   ``EventRing`` for why) and counted in ``TelemetryStatistics/dropped``.
/// - **Flushes** when ``Configuration/batchSize`` events are waiting, and every ``Configuration/flushInterval``
///   seconds otherwise (so a quiet gateway's events still arrive within the interval).
/// - **Retries** a failed batch with jittered exponential backoff (``Backoff``), as it was and before anything
///   newer, under the idempotency key it was first sent with
///   (``TelemetryTransport/send(_:idempotencyKey:)``): a batch whose post timed out after Allot had committed
///   it is answered as a duplicate instead of stored twice. Keys are a random 128-bit prefix per reporter and
///   a batch counter; a key Allot says was used for another body (`422`) is replaced and the batch resent. A
///   batch the server refuses as invalid is not retried as is: when the server names the event at
///   fault (`[3].tenant`), that event is dropped and the rest resent; otherwise the batch is dropped. Either way
///   it is counted in ``TelemetryStatistics/rejected``.
///
/// ``run()`` is the delivery loop (``Gateway`` starts it); ``flush()`` sends what is buffered now; a simulator
/// may skip the transport entirely and ``drain(max:)`` events in-process.
///
/// `@unchecked Sendable`: `ring` and `counters` are only touched while holding `lock`; the transport is called
/// outside it, by one delivery loop at a time (`sending`).
public final class TelemetryReporter: TelemetrySink, @unchecked Sendable {
    /// Settings of a reporter.
    public struct Configuration: Sendable {
        /// Most events buffered (drop-oldest beyond). Default 10,000.
        public var capacity: Int
        /// Events per batch, and the count that triggers a flush. Default 500 (Allot accepts up to 10,000).
        public var batchSize: Int
        /// Longest time an event waits for a flush, seconds. Default 1.
        public var flushInterval: Double
        /// Retry delays after failed posts.
        public var backoff: Backoff

        public init(
            capacity: Int = 10_000, batchSize: Int = 500, flushInterval: Double = 1,
            backoff: Backoff = Backoff(initial: 0.5, maximum: 30)
        ) {
            self.capacity = max(1, capacity)
            self.batchSize = max(1, batchSize)
            self.flushInterval = flushInterval
            self.backoff = backoff
        }
    }

    public let configuration: Configuration
    private let transport: (any TelemetryTransport)?
    private let clock: any AllotClock
    private let onEvent: (@Sendable (GatewayEvent) -> Void)?
    private let signal = WakeSignal()
    private let lock = NSLock()
    private var ring: EventRing
    private var counters = TelemetryStatistics()
    private var random: SplitMix64
    private var sending = false
    /// A batch whose post failed and is resent first, with its key.
    private var retrying: (events: [TelemetryRecord], key: String)?
    /// Batch keys: a prefix random for every reporter (not from `seed`: two gateways given one seed must not
    /// share keys), and a counter.
    private let keyPrefix = SnapshotClient.randomInstance() + SnapshotClient.randomInstance()
    private var batchCounter: UInt64 = 0

    /// - Parameters:
    ///   - transport: where batches go; nil for a reporter that is only drained in-process.
    ///   - clock: for flush intervals and backoff.
    ///   - configuration: capacity, batch size, interval, backoff.
    ///   - seed: seeds the backoff jitter (fixed in tests and simulations).
    ///   - onEvent: drops and failed posts, for logs.
    public init(
        transport: (any TelemetryTransport)?, clock: any AllotClock, configuration: Configuration = Configuration(),
        seed: UInt64 = UInt64.random(in: .min ... .max), onEvent: (@Sendable (GatewayEvent) -> Void)? = nil
    ) {
        self.transport = transport
        self.clock = clock
        self.configuration = configuration
        self.onEvent = onEvent
        self.ring = EventRing(capacity: configuration.capacity)
        self.random = SplitMix64(seed: seed)
    }

    /// Buffers one event for delivery (dropping the oldest if the buffer is full).
    public func record(_ event: TelemetryRecord) {
        guard let event = event.validated() else {
            lock.withLock { counters.invalid += 1 }
            return
        }
        let (droppedTotal, full) = lock.withLock {
            counters.recorded += 1
            let dropped = ring.append(event)
            counters.dropped += dropped
            return (dropped > 0 ? counters.dropped : 0, ring.count == configuration.batchSize)
        }
        if isPowerOfTwo(droppedTotal) {
            // Reported on a logarithmic schedule (1, 2, 4, 8, … drops so far): a long outage must not flood logs.
            onEvent?(.telemetryDropped(count: droppedTotal, reason: "buffer full (drop oldest)"))
        }
        if full { signal.ring() }
    }

    private func isPowerOfTwo(_ value: Int) -> Bool { value > 0 && value & (value - 1) == 0 }

    /// The next batch key; call holding `lock`.
    private func nextKey() -> String {
        batchCounter += 1
        return "\(keyPrefix)-\(batchCounter)"
    }

    /// Counters since the reporter was created.
    public var statistics: TelemetryStatistics {
        lock.withLock {
            var snapshot = counters
            snapshot.buffered = ring.count + (retrying?.events.count ?? 0)
            return snapshot
        }
    }

    /// Removes and returns up to `max` buffered events, oldest first, for in-process delivery.
    public func drain(max: Int = .max) -> [TelemetryRecord] {
        lock.withLock { ring.takeFront(max) }
    }

    /// Delivers batches until cancelled: when ``Configuration/batchSize`` events are waiting or every
    /// ``Configuration/flushInterval``, with backoff after failures. Returns when the calling task is cancelled
    /// (buffered events stay; call ``flush()`` for a last attempt).
    public func run() async {
        guard transport != nil else { return }
        // An interval of 0 (or NaN) made this loop spin without suspending: at least 10 ms (round 14).
        let flushInterval = configuration.flushInterval.isFinite ? max(0.01, configuration.flushInterval) : 1
        var nextFlush = clock.now + flushInterval
        while !Task.isCancelled {
            let ready = lock.withLock { ring.count >= configuration.batchSize }
            // A wall clock stepped back leaves the next flush as far ahead as the step: an interval at most
            // (round 32: a step back of an hour kept every event buffered for the hour).
            nextFlush = min(nextFlush, clock.now + flushInterval)
            if !ready && clock.now < nextFlush {
                await signal.wait(until: nextFlush, clock: clock)
                continue
            }
            nextFlush = clock.now + flushInterval
            switch await deliverBuffered() {
            case .delivered:
                break
            case .busy:
                // A concurrent `flush()` is sending; look again at the next interval.
                await signal.wait(until: nextFlush, clock: clock)
            case .failed(let retryIn):
                try? await clock.sleep(for: retryIn)
                nextFlush = clock.now
            }
        }
    }

    /// Sends everything buffered now, batch by batch. True when the buffer was emptied; false when a post
    /// failed (the batch is kept for the next attempt).
    @discardableResult
    public func flush() async -> Bool {
        if case .delivered = await deliverBuffered() { return true }
        return false
    }

    private enum Delivery {
        case delivered
        case busy
        case failed(retryIn: Double)
    }

    private func deliverBuffered() async -> Delivery {
        guard let transport else { return .delivered }
        let claimed = lock.withLock {
            if sending { return false }
            sending = true
            return true
        }
        guard claimed else { return .busy }
        defer { lock.withLock { sending = false } }
        while true {
            // A batch that failed goes again as it was, under its key, before anything newer.
            var (batch, key) = lock.withLock { () -> ([TelemetryRecord], String) in
                if let retrying {
                    self.retrying = nil
                    return retrying
                }
                return (ring.takeFront(configuration.batchSize), nextKey())
            }
            if batch.isEmpty { return .delivered }
            var rejectionRounds = 0
            while true {
                do throws(TransportError) {
                    try await transport.send(batch, idempotencyKey: key)
                    lock.withLock {
                        counters.sent += batch.count
                        counters.batches += 1
                        counters.consecutiveFailures = 0
                    }
                    break
                } catch {
                    if !error.isRetryable {
                        rejectionRounds += 1
                        if error.status == 422, rejectionRounds <= 16 {
                            // `idempotency_key_reused`: the key was used for another body (another process's counter,
                            // say), so this batch was not stored: it goes again under a new key.
                            key = lock.withLock { nextKey() }
                            continue
                        }
                        if let index = error.rejectedIndex, batch.indices.contains(index), rejectionRounds <= 16 {
                            batch.remove(at: index)
                            // A refused batch stored nothing; what is left is another body, so another key.
                            key = lock.withLock { nextKey() }
                            lock.withLock { counters.rejected += 1 }
                            onEvent?(.telemetryDropped(count: 1, reason: "refused by Allot: \(error.message)"))
                            if batch.isEmpty { break }
                            continue
                        }
                        lock.withLock { counters.rejected += batch.count }
                        onEvent?(.telemetryDropped(count: batch.count, reason: "refused by Allot: \(error.message)"))
                        break
                    }
                    let (failures, delay) = lock.withLock { [batch, key] in
                        counters.failedPosts += 1
                        counters.consecutiveFailures += 1
                        let failures = counters.consecutiveFailures
                        let delay = configuration.backoff.delay(
                            failures: failures, unit: random.unit(), retryAfter: error.retryAfter)
                        retrying = (batch, key)
                        return (failures, delay)
                    }
                    onEvent?(
                        .telemetryPostFailed(message: error.description, consecutiveFailures: failures, retryIn: delay))
                    return .failed(retryIn: delay)
                }
            }
        }
    }
}

/// Counters of a ``TelemetryReporter``.
public struct TelemetryStatistics: Sendable, Equatable {
    /// Events accepted into the buffer.
    public var recorded = 0
    /// Events Allot acknowledged.
    public var sent = 0
    /// Batches Allot acknowledged.
    public var batches = 0
    /// Events dropped because the buffer was full (oldest first).
    public var dropped = 0
    /// Events refused by Allot as invalid (not retried).
    public var rejected = 0
    /// Events that failed the local bounds check (``TelemetryRecord/validated()``) and were never buffered.
    public var invalid = 0
    /// Posts that failed and were retried.
    public var failedPosts = 0
    /// Failures since the last successful post.
    public var consecutiveFailures = 0
    /// Events waiting now.
    public var buffered = 0

    public init() {}
}
