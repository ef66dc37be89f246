import AllotJSON

extension Policy {
    /// Loads and validates policy files (SPEC 10).
    ///
    /// **Combining files.** Files are read in file-name order, and each may hold any subset of the
    /// top-level sections. Sections merge field by field (`loop`, `allocation`, `dampening`, `costs`,
    /// `alerts`, `proposals`, `classifier`, `observer`, `default_tier`); named maps merge by name (`tiers`,
    /// `upstreams`, `tenants`, `task_budgets`). Anything defined twice — the same field, or the same
    /// tier, upstream, tenant or task class in two files — is an error naming both files: there is
    /// no precedence to reason about.
    ///
    /// - Throws: `PolicyError` with *every* issue found, each naming file, JSON path and reason.
    public static func load(files: [PolicyFile]) throws(PolicyError) -> Policy {
        var loader = PolicyLoader(files: files)
        let policy = loader.load()
        if !loader.issues.isEmpty { throw PolicyError(issues: loader.issues) }
        return policy
    }

    /// `load(files:)` for `(name, bytes)` pairs, e.g. `AllotAssets.defaultPolicies.map { ($0.name, $0.bytes) }`.
    public static func load(files: [(name: String, bytes: [UInt8])]) throws(PolicyError) -> Policy {
        try load(files: files.map { PolicyFile(name: $0.name, bytes: $0.bytes) })
    }

    /// Every issue in `files`; empty when they form a valid policy.
    public static func validate(files: [PolicyFile]) -> [PolicyIssue] {
        var loader = PolicyLoader(files: files)
        _ = loader.load()
        return loader.issues
    }
}

/// Field names per object, for unknown-field detection and suggestions; `policies/README.md`
/// documents each.
enum PolicyFields {
    static let sections = [
        "loop", "allocation", "dampening", "costs", "alerts", "proposals", "classifier", "observer",
    ]
    static let maps = ["tiers", "upstreams", "tenants", "task_budgets"]
    static let topLevel = ["description", "default_tier"] + sections + maps
    static let loop = ["interval_s", "lease_s", "forget_after_s"]
    static let allocation = [
        "safety_margin", "demand_headroom", "demand_deviations", "surplus", "burst_reserve", "idle_share",
    ]
    static let dampening = ["alpha", "deadband", "persist_ticks", "max_up", "max_down", "min_step", "hold_surplus"]
    static let tier = [
        "description", "priority", "weight", "floor", "ceiling", "guard_min", "guard_max", "starvation_guard",
        "idle_allocation", "cold_start_demand", "burst", "queue_wait_slo_ms", "queue_weight", "mode",
        "max_concurrency", "bucket_s", "budgets",
    ]
    static let burst = ["enabled", "max_credit", "max_ttl_s", "repay_within_s", "default_cooldown_s", "detect_fan_out"]
    static let budget = ["window", "amount", "soft", "throttle", "hard", "hard_action"]
    static let upstream = ["description", "capacity", "header_window", "price"]
    static let headerWindow = ["requests", "tokens"]
    static let price = ["input_per_mtok", "output_per_mtok", "per_request"]
    static let tenant = ["description", "tier", "weight", "floor", "ceiling", "budgets", "group"]
    static let costs = ["currency", "default_price"]
    static let taskBudget = ["max_calls", "max_tokens"]
    static let alerts = [
        "starvation_ratio", "starvation_window_s", "gateway_lag_versions", "gateway_lag_s", "drift_ratio",
        "drift_window_s", "upstream_error_rate",
    ]
    static let proposals = ["ttl_s", "approval_ttl_s", "reject_cooldown_s"]
    static let classifier = [
        "short_window_s", "long_window_s", "idle_after_s", "cold_start_samples", "sustained_over_s",
        "cold_start_share",
    ]
    static let observer = [
        "short_window_s", "long_window_s", "decrease_factor", "decrease_hold_s", "capacity_floor",
        "probe_utilisation", "probe_step", "probe_recover", "latency_ratio", "latency_recover_ratio",
        "latency_load_rise",
        "latency_min_samples",
        "degrade_factor", "circuit_open_ratio", "circuit_severe_ratio", "circuit_min_attempts", "circuit_quiet_s",
        "shared_tolerance",
    ]

    /// What an entry of each named map is called in messages.
    static func entryNoun(_ map: String) -> String {
        switch map {
        case "tiers": "tier"
        case "upstreams": "upstream"
        case "tenants": "tenant"
        case "task_budgets": "task budget"
        default: "entry"
        }
    }
}

/// Merges the files, then reads the merged document into a `Policy`, attributing every problem to
/// the file that defined the value at fault.
struct PolicyLoader {
    private let files: [PolicyFile]
    private var reader = FieldReader()
    private var mergeIssues: [PolicyIssue] = []
    /// Which file defined each merged path (section fields, map entries, `default_tier`).
    private var origins: [JSONPath: String] = [:]
    /// A file could not be read (not JSON, or not an object). Checks that relate values across files — at
    /// least one tier, `default_tier` naming one, a tenant's tier — are then skipped: the unread file may hold
    /// what they look for, and a trailing comma in tiers.json had also reported "engine.json: $.tiers: no
    /// tiers are defined".
    private var unreadFile = false

