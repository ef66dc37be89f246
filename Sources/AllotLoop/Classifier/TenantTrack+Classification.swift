import AllotCore
import AllotSignals
import AllotStore
import Foundation

extension TenantTrack {
    /// Adds one gateway's counts of the tick (demand requests, served requests and tokens), after
    /// `fold` decayed every gateway: the same exact EWMA, `v·e^(−Δ/τ) + r·(1 − e^(−Δ/τ))`, in two steps.
    mutating func countGateway(
        _ name: String, demand: Double, served: Double, tokens: Double, fold: Fold, now: Double
    ) {
        var index = gateways.firstIndex { $0.name == name }
        if index == nil {
            gateways.append(GatewayTrack(name: name, lastSeenAt: now))
            index = gateways.count - 1
        }
        let weight = fold.short * 60 / fold.elapsed
        gateways[index!].demand += weight * demand
        gateways[index!].served.rpm += weight * served
        gateways[index!].served.tpm += weight * tokens
        gateways[index!].lastSeenAt = now
    }

    /// Folds the tick's counts into the rates (see ``ConsumptionClassification``) and forgets gateways
    /// not seen for the long window.
    mutating func fold(_ fold: Fold, tick: TickCounts, now: Double, shortWindow: Double, longWindow: Double) {
        let perMinute = 60 / fold.elapsed
        let short = fold.short
        let long = fold.long
        func ewma(_ value: inout Double, _ count: Double, _ weight: Double) {
            value += weight * (count * perMinute - value)
        }
        func ewma(_ value: inout Double, _ count: Float, _ weight: Double) {
            value += weight * (Double(count) * perMinute - value)
        }
        if tick.lastSeenAt > lastSeenAt { lastSeenAt = tick.lastSeenAt }
        // The longest quiet spell between demand events, fading over the long window (see `hasStopped`).
        if let quiet = longestQuiet { longestQuiet = quiet * (1 - long) }
        if tick.samples > 0 {
            samples += Int(tick.samples)
            if let last = lastActivityAt, tick.lastActivityAt > last {
                longestQuiet = max(longestQuiet ?? 0, tick.lastActivityAt - last)
            }
            if lastActivityAt == nil || tick.lastActivityAt > lastActivityAt! { lastActivityAt = tick.lastActivityAt }
        }
        ewma(&servedShort.rpm, tick.servedRequests, short)
        ewma(&servedShort.tpm, tick.servedTokens, short)
        ewma(&servedLong.rpm, tick.servedRequests, long)
        ewma(&servedLong.tpm, tick.servedTokens, long)
        if let folded = foldedSeconds {
            foldedSeconds = min(folded + fold.elapsed, 1e6)
            if folded < longWindow {
                if tick.firstSeenAt.isFinite { youngSince = min(youngSince ?? tick.firstSeenAt, tick.firstSeenAt) }
                var seen = youngWanted ?? PerDimension(0)
                seen.rpm += Double(tick.newRequests)
                seen.tpm += Double(tick.newTokens)
                youngWanted = seen
            } else {
                youngSince = nil
                youngWanted = nil
            }
        }
        if wasIdle == true, tick.newRequests > 0 {
            returnBase = wantedShort ?? demandShort
            returnBaseAt = now - fold.elapsed
            returnSince = tick.firstSeenAt.isFinite ? tick.firstSeenAt : now - fold.elapsed
            returnWanted = PerDimension(rpm: Double(tick.newRequests), tpm: Double(tick.newTokens))
        } else if var seen = returnWanted {
            seen.rpm += Double(tick.newRequests)
            seen.tpm += Double(tick.newTokens)
            returnWanted = seen
        }
        let count = Double(tick.newRequests)
        tickCountMean = (tickCountMean ?? count) + long * (count - (tickCountMean ?? count))
        tickCountSquare =
            (tickCountSquare ?? count * count) + long * (count * count - (tickCountSquare ?? count * count))
        // Checkpoints written before the wanted rates existed start them from the attempts' rates.
        var wanted = (short: wantedShort ?? demandShort, long: wantedLong ?? demandLong)
        var fastAttempts = attemptsFast ?? demandShort
        ewma(&fastAttempts.rpm, tick.demandRequests, fold.fast)
        ewma(&fastAttempts.tpm, tick.demandTokens, fold.fast)
        attemptsFast = fastAttempts
        var fastWanted = wantedFast ?? wanted.short
        ewma(&fastWanted.rpm, tick.newRequests, fold.fast)
        ewma(&fastWanted.tpm, tick.newTokens, fold.fast)
        wantedFast = fastWanted
        ewma(&demandShort.rpm, tick.demandRequests, short)
        ewma(&demandShort.tpm, tick.demandTokens, short)
        ewma(&demandLong.rpm, tick.demandRequests, long)
        ewma(&demandLong.tpm, tick.demandTokens, long)
        ewma(&wanted.short.rpm, tick.newRequests, short)
        ewma(&wanted.short.tpm, tick.newTokens, short)
        ewma(&wanted.long.rpm, tick.newRequests, long)
        ewma(&wanted.long.tpm, tick.newTokens, long)
        (wantedShort, wantedLong) = (wanted.short, wanted.long)
        var byLimit = deniedByLimit ?? PerDimension(0)
        ewma(&byLimit.rpm, tick.deniedByRPM, short)
        ewma(&byLimit.tpm, tick.deniedByTPM, short)
        deniedByLimit = byLimit
        var unnamed = deniedUnnamed ?? 0
        ewma(&unnamed, tick.deniedUnnamed, short)
        deniedUnnamed = unnamed
        if deniedConcurrency != nil || tick.deniedByConcurrency > 0 {
            var concurrency = deniedConcurrency ?? 0
            ewma(&concurrency, tick.deniedByConcurrency, short)
            deniedConcurrency = concurrency
        }
        ewma(&deniedShort, tick.denied, short)
        if taskCallsShort != nil || tick.taskCalls > 0 {
            var calls = taskCallsShort ?? 0
            var started = tasksStartedShort ?? 0
            ewma(&calls, tick.taskCalls, short)
            ewma(&started, tick.tasksStarted, short)
            (taskCallsShort, tasksStartedShort) = (calls, started)
        }
        ewma(&queuedShort, tick.queued, short)
        let waiting = waitingShort ?? 0
        waitingShort = waiting + short * (Double(tick.waitSeconds) / fold.elapsed - waiting)
        ewma(&deniedLong, tick.denied, long)
        ewma(&eventsLong, tick.events, long)
        ewma(&retriesLong, tick.retries, long)
        ewma(&nearEmptyLong, tick.nearEmpty, long)
        ewma(&promptLong, tick.promptTokens, long)
        ewma(&completionLong, tick.completionTokens, long)
        // The peak as the rate it was, so that `peak_to_average` does not under-read a peak in the tenant's first
        // minutes: the short EWMA corrected by the weight it had gathered then, and for a young track what it asked
        // for over the time its events cover, as its demand level reads it (``moveLevel``): a first report holding
        // two minutes of backlog is not a peak of twenty-four times its rate.
        var peakRate = demandShort.rpm / max(filledWeight(over: shortWindow), 1e-9)
        if let folded = foldedSeconds, folded < shortWindow, let since = youngSince, let seen = youngWanted {
            peakRate = seen.rpm * 60 / max(folded, now - since, fold.elapsed)
        }
        peakDemand = max(peakRate, peakDemand * fold.longDecay)
        let lastClump = clump ?? PerDimension(0)
        clump = PerDimension(
            rpm: max(tick.demandRequests, lastClump.rpm * fold.longDecay),
            tpm: max(tick.demandTokens, lastClump.tpm * fold.longDecay))

        if gateways.contains(where: { $0.lastSeenAt < now - longWindow }) {
            gateways.removeAll { $0.lastSeenAt < now - longWindow }
        }
        for index in gateways.indices {  // decay; `countGateway` adds this tick's counts
            gateways[index].demand *= 1 - short
            gateways[index].served.rpm *= 1 - short
            gateways[index].served.tpm *= 1 - short
        }
        completionTokens.refresh(integral: true, now: now)
        queueWait.refresh(integral: false, now: now)
    }

