import AllotCore
import AllotHTTP
import AllotJSON
import AllotLoop
import AllotMetrics
import AllotSQLite
import AllotServer
import AllotStore
import AllotTime
import Foundation
import Testing

/// A scripted Capacity Observer: reports the pools it is given, whatever the telemetry says.
actor ScriptedObserver: CapacityObserving {
    var pools: [PoolObservation]

    init(pools: [PoolObservation]) {
        self.pools = pools
    }

    func setPools(_ pools: [PoolObservation]) { self.pools = pools }

    func apply(policy: Policy) {}

    func observe(_ delta: TelemetryDelta, now: Double) -> ObserverReport {
        ObserverReport(
            pools: pools,
            upstreams: pools.map { pool in
                UpstreamStatus(
                    upstream: pool.upstream, state: pool.state, declared: pool.capacity, estimate: pool.capacity,
                    confidence: 0.9, served: PerDimension(rpm: 100, tpm: 10_000),
                    latencyShort: LatencyPercentiles(p50: 400, p95: 900, p99: 1500, samples: 50),
                    outcomes: ["ok": 95, "quota_exhausted": 5], lastEventAt: now)
            }, alerts: [])
    }

    func state() -> Int { 0 }
}

/// A scripted Consumption Classifier: reports the tenants it is given.
actor ScriptedClassifier: ConsumptionClassifying {
    var tenants: [TenantObservation]
    var starved: Set<String> = []
    /// Per tenant, its demand shares by gateway, and the tenants first seen a short window ago.
    var gatewayShares: [String: [String: Double]] = [:]
    var young: Set<String> = []

    init(tenants: [TenantObservation]) {
        self.tenants = tenants
    }

    func setTenants(_ tenants: [TenantObservation]) { self.tenants = tenants }

    func setStarved(_ starved: Set<String>) { self.starved = starved }

    func setGatewayShares(_ shares: [String: [String: Double]], young: Set<String> = []) {
        self.gatewayShares = shares
        self.young = young
    }

    func apply(policy: Policy) {}

    func classify(
        _ delta: TelemetryDelta, allocations: [AllocationKey: PerDimension<Double>],
        capacities: [String: PerDimension<Double?>], now: Double
    ) -> ClassifierReport {
        ClassifierReport(
            tenants: tenants, spend: [],
            statuses: tenants.map { tenant in
                TenantStatus(
                    key: AllocationKey(tenant: tenant.tenant, upstream: tenant.upstream),
                    tenantClass: tenant.tenantClass, suspect: tenant.suspect, demand: tenant.demand,
                    servedShort: tenant.served, servedLong: tenant.served, lastActivityAt: now, samples: tenant.samples,
                    starved: starved.contains(tenant.tenant), gatewayShares: gatewayShares[tenant.tenant] ?? [:],
                    young: young.contains(tenant.tenant))
            },
            alerts: starved.sorted().map {
                LoopAlert(kind: "starved", severity: .warning, tenant: $0, message: "\($0) starved", since: now)
            })
    }

    func seedSpend(_ spent: [String: [BudgetWindow: Double]], now: Double) {}

    func state() -> Int { 0 }
}

/// An operator console on a throwaway database with a loop driven by scripted estimators, a
/// manual clock, and one token per role: the fixture of the router-level operator tests.
struct OperatorHarness {
    static let start: Double = 1_795_000_000
    static let upstream = "openai/gpt-4o"

    let pool: DatabasePool
    let telemetry: TelemetryStore
    let clock: ManualClock
    let console: OperatorConsole
    let loop: LoopRunner
    let observer: ScriptedObserver
    let classifier: ScriptedClassifier
    let table: RouteTable
    let metrics: MetricsRegistry
    /// A token for each role, by role.
    let tokens: [Role: String]
    let policy: Policy

    /// The default policy with the `standard` tier's `guard_max` at 100 RPM, so a standard tenant
    /// wanting more makes the engine file a proposal.
    static func policy() throws -> Policy {
        var policy = try PolicySource.embedded.load().policy
        var standard = try #require(policy.tier(named: "standard"))
        standard.guardMax = PerDimension<Quantity>(rpm: .absolute(100), tpm: .unbounded)
        policy.setTier(standard)
        return policy
    }

