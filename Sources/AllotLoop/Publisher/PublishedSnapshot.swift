import AllotCore
import AllotProtocol
import AllotStore
import Dispatch
import Foundation

/// One published snapshot version: immutable, served from bytes encoded once (SPEC 7, and SPEC 13's
/// 20,000 conditional requests per second: a request never encodes).
///
/// The global view's JSON is encoded once per version, when first needed (or ahead of time when
/// global-view clients are about: ``AllocationPublisher`` warms it); per-gateway slices are encoded
/// lazily, once per (version, gateway). Both are cached here and die with the version.
public final class PublishedSnapshot: Sendable {
    /// The global view, with its version and lease.
    public let content: SnapshotContent
    public let kind: SnapshotRecord.Kind
    /// The version quoted as an entity tag (RFC 9110 section 8.8.3), e.g. `"42"`.
    public let etag: String
    private let cache = Locked(SliceCache())

    /// - Parameter body: The global view's JSON when it is already at hand.
    init(content: SnapshotContent, kind: SnapshotRecord.Kind, body: [UInt8]? = nil) {
        self.content = content
        self.kind = kind
        self.etag = "\"\(content.snapshot.version)\""
        if let body { cache.withLock { $0.global = body } }
    }

    /// The global view's JSON (what `GET /v1/snapshot` without `gateway` returns): encoded on first
    /// use, then cached. Two first uses at once may both encode; the result is the same.
    public var body: [UInt8] {
        if let encoded = cache.withLock({ $0.global }) { return encoded }
        let encoded = content.snapshot.encoded()
        return cache.withLock { cache in
            if let first = cache.global { return first }
            cache.global = encoded
            return encoded
        }
    }

    /// Whether the global view's JSON has been encoded.
    var hasEncodedBody: Bool { cache.withLock { $0.global != nil } }

    public var snapshot: Snapshot { content.snapshot }
    public var version: Int64 { content.snapshot.version }
    public var generatedAt: Double { content.snapshot.generatedAt }
    public var expiresAt: Double { content.snapshot.expiresAt }

    /// The bytes to serve to `gateway`: its slice, or the global view when nil.
    public func body(forGateway gateway: String?) -> [UInt8] {
        guard let gateway else { return body }
        if let cached = cache.withLock({ $0.bodies[gateway] }) { return cached }
        let known = index.position[gateway] != nil
        let bytes = slice(forGateway: gateway).encoded()
        // Only gateways of the plan are cached: any number of unknown ids may poll, and their
        // (empty) slices are cheap to encode.
        if known { cache.withLock { $0.bodies[gateway] = bytes } }
        return bytes
    }

    /// Encodes and caches the slices of `gateways` (those of the plan) on every core, so that a
    /// storm of long-polls woken by this version finds its bytes ready.
    func prepareSlices(forGateways gateways: [String]) {
        _ = index  // built once, before the workers share it
        let workers = max(1, min(gateways.count / 64, ProcessInfo.processInfo.activeProcessorCount))
        let results = SliceResults(count: gateways.count)
        DispatchQueue.concurrentPerform(iterations: workers) { worker in
            var position = worker
            while position < gateways.count {
                results.store(slice(forGateway: gateways[position]).encoded(), at: position)
                position += workers
            }
        }
        let encoded = results.take()
        cache.withLock { cache in
            cache.bodies.reserveCapacity(cache.bodies.count + gateways.count)
            for (gateway, bytes) in zip(gateways, encoded) where cache.bodies[gateway] == nil {
                cache.bodies[gateway] = bytes
            }
        }
    }

    /// Whether `gateway`'s slice is already encoded (prepared ahead of a wake-up, or served once).
    func hasEncodedSlice(forGateway gateway: String) -> Bool { cache.withLock { $0.bodies[gateway] != nil } }

    /// Whether this version's split lists `gateway` (a gateway it does not list gets no tenant entry).
    public func plans(_ gateway: String) -> Bool { index.position[gateway] != nil }

