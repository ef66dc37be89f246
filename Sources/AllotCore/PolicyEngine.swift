/// The Priority/Policy Engine (SPEC 6): one pure function the loop calls every tick.
///
/// `decide` turns the tick's inputs and the engine's memory into a `Decision`, in this order:
/// 1. proposals: apply SREs' approvals and rejections, expire what is due;
/// 2. budgets: evaluate every tenant's spend budgets (soft alerts, throttle caps, hard cuts);
/// 3. per pool (sorted by id), per tenant (sorted by id):
///    - settle the burst ledger for the traffic served since the last tick;
///    - resolve the tenant's terms (tier, weight, floor, ceiling, after overrides), guardrails
///      (suspended by approved proposals and approved overrides) and budget caps, as absolute
///      values against `C`;
///    - allocate each dimension (`PoolAllocation`: idle, water-filling, guardrails, surplus,
///      degraded mode) and file proposals for guardrail clamps;
///    - fund active burst credits from the pool's burst reserve and lend new ones;
///    - dampen toward the targets within `C` minus the credits (`Dampening`);
///    - record reasons and explanations;
/// 4. forget tenants not reported for `loop.forget_after_s`.
///
/// Nothing here reads a clock, does I/O or depends on dictionary order: equal inputs and state
/// give equal decisions and states.
public enum PolicyEngine {
    /// Computes one tick's decision and advances `state`.
    public static func decide(_ input: DecisionInput, state: inout EngineState) -> Decision {
        let now = input.now
        let policy = input.policy
        var alerts: [EngineAlert] = []

        // 1. Proposals.
        let resolutions = state.proposals.resolve(input.resolutions, now: now, settings: policy.proposals)
            .map { ResolutionOutcome(resolution: $0.resolution, applied: $0.applied) }
        let expired = state.proposals.expire(now: now)
        let minutes = state.lastTick.map { min(max(0, now - $0), 4 * policy.loop.intervalSeconds) / 60 } ?? 0

        // Index the inputs once. Observations are referred to by position (they are large): per pool,
        // sorted by tenant, the first of duplicates kept.
        let observations = input.tenants
        var unsorted: [String: [Int]] = [:]
        for index in observations.indices { unsorted[observations[index].upstream, default: []].append(index) }
        let membersByPool = unsorted.mapValues { members in
            var previous: String?
            return members.sorted { a, b in
                let (x, y) = (observations[a].tenant, observations[b].tenant)
                return x != y ? x < y : a < b
            }.filter { index in
                defer { previous = observations[index].tenant }
                return observations[index].tenant != previous
            }
        }
        var poolObservations: [String: PoolObservation] = [:]
        for pool in input.pools where poolObservations[pool.upstream] == nil { poolObservations[pool.upstream] = pool }
        let poolIDs = Set(membersByPool.keys).union(poolObservations.keys).sorted()
        var overridesByTenant: [String: [Override]] = [:]
        for override in input.overrides where override.isActive(at: now) {
            overridesByTenant[override.tenant, default: []].append(override)
        }
        var requestsByPool: [String: [BurstRequest]] = [:]
        for request in input.burstRequests { requestsByPool[request.upstream, default: []].append(request) }
        let ranks = policy.tierRanks
        let approvals = state.proposals.approvals

        // 2. Budgets, per tenant across pools.
        let budgets = evaluateBudgets(
            input: input, membersByPool: membersByPool,
            overridesByTenant: overridesByTenant, alerts: &alerts)

        // 3. Pools.
        var allocations: [TenantAllocation] = []
        allocations.reserveCapacity(membersByPool.values.reduce(0) { $0 + $1.count })
        var summaries: [PoolSummary] = []
        var burstDecisions: [BurstDecision] = []
        var detectedBursts: [BurstRequest] = []
        for upstream in poolIDs {
            var pool = PoolTick(
                upstream: upstream, observation: poolObservations[upstream], observations: observations,
                members: membersByPool[upstream] ?? [], now: now,
                minutes: minutes, policy: policy, ranks: ranks, overridesByTenant: overridesByTenant,
                budgets: budgets, approvals: approvals)
            pool.run(state: &state, requests: requestsByPool[upstream] ?? [], into: &allocations)
            summaries.append(pool.summary)
            burstDecisions += pool.burstDecisions
            detectedBursts += pool.detectedBursts
            alerts += pool.alerts
        }
        for (upstream, requests) in requestsByPool where !poolIDs.contains(upstream) {
            burstDecisions += requests.map {
                BurstDecision(requestID: $0.id, tenant: $0.tenant, upstream: upstream, outcome: .unknown, credit: nil)
            }
        }

        // 4. Forget tenants not reported for a while.
        let horizon = now - policy.loop.forgetAfterSeconds
        if state.tenants.values.contains(where: { $0.lastSeen < horizon }) {
            state.tenants = state.tenants.filter { $0.value.lastSeen >= horizon }
        }
        state.lastTick = now

        return Decision(
            now: now, allocations: allocations, pools: summaries, proposals: state.proposals.all,
            expiredProposals: expired, resolutions: resolutions,
            burstDecisions: burstDecisions.sorted { ($0.upstream, $0.requestID) < ($1.upstream, $1.requestID) },
            detectedBursts: detectedBursts, budgets: budgets.statuses, alerts: alerts.sorted())
    }

    // MARK: Budgets

    /// What budgets do to tenants this tick.
    struct BudgetEffects {
        /// Every evaluated budget.
        var statuses: [BudgetStatus] = []
        /// Tenants at `hard`, and whether any of their hard budgets cuts to zero.
        var hard: [String: HardBudgetAction] = [:]
        /// Per tenant and pool, the TPM cap of a `throttle`.
        var tpmCaps: [TenantUpstream: Double] = [:]
        /// Per throttled tenant, the spend rate its throttle allows (currency per second), split into ``tpmCaps``.
        var allowed: [String: Double] = [:]
    }

