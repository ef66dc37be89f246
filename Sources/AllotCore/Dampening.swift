/// The damper's memory for one tenant, upstream pool and dimension (SPEC 6.6). Persisted in
/// `EngineState` so a restart resumes smoothly.
public struct DamperState: Sendable, Hashable, Codable {
    /// The value published last tick.
    public var published: Double
    /// EWMA of the targets (what the published value follows).
    public var smoothed: Double
    /// Direction of the last move: +1 up, −1 down, 0 none yet.
    public var direction: Int8
    /// A reversal waiting to be confirmed: its direction…
    public var pendingDirection: Int8
    /// …and for how many consecutive ticks the target has stayed on that side.
    public var pendingTicks: Int
    /// A move inside the deadband that keeps the same side (not noise): its direction…
    public var driftDirection: Int8
    /// …and for how many consecutive ticks it has persisted.
    public var driftTicks: Int

    public init(
        published: Double, smoothed: Double, direction: Int8 = 0, pendingDirection: Int8 = 0, pendingTicks: Int = 0,
        driftDirection: Int8 = 0, driftTicks: Int = 0
    ) {
        self.published = published
        self.smoothed = smoothed
        self.direction = direction
        self.pendingDirection = pendingDirection
        self.pendingTicks = pendingTicks
        self.driftDirection = driftDirection
        self.driftTicks = driftTicks
    }
}

/// Dampening of one pool and dimension (SPEC 6.6): moves each tenant's published value toward its
/// target without oscillating, and never lets the published sum exceed capacity.
///
/// Per tenant:
/// 0. Surplus hold (``DampeningSettings/holdSurplus``): a tenant given a `need` (its allocation before the
///    surplus, SPEC 6.3) whose published value `P` covers it (`need ≤ P ≤ surplusCap`) keeps `P` — unless it
///    is pressing for more. The surplus is growth headroom, not anyone's demand, and re-dividing it every
///    tick as the others' demand estimates wobble moved every allocation of an uncontended pool for nothing
///    (capacity-drop: two thirds of its total variation). What the hold keeps is given back in steps 7
///    and 8 (another tenant's rise, a capacity drop), never below the tenant's need, and what it leaves
///    unallocated goes to the held tenants below the value dampening alone would publish (step 7b).
/// 1. A tenant without state, or returning from idle (`entering`), enters directly at its target:
///    no slow ramp from zero.
/// 2. Otherwise the target is smoothed, `S ← S + alpha · (T − S)` — except a rise of a tenant blocked by
///    its own bucket (`pressing`): `S ← T`, and step 4 does not hold it (the Classifier's claim already
///    filtered it, and smoothing it again made an agent surge wait a minute and more for its share).
///    Such a rise may also pass the step limit (step 5) up to the tenant's weighted fair share `f · w_i`.
/// 3. Deadband: a move `|S − P|` of at most `deadband · P` is ignored (`P` the published value) —
///    unless it stays on the same side for `4 · persist_ticks` ticks: noise flips sides, a real
///    small offset does not, and closing it keeps capacity from being stranded by the deadband.
/// 4. Persistence: a move against the last move's direction applies only once the smoothed target
///    has stayed on the new side for `persist_ticks` consecutive ticks.
/// 5. Step limit: at most `max(max_up · P, min_step)` up and `max(max_down · P, min_step)` down per
///    tick. The absolute `min_step` (default 1 % of `C`) is what lets a tenant near zero grow.
/// 6. A hard cap (the ceiling, a budget cap) applies at once, past `max_down`.
///
/// Then across the pool:
/// 7. Rises wait for room: falls and holds are applied first, entering tenants take their targets,
///    and the rises share what capacity is left (scaled down proportionally when short). When that is
///    short, tenants held above their targets (deadband, persistence) first give way toward their
///    targets (within their own step limit), in proportion to how far above they are, as far as the
///    rises need: a hold against
///    noise in one tenant's target must not keep capacity from another whose target rose.
/// 7b. Surplus the holds left unallocated (up to what the targets sum to, so a burst reserve stays
///    unallocated) goes to the held tenants whose own dampened value is above what they hold, in proportion
///    to the difference: a capacity rise or a tenant gone idle still reaches the others.
/// 8. Capacity override: if the published sum still exceeds `C` (capacity dropped, or entering
///    tenants need room), the excess is cut at once from the tenants above their new target, in
///    proportion to how far above it they are. Because the targets sum to at most `C`, that always
///    suffices, and nobody is cut below their target.
public enum Dampening {
    /// One tenant's input.
    public struct Input: Sendable, Hashable {
        /// The target `T` for this tick (what the allocator computed, after guardrails and budgets).
        public var target: Double
        /// A cap applied at once: `min(ceiling, budget cap)`; `.infinity` when none.
        public var hardCap: Double
        /// Enter directly at the target (new tenant, or back from idle).
        public var entering: Bool
        /// The tenant is blocked by its own bucket (``TenantObservation/pressing``): a rise of its target
        /// is followed at once — no smoothing, no persistence wait — within the step limit.
        public var pressing: Bool
        /// The tenant's weighted fair share `f · w_i` (within its floor and ceiling): a pressing tenant
        /// below it may rise to `min(target, fairShare)` in one tick, past the step limit. 0: none.
        public var fairShare: Double
        /// What the tenant needs of its target: its allocation before the surplus. A published value between
        /// it and `surplusCap` is held while the surplus moves (step 0). nil: no hold (an idle tenant, one in
        /// burst debt, `surplus: hold`, or `hold_surplus` off).
        public var need: Double?
        /// The most surplus the tenant may hold: `min(ceiling, guard_max, budget cap)`.
        public var surplusCap: Double

