import AllotProtocol

/// The gateway's own share of an upstream: a pair of buckets per upstream, in each dimension refilled at the
/// sum of the gateway's slices there, holding ``GatewayConfiguration/capWindow`` seconds of that sum (at least
/// the largest tenant's burst), and charged with every request the gateway admits there. Admission needs room
/// in them as well as in the tenant's own bucket.
///
/// Why: each slice's bucket is rounded up to hold a whole request (``TokenBucket``, and the publisher's room of
/// one request per slice), so a tenant spread over many gateways can burst far above its allocation. 32
/// gateways in front of a 240-RPM pool hold 16 tenants × 32 slices of about one request each: after a lull the
/// fleet could release ~500 requests into a provider bucket of 40, and did (4.3% of the attempts answered 429,
/// the estimate cut to 85% of the pool, utilisation 88%). The sum of the slices of all gateways is the
/// allocation, so these buckets bound the whole fleet's burst to `capWindow` seconds of the allocation, whatever
/// the number of gateways; in the long run they change nothing (the slices already sum to the allocation).
///
/// Rules, each with its reason:
/// - **Realtime calls have a reserve.** Where realtime calls came to an upstream within the last
///   ``GatewayConfiguration/capRealtimeMemory`` seconds, the other classes are admitted only while they leave
///   ``GatewayConfiguration/capRealtimeReserve`` of the cap's burst, but at least one request and the last
///   realtime call's tokens, which a realtime call within its own allocation may use; a realtime call the cap
///   has no room for is held like any other (its maximum wait, 0.5 s by default, is usually shorter than the
///   refill, so it is denied with the refill as its retry-after). Measured against the alternatives (random
///   scenarios, seed 1, and a story of realtime tasks due in 10 s beside two bulk tenants):
///   - Realtime calls exempt (never held, charged all the same), as before: a realtime tenant's task sent six
///     calls, 7,200 tokens, within 1.6 s through an empty cap into an 8,000-token provider bucket. 5.0 % of
///     the attempts were answered 429, and the cuts held the estimate at 75–95 % of the true capacity
///     (60 rpm, 48k TPM, three gateways: utilisation 78.3 %; 84.1 % and 3.0 % with the reserve).
///   - Realtime calls held like the others: behind background calls queued for minutes, which take every
///     refill, a call that may wait half a second is denied whenever it comes (starved tenant-minutes
///     16.0 → 39.2; 16.8 with the reserve).
///   - A reserve that borrowed realtime calls may use too: a realtime tenant wanting three times its share
///     borrowed what its neighbour left idle while the reserve held that neighbour back (28.5 → 48.7 with a
///     quarter of the burst kept; 31.3 when only a realtime call within its own allocation may use it).
///   - A tenth of the burst without the one-request minimum: behind 32 gateways (a burst of three requests
///     each) it held no realtime call, and the realtime tasks made their 10-s deadlines 80 % of the time
///     instead of 94 % (exempt); 91 % with the minimum.
///   - Realtime calls may take an empty cap into debt by one call (no reserve): 93 % there, but in the
///     60-rpm scenario the 429s stayed (3.6 %) and in a token-bound one utilisation fell 75 → 67 %.
///   It changes no rate, only the burst the other classes may take; without realtime calls nothing is kept.
/// - **A borrowed request leaves one request of room.** Borrowing never takes from a lender's own bucket
///   (``IdleCapacity``), but every admission is charged here: a borrower that kept a small cap empty (a slice of a
///   few requests a minute behind 32 gateways) turned the tenants it borrowed from away when they came back, with
///   their own buckets full. Measured: random scenarios, seeds 1–4, starved tenant-minutes 1,318 → 1,305 and
///   sustained 45.6 → 31.9; a 300-rpm pool where one tenant wants four times it and six small ones a few calls a
///   minute, behind 32 gateways, 8.6 → 6.0. Leaving tokens too (the borrowed request's own size) was worse there
///   (+37.6 over three seeds).
/// - **Burst credit is outside it** (neither checked nor charged): credit is lent from the pool's reserve, which
///   no slice includes, and is meant to exceed the allocation.
/// - **Tenants on the snapshot's `default` entry are held and charged, but not summed.** A gateway's snapshot
///   lists the tenants it has a slice of; one new to it is on `default`, which is not sliced (every gateway has
///   all of it), so adding it would raise every gateway's cap by a whole tenant's allocation. Exempting them
///   let a 32-gateway fleet, where tenants keep arriving at gateways new to them, burst again (1.7% of the
///   attempts answered 429 instead of 0.4%).
/// - **Where the gateway holds no slice, a share of the upstream's capacity.** On an upstream the snapshot lists
///   with a capacity but none of whose tenants this gateway has a slice of (a fresh installation's first
///   snapshot lists nobody), everyone is a newcomer on `default`, and without a sum nothing bounded them
///   together: each newcomer's `default` bucket holds a whole request, at every gateway (1,000 tenants arriving
///   at once at a 600-rpm pool: 56 % of two minutes' attempts answered 429). There the cap refills at
///   ``GatewayConfiguration/newcomerCapShare`` of the upstream's capacity, until the snapshot gives the gateway
///   slices there.
/// - **It starts full, and a new snapshot keeps the level** (retuned like a tenant's bucket, never refilled); its
///   debt, a refusal's hold, is at most ``longestRefusalHold`` of refill at the new rate.
/// - A dimension with an unlimited tenant has no cap, like ``IdleCapacity``.
struct GatewayCap: SummedBuckets {
    var rpm: TokenBucket?
    var tpm: TokenBucket?