    init(files: [PolicyFile]) {
        self.files = files.sorted { $0.name < $1.name }
    }

    /// All issues, merge problems first, then by file and path.
    var issues: [PolicyIssue] {
        let fallback = files.first?.name ?? "(no policy files)"
        // A path no file defined is named after the file that would: "tiers.json: $.tiers: no tiers are defined"
        // with tiers.json deleted, not the first file's name (round 13 read "engine.json: $.tiers").
        func conventional(_ path: JSONPath) -> String? {
            guard case .key(let name)? = path.segments.first else { return nil }
            switch name {
            case "tiers", "default_tier": return "tiers.json"
            case "tenants": return "tenants.json"
            case "upstreams": return "upstreams.json"
            default: return nil
            }
        }
        let readIssues = reader.problems.map { problem in
            PolicyIssue(
                file: problem.path.prefixes.lazy.compactMap { origins[$0] }.first ?? conventional(problem.path)
                    ?? fallback,
                path: problem.path.description, code: problem.code, message: problem.message)
        }
        return mergeIssues + readIssues
    }

    mutating func load() -> Policy {
        let merged = merge()
        return read(merged)
    }

    // MARK: Merge

    private mutating func merge() -> JSONObject {
        var merged = JSONObject()
        for file in files {
            let document: JSON
            do {
                document = try JSON.parseFile(file.bytes)
            } catch {
                unreadFile = true
                mergeIssues.append(
                    PolicyIssue(
                        file: file.name, path: error.path.map { $0.hasPrefix("[") ? "$" + $0 : "$." + $0 } ?? "$",
                        code: .invalidJSON,
                        message: "not valid JSON: \(error.message) at line \(error.line), column \(error.column)"))
                continue
            }
            guard let root = document.objectValue else {
                unreadFile = true
                mergeIssues.append(
                    PolicyIssue(
                        file: file.name, path: "$", code: .wrongType,
                        message: "a policy file must be a JSON object, got \(document.typeName)"))
                continue
            }
            for (key, value) in root {
                let path = JSONPath.root.key(key)
                if PolicyFields.sections.contains(key) || PolicyFields.maps.contains(key) {
                    guard let members = value.objectValue else {
                        mergeIssues.append(
                            PolicyIssue(
                                file: file.name, path: path.description, code: .wrongType,
                                message: "expected an object, got \(value.typeName)"))
                        continue
                    }
                    if origins[path] == nil { origins[path] = file.name }
                    var target = merged[key]?.objectValue ?? JSONObject()
                    for (name, member) in members {
                        let memberPath = path.key(name)
                        if let first = origins[memberPath] {
                            let what =
                                PolicyFields.maps.contains(key)
                                ? "\(PolicyFields.entryNoun(key)) \"\(name)\"" : "\"\(key).\(name)\""
                            mergeIssues.append(
                                PolicyIssue(
                                    file: file.name, path: memberPath.description, code: .duplicate,
                                    message: "\(what) is defined in both \(first) and \(file.name)"))
                        } else {
                            origins[memberPath] = file.name
                            target[name] = member
                        }
                    }
                    merged[key] = .object(target)
                } else if key == "default_tier" {
                    if let first = origins[path] {
                        mergeIssues.append(
                            PolicyIssue(
                                file: file.name, path: path.description, code: .duplicate,
                                message: "\"default_tier\" is defined in both \(first) and \(file.name)"))
                    } else {
                        origins[path] = file.name
                        merged[key] = value
                    }
                } else if key == "description" {
                    if value.stringValue == nil {
                        mergeIssues.append(
                            PolicyIssue(
                                file: file.name, path: path.description, code: .wrongType,
                                message: "expected a string, got \(value.typeName)"))
                    }
                } else {
                    mergeIssues.append(
                        PolicyIssue(
                            file: file.name, path: path.description, code: .unknownField,
                            message: NameSuggestion.unknownMessage("field", key, known: PolicyFields.topLevel)))
                }
            }
        }
        return merged
    }

    // MARK: Read

