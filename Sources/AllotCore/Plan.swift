import AllotJSON

/// What-if plans (SPEC 6, "What-if plans: `allot plan`"): one allocation computed from a JSON
/// description of capacity and tenants, without history, dampening, guardrails or a burst reserve.
///
/// Input:
///
///     {"capacity": {"rpm": 1000, "tpm": 200000},
///      "settings": {"safety_margin": 0, "demand_headroom": 0, "surplus": "hold"},
///      "tenants": [{"id": "a", "tier": "premium", "weight": 2, "floor": {"rpm": 10},
///                   "ceiling": {"rpm": 500}, "demand": {"rpm": 300, "tpm": 50000}}]}
///
/// - `capacity` (required): per minute; a dimension left out is not computed and is absent from
///   the output.
/// - `settings` (optional): `surplus` (`distribute` | `hold`), `safety_margin`, `demand_headroom`,
///   `idle_share`, each defaulting to the policy in force. The burst reserve is always 0: a plan has no live
///   lending to back.
/// - `tenants` (required, may be empty): `id` (required, unique); `tier` (optional: the tier's
///   weight multiplier, floor, ceiling, starvation guard and idle allocation fill what the tenant
///   leaves out); a tenant the policy's `tenants` names gets its tier (when the plan gives none),
///   weight, floor and ceiling from there where the plan leaves them out, as `allot serve` would;
///   `weight` (default 1, multiplied by the tier weight); `floor` (default 0),
///   `ceiling` and `demand` (default unbounded), each per dimension, as in policies: a number per
///   minute, `"N%"` of `C` (floor, ceiling), or `"unbounded"` (ceiling, demand). A single value
///   applies to both dimensions.
/// - Extensions (documented, optional): `"idle": true` marks a tenant idle (it receives only its
///   tier's `idle_allocation`); `starvation_guard` sets the degraded-mode guard of a tenant
///   (default: its tier's, or 0 without a tier). Tenants without a tier are ranked after every
///   tier in degraded mode. `group` names the customer a tenant belongs to (default: the policy entry's):
///   a group's tenants that are not idle share one weight, max-min among themselves, as `allot serve` does.
///
/// Output: `allocations` in input order (`id`, one number per computed dimension, `reason` per
/// dimension), `unallocated` (`C` after the safety margin minus the sum allocated) and `degraded`,
/// per dimension. Numbers are plain JSON numbers.
public enum Plan {
    /// Parses, computes and renders a plan.
    public static func run(input: JSON, policy: Policy) throws(PlanError) -> JSON {
        compute(try parse(input, policy: policy)).json
    }

    /// `run(input:policy:)` from and to JSON bytes (for `allot plan FILE|-` and `POST /v1/plan`).
    public static func run(bytes: some Collection<UInt8>, policy: Policy) throws(PlanError) -> [UInt8] {
        let input: JSON
        do {
            input = try JSON.parse(bytes)
        } catch {
            throw PlanError(
                code: "invalid_json",
                message: "not valid JSON: \(error.message) at line \(error.line), column \(error.column)"
                    + (error.path.map { " (\($0))" } ?? ""),
                tenant: nil, field: error.path)
        }
        return try run(input: input, policy: policy).serialized()
    }

    /// Reads and checks a plan input against `policy` (tiers and setting defaults).
    ///
    /// - Throws: `PlanError` for the first problem, naming the tenant (id, or `tenants[i]` when it
    ///   has none) and the field.
    public static func parse(_ input: JSON, policy: Policy) throws(PlanError) -> PlanRequest {
        var reader = FieldReader()
        let request = read(input, policy: policy, reader: &reader)
        if let problem = reader.problems.first {
            throw PlanError(problem: problem, input: input)
        }
        return request
    }

    /// Computes a parsed plan: `PoolAllocation` per requested dimension.
    public static func compute(_ request: PlanRequest) -> PlanResult {
        var result = PlanResult(tenantIDs: request.tenants.map(\.id), dimensions: [:])
        for dimension in RateDimension.allCases {
            guard let capacity = request.capacity[dimension] else { continue }
            let settings = request.settings
            let effective = max(0, capacity * (1 - settings.safetyMargin))
            var claims = request.tenants.map { $0.claim(dimension, capacity: effective) }
            // A group's members that are not idle share one weight, as `allot serve` shares it.
            result.dimensions[dimension] = PolicyEngine.allocate(
                &claims, groups: request.tenants.map(\.group), capacityEstimate: capacity, settings: settings)
        }
        return result
    }

    private static let fields = ["capacity", "settings", "tenants"]
    private static let settingsFields = ["surplus", "safety_margin", "demand_headroom", "idle_share"]
    private static let tenantFields = [
        "id", "tier", "weight", "floor", "ceiling", "demand", "idle", "starvation_guard", "group",
    ]