    /// The summed rates of an upstream where every tenant is a newcomer: `share` of its capacity per dimension,
    /// with one `newcomer` burst as the largest single burst (nil in a dimension without a finite capacity).
    static func newcomerSum(
        capacity: DimensionValues, share: Double, newcomer: RateLimits
    ) -> (rpm: Bucket?, tpm: Bucket?) {
        func sum(_ capacity: Double, _ burst: Double) -> Bucket? {
            guard capacity.isFinite, capacity > 0, capacity < IdleCapacity.unlimitedRate, share.isFinite else {
                return nil
            }
            return Bucket(rate: capacity * share, burst: burst.isFinite ? max(0, burst) : 0)
        }
        return (sum(capacity.rpm, newcomer.rpm.burst), sum(capacity.tpm, newcomer.tpm.burst))
    }

    /// Whether a request of `amount` tokens fits while leaving `reserve`: one request and `amount` tokens above
    /// it, at most a full bucket (a dimension whose `skip…` is set, or without a cap, always fits).
    func admits(amount: Double, reserve: CapReserve = .none, skipRPM: Bool, skipTPM: Bool, at now: Double) -> Bool {
        (skipRPM || rpm?.admits(1 + reserve.rpm, at: now) ?? true)
            && (skipTPM || tpm?.admits(amount + reserve.tpm, at: now) ?? true)
    }

    /// Which dimension blocks first, and seconds until both fit, leaving `reserve`, by refill alone (others draw
    /// on it too, so a lower bound).
    func blocking(
        amount: Double, reserve: CapReserve = .none, at now: Double
    ) -> (limit: LimitKind, bucket: Bucket, delay: Double) {
        let rpmDelay = rpm.flatMap { $0.delay(until: 1 + reserve.rpm, at: now) } ?? 0
        let tpmDelay = tpm.flatMap { $0.delay(until: amount + reserve.tpm, at: now) } ?? 0
        if tpmDelay > rpmDelay, let tpm { return (.tpm, tpm.parameters, tpmDelay) }
        return (.rpm, rpm?.parameters ?? Bucket(rate: 0, burst: 0), max(rpmDelay, tpmDelay))
    }

