import AllotCore
import AllotSignals
import AllotStore
import Foundation

@testable import AllotLoop

/// Drives a `ConsumptionClassification` tick by tick on a virtual clock.
struct ClassifierRun {
    var script = TelemetryScript()
    var classification: ConsumptionClassification
    /// The previous tick's time.
    var now: Double

    init(
        policy: Policy = ClassifierFixtures.policy(), rules: ClassificationRules = ClassificationRules(), start: Double
    ) {
        classification = ConsumptionClassification(policy: policy, rules: rules)
        now = start
    }

    /// One tick at `now + seconds` with the events `make` builds for `[previous, now)`.
    mutating func tick(
        after seconds: Double = 5, allocations: [AllocationKey: PerDimension<Double>] = [:],
        capacities: [String: PerDimension<Double?>] = [:],
        _ make: (inout TelemetryScript, _ from: Double, _ to: Double) -> [StoredEvent] = { _, _, _ in [] }
    ) -> ClassifierReport {
        let from = now
        now += seconds
        let events = make(&script, from, now)
        return classification.classify(script.delta(events), allocations: allocations, capacities: capacities, now: now)
    }

    /// `ticks` 5-s ticks with `perTick` served requests in each (``ClassifierFixtures/served``); the last report.
    mutating func serve(_ perTick: Int, ticks: Int) -> ClassifierReport {
        var report = tick { script, from, to in ClassifierFixtures.served(&script, perTick, from: from, to: to) }
        for _ in 1..<max(1, ticks) {
            report = tick { script, from, to in ClassifierFixtures.served(&script, perTick, from: from, to: to) }
        }
        return report
    }
}

enum ClassifierFixtures {
    static let t0 = ObserverFixtures.t0
    static let pool = ObserverFixtures.pool
    static let acme = AllocationKey(tenant: "acme", upstream: pool)

    /// The default policy with classifier settings adjusted; `coldStartSamples: 0` turns blending off.
    static func policy(
        coldStartSamples: Int = 0, taskBudgets: [TaskClass: TaskBudgetPolicy] = [:], upstreams: [UpstreamPolicy] = []
    ) -> Policy {
        var policy = Policy(
            taskBudgets: taskBudgets, classifier: ClassifierSettings(coldStartSamples: coldStartSamples))
        for upstream in upstreams { policy.setUpstream(upstream) }
        return policy
    }

    /// `count` served requests spread over `[from, to)` with the given tokens.
    static func served(
        _ script: inout TelemetryScript, _ count: Int, from: Double, to: Double, tenant: String = "acme",
        gateway: String = "gw-1", prompt: Int64 = 100, completion: Int64 = 50
    ) -> [StoredEvent] {
        script.spread(count, from: from, to: to) { script, at in
            script.event(at: at, tenant: tenant, gateway: gateway, prompt: prompt, completion: completion)
        }
    }

    static func status(_ report: ClassifierReport, _ key: AllocationKey = acme) -> TenantStatus? {
        report.statuses.first { $0.key == key }
    }

    static func observation(_ report: ClassifierReport, _ key: AllocationKey = acme) -> TenantObservation? {
        report.tenants.first { $0.tenant == key.tenant && $0.upstream == key.upstream }
    }

    /// `1 − e^(−Δ/τ)`.
    static func weight(_ elapsed: Double, _ window: Double) -> Double { 1 - exp(-elapsed / window) }

    /// `shares` tilted as the classifier tilts a tenant's gateway shares (``TenantTrack/tilts(of:tenant:)``),
    /// normalised to sum to 1.
    static func tilted(_ shares: [String: Double], tenant: String = "acme") -> [String: Double] {
        let tilts = TenantTrack.tilts(of: Array(shares.keys), tenant: tenant)
        let weighted = shares.map { ($0.key, $0.value * (1 + TenantTrack.gatewayTilt * tilts[$0.key]!)) }
        let sum = weighted.reduce(0) { $0 + $1.1 }
        return Dictionary(uniqueKeysWithValues: weighted.map { ($0.0, $0.1 / sum) })
    }

    static func close(_ a: Double?, _ b: Double, tolerance: Double = 1e-9) -> Bool {
        guard let a else { return false }
        return abs(a - b) <= tolerance * max(1, abs(b))
    }
}