    private mutating func read(_ merged: JSONObject) -> Policy {
        let root = JSONPath.root
        var policy = Policy(tiers: [])

        if let object = reader.object(merged["loop"], at: root.key("loop")) {
            policy.loop = readLoop(object, at: root.key("loop"))
        }
        if let object = reader.object(merged["allocation"], at: root.key("allocation")) {
            policy.allocation = readAllocation(object, at: root.key("allocation"))
        }
        if let object = reader.object(merged["dampening"], at: root.key("dampening")) {
            policy.dampening = readDampening(object, at: root.key("dampening"))
        }
        if let object = reader.object(merged["costs"], at: root.key("costs")) {
            policy.costs = readCosts(object, at: root.key("costs"))
        }
        if let object = reader.object(merged["alerts"], at: root.key("alerts")) {
            policy.alerts = readAlerts(object, at: root.key("alerts"))
        }
        if let object = reader.object(merged["proposals"], at: root.key("proposals")) {
            policy.proposals = readProposals(object, at: root.key("proposals"))
        }
        if let object = reader.object(merged["classifier"], at: root.key("classifier")) {
            policy.classifier = readClassifier(object, at: root.key("classifier"))
        }
        if let object = reader.object(merged["observer"], at: root.key("observer")) {
            policy.observer = readObserver(object, at: root.key("observer"))
        }

        // Tiers first: tenants and default_tier refer to them.
        let tiersPath = root.key("tiers")
        for (name, value) in merged["tiers"]?.objectValue ?? [:] {
            if let tier = readTier(name: name, value, at: tiersPath.key(name)) { policy.setTier(tier) }
        }
        let tierNames = policy.tiers.map(\.name)
        if tierNames.isEmpty, !unreadFile, reader.problems.allSatisfy({ $0.path != tiersPath }) {
            reader.report(
                tiersPath, .missingField,
                "no tiers are defined; define at least one (see the shipped policies/tiers.json)")
        }

        let defaultTierPath = root.key("default_tier")
        if let name = reader.string(merged["default_tier"], at: defaultTierPath) {
            policy.defaultTier = name
            if !tierNames.isEmpty, !unreadFile, policy.tier(named: name) == nil {
                reader.report(
                    defaultTierPath, .unknownTier,
                    NameSuggestion.unknownMessage("tier", name, known: tierNames))
            }
        } else if merged["default_tier"] == nil, !tierNames.isEmpty, !unreadFile,
            policy.tier(named: policy.defaultTier) == nil
        {
            reader.report(
                defaultTierPath, .missingField,
                "\"default_tier\" is not set and there is no tier named \"standard\" to default to")
        }

        let upstreamsPath = root.key("upstreams")
        for (id, value) in merged["upstreams"]?.objectValue ?? [:] {
            if let upstream = readUpstream(id: id, value, at: upstreamsPath.key(id)) { policy.setUpstream(upstream) }
        }

        let tenantsPath = root.key("tenants")
        for (id, value) in merged["tenants"]?.objectValue ?? [:] {
            if let tenant = readTenant(
                id: id, value, at: tenantsPath.key(id), policy: policy, tiersKnown: !unreadFile)
            {
                policy.setTenant(tenant)
            }
        }

        let taskPath = root.key("task_budgets")
        for (name, value) in merged["task_budgets"]?.objectValue ?? [:] {
            let path = taskPath.key(name)
            guard let taskClass = TaskClass(rawValue: name) else {
                reader.report(
                    path, .unknownField,
                    NameSuggestion.unknownMessage(
                        "task class", name, known: TaskClass.allCases.map(\.rawValue)))
                continue
            }
            guard let object = reader.object(value, at: path) else { continue }
            reader.checkFields(object, at: path, known: PolicyFields.taskBudget, required: PolicyFields.taskBudget)
            let calls = reader.integer(object["max_calls"], at: path.key("max_calls"), minimum: 1)
            let tokens = reader.integer(object["max_tokens"], at: path.key("max_tokens"), minimum: 1)
            if let calls, let tokens {
                policy.taskBudgets[taskClass] = TaskBudgetPolicy(maxCalls: calls, maxTokens: tokens)
            }
        }
        return policy
    }

    private mutating func readLoop(_ object: JSONObject, at path: JSONPath) -> LoopSettings {
        reader.checkFields(object, at: path, known: PolicyFields.loop)
        var loop = LoopSettings()
        if let value = reader.number(object["interval_s"], at: path.key("interval_s"), .finite) {
            // The server ticks for real at this interval: below a second the loop (classifier, observer, engine,
            // a snapshot written to SQLite and pushed to every gateway) would run back to back, and beyond a
            // minute a capacity drop or a starving tenant goes unanswered for longer than the windows that
            // detect them. The simulator's `tick_interval_s` has the same range.
            if Self.intervalRange.contains(value) {
                loop.intervalSeconds = value
            } else {
                reader.report(
                    path.key("interval_s"), value < 0 ? .negative : .outOfRange,
                    "must be between \(Quantity.format(Self.intervalRange.lowerBound)) and "
                        + "\(Quantity.format(Self.intervalRange.upperBound)) s (got \(Quantity.format(value)))")
            }
        }
        if let value = reader.number(object["lease_s"], at: path.key("lease_s"), .positive) {
            loop.leaseSeconds = value
        }
        if let value = reader.number(object["forget_after_s"], at: path.key("forget_after_s"), .positive) {
            loop.forgetAfterSeconds = value
        }
        if loop.leaseSeconds < loop.intervalSeconds {
            reader.report(
                path.key("lease_s"), .invalidValue,
                "the snapshot lease (\(Quantity.format(loop.leaseSeconds)) s) must be at least the loop "
                    + "interval (\(Quantity.format(loop.intervalSeconds)) s), or gateways fall back between ticks")
        }
        return loop
    }

