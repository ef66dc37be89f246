import AllotJSON

extension Policy {
    /// The whole policy as one JSON document in the policy file format, every default filled in.
    ///
    /// It is itself a valid policy file (loading it gives an equal policy), which makes it the form
    /// to show operators (`GET /v1/policy`) and to hash into `policy_version`.
    public var canonicalJSON: JSON {
        var root = JSONObject()
        root["loop"] = [
            "interval_s": .number(loop.intervalSeconds), "lease_s": .number(loop.leaseSeconds),
            "forget_after_s": .number(loop.forgetAfterSeconds),
        ]
        root["allocation"] = [
            "safety_margin": .number(allocation.safetyMargin), "demand_headroom": .number(allocation.demandHeadroom),
            "demand_deviations": .number(allocation.demandDeviations),
            "surplus": .string(allocation.surplus.rawValue), "burst_reserve": .number(allocation.burstReserve),
            "idle_share": .number(allocation.idleShare),
        ]
        root["dampening"] = [
            "alpha": .number(dampening.alpha), "deadband": .number(dampening.deadband),
            "persist_ticks": .int(Int64(dampening.persistTicks)), "max_up": .number(dampening.maxUp),
            "max_down": .number(dampening.maxDown), "min_step": dampening.minStep.json,
            "hold_surplus": .bool(dampening.holdSurplus),
        ]
        root["default_tier"] = .string(defaultTier)
        root["costs"] = ["currency": .string(costs.currency), "default_price": costs.defaultPrice.json]
        root["alerts"] = [
            "starvation_ratio": .number(alerts.starvationRatio),
            "starvation_window_s": .number(alerts.starvationWindowSeconds),
            "gateway_lag_versions": .int(Int64(alerts.gatewayLagVersions)),
            "gateway_lag_s": .number(alerts.gatewayLagSeconds), "drift_ratio": .number(alerts.driftRatio),
            "drift_window_s": .number(alerts.driftWindowSeconds),
            "upstream_error_rate": .number(alerts.upstreamErrorRate),
        ]
        root["proposals"] = [
            "ttl_s": .number(proposals.ttlSeconds), "approval_ttl_s": .number(proposals.approvalTTLSeconds),
            "reject_cooldown_s": .number(proposals.rejectCooldownSeconds),
        ]
        root["classifier"] = [
            "short_window_s": .number(classifier.shortWindowSeconds),
            "long_window_s": .number(classifier.longWindowSeconds),
            "idle_after_s": .number(classifier.idleAfterSeconds),
            "cold_start_samples": .int(Int64(classifier.coldStartSamples)),
            "sustained_over_s": .number(classifier.sustainedOverSeconds),
            "cold_start_share": .number(classifier.coldStartShare),
        ]
        root["observer"] = [
            "short_window_s": .number(observer.shortWindowSeconds),
            "long_window_s": .number(observer.longWindowSeconds),
            "decrease_factor": .number(observer.decreaseFactor),
            "decrease_hold_s": .number(observer.decreaseHoldSeconds),
            "capacity_floor": .number(observer.capacityFloor),
            "probe_utilisation": .number(observer.probeUtilisation), "probe_step": .number(observer.probeStep),
            "probe_recover": .number(observer.probeRecover),
            "latency_ratio": .number(observer.latencyRatio),
            "latency_recover_ratio": .number(observer.latencyRecoverRatio),
            "latency_load_rise": .number(observer.latencyLoadRise),
            "latency_min_samples": .int(Int64(observer.latencyMinSamples)),
            "degrade_factor": .number(observer.degradeFactor),
            "circuit_open_ratio": .number(observer.circuitOpenRatio),
            "circuit_severe_ratio": .number(observer.circuitSevereRatio),
            "circuit_min_attempts": .int(Int64(observer.circuitMinAttempts)),
            "circuit_quiet_s": .number(observer.circuitQuietSeconds),
            "shared_tolerance": .number(observer.sharedTolerance),
        ]
        root["tiers"] = .object(JSONObject(tiers.map { ($0.name, $0.json) }))
        root["upstreams"] = .object(JSONObject(upstreams.map { ($0.id, $0.json) }))
        root["tenants"] = .object(JSONObject(tenants.map { ($0.id, $0.json) }))
        root["task_budgets"] = .object(
            JSONObject(
                taskBudgets.sorted { $0.key < $1.key }.map { entry in
                    (
                        entry.key.rawValue,
                        [
                            "max_calls": .int(Int64(entry.value.maxCalls)),
                            "max_tokens": .int(Int64(entry.value.maxTokens)),
                        ] as JSON
                    )
                }))
        return .object(root)
    }