    /// The gateway's slice of this version (SPEC 7): the tenants it serves, each with the gateway's
    /// part of the rates, bucket sizes, burst credit and fallback floors; upstreams, `default` and
    /// task budgets as in the global view. A gateway the plan does not list gets no tenant entry.
    public func slice(forGateway gateway: String) -> Snapshot {
        var result = content.snapshot
        result.gateway = gateway
        let index = self.index
        guard let position = index.position[gateway] else {
            result.tenants = []
            result.fallback.tenants = []
            return result
        }
        let global = content.snapshot
        let parts = index.parts(of: position, gatewayCount: content.plan.gateways.count, tenants: global.tenants)
        var tenants: [TenantEntry] = []
        var fallback: [FallbackEntry] = []
        tenants.reserveCapacity(parts.count)
        for part in parts {
            let entry = global.tenants[part.tenant]
            let share = Share(entry: entry, rpm: part.rpm, tpm: part.tpm, gatewayCount: part.count)
            let stagger =
                Share.needsStagger(rate: part.rpm, gateways: part.count)
                ? Share.stagger(tenant: entry.id, upstream: entry.upstream, position: position) : nil
            tenants.append(share.apply(to: entry, rpm: part.rpm, tpm: part.tpm, stagger: stagger))
            if let fallbackIndex = index.fallback[Key(id: entry.id, upstream: entry.upstream)] {
                fallback.append(share.apply(to: global.fallback.tenants[fallbackIndex]))
            }
        }
        result.tenants = tenants
        result.fallback.tenants = fallback
        return result
    }

    /// How this version splits `tenant`'s allocation on `upstream` between gateways: (gateway, rpm, tpm) sorted by
    /// gateway, an even split spelled out; empty when the snapshot does not list the tenant there or no gateway
    /// is in the plan. What the gateways enforce, as against the Classifier's demand shares it was cut from
    /// (a young tenant is split evenly, every share is raised to a small minimum).
    public func gatewaySlices(tenant: String, upstream: String) -> [(gateway: String, rpm: Double, tpm: Double)] {
        let tenants = content.snapshot.tenants
        guard let position = tenants.firstIndex(where: { $0.id == tenant && $0.upstream == upstream }) else {
            return []
        }
        let entry = tenants[position]
        return content.plan.materialized(position, rpm: entry.rpm.rate, tpm: entry.tpm.rate)
    }

    /// The tenant entries `gateway` receives a slice of (global indices), in snapshot order.
    public func tenantIndices(forGateway gateway: String) -> [Int] {
        let index = self.index
        guard let position = index.position[gateway] else { return [] }
        return index.parts(of: position, gatewayCount: content.plan.gateways.count, tenants: content.snapshot.tenants)
            .map(\.tenant)
    }

    // MARK: Index

    private struct Key: Hashable {
        var id: String
        var upstream: String
    }

    private struct Part {
        var tenant: Int
        var rpm: Double
        var tpm: Double
        /// Gateways the tenant is split between (for an even split, and as the last-resort share).
        var count: Int
    }

    /// Which tenants each gateway of the plan serves, built once per version on first use.
    private struct SliceIndex: Sendable {
        var position: [String: Int] = [:]
        /// Per gateway position: (tenant index, rpm, tpm, slices of that tenant).
        var listed: [[(tenant: Int, rpm: Double, tpm: Double, count: Int)]] = []
        /// Tenants split evenly between every gateway of the plan.
        var even: [Int] = []
        var fallback: [Key: Int] = [:]

        /// Merges the listed and even tenants of one gateway in tenant order.
        func parts(of position: Int, gatewayCount: Int, tenants: [TenantEntry]) -> [Part] {
            let listed = self.listed[position]
            var parts: [Part] = []
            parts.reserveCapacity(listed.count + even.count)
            var i = 0
            var j = 0
            while i < listed.count || j < even.count {
                if j >= even.count || (i < listed.count && listed[i].tenant < even[j]) {
                    parts.append(
                        Part(tenant: listed[i].tenant, rpm: listed[i].rpm, tpm: listed[i].tpm, count: listed[i].count))
                    i += 1
                } else {
                    let entry = tenants[even[j]]
                    parts.append(
                        Part(
                            tenant: even[j], rpm: SlicePlan.evenPart(entry.rpm.rate, count: gatewayCount),
                            tpm: SlicePlan.evenPart(entry.tpm.rate, count: gatewayCount), count: gatewayCount))
                    j += 1
                }
            }
            return parts
        }
    }

    private struct SliceCache {
        var global: [UInt8]?
        var index: SliceIndex?
        var bodies: [String: [UInt8]] = [:]
    }

    private var index: SliceIndex {
        if let built = cache.withLock({ $0.index }) { return built }
        let built = buildIndex()
        cache.withLock { if $0.index == nil { $0.index = built } }
        return built
    }