    private mutating func readAllocation(_ object: JSONObject, at path: JSONPath) -> AllocationSettings {
        reader.checkFields(object, at: path, known: PolicyFields.allocation)
        var settings = AllocationSettings()
        if let value = reader.number(object["safety_margin"], at: path.key("safety_margin"), .fractionBelowOne) {
            settings.safetyMargin = value
        }
        if let value = reader.number(object["demand_headroom"], at: path.key("demand_headroom"), .nonNegative) {
            settings.demandHeadroom = value
        }
        if let value = reader.number(
            object["demand_deviations"], at: path.key("demand_deviations"), .nonNegative)
        {
            settings.demandDeviations = value
        }
        if let value = reader.choice(object["surplus"], at: path.key("surplus"), SurplusMode.self) {
            settings.surplus = value
        }
        if let value = reader.number(object["burst_reserve"], at: path.key("burst_reserve"), .fraction) {
            settings.burstReserve = value
        }
        if let value = reader.number(object["idle_share"], at: path.key("idle_share"), .fraction) {
            settings.idleShare = value
        }
        return settings
    }

    private mutating func readDampening(_ object: JSONObject, at path: JSONPath) -> DampeningSettings {
        reader.checkFields(object, at: path, known: PolicyFields.dampening)
        var settings = DampeningSettings()
        if let value = reader.number(object["alpha"], at: path.key("alpha"), .fractionAboveZero) {
            settings.alpha = value
        }
        if let value = reader.number(object["deadband"], at: path.key("deadband"), .fractionBelowOne) {
            settings.deadband = value
        }
        if let value = reader.integer(object["persist_ticks"], at: path.key("persist_ticks"), minimum: 1) {
            settings.persistTicks = value
        }
        if let value = reader.number(object["max_up"], at: path.key("max_up"), .positive) { settings.maxUp = value }
        if let value = reader.number(object["max_down"], at: path.key("max_down"), .fractionAboveZero) {
            settings.maxDown = value
        }
        if let value = reader.quantity(object["min_step"], at: path.key("min_step")) { settings.minStep = value }
        if let value = reader.bool(object["hold_surplus"], at: path.key("hold_surplus")) {
            settings.holdSurplus = value
        }
        return settings
    }

    private mutating func readCosts(_ object: JSONObject, at path: JSONPath) -> CostSettings {
        reader.checkFields(object, at: path, known: PolicyFields.costs)
        var costs = CostSettings()
        if let currency = reader.string(object["currency"], at: path.key("currency")) {
            if currency.isEmpty || currency.count > 8 {
                reader.report(path.key("currency"), .invalidValue, "expected a currency code such as \"USD\"")
            } else {
                costs.currency = currency
            }
        }
        if let price = readPrice(object["default_price"], at: path.key("default_price")) {
            if price.inputPerMillionTokens == 0, price.outputPerMillionTokens == 0, price.perRequest == 0 {
                reader.report(
                    path.key("default_price"), .invalidValue,
                    "the default price must not be zero: usage of an unpriced upstream is never free")
            } else {
                costs.defaultPrice = price
            }
        }
        return costs
    }

    private mutating func readAlerts(_ object: JSONObject, at path: JSONPath) -> AlertThresholds {
        reader.checkFields(object, at: path, known: PolicyFields.alerts)
        var alerts = AlertThresholds()
        if let value = reader.number(object["starvation_ratio"], at: path.key("starvation_ratio"), .fractionAboveZero) {
            alerts.starvationRatio = value
        }
        if let value = reader.number(object["starvation_window_s"], at: path.key("starvation_window_s"), .positive) {
            alerts.starvationWindowSeconds = value
        }
        if let value = reader.integer(object["gateway_lag_versions"], at: path.key("gateway_lag_versions"), minimum: 1)
        {
            alerts.gatewayLagVersions = value
        }
        if let value = reader.number(object["gateway_lag_s"], at: path.key("gateway_lag_s"), .positive) {
            alerts.gatewayLagSeconds = value
        }
        if let value = reader.number(object["drift_ratio"], at: path.key("drift_ratio"), .nonNegative) {
            alerts.driftRatio = value
        }
        if let value = reader.number(object["drift_window_s"], at: path.key("drift_window_s"), .positive) {
            alerts.driftWindowSeconds = value
        }
        if let value = reader.number(object["upstream_error_rate"], at: path.key("upstream_error_rate"), .fraction) {
            alerts.upstreamErrorRate = value
        }
        return alerts
    }

