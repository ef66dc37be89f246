import AllotProtocol
import AllotTime
import Testing

@testable import AllotEnforcement

/// The snapshot client against a scripted transport on a manual clock.
@Suite struct SnapshotClientTests {
    static let acme = TenantEntry.make()

    func makeClient(
        _ transport: ScriptedSnapshotTransport, clock: ManualClock, enforcer: Enforcer, longPollWait: Double = 30,
        seed: UInt64 = 3
    ) -> SnapshotClient {
        SnapshotClient(
            gatewayID: "gw-1", transport: transport, enforcer: enforcer, clock: clock,
            configuration: .init(longPollWait: longPollWait), seed: seed)
    }

    /// Leaving is said once, with the client's gateway id; a failure is an event, not an error (the gateway is
    /// stopping either way).
    @Test func leavingIsSaidOnceAndAFailureIsReported() async {
        let clock = ManualClock(now: 1_000)
        let transport = ScriptedSnapshotTransport(clock: clock)
        let collector = EventCollector()
        let client = SnapshotClient(
            gatewayID: "gw-1", transport: transport, enforcer: Enforcer.make(), clock: clock,
            onEvent: { collector.note($0) })
        await client.leave()
        #expect(transport.left == ["gw-1"])
        #expect(collector.events.isEmpty)
        transport.failLeaving(TransportError(.unreachable, "connection refused"))
        await client.leave()
        #expect(transport.left == ["gw-1", "gw-1"])
        #expect(collector.events == [.leaveFailed(message: "unreachable: connection refused")])
    }

    /// Every poll and the leave name the same instance: 16 hex digits, drawn anew for each client (each run of the
    /// process), or the one given.
    @Test func pollsAndTheLeaveNameTheClientsInstance() async {
        let clock = ManualClock(now: 1_000)
        let transport = ScriptedSnapshotTransport(clock: clock, [.success(.notModified), .success(.notModified)])
        let client = makeClient(transport, clock: clock, enforcer: Enforcer.make())
        _ = await client.pollOnce()
        _ = await client.pollOnce()
        await client.leave()
        #expect(transport.instances == Array(repeating: client.instanceID, count: 3))
        #expect(client.instanceID.count == 16)
        #expect(client.instanceID.allSatisfy { $0.isHexDigit })
        #expect(makeClient(transport, clock: clock, enforcer: Enforcer.make()).instanceID != client.instanceID)
        let named = SnapshotClient(
            gatewayID: "gw-1", transport: transport, enforcer: Enforcer.make(), clock: clock, instanceID: "pod-7")
        await named.leave()
        #expect(transport.instances.last == "pod-7")
        // One Allot would refuse in every poll is replaced by a random one.
        let refused = SnapshotClient(
            gatewayID: "gw-1", transport: transport, enforcer: Enforcer.make(), clock: clock, instanceID: "pod 7")
        #expect(refused.instanceID.count == 16 && refused.instanceID.allSatisfy { $0.isHexDigit })
    }