    struct Classification {
        var observation: TenantObservation
        var status: TenantStatus
        var alerts: [LoopAlert]
        /// The part of a `cold_start` tenant's demand that is a guess (0 for every other class): `(1 − c)` of the
        /// larger of what it showed and its tier's prior. The pool's newcomers share the room its other tenants leave
        /// for it, at least ``ClassifierSettings/coldStartShare`` of its capacity (``ConsumptionClassification``).
        var guessed = PerDimension<Double>(0)
    }

    /// Classes, starvation, suspect patterns and the report entries at `context.now`. `advance`:
    /// this call ends a tick (the suspect detector judges once per tick).
    mutating func classify(allocation: PerDimension<Double>?, advance: Bool, context: TrackContext) -> Classification {
        let policy = context.policy
        let settings = policy.classifier
        let rules = context.rules
        let now = context.now

        var over = false
        var starving = false
        var starvingText = ""
        // A tenant that has stopped wants nothing now, though its short window still remembers what it asked for:
        // it is neither over its allocation nor starving (a whale gone quiet read `sustained_over` for a minute).
        let stopped = hasStopped(now: now, shortWindow: settings.shortWindowSeconds)
        if let allocation, !stopped {
            for dimension in RateDimension.allCases {
                let allocated = allocation[dimension]
                guard allocated > 0, allocated.isFinite else { continue }
                // What it wants (SPEC 5: served + denied locally + queued): the larger of its attempts (a blocked
                // agent asks again every retry-after) and its requests, each counted once at its first event, a
                // `queued` report included. Without the requests a tenant whose calls waited in gateway queues while
                // it was served 15 % of its allocation never starved, though the same traffic denied did (outside
                // evaluation round 21); adding the queued reports to the attempts counted a call that waited and
                // was then served twice (review). `sustained_over` compares the same: a tenant whose calls wait in
                // gateway queues at its allocation wants more than it, though its attempts do not exceed it.
                let wants = max(demandShort[dimension], (wantedShort ?? demandShort)[dimension])
                if wants > allocated { over = true }
                if wants >= allocated,
                    servedShort[dimension] < policy.alerts.starvationRatio * allocated,
                    !starving
                {
                    starving = true
                    starvingText =
                        "\(key.tenant) on \(key.upstream) is served \(SignalText.number(servedShort[dimension])) of "
                        + "its \(SignalText.number(allocated)) \(dimension.rawValue) "
                        + "(\(SignalText.percent(servedShort[dimension] / allocated))) while it wants "
                        + SignalText.number(wants)
                }
            }
        }
        overSince = over ? (overSince ?? now) : nil
        starvingSince = starving ? (starvingSince ?? now) : nil
        let starved = starvingSince.map { now - $0 >= policy.alerts.starvationWindowSeconds } ?? false

        let idle = lastActivityAt.map { now - $0 >= settings.idleAfterSeconds } ?? true
        // Confidence in what the tenant showed: its samples out of `cold_start_samples`, or the time it has
        // been watched out of two short windows, whichever is more. A sparse tenant (two requests a minute) takes
        // a quarter of an hour to reach 30 samples; kept at its tier's prior all that while, 300 free tenants
        // held 1,040 rpm of a 3,000-rpm pool for the 600 they used, and standard tenants starved.
        let watched = (foldedSeconds ?? .infinity) / (2 * settings.shortWindowSeconds)
        let confidence =
            settings.coldStartSamples > 0
            ? min(1, max(Double(samples) / Double(settings.coldStartSamples), watched)) : 1
        let coldStart = confidence < 1
        let sustained = overSince.map { now - $0 >= settings.sustainedOverSeconds } ?? false
        // The class, the trend and the long-window usage shown read each window's rate as the demand level does: an
        // EWMA started `foldedSeconds` ago holds only `1 − e^(−t/τ)` of its weight. Raw, a new tenant's long-window
        // rate started from zero, and one sending a flat 150 rpm read `bursting` (short ≥ 2 × long, trend 2.71)
        // for ten minutes, eligible for unasked fan-out credit (outside evaluation round 38).
        let filledShort = max(filledWeight(over: settings.shortWindowSeconds), 1e-9)
        let filledLong = max(filledWeight(over: settings.longWindowSeconds), 1e-9)
        let shortRate: PerDimension<Double> = PerDimension { demandShort[$0] / filledShort }
        let longRate: PerDimension<Double> = PerDimension { demandLong[$0] / filledLong }
        let bursting =
            shortRate.rpm >= rules.burstMinimumRPM
            && (shortRate.rpm >= rules.burstRatio * longRate.rpm
                || (longRate.tpm > 0 && shortRate.tpm >= rules.burstRatio * longRate.tpm))
        let tenantClass: TenantClass =
            idle ? .idle : coldStart ? .coldStart : sustained ? .sustainedOver : bursting ? .bursting : .steady

        // What the tenant shows this tick (its measured demand or its claim), before the level's hysteresis.
        var shown: PerDimension<Double>?
        var pressing = PerDimension<Bool>(false)
        if advance, let fold = context.fold {
            // A constrained tenant's claim is an input of the level like its measured demand: the level's
            // hysteresis keeps claims that swing with a clumpy tenant's served rate from moving the pool.
            let claim =
                !idle
                ? allocation.flatMap {
                    constrainedClaim(allocation: $0, rules: rules, headroom: policy.allocation.demandHeadroom)
                } : nil
            shown = moveLevel(
                fold: fold, now: now, rules: rules,
                windows: (settings.shortWindowSeconds, settings.longWindowSeconds), claim: claim?.claim,
                blocked: claim?.blocked ?? false)
            pressing = claim?.pressing ?? PerDimension(false)
            if let allocation {
                var averaged = allocatedShort ?? allocation
                for dimension in RateDimension.allCases where allocation[dimension].isFinite {
                    averaged[dimension] += fold.short * (allocation[dimension] - averaged[dimension])
                }
                allocatedShort = averaged
            } else {
                allocatedShort = nil
            }
        }
        var demand = level ?? demandShort
        if demandShort.rpm * settings.shortWindowSeconds / 60 < rules.sparseSamples,
            !hasStopped(now: now, shortWindow: settings.shortWindowSeconds)
        {
            let long = wantedLong ?? demandLong
            demand = PerDimension { max(demand[$0], long[$0]) }
        }
        // What of the demand is evidence: a newcomer's guessed part, `(1 − c)` of what it shows or of its prior,
        // whichever is more, is shared among the pool's newcomers (``ConsumptionClassification``).
        var evidence = demand
        if coldStart, !idle {
            // The prior raises a new tenant's demand while evidence is thin; it never holds it below what
            // it has already shown it wants.
            let prior = coldStartPrior(context: context)
            evidence = PerDimension { confidence * demand[$0] }
            demand = PerDimension { max(demand[$0], confidence * demand[$0] + (1 - confidence) * prior[$0]) }
        }
        if advance, let fold = context.fold {
            rememberActiveLevel(idle: idle, now: now, longWeight: fold.long)
        }
        if !idle, let returnedAt, let remembered = activeLevel, now - returnedAt < settings.shortWindowSeconds {
            // Back from idle: what it wanted before, fading over a short window while its own rate is measured
            // again. Its measured demand starts from nothing, and a premium desk back from a ten-minute outage
            // at twice its rate took 25 s (five ticks) to get its share back, its tasks queueing meanwhile.
            let fade = 1 - (now - returnedAt) / settings.shortWindowSeconds
            demand = PerDimension { max(demand[$0], remembered[$0] * fade) }
            evidence = PerDimension { max(evidence[$0], remembered[$0] * fade) }
        }
        let guessed = PerDimension<Double> { max(0, demand[$0] - evidence[$0]) }
        // The ratchet judges the demand the engine sees: a constrained tenant's allocation rises because
        // it asked (its claim), not because it games.
        // (What it shows, before the level's hysteresis: the detector judges each tick's response.)
        if advance { judgeRatchet(allocation: allocation, demand: shown ?? demand, rules: rules) }
        suspectReasons = suspectPatterns(rules: rules)
        let inputShare = promptLong + completionLong > 0 ? promptLong / (promptLong + completionLong) : 0.5
        let suspect = !suspectReasons.isEmpty

        var alerts: [LoopAlert] = []
        if starved, let since = starvingSince {
            alerts.append(
                LoopAlert(
                    kind: "starved", severity: .critical, upstream: key.upstream, tenant: key.tenant,
                    message: starvingText + " (for \(SignalText.seconds(now - since)))", since: since))
        }
        let wanted = (wantedShort ?? demandShort).rpm
        let bound = !idle && (deniedConcurrency ?? 0) >= Self.concurrencyBoundShare * max(wanted, 10)
        concurrencyBoundSince = bound ? concurrencyBoundSince ?? now : nil
        suspectSince = suspect ? suspectSince ?? now : nil
        if bound, let concurrency = deniedConcurrency, let since = concurrencyBoundSince {
            // Denied, or kept waiting, by its own `max_concurrency` (or a gateway's per-upstream cap): its calls
            // take too long for the rate it asks, and more allocation would not reach it (round 10: 40-s answers
            // held standard tenants to 64 × 60 / 40 = 96 calls a minute).
            alerts.append(
                LoopAlert(
                    kind: "concurrency_bound", severity: .warning, upstream: key.upstream, tenant: key.tenant,
                    message: "\(key.tenant) on \(key.upstream): \(SignalText.number(concurrency)) requests a minute "
                        + "denied or kept waiting by a concurrency cap (its tier's max_concurrency, or a gateway's "
                        + "own), of \(SignalText.number(wanted)) wanted: more rate does not help",
                    since: since))
        }
        if suspect, let since = suspectSince {
            alerts.append(
                LoopAlert(
                    kind: "suspect_tenant", severity: .info, upstream: key.upstream, tenant: key.tenant,
                    message: "\(key.tenant) on \(key.upstream) looks like gaming: "
                        + suspectReasons.joined(separator: "; ") + " (no burst credit)",
                    since: since))
        }

        let observation = TenantObservation(
            tenant: key.tenant, upstream: key.upstream, tenantClass: tenantClass, suspect: suspect, demand: demand,
            served: servedShort, samples: samples, confidence: confidence, inputTokenShare: inputShare,
            clump: clump ?? PerDimension(0), pressing: suspect ? PerDimension(false) : pressing,
            spread: idle ? PerDimension(0) : spread(of: demand), fansOut: !idle && fansOut)
        let status = TenantStatus(
            key: key, tenantClass: tenantClass, suspect: suspect, suspectReasons: suspectReasons, demand: demand,
            // The short-window rates as the starvation rule reads them (against the allocation averaged the same
            // way, so both start from zero together): a young tenant's read below its long-window ones for a minute.
            servedShort: servedShort, servedLong: PerDimension { servedLong[$0] / filledLong }, deniedRPM: deniedShort,
            queuedRPM: queuedShort,
            peakToAverage: longRate.rpm > 0 ? max(1, peakDemand / longRate.rpm) : 1,
            tokensPerRequest: servedLong.rpm > 0 ? servedLong.tpm / servedLong.rpm : 0,
            trend: longRate.rpm > 0 ? shortRate.rpm / longRate.rpm - 1 : 0, lastActivityAt: lastActivityAt,
            samples: samples, retryRatio: eventsLong > 0 ? retriesLong / eventsLong : 0, queueWaitP95Ms: queueWait.p95,
            completionTokensP50: completionTokens.p50, completionTokensP95: completionTokens.p95, starved: starved,
            starvedSince: starved ? starvingSince : nil,
            gatewayShares: gatewayShares(
                rules: rules, sparse: demandShort.rpm * settings.shortWindowSeconds / 60 < rules.sparseSamples,
                shortWindow: settings.shortWindowSeconds, tenant: key.tenant),
            gatewayServed: gatewayServed(), young: isYoung(shortWindow: settings.shortWindowSeconds))
        return Classification(observation: observation, status: status, alerts: alerts, guessed: guessed)
    }