    private mutating func readProposals(_ object: JSONObject, at path: JSONPath) -> ProposalSettings {
        reader.checkFields(object, at: path, known: PolicyFields.proposals)
        var settings = ProposalSettings()
        if let value = reader.number(object["ttl_s"], at: path.key("ttl_s"), .positive) { settings.ttlSeconds = value }
        if let value = reader.number(object["approval_ttl_s"], at: path.key("approval_ttl_s"), .positive) {
            settings.approvalTTLSeconds = value
        }
        if let value = reader.number(object["reject_cooldown_s"], at: path.key("reject_cooldown_s"), .nonNegative) {
            settings.rejectCooldownSeconds = value
        }
        return settings
    }

    private mutating func readClassifier(_ object: JSONObject, at path: JSONPath) -> ClassifierSettings {
        reader.checkFields(object, at: path, known: PolicyFields.classifier)
        var settings = ClassifierSettings()
        if let value = reader.number(object["short_window_s"], at: path.key("short_window_s"), .positive) {
            settings.shortWindowSeconds = value
        }
        if let value = reader.number(object["long_window_s"], at: path.key("long_window_s"), .positive) {
            settings.longWindowSeconds = value
        }
        if let value = reader.number(object["idle_after_s"], at: path.key("idle_after_s"), .positive) {
            settings.idleAfterSeconds = value
        }
        if let value = reader.integer(object["cold_start_samples"], at: path.key("cold_start_samples"), minimum: 0) {
            settings.coldStartSamples = value
        }
        if let value = reader.number(object["sustained_over_s"], at: path.key("sustained_over_s"), .positive) {
            settings.sustainedOverSeconds = value
        }
        if let value = reader.number(object["cold_start_share"], at: path.key("cold_start_share"), .fraction) {
            settings.coldStartShare = value
        }
        if settings.shortWindowSeconds > settings.longWindowSeconds {
            reader.report(
                path.key("short_window_s"), .invalidValue, "the short window must not be longer than the long window")
        }
        return settings
    }

    private mutating func readObserver(_ object: JSONObject, at path: JSONPath) -> ObserverSettings {
        reader.checkFields(object, at: path, known: PolicyFields.observer)
        var settings = ObserverSettings()
        let numbers: [(String, FieldReader.NumberRule, WritableKeyPath<ObserverSettings, Double>)] = [
            ("short_window_s", .positive, \.shortWindowSeconds), ("long_window_s", .positive, \.longWindowSeconds),
            ("decrease_factor", .fractionAboveZero, \.decreaseFactor),
            ("decrease_hold_s", .nonNegative, \.decreaseHoldSeconds),
            ("capacity_floor", .fractionAboveZero, \.capacityFloor),
            ("probe_utilisation", .fractionAboveZero, \.probeUtilisation), ("probe_step", .positive, \.probeStep),
            ("probe_recover", .fraction, \.probeRecover),
            ("latency_ratio", .positive, \.latencyRatio), ("latency_recover_ratio", .positive, \.latencyRecoverRatio),
            ("latency_load_rise", .nonNegative, \.latencyLoadRise),
            ("degrade_factor", .fractionAboveZero, \.degradeFactor),
            ("circuit_open_ratio", .fractionAboveZero, \.circuitOpenRatio),
            ("circuit_severe_ratio", .fractionAboveZero, \.circuitSevereRatio),
            ("circuit_quiet_s", .positive, \.circuitQuietSeconds), ("shared_tolerance", .fraction, \.sharedTolerance),
        ]
        for (key, rule, keyPath) in numbers {
            if let value = reader.number(object[key], at: path.key(key), rule) { settings[keyPath: keyPath] = value }
        }
        if let value = reader.integer(object["latency_min_samples"], at: path.key("latency_min_samples"), minimum: 1) {
            settings.latencyMinSamples = value
        }
        if let value = reader.integer(object["circuit_min_attempts"], at: path.key("circuit_min_attempts"), minimum: 1)
        {
            settings.circuitMinAttempts = value
        }
        if settings.shortWindowSeconds > settings.longWindowSeconds {
            reader.report(
                path.key("short_window_s"), .invalidValue, "the short window must not be longer than the long window")
        }
        if settings.latencyRatio <= 1 {
            reader.report(
                path.key("latency_ratio"), .outOfRange,
                "must be above 1 (got \(Quantity.format(settings.latencyRatio))): a ratio of 1 flags ordinary noise")
        } else if settings.latencyRecoverRatio < 1 || settings.latencyRecoverRatio > settings.latencyRatio {
            reader.report(
                path.key("latency_recover_ratio"), .outOfRange,
                "must be between 1 and latency_ratio (\(Quantity.format(settings.latencyRatio))), "
                    + "got \(Quantity.format(settings.latencyRecoverRatio))")
        }
        if settings.circuitSevereRatio < settings.circuitOpenRatio {
            reader.report(
                path.key("circuit_severe_ratio"), .invalidValue,
                "circuit_severe_ratio (\(Quantity.format(settings.circuitSevereRatio))) is below circuit_open_ratio "
                    + "(\(Quantity.format(settings.circuitOpenRatio)))")
        }
        return settings
    }