    private static func evaluateBudgets(
        input: DecisionInput, membersByPool: [String: [Int]], overridesByTenant: [String: [Override]],
        alerts: inout [EngineAlert]
    ) -> BudgetEffects {
        let policy = input.policy
        var effects = BudgetEffects()
        let tiersWithBudgets = Set(policy.tiers.filter { !$0.budgets.isEmpty }.map(\.name))
        let tenantsWithBudgets = Set(policy.tenants.filter { !$0.budgets.isEmpty }.map(\.id))
        if tiersWithBudgets.isEmpty, tenantsWithBudgets.isEmpty { return effects }
        var observationsByTenant: [String: [TenantObservation]] = [:]
        for members in membersByPool.values {
            for index in members {
                let observation = input.tenants[index]
                observationsByTenant[observation.tenant, default: []].append(observation)
            }
        }
        var spendByTenant: [String: [TenantSpend]] = [:]
        for spend in input.spend { spendByTenant[spend.tenant, default: []].append(spend) }

        for tenant in observationsByTenant.keys.sorted() {
            // Budgets follow the tenant's tier; only overrides for every pool can change it here.
            let tenantWide = (overridesByTenant[tenant] ?? []).filter { $0.upstream == nil }
            let tierName =
                tenantWide.isEmpty
                ? policy.tierName(ofTenant: tenant)
                : policy.terms(ofTenant: tenant, upstream: "", overrides: tenantWide, now: input.now).tier.name
            guard tiersWithBudgets.contains(tierName) || tenantsWithBudgets.contains(tenant) else { continue }
            let budgets = policy.budgets(ofTenant: tenant, tierName: tierName)
            guard !budgets.isEmpty else { continue }
            let statuses = CostGovernance.evaluate(
                tenant: tenant, budgets: budgets, spend: spendByTenant[tenant] ?? [], now: input.now)
            effects.statuses += statuses
            var allowed: Double?
            for status in statuses {
                let amount =
                    "\(Quantity.formatMeasured(status.spent)) of \(Quantity.format(status.budget.amount)) "
                    + "\(policy.costs.currency) (\(status.budget.window.rawValue))"
                switch status.level {
                case .ok:
                    continue
                case .soft:
                    alerts.append(
                        EngineAlert(
                            kind: "budget_soft", severity: .warning, tenant: tenant,
                            message: "\(tenant) is projected to spend "
                                + "\(Quantity.formatMeasured(status.projected)); spent \(amount)"
                        )
                    )
                case .throttle:
                    allowed = min(allowed ?? .infinity, status.allowedBurnRatePerSecond ?? 0)
                    alerts.append(
                        EngineAlert(
                            kind: "budget_throttle", severity: .warning, tenant: tenant,
                            message: "\(tenant) is throttled to land on its budget; spent \(amount), "
                                + "projected \(Quantity.formatMeasured(status.projected))"))
                case .hard:
                    let action = status.budget.hardAction
                    if effects.hard[tenant] != .zero { effects.hard[tenant] = action }
                    alerts.append(
                        EngineAlert(
                            kind: "budget_hard", severity: .critical, tenant: tenant,
                            message: "\(tenant) reached its hard budget limit; spent \(amount); "
                                + "cut to \(action == .zero ? "zero" : "its starvation guard")"))
                }
            }
            // Also at `hard` in another window: its cut (the starvation guard) may be above this cap, and the
            // lower binds (outside evaluation round 20: an hour budget's hard cut lifted a day budget's throttle from
            // 201 to 4,000 TPM).
            guard let allowed else { continue }
            effects.allowed[tenant] = allowed
            let usage = (observationsByTenant[tenant] ?? []).sorted { $0.upstream < $1.upstream }.map { observation in
                CostGovernance.PoolUsage(
                    upstream: observation.upstream,
                    tokensPerMinute: observation.served.tpm > 0 ? observation.served.tpm : observation.demand.tpm,
                    pricePerToken: policy.price(ofUpstream: observation.upstream).price
                        .perToken(inputShare: observation.inputTokenShare))
            }
            for (upstream, cap) in CostGovernance.throttleCaps(allowedRate: allowed, usage: usage) {
                effects.tpmCaps[TenantUpstream(tenant: tenant, upstream: upstream)] = cap
            }
        }
        return effects
    }
}

/// One pool's share of a tick: the per-pool steps of `PolicyEngine.decide`.
private struct PoolTick {
    let upstream: String
    let observation: PoolObservation?
    /// The tick's observations (all pools) and the positions of this pool's tenants, by tenant id.
    let observations: [TenantObservation]
    let members: [Int]
    let now: Double
    let minutes: Double
    let policy: Policy
    let ranks: [String: Int]
    let overridesByTenant: [String: [Override]]
    let budgets: PolicyEngine.BudgetEffects
    let approvals: Set<ProposalBook.Approval>

    var burstDecisions: [BurstDecision] = []
    /// The burst credits lent unasked this tick (``lendDetected(reserve:used:capacity:records:)``), as requests.
    var detectedBursts: [BurstRequest] = []
    var alerts: [EngineAlert] = []
    var summary: PoolSummary

    init(
        upstream: String, observation: PoolObservation?, observations: [TenantObservation], members: [Int],
        now: Double, minutes: Double, policy: Policy, ranks: [String: Int], overridesByTenant: [String: [Override]],
        budgets: PolicyEngine.BudgetEffects, approvals: Set<ProposalBook.Approval>
    ) {
        self.upstream = upstream
        self.observation = observation
        self.observations = observations
        self.members = members
        self.now = now
        self.minutes = minutes
        self.policy = policy
        self.ranks = ranks
        self.overridesByTenant = overridesByTenant
        self.budgets = budgets
        self.approvals = approvals
        summary = PoolSummary(
            upstream: upstream, state: observation?.state ?? .healthy, capacityEstimate: PerDimension(nil),
            capacity: PerDimension(nil), allocated: PerDimension(0), creditsLent: PerDimension(0),
            unallocated: PerDimension(0), burstReserve: PerDimension(0), degraded: PerDimension(false),
            level: PerDimension(nil), defaultAllocation: PerDimension(0), tenantCount: members.count,
            priced: policy.upstream(upstream)?.price != nil)
    }