        public init(
            target: Double, hardCap: Double = .infinity, entering: Bool = false, pressing: Bool = false,
            fairShare: Double = 0, need: Double? = nil, surplusCap: Double = .infinity
        ) {
            self.target = target
            self.hardCap = hardCap
            self.entering = entering
            self.pressing = pressing
            self.fairShare = fairShare
            self.need = need
            self.surplusCap = surplusCap
        }
    }

    /// Moves `states` (parallel to `inputs`; nil = no state yet) one tick toward the targets within
    /// `capacity`, and returns what was done to each.
    public static func apply(
        _ inputs: [Input], states: inout [DamperState?], capacity: Double, settings: DampeningSettings
    ) -> [DampingAction] {
        precondition(inputs.count == states.count, "one state per input")
        let count = inputs.count
        let minStep = max(0, settings.minStep.resolved(capacity: capacity))
        var actions = [DampingAction](repeating: .none, count: count)
        var previous = [Double](repeating: 0, count: count)
        var values = [Double](repeating: 0, count: count)
        var next = [DamperState](repeating: DamperState(published: 0, smoothed: 0), count: count)
        // Per tenant held by step 0: the value dampening alone would have published (never below the need), and
        // the state and action it would have had (step 7b may release the hold). nil when not held.
        var held = [(normal: Double, state: DamperState, action: DampingAction)?](repeating: nil, count: count)
        var anyHeld = false

        // Per tenant: smoothing, deadband, persistence, step limit, hard cap.
        for i in 0..<count {
            let input = inputs[i]
            let target = max(0, input.target)
            guard let state = states[i], !input.entering else {
                let value = min(target, input.hardCap)
                next[i] = DamperState(published: value, smoothed: target)
                values[i] = value
                actions[i] = .entered
                continue
            }
            previous[i] = state.published
            var updated = state
            let pressed = input.pressing && target > state.published
            updated.smoothed = pressed ? target : state.smoothed + settings.alpha * (target - state.smoothed)
            let (value, action) = step(
                from: state.published, toward: updated.smoothed, state: &updated,
                minStep: minStep, settings: settings, pressed: pressed, fairShare: pressed ? input.fairShare : 0)
            values[i] = value
            actions[i] = action
            if value > input.hardCap {
                values[i] = max(0, input.hardCap)
                actions[i] = .cut
                updated.direction = -1
                updated.smoothed = min(updated.smoothed, target)
            }
            let published = state.published
            if let need = input.need, values[i] != published, actions[i] != .cut, published >= need,
                published <= min(input.surplusCap, input.hardCap), !(input.pressing && values[i] > published)
            {
                // Step 0: the surplus is held. The smoothed target keeps following; the move is not made. What the
                // tenant gives back later never goes below its need, however far behind its smoothed target is.
                held[i] = (max(values[i], need), updated, actions[i])
                values[i] = published
                actions[i] = .heldSurplus
                anyHeld = true
                let smoothed = updated.smoothed
                updated = state
                updated.smoothed = smoothed
                updated.pendingDirection = 0
                updated.pendingTicks = 0
                updated.driftDirection = 0
                updated.driftTicks = 0
            }
            next[i] = updated
        }

        // Rises wait for room.
        var committed = 0.0
        var rising = 0.0
        for i in 0..<count {
            if actions[i] == .entered || values[i] <= previous[i] {
                committed += values[i]
            } else {
                committed += previous[i]
                rising += values[i] - previous[i]
            }
        }
        var room = max(0, capacity - committed)
        if anyHeld, rising > room {
            // Surplus holds give way first, down to what dampening alone would publish (never below their need):
            // they hold only surplus.
            func excess(_ i: Int) -> Double { held[i].map { max(0, values[i] - $0.normal) } ?? 0 }
            var above = 0.0
            for i in 0..<count { above += excess(i) }
            let freed = min(rising - room, above)
            if freed > 0 {
                let share = freed / above
                for i in 0..<count where excess(i) > 0 {
                    values[i] -= excess(i) * share
                    actions[i] = .gaveWay
                }
                room += freed
            }
        }
        if rising > room {
            // Those held above their target (by the deadband, persistence or the step limit) give way first,
            // down to their targets, as far as the rises need: their hold is against noise in their own
            // targets, and it must not keep capacity from a tenant whose target rose.
            // Never past the step limit: a fall is still at most `max_down` (or `min_step`) per tick.
            func floor(_ i: Int) -> Double {
                max(max(0, inputs[i].target), previous[i] - max(settings.maxDown * previous[i], minStep))
            }
            var above = 0.0
            for i in 0..<count where actions[i] != .entered && values[i] <= previous[i] {
                above += max(0, values[i] - floor(i))
            }
            let freed = min(rising - room, above)
            if freed > 0 {
                let share = freed / above
                for i in 0..<count where actions[i] != .entered && values[i] <= previous[i] {
                    let excess = values[i] - floor(i)
                    guard excess > 0 else { continue }
                    values[i] -= excess * share
                    actions[i] = .gaveWay
                    next[i].direction = -1
                    next[i].pendingDirection = 0
                    next[i].pendingTicks = 0
                    next[i].driftDirection = 0
                    next[i].driftTicks = 0
                }
                room += freed
            }
        }
        if rising > room {
            let share = rising > 0 ? room / rising : 0
            for i in 0..<count where actions[i] != .entered && values[i] > previous[i] {
                values[i] = previous[i] + (values[i] - previous[i]) * share
                actions[i] = .waitedForRoom
            }
        }

        // Step 7b: what the holds left unallocated goes to the held tenants below their dampened value.
        if anyHeld {
            func shortfall(_ i: Int) -> Double { held[i].map { max(0, $0.normal - values[i]) } ?? 0 }
            var total = 0.0
            var targets = 0.0
            var below = 0.0
            for i in 0..<count {
                total += values[i]
                targets += max(0, inputs[i].target)
                below += shortfall(i)
            }
            let leftover = min(capacity - total, targets - total, below)
            if leftover > 0, below > 0 {
                let share = leftover / below
                for i in 0..<count {
                    guard let hold = held[i], hold.normal > values[i] else { continue }
                    if share >= 1 {
                        values[i] = hold.normal
                        next[i] = hold.state
                        actions[i] = hold.action
                    } else {
                        values[i] += (hold.normal - values[i]) * share
                    }
                }
            }
        }

        // Capacity override: cut the excess at once from those above their target.
        var total = 0.0
        for value in values { total += value }
        if total > capacity {
            var above = 0.0
            for i in 0..<count { above += max(0, values[i] - inputs[i].target) }
            let excess = total - capacity
            if above > 0 {
                let share = min(1, excess / above)
                for i in 0..<count where values[i] > inputs[i].target {
                    values[i] -= (values[i] - max(0, inputs[i].target)) * share
                    actions[i] = .cut
                    next[i].direction = -1
                    next[i].pendingDirection = 0
                    next[i].pendingTicks = 0
                    next[i].smoothed = min(next[i].smoothed, max(0, inputs[i].target))
                }
            }
            var remaining = 0.0
            for value in values { remaining += value }
            if remaining > capacity, remaining > 0 {
                // Only reachable when the targets themselves exceed capacity (a caller error, or
                // rounding): scale everyone rather than break the invariant.
                let scale = capacity / remaining
                for i in 0..<count { values[i] *= scale }
            }
            WaterFilling.trim(&values, limit: capacity)
        }

        for i in 0..<count {
            next[i].published = values[i]
            states[i] = next[i]
        }
        return actions
    }