    private func buildIndex() -> SliceIndex {
        let plan = content.plan
        var index = SliceIndex()
        for (position, gateway) in plan.gateways.enumerated() { index.position[gateway] = position }
        index.listed = Array(repeating: [], count: plan.gateways.count)
        for tenant in content.snapshot.tenants.indices {
            guard tenant < plan.tenants.count, let slices = plan.tenants[tenant] else {
                if !plan.gateways.isEmpty { index.even.append(tenant) }
                continue
            }
            for slice in slices where Int(slice.gateway) < plan.gateways.count {
                index.listed[Int(slice.gateway)].append((tenant, slice.rpm, slice.tpm, slices.count))
            }
        }
        for (position, entry) in content.snapshot.fallback.tenants.enumerated() {
            index.fallback[Key(id: entry.id, upstream: entry.upstream)] = position
        }
        return index
    }
}

/// A gateway's fraction of a tenant's allocation, per dimension.
struct Share {
    var rpm: Double
    var tpm: Double

    /// The slice's fraction of the entry in each dimension; a dimension whose global rate is zero
    /// takes the other dimension's fraction, or an even share.
    init(entry: TenantEntry, rpm: Double, tpm: Double, gatewayCount: Int) {
        let even = 1 / Double(max(1, gatewayCount))
        let byRPM = entry.rpm.rate > 0 ? min(1, max(0, rpm / entry.rpm.rate)) : nil
        let byTPM = entry.tpm.rate > 0 ? min(1, max(0, tpm / entry.tpm.rate)) : nil
        self.rpm = byRPM ?? byTPM ?? even
        self.tpm = byTPM ?? byRPM ?? even
    }

    /// The tenant entry with the slice's rates; bucket sizes scaled by the share plus room for one
    /// more request (``room(rate:of:request:)``: two where the slice refills a request more slowly than every
    /// 30 s; in tokens, the tenant's tokens per request, the larger of its rates' and its buckets' ratio),
    /// never above the tenant's own bucket — a clump spread over the gateways rounds up to whole requests on
    /// each, so a low-rate tenant is not held to one call per refill everywhere; the slices' buckets together
    /// exceed the tenant's by at most two requests per gateway (each gateway's own cap, `GatewayCap`, bounds
    /// what that adds up to over all its tenants). Burst credit is scaled by the share.
    ///
    /// Tokens per request from the buckets as well as the rates: the buckets hold the tenant's clump, calls
    /// counted with their tokens, while an RPM allocation with headroom makes the rates' ratio small. A
    /// long-context tenant (30k-token calls) allocated 20.6 rpm and 255k TPM read 12.4k tokens a request from
    /// its rates, 32k from its buckets.
    ///
    /// With a `stagger` (``stagger(tenant:upstream:position:)``) the RPM bucket is then raised to the next size
    /// whose fraction of a request is the stagger (``staggered(_:to:global:)``).
    func apply(to entry: TenantEntry, rpm: Double, tpm: Double, stagger: Double? = nil) -> TenantEntry {
        var sliced = entry
        let byRates = entry.rpm.rate > 0 && entry.tpm.rate > 0 ? entry.tpm.rate / entry.rpm.rate : 0
        let byBursts = entry.rpm.burst > 0 && entry.tpm.burst > 0 ? entry.tpm.burst / entry.rpm.burst : 0
        let tokensPerRequest = max(byRates, byBursts)
        sliced.rpm = Bucket(
            rate: rpm,
            burst: Self.burst(
                entry.rpm.burst * self.rpm + Self.room(rate: rpm, of: entry.rpm.rate, request: 1), rate: rpm,
                requests: true, global: entry.rpm.burst))
        if let stagger { sliced.rpm.burst = Self.staggered(sliced.rpm.burst, to: stagger, global: entry.rpm.burst) }
        sliced.tpm = Bucket(
            rate: tpm,
            burst: Self.burst(
                entry.tpm.burst * self.tpm
                    + tokensPerRequest * Self.room(rate: tpm, of: entry.tpm.rate, request: tokensPerRequest),
                rate: tpm, requests: false, global: entry.tpm.burst))
        if let credit = entry.burstCredit {
            sliced.burstCredit = AllotProtocol.BurstCredit(
                calls: credit.calls * self.rpm, tokens: credit.tokens * self.tpm, expiresAt: credit.expiresAt)
        }
        // The ceiling by the gateway's share, like the credit: the slices' ceilings sum to the tenant's.
        if let ceiling = entry.ceiling {
            sliced.ceiling = DimensionValues(
                rpm: ceiling.rpm.isFinite ? ceiling.rpm * self.rpm : .infinity,
                tpm: ceiling.tpm.isFinite ? ceiling.tpm * self.tpm : .infinity)
        }
        return sliced
    }