    /// Runs the pool's steps, appending its allocations to `results`.
    mutating func run(state: inout EngineState, requests: [BurstRequest], into results: inout [TenantAllocation]) {
        let count = members.count
        let declared = policy.upstream(upstream)?.capacity
        let estimate = PerDimension<Double?> { dimension in
            guard let value = observation?.capacity[dimension] ?? declared?[dimension] ?? nil, value.isFinite else {
                return nil
            }
            return max(0, value)
        }
        let capacity = estimate.map { $0.map { max(0, $0 * (1 - policy.allocation.safetyMargin)) } }
        summary.capacityEstimate = estimate
        summary.capacity = capacity

        // Terms and burst accounting for each tenant. Terms are shared: most tenants have neither a
        // policy entry nor an override and get the default tier's (index 0).
        var distinctTerms = [policy.terms(ofTenant: "", upstream: upstream, overrides: [], now: now)]
        var termsIndex: [Int] = []
        var records: [TenantRecord] = []
        var stored: [Dictionary<TenantUpstream, TenantRecord>.Index?] = []
        termsIndex.reserveCapacity(count)
        records.reserveCapacity(count)
        stored.reserveCapacity(count)
        for member in members {
            let observation = observations[member]
            let overrides = overridesByTenant[observation.tenant] ?? []
            var slot = 0
            if !overrides.isEmpty || policy.tenant(observation.tenant) != nil {
                distinctTerms.append(
                    policy.terms(
                        ofTenant: observation.tenant, upstream: upstream,
                        overrides: overrides, now: now))
                slot = distinctTerms.count - 1
            }
            let tier = distinctTerms[slot].tier
            let position = state.tenants.index(forKey: TenantUpstream(tenant: observation.tenant, upstream: upstream))
            var record = position.map { state.tenants.values[$0] } ?? TenantRecord(lastSeen: now)
            let defaultsBefore = record.burst.defaulted
            record.burst.account(
                allocation: record.published, served: observation.served.map { $0.isFinite ? $0 : 0 },
                minutes: minutes, now: now, policy: tier.burst)
            if record.burst.defaulted > defaultsBefore {
                alerts.append(
                    EngineAlert(
                        kind: "burst_default", severity: .warning, upstream: upstream, tenant: observation.tenant,
                        message: "\(observation.tenant) did not repay its burst debt on \(upstream) in time"))
            }
            termsIndex.append(slot)
            records.append(record)
            stored.append(position)
        }
        let grouped = countGroupMembers(terms: &distinctTerms, index: termsIndex)

        // Allocation per dimension.
        var claims = PerDimension<[AllocationClaim]>([])
        var pools = PerDimension<PoolAllocation?>(nil)
        for dimension in RateDimension.allCases {
            guard let limit = capacity[dimension], let estimated = estimate[dimension] else {
                if count > 0 {
                    alerts.append(
                        EngineAlert(
                            kind: "no_capacity", severity: .warning, upstream: upstream, dimension: dimension,
                            message:
                                "\(upstream) has no capacity estimate or declared capacity for \(dimension.rawValue); "
                                + "it is not allocated"))
                }
                continue
            }
            claims[dimension] = (0..<count).map {
                claim(
                    index: $0, dimension: dimension, capacity: limit,
                    terms: distinctTerms[termsIndex[$0]], record: records[$0])
            }
            let allocation = PolicyEngine.allocate(
                &claims[dimension], groups: grouped ? (0..<count).map { distinctTerms[termsIndex[$0]].group } : nil,
                capacityEstimate: estimated, settings: policy.allocation)
            pools[dimension] = allocation
            summary.degraded[dimension] = allocation.degraded
            summary.level[dimension] = allocation.level
            summary.burstReserve[dimension] = allocation.burstReserve
            summary.defaultAllocation[dimension] =
                (policy.tier(named: policy.defaultTier)?.starvationGuard[dimension]
                ?? .zero).resolved(capacity: limit)
            if allocation.degraded {
                alerts.append(
                    EngineAlert(
                        kind: "degraded_mode", severity: .critical, upstream: upstream, dimension: dimension,
                        message: "\(upstream) \(dimension.rawValue): floors exceed capacity "
                            + "(\(Quantity.formatMeasured(limit))); starvation guards and floors by tier priority"))
            }
            // Guardrail clamps become proposals.
            for index in 0..<count where allocation.guardClamped[index] {
                let claim = claims[dimension][index]
                let raw = allocation.unclamped[index]
                let raise = raw > allocation.allocations[index]
                var evidence = allocation.explanation(of: index, claim: claim)
                evidence.noteGroup(of: distinctTerms[termsIndex[index]])
                state.proposals.file(
                    kind: raise ? .raiseAboveGuardMax : .lowerBelowGuardMin,
                    tenant: observations[members[index]].tenant,
                    upstream: upstream, dimension: dimension, value: raw,
                    guardrail: raise ? claim.guardMax : claim.guardMin,
                    evidence: evidence, now: now, settings: policy.proposals)
            }
        }

        // Burst credits from the reserve.
        let credits = lendCredits(requests: requests, pools: pools, capacity: capacity, records: &records)

        // Dampening toward the targets, within C minus the credits.
        var actions = PerDimension<[DampingAction]>([])
        var previous = PerDimension<[Double?]>([])
        for dimension in RateDimension.allCases {
            guard let allocation = pools[dimension], let limit = capacity[dimension] else { continue }
            var inputs: [Dampening.Input] = []
            inputs.reserveCapacity(count)
            let holds = policy.dampening.holdSurplus && policy.allocation.surplus == .distribute
            for index in 0..<count {
                let claim = claims[dimension][index]
                let target = allocation.allocations[index]
                let entering =
                    records[index].dampers[dimension] == nil
                    || (records[index].wasIdle && observations[members[index]].tenantClass != .idle)
                let pressing = observations[members[index]].pressing[dimension]
                let fairShare =
                    pressing && !claim.isIdle
                    ? min(claim.ceiling, claim.budgetCap, max(claim.floor, allocation.level * claim.weight)) : 0
                let holdsSurplus = holds && !claim.isIdle && claim.receivesSurplus
                inputs.append(
                    Dampening.Input(
                        target: target, hardCap: max(target, min(claim.ceiling, claim.budgetCap)), entering: entering,
                        pressing: pressing, fairShare: fairShare, need: holdsSurplus ? allocation.needs[index] : nil,
                        surplusCap: min(claim.ceiling, claim.budgetCap, claim.guardMax)))
            }
            var states = records.map { $0.dampers[dimension] }
            previous[dimension] = states.map { $0?.published }
            actions[dimension] = Dampening.apply(
                inputs, states: &states, capacity: max(0, limit - credits[dimension]), settings: policy.dampening)
            for index in 0..<count { records[index].dampers[dimension] = states[index] }
        }

        // Floors-only fallback, scaled to fit.
        var fallbackScale = PerDimension<Double>(1)
        for dimension in RateDimension.allCases {
            guard let limit = capacity[dimension] else { continue }
            let floors = claims[dimension].reduce(0) { $0 + $1.floor }
            if floors > limit { fallbackScale[dimension] = floors > 0 ? limit / floors : 0 }
        }

        // Results, built in place (they are large).
        for index in 0..<count {
            let observation = observations[members[index]]
            let terms = distinctTerms[termsIndex[index]]
            let tier = terms.tier
            results.append(
                TenantAllocation(
                    tenant: observation.tenant, upstream: upstream, tier: tier.name, priority: tier.priority,
                    tenantClass: observation.tenantClass, rpm: nil, tpm: nil, burstCredit: records[index].burst.credit,
                    burstAccount: records[index].burst,
                    deny: budgets.hard[observation.tenant] == .zero ? "budget_exhausted" : nil, mode: tier.mode,
                    maxConcurrency: tier.maxConcurrency, queueWeight: tier.effectiveQueueWeight,
                    fallback: PerDimension(0), override: terms.override))
            let last = results.count - 1
            for dimension in RateDimension.allCases {
                guard let allocation = pools[dimension], let published = records[index].dampers[dimension]?.published
                else {
                    if pools[dimension] == nil {
                        results[last].budgetLimit[dimension] = limitWithoutCapacity(
                            of: observation.tenant, terms: terms, dimension: dimension)
                    }
                    continue
                }
                let claim = claims[dimension][index]
                let credit = records[index].burst.credit?.rate[dimension] ?? 0
                var explanation = allocation.explanation(of: index, claim: claim)
                explanation.burstCredit = credit
                explanation.previous = previous[dimension][index]
                explanation.published = published
                explanation.damping = actions[dimension][index]
                explanation.noteGroup(of: terms)
                explanation.reason = reason(
                    base: allocation.reasons[index], credit: credit, terms: terms,
                    tenantClass: observation.tenantClass)
                let clump = min(observation.clump[dimension], published)
                let bucket = max(published * tier.bucketSeconds / 60, clump, dimension == .rpm ? 1 : 0)
                results[last][dimensionAllocation: dimension] = DimensionAllocation(
                    rate: published, burst: bucket, reason: explanation.reason, explanation: explanation)
                // A budget's cut holds through an outage of Allot too: no floor above it after the lease.
                results[last].fallback[dimension] = min(claim.floor * fallbackScale[dimension], claim.budgetCap)
                summary.allocated[dimension] += published
            }
            records[index].wasIdle = observation.tenantClass == .idle
            records[index].lastSeen = now
        }
        // Write the records back: existing ones by position first (insertions would move them), then new ones.
        for index in 0..<count {
            if let position = stored[index] { state.tenants.values[position] = records[index] }
        }
        for index in 0..<count where stored[index] == nil {
            state.tenants[TenantUpstream(tenant: observations[members[index]].tenant, upstream: upstream)] =
                records[index]
        }
        summary.creditsLent = credits
        for dimension in RateDimension.allCases {
            guard let limit = capacity[dimension] else { continue }
            summary.unallocated[dimension] = max(0, limit - summary.allocated[dimension] - credits[dimension])
        }
        if count > 0, !summary.priced {
            alerts.append(
                EngineAlert(
                    kind: "unknown_price", severity: .warning, upstream: upstream,
                    message: "\(upstream) has no price in the policy; usage is charged at the default price"))
        }
    }

