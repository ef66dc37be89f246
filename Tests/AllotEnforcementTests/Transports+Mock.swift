import AllotProtocol
import AllotTime
import Foundation

@testable import AllotEnforcement

/// A snapshot transport that answers from a script; when the script is exhausted it holds the poll for `wait`
/// seconds on the clock and answers `304`, like a server with nothing new.
final class ScriptedSnapshotTransport: SnapshotTransport, @unchecked Sendable {
    struct Request: Equatable {
        var gateway: String
        var knownVersion: Int64?
        var wait: Double
        var at: Double
    }

    // `@unchecked Sendable`: `script` and `seen` are only touched under `lock`.
    private let lock = NSLock()
    private var script: [Result<SnapshotFetch, TransportError>]
    private var seen: [Request] = []
    private var leaving: [String] = []
    private var instancesSeen: [String] = []
    private var leaveError: TransportError?
    private let clock: any AllotClock

    init(clock: any AllotClock, _ script: [Result<SnapshotFetch, TransportError>] = []) {
        self.clock = clock
        self.script = script
    }

    func push(_ answer: Result<SnapshotFetch, TransportError>) { lock.withLock { script.append(answer) } }

    var requests: [Request] { lock.withLock { seen } }
    /// The gateways that said they leave, in order.
    var left: [String] { lock.withLock { leaving } }
    /// The instance named by every fetch and leave, in order.
    var instances: [String] { lock.withLock { instancesSeen } }
    /// Makes every `leave` fail with `error`.
    func failLeaving(_ error: TransportError) { lock.withLock { leaveError = error } }

    func leave(gateway: String, instance: String) async throws(TransportError) {
        let failure: TransportError? = lock.withLock {
            leaving.append(gateway)
            instancesSeen.append(instance)
            return leaveError
        }
        if let failure { throw failure }
    }

    func fetch(gateway: String, instance: String, knownVersion: Int64?, wait: Double) async throws(TransportError)
        -> SnapshotFetch
    {
        let next: Result<SnapshotFetch, TransportError>? = lock.withLock {
            instancesSeen.append(instance)
            seen.append(Request(gateway: gateway, knownVersion: knownVersion, wait: wait, at: clock.now))
            return script.isEmpty ? nil : script.removeFirst()
        }
        if let next { return try next.get() }
        do {
            try await clock.sleep(for: wait)
        } catch {
            throw TransportError(.unreachable, "cancelled")
        }
        return .notModified
    }
}

/// A telemetry transport that records batches and fails while told to.
final class RecordingTelemetryTransport: TelemetryTransport, @unchecked Sendable {
    // `@unchecked Sendable`: all fields are only touched under `lock`.
    private let lock = NSLock()
    private var delivered: [[TelemetryRecord]] = []
    private var failures: [TransportError] = []
    private var attempts = 0
    private var attemptKeys: [String?] = []

    func failNext(_ errors: TransportError...) { lock.withLock { failures.append(contentsOf: errors) } }

    var batches: [[TelemetryRecord]] { lock.withLock { delivered } }
    var attemptCount: Int { lock.withLock { attempts } }
    /// The idempotency key of every attempt, in order (nil: sent without one).
    var keys: [String?] { lock.withLock { attemptKeys } }

    func send(_ events: [TelemetryRecord]) async throws(TransportError) {
        try record(events, key: nil)
    }

    func send(_ events: [TelemetryRecord], idempotencyKey: String) async throws(TransportError) {
        try record(events, key: idempotencyKey)
    }

    private func record(_ events: [TelemetryRecord], key: String?) throws(TransportError) {
        let failure: TransportError? = lock.withLock {
            attempts += 1
            attemptKeys.append(key)
            if !failures.isEmpty { return failures.removeFirst() }
            delivered.append(events)
            return nil
        }
        if let failure { throw failure }
    }
}

/// A telemetry transport whose posts are taken and never answered (an Allot that stored the batch and hung): each
/// waits on the clock until cancelled.
final class HangingTelemetryTransport: TelemetryTransport, @unchecked Sendable {
    private let lock = NSLock()
    private var started = 0
    private let clock: any AllotClock

    init(clock: any AllotClock) { self.clock = clock }

    /// Posts begun.
    var posts: Int { lock.withLock { started } }

    func send(_ events: [TelemetryRecord]) async throws(TransportError) {
        lock.withLock { started += 1 }
        do {
            try await clock.sleep(for: 86_400)
        } catch {
            throw TransportError(.unreachable, "cancelled")
        }
    }
}

/// Waits (real time, bounded) until `condition` holds: for background tasks on a manual clock to settle.
///
/// It returns as soon as the condition holds, so the bound costs a passing test nothing. It is generous because the
/// background tasks share Swift's cooperative pool (two threads on a 2-core machine) with every other suite running
/// in parallel: long simulation tests held both threads for more than 30 s once, beside a release build, and
/// `theLeaseExpiresOnTimeWithoutTraffic` failed at the old 30-s bound although its gateway was correct.
func eventually(timeout: Double = 180, _ condition: @Sendable () async -> Bool) async -> Bool {
    let deadline = MonotonicClock.now() + UInt64(timeout * 1e9)
    while MonotonicClock.now() < deadline {
        if await condition() { return true }
        try? await Task.sleep(nanoseconds: 200_000)
    }
    return await condition()
}

extension TelemetryRecord {
    static func make(_ index: Int, tenant: String = "acme") -> TelemetryRecord {
        TelemetryRecord(
            ts: 1_000 + Double(index), gateway: "gw-1", tenant: tenant, upstream: "openai/gpt-4o", outcome: .ok,
            status: 200, promptTokens: index)
    }
}