    private mutating func readTier(name: String, _ json: JSON, at path: JSONPath) -> Tier? {
        if !Self.isValidName(name, maxLength: 64) {
            reader.report(path, .invalidValue, "a tier name must be 1-64 characters of [A-Za-z0-9._-]")
        }
        guard let object = reader.object(json, at: path) else { return nil }
        reader.checkFields(object, at: path, known: PolicyFields.tier, required: ["priority"])
        _ = reader.string(object["description"], at: path.key("description"))
        var tier = Tier(name: name, priority: 0)
        if let value = reader.integer(object["priority"], at: path.key("priority"), minimum: 0) {
            tier.priority = value
        }
        if let value = reader.number(object["weight"], at: path.key("weight"), .weight) { tier.weight = value }
        readDimensions(object, "floor", at: path, into: &tier.floor)
        readDimensions(object, "ceiling", at: path, allowUnbounded: true, into: &tier.ceiling)
        readDimensions(object, "guard_min", at: path, into: &tier.guardMin)
        readDimensions(object, "guard_max", at: path, allowUnbounded: true, into: &tier.guardMax)
        readDimensions(object, "starvation_guard", at: path, into: &tier.starvationGuard)
        readDimensions(object, "idle_allocation", at: path, into: &tier.idleAllocation)
        readDimensions(object, "cold_start_demand", at: path, into: &tier.coldStartDemand)
        if let burst = reader.object(object["burst"], at: path.key("burst")) {
            tier.burst = readBurst(burst, at: path.key("burst"))
        }
        if let value = reader.number(object["queue_wait_slo_ms"], at: path.key("queue_wait_slo_ms"), .positive) {
            tier.queueWaitSLOMilliseconds = value
        }
        // Equal to the weight it defaults to: kept as the default, so the same rules are the same policy.
        if let value = reader.number(object["queue_weight"], at: path.key("queue_weight"), .weight),
            value != tier.weight
        {
            tier.queueWeight = value
        }
        if let value = reader.choice(object["mode"], at: path.key("mode"), GatewayMode.self) { tier.mode = value }
        if let value = reader.integer(object["max_concurrency"], at: path.key("max_concurrency"), minimum: 1) {
            tier.maxConcurrency = value
        }
        if let value = reader.number(object["bucket_s"], at: path.key("bucket_s"), .positive) {
            tier.bucketSeconds = value
        }
        tier.budgets = readBudgets(object["budgets"], at: path.key("budgets"))

        for dimension in RateDimension.allCases {
            if Self.exceeds(tier.floor[dimension], tier.ceiling[dimension]) {
                reader.report(
                    path.key("floor").key(dimension.rawValue), .floorAboveCeiling,
                    "floor (\(tier.floor[dimension].jsonText)) is above ceiling (\(tier.ceiling[dimension].jsonText))")
            }
            if Self.exceeds(tier.floor[dimension], tier.guardMax[dimension]) {
                reader.report(
                    path.key("floor").key(dimension.rawValue), .invalidValue,
                    "floor (\(tier.floor[dimension].jsonText)) is above guard_max "
                        + "(\(tier.guardMax[dimension].jsonText)): the engine could never honour it")
            }
            if Self.exceeds(tier.guardMin[dimension], tier.guardMax[dimension]) {
                reader.report(
                    path.key("guard_min").key(dimension.rawValue), .guardMinAboveGuardMax,
                    "guard_min (\(tier.guardMin[dimension].jsonText)) is above guard_max "
                        + "(\(tier.guardMax[dimension].jsonText))")
            }
        }
        return tier
    }

    private mutating func readBurst(_ object: JSONObject, at path: JSONPath) -> BurstPolicy {
        reader.checkFields(object, at: path, known: PolicyFields.burst)
        var burst = BurstPolicy()
        if let value = reader.bool(object["enabled"], at: path.key("enabled")) { burst.enabled = value }
        readDimensions(object, "max_credit", at: path, into: &burst.maxCredit)
        if let value = reader.number(object["max_ttl_s"], at: path.key("max_ttl_s"), .positive) {
            burst.maxTTLSeconds = value
        }
        if let value = reader.number(object["repay_within_s"], at: path.key("repay_within_s"), .positive) {
            burst.repayWithinSeconds = value
        }
        if let value = reader.number(object["default_cooldown_s"], at: path.key("default_cooldown_s"), .nonNegative) {
            burst.defaultCooldownSeconds = value
        }
        if let value = reader.bool(object["detect_fan_out"], at: path.key("detect_fan_out")) {
            burst.detectFanOut = value
        }
        return burst
    }