    /// Notes in each member's terms how many of its group's members are active (not idle) on this pool, who share its
    /// weight there (``PolicyEngine/allocate(_:groups:capacityEstimate:settings:)``), for the explanation. Only
    /// tenants with a policy entry have a group, and each of those has its own terms (`index` gives no two of them
    /// one slot), so they are changed in place. Returns whether a group has more than one active member here.
    private func countGroupMembers(terms: inout [TenantTerms], index: [Int]) -> Bool {
        var active: [String: Int] = [:]
        for position in index.indices {
            guard let group = terms[index[position]].group,
                observations[members[position]].tenantClass != .idle
            else { continue }
            active[group, default: 0] += 1
        }
        guard active.values.contains(where: { $0 > 1 }) else { return false }
        for position in index.indices {
            let slot = index[position]
            // An idle member shows how many share the group's weight there too (it is not one of them).
            if let group = terms[slot].group, let count = active[group], count > 1 { terms[slot].groupMembers = count }
        }
        return true
    }

    /// The cap a spend budget puts on a tenant in `dimension`: the lower of a `hard` budget's cut (zero or its
    /// starvation guard, `guardValue`) and, in TPM, a throttled window's cap on this pool; else none (infinity).
    private func budgetCap(of tenant: String, dimension: RateDimension, guardValue: Double) -> Double {
        var cap = Double.infinity
        if !budgets.hard.isEmpty, let action = budgets.hard[tenant] { cap = action == .zero ? 0 : guardValue }
        if dimension == .tpm, !budgets.tpmCaps.isEmpty,
            let throttle = budgets.tpmCaps[TenantUpstream(tenant: tenant, upstream: upstream)]
        {
            cap = min(cap, throttle)
        }
        return cap
    }