    /// The index of dispersion of the tenant's requests per tick (variance over mean, at least 1): 1 when
    /// they arrive independently, about the clump size when a task's calls come together.
    var dispersion: Double {
        let mean = tickCountMean ?? 0
        return mean > 0 ? max(1, ((tickCountSquare ?? 0) - mean * mean) / mean) : 1
    }

    /// How far a tenant wanting `demand` swings from one minute to the next: requests with index of
    /// dispersion `I` at `λ` a minute give a minute's count a variance of `I · λ`, and its tokens `s` times
    /// that deviation for `s` tokens a request. The engine covers two of these with the pool's slack
    /// (`allocation.demand_deviations`): an agent's tasks arrive in clumps, so a small tenant's minute swings
    /// by far more than the 20 % `demand_headroom` (a premium desk at 180 rpm in tasks of six calls swings by
    /// a fifth; its calls waited in the gateway queue, task p95 5.3 s against 3.4 s unqueued).
    func spread(of demand: PerDimension<Double>) -> PerDimension<Double> {
        let requests = demand.rpm.isFinite ? max(0, demand.rpm) : 0
        let deviation = (dispersion * requests).squareRoot()
        let tokensPerRequest = requests > 0 && demand.tpm.isFinite ? max(0, demand.tpm) / requests : 0
        return PerDimension(rpm: deviation, tpm: deviation * tokensPerRequest)
    }