    @Test func sendsTheEnforcedVersionAndAppliesNewerSnapshots() async {
        let clock = ManualClock(now: 1_000)
        let enforcer = Enforcer.make()
        let transport = ScriptedSnapshotTransport(
            clock: clock,
            [
                .success(.snapshot(.make(version: 7, tenants: [Self.acme]))), .success(.notModified),
                .success(.snapshot(.make(version: 6))), .success(.snapshot(.make(version: 7))),
                .success(.snapshot(.make(version: 8, tenants: [Self.acme]))),
            ])
        let client = makeClient(transport, clock: clock, enforcer: enforcer)
        #expect(await client.pollOnce() == .received(version: 7, .applied))
        #expect(await client.pollOnce() == .notModified)
        #expect(
            await client.pollOnce()
                == .received(version: 6, .rejected(reason: "version 6 is below the enforced version 7")))
        // A rejection is no failure of the exchange, but the status names it.
        #expect(await client.status.lastError == "snapshot rejected: version 6 is below the enforced version 7")
        #expect(await client.status.consecutiveFailures == 0)
        #expect(await client.pollOnce() == .received(version: 7, .unchanged))
        #expect(await client.pollOnce() == .received(version: 8, .applied))
        #expect(transport.requests.map(\.knownVersion) == [nil, 7, 7, 7, 7])
        #expect(transport.requests.allSatisfy { $0.gateway == "gw-1" && $0.wait == 30 })
        let status = await client.status
        #expect(status.enforcedVersion == 8)
        #expect(status.received == 2)
        #expect(status.rejected == 1)
        #expect(status.notModified == 1)
        #expect(status.lastContact == 1_000)
    }

    @Test func failuresBackOffWithSeededJitterAndKeepTheLastGoodSnapshot() async {
        let clock = ManualClock(now: 1_000)
        let enforcer = Enforcer.make(.make(version: 3, tenants: [Self.acme]))
        let transport = ScriptedSnapshotTransport(
            clock: clock,
            [
                .failure(TransportError(.unreachable, "connection refused")),
                .failure(TransportError(.timeout, "no answer")),
                .failure(TransportError(.status, "overloaded", status: 503, retryAfter: 40)),
                .success(.notModified),
            ])
        let client = makeClient(transport, clock: clock, enforcer: enforcer, seed: 11)
        var random = SplitMix64(seed: 11)
        let backoff = Backoff(initial: 0.5, maximum: 30)
        let expected = (1...3).map { backoff.delay(failures: $0, unit: random.unit()) }
        var delays: [Double] = []
        for _ in 0..<3 {
            guard case .failed(_, let retryIn) = await client.pollOnce() else {
                Issue.record("expected a failure")
                return
            }
            delays.append(retryIn)
        }
        #expect(delays[0] == expected[0])
        #expect(delays[1] == expected[1])
        #expect(delays[2] == 30)  // Retry-After (40) beats the shorter backoff, up to the backoff's maximum
        #expect(expected[1] > 0.5 && expected[1] <= 1)
        var status = await client.status
        #expect(status.consecutiveFailures == 3)
        #expect(status.lastError == "status: overloaded (HTTP 503)")
        #expect(status.enforcedVersion == 3)
        // Admission still uses the last good snapshot.
        _ = try? enforcer.mustAdmit(now: 1_000)
        #expect(await client.pollOnce() == .notModified)
        status = await client.status
        #expect(status.consecutiveFailures == 0)
        #expect(status.lastError == nil)
    }

    @Test func runLongPollsBackToBackWhenTheServerHoldsThePoll() async {
        let clock = ManualClock(now: 1_000)
        let enforcer = Enforcer.make()
        let transport = ScriptedSnapshotTransport(clock: clock, [.success(.snapshot(.make(version: 1)))])
        let client = makeClient(transport, clock: clock, enforcer: enforcer)
        let loop = Task { await client.run() }
        defer { loop.cancel() }
        // First poll answers at once; the second is held for 30 s, the third starts as the second ends.
        #expect(await eventually { clock.nextDeadline == 1_030 })
        clock.advance(by: 30)
        #expect(await eventually { transport.requests.count == 3 })
        #expect(transport.requests.map(\.at) == [1_000, 1_000, 1_030])
        #expect(transport.requests.map(\.knownVersion) == [nil, 1, 1])
    }

    @Test func runFallsBackToTheRefreshIntervalWhenPollsAreNotHeld() async {
        let clock = ManualClock(now: 1_000)
        let enforcer = Enforcer.make()
        let transport = ScriptedSnapshotTransport(
            clock: clock,
            [.success(.snapshot(.make(version: 1, refreshMs: 2_000))), .success(.notModified), .success(.notModified)])
        let client = makeClient(transport, clock: clock, enforcer: enforcer)
        let loop = Task { await client.run() }
        defer { loop.cancel() }
        #expect(await eventually { transport.requests.count == 2 })
        #expect(await eventually { clock.nextDeadline == 1_002 })
        clock.advance(by: 2)
        #expect(await eventually { transport.requests.count == 3 })
        #expect(await eventually { clock.nextDeadline == 1_004 })
        clock.advance(by: 2)
        #expect(await eventually { transport.requests.count == 4 })
        #expect(transport.requests.map(\.at) == [1_000, 1_000, 1_002, 1_004])
    }

    @Test func runWaitsTheBackoffBetweenFailedPolls() async {
        let clock = ManualClock(now: 1_000)
        let enforcer = Enforcer.make()
        let transport = ScriptedSnapshotTransport(
            clock: clock,
            [
                .failure(TransportError(.unreachable, "refused")), .failure(TransportError(.unreachable, "refused")),
                .success(.snapshot(.make(version: 1))),
            ])
        let client = makeClient(transport, clock: clock, enforcer: enforcer, seed: 5)
        var random = SplitMix64(seed: 5)
        let backoff = Backoff(initial: 0.5, maximum: 30)
        let first = backoff.delay(failures: 1, unit: random.unit())
        let second = backoff.delay(failures: 2, unit: random.unit())
        let loop = Task { await client.run() }
        defer { loop.cancel() }
        #expect(await eventually { clock.nextDeadline == 1_000 + first })
        clock.advance(to: 1_000 + first)
        #expect(await eventually { clock.nextDeadline == 1_000 + first + second })
        clock.advance(to: 1_000 + first + second)
        #expect(await eventually { enforcer.enforcedVersion == 1 })
        #expect(transport.requests.map(\.at).prefix(3) == [1_000, 1_000 + first, 1_000 + first + second])
    }

    /// On the fallback floors a failing poll is retried within the refresh interval (jittered between half and all
    /// of it), whatever the backoff or the server's Retry-After say (round 32: the backoff's 30 s kept a gateway on
    /// its floors 8 s after Allot was back); with a live lease the backoff stands.
    @Test func onTheFloorsAFailedPollIsRetriedWithinTheRefreshInterval() async {
        let clock = ManualClock(now: 1_000)
        let enforcer = Enforcer.make(.make(version: 1, expiresAt: 1_010, refreshMs: 5_000))
        let refusal = TransportError(.unreachable, "refused", retryAfter: 86_400)
        let transport = ScriptedSnapshotTransport(clock: clock, Array(repeating: .failure(refusal), count: 8))
        let client = makeClient(transport, clock: clock, enforcer: enforcer, seed: 5)
        // Lease live: the Retry-After, up to the backoff's 30 s.
        guard case .failed(_, let live) = await client.pollOnce() else {
            Issue.record("expected a failure")
            return
        }
        #expect(live == 30)
        clock.advance(to: 1_011)
        #expect(enforcer.status(now: clock.now).inFallback)
        for _ in 0..<6 {
            guard case .failed(_, let retryIn) = await client.pollOnce() else {
                Issue.record("expected a failure")
                return
            }
            #expect(retryIn >= 2.5 && retryIn <= 5, "\(retryIn)")
        }
        // Before a first snapshot, with a refresh interval of 0: at least a second, never a spin.
        let fresh = SnapshotClient(
            gatewayID: "gw-1", transport: ScriptedSnapshotTransport(clock: clock, [.failure(refusal)]),
            enforcer: Enforcer.make(), clock: clock,
            configuration: .init(longPollWait: 30, defaultRefreshInterval: 0), seed: 1)
        guard case .failed(_, let first) = await fresh.pollOnce() else {
            Issue.record("expected a failure")
            return
        }
        #expect(first == 1)
    }

    /// A server's Retry-After is honoured up to the backoff's maximum: a proxy's `Retry-After: 86400` kept a gateway
    /// from polling for a day, on its fallback floors (round 14). Settings that would spin read as sane ones.
    @Test func retryAfterIsHonouredUpToTheMaximumAndSpinningSettingsAreRefused() {
        let backoff = Backoff(initial: 0.5, maximum: 30)
        #expect(backoff.honouring(retryAfter: 86_400, delay: 2) == 30)
        #expect(backoff.honouring(retryAfter: 12, delay: 2) == 12)
        #expect(backoff.honouring(retryAfter: 1, delay: 2) == 2)
        #expect(backoff.honouring(retryAfter: nil, delay: 2) == 2)
        #expect(backoff.honouring(retryAfter: .nan, delay: 2) == 2)
        #expect(Backoff(initial: 0.5, maximum: 30, multiplier: 0, jitter: 0).delay(failures: 3, unit: 0) == 0.5)
        #expect(Backoff(initial: 0, maximum: 30, jitter: 0).delay(failures: 1, unit: 0) == 0.5)
        #expect(Backoff(initial: 0.5, maximum: .nan, jitter: 0).delay(failures: 100, unit: 0) == 30)
        #expect(Backoff(initial: 2, maximum: 1, jitter: 0).delay(failures: 5, unit: 0) == 2)
    }

    /// On its fallback floors, a gateway takes a lower version with a live lease (the server was restored from a
    /// backup; round 14: a fleet stayed on its floors until the server's versions passed theirs); with its own lease
    /// live, it takes a lower version the server generated later than the enforced one (round 32: one stray response
    /// of version 2^62 had every real snapshot rejected for its lease), and rejects one older by both, a response
    /// delivered late.
    @Test func aLowerVersionIsTakenWhenTheServerWentBack() async {
        let enforcer = Enforcer.make(.make(version: 10, generatedAt: 1_000, expiresAt: 1_300, tenants: [Self.acme]))
        let late = Snapshot.make(version: 9, generatedAt: 995, expiresAt: 1_295, tenants: [Self.acme])
        #expect(enforcer.apply(late, now: 1_010) == .rejected(reason: "version 9 is below the enforced version 10"))
        let sameInstant = Snapshot.make(version: 9, generatedAt: 1_000, expiresAt: 1_300, tenants: [Self.acme])
        #expect(
            enforcer.apply(sameInstant, now: 1_010) == .rejected(reason: "version 9 is below the enforced version 10"))
        // Generated later but delivered after its lease: it would put the gateway on its floors.
        let expired = Snapshot.make(version: 8, generatedAt: 1_001, expiresAt: 1_006, tenants: [Self.acme])
        #expect(enforcer.apply(expired, now: 1_010) == .rejected(reason: "version 8 is below the enforced version 10"))
        // Dated more than an hour ahead of the gateway's clock: a stray, not a server that went back.
        let future = Snapshot.make(version: 7, generatedAt: 9_000, expiresAt: 9_300, tenants: [Self.acme])
        #expect(enforcer.apply(future, now: 1_010) == .rejected(reason: "version 7 is below the enforced version 10"))
        let restored = Snapshot.make(version: 3, generatedAt: 1_250, expiresAt: 1_550, tenants: [Self.acme])
        #expect(enforcer.apply(restored, now: 1_260) == .applied)
        #expect(enforcer.status(now: 1_260).version == 3)

        // An enforced stray dated far ahead (a huge version and the year 9999) protects nothing.
        let pinned = Enforcer.make(
            .make(version: 1 << 62, generatedAt: 253_402_300_000, expiresAt: 253_402_300_300, tenants: [Self.acme]))
        let real = Snapshot.make(version: 12, generatedAt: 1_005, expiresAt: 1_305, tenants: [Self.acme])
        #expect(pinned.apply(real, now: 1_006) == .applied)

        // On the floors: a lower version with a live lease, though generated no later.
        let floors = Enforcer.make(.make(version: 10, generatedAt: 1_000, expiresAt: 1_300, tenants: [Self.acme]))
        #expect(floors.status(now: 1_301).inFallback)
        let stale = Snapshot.make(version: 2, generatedAt: 900, expiresAt: 1_200, tenants: [Self.acme])
        #expect(floors.apply(stale, now: 1_301) == .rejected(reason: "version 2 is below the enforced version 10"))
        let again = Snapshot.make(version: 4, generatedAt: 990, expiresAt: 1_600, tenants: [Self.acme])
        #expect(floors.apply(again, now: 1_302) == .applied)
        let status = floors.status(now: 1_302)
        #expect(status.version == 4)
        #expect(!status.inFallback)
    }

    @Test func backoffGrowsToItsMaximumAndJitterStaysInRange() {
        let backoff = Backoff(initial: 0.5, maximum: 30, multiplier: 2, jitter: 0.5)
        #expect(backoff.delay(failures: 1, unit: 0.999_999) > 0.499)
        #expect(backoff.delay(failures: 1, unit: 0) == 0.25)
        #expect(backoff.delay(failures: 4, unit: 0.5) == 3)
        #expect(backoff.delay(failures: 200, unit: 0) == 15)
        #expect(backoff.delay(failures: 200, unit: 1) == 30)
        var random = SplitMix64(seed: 42)
        var again = SplitMix64(seed: 42)
        for _ in 0..<1_000 {
            let unit = random.unit()
            #expect(unit >= 0 && unit < 1)
            #expect(unit == again.unit())
        }
    }
}
