import AllotJSON
import AllotTime

/// An operator's override of a tenant's terms (SPEC 6.8): tier, weight, floor and/or ceiling, with
/// who set it, why and until when.
///
/// Overrides are inputs to every decision; one whose `expiresAt` has passed is ignored (a pure
/// function of `now`, so nothing has to delete it on time). An override that would cross a
/// guardrail (`Guardrails.crossings`) is held by the server as a proposal until an SRE approves
/// it; it then reaches the engine with `approved` set, and the engine suspends that tenant's
/// guardrails while it is in force.
public struct Override: Sendable, Hashable, Codable {
    /// The tenant it applies to.
    public var tenant: String
    /// The upstream pool it applies to; nil for every pool.
    public var upstream: String?
    /// Replaces the tenant's tier.
    public var tier: String?
    /// Replaces the tenant's weight multiplier (the tier weight still multiplies it).
    public var weight: Double?
    /// Replaces the floor per dimension where set.
    public var floor: PerDimension<Quantity?>
    /// Replaces the ceiling per dimension where set.
    public var ceiling: PerDimension<Quantity?>
    /// Who set it.
    public var actor: String
    /// Why.
    public var reason: String
    /// When it was set, seconds since the Unix epoch.
    public var createdAt: Double
    /// When it stops applying.
    public var expiresAt: Double
    /// An SRE approved it although it crosses a guardrail.
    public var approved: Bool

    public init(
        tenant: String, upstream: String? = nil, tier: String? = nil, weight: Double? = nil,
        floor: PerDimension<Quantity?> = PerDimension(nil), ceiling: PerDimension<Quantity?> = PerDimension(nil),
        actor: String, reason: String, createdAt: Double, expiresAt: Double, approved: Bool = false
    ) {
        self.tenant = tenant
        self.upstream = upstream
        self.tier = tier
        self.weight = weight
        self.floor = floor
        self.ceiling = ceiling
        self.actor = actor
        self.reason = reason
        self.createdAt = createdAt
        self.expiresAt = expiresAt
        self.approved = approved
    }

    /// Whether it applies at `now`: set, and not yet expired.
    public func isActive(at now: Double) -> Bool { createdAt <= now && now < expiresAt }

    /// Whether it applies to `upstream`.
    public func applies(to upstream: String) -> Bool { self.upstream == nil || self.upstream == upstream }

    /// The override as JSON (the shape `parse` reads, plus actor, times and approval).
    public var json: JSON {
        var object: JSONObject = ["tenant": .string(tenant)]
        if let upstream { object["upstream"] = .string(upstream) }
        if let tier { object["tier"] = .string(tier) }
        if let weight { object["weight"] = .number(weight) }
        if let floor = floor.partialJSON { object["floor"] = floor }
        if let ceiling = ceiling.partialJSON { object["ceiling"] = ceiling }
        object["actor"] = .string(actor)
        object["reason"] = .string(reason)
        object["created_at"] = .number(createdAt)
        object["expires_at"] = .number(expiresAt)
        object["approved"] = .bool(approved)
        return .object(object)
    }

    private static let fields = ["upstream", "tier", "weight", "floor", "ceiling", "reason", "ttl_s", "expires_at"]

    /// The longest an override may last: 366 days (renew it to keep it).
    public static let maxLifetimeSeconds = 366 * 86_400.0
    /// The longest `reason`, in UTF-8 bytes, as for every reason an operator gives.
    public static let maxReasonBytes = 1024

    /// `expires_at` as seconds since the epoch or an RFC 3339 time (`"2026-12-01T00:00:00Z"`, as every time this
    /// API answers with; round 14: a string was `wrong_type`).
    private static func expiry(_ value: JSON?, at path: JSONPath, reader: inout FieldReader) -> Double? {
        guard case .string(let text)? = value else { return reader.number(value, at: path, .nonNegative) }
        guard let seconds = RFC3339.parse(text) else {
            reader.report(
                path, .invalidValue,
                "must be seconds since the epoch or an RFC 3339 time (2026-12-01T00:00:00Z), not \"\(text)\"")
            return nil
        }
        return seconds
    }