    private static func read(_ input: JSON, policy: Policy, reader: inout FieldReader) -> PlanRequest {
        let root = JSONPath.root
        var request = PlanRequest(
            capacity: PerDimension(nil),
            settings: AllocationSettings(
                safetyMargin: policy.allocation.safetyMargin, demandHeadroom: policy.allocation.demandHeadroom,
                surplus: policy.allocation.surplus, burstReserve: 0, idleShare: policy.allocation.idleShare),
            tenants: [])
        guard let object = reader.object(input, at: root) else { return request }
        reader.checkFields(object, at: root, known: fields, required: ["capacity", "tenants"])

        let capacityPath = root.key("capacity")
        if let capacity = reader.object(object["capacity"], at: capacityPath) {
            reader.checkFields(capacity, at: capacityPath, known: RateDimension.allCases.map(\.rawValue))
            for dimension in RateDimension.allCases {
                request.capacity[dimension] = reader.number(
                    capacity[dimension.rawValue], at: capacityPath.key(dimension.rawValue), .rate)
            }
            if capacity["rpm"] == nil, capacity["tpm"] == nil {
                reader.report(capacityPath, .missingField, "capacity must give \"rpm\", \"tpm\" or both")
            }
        }

        let settingsPath = root.key("settings")
        if let settings = reader.object(object["settings"], at: settingsPath) {
            reader.checkFields(settings, at: settingsPath, known: settingsFields)
            if let value = reader.choice(settings["surplus"], at: settingsPath.key("surplus"), SurplusMode.self) {
                request.settings.surplus = value
            }
            if let value = reader.number(
                settings["safety_margin"], at: settingsPath.key("safety_margin"), .fractionBelowOne)
            {
                request.settings.safetyMargin = value
            }
            if let value = reader.number(
                settings["demand_headroom"], at: settingsPath.key("demand_headroom"), .nonNegative)
            {
                request.settings.demandHeadroom = value
            }
            if let value = reader.number(settings["idle_share"], at: settingsPath.key("idle_share"), .fraction) {
                request.settings.idleShare = value
            }
        }

        let tenantsPath = root.key("tenants")
        guard let entries = object["tenants"] else { return request }
        guard let tenants = entries.arrayValue else {
            reader.report(tenantsPath, .wrongType, "expected an array of tenants, got \(entries.typeName)")
            return request
        }
        let ranks = policy.tierRanks
        var seen: [String: Int] = [:]
        for (index, entry) in tenants.enumerated() {
            let path = tenantsPath.index(index)
            guard let fields = reader.object(entry, at: path) else { continue }
            reader.checkFields(fields, at: path, known: tenantFields, required: ["id"])
            var tenant = PlanTenant(id: "")
            if let id = reader.string(fields["id"], at: path.key("id")) {
                if !PolicyLoader.isValidTenantID(id) {
                    // As in tenants.json and telemetry: an id with a NUL or a right-to-left override was
                    // accepted and printed raw (round 12).
                    reader.report(path.key("id"), .invalidValue, PolicyLoader.tenantIDRule)
                } else if let first = seen[id] {
                    reader.report(path.key("id"), .duplicate, "duplicate id \"\(id)\" (also tenants[\(first)])")
                } else {
                    seen[id] = index
                }
                tenant.id = id
            }
            if let name = reader.string(fields["tier"], at: path.key("tier")) {
                if let tier = policy.tier(named: name) {
                    tenant.tier = tier
                    tenant.rank = ranks[name] ?? Int.max
                } else {
                    reader.report(
                        path.key("tier"), .unknownTier,
                        NameSuggestion.unknownMessage("tier", name, known: policy.tiers.map(\.name)))
                }
            }
            if let value = reader.number(fields["weight"], at: path.key("weight"), .weight) { tenant.weight = value }
            if let group = reader.string(fields["group"], at: path.key("group")) {
                if TenantPolicy.isValidGroup(group) {
                    tenant.group = group
                } else {
                    reader.report(path.key("group"), .invalidValue, PolicyLoader.groupRule)
                }
            }
            if let value = reader.dimensions(fields["floor"], at: path.key("floor")) { tenant.floor = value }
            if let value = reader.dimensions(fields["ceiling"], at: path.key("ceiling"), allowUnbounded: true) {
                tenant.ceiling = value
            }
            // A tenant the policy's `tenants` names has its terms there, as `allot serve` gives them
            // (`Policy.terms(ofTenant:…)`): its tier when the plan gives none, its weight, floor and ceiling
            // where the plan leaves them out. What the plan gives wins, field by field and per dimension, like
            // an override. A tenant the policy does not name and the plan gives no tier keeps only its own
            // fields (SPEC 6: not the default tier).
            let own = (floor: tenant.floor, ceiling: tenant.ceiling)
            if let entry = policy.tenant(tenant.id) {
                if fields["tier"] == nil, let tier = policy.tier(named: entry.tier) {
                    tenant.tier = tier
                    tenant.rank = ranks[tier.name] ?? Int.max
                }
                if fields["weight"] == nil { tenant.weight = entry.weight }
                if fields["group"] == nil { tenant.group = entry.group }
                for dimension in RateDimension.allCases {
                    if tenant.floor[dimension] == nil { tenant.floor[dimension] = entry.floor[dimension] }
                    if tenant.ceiling[dimension] == nil { tenant.ceiling[dimension] = entry.ceiling[dimension] }
                }
            }
            if let value = reader.dimensions(fields["starvation_guard"], at: path.key("starvation_guard")) {
                tenant.starvationGuard = value
            }
            if let value = reader.bool(fields["idle"], at: path.key("idle")) { tenant.idle = value }
            if let demand = reader.dimensions(
                fields["demand"], at: path.key("demand"), allowUnbounded: true, rateOnly: true)
            {
                for dimension in RateDimension.allCases {
                    switch demand[dimension] {
                    case .percent?:
                        reader.report(
                            path.key("demand").key(dimension.rawValue), .invalidValue,
                            "demand is a rate per minute, not a percentage")
                    case .absolute(let value)?:
                        tenant.demand[dimension] = value
                    case nil:
                        break
                    }
                }
            }
            // Floor above ceiling, once both are resolved against the capacity of each dimension, when the plan
            // gave either of them. Both from the policy (a policy tenant's absolute floor against its tier's
            // percentage ceiling, which the loader cannot check) is no error: the floor wins at run time
            // (policies/README.md), and a plan gives the terms `allot serve` gives — a floor of 263 rpm under the
            // free tier's 20 % of 980 was refused here and allocated 263 there (round 13).
            for dimension in RateDimension.allCases {
                guard let capacity = request.capacity[dimension] else { continue }
                let effective = max(0, capacity * (1 - request.settings.safetyMargin))
                let floor = tenant.floor(dimension).resolved(capacity: effective)
                let ceiling = tenant.ceiling(dimension).resolved(capacity: effective)
                let planGave = own.floor[dimension] != nil || own.ceiling[dimension] != nil
                let staticConflict = PolicyLoader.exceeds(tenant.floor(dimension), tenant.ceiling(dimension))
                if floor > ceiling, planGave || staticConflict {
                    // Named by the field the plan gave; a value from the policy's tenants says so.
                    let field = own.floor[dimension] != nil || own.ceiling[dimension] == nil ? "floor" : "ceiling"
                    func source(_ given: Quantity?, _ merged: Quantity?) -> String {
                        given == nil && merged != nil ? " (the policy's, for this tenant)" : ""
                    }
                    reader.report(
                        path.key(field).key(dimension.rawValue), .floorAboveCeiling,
                        "floor (\(Quantity.format(floor)))\(source(own.floor[dimension], tenant.floor[dimension])) "
                            + "is above ceiling (\(Quantity.format(ceiling)))"
                            + source(own.ceiling[dimension], tenant.ceiling[dimension]))
                }
            }
            request.tenants.append(tenant)
        }
        return request
    }
}