    /// - Parameters:
    ///   - tenants: Tenant observations on ``upstream`` (standard tier by default).
    ///   - adjust: Changes to ``policy()`` for the test.
    static func make(
        tenants: [TenantObservation] = defaultTenants, adjust: (inout Policy) -> Void = { _ in }
    ) async throws -> OperatorHarness {
        let pool = try await StoreDatabase.temporary()
        let clock = ManualClock(now: start)
        let telemetry = TelemetryStore(pool: pool, clock: clock)
        var adjusted = try policy()
        adjust(&adjusted)
        let policy = adjusted
        let version = LoopRunner.policyVersion(of: policy)
        let metrics = MetricsRegistry()
        let console = OperatorConsole(
            pool: pool, telemetry: telemetry, clock: clock, logger: .disabled, metrics: metrics,
            policy: { (policy, version) })
        let observer = ScriptedObserver(pools: [
            PoolObservation(upstream: upstream, capacity: PerDimension(rpm: 10_000, tpm: 2_000_000))
        ])
        let classifier = ScriptedClassifier(tenants: tenants)
        let loop = try await LoopRunner.open(
            store: telemetry, policy: policy, policyVersion: version, clock: clock,
            estimators: EstimatorFactory(makeObserver: { _, _ in observer }, makeClassifier: { _, _ in classifier }),
            operators: console.inputs,
            // A tick is judged slow on the wall clock: under a loaded CI machine one took over half the 5-s interval and
            // `tick_slow` made a second warning beside the test's own (`upstreamsGatewaysAndAlerts`, 2026-12-01).
            configuration: LoopConfiguration(slowTickFraction: 1_000), metrics: metrics)
        console.attach(loop)
        var table = RouteTable(authenticator: console.authenticator)
        OperatorRoutes.register(in: &table, console: console)
        var tokens: [Role: String] = [:]
        for role in Role.allCases {
            tokens[role] = try await console.issuer.create(
                name: "\(role.rawValue)-user", role: role.rawValue, actor: .cli, now: start - 60
            ).secret
        }
        return OperatorHarness(
            pool: pool, telemetry: telemetry, clock: clock, console: console, loop: loop, observer: observer,
            classifier: classifier, table: table, metrics: metrics, tokens: tokens, policy: policy)
    }

    static let defaultTenants = [
        TenantObservation(tenant: "acme", upstream: upstream, demand: PerDimension(rpm: 1000, tpm: 100_000)),
        TenantObservation(tenant: "beta", upstream: upstream, demand: PerDimension(rpm: 50, tpm: 5_000)),
        TenantObservation(
            tenant: "example-premium", upstream: upstream, demand: PerDimension(rpm: 400, tpm: 40_000)),
    ]

    /// Runs one tick at the clock's time, then advances the clock by the policy interval.
    @discardableResult
    func tick() async -> TickReport {
        let report = await loop.tick(now: clock.now)
        clock.advance(by: 5)
        return report
    }

    /// Sends a request straight to the router (no socket).
    func send(
        _ method: HTTPMethod, _ target: String, as role: Role? = .admin, json: String? = nil,
        headers: HTTPHeaders = [:]
    ) async -> HTTPResponse {
        var headers = headers
        if let role { headers["Authorization"] = "Bearer \(tokens[role]!)" }
        if json != nil, headers["Content-Type"] == nil { headers["Content-Type"] = "application/json" }
        let request = HTTPRequest(method: method, target: target, headers: headers, body: Array((json ?? "").utf8))
        return await table.router.respond(to: request)
    }

    func close() async {
        await loop.shutdown()
        await pool.close()
    }
}

extension HTTPResponse {
    /// The body as JSON (`.null` when it is not JSON), for terse assertions.
    var jsonBody: JSON { (try? json()) ?? .null }

    /// A `400` refusal's field and message (nil for any other status), compared in one assertion.
    var badRequest: Refusal? {
        guard status == .badRequest else { return nil }
        return Refusal(
            field: jsonBody["error"]?["field"]?.stringValue, message: jsonBody["error"]?["message"]?.stringValue)
    }
}

/// What a `400` names: the field at fault and the message.
struct Refusal: Equatable {
    var field: String?
    var message: String?
}