    /// The fallback floors scaled by the share: the slices' fallbacks sum to the tenant's floor.
    func apply(to entry: FallbackEntry) -> FallbackEntry {
        var sliced = entry
        sliced.rpm = Bucket(
            rate: entry.rpm.rate * rpm,
            burst: Self.burst(
                entry.rpm.burst * rpm, rate: entry.rpm.rate * rpm, requests: true, global: entry.rpm.burst))
        sliced.tpm = Bucket(
            rate: entry.tpm.rate * tpm,
            burst: Self.burst(
                entry.tpm.burst * tpm, rate: entry.tpm.rate * tpm, requests: false, global: entry.tpm.burst))
        return sliced
    }

    /// Requests of room a slice keeps above its share of the tenant's bucket: one, or two where it refills
    /// `request` (one request, or its tokens) more slowly than every 30 s (`rate` per minute) while the
    /// tenant's `whole` allocation refills it at least that fast — small because it is split, not because the
    /// tenant is.
    ///
    /// Why: a tenant's calls reach the gateways as a load balancer spreads them, not where a slice has room,
    /// and a slice that refills a request a minute or slower is full more often than a call waits there; what it
    /// refills while full is lost, while the tenant's calls wait at gateways whose slices are empty. 32
    /// gateways in front of `tpm-vs-rpm`'s 1M-TPM pool gave each long-context tenant (30k-token calls) 8k TPM
    /// per gateway with a 20k bucket: they were served 40 % of their entitlement, utilisation 75 %. With
    /// room for two requests (seeds 1-4): utilisation 85 %, starved tenant-minutes 47.7 → 23.4, and
    /// fleet-hour's at 32 gateways 65.5 → 44.3; at the built-ins' three gateways, where few slices are that
    /// small, nothing moved beyond noise. Two more requests at every gateway for every tenant raised
    /// blind-capacity-drop's 429s after its drop (utilisation 98.7 → 97.5 %). Tenants whose whole allocation is
    /// under two requests a minute keep room for one: on 60-rpm pools shared by 40 tenants, room for two
    /// everywhere raised the 429s (1.90 → 2.35 %) and the starvation (27.5 → 40.2 tenant-minutes).
    static func room(rate: Double, of whole: Double, request: Double) -> Double {
        request > 0 && rate < 2 * request && whole >= 2 * request ? 2 : 1
    }

    /// Whether a slice of `rate` requests a minute, one of `gateways`, is staggered: where the shares' tilt alone
    /// (`TenantTrack.gatewayTilt`, neighbours `2 × tilt / (gateways − 1)` apart in rate) would take longer than
    /// ``staggerDriftSeconds`` to move neighbouring slices a whole refill period apart. Behind three gateways that
    /// is slices under 10 rpm; behind 32, under 155.
    static func needsStagger(rate: Double, gateways: Int) -> Bool {
        guard gateways > 1, rate > 0, rate.isFinite else { return false }
        let period = 60 / rate
        let neighbours = 2 * TenantTrack.gatewayTilt / Double(gateways - 1)
        return period / neighbours > staggerDriftSeconds
    }

    /// Five minutes, the span of the default policy's `alerts.starvation_window_s`: slices that drift apart
    /// within it are left as they were. Staggering every slice cost the built-ins at their three gateways what
    /// they did not need (night-collision's total variation 14.79 → 15.91 %/min over seeds 1–8, its goal being
    /// equal-split's 14.27; random scenarios behind three gateways +0.6 and +0.9 % starved tenant-minutes); with
    /// this bound the built-ins are as before but for their few slow slices (night-collision 15.09) and behind 32
    /// gateways nothing of the gain is lost.
    static let staggerDriftSeconds = 300.0

    /// The fraction of a request the slices of `tenant` on `upstream` keep in their RPM buckets, per gateway
    /// position in the plan: a golden-ratio sequence (each position a further 0.618… of a request round the
    /// unit), started at a hash of the tenant and upstream — spread evenly over [0, 1) on any number of
    /// gateways, different for every tenant, the same for every version.
    static func stagger(tenant: String, upstream: String, position: Int) -> Double {
        var hash = StableHash()
        hash.add(tenant)
        hash.add(0)
        hash.add(upstream)
        let value = Double(hash.mixed >> 11) / 0x1p53 + Double(position) * 0.618_033_988_749_894_9
        return value - value.rounded(.down)
    }