    /// After a quota refusal (429) for a request of `tokens`: draws each bucket down to where it admits such a
    /// request again only `retryAfter` seconds from `now` (at most ``longestRefusalHold``), or empties it when the
    /// refusal gives no retry-after. A bucket already that low is left alone.
    ///
    /// Why: the refusal says the provider has no room now, whatever the cap's burst says; the cap's burst is
    /// there to absorb the slices' rounding, not to be spent into an empty provider. Without this, a gateway that
    /// had saved a burst during a lull kept admitting it into the refusals until the Observer's next cut. With
    /// it (seed 1 unless stated): blind-capacity-drop, the provider stating no limit, seeds 1–8: 429s 0.84 →
    /// 0.58 %, utilisation 98.2 → 100.0 % (fewer cuts below the true limit); a 500-rpm pool behind 16 gateways
    /// whose declared 800 rpm the first bursts believed: 1.54 → 0.99 %, utilisation 89.1 → 92.9 %; a random
    /// 60-rpm pool 2.96 → 1.66 % (85.6 → 87.7 %); over the 14 random scenarios with any 429s, starved
    /// tenant-minutes 452.5 → 450.4 and 429s lower in nine. Emptying the cap instead, whatever the retry-after:
    /// 429s lower still there (1.09 %; blind-capacity-drop 0.45 %), but a 60-rpm pool of 5,000–10,000-token
    /// calls, where one call takes the gateway's third of the pool 11 s to refill and the provider 4, lost
    /// utilisation (85.5 → 79.8 %; 84.1 % with the retry-after).
    mutating func holdAfterRefusal(retryAfter: Double?, tokens: Double, at now: Double) {
        let wait = retryAfter.map { $0.isFinite ? min(max(0, $0), Self.longestRefusalHold) : Self.longestRefusalHold }
        func held(_ bucket: inout TokenBucket?, need: Double) {
            guard var current = bucket else { return }
            let floor = wait.map { need - current.ratePerSecond * $0 } ?? 0
            let level = current.level(at: now)
            guard level > floor else { return }
            current.take(level - floor, at: now)
            bucket = current
        }
        held(&rpm, need: 1)
        held(&tpm, need: tokens.isFinite ? max(0, tokens) : 0)
    }

    /// The longest retry-after a refusal holds the cap for, seconds: a minute, the window of the limits a
    /// gateway's refusals are about (a day's quota refused is the circuit's and the caller's business).
    static let longestRefusalHold = 60.0

    /// Applies new parameters at `instant`: a known bucket keeps its level (clamped), a new one starts full.
    mutating func retune(rpm newRPM: Bucket?, tpm newTPM: Bucket?, at instant: Double) {
        rpm = Self.retuned(rpm, newRPM, at: instant)
        tpm = Self.retuned(tpm, newTPM, at: instant)
    }

    private static func retuned(_ bucket: TokenBucket?, _ parameters: Bucket?, at instant: Double) -> TokenBucket? {
        guard let parameters else { return nil }
        guard var bucket else { return TokenBucket(parameters: parameters, now: instant) }
        // Its debt is a refusal's hold (a wait): at most the longest hold at the new rate.
        bucket.retune(to: parameters, at: instant, debtAtMost: longestRefusalHold)
        return bucket
    }
}

/// What a request must leave in the cap, per dimension (requests, tokens; never negative or non-finite), and for
/// whom: realtime calls, or the tenants a borrowed request borrows from.
struct CapReserve: Sendable, Equatable {
    enum Purpose: String, Sendable { case realtime = "realtime calls", lenders = "the tenants it borrows from" }
    var rpm: Double
    var tpm: Double
    var purpose: Purpose

    init(rpm: Double, tpm: Double, for purpose: Purpose = .realtime) {
        self.rpm = rpm.isFinite ? max(0, rpm) : 0
        self.tpm = tpm.isFinite ? max(0, tpm) : 0
        self.purpose = purpose
    }

    static let none = CapReserve(rpm: 0, tpm: 0)
    var isEmpty: Bool { rpm == 0 && tpm == 0 }
}

/// When the last realtime call came to an upstream, and its tokens (``EnforcerState/realtimeSeen``).
struct RealtimeSeen: Sendable {
    var at: Double
    var tokens: Double
}

/// Until when (gateway time) the cap holds, in each dimension, a request that its own buckets admit: nobody
/// borrows idle allocation in that dimension meanwhile (``EnforcerState/capHeldUntil``).
struct CapHold: Sendable {
    var rpm = -Double.infinity
    var tpm = -Double.infinity

    /// Holds `limit`'s dimension until at least `until` (other limits hold nothing).
    mutating func extend(_ limit: LimitKind, until: Double) {
        switch limit {
        case .rpm: rpm = max(rpm, until)
        case .tpm: tpm = max(tpm, until)
        default: break
        }
    }
}

/// A pair of buckets per upstream sized from the sum of the gateway's slices there (``IdleCapacity``,
/// ``GatewayCap``), retuned on every snapshot.
protocol SummedBuckets: Sendable {
    init()
    mutating func retune(rpm newRPM: Bucket?, tpm newTPM: Bucket?, at instant: Double)
}
