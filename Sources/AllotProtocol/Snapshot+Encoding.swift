import AllotJSON
import AllotTime

extension Snapshot {
    /// The snapshot's JSON, field names exactly as SPEC section 7 shows them.
    ///
    /// Written with `JSONWriter` rather than a tree: the publisher encodes a snapshot once per
    /// publish (and once per gateway slice) and serves the bytes many times.
    public func encoded() -> [UInt8] {
        var writer = JSONWriter(capacity: 256 + tenants.count * 320)
        writer.beginObject()
        writer.field("version", version)
        writer.field("generated_at", RFC3339.format(generatedAt, fractionDigits: 3))
        writer.field("expires_at", RFC3339.format(expiresAt, fractionDigits: 3))
        writer.field("refresh_ms", refreshMs)
        writer.field("policy_version", policyVersion)
        if let gateway { writer.field("gateway", gateway) }
        writer.key("upstreams")
        writer.beginArray()
        for upstream in upstreams {
            writer.beginObject()
            writer.field("id", upstream.id)
            writer.field("state", upstream.state)
            writer.key("capacity")
            write(upstream.capacity, to: &writer)
            writer.field("circuit", upstream.circuitOpen ? "open" : "closed")
            writer.key("shed")
            writer.beginArray()
            for taskClass in upstream.shed { writer.value(taskClass) }
            writer.endArray()
            writer.endObject()
        }
        writer.endArray()
        writer.key("tenants")
        writer.beginArray()
        for tenant in tenants {
            writer.beginObject()
            writer.field("id", tenant.id)
            writer.field("upstream", tenant.upstream)
            writer.field("tier", tenant.tier)
            writer.field("priority", tenant.priority)
            writer.key("rpm")
            write(tenant.rpm, to: &writer)
            writer.key("tpm")
            write(tenant.tpm, to: &writer)
            writer.field("queue_weight", tenant.queueWeight)
            writer.key("reason")
            writer.beginObject()
            writer.field("rpm", tenant.reason.rpm)
            writer.field("tpm", tenant.reason.tpm)
            writer.endObject()
            writer.key("burst_credit")
            if let credit = tenant.burstCredit {
                writer.beginObject()
                writer.field("calls", credit.calls)
                writer.field("tokens", credit.tokens)
                writer.field("expires_at", RFC3339.format(credit.expiresAt, fractionDigits: 3))
                writer.endObject()
            } else {
                writer.valueNull()
            }
            writer.field("mode", tenant.mode)
            writer.field("max_concurrency", tenant.maxConcurrency)
            writer.key("token_estimate")
            if let estimate = tenant.tokenEstimate {
                writer.beginObject()
                writer.field("p50", estimate.p50)
                writer.field("p95", estimate.p95)
                writer.endObject()
            } else {
                writer.valueNull()
            }
            writer.field("deny", tenant.deny)
            writer.key("ceiling")
            if let ceiling = tenant.ceiling {
                writer.beginObject()
                writer.field("rpm", ceiling.rpm.isFinite ? ceiling.rpm : nil)
                writer.field("tpm", ceiling.tpm.isFinite ? ceiling.tpm : nil)
                writer.endObject()
            } else {
                writer.valueNull()
            }
            writer.endObject()
        }
        writer.endArray()
        writer.key("default")
        write(defaultLimits, to: &writer)
        writer.key("fallback")
        writer.beginObject()
        writer.key("tenants")
        writer.beginArray()
        for entry in fallback.tenants {
            writer.beginObject()
            writer.field("id", entry.id)
            writer.field("upstream", entry.upstream)
            writer.key("rpm")
            write(entry.rpm, to: &writer)
            writer.key("tpm")
            write(entry.tpm, to: &writer)
            writer.endObject()
        }
        writer.endArray()
        writer.key("default")
        write(fallback.defaultLimits, to: &writer)
        writer.endObject()
        writer.key("task_budget")
        writer.beginObject()
        for taskClass in taskBudgets.keys.sorted() {
            let budget = taskBudgets[taskClass]!
            writer.key(taskClass)
            writer.beginObject()
            writer.field("max_calls", budget.maxCalls)
            writer.field("max_tokens", budget.maxTokens)
            writer.endObject()
        }
        writer.endObject()
        writer.endObject()
        return writer.bytes
    }

    private func write(_ bucket: Bucket, to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("rate", bucket.rate)
        writer.field("burst", bucket.burst)
        writer.endObject()
    }

    private func write(_ limits: RateLimits, to writer: inout JSONWriter) {
        writer.beginObject()
        writer.key("rpm")
        write(limits.rpm, to: &writer)
        writer.key("tpm")
        write(limits.tpm, to: &writer)
        writer.endObject()
    }

    private func write(_ values: DimensionValues, to writer: inout JSONWriter) {
        writer.beginObject()
        writer.field("rpm", values.rpm)
        writer.field("tpm", values.tpm)
        writer.endObject()
    }
}

/// Why a snapshot document could not be decoded: the JSON path at fault and the reason.
public struct SnapshotDecodingError: Error, Sendable, Equatable, CustomStringConvertible {
    public var path: String
    public var reason: String

