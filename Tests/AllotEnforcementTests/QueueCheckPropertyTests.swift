import AllotProtocol
import Testing

@testable import AllotEnforcement

/// A pump for the passage of time looks only at the lanes due (``EnforcerState/laneChecks``): sound only if the
/// soonest instant a head may pass by refill alone (``Failure/possibleIn(_:)``) really is a lower bound. Driven
/// at random — six tenants on two upstreams with idle lending, small buckets, every task
/// class, completions that use more or less than reserved, wakes at the queue's own wake time — after every
/// pump and every completion no head that could be admitted is left behind unless its look is still to come, and none is
/// admissible before its lower bound. (Taking the retry-after itself as the bound, which leaves out idle
/// allocation a head may borrow sooner, fails here.)
@Suite struct QueueCheckPropertyTests {
    @Test(arguments: [1, 2, 3, 4, 5, 6] as [UInt64])
    func noHeadLeftBehindCouldBeAdmittedBeforeItsLook(seed: UInt64) throws {
        var random = SplitMix64(seed: seed)
        func uniform(_ range: ClosedRange<Double>) -> Double { Double.random(in: range, using: &random) }
        let ids = ["a", "b", "c", "d", "e", "f"]
        let tenants = ids.enumerated().map { index, id in
            TenantEntry.make(
                id, upstream: index % 2 == 0 ? "u1" : "u2", rpm: Bucket(rate: Double(30 + 20 * index), burst: 2),
                tpm: Bucket(rate: Double(4_000 + 3_000 * index), burst: 2_500))
        }
        var state = EnforcerState(
            configuration: GatewayConfiguration(
                gatewayID: "gw-1", maxWait: PerTaskClass(realtime: 0.5, interactive: 5, batch: 20, background: 60)),
            reportsTelemetry: false)
        var now = 1_000.0
        var effects = Effects()
        _ = state.apply(.make(expiresAt: 1_000_000, tenants: tenants), now: now, effects: &effects)
        var running: [Ticket] = []
        var checkedHeads = 0
        var skippingPumps = 0
        for _ in 0..<4_000 {
            effects = Effects()
            switch random.next() % 5 {
            case 0, 1:
                let tenant = Int(random.next() % 6)
                let request = AdmissionRequest.make(
                    ids[tenant], upstream: tenant % 2 == 0 ? "u1" : "u2",
                    taskClass: [.realtime, .interactive, .batch, .background][Int(random.next() % 4)],
                    tokens: Int(uniform(50...1_500)))
                if case .decided(.admitted(let ticket)) = state.submit(
                    request, now: now, wait: true, report: false, onDecision: { _ in }, effects: &effects)
                {
                    running.append(ticket)
                }
            case 2 where !running.isEmpty:
                let ticket = running.remove(at: Int(random.next() % UInt64(running.count)))
                let used = Int(uniform(0...Double(ticket.reservedTokens) * 1.5))
                _ = state.complete(
                    ticket, AttemptResult(status: 200, promptTokens: used / 2, completionTokens: used - used / 2),
                    now: now, effects: &effects)
                // A completion looks only at the lanes it may have changed (its own, or its upstream's when it
                // refunded to the idle or cap buckets): no other head may have become admissible by it.
                checkedHeads += try checkHeads(of: state, at: now)
            default:
                // A wake, when the queue asks for one (at most a second ahead, so time moves on).
                now = min(state.nextWakeTime() ?? .infinity, now + 1)
                if state.headsWaitForRefill { skippingPumps += 1 }
                state.pump(now: now, effects: &effects, changed: .time)
                checkedHeads += try checkHeads(of: state, at: now)
            }
            for (_, admission) in effects.decisions { if let ticket = admission.ticket { running.append(ticket) } }
            now += uniform(0...0.05)
        }
        #expect(checkedHeads > 500, "the queue was busy enough to test (\(checkedHeads) heads checked)")
        #expect(skippingPumps > 1_000, "\(skippingPumps) wakes could skip lanes")
    }

    /// Evaluates every waiting head at `now` (without changing anything) and checks the two properties.
    /// Returns how many heads it checked.
    private func checkHeads(of state: EnforcerState, at now: Double) throws -> Int {
        var checked = 0
        for keyID in state.queue.activeLanes {
            let head = try #require(state.queue.head(ofLane: keyID))
            let waiter = state.queue[head.slot]
            let index = try #require(state.states.index(forKey: waiter.key))
            checked += 1
            guard
                case .admit = state.evaluate(
                    waiter.request, key: waiter.key, at: index, estimate: waiter.estimate, now: now, arrival: nil)
            else { continue }
            let failure = waiter.failure
            let delay = try #require(failure.retryAfter, "an admissible head left waiting has a refill's failure")
            let soonest = waiter.failureAt + failure.possibleIn(delay)
            let look = waiter.failureAt + max(failure.possibleIn(delay), min(delay, EnforcerState.borrowRecheck))
            #expect(now >= soonest - 1e-6, "admissible at \(now), before its lower bound \(soonest): \(failure.text)")
            #expect(now < look, "admissible at \(now) although its look was due at \(look): \(failure.text)")
        }
        return checked
    }
}
