import AllotProtocol
import AllotTime
import Foundation
import Testing

@testable import AllotEnforcement

/// Leases judged on Allot's clock (`Allot-Server-Time`), not the gateway's: outside evaluation round 40, F10.
@Suite struct ServerClockTests {
    static let acme = TenantEntry.make(rpm: Bucket(rate: 60, burst: 2))
    static let floor = FallbackEntry(
        id: "acme", upstream: Snapshot.defaultUpstream, rpm: Bucket(rate: 6, burst: 1),
        tpm: Bucket(rate: 600, burst: 150))

    static func snapshot(version: Int64 = 1, generatedAt: Double, lease: Double) -> Snapshot {
        .make(
            version: version, generatedAt: generatedAt, expiresAt: generatedAt + lease, tenants: [acme],
            fallbackTenants: [floor])
    }

    /// A gateway whose clock runs 600 s ahead of Allot's took every snapshot (lease 300 s) as expired on arrival
    /// and enforced its floors for good. Judged on Allot's clock, the lease runs its 300 s.
    @Test func aGatewayClockAheadOfAllotsByMoreThanALeaseEnforcesTheLease() {
        let collector = EventCollector()
        let enforcer = Enforcer.make(collector: collector)
        enforcer.observeServerClock(1_000, now: 1_600)
        #expect(enforcer.apply(Self.snapshot(generatedAt: 1_000, lease: 300), now: 1_600) == .applied)
        let status = enforcer.status(now: 1_600)
        #expect(!status.inFallback)
        #expect(status.expiresAt == 1_300)
        #expect(status.leaseEnd == 1_900)
        #expect(status.serverClockOffset == -600)
        #expect(!enforcer.status(now: 1_899.5).inFallback)
        #expect(enforcer.status(now: 1_900).inFallback)
        #expect(
            collector.events == [
                .serverClock(offset: -600), .snapshotApplied(version: 1, previous: nil),
                .leaseExpired(version: 1, expiresAt: 1_300),
            ])
    }

    /// Round 40 F10: Allot's clock stepped back 120 s; its loop waits for it to come round, and the gateway, on its
    /// own clock, let the lease run out (20 s) and fell to its floors. The answer to its held poll carries Allot's
    /// clock: the lease is enforced again until Allot's clock reaches `expires_at`, and the next snapshot, stamped
    /// on Allot's stepped clock, is a lease too.
    @Test func aLeaseEndedOnTheGatewaysClockAloneIsEnforcedAgain() throws {
        let collector = EventCollector()
        let enforcer = Enforcer.make(Self.snapshot(generatedAt: 1_000, lease: 20), now: 1_000, collector: collector)
        enforcer.observeServerClock(1_000.02, now: 1_000)
        #expect(enforcer.status(now: 1_000).leaseEnd == 1_020)
        #expect(enforcer.status(now: 1_025).inFallback)
        enforcer.observeServerClock(905, now: 1_025)
        let status = enforcer.status(now: 1_025)
        #expect(!status.inFallback)
        // Until Allot's clock reaches 1,020 (1,140 here), but at most the lease (20 s) and the longest long-poll
        // (60 s) past this answer: 1,105; the next answer renews it.
        #expect(status.leaseEnd == 1_105)
        let tenant = try #require(enforcer.tenantStatus(tenant: "acme", upstream: Snapshot.defaultUpstream, now: 1_025))
        #expect(tenant.limits.rpm == Bucket(rate: 60, burst: 2))
        #expect(
            collector.events.suffix(3) == [
                .leaseExpired(version: 1, expiresAt: 1_020), .serverClock(offset: -120), .leaseResumed(version: 1),
            ])
        #expect(enforcer.nextWakeTime == 1_105)
        #expect(
            enforcer.apply(Self.snapshot(version: 2, generatedAt: 1_010, lease: 20), now: 1_130, serverTime: 1_010)
                == .applied)
        #expect(!enforcer.status(now: 1_130).inFallback)
        #expect(enforcer.status(now: 1_130).leaseEnd == 1_150)
        // Allot's clock put right: leases end on the gateway's clock again, this one at once.
        enforcer.observeServerClock(1_150.75, now: 1_151)
        #expect(enforcer.status(now: 1_151).inFallback)
        #expect(collector.events.suffix(2) == [.serverClock(offset: 0), .leaseExpired(version: 2, expiresAt: 1_030)])
    }

    /// An answer whose clock keeps the enforced lease alive does not first end it on the gateway's clock (review of
    /// round 42, L-2): the same version answered `200` (a proxy that strips `If-None-Match`) was put on its floors,
    /// which lowered every bucket to the floors' bursts, and then enforced again; tenants lost the burst they had
    /// saved, and `leaseExpired` and `leaseResumed` came in one answer.
    @Test func anAnswerThatKeepsTheLeaseDoesNotFirstEndIt() throws {
        let collector = EventCollector()
        let enforcer = Enforcer.make(Self.snapshot(generatedAt: 1_000, lease: 20), now: 1_000, collector: collector)
        enforcer.observeServerClock(1_000, now: 1_000)
        _ = try enforcer.mustAdmit(now: 1_000)
        // By the gateway's clock the lease ended at 1,020; Allot's clock stepped back 120 s, as the answer says.
        #expect(enforcer.apply(Self.snapshot(generatedAt: 1_000, lease: 20), now: 1_025, serverTime: 905) == .unchanged)
        #expect(!enforcer.status(now: 1_025).inFallback)
        #expect(enforcer.statistics.leaseExpiries == 0)
        #expect(!collector.events.contains(.leaseExpired(version: 1, expiresAt: 1_020)))
        #expect(collector.events.last == .serverClock(offset: -120))
        // The bucket is still full at the lease's burst of two (the floors' burst is one).
        let tenant = try #require(enforcer.tenantStatus(tenant: "acme", upstream: Snapshot.defaultUpstream, now: 1_025))
        #expect(tenant.rpm.level == 2)
    }

    /// The same for a new version in an answer whose clock keeps the enforced one alive: the enforced lease is not
    /// ended first (its floors would lower the buckets before the new version's lease is installed).
    @Test func aSuccessorInAnAnswerThatKeepsTheLeaseDoesNotFirstEndIt() throws {
        let collector = EventCollector()
        let enforcer = Enforcer.make(Self.snapshot(generatedAt: 1_000, lease: 20), now: 1_000, collector: collector)
        enforcer.observeServerClock(1_000, now: 1_000)
        _ = try enforcer.mustAdmit(now: 1_000)
        let next = Self.snapshot(version: 2, generatedAt: 905, lease: 20)
        #expect(enforcer.apply(next, now: 1_025, serverTime: 905) == .applied)
        #expect(enforcer.statistics.leaseExpiries == 0)
        #expect(collector.events.suffix(2) == [.serverClock(offset: -120), .snapshotApplied(version: 2, previous: 1)])
        let status = enforcer.status(now: 1_025)
        #expect(!status.inFallback)
        #expect(status.leaseEnd == 1_045)
        let tenant = try #require(enforcer.tenantStatus(tenant: "acme", upstream: Snapshot.defaultUpstream, now: 1_025))
        #expect(tenant.rpm.level == 2)
    }

    /// A measure within a second is noise (the answer's way back): it moves nothing and says nothing.
    @Test func clocksWithinASecondChangeNothing() {
        let collector = EventCollector()
        let enforcer = Enforcer.make(Self.snapshot(generatedAt: 1_000, lease: 20), now: 1_000, collector: collector)
        enforcer.observeServerClock(1_000.5, now: 1_000)
        enforcer.observeServerClock(999.25, now: 1_000)
        #expect(enforcer.status(now: 1_000).leaseEnd == 1_020)
        #expect(enforcer.status(now: 1_000).serverClockOffset == -0.75)
        #expect(collector.events == [.snapshotApplied(version: 1, previous: nil)])
        enforcer.observeServerClock(900, now: 1_000)
        #expect(enforcer.status(now: 1_000).leaseEnd == 1_080)
        // A server that sends no time: the gateway's clock, as before.
        enforcer.observeServerClock(nil, now: 1_000)
        #expect(enforcer.status(now: 1_000).leaseEnd == 1_020)
        #expect(enforcer.status(now: 1_000).serverClockOffset == nil)
    }

    /// Trust in a measure is bounded (review H1): a time more than an hour off is not believed; a snapshot that is
    /// rejected brings no time with it; and an answer dated in the past keeps a lease at most its length and the
    /// longest long-poll past that answer, so that a silent Allot still lets it end.
    @Test func aMeasureIsBelievedWithinBounds() {
        let collector = EventCollector()
        let enforcer = Enforcer.make(Self.snapshot(version: 5, generatedAt: 1_000, lease: 300), collector: collector)
        enforcer.observeServerClock(1_000 - 7_200, now: 1_000)
        #expect(enforcer.status(now: 1_000).serverClockOffset == nil)
        #expect(enforcer.status(now: 1_000).leaseEnd == 1_300)
        let stray = Self.snapshot(version: 4, generatedAt: 900, lease: 300)
        #expect(
            enforcer.apply(stray, now: 1_001, serverTime: 500)
                == .rejected(reason: "version 4 is below the enforced version 5"))
        #expect(enforcer.status(now: 1_001).serverClockOffset == nil)
        // Dated 3,000 s back (within the hour): believed, but Allot must answer again within 360 s.
        enforcer.observeServerClock(1_002 - 3_000, now: 1_002)
        #expect(enforcer.status(now: 1_002).leaseEnd == 1_362)
        #expect(!enforcer.status(now: 1_361).inFallback)
        #expect(enforcer.status(now: 1_362).inFallback)
        #expect(collector.events.last == .leaseExpired(version: 5, expiresAt: 1_300))
    }

    /// Second review H-1: after a measure, the gateway's own clock steps back two hours. Allot's clock is then two
    /// hours ahead of it, and later measures saying so agree with what the step made of the offset: believed (refused
    /// as beyond an hour, the lease of every later snapshot ended 60 s past the last believed answer, for good).
    @Test func aMeasureBeyondAnHourThatAgreesWithAStepOfTheGatewaysClockIsBelieved() {
        let steady = SteadyReading()
        let enforcer = Enforcer.make(monotonic: { steady.now })
        _ = enforcer.apply(Self.snapshot(generatedAt: 1_000, lease: 300), now: 1_000, serverTime: 1_000)
        steady.now = 10
        #expect(enforcer.status(now: -6_190).serverClockOffset == 7_200)
        // Allot answers with its clock 20 s on from where the step put it: believed, and the lease read with it.
        let next = Self.snapshot(version: 2, generatedAt: 1_310, lease: 300)
        #expect(enforcer.apply(next, now: -5_910, serverTime: 1_310) == .applied)
        #expect(enforcer.status(now: -5_700).serverClockOffset == 7_220)
        #expect(enforcer.status(now: -5_700).leaseEnd == -5_610)
        #expect(!enforcer.status(now: -5_611).inFallback)
    }

    /// Second review M-1: a gateway two hours behind Allot (beyond what is believed) reads leases on its own clock, two
    /// hours long; but each runs at most its length and 60 s past the last answer, so a silent Allot still lets it end.
    @Test func aLeaseEndsWithinItsLengthOfTheLastAnswerWhateverTheClocks() {
        let enforcer = Enforcer.make()
        let snapshot = Self.snapshot(generatedAt: 8_200, lease: 300)
        #expect(enforcer.apply(snapshot, now: 1_000, serverTime: 8_200) == .applied)
        let status = enforcer.status(now: 1_000)
        #expect(status.serverClockOffset == nil)
        #expect(status.leaseEnd == 1_360)
        #expect(enforcer.status(now: 1_360).inFallback)
    }

    /// A gateway about a second off does not flip in and out of reading Allot's clock on every answer: it starts
    /// beyond a second and stops within half of one.
    @Test func aClockAboutASecondOffDoesNotFlap() {
        let collector = EventCollector()
        let enforcer = Enforcer.make(Self.snapshot(generatedAt: 1_000, lease: 300), collector: collector)
        var leaseEnds: [Double?] = []
        for measure in [1.25, 0.75, 1.125, 0.625, 0.25, 0.875] {
            enforcer.observeServerClock(1_000 + measure, now: 1_000)
            leaseEnds.append(enforcer.status(now: 1_000).leaseEnd)
        }
        #expect(leaseEnds == [1_298.75, 1_299.25, 1_298.875, 1_299.375, 1_300, 1_300])
        #expect(collector.events.suffix(2) == [.serverClock(offset: 1.25), .serverClock(offset: 0)])
    }

    /// The answer's time comes with its snapshot: a snapshot dated by Allot's clock 600 s behind the gateway's is a
    /// lease from the moment it arrives (measured after it, it would have been applied expired and then resumed).
    @Test func aSnapshotIsJudgedOnTheClockItsAnswerCarries() {
        let collector = EventCollector()
        let enforcer = Enforcer.make(collector: collector)
        let snapshot = Self.snapshot(generatedAt: 1_000, lease: 300)
        #expect(enforcer.apply(snapshot, now: 1_600, serverTime: 1_000) == .applied)
        #expect(!enforcer.status(now: 1_600).inFallback)
        #expect(collector.events == [.serverClock(offset: -600), .snapshotApplied(version: 1, previous: nil)])
    }

    /// A call admitted before the gateway's clock stepped back is reported at its admission on Allot's clock, not
    /// shifted by the step (Allot refuses a `ts` more than 300 s in the future, and the whole batch with it).
    @Test func aCallAcrossAStepOfTheGatewaysClockIsStampedAtItsAdmission() throws {
        let steady = SteadyReading()
        let collector = EventCollector()
        let enforcer = Enforcer.make(collector: collector, monotonic: { steady.now })
        enforcer.observeServerClock(1_000, now: 1_600)
        _ = enforcer.apply(Self.snapshot(generatedAt: 1_000, lease: 300), now: 1_600)
        let ticket = try enforcer.mustAdmit(now: 1_600)
        steady.now = 2
        #expect(enforcer.complete(ticket, AttemptResult(status: 200, latency: 2), now: 1_002))
        // The gateway's clock put right by 600 s: in step with Allot's now.
        #expect(enforcer.status(now: 1_002).serverClockOffset == 0)
        #expect(collector.telemetry.map(\.ts) == [1_000])
    }

    /// A drain is published with its lease already run out: a clock stepped back after it does not bring it back,
    /// and a gateway whose clock is behind Allot's does not enforce it as a lease for the difference.
    @Test func aDrainStaysDrainedWhateverTheClocks() {
        let enforcer = Enforcer.make(Self.snapshot(generatedAt: 1_000, lease: 20), now: 1_000)
        #expect(enforcer.apply(Self.snapshot(version: 2, generatedAt: 1_010, lease: 0), now: 1_005) == .applied)
        #expect(enforcer.status(now: 1_005).inFallback)
        enforcer.observeServerClock(900, now: 1_006)
        #expect(enforcer.status(now: 1_006).inFallback)
    }

    /// The gateway's own clock stepped back after a measure: Allot's is that much further ahead of it, so the
    /// lease still ends when Allot's clock reaches `expires_at` (it ran 600 s ahead, and was put right).
    @Test func aStepBackOfTheGatewaysClockMovesTheMeasuredOffsetWithIt() {
        let steady = SteadyReading()
        let collector = EventCollector()
        let enforcer = Enforcer.make(collector: collector, monotonic: { steady.now })
        enforcer.observeServerClock(1_000, now: 1_600)
        #expect(enforcer.apply(Self.snapshot(generatedAt: 1_000, lease: 300), now: 1_600) == .applied)
        #expect(enforcer.status(now: 1_600).leaseEnd == 1_900)
        steady.now = 1
        let status = enforcer.status(now: 1_001)
        #expect(status.serverClockOffset == 0)
        #expect(status.leaseEnd == 1_300)
        #expect(enforcer.statistics.clockStepsBack == 1)
        // Said at the step, not at the next answer (second review of round 42, L-1).
        #expect(collector.events.last == .serverClock(offset: 0))
    }

    /// A gateway on the system clock sees a step forward of its own clock against the steady clock as it sees a step
    /// back: the measured offset shrinks by the step, so the lease still ends when Allot's clock reaches `expires_at`
    /// (round 41 F5: the lease ended early by the step until the next answer), within its length and 60 s of the
    /// gateway's clock after the last answer, which does not move forward; and the step refills no bucket. A step
    /// past that cap (a VM paused and restored, its steady clock stood still while the wall clock was put right) ends
    /// the lease until the next answer (review of session 57, M1). Instants a caller makes up (tests, the simulator)
    /// are not read as steps.
    @Test func aStepForwardOfTheGatewaysClockMovesTheMeasuredOffsetWithIt() throws {
        let steady = SteadyReading()
        let collector = EventCollector()
        let configuration = GatewayConfiguration(gatewayID: "gw-1", onEvent: { collector.note($0) })
        let enforcer = Enforcer(
            configuration: configuration, telemetry: collector, wakeHandler: nil, monotonic: { steady.now },
            detectsStepsForward: true)
        enforcer.observeServerClock(1_000, now: 1_000)
        #expect(enforcer.apply(Self.snapshot(generatedAt: 1_000, lease: 300), now: 1_000) == .applied)
        _ = try enforcer.mustAdmit(now: 1_000)
        _ = try enforcer.mustAdmit(now: 1_000)
        // 1 s later by the steady clock, the gateway's clock reads 251 s later.
        steady.now = 1
        let status = enforcer.status(now: 1_251)
        #expect(!status.inFallback)
        #expect(status.serverClockOffset == -250)
        // Allot's clock reaches 1,300 at 1,550 here; the last answer came at 1,000 by the gateway's clock: 1,360.
        #expect(status.leaseEnd == 1_360)
        #expect(enforcer.statistics.clockStepsForward == 1)
        #expect(collector.events.last == .serverClock(offset: -250))
        // The step refilled nothing: 1 s of refill at 1 a second (the burst is two).
        let tenant = try #require(enforcer.tenantStatus(tenant: "acme", upstream: Snapshot.defaultUpstream, now: 1_251))
        #expect(tenant.rpm.level == 1)
        // Past 1,300, where the gateway's clock alone ended it before.
        steady.now = 60
        #expect(!enforcer.status(now: 1_310).inFallback)
        steady.now = 110
        #expect(enforcer.status(now: 1_360).inFallback)

        // A step past the cap: the lease taken before it is not kept.
        let restored = Enforcer(
            configuration: GatewayConfiguration(gatewayID: "gw-2"), telemetry: nil, wakeHandler: nil,
            monotonic: { steady.now }, detectsStepsForward: true)
        steady.now = 0
        restored.observeServerClock(1_000, now: 1_000)
        _ = restored.apply(Self.snapshot(generatedAt: 1_000, lease: 20), now: 1_000)
        steady.now = 1
        let after = restored.status(now: 1_601)
        #expect(after.inFallback)
        #expect(after.serverClockOffset == -600)
        #expect(restored.statistics.clockStepsForward == 1)

        // Without the detection (made-up instants), a jump is time passing, and the lease ends at 1,300.
        let virtual = Enforcer.make(monotonic: { 0 })
        virtual.observeServerClock(1_000, now: 1_000)
        _ = virtual.apply(Self.snapshot(generatedAt: 1_000, lease: 300), now: 1_000)
        #expect(virtual.status(now: 1_251).leaseEnd == 1_300)
        #expect(virtual.status(now: 1_310).inFallback)
        #expect(virtual.statistics.clockStepsForward == 0)
    }

    /// On the system clock a step back is judged against where the wall clock should be too, not only against the
    /// latest instant: 10 s back, 20 s after the gateway's last call, moves the measured offset (review of session 57,
    /// L2: it went unseen, and the lease ran 10 s long until the next answer).
    @Test func aShortStepBackAfterAQuietSpellIsSeen() {
        let steady = SteadyReading()
        let enforcer = Enforcer(
            configuration: GatewayConfiguration(gatewayID: "gw-1"), telemetry: nil, wakeHandler: nil,
            monotonic: { steady.now }, detectsStepsForward: true)
        enforcer.observeServerClock(1_000, now: 1_000)
        _ = enforcer.apply(Self.snapshot(generatedAt: 1_000, lease: 300), now: 1_000)
        steady.now = 20
        let status = enforcer.status(now: 1_010)
        #expect(enforcer.statistics.clockStepsBack == 1)
        #expect(status.serverClockOffset == 10)
        #expect(status.leaseEnd == 1_290)
    }

    /// An instant out of order (a caller's stale `now`) reads as a step back and the next as a step forward: the round
    /// trip gives every bucket back the refill it took (review of session 57, M2: a refill frozen by each stale call).
    @Test func aStaleInstantCostsNoRefill() throws {
        let steady = SteadyReading()
        let enforcer = Enforcer(
            configuration: GatewayConfiguration(gatewayID: "gw-1"), telemetry: nil, wakeHandler: nil,
            monotonic: { steady.now }, detectsStepsForward: true)
        _ = enforcer.apply(Self.snapshot(generatedAt: 1_000, lease: 300), now: 1_000)
        _ = try enforcer.mustAdmit(now: 1_000)
        _ = try enforcer.mustAdmit(now: 1_000)
        // 1.5 s on, an instant 3 s stale; a quarter second later, a fresh one.
        steady.now = 1.5
        _ = enforcer.status(now: 998.5)
        steady.now = 1.75
        _ = enforcer.status(now: 1_001.75)
        let level = try #require(
            enforcer.tenantStatus(tenant: "acme", upstream: Snapshot.defaultUpstream, now: 1_001.75)?.rpm.level)
        #expect(abs(level - 1.75) < 1e-9)
        #expect(enforcer.statistics.clockStepsBack == 1)
        #expect(enforcer.statistics.clockStepsForward == 1)
    }

    /// A gateway on the system clock reads its instants as the wall clock's and sees steps forward; on any other clock
    /// (a test's, virtual time) it does not.
    @Test func onlyAGatewayOnTheSystemClockSeesStepsForward() {
        #expect(Gateway(configuration: GatewayConfiguration(gatewayID: "gw-1")).enforcer.detectsStepsForward)
        #expect(
            Gateway(configuration: GatewayConfiguration(gatewayID: "gw-1"), clock: SystemClock()).enforcer
                .detectsStepsForward)
        #expect(
            !Gateway(configuration: GatewayConfiguration(gatewayID: "gw-1"), clock: ManualClock(now: 0)).enforcer
                .detectsStepsForward)
        #expect(!Enforcer(configuration: GatewayConfiguration(gatewayID: "gw-1")).detectsStepsForward)
    }

    /// A burst credit's `expires_at` is Allot's instant too: a gateway 600 s ahead still spends it.
    @Test func aBurstCreditRunsOnAllotsClock() throws {
        let credited = TenantEntry.make(
            rpm: Bucket(rate: 6, burst: 1), tpm: Bucket(rate: 6_000, burst: 1_000),
            burstCredit: BurstCredit(calls: 5, tokens: 500, expiresAt: 1_100))
        let enforcer = Enforcer.make()
        enforcer.observeServerClock(1_000, now: 1_600)
        _ = enforcer.apply(.make(generatedAt: 1_000, expiresAt: 1_300, tenants: [credited]), now: 1_600)
        _ = try enforcer.mustAdmit(now: 1_600)  // the bucket's one call
        _ = try enforcer.mustAdmit(now: 1_600)  // the credit's first
        let status = try #require(enforcer.tenantStatus(tenant: "acme", upstream: Snapshot.defaultUpstream, now: 1_600))
        #expect(status.creditCalls == 4)
        // Once Allot's clock passes 1,100 the credit is gone: the refilled bucket's call, then a denial.
        _ = try enforcer.mustAdmit(now: 1_700.5)
        #expect(try enforcer.mustDeny(now: 1_700.5).limit == .rpm)
    }

    /// Telemetry goes out on Allot's clock too: a gateway 600 s ahead had every batch refused (`ts` more than 300 s
    /// in the future), and one behind put its events in windows the loop had already read.
    @Test func telemetryIsStampedOnAllotsClock() throws {
        let collector = EventCollector()
        let enforcer = Enforcer.make(collector: collector)
        enforcer.observeServerClock(1_000, now: 1_600)
        var snapshot = Self.snapshot(generatedAt: 1_000, lease: 300)
        snapshot.tenants.append(TenantEntry.make("broke", deny: "budget_exhausted"))
        _ = enforcer.apply(snapshot, now: 1_600)
        let ticket = try enforcer.mustAdmit(now: 1_610)
        #expect(enforcer.complete(ticket, AttemptResult(status: 200, latency: 1), now: 1_611))
        _ = try enforcer.mustDeny(.make("broke"), now: 1_611)
        #expect(collector.telemetry.map(\.ts) == [1_010, 1_011])
        #expect(collector.telemetry.map(\.outcome) == [.ok, .deniedLocal])
        // In step within a second: stamped as read.
        enforcer.observeServerClock(1_620.5, now: 1_620)
        _ = try enforcer.mustDeny(.make("broke"), now: 1_620)
        #expect(collector.telemetry.last?.ts == 1_620)
    }

    /// Through the snapshot client: the answer's time reaches the enforcer before the snapshot in it, and a `304`
    /// carries it too.
    @Test func theSnapshotClientHandsEveryAnswersTimeToTheEnforcer() async {
        let clock = ManualClock(now: 1_600)
        let transport = ClockedTransport([
            SnapshotExchange(.snapshot(Self.snapshot(generatedAt: 1_000, lease: 300)), serverTime: 1_000),
            SnapshotExchange(.notModified, serverTime: 1_000),
            SnapshotExchange(.notModified, serverTime: nil),
        ])
        let enforcer = Enforcer.make()
        let client = SnapshotClient(gatewayID: "gw-1", transport: transport, enforcer: enforcer, clock: clock)
        #expect(await client.pollOnce() == .received(version: 1, .applied))
        #expect(enforcer.statistics.leaseExpiries == 0)
        #expect(!enforcer.status(now: 1_600).inFallback)
        #expect(enforcer.status(now: 1_600).leaseEnd == 1_900)
        clock.advance(by: 100)
        // Allot answers 100 s later by the gateway's clock but at the same instant by its own: it stepped back.
        #expect(await client.pollOnce() == .notModified)
        #expect(enforcer.status(now: 1_700).leaseEnd == 2_000)
        #expect(await client.pollOnce() == .notModified)
        #expect(enforcer.status(now: 1_700).inFallback)
    }
}