    /// Keeps ``activeLevel`` (the level while active: up at once, down with the long window's weight; frozen
    /// while idle) and notes when the tenant comes back from idle.
    mutating func rememberActiveLevel(idle: Bool, now: Double, longWeight: Double) {
        if idle {
            wasIdle = true
            return
        }
        if wasIdle == true { returnedAt = now }
        wasIdle = false
        guard let level else { return }
        let previous = activeLevel ?? level
        activeLevel = PerDimension {
            level[$0] >= previous[$0] ? level[$0] : previous[$0] + longWeight * (level[$0] - previous[$0])
        }
    }

    /// The weight an EWMA over `window` seconds started `foldedSeconds` ago has gathered, `1 − e^(−t/τ)` (1 for a
    /// track restored without the count): its value divided by this is the rate over the time it covers.
    func filledWeight(over window: Double) -> Double {
        foldedSeconds.map { 1 - exp(-$0 / window) } ?? 1
    }

    /// Moves the demand level the engine is given (see ``ClassificationRules/levelNoiseMultiple``).
    ///
    /// The input is the short-window demand, corrected for a young track: an EWMA that started at zero
    /// `foldedSeconds` ago holds only `1 − e^(−foldedSeconds/τ)` of its weight, so it is divided by that (the exact
    /// rate of what was seen so far; a new tenant's first ticks would otherwise read as a fraction of
    /// what it sends, and its first tasks would wait for the average to catch up). The level jumps to it
    /// when it leaves the level by more than `levelNoiseMultiple` standard deviations of its noise —
    /// the variance of the short rate around the long one, a long-window EWMA — and by more than
    /// `levelDeadband` of the level (at least one request, or one request's tokens); or when it has
    /// stayed beyond the deadband on one side for `levelPersistSeconds` as a claim, a fall beyond its modelled
    /// noise or a rise beyond twice it — it, or (with no claim) the long-window rate, which then becomes the
    /// level. Otherwise the level holds: an
    /// agent's tasks of tens of calls make its short-window rate swing by a third around a steady
    /// demand, and every swing moved every allocation of the pool.
    mutating func moveLevel(
        fold: Fold, now: Double, rules: ClassificationRules, windows: (short: Double, long: Double),
        claim: PerDimension<Double>?, blocked: Bool
    ) -> PerDimension<Double> {
        let shortWindow = windows.short
        let filled = filledWeight(over: shortWindow)
        let filledLong = filledWeight(over: windows.long)
        let short = wantedShort ?? demandShort
        let long = wantedLong ?? demandLong
        let perRequest = PerDimension(rpm: 1, tpm: long.rpm > 0 ? long.tpm / long.rpm : 0)
        var current = level ?? PerDimension(0)
        var noise = levelNoise ?? PerDimension(0)
        var drift = levelDrift ?? PerDimension(0)
        var longDrift = levelLongDrift ?? PerDimension(0)
        var shown = PerDimension<Double>(0)
        // The noise a steady tenant's short rate shows: requests whose tick counts have an index of
        // dispersion `I` (1 when independent, the clump size when a task's calls come together) give an
        // EWMA over τ a variance of about `I · λ · 30 / τ` (λ per minute, τ in seconds). It is a floor under
        // the measured variance, which starts at zero and takes the long window to learn.
        let dispersion = self.dispersion
        // A sparse tenant (fewer than `sparseSamples` requests in the short window: a task now and then)
        // is measured over the long window: its short-window rate is one task's clump rising and decaying.
        // Not one that has stopped, though: its long window still remembers its old rate.
        let fewRequests = short.rpm / max(filled, .leastNonzeroMagnitude) * shortWindow / 60 < rules.sparseSamples
        if !fewRequests { lastDenseAt = now }
        let sparse = fewRequests && !hasStopped(now: now, shortWindow: shortWindow)
        // Back from idle within a short window, with a short window's worth of requests since: its exact rate
        // since then. Its EWMAs start from what they decayed to while it was idle, and a premium desk back
        // from a ten-minute outage at twice its old rate was read at a tenth of it in its first tick.
        var returned: PerDimension<Double>?
        if let since = returnSince, let seen = returnWanted {
            if now - since < shortWindow, seen.rpm >= rules.sparseSamples {
                let covered = max(now - since, fold.elapsed)
                returned = PerDimension { seen[$0] * 60 / covered }
            } else if now - since >= shortWindow {
                returnSince = nil
                returnWanted = nil
            }
        }
        // After that short window, and for two more: the short EWMA restarted from what it had decayed to while the
        // tenant was idle, and holds only `1 − e^(−t/τ)` of what came since (63 % a short window after the return):
        // read for that alone. Uncorrected, a premium copilot back from a ten-minute idle spell at 240 rpm was read
        // at 160 the moment the exact rate's window ended, and its level was cut from 300 to 166 (outside
        // evaluation round 17).
        var restarted: (base: PerDimension<Double>, remaining: Double)?
        if let base = returnBase, let at = returnBaseAt {
            if now - at >= 3 * shortWindow {
                (returnBase, returnBaseAt) = (nil, nil)
            } else if returned == nil, now - at >= shortWindow {
                restarted = (base, exp(-(now - at) / shortWindow))
            }
        }
        for dimension in RateDimension.allCases {
            let longRate = filledLong > 0 ? long[dimension] / filledLong : long[dimension]
            var shortRate = filled > 0 ? short[dimension] / filled : short[dimension]
            // A young track's rate is exactly what it asked for over the time its events cover: its first report
            // may hold a minute of backlog, which the EWMA counted as one tick's.
            if let folded = foldedSeconds, folded < shortWindow, let since = youngSince, let seen = youngWanted {
                shortRate = seen[dimension] * 60 / max(folded, now - since, fold.elapsed)
            }
            if let restarted {
                let before = restarted.base[dimension] * restarted.remaining
                shortRate = max(shortRate, (short[dimension] - before) / (1 - restarted.remaining))
            }
            let rate = max(sparse ? longRate : shortRate, returned?[dimension] ?? 0)
            let deviation = shortRate - longRate
            noise[dimension] += fold.long * (deviation * deviation - noise[dimension])
            let size = dimension == .rpm ? 1 : perRequest.tpm
            let modelled = dispersion * max(longRate, rate) * size * 30 / shortWindow
            let spread = max(noise[dimension], modelled).squareRoot()
            let input = max(rate, claim?[dimension] ?? 0)
            shown[dimension] = input
            // Within its first short window a track is still learning what it wants: the level follows.
            guard level != nil, (foldedSeconds ?? .infinity) >= shortWindow else {
                current[dimension] = input
                continue
            }
            let gap = input - current[dimension]
            let deadband = max(rules.levelDeadband * current[dimension], perRequest[dimension])
            // The long window off the level beyond the deadband, on one side, for `levelPersistSeconds`: the
            // level was set off the mean by the noise of its moment; it moves to the long-window rate.
            let longGap = longRate - current[dimension]
            if abs(longGap) > deadband, claim == nil {
                let side = longGap > 0 ? 1.0 : -1.0
                longDrift[dimension] =
                    longDrift[dimension] * side > 0 ? longDrift[dimension] + side * fold.elapsed : side * fold.elapsed
            } else {
                longDrift[dimension] = 0
            }
            if abs(gap) <= deadband {
                drift[dimension] = 0
                if abs(longDrift[dimension]) >= rules.levelPersistSeconds {
                    // Unless the long window still holds an earlier regime: the short and long rates apart by more
                    // than the tenant's own (modelled) noise explains — a step in demand, an idle spell within the
                    // long window. Then the long rate is not the mean, and the level stays. A premium desk back
                    // from a ten-minute outage at twice its rate was cut from 291 to the long window's 119 rpm
                    // three minutes later, its tasks queueing for a minute until the level jumped back.
                    // Apart by more than the deadband is apart too: the modelled noise of a clumpy tenant's tokens
                    // is a third of its rate, and a premium desk at a steady 470k TPM, its long window still holding
                    // the 2 tasks a minute before its surge, was cut to the long window's 300k every other minute
                    // (the short rate agreeing with the level all along) and climbed back a minute later.
                    let regimeChanged =
                        abs(shortRate - longRate) > min(rules.levelNoiseMultiple * modelled.squareRoot(), deadband)
                    if !regimeChanged { current[dimension] = longRate }
                    longDrift[dimension] = 0
                }
                continue
            }
            // Persistence (the rule in the doc comment above): a smaller rise nobody refuses is covered by the
            // headroom and the swing allowance, and counted it moved every allocation of the pool with an agent's
            // noise (noisy-signals: 151 → 147 → 141 → 136 → 143 → 152 rpm while 120 arrived). A fall counts sooner:
            // what a tenant no longer uses should go to the others. Measurements and the trials that did not land:
            // docs/scenarios.md, *Where allot falls short*.
            let side = gap > 0 ? 1.0 : -1.0
            let claimed = (claim?[dimension] ?? 0) > rate
            let modelledSpread = modelled.squareRoot()
            if claimed || (gap < 0 && -gap > modelledSpread) || gap > 2 * modelledSpread {
                drift[dimension] =
                    drift[dimension] * side > 0 ? drift[dimension] + side * fold.elapsed : side * fold.elapsed
            } else {
                drift[dimension] = 0
            }
            // A rise of a blocked tenant (its requests are denied in this dimension) is evidence, not noise:
            // it passes at once.
            let evidence = blocked && gap > 0 && (claim?[dimension] ?? 0) > 0
            if evidence || abs(gap) > rules.levelNoiseMultiple * spread
                || abs(drift[dimension]) >= rules.levelPersistSeconds
            {
                current[dimension] = input
                drift[dimension] = 0
                longDrift[dimension] = 0
            }
        }
        level = current
        levelNoise = noise
        levelDrift = drift
        levelLongDrift = longDrift
        return shown
    }