/// A parsed plan input.
public struct PlanRequest: Sendable, Hashable {
    /// Capacity per dimension, per minute; nil → not computed.
    public var capacity: PerDimension<Double?>
    /// Settings (policy defaults overridden by the input); `burstReserve` is 0.
    public var settings: AllocationSettings
    /// The tenants, in input order.
    public var tenants: [PlanTenant]
}

/// One tenant of a plan, as given (tier values are applied per dimension by `claim`).
public struct PlanTenant: Sendable, Hashable {
    public var id: String
    public var tier: Tier?
    /// Degraded-mode rank: the tier's position in priority order; tenants without a tier come last.
    public var rank: Int = Int.max
    public var weight: Double?
    /// The customer it belongs to (the plan's `group`, else the policy entry's): see *Groups* in policies/README.md.
    public var group: String?
    public var floor = PerDimension<Quantity?>(nil)
    public var ceiling = PerDimension<Quantity?>(nil)
    public var demand = PerDimension<Double?>(nil)
    public var starvationGuard = PerDimension<Quantity?>(nil)
    public var idle = false

    public init(id: String) {
        self.id = id
    }

    /// The effective floor: the tenant's, else its tier's, else 0.
    public func floor(_ dimension: RateDimension) -> Quantity {
        floor[dimension] ?? tier?.floor[dimension] ?? .zero
    }