    public init(path: String, reason: String) {
        self.path = path
        self.reason = reason
    }

    public var description: String { "snapshot \(path): \(reason)" }
}

extension Snapshot {
    /// Decodes a snapshot document. Unknown fields are ignored (servers may add fields; gateways
    /// must keep working), missing or mistyped required fields are errors naming their path.
    public init(decoding bytes: some Collection<UInt8>) throws(SnapshotDecodingError) {
        let json: JSON
        do {
            json = try JSON.parse(bytes)
        } catch {
            throw SnapshotDecodingError(path: "$", reason: "not JSON: \(error)")
        }
        try self.init(json: json)
    }

    public init(json: JSON) throws(SnapshotDecodingError) {
        // Without paths first: a gateway decodes every version of its snapshot, and building the JSON path of
        // every field (`$.tenants[412].rpm.rate`, one string each) took a third of the decoding. A document
        // that fails is decoded again with paths, for the error.
        do {
            self = try Snapshot(json: json, tracked: false)
        } catch {
            self = try Snapshot(json: json, tracked: true)
        }
    }

    private init(json: JSON, tracked: Bool) throws(SnapshotDecodingError) {
        let root = Field(json, "$", tracked: tracked)
        version = try root.int64("version")
        generatedAt = try root.time("generated_at")
        expiresAt = try root.time("expires_at")
        refreshMs = Int(try root.count("refresh_ms"))
        policyVersion = try root.string("policy_version")
        gateway = try root.optionalString("gateway")
        upstreams = try root.array("upstreams").map { (item) throws(SnapshotDecodingError) in
            UpstreamEntry(
                id: try item.string("id"),
                state: try item.string("state"),
                capacity: try item.dimensions("capacity"),
                circuitOpen: (try item.optionalString("circuit")) == "open",
                shed: try item.optionalArray("shed").map { (entry) throws(SnapshotDecodingError) in try entry.stringValue() }
            )
        }
        tenants = try root.array("tenants").map { (item) throws(SnapshotDecodingError) in
            let reason = try item.object("reason")
            let credit = try item.optionalObject("burst_credit").map { (credit) throws(SnapshotDecodingError) in
                BurstCredit(
                    calls: try credit.double("calls"), tokens: try credit.double("tokens"),
                    expiresAt: try credit.time("expires_at"))
            }
            let estimate = try item.optionalObject("token_estimate").map { (estimate) throws(SnapshotDecodingError) in
                TokenEstimate(p50: try estimate.double("p50"), p95: try estimate.double("p95"))
            }
            return TenantEntry(
                id: try item.string("id"),
                upstream: try item.string("upstream"),
                tier: try item.string("tier"),
                priority: Int(try item.int64("priority")),
                rpm: try item.bucket("rpm"),
                tpm: try item.bucket("tpm"),
                queueWeight: try item.double("queue_weight"),
                reason: Reasons(rpm: try reason.string("rpm"), tpm: try reason.string("tpm")),
                burstCredit: credit,
                mode: try item.optionalString("mode") ?? "enforce",
                maxConcurrency: Int(try item.optionalCount("max_concurrency") ?? Int64(Int32.max)),
                tokenEstimate: estimate,
                deny: try item.optionalString("deny"),
                ceiling: try item.optionalObject("ceiling").map { (ceiling) throws(SnapshotDecodingError) in
                    DimensionValues(
                        rpm: try ceiling.optionalMember("rpm")?.nonNegativeValue() ?? .infinity,
                        tpm: try ceiling.optionalMember("tpm")?.nonNegativeValue() ?? .infinity)
                }
            )
        }
        defaultLimits = try root.limits("default")
        let fallbackObject = try root.object("fallback")
        fallback = Fallback(
            tenants: try fallbackObject.array("tenants").map { (item) throws(SnapshotDecodingError) in
                FallbackEntry(
                    id: try item.string("id"), upstream: try item.string("upstream"), rpm: try item.bucket("rpm"),
                    tpm: try item.bucket("tpm"))
            },
            defaultLimits: try fallbackObject.limits("default")
        )
        var budgets: [String: TaskBudget] = [:]
        if let budgetObject = try root.optionalObject("task_budget"), case .object(let members) = budgetObject.json {
            for (taskClass, _) in members {
                let entry = try budgetObject.object(taskClass)
                budgets[taskClass] = TaskBudget(
                    maxCalls: Int(try entry.count("max_calls")), maxTokens: Int(try entry.count("max_tokens")))
            }
        }
        taskBudgets = budgets
    }
}

/// A JSON value with its path, for decoding with precise errors. Untracked, the path is left empty.
private struct Field {
    let json: JSON
    let path: String
    let tracked: Bool

    init(_ json: JSON, _ path: String, tracked: Bool) {
        self.json = json
        self.path = path
        self.tracked = tracked
    }

    private func child(_ key: String) -> String { tracked ? "\(path).\(key)" : "" }