    /// What limits a tenant in a dimension this pool has no capacity for: its spend budget's limit or its absolute
    /// ceiling (a percentage has nothing to resolve against), whichever is lower; nil when nothing does.
    private func limitWithoutCapacity(of tenant: String, terms: TenantTerms, dimension: RateDimension) -> BudgetLimit? {
        let budget = budgetLimit(of: tenant, tier: terms.tier, dimension: dimension)
        guard let ceiling = policy.absoluteCeiling(ofTenant: tenant, terms: terms, dimension),
            ceiling.value < budget?.rate ?? .infinity
        else { return budget }
        // The floor wins over the ceiling here too (policies/README.md, *Floor above ceiling*), where it is absolute.
        var rate = ceiling.value
        var reason: AllocationReason = ceiling.byOverride ? .override : .ceiling
        if case .absolute(let floor) = terms.floor[dimension], floor.isFinite, floor > rate {
            guard floor < budget?.rate ?? .infinity else { return budget }
            rate = floor
            reason = .floor
        }
        return BudgetLimit(rate: rate, tier: terms.tier, dimension: dimension, reason: reason)
    }

    /// What a spend budget limits a tenant to in a dimension this pool has no capacity for; nil when nothing does.
    private func budgetLimit(of tenant: String, tier: Tier, dimension: RateDimension) -> BudgetLimit? {
        guard !budgets.hard.isEmpty || !budgets.tpmCaps.isEmpty else { return nil }
        // A guard in percent has no capacity to resolve against here: no limit from it (rather than a silent cut to
        // zero); an absolute one, a throttle's cap and a cut to zero apply.
        var guardValue = Double.infinity
        if case .absolute(let value) = tier.starvationGuard[dimension] { guardValue = value }
        let cap = budgetCap(of: tenant, dimension: dimension, guardValue: guardValue)
        // A throttle splits what it allows by each pool's recent spend: a pool the tenant has not spent on yet gets
        // no share, and here, with no capacity to start it from, a cap of 0 would keep it from ever spending
        // (re-verification of round 20: a throttled tenant's tokens on an undeclared pool were 0 while it used
        // another). Only a spent-out budget or a hard cut limits it to 0 there.
        guard cap.isFinite, cap > 0 || budgets.hard[tenant] != nil || (budgets.allowed[tenant] ?? 0) <= 0 else {
            return nil
        }
        return BudgetLimit(rate: cap, tier: tier, dimension: dimension, reason: .budget)
    }

    /// One tenant's allocator input for one dimension.
    private func claim(
        index: Int, dimension: RateDimension, capacity: Double, terms: TenantTerms, record: TenantRecord
    ) -> AllocationClaim {
        let observation = observations[members[index]]
        let tier = terms.tier
        let guardValue = tier.starvationGuard[dimension].resolved(capacity: capacity)
        let budgetCap = budgetCap(of: observation.tenant, dimension: dimension, guardValue: guardValue)
        var guardMin = tier.guardMin[dimension].resolved(capacity: capacity)
        var guardMax = tier.guardMax[dimension].resolved(capacity: capacity)
        func approved(_ kind: Proposal.Kind) -> Bool {
            !approvals.isEmpty
                && approvals.contains(
                    ProposalBook.Approval(
                        tenant: observation.tenant, upstream: upstream, dimension: dimension, kind: kind))
        }
        if terms.guardrailsSuspended || approved(.lowerBelowGuardMin) { guardMin = 0 }
        if terms.guardrailsSuspended || approved(.raiseAboveGuardMax) { guardMax = .infinity }
        let demand = observation.demand[dimension]
        return AllocationClaim(
            weight: terms.weight, floor: terms.floor[dimension].resolved(capacity: capacity),
            ceiling: terms.ceiling[dimension].resolved(capacity: capacity),
            demand: demand.isNaN ? 0 : max(0, demand), starvationGuard: guardValue,
            rank: ranks[tier.name] ?? Int.max, isIdle: observation.tenantClass == .idle,
            idleAllocation: tier.idleAllocation[dimension].resolved(capacity: capacity), guardMin: guardMin,
            guardMax: guardMax, budgetCap: budgetCap, receivesSurplus: !record.burst.inDebt,
            spread: observation.spread[dimension].isFinite ? max(0, observation.spread[dimension]) : 0)
    }

    /// Funds active credits from the burst reserve (scaling them down if the reserve shrank), then
    /// lends new ones: those asked for, in request order, then those detected. Returns the credit rates reserved
    /// per dimension.
    private mutating func lendCredits(
        requests: [BurstRequest], pools: PerDimension<PoolAllocation?>, capacity: PerDimension<Double?>,
        records: inout [TenantRecord]
    ) -> PerDimension<Double> {
        let reserve = PerDimension<Double> { pools[$0]?.burstReserve ?? 0 }
        var used = PerDimension<Double>(0)
        for record in records {
            if let credit = record.burst.credit { used.rpm += credit.rate.rpm; used.tpm += credit.rate.tpm }
        }
        for dimension in RateDimension.allCases where used[dimension] > reserve[dimension] {
            let scale = used[dimension] > 0 ? reserve[dimension] / used[dimension] : 0
            for index in records.indices where records[index].burst.credit != nil {
                records[index].burst.credit!.rate[dimension] *= scale
            }
            used[dimension] = reserve[dimension]
        }

        let degraded = RateDimension.allCases.contains { pools[$0]?.degraded ?? false }
        lendRequested(
            requests, reserve: reserve, used: &used, degraded: degraded, capacity: capacity, records: &records)
        if !degraded { lendDetected(reserve: reserve, used: &used, capacity: capacity, records: &records) }
        return used
    }

