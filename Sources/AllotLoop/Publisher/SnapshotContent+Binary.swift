import AllotProtocol
import AllotStore

/// The form a snapshot version is persisted in (`snapshots.body`, `migrations/0002_snapshots_state.sql`).
///
/// Why not the JSON gateways receive: persisting must happen before a version is visible, on every
/// tick, and encoding the JSON of 10,000 tenants takes about 100 ms, most of a tick's budget. This
/// form writes every field directly (no JSON numbers to format, low-cardinality strings such as
/// upstreams, tiers and reasons interned once), in a few milliseconds; the JSON is then encoded
/// from the restored content exactly as it was (the encoder is deterministic), once per version,
/// when first requested.
///
/// Layout, little-endian: `ASC1`, the string table (count, then each string), then the snapshot's
/// fields in declaration order with strings as table indices; optional values carry a presence byte.
extension SnapshotContent {
    static let binaryMagic: [UInt8] = Array("ASC1".utf8)

    /// The snapshot's binary form (the slice plan is stored separately: ``SlicePlan/encoded()``).
    public func binarySnapshot() -> [UInt8] {
        var strings = StringTable()
        var body = BinaryWriter(capacity: 64 + snapshot.tenants.count * 96)
        let s = snapshot
        body.double(Double(bitPattern: UInt64(bitPattern: s.version)))
        body.double(s.generatedAt)
        body.double(s.expiresAt)
        body.double(Double(bitPattern: UInt64(bitPattern: Int64(s.refreshMs))))
        body.uint32(strings.index(s.policyVersion))
        body.uint8(s.gateway == nil ? 0 : 1)
        if let gateway = s.gateway { body.uint32(strings.index(gateway)) }
        body.uint32(UInt32(s.upstreams.count))
        for upstream in s.upstreams {
            body.uint32(strings.index(upstream.id))
            body.uint32(strings.index(upstream.state))
            body.double(upstream.capacity.rpm)
            body.double(upstream.capacity.tpm)
            body.uint8(upstream.circuitOpen ? 1 : 0)
            body.uint32(UInt32(upstream.shed.count))
            for taskClass in upstream.shed { body.uint32(strings.index(taskClass)) }
        }
        body.uint32(UInt32(s.tenants.count))
        for tenant in s.tenants {
            body.uint32(strings.index(tenant.id))
            body.uint32(strings.index(tenant.upstream, at: .upstream))
            body.uint32(strings.index(tenant.tier, at: .tier))
            body.int32(Int32(clamping: tenant.priority))
            Self.write(tenant.rpm, to: &body)
            Self.write(tenant.tpm, to: &body)
            body.double(tenant.queueWeight)
            body.uint32(strings.index(tenant.reason.rpm, at: .rpmReason))
            body.uint32(strings.index(tenant.reason.tpm, at: .tpmReason))
            var flags: UInt8 = 0
            if tenant.burstCredit != nil { flags |= 1 }
            if tenant.tokenEstimate != nil { flags |= 2 }
            if tenant.deny != nil { flags |= 4 }
            if tenant.ceiling != nil { flags |= 8 }
            body.uint8(flags)
            if let credit = tenant.burstCredit {
                body.double(credit.calls)
                body.double(credit.tokens)
                body.double(credit.expiresAt)
            }
            body.uint32(strings.index(tenant.mode, at: .mode))
            body.double(Double(bitPattern: UInt64(bitPattern: Int64(tenant.maxConcurrency))))
            if let estimate = tenant.tokenEstimate {
                body.double(estimate.p50)
                body.double(estimate.p95)
            }
            if let deny = tenant.deny { body.uint32(strings.index(deny)) }
            if let ceiling = tenant.ceiling {
                body.double(ceiling.rpm)
                body.double(ceiling.tpm)
            }
        }
        Self.write(s.defaultLimits, to: &body)
        body.uint32(UInt32(s.fallback.tenants.count))
        for entry in s.fallback.tenants {
            body.uint32(strings.index(entry.id))
            body.uint32(strings.index(entry.upstream, at: .upstream))
            Self.write(entry.rpm, to: &body)
            Self.write(entry.tpm, to: &body)
        }
        Self.write(s.fallback.defaultLimits, to: &body)
        let budgets = s.taskBudgets.sorted { $0.key < $1.key }
        body.uint32(UInt32(budgets.count))
        for (taskClass, budget) in budgets {
            body.uint32(strings.index(taskClass))
            body.double(Double(bitPattern: UInt64(bitPattern: Int64(budget.maxCalls))))
            body.double(Double(bitPattern: UInt64(bitPattern: Int64(budget.maxTokens))))
        }

        var output = BinaryWriter(capacity: 16 + strings.bytes + body.count)
        output.bytes(Self.binaryMagic)
        output.uint32(UInt32(strings.list.count))
        for string in strings.list { output.string(string) }
        output.bytes(body.finish())
        return output.finish()
    }