    func member(_ key: String) throws(SnapshotDecodingError) -> Field {
        guard case .object(let object) = json else {
            throw SnapshotDecodingError(path: path, reason: "expected an object, found \(json.typeName)")
        }
        guard let value = object[key] else {
            throw SnapshotDecodingError(path: child(key), reason: "missing")
        }
        return Field(value, child(key), tracked: tracked)
    }

    func optionalMember(_ key: String) throws(SnapshotDecodingError) -> Field? {
        guard case .object(let object) = json else {
            throw SnapshotDecodingError(path: path, reason: "expected an object, found \(json.typeName)")
        }
        guard let value = object[key], !value.isNull else { return nil }
        return Field(value, child(key), tracked: tracked)
    }

    func stringValue() throws(SnapshotDecodingError) -> String {
        guard let value = json.stringValue else {
            throw SnapshotDecodingError(path: path, reason: "expected a string, found \(json.typeName)")
        }
        return value
    }

    func doubleValue() throws(SnapshotDecodingError) -> Double {
        guard let value = json.doubleValue, value.isFinite else {
            throw SnapshotDecodingError(path: path, reason: "expected a number, found \(json.typeName)")
        }
        return value
    }

    /// A number ≥ 0 (a ceiling below zero would close a bucket a hostile snapshot should not reach).
    func nonNegativeValue() throws(SnapshotDecodingError) -> Double {
        let value = try doubleValue()
        guard value >= 0 else {
            throw SnapshotDecodingError(path: path, reason: "expected a number ≥ 0, found \(value)")
        }
        return value
    }

    func int64Value() throws(SnapshotDecodingError) -> Int64 {
        guard let value = json.int64Value else {
            throw SnapshotDecodingError(path: path, reason: "expected an integer, found \(json.typeName)")
        }
        return value
    }

    func string(_ key: String) throws(SnapshotDecodingError) -> String { try member(key).stringValue() }
    func double(_ key: String) throws(SnapshotDecodingError) -> Double { try member(key).doubleValue() }
    func int64(_ key: String) throws(SnapshotDecodingError) -> Int64 { try member(key).int64Value() }

    func optionalString(_ key: String) throws(SnapshotDecodingError) -> String? {
        try optionalMember(key)?.stringValue()
    }

    func optionalInt64(_ key: String) throws(SnapshotDecodingError) -> Int64? {
        try optionalMember(key)?.int64Value()
    }

    /// An integer ≥ 0: a count or a duration (round 14: `max_concurrency` -1 queued every request of its tenant
    /// until its wait ran out).
    func count(_ key: String) throws(SnapshotDecodingError) -> Int64 { try member(key).countValue() }

    func optionalCount(_ key: String) throws(SnapshotDecodingError) -> Int64? {
        try optionalMember(key)?.countValue()
    }

    func countValue() throws(SnapshotDecodingError) -> Int64 {
        let value = try int64Value()
        guard value >= 0 else {
            throw SnapshotDecodingError(path: path, reason: "expected an integer ≥ 0, found \(value)")
        }
        return value
    }

    func time(_ key: String) throws(SnapshotDecodingError) -> Double {
        let field = try member(key)
        if let millis = field.json.int64Value { return Double(millis) / 1000 }
        let text = try field.stringValue()
        guard let seconds = RFC3339.parse(text) else {
            throw SnapshotDecodingError(path: field.path, reason: "not an RFC 3339 time: \(text)")
        }
        return seconds
    }

    func object(_ key: String) throws(SnapshotDecodingError) -> Field {
        let field = try member(key)
        guard case .object = field.json else {
            throw SnapshotDecodingError(path: field.path, reason: "expected an object, found \(field.json.typeName)")
        }
        return field
    }

    func optionalObject(_ key: String) throws(SnapshotDecodingError) -> Field? {
        guard let field = try optionalMember(key) else { return nil }
        guard case .object = field.json else {
            throw SnapshotDecodingError(path: field.path, reason: "expected an object, found \(field.json.typeName)")
        }
        return field
    }

    func array(_ key: String) throws(SnapshotDecodingError) -> [Field] {
        let field = try member(key)
        guard case .array(let items) = field.json else {
            throw SnapshotDecodingError(path: field.path, reason: "expected an array, found \(field.json.typeName)")
        }
        guard tracked else { return items.map { Field($0, "", tracked: false) } }
        return items.enumerated().map { Field($0.element, "\(field.path)[\($0.offset)]", tracked: true) }
    }

    func optionalArray(_ key: String) throws(SnapshotDecodingError) -> [Field] {
        guard try optionalMember(key) != nil else { return [] }
        return try array(key)
    }

    func bucket(_ key: String) throws(SnapshotDecodingError) -> Bucket {
        let field = try object(key)
        return Bucket(rate: try field.double("rate"), burst: try field.double("burst"))
    }

    func limits(_ key: String) throws(SnapshotDecodingError) -> RateLimits {
        let field = try object(key)
        return RateLimits(rpm: try field.bucket("rpm"), tpm: try field.bucket("tpm"))
    }

    func dimensions(_ key: String) throws(SnapshotDecodingError) -> DimensionValues {
        let field = try object(key)
        return DimensionValues(rpm: try field.double("rpm"), tpm: try field.double("tpm"))
    }
}