    /// Whether the tenant has stopped: it was not sparse when it went quiet (its short window held a sparse
    /// tenant's requests or more at or after its last demand event, ``lastDenseAt``), and it has been quiet for
    /// longer than a short window and than twice the longest quiet spell it showed while active
    /// (``longestQuiet``, fading over the long window). Then its long-window rate, which still remembers its old
    /// rate, is not its demand: a critical tenant whose tasks stopped at 150 rpm fell below the sparse threshold
    /// a minute and a half later, was measured over the long window again, and held 205 rpm of a 1,000-rpm pool,
    /// idle, until it was classified idle three minutes later. A tenant sparse while it works (a task of ten calls
    /// every five minutes) keeps its long-window rate between tasks until it is idle: on a 60-rpm pool, reading
    /// such tenants at their short rate once a minute passed took utilisation from 85 to 78 %. So does one
    /// whose demand all came in one tick (no quiet spell seen: nothing tells a pause from a stop).
    func hasStopped(now: Double, shortWindow: Double) -> Bool {
        guard let last = lastActivityAt, let quiet = longestQuiet, let dense = lastDenseAt, dense >= last else {
            return false
        }
        return now - last > max(shortWindow, 2 * quiet)
    }

    /// Whether the tenant's work fans out into tasks (SPEC 6.5, "detected from `task_id` fan-out"): over the
    /// short window its first attempts carry task ids, at least ``fanOutCalls`` calls a task started. What the
    /// engine lends detected burst credit on, with the class `bursting`: an agent mid-task, not one that
    /// merely sends more single calls.
    var fansOut: Bool {
        guard let calls = taskCallsShort, let started = tasksStartedShort, started > 0 else { return false }
        return calls >= Self.fanOutCalls * started
    }