    /// Lends the credits asked for (`POST /v1/tenants/{id}/bursts`), in request order.
    private mutating func lendRequested(
        _ requests: [BurstRequest], reserve: PerDimension<Double>, used: inout PerDimension<Double>, degraded: Bool,
        capacity: PerDimension<Double?>, records: inout [TenantRecord]
    ) {
        guard !requests.isEmpty else { return }
        var index: [String: Int] = [:]
        for (position, member) in members.enumerated() { index[observations[member].tenant] = position }
        let ordered = requests.sorted { ($0.requestedAt, $0.id) < ($1.requestedAt, $1.id) }
        for request in ordered {
            var decision = BurstDecision(
                requestID: request.id, tenant: request.tenant, upstream: upstream,
                outcome: .unknown, credit: nil)
            defer { burstDecisions.append(decision) }
            guard let position = index[request.tenant] else { continue }
            var wanted = request
            if capacity.rpm == nil { wanted.calls = 0 }
            if capacity.tpm == nil { wanted.tokens = 0 }
            guard wanted.ttlSeconds > 0, wanted.calls > 0 || wanted.tokens > 0 else {
                decision.outcome = .invalid
                continue
            }
            let observation = observations[members[position]]
            // What a spend budget forbids is not lent: nothing at `hard`, no tokens under a throttle's cap.
            if !budgets.hard.isEmpty, budgets.hard[request.tenant] != nil {
                decision.outcome = .budget
                continue
            }
            var trimmed = false
            if !budgets.tpmCaps.isEmpty,
                budgets.tpmCaps[TenantUpstream(tenant: request.tenant, upstream: upstream)] != nil
            {
                trimmed = wanted.tokens > 0
                wanted.tokens = 0
                guard wanted.calls > 0 else {
                    decision.outcome = .budget
                    continue
                }
            }
            let policy = policy.terms(
                ofTenant: request.tenant, upstream: upstream,
                overrides: overridesByTenant[request.tenant] ?? [], now: now
            ).tier.burst
            if let refusal = records[position].burst.refusal(
                tenantClass: observation.tenantClass, suspect: observation.suspect, now: now, policy: policy)
            {
                decision.outcome = refusal
                continue
            }
            let available = PerDimension<Double> { reserve[$0] - used[$0] }
            guard !degraded,
                let (credit, partial) = BurstAccount.lend(
                    wanted, available: available, capacity: capacity.map { $0 ?? 0 }, now: now, policy: policy)
            else {
                decision.outcome = .noReserve
                continue
            }
            records[position].burst.credit = credit
            records[position].burst.lent += 1
            used.rpm += credit.rate.rpm
            used.tpm += credit.rate.tpm
            decision.outcome = partial || trimmed ? .partiallyGranted : .granted
            decision.credit = credit
        }
    }

    /// Lends burst credit unasked to each tenant mid-task (SPEC 6.5, "detected from `task_id` fan-out") whose tier's
    /// `burst.detect_fan_out` is on: classified `bursting`, its work fanning out into tasks
    /// (``TenantObservation/fansOut``), blocked by its own bucket (``TenantObservation/pressing``) in a dimension where
    /// it wants more than it was last published, and free to borrow by the rules every request meets (not suspect, no
    /// credit active, no debt, no recent default, its tier's `burst.enabled`). It asks for the gap between its demand
    /// and that allocation, for its tier's `max_ttl_s`; `max_credit` and what is left of the reserve cap it, as they
    /// cap a request, and it is lent only if it covers ``detectedMinimumShare`` of the gap. After the requests sent
    /// by `POST /v1/tenants/{id}/bursts`, which come first; in tenant order. Only the credits lent are reported
    /// (``detectedBursts``): a refusal is the tenant's normal state between bursts.
    private mutating func lendDetected(
        reserve: PerDimension<Double>, used: inout PerDimension<Double>, capacity: PerDimension<Double?>,
        records: inout [TenantRecord]
    ) {
        for position in members.indices {
            let observation = observations[members[position]]
            guard observation.tenantClass == .bursting, observation.fansOut, !observation.suspect else { continue }
            let terms = policy.terms(
                ofTenant: observation.tenant, upstream: upstream,
                overrides: overridesByTenant[observation.tenant] ?? [], now: now)
            let burst = terms.tier.burst
            guard burst.detectFanOut,
                records[position].burst.refusal(
                    tenantClass: observation.tenantClass, suspect: observation.suspect, now: now, policy: burst) == nil
            else { continue }
            // What it wants beyond what it holds — the allocation last published (the dampers' state) — per minute,
            // where its bucket denies it (a dimension it is not refused in is not what holds it back), up to its
            // ceiling: the policy's `ceiling` bounds a tenant surplus included, and the reserve is surplus; so does a
            // spend budget's cap (a credit would spend past it).
            let gap = PerDimension<Double> { dimension in
                guard let limit = capacity[dimension], let held = records[position].dampers[dimension]?.published,
                    observation.demand[dimension].isFinite, observation.pressing[dimension]
                else { return 0 }
                let guardValue = terms.tier.starvationGuard[dimension].resolved(capacity: limit)
                let ceiling = min(
                    terms.ceiling[dimension].resolved(capacity: limit),
                    budgetCap(of: observation.tenant, dimension: dimension, guardValue: guardValue))
                return max(0, min(observation.demand[dimension], ceiling) - held)
            }
            guard gap.rpm > 0 || gap.tpm > 0 else { continue }
            let minutes = burst.maxTTLSeconds / 60
            let request = BurstRequest(
                // Unique per tenant, pool and tick: a tenant detected on two pools at once gets two rows.
                id: "detected-\(observation.tenant)-\(upstream)-\(Int64((now * 1000).rounded()))",
                tenant: observation.tenant,
                upstream: upstream, calls: gap.rpm * minutes, tokens: gap.tpm * minutes,
                ttlSeconds: burst.maxTTLSeconds, requestedAt: now)
            let available = PerDimension<Double> { reserve[$0] - used[$0] }
            guard
                let (credit, partial) = BurstAccount.lend(
                    request, available: available, capacity: capacity.map { $0 ?? 0 }, now: now, policy: burst),
                RateDimension.allCases.allSatisfy({ credit.rate[$0] >= Self.detectedMinimumShare * gap[$0] })
            else { continue }
            records[position].burst.credit = credit
            records[position].burst.lent += 1
            used.rpm += credit.rate.rpm
            used.tpm += credit.rate.tpm
            detectedBursts.append(request)
            burstDecisions.append(
                BurstDecision(
                    requestID: request.id, tenant: request.tenant, upstream: upstream,
                    outcome: partial ? .partiallyGranted : .granted, credit: credit))
        }
    }