extension ServerClockTests {
    /// A lease taken up again rings the owner's waker (``Gateway`` sleeps until the lease end it last read, and on its
    /// floors it had none): it must wake at the resumed lease's end to switch to the floors then.
    @Test func aResumedLeaseRingsTheWaker() {
        let rings = Rings()
        let enforcer = Enforcer(
            configuration: GatewayConfiguration(gatewayID: "gw-1"), telemetry: nil, wakeHandler: { rings.ring() })
        _ = enforcer.apply(Self.snapshot(generatedAt: 1_000, lease: 20), now: 1_000, serverTime: 1_000)
        #expect(enforcer.status(now: 1_025).inFallback)
        #expect(enforcer.nextWakeTime == nil)
        let before = rings.count
        enforcer.observeServerClock(905, now: 1_025)
        #expect(rings.count == before + 1)
        #expect(enforcer.nextWakeTime == 1_105)
    }

    /// A poll asks Allot to hold it at most half the lease of the snapshot enforced: an answer (with Allot's clock)
    /// then comes at least twice a lease even when nothing is published (round 41: a 20-s lease ran out while a 30-s
    /// poll was held through a step back of Allot's clock). A drain, which has no lease, does not shorten it.
    @Test func aPollIsHeldAtMostHalfALease() async {
        let clock = ManualClock(now: 1_000)
        let transport = ScriptedSnapshotTransport(
            clock: clock,
            [
                .success(.snapshot(Self.snapshot(generatedAt: 1_000, lease: 20))), .success(.notModified),
                .success(.snapshot(Self.snapshot(version: 2, generatedAt: 1_000, lease: 0))), .success(.notModified),
            ])
        let client = SnapshotClient(
            gatewayID: "gw-1", transport: transport, enforcer: Enforcer.make(), clock: clock,
            configuration: .init(longPollWait: 30))
        for _ in 0..<4 { _ = await client.pollOnce() }
        #expect(transport.requests.map(\.wait) == [30, 10, 10, 30])
    }
}

