/// How one snapshot version splits each tenant's allocation between gateways (SPEC 7,
/// "per-gateway slices").
///
/// Several gateways enforce the same tenant; each gets a share of the tenant's allocation
/// proportional to its recent share of that tenant's demand (the Classifier's
/// `TenantStatus.gatewayShares`), with a small minimum for a gateway that just started seeing the
/// tenant, so that the slices of a tenant never sum above its allocation. The plan is frozen per
/// version (it is persisted with the snapshot), so a gateway joining or leaving changes the split
/// at the next tick, never within a version.
///
/// `tenants` is parallel to the snapshot's `tenants`: entry `i` lists the slices of tenant entry
/// `i`, or is nil when no gateway's demand for it is known yet — the allocation is then split
/// evenly between every gateway of the plan. A gateway the plan does not list (it first polled
/// after the tick) receives no tenant entry at all, so `default` applies to it until the next
/// tick re-splits: a new gateway starts small rather than over-admitting.
public struct SlicePlan: Sendable, Equatable {
    /// One gateway's part of one tenant's allocation, per minute.
    public struct Slice: Sendable, Equatable {
        /// Index into ``SlicePlan/gateways``.
        public var gateway: Int32
        public var rpm: Double
        public var tpm: Double

        public init(gateway: Int32, rpm: Double, tpm: Double) {
            self.gateway = gateway
            self.rpm = rpm
            self.tpm = tpm
        }
    }

    /// The gateways of this version, sorted and unique.
    public var gateways: [String]
    /// Per tenant entry: its slices sorted by gateway index, or nil for an even split.
    public var tenants: [[Slice]?]

    public init(gateways: [String] = [], tenants: [[Slice]?] = []) {
        self.gateways = gateways
        self.tenants = tenants
    }

    /// Slices are scaled by this factor (one part in 10¹²) so that however a gateway or a test
    /// sums them, floating-point rounding cannot take the sum above the allocation.
    static let margin = 1 - 1e-12

    /// One of `count` even parts of `value`.
    static func evenPart(_ value: Double, count: Int) -> Double {
        value / Double(max(1, count)) * margin
    }

    /// The slices of tenant entry `index` as (gateway id, rpm, tpm), sorted by id, with an even
    /// split spelled out.
    func materialized(_ index: Int, rpm: Double, tpm: Double) -> [(gateway: String, rpm: Double, tpm: Double)] {
        guard index < tenants.count, let slices = tenants[index] else {
            guard !gateways.isEmpty else { return [] }
            let count = gateways.count
            return gateways.map { ($0, Self.evenPart(rpm, count: count), Self.evenPart(tpm, count: count)) }
        }
        return slices.map { (gateways[Int($0.gateway)], $0.rpm, $0.tpm) }
    }

    /// Splits an allocation by demand shares (SPEC 7).
    ///
    /// Each listed gateway's share is raised to at least `minimumShare` (a gateway that just started
    /// seeing the tenant has a tiny smoothed share but real traffic), then the shares are
    /// normalised to sum to 1. The slices are scaled by ``margin`` and any remaining rounding is
    /// taken off the largest, so they never sum above the allocation. Returns nil when no share is usable (no known gateway demand).
    ///
    /// - Parameters:
    ///   - shares: Gateway id → smoothed share of the tenant's demand.
    ///   - index: Gateway id → index in the plan; gateways missing from it are left out (gone).
    public static func split(
        rpm: Double, tpm: Double, shares: [String: Double], index: [String: Int32], minimumShare: Double
    ) -> [Slice]? {
        var picked: [(gateway: Int32, share: Double)] = []
        picked.reserveCapacity(shares.count)
        for (gateway, share) in shares {
            guard let position = index[gateway], share.isFinite, share >= 0 else { continue }
            picked.append((position, max(share, minimumShare)))
        }
        guard !picked.isEmpty else { return nil }
        picked.sort { $0.gateway < $1.gateway }
        var total = 0.0
        for entry in picked { total += entry.share }
        guard total > 0 else { return nil }
        var slices = picked.map {
            Slice(gateway: $0.gateway, rpm: rpm * ($0.share / total) * margin, tpm: tpm * ($0.share / total) * margin)
        }
        correct(&slices, total: rpm, \.rpm)
        correct(&slices, total: tpm, \.tpm)
        return slices
    }