    /// Reads the body of `PUT /v1/tenants/{id}/override`:
    /// `{"tier": …, "weight": …, "floor": {…}, "ceiling": {…}, "upstream": …, "reason": "…",
    /// "ttl_s": 3600}` — `reason` is required, and so is one of `ttl_s` (seconds from `now`) or
    /// `expires_at` (seconds since the Unix epoch or an RFC 3339 time, in the future); at least one of tier, weight,
    /// floor or ceiling must be given. Quantities are written as in policy files.
    ///
    /// - Parameter tracked: pools the loop follows without the policy declaring them: `upstream` must be
    ///   one of the policy's or of these.
    /// - Throws: `InputError` naming the field.
    public static func parse(
        _ json: JSON, tenant: String, actor: String, now: Double, policy: Policy, tracked: [String] = []
    ) throws(InputError) -> Override {
        var reader = FieldReader()
        let root = JSONPath.root
        var result = Override(tenant: tenant, actor: actor, reason: "", createdAt: now, expiresAt: now)
        if let object = reader.object(json, at: root) {
            reader.checkFields(object, at: root, known: fields, required: ["reason"])
            result.upstream = reader.string(object["upstream"], at: root.key("upstream"))
            if let upstream = result.upstream {
                if upstream.isEmpty || upstream.utf8.count > 256 {
                    reader.report(root.key("upstream"), .invalidValue, "must be 1-256 characters")
                } else if let message = policy.unknownUpstreamMessage(upstream, tracked: tracked) {
                    reader.report(root.key("upstream"), .unknownUpstream, message)
                }
            }
            if let tier = reader.string(object["tier"], at: root.key("tier")) {
                if policy.tier(named: tier) == nil {
                    reader.report(
                        root.key("tier"), .unknownTier,
                        NameSuggestion.unknownMessage("tier", tier, known: policy.tiers.map(\.name)))
                }
                result.tier = tier
            }
            result.weight = reader.number(object["weight"], at: root.key("weight"), .weight)
            result.floor = reader.dimensions(object["floor"], at: root.key("floor")) ?? PerDimension(nil)
            result.ceiling =
                reader.dimensions(object["ceiling"], at: root.key("ceiling"), allowUnbounded: true)
                ?? PerDimension(nil)
            if let reason = reader.string(object["reason"], at: root.key("reason")) {
                if reason.trimmingSpaces().isEmpty {
                    reader.report(root.key("reason"), .invalidValue, "must not be empty")
                } else if reason.utf8.count > Self.maxReasonBytes {
                    // As every other reason an operator gives (a proposal's decision, a removal): it is stored in the
                    // audit log with each change.
                    reader.report(
                        root.key("reason"), .invalidValue,
                        "must be at most \(Self.maxReasonBytes) bytes (got \(reason.utf8.count))")
                }
                result.reason = reason
            }
            let longest = Self.maxLifetimeSeconds
            if object["ttl_s"] != nil, object["expires_at"] != nil {
                reader.report(
                    root.key("expires_at"), .invalidValue, "give \"ttl_s\" or \"expires_at\", not both")
            }
            if let ttl = reader.number(object["ttl_s"], at: root.key("ttl_s"), .positive) {
                // Overrides always expire: a ttl_s of 1e20 read as the year 9999 (round 11).
                if ttl > longest {
                    let message = "must be at most \(Int(longest)) s (366 days; overrides always expire), not "
                    reader.report(root.key("ttl_s"), .outOfRange, message + Quantity.format(ttl))
                }
                result.expiresAt = now + ttl
            } else if let expiry = Self.expiry(object["expires_at"], at: root.key("expires_at"), reader: &reader) {
                if expiry <= now { reader.report(root.key("expires_at"), .outOfRange, "must be in the future") }
                if expiry > now + longest {
                    reader.report(
                        root.key("expires_at"), .outOfRange,
                        "must be at most 366 days from now (overrides always expire)")
                }
                result.expiresAt = expiry
            } else if object["ttl_s"] == nil, object["expires_at"] == nil {
                reader.report(
                    root.key("ttl_s"), .missingField, "give \"ttl_s\" or \"expires_at\": overrides always expire")
            }
            if result.tier == nil, result.weight == nil, result.floor == PerDimension(nil),
                result.ceiling == PerDimension(nil),
                object["tier"] == nil, object["weight"] == nil, object["floor"] == nil, object["ceiling"] == nil
            {
                reader.report(root, .missingField, "an override sets at least one of tier, weight, floor or ceiling")
            }
            for dimension in RateDimension.allCases {
                if let floor = result.floor[dimension], let ceiling = result.ceiling[dimension],
                    PolicyLoader.exceeds(floor, ceiling)
                {
                    reader.report(
                        root.key("floor").key(dimension.rawValue), .floorAboveCeiling,
                        "floor (\(floor.jsonText)) is above ceiling (\(ceiling.jsonText))")
                }
            }
        }
        if let problem = reader.problems.first {
            let path = problem.path.description
            throw InputError(
                code: problem.code.rawValue,
                message: path == "$" ? problem.message : "\(path.dropFirst(2)): \(problem.message)",
                field: path == "$" ? nil : String(path.dropFirst(2)))
        }
        return result
    }
}

/// Invalid input to a core parser other than plans: code, message and the field at fault, ready for
/// the HTTP error shape `{"error": {"code", "message", "field"}}`.
public struct InputError: Error, Sendable, Hashable, CustomStringConvertible {
    public var code: String
    public var message: String
    public var field: String?

    public init(code: String, message: String, field: String?) {
        self.code = code
        self.message = message
        self.field = field
    }

    public var description: String { message }
}

extension String {
    func trimmingSpaces() -> Substring {
        var text = Substring(self)
        while let last = text.last, last.isWhitespace { text = text.dropLast() }
        while let first = text.first, first.isWhitespace { text = text.dropFirst() }
        return text
    }
}

extension Override {
    /// A tenant-wide override and one for a specific upstream, as one on that upstream: the specific one, with
    /// each field it leaves unset taken from the tenant-wide one. Approved (guardrails suspended) only if every
    /// part that contributes a field is: an approval covers the terms the SRE saw, not another override's
    /// (an approved tenant-wide weight must not lift the guardrails off an unapproved pool override's floor).
    static func combined(wide: Override?, specific: Override?) -> Override? {
        guard let wide, var merged = specific else { return specific ?? wide }
        let specificSets =
            merged.tier != nil || merged.weight != nil
            || RateDimension.allCases.contains { merged.floor[$0] != nil || merged.ceiling[$0] != nil }
        var wideContributes = false
        func take<T>(_ own: T?, _ other: T?) -> T? {
            if own == nil, other != nil { wideContributes = true }
            return own ?? other
        }
        merged.tier = take(merged.tier, wide.tier)
        merged.weight = take(merged.weight, wide.weight)
        for dimension in RateDimension.allCases {
            merged.floor[dimension] = take(merged.floor[dimension], wide.floor[dimension])
            merged.ceiling[dimension] = take(merged.ceiling[dimension], wide.ceiling[dimension])
        }
        merged.approved = (!specificSets || merged.approved) && (!wideContributes || wide.approved)
        return merged
    }
}