/// Counts the waker's rings.
private final class Rings: @unchecked Sendable {
    // `@unchecked Sendable`: `rung` is only touched under `lock`.
    private let lock = NSLock()
    private var rung = 0
    func ring() { lock.withLock { rung += 1 } }
    var count: Int { lock.withLock { rung } }
}

/// Seconds on a stand-in for the never-stepped clock.
private final class SteadyReading: @unchecked Sendable {
    // `@unchecked Sendable`: written and read by one test's task only.
    var now = 0.0
}

/// Answers polls from a list of exchanges, in order.
private actor ClockedTransport: SnapshotTransport {
    private var answers: [SnapshotExchange]

    init(_ answers: [SnapshotExchange]) { self.answers = answers }

    nonisolated func fetch(gateway: String, instance: String, knownVersion: Int64?, wait: Double)
        async throws(TransportError) -> SnapshotFetch
    {
        try await exchange(gateway: gateway, instance: instance, knownVersion: knownVersion, wait: wait).fetch
    }

    func exchange(gateway: String, instance: String, knownVersion: Int64?, wait: Double)
        async throws(TransportError) -> SnapshotExchange
    {
        guard !answers.isEmpty else { throw TransportError(.unreachable, "no more answers") }
        return answers.removeFirst()
    }
}