    /// Steps 3–5 for one tenant: the value to publish and what was done, updating the direction
    /// and persistence memory in `state`.
    static func step(
        from published: Double, toward smoothed: Double, state: inout DamperState, minStep: Double,
        settings: DampeningSettings, pressed: Bool = false, fairShare: Double = 0
    ) -> (Double, DampingAction) {
        let delta = smoothed - published
        if delta == 0 {
            state.pendingDirection = 0
            state.pendingTicks = 0
            state.driftDirection = 0
            state.driftTicks = 0
            return (published, .heldDeadband)
        }
        let direction: Int8 = delta > 0 ? 1 : -1
        if abs(delta) <= settings.deadband * published {
            state.pendingDirection = 0
            state.pendingTicks = 0
            if state.driftDirection == direction {
                state.driftTicks += 1
            } else {
                state.driftDirection = direction
                state.driftTicks = 1
            }
            guard state.driftTicks >= 4 * settings.persistTicks else { return (published, .heldDeadband) }
            state.direction = direction
            state.driftDirection = 0
            state.driftTicks = 0
            return (smoothed, .followed)
        }
        state.driftDirection = 0
        state.driftTicks = 0
        if state.direction != 0, direction != state.direction, !pressed {
            if state.pendingDirection == direction {
                state.pendingTicks += 1
            } else {
                state.pendingDirection = direction
                state.pendingTicks = 1
            }
            if state.pendingTicks < settings.persistTicks {
                return (published, .heldPersistence)
            }
        }
        state.direction = direction
        state.pendingDirection = 0
        state.pendingTicks = 0
        let fraction = direction > 0 ? settings.maxUp : settings.maxDown
        // A pressing tenant below its fair share takes it in one step: max_up guards against
        // oscillation, and a rise no further than one's own weighted share backed by denied attempts is
        // not one (ramping ×1.25 per tick from a small allocation took a 15× surge nearly a minute).
        let jump = direction > 0 ? min(smoothed, fairShare) - published : 0
        let limit = max(fraction * published, minStep, jump)
        if abs(delta) <= limit { return (smoothed, .followed) }
        return (published + Double(direction) * limit, .limited)
    }
}