    private mutating func readBudgets(_ json: JSON?, at path: JSONPath) -> [SpendBudget] {
        guard let json else { return [] }
        guard let entries = json.arrayValue else {
            reader.report(path, .wrongType, "expected an array of budgets, got \(json.typeName)")
            return []
        }
        var budgets: [SpendBudget] = []
        var seen: [BudgetWindow: Int] = [:]
        for (index, entry) in entries.enumerated() {
            let entryPath = path.index(index)
            guard let object = reader.object(entry, at: entryPath) else { continue }
            reader.checkFields(object, at: entryPath, known: PolicyFields.budget, required: ["window", "amount"])
            let window = reader.choice(object["window"], at: entryPath.key("window"), BudgetWindow.self)
            let amount = reader.number(object["amount"], at: entryPath.key("amount"), .nonNegative)
            guard let window, let amount else { continue }
            if let first = seen[window] {
                reader.report(
                    entryPath.key("window"), .duplicate,
                    "a \(window.rawValue) budget is already defined at \(path.index(first))")
                continue
            }
            seen[window] = index
            var budget = SpendBudget(window: window, amount: amount)
            let thresholds: [(String, WritableKeyPath<SpendBudget, Quantity>)] = [
                ("soft", \.soft), ("throttle", \.throttle), ("hard", \.hard),
            ]
            for (key, keyPath) in thresholds {
                if let value = reader.quantity(object[key], at: entryPath.key(key), percentLimit: 1000) {
                    budget[keyPath: keyPath] = value
                }
            }
            if let value = reader.choice(object["hard_action"], at: entryPath.key("hard_action"), HardBudgetAction.self)
            {
                budget.hardAction = value
            }
            if budget.softAmount > budget.throttleAmount {
                reader.report(
                    entryPath.key("soft"), .invalidValue,
                    "soft (\(budget.soft.jsonText)) is above throttle (\(budget.throttle.jsonText))")
            }
            if budget.throttleAmount > budget.hardAmount {
                reader.report(
                    entryPath.key("throttle"), .invalidValue,
                    "throttle (\(budget.throttle.jsonText)) is above hard (\(budget.hard.jsonText))")
            }
            budgets.append(budget)
        }
        return budgets
    }

    private mutating func readUpstream(id: String, _ json: JSON, at path: JSONPath) -> UpstreamPolicy? {
        // As telemetry's `upstream`: a pool no event can name would never be used (outside evaluation round 29:
        // `"bad id"` loaded silently).
        if !Self.isValidName(id, maxLength: 128, extra: [0x3A, 0x2F, 0x40, 0x2B]) {
            reader.report(
                path, .invalidValue,
                "an upstream id must be 1-128 characters of [A-Za-z0-9._:/@+-], as telemetry's upstream")
        }
        guard let object = reader.object(json, at: path) else { return nil }
        reader.checkFields(object, at: path, known: PolicyFields.upstream, required: ["capacity"])
        _ = reader.string(object["description"], at: path.key("description"))
        var upstream = UpstreamPolicy(id: id, capacity: PerDimension(nil))
        let capacityPath = path.key("capacity")
        if let capacity = reader.object(object["capacity"], at: capacityPath) {
            reader.checkFields(capacity, at: capacityPath, known: RateDimension.allCases.map(\.rawValue))
            for dimension in RateDimension.allCases {
                upstream.capacity[dimension] = reader.number(
                    capacity[dimension.rawValue], at: capacityPath.key(dimension.rawValue), .rate)
            }
            if capacity["rpm"] == nil, capacity["tpm"] == nil {
                reader.report(capacityPath, .missingField, "declare \"rpm\", \"tpm\" or both")
            }
        }
        let windowPath = path.key("header_window")
        if let windows = reader.object(object["header_window"], at: windowPath) {
            reader.checkFields(windows, at: windowPath, known: PolicyFields.headerWindow)
            if let value = reader.choice(windows["requests"], at: windowPath.key("requests"), HeaderWindow.self) {
                upstream.headerWindow.rpm = value
            }
            if let value = reader.choice(windows["tokens"], at: windowPath.key("tokens"), HeaderWindow.self) {
                upstream.headerWindow.tpm = value
            }
        }
        upstream.price = readPrice(object["price"], at: path.key("price"))
        return upstream
    }

    private mutating func readPrice(_ json: JSON?, at path: JSONPath) -> Price? {
        guard let object = reader.object(json, at: path) else { return nil }
        reader.checkFields(
            object, at: path, known: PolicyFields.price, required: ["input_per_mtok", "output_per_mtok"])
        let input = reader.number(object["input_per_mtok"], at: path.key("input_per_mtok"), .nonNegative)
        let output = reader.number(object["output_per_mtok"], at: path.key("output_per_mtok"), .nonNegative)
        let perRequest = reader.number(object["per_request"], at: path.key("per_request"), .nonNegative)
        guard let input, let output else { return nil }
        return Price(inputPerMillionTokens: input, outputPerMillionTokens: output, perRequest: perRequest ?? 0)
    }

