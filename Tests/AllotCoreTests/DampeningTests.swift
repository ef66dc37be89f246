import Testing

@testable import AllotCore

@Suite("Dampening (SPEC 6.6)")
struct DampeningTests {
    static let settings = DampeningSettings(
        alpha: 1, deadband: 0.05, persistTicks: 3, maxUp: 0.25, maxDown: 0.5, minStep: .absolute(10))

    /// Runs one tick for `targets` and returns the published values.
    @discardableResult
    static func tick(
        _ states: inout [DamperState?], _ targets: [Double], capacity: Double = 1000,
        settings: DampeningSettings = settings, entering: [Bool]? = nil
    ) -> (values: [Double], actions: [DampingAction]) {
        let inputs = targets.enumerated().map { index, target in
            Dampening.Input(target: target, entering: entering?[index] ?? false)
        }
        let actions = Dampening.apply(inputs, states: &states, capacity: capacity, settings: settings)
        return (states.map { $0!.published }, actions)
    }

    @Test func newTenantsEnterAtTheirTarget() {
        var states: [DamperState?] = [nil, nil]
        let (values, actions) = Self.tick(&states, [300, 40])
        #expect(values == [300, 40])
        #expect(actions == [.entered, .entered])
    }

    @Test func risesAreLimitedToMaxUpOrMinStep() {
        var states: [DamperState?] = [
            DamperState(published: 100, smoothed: 100), DamperState(published: 4, smoothed: 4),
        ]
        let (values, actions) = Self.tick(&states, [200, 50])
        // 25 % of 100 = 25; a tenant at 4 may still rise by min_step (10).
        #expect(values == [125, 14])
        #expect(actions == [.limited, .limited])
        #expect(Self.tick(&states, [200, 50]).values == [156.25, 24])
    }

    @Test func fallsAreLimitedToMaxDown() {
        var states: [DamperState?] = [DamperState(published: 400, smoothed: 400)]
        #expect(Self.tick(&states, [100]).values == [200])
        #expect(Self.tick(&states, [100]).values == [100])
        #expect(Self.tick(&states, [100]).actions == [.heldDeadband])
    }

    @Test func smallMovesInsideTheDeadbandAreIgnored() {
        var states: [DamperState?] = [DamperState(published: 100, smoothed: 100)]
        #expect(Self.tick(&states, [104]) == ([100], [.heldDeadband]))
        #expect(Self.tick(&states, [96]) == ([100], [.heldDeadband]))
        #expect(Self.tick(&states, [106]) == ([106], [.followed]))
    }