    /// The least share of its gap, in every dimension short, a detected credit must cover to be lent. Without it
    /// tenants pressing on a full pool were lent slivers of a near-empty reserve (under 1 rpm), and what the
    /// gateways' idle lending then served them beyond their allocation became debt, which cost them their surplus:
    /// seeds 1–8 of the built-ins, starved tenant-minutes 13.8 → 14.4. With it, nothing changed there.
    static let detectedMinimumShare = 0.25

    /// The published reason: the allocator's when it explains a constraint (budget, degraded mode,
    /// a guardrail, idle), else the most specific circumstance (a burst credit, a cold start, an
    /// override), else the allocator's. A cold start does not hide a fair-share cut: a new tenant held to its
    /// share of a contended pool reads `fair_share` (outside evaluation round 20: 5,000 new tenants held to 2 % of
    /// what they asked all read `cold_start`); its class says it is new.
    private func reason(
        base: AllocationReason, credit: Double, terms: TenantTerms, tenantClass: TenantClass
    ) -> AllocationReason {
        switch base {
        case .budget, .degraded, .guardrailClamped, .idle:
            return base
        default:
            if credit > 0 { return .burstCredit }
            if tenantClass == .coldStart, base != .fairShare { return .coldStart }
            if terms.override != nil { return .override }
            return base
        }
    }
}

extension TenantAllocation {
    /// Sets the allocation of `dimension`.
    fileprivate subscript(dimensionAllocation dimension: RateDimension) -> DimensionAllocation? {
        get { self[dimension] }
        set {
            switch dimension {
            case .rpm: rpm = newValue
            case .tpm: tpm = newValue
            }
        }
    }
}

extension AllocationExplanation {
    /// Names the tenant's group, if it has one, and how many share its weight on the pool.
    fileprivate mutating func noteGroup(of terms: TenantTerms) {
        guard let group = terms.group else { return }
        self.group = group
        groupMembers = terms.groupMembers
    }
}

extension PolicyEngine {
    /// One pool's allocation in one dimension (``PoolAllocation/compute(capacityEstimate:settings:claims:)``), with
    /// the tenants of one group (`groups[i]`, nil for none; nil: no groups) sharing one weight: the service's and the
    /// plans'. The weights of a group's active (not idle) members are divided by their number, and then shared
    /// max-min among them (``balanceGroups(_:members:capacityEstimate:settings:)``); the claims keep the weights
    /// used, which the explanation shows. Without a group of two active members, the pool's own computation.
    static func allocate(
        _ claims: inout [AllocationClaim], groups: [String?]?, capacityEstimate: Double, settings: AllocationSettings
    ) -> PoolAllocation {
        var members: [String: [Int]] = [:]
        if let groups {
            for index in claims.indices where !claims[index].isIdle {
                if let group = groups[index] { members[group, default: []].append(index) }
            }
            members = members.filter { $0.value.count > 1 }
        }
        guard !members.isEmpty else {
            return PoolAllocation.compute(capacityEstimate: capacityEstimate, settings: settings, claims: claims)
        }
        for indices in members.values {
            for index in indices {
                claims[index].weight = max(
                    TenantTerms.weightBounds.lowerBound, claims[index].weight / Double(indices.count))
            }
        }
        return balanceGroups(&claims, members: members, capacityEstimate: capacityEstimate, settings: settings)
    }

