import AllotProtocol
import Foundation
import Testing

@testable import AllotEnforcement

/// Fixtures for the enforcement tests: snapshots and tenant entries with readable defaults.
extension Snapshot {
    static let defaultUpstream = "openai/gpt-4o"

    static func make(
        version: Int64 = 1, generatedAt: Double = 1_000, expiresAt: Double = 1_300, refreshMs: Int = 5_000,
        gateway: String? = "gw-1", tenants: [TenantEntry] = [],
        defaultLimits: RateLimits = .make(rpm: 6, rpmBurst: 2, tpm: 600, tpmBurst: 200),
        fallbackTenants: [FallbackEntry] = [],
        fallbackDefault: RateLimits = .make(rpm: 3, rpmBurst: 1, tpm: 300, tpmBurst: 100),
        upstreams: [UpstreamEntry] = [], taskBudgets: [String: TaskBudget] = [:]
    ) -> Snapshot {
        Snapshot(
            version: version, generatedAt: generatedAt, expiresAt: expiresAt, refreshMs: refreshMs,
            policyVersion: "test", gateway: gateway, upstreams: upstreams, tenants: tenants,
            defaultLimits: defaultLimits, fallback: Fallback(tenants: fallbackTenants, defaultLimits: fallbackDefault),
            taskBudgets: taskBudgets)
    }
}

extension RateLimits {
    static func make(rpm: Double, rpmBurst: Double, tpm: Double, tpmBurst: Double) -> RateLimits {
        RateLimits(rpm: Bucket(rate: rpm, burst: rpmBurst), tpm: Bucket(rate: tpm, burst: tpmBurst))
    }
}

extension TenantEntry {
    static func make(
        _ id: String = "acme", upstream: String = Snapshot.defaultUpstream, rpm: Bucket = Bucket(rate: 60, burst: 10),
        tpm: Bucket = Bucket(rate: 60_000, burst: 10_000), priority: Int = 1, queueWeight: Double = 1,
        mode: String = "enforce", maxConcurrency: Int = 1_000, tokenEstimate: TokenEstimate? = nil,
        deny: String? = nil, burstCredit: BurstCredit? = nil
    ) -> TenantEntry {
        TenantEntry(
            id: id, upstream: upstream, tier: "standard", priority: priority, rpm: rpm, tpm: tpm,
            queueWeight: queueWeight, reason: Reasons(rpm: "fair_share", tpm: "fair_share"), burstCredit: burstCredit,
            mode: mode, maxConcurrency: maxConcurrency, tokenEstimate: tokenEstimate, deny: deny)
    }
}

extension AdmissionRequest {
    static func make(
        _ tenant: String = "acme", upstream: String = Snapshot.defaultUpstream, taskClass: TaskClass = .interactive,
        tokens: Int? = 100, promptTokens: Int? = nil, taskID: String? = nil
    ) -> AdmissionRequest {
        AdmissionRequest(
            tenant: tenant, upstream: upstream, taskClass: taskClass, estimatedTokens: tokens,
            promptTokens: promptTokens, taskID: taskID)
    }
}

extension Enforcer {
    /// An enforcer with `snapshot` applied at `now`, reporting into `collector`.
    static func make(
        _ snapshot: Snapshot? = nil, now: Double = 1_000, collector: EventCollector = EventCollector(),
        configuration: GatewayConfiguration = GatewayConfiguration(gatewayID: "gw-1"),
        monotonic: (@Sendable () -> Double)? = nil
    ) -> Enforcer {
        var configuration = configuration
        let previous = configuration.onEvent
        configuration.onEvent = { event in
            collector.note(event)
            previous?(event)
        }
        let enforcer =
            monotonic.map {
                Enforcer(configuration: configuration, telemetry: collector, wakeHandler: nil, monotonic: $0)
            } ?? Enforcer(configuration: configuration, telemetry: collector)
        if let snapshot { enforcer.apply(snapshot, now: now) }
        return enforcer
    }

    /// Admits or fails the test.
    func mustAdmit(
        _ request: AdmissionRequest = .make(), now: Double, sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> Ticket {
        let admission = tryAdmit(request, now: now)
        guard case .admitted(let ticket) = admission else {
            Issue.record("expected admission, got \(admission)", sourceLocation: sourceLocation)
            throw FixtureError.unexpected
        }
        return ticket
    }

    func mustDeny(
        _ request: AdmissionRequest = .make(), now: Double, sourceLocation: SourceLocation = #_sourceLocation
    ) throws -> Denial {
        let admission = tryAdmit(request, now: now)
        guard case .denied(let denial) = admission else {
            Issue.record("expected a denial, got \(admission)", sourceLocation: sourceLocation)
            throw FixtureError.unexpected
        }
        return denial
    }
}

enum FixtureError: Error { case unexpected }

/// Collects telemetry events and gateway events; thread-safe.
final class EventCollector: TelemetrySink, @unchecked Sendable {
    // `@unchecked Sendable`: both arrays are only touched under `lock`.
    private let lock = NSLock()
    private var recorded: [TelemetryRecord] = []
    private var noted: [GatewayEvent] = []

    func record(_ event: TelemetryRecord) { lock.withLock { recorded.append(event) } }
    func note(_ event: GatewayEvent) { lock.withLock { noted.append(event) } }

    var telemetry: [TelemetryRecord] { lock.withLock { recorded } }
    var events: [GatewayEvent] { lock.withLock { noted } }
}

/// Records decisions delivered through `onDecision`, in order.
final class DecisionLog: @unchecked Sendable {
    // `@unchecked Sendable`: `entries` is only touched under `lock`.
    private let lock = NSLock()
    private var entries: [(String, Admission)] = []

    func callback(_ label: String) -> @Sendable (Admission) -> Void {
        { admission in self.lock.withLock { self.entries.append((label, admission)) } }
    }

    var labels: [String] { lock.withLock { entries.map(\.0) } }
    var decisions: [(String, Admission)] { lock.withLock { entries } }

    func admission(_ label: String) -> Admission? {
        lock.withLock { entries.first { $0.0 == label }?.1 }
    }
}

/// Equal within `tolerance` (for values computed through divisions by rates).
func approx(_ value: Double?, _ expected: Double, tolerance: Double = 1e-9) -> Bool {
    guard let value else { return false }
    return abs(value - expected) <= tolerance * max(1, abs(expected))
}