    @Test func aSmallOffsetThatPersistsIsClosed() {
        // 4 % below target: inside the deadband, but it does not go away, so after 4 × persist_ticks it closes.
        var states: [DamperState?] = [DamperState(published: 96, smoothed: 96)]
        for _ in 0..<11 { #expect(Self.tick(&states, [100]).actions == [.heldDeadband]) }
        #expect(Self.tick(&states, [100]) == ([100], [.followed]))
    }

    @Test func reversalsWaitForPersistTicks() {
        var states: [DamperState?] = [DamperState(published: 100, smoothed: 100)]
        Self.tick(&states, [120])  // up: direction +1
        #expect(states[0]!.published == 120)
        #expect(Self.tick(&states, [90]).actions == [.heldPersistence])
        #expect(Self.tick(&states, [90]).actions == [.heldPersistence])
        #expect(Self.tick(&states, [90]) == ([90], [.followed]))
        // A blip back up is held again, and dropped when the target returns.
        #expect(Self.tick(&states, [110]).actions == [.heldPersistence])
        #expect(Self.tick(&states, [90]).actions == [.heldDeadband])
        #expect(states[0]!.pendingTicks == 0)
    }

    @Test func smoothingFollowsTheEWMA() {
        var settings = Self.settings
        settings.alpha = 0.5
        settings.maxUp = 10
        var states: [DamperState?] = [DamperState(published: 100, smoothed: 100)]
        #expect(Self.tick(&states, [200], settings: settings).values == [150])
        #expect(Self.tick(&states, [200], settings: settings).values == [175])
    }

    /// A tenant blocked by its own bucket (`pressing`) rises at once toward its target: no EWMA lag, no
    /// persistence wait after a fall — only the step limit. Its falls are damped as before.
    @Test func aPressingTenantsRiseSkipsSmoothingAndPersistence() {
        var settings = Self.settings
        settings.alpha = 0.3
        func run(pressing: Bool) -> (values: [Double], actions: [DampingAction], smoothed: Double) {
            var states: [DamperState?] = [DamperState(published: 100, smoothed: 100, direction: -1)]
            var values: [Double] = []
            var actions: [DampingAction] = []
            for _ in 0..<3 {
                actions += Dampening.apply(
                    [Dampening.Input(target: 200, pressing: pressing)], states: &states, capacity: 1000,
                    settings: settings)
                values.append(states[0]!.published)
            }
            return (values, actions, states[0]!.smoothed)
        }
        let pressed = run(pressing: true)
        #expect(pressed.values == [125, 156.25, 195.3125])  // +25 % a tick
        #expect(pressed.actions == [.limited, .limited, .limited])
        #expect(pressed.smoothed == 200)
        // Unpressed, the same rise against the last move waits persist_ticks (3), and the smoothed target
        // (alpha 0.3) has reached only 100 + 100 × (1 − 0.7³) by then.
        let damped = run(pressing: false)
        #expect(damped.values == [100, 100, 125])
        #expect(damped.actions == [.heldPersistence, .heldPersistence, .limited])
        #expect(abs(damped.smoothed - (100 + 100 * (1 - 0.343))) < 1e-9)
        // A fall of a pressing tenant is smoothed like any other.
        var states: [DamperState?] = [DamperState(published: 100, smoothed: 100, direction: -1)]
        _ = Dampening.apply(
            [Dampening.Input(target: 50, pressing: true)], states: &states, capacity: 1000, settings: settings)
        #expect(abs(states[0]!.published - 85) < 1e-9)  // 100 + 0.3 × (50 − 100)
    }

    /// A pressing tenant below its weighted fair share takes it in one tick, past max_up; beyond the fair
    /// share (and for a tenant not pressing) the step limit holds.
    @Test func aPressingTenantJumpsToItsFairSharePastTheStepLimit() {
        func step(_ target: Double, pressing: Bool, fairShare: Double) -> (Double, DampingAction) {
            var states: [DamperState?] = [DamperState(published: 40, smoothed: 40)]
            let actions = Dampening.apply(
                [Dampening.Input(target: target, pressing: pressing, fairShare: fairShare)], states: &states,
                capacity: 1000, settings: Self.settings)
            return (states[0]!.published, actions[0])
        }
        // Target 300, fair share 250: 40 → 250 at once (max_up alone allows 50).
        #expect(step(300, pressing: true, fairShare: 250) == (250, .limited))
        // Target below the fair share: followed in full.
        #expect(step(200, pressing: true, fairShare: 250) == (200, .followed))
        // A fair share below the step limit changes nothing: 40 + max(25 %, min_step 10) = 50.
        #expect(step(300, pressing: true, fairShare: 45) == (50, .limited))
        // Not pressing: the fair share is ignored.
        #expect(step(300, pressing: false, fairShare: 250) == (50, .limited))
    }

    @Test func aCapacityDropIsAppliedAtOnce() {
        var states: [DamperState?] = [
            DamperState(published: 500, smoothed: 500), DamperState(published: 300, smoothed: 300),
            DamperState(published: 200, smoothed: 200),
        ]
        // Capacity falls from 1000 to 400; targets 200, 120, 80.
        let (values, actions) = Self.tick(&states, [200, 120, 80], capacity: 400)
        #expect(values.reduce(0, +) <= 400)
        // max_down would allow 250/150/100 (= 500); the excess 100 comes from each in proportion to its
        // distance above target (50, 30, 20).
        #expect(values == [200, 120, 80])
        #expect(actions == [.cut, .cut, .cut])
    }

    @Test func risesWaitForRoomWhileOthersComeDown() {
        var states: [DamperState?] = [
            DamperState(published: 800, smoothed: 800), DamperState(published: 200, smoothed: 200),
        ]
        // Demand shifted: targets 400 / 600. Tenant 0 may fall 50 % (to 400), tenant 1 may rise 25 % (to 250).
        let first = Self.tick(&states, [400, 600])
        #expect(first.values == [400, 250])
        var settings = Self.settings
        settings.maxDown = 0.1
        var slow: [DamperState?] = [
            DamperState(published: 800, smoothed: 800), DamperState(published: 200, smoothed: 200),
        ]
        // Tenant 0 only frees 80 this tick: tenant 1's rise of 50 fits; a rise of 100 would not.
        #expect(Self.tick(&slow, [400, 600], settings: settings).values == [720, 250])
        settings.maxUp = 1
        slow = [DamperState(published: 800, smoothed: 800), DamperState(published: 200, smoothed: 200)]
        let waited = Self.tick(&slow, [400, 600], settings: settings)
        #expect(waited.values == [720, 280])
        #expect(waited.actions == [.limited, .waitedForRoom])
    }

    @Test func aTenantHeldByItsDeadbandGivesWayToAnotherTenantsRise() {
        var states: [DamperState?] = [
            DamperState(published: 500, smoothed: 500), DamperState(published: 470, smoothed: 470),
        ]
        // Tenant 0's target moved 4 % (inside its deadband); tenant 1's rose 6.4 %, past its own. Without giving
        // way tenant 1 would wait for room tenant 0 holds only against noise.
        let (values, actions) = Self.tick(&states, [480, 500], capacity: 980)
        #expect(values == [480, 500])
        #expect(actions == [.gaveWay, .followed])
        // With room to spare nobody gives way: the deadband holds.
        states = [DamperState(published: 500, smoothed: 500), DamperState(published: 470, smoothed: 470)]
        #expect(Self.tick(&states, [480, 500], capacity: 1000) == ([500, 500], [.heldDeadband, .followed]))
        // Held at 800 by persistence (a reversal not yet confirmed) with a target of 100, tenant 0 gives way as
        // far as tenant 1's rise needs (50), and never past its own step limit (max_down 10 %: 80).
        var settings = Self.settings
        settings.maxDown = 0.1
        states = [DamperState(published: 800, smoothed: 800, direction: 1), DamperState(published: 200, smoothed: 200)]
        let held = Self.tick(&states, [100, 900], capacity: 1000, settings: settings)
        #expect(held.values == [750, 250])
        #expect(held.actions == [.gaveWay, .limited])
        settings.maxUp = 1
        states = [DamperState(published: 800, smoothed: 800, direction: 1), DamperState(published: 200, smoothed: 200)]
        let limited = Self.tick(&states, [100, 900], capacity: 1000, settings: settings)
        #expect(limited.values == [720, 280])
        #expect(limited.actions == [.gaveWay, .waitedForRoom])
    }

    @Test func enteringTenantsTakeRoomFromThoseAboveTarget() {
        var settings = Self.settings
        settings.maxDown = 0.1
        var states: [DamperState?] = [DamperState(published: 1000, smoothed: 1000), nil]
        // max_down alone would only bring tenant 0 to 900; the newcomer's 400 cuts it to its target.
        let (values, actions) = Self.tick(&states, [600, 400], settings: settings)
        #expect(values == [600, 400])
        #expect(actions == [.cut, .entered])
    }

    // MARK: Surplus hold (step 0)

    /// One tick where each tenant has a need (its allocation before the surplus) besides its target.
    static func tick(
        _ states: inout [DamperState?], targets: [Double], needs: [Double?], capacity: Double = 1000,
        pressing: [Bool]? = nil, surplusCaps: [Double]? = nil
    ) -> (values: [Double], actions: [DampingAction]) {
        let inputs = targets.indices.map { i in
            Dampening.Input(
                target: targets[i], pressing: pressing?[i] ?? false, need: needs[i],
                surplusCap: surplusCaps?[i] ?? .infinity)
        }
        let actions = Dampening.apply(inputs, states: &states, capacity: capacity, settings: settings)
        return (states.map { $0!.published }, actions)
    }

    @Test func aTenantWhoseValueCoversItsNeedHoldsItWhileOnlyTheSurplusMoves() {
        // Needs 200 and 300 on a pool of 1,000: the surplus 500 was split 400/100 and is now re-split 250/250
        // (another tenant's demand estimate wobbled). Both still have what they need: nothing moves.
        var states: [DamperState?] = [
            DamperState(published: 600, smoothed: 600), DamperState(published: 400, smoothed: 400),
        ]
        let held = Self.tick(&states, targets: [450, 550], needs: [200, 300])
        #expect(held.values == [600, 400])
        #expect(held.actions == [.heldSurplus, .heldSurplus])
        // The smoothed targets still follow (alpha 1 here), so the moment the hold ends dampening starts from them.
        #expect(states.map { $0!.smoothed } == [450, 550])
        // Without needs (no hold) the same tick re-splits the surplus.
        var unheld: [DamperState?] = [
            DamperState(published: 600, smoothed: 600), DamperState(published: 400, smoothed: 400),
        ]
        #expect(Self.tick(&unheld, targets: [450, 550], needs: [nil, nil]).values == [450, 500])
        // A value above the tenant's surplus cap (its ceiling or guard_max) is not held.
        var capped: [DamperState?] = [DamperState(published: 600, smoothed: 600)]
        #expect(Self.tick(&capped, targets: [450], needs: [200], surplusCaps: [500]) == ([450], [.followed]))
        // Nor is a pressing tenant's rise: it wants more than it has.
        var pressing: [DamperState?] = [DamperState(published: 400, smoothed: 400)]
        #expect(Self.tick(&pressing, targets: [480], needs: [300], pressing: [true]) == ([480], [.followed]))
    }

    @Test func aHeldSurplusGivesWayToAnotherTenantsNeedAtOnce() {
        // Tenant 1 now needs 550, more than its 400: it rises (by max_up, to 500). Tenant 0 holds 600 of which it
        // needs 200; it gives way as far as the rise needs (100), at once.
        var states: [DamperState?] = [
            DamperState(published: 600, smoothed: 600), DamperState(published: 400, smoothed: 400),
        ]
        let (values, actions) = Self.tick(&states, targets: [450, 550], needs: [200, 550])
        #expect(values == [500, 500])
        #expect(actions == [.gaveWay, .limited])
        // A capacity drop cuts a held tenant to its target like any other.
        states = [DamperState(published: 600, smoothed: 600), DamperState(published: 400, smoothed: 400)]
        let dropped = Self.tick(&states, targets: [300, 300], needs: [200, 300], capacity: 600)
        #expect(dropped.values == [300, 300])
        #expect(dropped.actions == [.cut, .cut])
    }

    @Test func whatTheHoldsLeaveUnallocatedGoesToTheHeldTenants() {
        // Tenant 2 went idle (no hold: its target is its idle allocation, 20) and falls by max_down to 150.
        // Tenants 0 and 1 hold 400 and 300 against needs of 100, while their targets rose to 490: the 150 it
        // freed goes to them in proportion to how far below their dampened values (490; 375 by max_up) they are.
        var states: [DamperState?] = [
            DamperState(published: 400, smoothed: 400), DamperState(published: 300, smoothed: 300),
            DamperState(published: 300, smoothed: 300),
        ]
        let (values, actions) = Self.tick(&states, targets: [490, 490, 20], needs: [100, 100, nil])
        #expect(abs(values[0] - (400 + 90.0 * 150 / 165)) < 1e-9)
        #expect(abs(values[1] - (300 + 75.0 * 150 / 165)) < 1e-9)
        #expect(values[2] == 150)
        #expect(abs(values.reduce(0, +) - 1000) < 1e-9)
        #expect(actions == [.heldSurplus, .heldSurplus, .limited])
        // Next tick tenant 2 falls to 75. Tenant 0 is within its deadband of 490 and stays; tenant 1 (dampened value
        // 460.2 by max_up) takes the 75 freed, which is less than it is short.
        let first1 = 300 + 75.0 * 150 / 165
        let next = Self.tick(&states, targets: [490, 490, 20], needs: [100, 100, nil])
        #expect(next.values[2] == 75)
        #expect(next.values[0] == values[0])
        #expect(abs(next.values[1] - (first1 + 75)) < 1e-9)
        #expect(next.actions == [.heldDeadband, .heldSurplus, .limited])
        #expect(abs(next.values.reduce(0, +) - 1000) < 1e-9)
        // Where the freed room covers the difference, a held tenant takes its dampened value as if never held.
        states = [DamperState(published: 400, smoothed: 400), DamperState(published: 100, smoothed: 100)]
        let released = Self.tick(&states, targets: [450, 450], needs: [100, nil])
        #expect(released.values == [450, 125])
        #expect(released.actions == [.followed, .limited])
    }

    @Test func hardCapsApplyAtOnce() {
        var states: [DamperState?] = [DamperState(published: 500, smoothed: 500)]
        let actions = Dampening.apply(
            [Dampening.Input(target: 50, hardCap: 50)], states: &states, capacity: 1000, settings: Self.settings)
        #expect(states[0]!.published == 50)
        #expect(actions == [.cut])
    }

    // MARK: Properties

    @Test func noOscillationOnANoisyConstantTarget() {
        let settings = DampeningSettings()  // the policy defaults
        var random = SeededRandom(seed: 0xDA4F)
        let truth = [300.0, 200, 100]
        var states: [DamperState?] = [nil, nil, nil]
        var previous: [Double] = []
        var previousTargets: [Double] = []
        var moves = [0, 0, 0]
        var reversals = [0, 0, 0]
        var lastDirection = [0, 0, 0]
        var publishedVariation = [0.0, 0.0, 0.0]
        var targetVariation = [0.0, 0.0, 0.0]
        for _ in 0..<2000 {
            // Three tenants whose true targets are 300, 200 and 100 of 1000, observed with ±10 % noise.
            let targets = truth.map { $0 * (1 + random.uniform(-0.1...0.1)) }
            let (values, _) = Self.tick(&states, targets, settings: settings)
            #expect(values.reduce(0, +) <= 1000)
            for i in 0..<3 {
                #expect(abs(values[i] / truth[i] - 1) < 0.12)
                guard !previous.isEmpty else { continue }
                targetVariation[i] += abs(targets[i] - previousTargets[i])
                guard values[i] != previous[i] else { continue }
                moves[i] += 1
                publishedVariation[i] += abs(values[i] - previous[i])
                let direction = values[i] > previous[i] ? 1 : -1
                if lastDirection[i] != 0, direction != lastDirection[i] { reversals[i] += 1 }
                lastDirection[i] = direction
            }
            previous = values
            previousTargets = targets
        }
        // Undamped, the published values would move on all 2000 ticks and reverse on about 1000.
        for i in 0..<3 {
            #expect(moves[i] < 100, "tenant \(i) moved \(moves[i]) times")
            #expect(reversals[i] < 80, "tenant \(i) reversed \(reversals[i]) times")
            #expect(
                publishedVariation[i] < 0.03 * targetVariation[i],
                "tenant \(i): total variation \(publishedVariation[i]) against \(targetVariation[i]) undamped")
        }
    }

