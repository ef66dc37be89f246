import AllotProtocol
import Testing

@testable import AllotEnforcement

/// A lower limit the provider states brakes the upstream at the gateway before Allot's next tick lowers the
/// allocations (``GatewayConfiguration/followStatedLimits``).
@Suite struct StatedLimitBrakeTests {
    static let upstream = Snapshot.defaultUpstream
    /// Allot allocates from 1,200 RPM and 2.4M TPM; two tenants of 500 RPM each.
    static func snapshot(version: Int64 = 1, capacity: Double = 1_200) -> Snapshot {
        .make(
            version: version,
            tenants: [
                .make("a", rpm: Bucket(rate: 500, burst: 80), tpm: Bucket(rate: 1_000_000, burst: 160_000)),
                .make("b", rpm: Bucket(rate: 500, burst: 80), tpm: Bucket(rate: 1_000_000, burst: 160_000)),
            ],
            upstreams: [
                UpstreamEntry(
                    id: upstream, state: "healthy", capacity: DimensionValues(rpm: capacity, tpm: capacity * 2_000))
            ])
    }

    static func headers(requests: Int, tokens: Int = 2_400_000) -> [(String, String)] {
        [
            ("anthropic-ratelimit-requests-limit", String(requests)),
            ("anthropic-ratelimit-requests-remaining", "100"),
            ("anthropic-ratelimit-tokens-limit", String(tokens)),
        ]
    }

    /// Completes one request of tenant `a` with `headers` at `now`.
    static func answer(_ enforcer: Enforcer, _ headers: [(String, String)], now: Double) throws {
        let ticket = try enforcer.mustAdmit(.make("a"), now: now)
        enforcer.complete(ticket, AttemptResult(status: 200, headers: headers), now: now)
    }

    static func rate(_ enforcer: Enforcer, _ tenant: String, now: Double) throws -> Bucket {
        try #require(enforcer.tenantStatus(tenant: tenant, upstream: upstream, now: now)).limits.rpm
    }

    @Test func threeStatementsOfALowerLimitScaleTheListedTenantsUntilASnapshotAllocatesFromIt() throws {
        let collector = EventCollector()
        let enforcer = Enforcer.make(Self.snapshot(), collector: collector)
        try Self.answer(enforcer, Self.headers(requests: 700), now: 1_001)
        try Self.answer(enforcer, Self.headers(requests: 700), now: 1_002)
        #expect(try Self.rate(enforcer, "b", now: 1_002) == Bucket(rate: 500, burst: 80))  // two are not enough
        try Self.answer(enforcer, Self.headers(requests: 700), now: 1_003)
        // 700 / 1,200 of the snapshot's limits, in requests only: the tokens stated are not lower.
        let fraction = 700.0 / 1_200
        #expect(try Self.rate(enforcer, "b", now: 1_003) == Bucket(rate: 500 * fraction, burst: 80 * fraction))
        let status = try #require(enforcer.tenantStatus(tenant: "b", upstream: Self.upstream, now: 1_003))
        #expect(status.limits.tpm == Bucket(rate: 1_000_000, burst: 160_000))
        #expect(enforcer.statistics.brakes == 1)
        #expect(enforcer.status(now: 1_003).brakes == [Self.upstream: DimensionValues(rpm: fraction, tpm: 1)])
        #expect(
            collector.events.contains(
                .statedLimitBrake(
                    upstream: Self.upstream, rpmFraction: fraction, tpmFraction: 1, statedRPM: 700,
                    statedTPM: 2_400_000)))