    /// Reads ``binarySnapshot()``; the plan comes from its own bytes.
    ///
    /// - Throws: ``LoopStateError`` for damaged bytes (never traps).
    init(binarySnapshot bytes: [UInt8], plan: SlicePlan) throws(LoopStateError) {
        var reader = BinaryReader(bytes)
        guard try reader.bytes(count: 4) == Self.binaryMagic else {
            throw LoopStateError(component: "snapshot", message: "not a stored snapshot (bad magic)")
        }
        let stringCount = try reader.count(elementSize: 4)
        var strings: [String] = []
        strings.reserveCapacity(stringCount)
        for _ in 0..<stringCount { strings.append(try reader.string()) }
        func string() throws(LoopStateError) -> String {
            let index = Int(try reader.uint32())
            guard index < strings.count else {
                throw LoopStateError(component: "snapshot", message: "string index \(index) out of range")
            }
            return strings[index]
        }
        func integer() throws(LoopStateError) -> Int64 { Int64(bitPattern: (try reader.double()).bitPattern) }
        func bucket() throws(LoopStateError) -> Bucket { Bucket(rate: try reader.double(), burst: try reader.double()) }
        func limits() throws(LoopStateError) -> RateLimits { RateLimits(rpm: try bucket(), tpm: try bucket()) }

        let version = try integer()
        let generatedAt = try reader.double()
        let expiresAt = try reader.double()
        let refreshMs = Int(clamping: try integer())
        let policyVersion = try string()
        let gateway = try reader.uint8() == 0 ? nil : try string()
        var upstreams: [UpstreamEntry] = []
        for _ in 0..<(try reader.count(elementSize: 29)) {
            let id = try string()
            let state = try string()
            let capacity = DimensionValues(rpm: try reader.double(), tpm: try reader.double())
            let circuitOpen = try reader.uint8() != 0
            var shed: [String] = []
            for _ in 0..<(try reader.count(elementSize: 4)) { shed.append(try string()) }
            upstreams.append(
                UpstreamEntry(id: id, state: state, capacity: capacity, circuitOpen: circuitOpen, shed: shed))
        }
        let tenantCount = try reader.count(elementSize: 73)
        var tenants: [TenantEntry] = []
        tenants.reserveCapacity(tenantCount)
        for _ in 0..<tenantCount {
            let id = try string()
            let upstream = try string()
            let tier = try string()
            let priority = Int(try reader.int32())
            let rpm = try bucket()
            let tpm = try bucket()
            let queueWeight = try reader.double()
            let reason = Reasons(rpm: try string(), tpm: try string())
            let flags = try reader.uint8()
            var credit: BurstCredit?
            if flags & 1 != 0 {
                credit = BurstCredit(
                    calls: try reader.double(), tokens: try reader.double(), expiresAt: try reader.double())
            }
            let mode = try string()
            let maxConcurrency = Int(clamping: try integer())
            var estimate: TokenEstimate?
            if flags & 2 != 0 { estimate = TokenEstimate(p50: try reader.double(), p95: try reader.double()) }
            let deny = flags & 4 != 0 ? try string() : nil
            // Written since 2026-11-29; versions persisted before carry no ceiling.
            let ceiling = flags & 8 != 0 ? DimensionValues(rpm: try reader.double(), tpm: try reader.double()) : nil
            tenants.append(
                TenantEntry(
                    id: id, upstream: upstream, tier: tier, priority: priority, rpm: rpm, tpm: tpm,
                    queueWeight: queueWeight, reason: reason, burstCredit: credit, mode: mode,
                    maxConcurrency: maxConcurrency, tokenEstimate: estimate, deny: deny, ceiling: ceiling))
        }
        let defaults = try limits()
        var fallback: [FallbackEntry] = []
        for _ in 0..<(try reader.count(elementSize: 40)) {
            fallback.append(
                FallbackEntry(id: try string(), upstream: try string(), rpm: try bucket(), tpm: try bucket()))
        }
        let fallbackDefaults = try limits()
        var budgets: [String: TaskBudget] = [:]
        for _ in 0..<(try reader.count(elementSize: 20)) {
            let taskClass = try string()
            budgets[taskClass] = TaskBudget(
                maxCalls: Int(clamping: try integer()), maxTokens: Int(clamping: try integer()))
        }
        guard reader.isAtEnd else { throw LoopStateError(component: "snapshot", message: "trailing bytes") }
        guard plan.tenants.isEmpty || plan.tenants.count == tenants.count else {
            throw LoopStateError(
                component: "slice plan", message: "\(plan.tenants.count) tenant slices for \(tenants.count) tenants")
        }
        self.init(
            snapshot: Snapshot(
                version: version, generatedAt: generatedAt, expiresAt: expiresAt, refreshMs: refreshMs,
                policyVersion: policyVersion, gateway: gateway, upstreams: upstreams, tenants: tenants,
                defaultLimits: defaults, fallback: Fallback(tenants: fallback, defaultLimits: fallbackDefaults),
                taskBudgets: budgets),
            plan: plan)
    }