    static let randomSettings = DampeningSettings(
        alpha: 0.6, deadband: 0.05, persistTicks: 2, maxUp: 0.25, maxDown: 0.5, minStep: .percent(1))

    /// 200 random pools of 1–8 tenants, 60 ticks each: every tick the capacity drops (10 %) or rises (18 %) at
    /// random and the targets are a random split of at most the capacity; `body` runs the tick and checks it.
    static func randomTicks(
        seed: UInt64,
        _ body: (
            _ random: inout SeededRandom, _ states: inout [DamperState?], _ targets: [Double], _ capacity: Double,
            _ before: [Double?]
        ) -> Void
    ) {
        var random = SeededRandom(seed: seed)
        for _ in 0..<200 {
            let count = Int.random(in: 1...8, using: &random)
            var states = [DamperState?](repeating: nil, count: count)
            var capacity = random.uniform(100...1000)
            for _ in 0..<60 {
                let before = states.map { $0?.published }
                if random.chance(0.1) {
                    capacity *= random.uniform(0.3...0.9)
                } else if random.chance(0.2) {
                    capacity *= random.uniform(1...1.5)
                }
                let shares = (0..<count).map { _ in random.uniform(0...1) }
                let total = shares.reduce(0, +) + random.uniform(0...1)
                let targets = shares.map { capacity * $0 / max(total, 1e-9) }
                body(&random, &states, targets, capacity, before)
            }
        }
    }