    /// Calls a task must make, on average, for the tenant's work to count as fanning out.
    static let fanOutCalls = 2.0

    /// The share of the requests it wants that its concurrency cap denies or keeps waiting (short window; at least
    /// one a minute) from which a tenant is alerted `concurrency_bound`.
    static let concurrencyBoundShare = 0.1

    /// What a constrained tenant claims (see ``ClassificationRules/constrainedProbe``), per dimension.
    ///
    /// A tenant is constrained when its requests wait in gateway queues (at least
    /// ``ClassificationRules/constrainedWaiting`` on average) or are denied by its rate buckets (at least
    /// ``ClassificationRules/constrainedDeniedShare`` of what it wants). Denials name the
    /// limit (`error_type` `rpm`, `tpm`; one without a name counts for both): other denials — its
    /// concurrency cap, a budget, an open circuit — are not helped by more rate and do not count. It claims a
    /// dimension that it fills — served, plus one request, at least ``ClassificationRules/constrainedUse`` of
    /// the allocation there (averaged like the served rate), and at least 75 % as much as of the most used
    /// one — and that the denials name (when they name any). It is *blocked* in a dimension whose bucket
    /// denies at least five times `constrainedDeniedShare` of what it wants. A claim is what the tenant was
    /// served × `(1 + constrainedProbe) / (1 + demand_headroom)` (the engine's headroom on top makes the
    /// probe's step exactly), and when blocked at least its allocation × `(1 + constrainedProbe)`. Nil when it
    /// claims nothing.
    private func constrainedClaim(allocation: PerDimension<Double>, rules: ClassificationRules, headroom: Double)
        -> (claim: PerDimension<Double>, blocked: Bool, pressing: PerDimension<Bool>)?
    {
        let wanted = max((wantedShort ?? demandShort).rpm, 1)
        let unnamed = deniedUnnamed ?? 0
        let byLimit = deniedByLimit ?? PerDimension(0)
        let rateDenied = PerDimension<Double> { byLimit[$0] + unnamed }
        guard
            (waitingShort ?? 0) >= rules.constrainedWaiting
                || byLimit.rpm + byLimit.tpm + unnamed >= rules.constrainedDeniedShare * wanted
        else { return nil }
        // Within one request of the allocation counts as filling it: a tenant of 30k-token calls cannot
        // use the last 20k of a minute's tokens, and one call more or less in the window is noise.
        let perRequest = PerDimension(rpm: 1, tpm: servedLong.rpm > 0 ? servedLong.tpm / servedLong.rpm : 0)
        // Against the allocation averaged over the same window as the served rate (``allocatedShort``).
        func usage(_ dimension: RateDimension) -> Double? {
            let allocated = min(allocation[dimension], allocatedShort?[dimension] ?? allocation[dimension])
            guard allocated > 0, allocated.isFinite else { return nil }
            return (servedShort[dimension] + perRequest[dimension]) / allocated
        }
        let named = byLimit.rpm + byLimit.tpm
        // Where the denials name one bucket only, the other is not what holds the tenant back.
        func notNamed(_ dimension: RateDimension) -> Bool {
            named >= rules.constrainedNamedDenials && byLimit[dimension] < 0.1 * named
        }
        // The most used of the dimensions the denials leave in question: one they do not name is not the binding
        // one, however full. Counted, a premium surge denied by its RPM bucket whose token allocation lagged (its
        // tokens "used" at 175 %) claimed in neither dimension for a minute at a time, its allocation cut below its
        // arrivals between claims (night-collision seed 7: 514 → 195 rpm against 260 arriving, premium p95 33 s).
        let most = max(notNamed(.rpm) ? 0 : usage(.rpm) ?? 0, notNamed(.tpm) ? 0 : usage(.tpm) ?? 0)
        let blocked = PerDimension<Bool> { rateDenied[$0] >= rules.constrainedDeniedShare * 5 * wanted }
        func claimed(_ dimension: RateDimension) -> Double {
            guard let used = usage(dimension), used >= rules.constrainedUse, used >= 0.75 * most else { return 0 }
            if notNamed(dimension) { return 0 }
            // A blocked tenant claims its allocation plus the probe, compounding tick after tick until
            // water-filling caps it — its served rate, an average over the window, lags every rise. One that
            // only waits in gateway queues claims what it was served (its own allocation and what it
            // borrowed) plus the probe: clumps that meet the bucket wait too, and claims on the allocation
            // ratcheted such tenants up tick after tick while they used less.
            // The engine adds `demand_headroom` to every demand; for a tenant that only waits the probe is the
            // whole step its claim asks for, so the claim leaves the headroom out (served × 1.25 became an
            // allocation of served × 1.5, and clumpy tenants that were served all they asked for took that
            // from the rest). A blocked tenant's claim keeps it: its requests are being refused.
            let served =
                (servedShort[dimension] + perRequest[dimension]) * (1 + rules.constrainedProbe) / (1 + max(0, headroom))
            guard blocked[dimension] else { return served }
            // Never more than its attempts (every attempt, retries included: all it could use now) plus the
            // probe, less the engine's headroom: compounding on the allocation alone ran on while the served
            // rate lagged, and an agent surge of 270 rpm (attempting 300–460) was allocated 650, then cut,
            // then claimed back up — a cycle of about 35 s (night-collision). The attempts are read over the
            // short window or the fast one, whichever is higher: after a jump the short window's average
            // held the claim back for most of a minute (a support surge whose tasks have a 60-s deadline
            // reached its share 50 s in), while in steady state the two agree and nothing changes.
            let attemptRate = max(
                demandShort[dimension], attemptsFast?[dimension] ?? 0, wantedFast?[dimension] ?? 0)
            let attempted = attemptRate * (1 + rules.constrainedProbe) / (1 + max(0, headroom))
            return max(served, min(allocation[dimension] * (1 + rules.blockedGrowth), attempted))
        }
        let claim = PerDimension(rpm: claimed(.rpm), tpm: claimed(.tpm))
        let pressing = PerDimension<Bool> { claim[$0] > 0 && blocked[$0] }
        let blockedClaim = pressing.rpm || pressing.tpm
        return claim.rpm > 0 || claim.tpm > 0 ? (claim, blockedClaim, pressing) : nil
    }