        // Allot's next snapshot allocates from the stated 700: its limits apply as they are.
        #expect(enforcer.apply(Self.snapshot(version: 2, capacity: 700), now: 1_010) == .applied)
        #expect(try Self.rate(enforcer, "b", now: 1_010) == Bucket(rate: 500, burst: 80))
        #expect(enforcer.status(now: 1_010).brakes.isEmpty)
    }

    @Test func aSnapshotStillAtTheOldCapacityKeepsTheBrakeAndARiseReleasesIt() throws {
        let enforcer = Enforcer.make(Self.snapshot())
        for step in 1...3 { try Self.answer(enforcer, Self.headers(requests: 600), now: 1_000 + Double(step)) }
        #expect(try Self.rate(enforcer, "b", now: 1_003).rate == 250)
        // A snapshot computed before Allot saw the drop: still 1,200, so the brake stays.
        #expect(enforcer.apply(Self.snapshot(version: 2), now: 1_004) == .applied)
        #expect(try Self.rate(enforcer, "b", now: 1_004).rate == 250)
        // The provider states 1,200 again: one statement is enough to release (the largest of the last three).
        try Self.answer(enforcer, Self.headers(requests: 1_200), now: 1_005)
        #expect(try Self.rate(enforcer, "b", now: 1_005) == Bucket(rate: 500, burst: 80))
        #expect(enforcer.statistics.brakes == 2)
    }

    @Test func jitterHigherLimitsAndOldStatementsDoNotBrake() throws {
        let enforcer = Enforcer.make(Self.snapshot())
        // Within 10% of the capacity: jitter, not a drop.
        for step in 1...3 { try Self.answer(enforcer, Self.headers(requests: 1_090), now: 1_000 + Double(step)) }
        #expect(try Self.rate(enforcer, "b", now: 1_003).rate == 500)
        // One low value among higher ones is not believed.
        try Self.answer(enforcer, Self.headers(requests: 500), now: 1_004)
        #expect(try Self.rate(enforcer, "b", now: 1_004).rate == 500)
        // A limit above the capacity (Allot allocates less, e.g. for another client of the key) never brakes.
        for step in 5...7 { try Self.answer(enforcer, Self.headers(requests: 5_000), now: 1_000 + Double(step)) }
        #expect(try Self.rate(enforcer, "b", now: 1_007).rate == 500)

        // Three low statements that differ are headers that jitter, not a provider's limit.
        let jittery = Enforcer.make(Self.snapshot())
        for (step, limit) in [600, 610, 620].enumerated() {
            try Self.answer(jittery, Self.headers(requests: limit), now: 1_001 + Double(step))
        }
        #expect(try Self.rate(jittery, "b", now: 1_003).rate == 500)

        // Three low statements spread over more than 30 s are not believed.
        let slow = Enforcer.make(Self.snapshot())
        try Self.answer(slow, Self.headers(requests: 600), now: 1_001)
        try Self.answer(slow, Self.headers(requests: 600), now: 1_020)
        try Self.answer(slow, Self.headers(requests: 600), now: 1_040)
        #expect(try Self.rate(slow, "b", now: 1_040).rate == 500)
    }

    @Test func aStatedZeroIsIgnoredAndTheBrakeStopsAtATenth() throws {
        let enforcer = Enforcer.make(Self.snapshot())
        for step in 1...3 { try Self.answer(enforcer, Self.headers(requests: 0), now: 1_000 + Double(step)) }
        #expect(try Self.rate(enforcer, "b", now: 1_003).rate == 500)
        for step in 4...6 { try Self.answer(enforcer, Self.headers(requests: 12), now: 1_000 + Double(step)) }
        #expect(try Self.rate(enforcer, "b", now: 1_006) == Bucket(rate: 50, burst: 8))  // 12 / 1,200 is below a tenth
    }

    @Test func turnedOffNothingBrakes() throws {
        let enforcer = Enforcer.make(
            Self.snapshot(), configuration: GatewayConfiguration(gatewayID: "gw-1", followStatedLimits: false))
        for step in 1...3 { try Self.answer(enforcer, Self.headers(requests: 600), now: 1_000 + Double(step)) }
        #expect(try Self.rate(enforcer, "b", now: 1_003).rate == 500)
        #expect(enforcer.statistics.brakes == 0)
    }
}