    private mutating func readTenant(
        id: String, _ json: JSON, at path: JSONPath, policy: Policy, tiersKnown: Bool
    ) -> TenantPolicy? {
        if !Self.isValidTenantID(id) { reader.report(path, .invalidValue, Self.tenantIDRule) }
        guard let object = reader.object(json, at: path) else { return nil }
        reader.checkFields(object, at: path, known: PolicyFields.tenant, required: ["tier"])
        _ = reader.string(object["description"], at: path.key("description"))
        var tenant = TenantPolicy(id: id, tier: policy.defaultTier)
        let tierPath = path.key("tier")
        if let name = reader.string(object["tier"], at: tierPath) {
            tenant.tier = name
            if policy.tier(named: name) == nil, !policy.tiers.isEmpty, tiersKnown {
                reader.report(
                    tierPath, .unknownTier,
                    NameSuggestion.unknownMessage("tier", name, known: policy.tiers.map(\.name)))
            }
        }
        if let value = reader.number(object["weight"], at: path.key("weight"), .weight), value != 1 {
            tenant.weight = value  // 1, the default multiplier, is kept as the default
        }
        if let floor = reader.dimensions(object["floor"], at: path.key("floor")) { tenant.floor = floor }
        if let ceiling = reader.dimensions(object["ceiling"], at: path.key("ceiling"), allowUnbounded: true) {
            tenant.ceiling = ceiling
        }
        tenant.budgets = readBudgets(object["budgets"], at: path.key("budgets"))
        if let group = reader.string(object["group"], at: path.key("group")) {
            if TenantPolicy.isValidGroup(group) {
                tenant.group = group
            } else {
                reader.report(path.key("group"), .invalidValue, Self.groupRule)
            }
        }

        if let tier = policy.tier(named: tenant.tier) {
            for dimension in RateDimension.allCases {
                let floor = tenant.floor[dimension] ?? tier.floor[dimension]
                let ceiling = tenant.ceiling[dimension] ?? tier.ceiling[dimension]
                guard Self.exceeds(floor, ceiling) else { continue }
                let own = tenant.floor[dimension] != nil ? "floor" : "ceiling"
                let floorSource = tenant.floor[dimension] != nil ? "" : " (from tier \"\(tier.name)\")"
                let ceilingSource = tenant.ceiling[dimension] != nil ? "" : " (from tier \"\(tier.name)\")"
                reader.report(
                    path.key(own).key(dimension.rawValue), .floorAboveCeiling,
                    "floor (\(floor.jsonText))\(floorSource) is above ceiling (\(ceiling.jsonText))\(ceilingSource)")
            }
            // As for a tier's own floor: guard_max bounds every floor the engine holds, so this one would be cut to
            // it at every tick without a word (outside evaluation round 34: a tenant's floor of 300 published at 100).
            for dimension in RateDimension.allCases {
                guard let floor = tenant.floor[dimension], Self.exceeds(floor, tier.guardMax[dimension]) else {
                    continue
                }
                reader.report(
                    path.key("floor").key(dimension.rawValue), .invalidValue,
                    "floor (\(floor.jsonText)) is above guard_max (\(tier.guardMax[dimension].jsonText)) of tier "
                        + "\"\(tier.name)\": the engine could never honour it")
            }
        }
        return tenant
    }

    /// Reads `object[key]` as a per-dimension quantity, replacing only the dimensions it sets.
    private mutating func readDimensions(
        _ object: JSONObject, _ key: String, at path: JSONPath, allowUnbounded: Bool = false,
        into target: inout PerDimension<Quantity>
    ) {
        guard let values = reader.dimensions(object[key], at: path.key(key), allowUnbounded: allowUnbounded) else {
            return
        }
        for dimension in RateDimension.allCases {
            if let value = values[dimension] { target[dimension] = value }
        }
    }

    /// The range of `loop.interval_s`, in seconds.
    static let intervalRange = 1.0...60.0

    /// Whether `a > b` is certain without knowing `C`: both absolute, or both percentages.
    static func exceeds(_ a: Quantity, _ b: Quantity) -> Bool {
        switch (a, b) {
        case (.absolute(let x), .absolute(let y)): x > y
        case (.percent(let x), .percent(let y)): x > y
        default: false
        }
    }

    /// 1…`maxLength` bytes of `[A-Za-z0-9._-]` plus `extra`.
    /// A tenant id in `tenants.json` and in plan input: 1–128 characters of `[A-Za-z0-9._:-]`.
    static func isValidTenantID(_ id: String) -> Bool { isValidName(id, maxLength: 128, extra: [0x3A]) }
    static let tenantIDRule = "a tenant id must be 1-128 characters of [A-Za-z0-9._:-]"
    static let groupRule = "a group must be 1-128 characters of [A-Za-z0-9._:-]"

    static func isValidName(_ name: String, maxLength: Int, extra: Set<UInt8> = []) -> Bool {
        let bytes = name.utf8
        guard !bytes.isEmpty, bytes.count <= maxLength else { return false }
        return bytes.allSatisfy { byte in
            (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x30 && byte <= 0x39)
                || byte == 0x2E || byte == 0x5F || byte == 0x2D || extra.contains(byte)
        }
    }
}