    /// The tier's `cold_start_demand`, a percentage resolving against the pool's capacity (the
    /// Observer's estimate, else the declared one) after the safety margin, like every quantity.
    /// Computed once per tier and pool per tick (`context.priors`).
    private func coldStartPrior(context: TrackContext) -> PerDimension<Double> {
        let policy = context.policy
        let tierName = policy.tierName(ofTenant: key.tenant)
        let memo = AllocationKey(tenant: tierName, upstream: key.upstream)
        if let known = context.priors.values[memo] { return known }
        var prior = PerDimension<Double>(0)
        if let tier = policy.tier(named: tierName) {
            let capacity = context.capacity(of: key.upstream)
            prior = PerDimension { max(0, tier.coldStartDemand[$0].resolved(capacity: capacity[$0])) }
        }
        context.priors.values[memo] = prior
        return prior
    }

    /// First seen less than `shortWindow` ago, and its requests so far too few to show that they keep to the
    /// gateways that saw them: fewer than ``stickyEvidence`` per gateway. Calls spread evenly over G gateways
    /// put five in a row on one of them with probability G⁻⁴; a tenant routed to one gateway (sticky
    /// routing, consistent hashing by tenant) is recognised after its fifth request, not a minute later.
    func isYoung(shortWindow: Double) -> Bool {
        guard (foldedSeconds ?? .infinity) < shortWindow else { return false }
        return (youngWanted?.rpm ?? 0) < Self.stickyEvidence * Double(max(1, gateways.count))
    }

    /// Requests per gateway seen that show a young tenant's calls keep to the gateways that saw them.
    static let stickyEvidence = 5.0

    /// Each gateway's share of the tenant's demand: the short-window EWMAs normalised and drawn toward an
    /// even split by as much as they could be noise (``evidenceOfUnevenRouting(total:even:shortWindow:)``),
    /// every gateway lifted to `minimumGatewayShare` (a gateway that just started seeing the tenant has
    /// almost no history yet still needs a slice), tilted by ``gatewayTilt`` (``tilts(of:tenant:)``), then
    /// normalised again so the shares sum to 1.
    ///
    /// A sparse tenant (fewer than `sparseSamples` requests in the short window) has no share worth the
    /// name: where its last task's few calls happened to land is noise, and a gateway that got one of them
    /// would hold a sliver of its slice while the next task's calls land there too. Its gateways share
    /// evenly, tilted the same way.
    private func gatewayShares(
        rules: ClassificationRules, sparse: Bool, shortWindow: Double, tenant: String
    ) -> [String: Double] {
        guard !gateways.isEmpty else { return [:] }
        let even = 1 / Double(gateways.count)
        let tilt = Self.tilts(of: gateways.map(\.name), tenant: tenant)
        var total = 0.0
        for gateway in gateways { total += gateway.demand }
        let weight = sparse ? 0 : evidenceOfUnevenRouting(total: total, even: even, shortWindow: shortWindow)
        let lifted = gateways.map { gateway in
            let measured = total > 0 ? even + weight * (gateway.demand / total - even) : even
            return (sparse ? even : max(rules.minimumGatewayShare, measured))
                * (1 + Self.gatewayTilt * (tilt[gateway.name] ?? 0))
        }
        let sum = lifted.reduce(0, +)
        var shares = [String: Double](minimumCapacity: gateways.count)
        for (gateway, share) in zip(gateways, lifted) { shares[gateway.name] = share / sum }
        return shares
    }

    /// How far the gateways' shares are tilted away from each other: ±2 % (see ``tilts(of:tenant:)``).
    static let gatewayTilt = 0.02