    /// Max-min within each group, one level down: a group weighs what one tenant of it would (the mean of its
    /// active members' own weights, as ``allocate(_:groups:capacityEstimate:settings:)`` divided them), and what
    /// that share of the pool comes to is water-filled among its members by their own weights and bounds, so that a
    /// member wanting less than an even part leaves the rest to the others in the group, not to the whole pool.
    /// Divided evenly alone, a key wanting 50 rpm kept half the group's weight beside one wanting 1,000, and the
    /// customer got 367 of a 1,000-rpm pool against a single tenant's 633 (a review of 2026-12-01).
    ///
    /// Computed directly, in two levels (``twoLevelShares(entities:singles:own:lower:upper:capacity:)``), on the
    /// bounds the pool's own fill uses (its first fill, without guardrails): the pool is water-filled among the
    /// tenants outside groups and one claimant per group (the mean weight, the sums of the members' lower and upper
    /// bounds), then each group's part among its members. Each member then gets the weight that yields its part at
    /// the pool's level (`x ÷ f`), and the pool is filled again with them, which gives every tenant the two-level
    /// result (a second review found an iteration toward it stopping short: a key at 1,000 beside three at 40, alone
    /// on a pool, got 892.9 and 35.7 instead of 880 and 40). An uncontended pool (everyone at its upper bound) keeps
    /// the divided weights there; so does degraded mode.
    ///
    /// The pool's later fills are shared in two levels too, on their own bounds (``PoolAllocation/Reweighing``),
    /// wherever that differs from the weights they would use: the refill with the guardrails, so that a member
    /// clamped at its `guard_max` leaves its excess to its group first, as a ceiling would (a third review: a
    /// standard key clamped at 100 beside a free key of its customer and a premium tenant got 100, 100 and 800
    /// instead of 100, 172.7 and 727.3), its weights becoming the claims'; and the surplus, so that a member that
    /// cannot grow (a ceiling, `guard_max`, burst debt) leaves its part of the surplus to its group (120 of a
    /// 1,000-rpm pool under a ceiling, its sibling got 293.3 and a single tenant 586.7 instead of 380 and 500). The
    /// proposals' evidence stays the first fill's: its two-level value without guardrails.
    /// The tier's guard minimum is the customer's too, and is shared the same way (held per key, sixteen premium keys
    /// with a 5 % guard held 80 % of a pool against one premium tenant's 20, a proposal filed for each key; divided
    /// by head count, one busy key beside two light ones was guarded to 67 of a premium tenant's 200).
    /// `members`: each group's active members (two or more), by claim index, their weights divided by their number.
    private static func balanceGroups(
        _ claims: inout [AllocationClaim], members: [String: [Int]], capacityEstimate: Double,
        settings: AllocationSettings
    ) -> PoolAllocation {
        var counts = [Int](repeating: 1, count: claims.count)
        for indices in members.values { for index in indices { counts[index] = indices.count } }
        let own = claims.indices.map { claims[$0].weight * Double(counts[$0]) }
        // Level 1's claimants: the tenants outside groups, and one per group.
        var grouped = Set<Int>()
        for indices in members.values { grouped.formUnion(indices) }
        let active = claims.indices.filter { !claims[$0].isIdle }
        var entities: [[Int]] = active.filter { !grouped.contains($0) }.map { [$0] }
        let singles = entities.count
        entities += members.sorted { $0.key < $1.key }.map(\.value)

        // A refill's two-level weights, where its shares differ from what its own weights give; those of the guarded
        // refill are kept (by claim index) for the claims.
        let total = claims.count
        var refilled: [Int: Double] = [:]
        func reweigh(
            _ refill: PoolAllocation.Refill, _ indices: [Int], _ weights: [Double], _ lower: [Double],
            _ upper: [Double], _ capacity: Double
        ) -> [Double]? {
            var low = [Double](repeating: 0, count: total)
            var high = [Double](repeating: 0, count: total)
            for (k, index) in indices.enumerated() {
                low[index] = lower[k]
                high[index] = upper[k]
            }
            let (shares, level) = twoLevelShares(
                entities: entities, singles: singles, own: own, lower: low, upper: high, capacity: capacity)
            guard level > 0, level.isFinite else { return nil }
            let flat = WaterFilling.fill(capacity: capacity, weights: weights, lower: lower, upper: upper).allocations
            let dust = PoolAllocation.dust(capacity)
            guard indices.indices.contains(where: { abs(shares[indices[$0]] - flat[$0]) > dust }) else { return nil }
            var regrouped = weights
            for (k, index) in indices.enumerated() where grouped.contains(index) {
                regrouped[k] = max(TenantTerms.weightBounds.lowerBound, shares[index] / level)
                if refill == .guarded { refilled[index] = regrouped[k] }
            }
            return regrouped
        }
        func fill(_ claims: [AllocationClaim]) -> PoolAllocation {
            refilled = [:]
            return PoolAllocation.compute(
                capacityEstimate: capacityEstimate, settings: settings, claims: claims, reweigh: reweigh)
        }
        func settle(_ allocation: PoolAllocation) -> PoolAllocation {
            for (index, weight) in refilled { claims[index].weight = weight }
            return allocation
        }

        // The bounds without guardrails, as the water-filling they clamp: a guard's bound taken for the member's own
        // would move it into the weights, and its clamp (and proposal) would vanish.
        let guarded = claims.contains { $0.guardMin > 0 || $0.guardMax < .infinity }
        var free = claims
        if guarded {
            for index in free.indices {
                free[index].guardMin = 0
                free[index].guardMax = .infinity
            }
        }
        let unguarded =
            guarded
            ? PoolAllocation.compute(capacityEstimate: capacityEstimate, settings: settings, claims: free)
            : fill(claims)
        // The pool's fill with the divided weights (already made as `unguarded` when there are no guardrails).
        func first() -> PoolAllocation { settle(guarded ? fill(claims) : unguarded) }
        guard !unguarded.degraded else { return first() }
        let contended = active.contains { unguarded.unclamped[$0] < unguarded.upperBounds[$0] * (1 - 1e-9) }
        guard contended else { return first() }

        let (parts, level) = twoLevelShares(
            entities: entities, singles: singles, own: own, lower: unguarded.lowerBounds,
            upper: unguarded.upperBounds,
            capacity: max(0, capacityEstimate * (1 - settings.safetyMargin) - unguarded.idleTotal))
        guard level > 0, level.isFinite else { return first() }
        for indices in entities[singles...] {
            for index in indices {
                claims[index].weight = max(TenantTerms.weightBounds.lowerBound, parts[index] / level)
            }
            // The guard minimum: a member that wants less holds only what it wants, the others the rest.
            let guards = indices.map { claims[$0].guardMin }
            if guards.contains(where: { $0 > 0 }) {
                let shared = WaterFilling.fill(
                    capacity: guards.reduce(0, +) / Double(indices.count), weights: indices.map { own[$0] },
                    lower: indices.map { _ in 0 }, upper: indices.map { unguarded.upperBounds[$0] }
                ).allocations
                for (m, index) in indices.enumerated() { claims[index].guardMin = shared[m] }
            }
        }
        return settle(fill(claims))
    }

    /// Two-level max-min of `capacity`: water-filled among `entities` (the first `singles` one tenant each, then
    /// each group's members), a group by the mean of its members' `own` weights and the sums of their bounds, then
    /// each group's part among its members by their own weights and bounds. `own`, `lower`, `upper` and the shares
    /// returned are by claim index (0 for a claim in no entity); `level` is level 1's.
    private static func twoLevelShares(
        entities: [[Int]], singles: Int, own: [Double], lower: [Double], upper: [Double], capacity: Double
    ) -> (shares: [Double], level: Double) {
        let outer = WaterFilling.fill(
            capacity: capacity,
            weights: entities.enumerated().map { k, indices in
                k < singles ? own[indices[0]] : indices.reduce(0) { $0 + own[$1] } / Double(indices.count)
            },
            lower: entities.map { $0.reduce(0) { $0 + lower[$1] } },
            upper: entities.map { $0.reduce(0) { $0 + upper[$1] } })
        var shares = [Double](repeating: 0, count: own.count)
        for (k, indices) in entities.enumerated() {
            guard k >= singles else {
                shares[indices[0]] = outer.allocations[k]
                continue
            }
            let parts = WaterFilling.fill(
                capacity: outer.allocations[k], weights: indices.map { own[$0] },
                lower: indices.map { lower[$0] }, upper: indices.map { upper[$0] }
            ).allocations
            for (m, index) in indices.enumerated() { shares[index] = parts[m] }
        }
        return (shares, outer.level)
    }
}