    /// Takes any excess of the slices' sum over `total` (floating-point rounding) off the largest.
    private static func correct(_ slices: inout [Slice], total: Double, _ key: WritableKeyPath<Slice, Double>) {
        var sum = 0.0
        for slice in slices { sum += slice[keyPath: key] }
        guard sum > total, let largest = slices.indices.max(by: { slices[$0][keyPath: key] < slices[$1][keyPath: key] })
        else { return }
        slices[largest][keyPath: key] = max(0, slices[largest][keyPath: key] - (sum - total))
        var again = 0.0
        for slice in slices { again += slice[keyPath: key] }
        if again > total { slices[largest][keyPath: key] = max(0, slices[largest][keyPath: key].nextDown) }
    }
}

// MARK: Binary form

extension SlicePlan {
    /// The plan as stored beside its snapshot: `ASP1`, the gateway ids, then per tenant a flag
    /// (0 even split, 1 listed) and its slices (gateway index, rpm, tpm), little-endian. Compact and
    /// fast for 10,000 tenants; the JSON document is what gateways see, this never leaves the server.
    public func encoded() -> [UInt8] {
        var writer = BinaryWriter(capacity: 16 + gateways.count * 24 + tenants.count * 24)
        writer.bytes(Self.magic)
        writer.uint32(UInt32(gateways.count))
        for gateway in gateways { writer.string(gateway) }
        writer.uint32(UInt32(tenants.count))
        for slices in tenants {
            guard let slices else {
                writer.uint8(0)
                continue
            }
            writer.uint8(1)
            writer.uint32(UInt32(slices.count))
            for slice in slices {
                writer.int32(slice.gateway)
                writer.double(slice.rpm)
                writer.double(slice.tpm)
            }
        }
        return writer.finish()
    }

    /// Reads ``encoded()``.
    ///
    /// - Throws: ``LoopStateError`` naming what is wrong (never traps on damaged bytes).
    public init(decoding bytes: [UInt8]) throws(LoopStateError) {
        var reader = BinaryReader(bytes)
        guard try reader.bytes(count: 4) == Self.magic else {
            throw LoopStateError(component: "slice plan", message: "not a slice plan (bad magic)")
        }
        let gatewayCount = try reader.count(elementSize: 4)
        var gateways: [String] = []
        gateways.reserveCapacity(gatewayCount)
        for _ in 0..<gatewayCount { gateways.append(try reader.string()) }
        let tenantCount = try reader.count(elementSize: 1)
        var tenants: [[Slice]?] = []
        tenants.reserveCapacity(tenantCount)
        for _ in 0..<tenantCount {
            switch try reader.uint8() {
            case 0:
                tenants.append(nil)
            case 1:
                let count = try reader.count(elementSize: 20)
                var slices: [Slice] = []
                slices.reserveCapacity(count)
                for _ in 0..<count {
                    let gateway = try reader.int32()
                    guard gateway >= 0, Int(gateway) < gatewayCount else {
                        throw LoopStateError(component: "slice plan", message: "gateway index \(gateway) out of range")
                    }
                    slices.append(Slice(gateway: gateway, rpm: try reader.double(), tpm: try reader.double()))
                }
                tenants.append(slices)
            case let flag:
                throw LoopStateError(component: "slice plan", message: "unknown tenant flag \(flag)")
            }
        }
        guard reader.isAtEnd else { throw LoopStateError(component: "slice plan", message: "trailing bytes") }
        self.init(gateways: gateways, tenants: tenants)
    }

    private static let magic: [UInt8] = Array("ASP1".utf8)
}