    /// Each gateway's tilt for one tenant, spread evenly over −1…1: the gateways in name order, rotated by a
    /// hash of the tenant's name (so that no gateway is always the short one). One gateway: 0.
    ///
    /// Why: slices of equal rates at every gateway, retuned by the same snapshot at the same instant and
    /// filled by a balancer that hands one task's parallel calls to every gateway at once, admit in lockstep —
    /// each gateway's next request at the same instant, for as long as the tenant's calls wait at all of them.
    /// The provider then sees one request from every gateway at once, every time: a burst of G. Where its own
    /// bucket holds only a few requests, that burst is refused. With the shares drawn to an even split, an
    /// 18-rpm pool (3 requests of bucket) behind three gateways saw 89 % of its calls admitted at the same
    /// instant as a call at another gateway (3 % with the measured, uneven shares); its 429s cut the capacity
    /// estimate to 5 rpm and held it there, and a random scenario starved 56.8 tenant-minutes instead of
    /// 13.3 (seeds 1–4). Slices 5 % apart drift a twentieth of a period apart per period: 4 % of the calls
    /// at the same instant as another gateway's, 13.8 tenant-minutes; ±2 %: 13.4; ±1 %: 19.4. The tilt has a
    /// cost: an evenly routed tenant's short gateway denies a little earlier than the others (noisy-signals,
    /// seeds 9–40: 1.2 starved tenant-minutes without it, 1.4 at ±2 %, 1.7 at ±5 %).
    static func tilts(of gateways: [String], tenant: String) -> [String: Double] {
        guard gateways.count > 1 else { return gateways.first.map { [$0: 0] } ?? [:] }
        let names = gateways.sorted()
        var hash = StableHash()
        hash.add(tenant)
        let count = names.count
        let rotation = Int(hash.mixed % UInt64(count))
        var tilts = [String: Double](minimumCapacity: count)
        for (rank, name) in names.enumerated() {
            tilts[name] = 2 * Double((rank + rotation) % count) / Double(count - 1) - 1
        }
        return tilts
    }

    /// How much of the measured departure of the gateways' shares from an even split to keep, 0–1: the
    /// positive-part James–Stein factor `1 − (G − 1) / X²`, where `X²` is Pearson's statistic of the
    /// gateways' counts against an even split. A load balancer that spreads calls evenly leaves `X²` near
    /// its expectation `G − 1` (so the shares stay even); routing that keeps a tenant to some gateways
    /// (sticky sessions, consistent hashing) makes it large (so they follow the counts). The counts are the
    /// short-window EWMAs of requests per minute: as a count, `2 · short_window` of them, divided by the
    /// tenant's index of dispersion (calls in clumps carry less evidence each).
    ///
    /// Why: behind round-robin gateways the short window's counts of a tenant at 100 rpm differ by about
    /// a tenth from gateway to gateway, and the slices followed: one tenant's shares wandered between 0.22
    /// and 0.45 of its allocation (an even split is 0.33) while its calls came evenly to all three, so a
    /// slice sat full while the calls waited at another gateway. With the shares forced even, a random
    /// scenario of lumpy token-bound tenants starved 36.9 tenant-minutes instead of 51.1 (seeds 1–2).
    func evidenceOfUnevenRouting(total: Double, even: Double, shortWindow: Double) -> Double {
        guard gateways.count > 1, total > 0, total.isFinite else { return 1 }
        var spread = 0.0
        for gateway in gateways {
            let departure = gateway.demand / total - even
            spread += departure * departure
        }
        let count = total * 2 * shortWindow / 60 / dispersion
        let chiSquare = count * spread / even
        guard chiSquare > 0 else { return 0 }
        return max(0, 1 - Double(gateways.count - 1) / chiSquare)
    }

    private func gatewayServed() -> [String: PerDimension<Double>] {
        var served = [String: PerDimension<Double>](minimumCapacity: gateways.count)
        for gateway in gateways { served[gateway.name] = gateway.served }
        return served
    }

    // MARK: Suspect patterns

    /// Judges allocation rises the tenant did not ask for: a rise of at least `allocationRise` while
    /// the tenant was unconstrained (demand below 95 % of its allocation) and its demand flat the tick
    /// before (within 5 %: the rise was not demand-driven), followed or not within `followTicks` by a
    /// demand rise of at least `followFraction` of the allocation's rise and at least 5 %. One dimension
    /// is judged: RPM when allocated, else TPM.
    private mutating func judgeRatchet(
        allocation: PerDimension<Double>?, demand demands: PerDimension<Double>, rules: ClassificationRules
    ) {
        guard let allocation else {
            ratchet.previousAllocation = nil
            return
        }
        let dimension: RateDimension = allocation.rpm > 0 ? .rpm : .tpm
        let allocated = allocation[dimension]
        let demand = demands[dimension]
        if let before = ratchet.pendingDemandBefore {
            if demand >= before + rules.followFraction * ratchet.pendingRise, demand >= 1.05 * before {
                ratchet.record(followed: true)
            } else {
                ratchet.pendingTicks -= 1
                if ratchet.pendingTicks <= 0 { ratchet.record(followed: false) }
            }
        }
        if ratchet.pendingDemandBefore == nil, let previous = ratchet.previousAllocation, previous > 0,
            allocated >= previous * (1 + rules.allocationRise), ratchet.previousDemand < 0.95 * previous,
            ratchet.previousDemand <= ratchet.earlierDemand * 1.05
        {
            ratchet.pendingDemandBefore = ratchet.previousDemand
            ratchet.pendingRise = allocated - previous
            ratchet.pendingTicks = rules.followTicks
        }
        ratchet.previousAllocation = allocated
        ratchet.earlierDemand = ratchet.previousDemand
        ratchet.previousDemand = demand
    }

    private func suspectPatterns(rules: ClassificationRules) -> [String] {
        var reasons: [String] = []
        if ratchet.judged >= rules.followMinimumRises, ratchet.followedShare >= rules.followShare {
            let window = min(ratchet.judged, 16)
            reasons.append(
                "demand rose after \(Int((ratchet.followedShare * Double(window)).rounded())) of the last \(window) "
                    + "allocation rises it did not ask for")
        }
        if deniedLong >= rules.floodMinimumRPM, demandLong.rpm > 0, deniedLong >= rules.floodShare * demandLong.rpm,
            retriesLong < rules.floodRetryShare * deniedLong
        {
            reasons.append(
                "denied flood: \(SignalText.number(deniedLong)) denied per minute "
                    + "(\(SignalText.percent(deniedLong / demandLong.rpm)) of demand), "
                    + "\(SignalText.percent(retriesLong / deniedLong)) retried")
        }
        if nearEmptyLong >= rules.nearEmptyMinimumRPM, servedLong.rpm > 0,
            nearEmptyLong >= rules.nearEmptyShare * servedLong.rpm
        {
            reasons.append(
                "near-empty requests: \(SignalText.percent(nearEmptyLong / servedLong.rpm)) of served requests "
                    + "carry at most \(rules.nearEmptyTokens) tokens")
        }
        return reasons
    }
}