    /// `canonicalJSON` serialized with sorted keys: equal policies give equal bytes, whatever files
    /// and field order they came from.
    public var canonicalBytes: [UInt8] { canonicalJSON.serialized(sortedKeys: true) }
}

extension Tier {
    /// The tier in the policy file format.
    public var json: JSON {
        var object: JSONObject = [
            "priority": .int(Int64(priority)), "weight": .number(weight), "floor": floor.json,
            "ceiling": ceiling.json, "guard_min": guardMin.json, "guard_max": guardMax.json,
            "starvation_guard": starvationGuard.json, "idle_allocation": idleAllocation.json,
            "cold_start_demand": coldStartDemand.json,
            "burst": [
                "enabled": .bool(burst.enabled), "max_credit": burst.maxCredit.json,
                "max_ttl_s": .number(burst.maxTTLSeconds), "repay_within_s": .number(burst.repayWithinSeconds),
                "default_cooldown_s": .number(burst.defaultCooldownSeconds),
                "detect_fan_out": .bool(burst.detectFanOut),
            ],
            "queue_wait_slo_ms": .number(queueWaitSLOMilliseconds), "mode": .string(mode.rawValue),
            "max_concurrency": .int(Int64(maxConcurrency)), "bucket_s": .number(bucketSeconds),
            "budgets": .array(budgets.map(\.json)),
        ]
        // Written only where it differs from the weight it defaults to: the same rules, the same version.
        if let queueWeight, queueWeight != weight { object["queue_weight"] = .number(queueWeight) }
        return .object(object)
    }
}

extension UpstreamPolicy {
    /// The pool in the policy file format.
    public var json: JSON {
        var capacityObject = JSONObject()
        for dimension in RateDimension.allCases {
            if let value = capacity[dimension] { capacityObject[dimension.rawValue] = .number(value) }
        }
        var object: JSONObject = [
            "capacity": .object(capacityObject),
            "header_window": [
                "requests": .string(headerWindow.rpm.rawValue), "tokens": .string(headerWindow.tpm.rawValue),
            ],
        ]
        if let price { object["price"] = price.json }
        return .object(object)
    }
}

extension TenantPolicy {
    /// The tenant entry in the policy file format (only what it sets; a weight of 1, the default multiplier, is
    /// not written: the same rules, the same version).
    public var json: JSON {
        var object: JSONObject = ["tier": .string(tier)]
        if let weight, weight != 1 { object["weight"] = .number(weight) }
        if let floor = floor.partialJSON { object["floor"] = floor }
        if let ceiling = ceiling.partialJSON { object["ceiling"] = ceiling }
        if !budgets.isEmpty { object["budgets"] = .array(budgets.map(\.json)) }
        if let group { object["group"] = .string(group) }
        return .object(object)
    }
}

extension SpendBudget {
    /// The budget in the policy file format.
    public var json: JSON {
        [
            "window": .string(window.rawValue), "amount": .number(amount), "soft": soft.json,
            "throttle": throttle.json, "hard": hard.json, "hard_action": .string(hardAction.rawValue),
        ]
    }
}

extension Price {
    /// The price in the policy file format.
    public var json: JSON {
        [
            "input_per_mtok": .number(inputPerMillionTokens), "output_per_mtok": .number(outputPerMillionTokens),
            "per_request": .number(perRequest),
        ]
    }
}

extension Quantity {
    /// A number for absolute values, `"N%"` for percentages, `"unbounded"` for no limit.
    public var json: JSON {
        switch self {
        case .absolute(let value) where value.isFinite: .number(value)
        case .absolute, .percent: .string(jsonText)
        }
    }
}

extension PerDimension where Value == Quantity {
    /// `{"rpm": …, "tpm": …}`.
    public var json: JSON { ["rpm": rpm.json, "tpm": tpm.json] }
}

extension PerDimension where Value == Quantity? {
    /// The dimensions that are set, or nil when none is.
    var partialJSON: JSON? {
        var object = JSONObject()
        for dimension in RateDimension.allCases {
            if let value = self[dimension] { object[dimension.rawValue] = value.json }
        }
        return object.isEmpty ? nil : .object(object)
    }
}

extension JSON {
    /// A number, written as an integer when it is one (so canonical forms read `5`, not `5.0`).
    static func number(_ value: Double) -> JSON {
        if value == value.rounded(), abs(value) < 9e15 { return .int(Int64(value)) }
        return .double(value)
    }
}