    /// `burst` raised by less than one request to the next size whose fraction of a request is `stagger`, never
    /// above the tenant's `global` bucket; a burst under one request as it is.
    ///
    /// Why: a tenant that wants more than it is allocated has calls waiting at every gateway, and each gateway
    /// admits one as its slice refills a request. The slices of one tenant have nearly the same rate, and a full
    /// bucket, whatever its size, is drained by the same calls to the same fraction of a request — so a fleet
    /// whose buckets filled or were cut by the same snapshot refills in lockstep, for as long as the calls keep
    /// waiting. The shares' ±2 % tilt (`TenantTrack.tilts(of:tenant:)`) lets slices drift apart, but slowly
    /// where there are many: behind 32 gateways neighbours are 0.13 % apart, and slices that refill a request
    /// every 40 s drift about two seconds apart in half an hour. Behind 32 gateways, fleet-hour's standard
    /// tenants, allocated 45 rpm in the capacity dip (1.4 a gateway, a request every 41 s), were admitted at all
    /// 32 gateways within 18 s and then at none for 23 s: 32 or 64 requests in a minute, never the 45
    /// allocated, and under 70 % of their entitlement every other minute. The provider sees those rounds as
    /// bursts, and a burst it refuses reads as a lower limit. The fraction is what sets when a drained bucket
    /// next holds a whole request, so gateways that keep different fractions refill one after another, evenly
    /// over the period; the whole requests a full bucket admits at once are unchanged.
    ///
    /// Raised, not moved either way: trimming slices to the staggered fraction (`floor(burst) + stagger`) cost
    /// the calls that used the fraction (fleet-hour's critical tenants behind 32 gateways, p95 task latency 4.3 →
    /// 8.8 s); centred on the old size (±0.5), 5.6 s. Measured, seeds 1–8, against no stagger: fleet-hour behind
    /// 32 gateways 49.1 → 10.9 starved tenant-minutes, critical p95 4.3 → 2.9 s; blind-capacity-drop behind 32
    /// utilisation 96.3 → 98.4 % (its lowest seed 88.5 → 96.6 %: the over-cuts after its drop read the refused
    /// rounds), 429s 0.68 → 0.72 % (highest seed 0.84 → 0.95 %). Only where the tilt is too slow
    /// (``needsStagger(rate:gateways:)``); staggering every slice changed the built-ins at their three or four
    /// gateways within their noise but for night-collision's total variation. Its cost: in held-out random
    /// scenarios behind 8–16 gateways (where nearly every slice is staggered) starved tenant-minutes rose 4 %
    /// (1,430 → 1,481 on seed 1, 1,463 → 1,524 on seed 2; part of that is the noise of any change to those
    /// overloaded runs). In one, a premium tenant of eight parallel calls that retried hard borrowed more of
    /// the allocation others left idle (served a third more, at four times its own allocation); in another, a
    /// pool of 30k-token calls lost a point of utilisation. Staggering only slices under 6 rpm kept that cost
    /// and lost blind-capacity-drop's gain.
    static func staggered(_ burst: Double, to stagger: Double, global: Double) -> Double {
        guard burst >= 1, stagger.isFinite, stagger >= 0, stagger < 1 else { return burst }
        var raise = stagger - (burst - burst.rounded(.down))
        if raise < 0 { raise += 1 }
        return min(burst + raise, max(burst, global))
    }

    private static func burst(_ scaled: Double, rate: Double, requests: Bool, global: Double) -> Double {
        guard rate > 0 else { return 0 }
        let bounded = min(scaled, global)
        return requests ? max(bounded, min(1, global)) : bounded
    }
}

/// Slots filled by ``PublishedSnapshot/prepareSlices(forGateways:)``'s workers: each worker writes
/// only its own positions, and the caller reads them after `concurrentPerform` has returned.
private final class SliceResults: @unchecked Sendable {
    private let slots: UnsafeMutablePointer<[UInt8]>
    private let count: Int

    init(count: Int) {
        self.count = count
        slots = .allocate(capacity: count)
        slots.initialize(repeating: [], count: count)
    }

    deinit {
        slots.deinitialize(count: count)
        slots.deallocate()
    }

    func store(_ bytes: [UInt8], at position: Int) { slots[position] = bytes }

    func take() -> [[UInt8]] { Array(UnsafeBufferPointer(start: slots, count: count)) }
}