    /// The content of a stored version (a row of `snapshots`), e.g. to inspect what was published.
    ///
    /// - Throws: ``LoopStateError`` for damaged bytes.
    public init(stored record: SnapshotRecord) throws(LoopStateError) {
        self = try AllocationPublisher.content(body: record.body, slices: record.slices)
    }

    private static func write(_ bucket: Bucket, to writer: inout BinaryWriter) {
        writer.double(bucket.rate)
        writer.double(bucket.burst)
    }

    private static func write(_ limits: RateLimits, to writer: inout BinaryWriter) {
        write(limits.rpm, to: &writer)
        write(limits.tpm, to: &writer)
    }
}

/// Strings written once and referred to by index.
private struct StringTable {
    private(set) var list: [String] = []
    private var indices: [String: UInt32] = [:]
    private(set) var bytes = 0
    /// The last string of each ``Site`` and its index, compared before hashing: six of a tenant's
    /// seven strings (its upstream, tier, reasons, mode) repeat a handful of values, and hashing
    /// them all cost more than the rest of the encoding. Indices are what the dictionary gives.
    private var last: [(string: String, index: UInt32)?] = Array(repeating: nil, count: Site.allCases.count)

    /// Where a repeating string is written.
    enum Site: Int, CaseIterable {
        case upstream, tier, rpmReason, tpmReason, mode
    }

    mutating func index(_ string: String) -> UInt32 {
        if let index = indices[string] { return index }
        let index = UInt32(list.count)
        indices[string] = index
        list.append(string)
        bytes += 4 + string.utf8.count
        return index
    }

    mutating func index(_ string: String, at site: Site) -> UInt32 {
        if let last = last[site.rawValue], last.string == string { return last.index }
        let index = index(string)
        last[site.rawValue] = (string, index)
        return index
    }
}