    /// The effective ceiling: the tenant's, else its tier's, else unbounded.
    public func ceiling(_ dimension: RateDimension) -> Quantity {
        ceiling[dimension] ?? tier?.ceiling[dimension] ?? .unbounded
    }

    /// The allocator's input for one dimension of capacity `capacity` (after the safety margin).
    func claim(_ dimension: RateDimension, capacity: Double) -> AllocationClaim {
        AllocationClaim(
            weight: (tier?.weight ?? 1) * (weight ?? 1),
            floor: floor(dimension).resolved(capacity: capacity),
            ceiling: ceiling(dimension).resolved(capacity: capacity),
            demand: demand[dimension] ?? .infinity,
            starvationGuard: (starvationGuard[dimension] ?? tier?.starvationGuard[dimension] ?? .zero)
                .resolved(capacity: capacity),
            rank: rank, isIdle: idle,
            idleAllocation: (tier?.idleAllocation[dimension] ?? .zero).resolved(capacity: capacity))
    }
}

/// A computed plan.
public struct PlanResult: Sendable {
    /// Tenant ids in input order.
    public var tenantIDs: [String]
    /// The allocation of each computed dimension.
    public var dimensions: [RateDimension: PoolAllocation]

    /// The output document of SPEC 6: `allocations`, `unallocated`, `degraded`.
    public var json: JSON {
        let computed = RateDimension.allCases.filter { dimensions[$0] != nil }
        var allocations: [JSON] = []
        allocations.reserveCapacity(tenantIDs.count)
        for (index, id) in tenantIDs.enumerated() {
            var entry = JSONObject()
            entry["id"] = .string(id)
            var reasons = JSONObject()
            for dimension in computed {
                let allocation = dimensions[dimension]!
                entry[dimension.rawValue] = .double(allocation.allocations[index])
                reasons[dimension.rawValue] = .string(allocation.reasons[index].rawValue)
            }
            entry["reason"] = .object(reasons)
            allocations.append(.object(entry))
        }
        var unallocated = JSONObject()
        var degraded = JSONObject()
        for dimension in computed {
            unallocated[dimension.rawValue] = .double(dimensions[dimension]!.unallocated)
            degraded[dimension.rawValue] = .bool(dimensions[dimension]!.degraded)
        }
        return ["allocations": .array(allocations), "unallocated": .object(unallocated), "degraded": .object(degraded)]
    }
}

/// A plan input that cannot be computed: the HTTP layer answers 400 with
/// `{"error": {"code": …, "message": …, "field": …}}`; the CLI prints `message` and exits non-zero.
public struct PlanError: Error, Sendable, Hashable, CustomStringConvertible {
    /// `invalid_json`, or the kind of problem (`missing_field`, `wrong_type`, `negative`,
    /// `out_of_range`, `duplicate`, `floor_above_ceiling`, `unknown_tier`, `unknown_field`, …).
    public var code: String
    /// A complete sentence naming the tenant and the field.
    public var message: String
    /// The tenant at fault: its id, or `tenants[i]` when it has none; nil for top-level problems.
    public var tenant: String?
    /// The field at fault, as a path such as `tenants[0].floor.rpm`; nil when the whole input is.
    public var field: String?

    public init(code: String, message: String, tenant: String?, field: String?) {
        self.code = code
        self.message = message
        self.tenant = tenant
        self.field = field
    }

    public var description: String { message }

    /// Builds the error for a reader problem, naming the tenant by id when it has one.
    init(problem: FieldReader.Problem, input: JSON) {
        let path = problem.path.description
        let field = path == "$" ? nil : String(path.dropFirst(2))
        var tenant: String?
        if problem.path.segments.count >= 2, problem.path.segments[0] == .key("tenants"),
            case .index(let index) = problem.path.segments[1]
        {
            if let id = input["tenants"]?[index]?["id"]?.stringValue, PolicyLoader.isValidTenantID(id) {
                tenant = id
            } else {
                tenant = "tenants[\(index)]"
            }
        }
        let subject: String
        if let tenant, let field {
            let within = field.split(separator: ".", maxSplits: 1).dropFirst().first.map(String.init)
            let position = field.prefix { $0 != "." }
            let name = tenant.hasPrefix("tenants[") ? tenant : "tenant \"\(tenant)\" (\(position))"
            subject = within.map { "\(name): \($0)" } ?? name
        } else {
            subject = field ?? "plan"
        }
        self.init(code: problem.code.rawValue, message: "\(subject): \(problem.message)", tenant: tenant, field: field)
    }
}