    @Test func randomSequencesRespectStepLimitsAndCapacity() {
        Self.randomTicks(seed: 0xDA50) { _, states, targets, capacity, before in
            let (values, actions) = Self.tick(&states, targets, capacity: capacity, settings: Self.randomSettings)
            #expect(values.reduce(0, +) <= capacity)
            let minStep = capacity / 100
            for i in targets.indices {
                guard let old = before[i] else { continue }
                if values[i] > old {
                    #expect(values[i] - old <= max(0.25 * old, minStep) * (1 + 1e-9))
                } else if actions[i] != .cut {
                    #expect(old - values[i] <= max(0.5 * old, minStep) * (1 + 1e-9))
                } else {
                    // A cut never goes below the tenant's own target.
                    #expect(values[i] >= min(old, targets[i]) * (1 - 1e-9))
                }
            }
        }
    }

    @Test func randomSequencesWithSurplusHoldsStayWithinCapacityAndAboveNeeds() {
        var held = 0
        Self.randomTicks(seed: 0x5A11) { random, states, targets, capacity, before in
            let needs: [Double?] = targets.map { random.chance(0.3) ? nil : $0 * random.uniform(0...1) }
            let inputs = targets.indices.map { i in
                Dampening.Input(target: targets[i], pressing: random.chance(0.1), need: needs[i])
            }
            let actions = Dampening.apply(inputs, states: &states, capacity: capacity, settings: Self.randomSettings)
            let values = states.map { $0!.published }
            #expect(values.reduce(0, +) <= capacity * (1 + 1e-9))
            for i in targets.indices {
                #expect(values[i].isFinite && values[i] >= 0)
                if actions[i] == .heldSurplus { held += 1 }
                // A tenant that had what it needs never loses it: holds, give-way and cuts all stop at or above
                // the need (targets here always fit the capacity).
                if let need = needs[i], let old = before[i], old >= need {
                    #expect(values[i] >= need * (1 - 1e-9), "need \(need), was \(old), now \(values[i])")
                }
            }
        }
        #expect(held > 1000, "the sequences exercise the hold (\(held) held values)")
    }
}
