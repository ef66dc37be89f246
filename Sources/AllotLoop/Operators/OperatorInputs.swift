import AllotCore

/// What operators asked of the engine for one tick (SPEC 6.5, 6.7, 6.8).
public struct OperatorInputBatch: Sendable, Hashable {
    /// Overrides in force (expired ones are ignored by the engine anyway).
    public var overrides: [Override]
    /// SREs' approvals and rejections not yet applied.
    public var resolutions: [ProposalResolution]
    /// Burst credit requests not yet decided.
    public var burstRequests: [BurstRequest]

    public init(overrides: [Override] = [], resolutions: [ProposalResolution] = [], burstRequests: [BurstRequest] = [])
    {
        self.overrides = overrides
        self.resolutions = resolutions
        self.burstRequests = burstRequests
    }
}

/// Where the loop gets operator inputs each tick, and reports each decision back to.
///
/// The contract is at-least-once: ``inputs(now:)`` returns every resolution and burst request not
/// yet decided, and ``record(_:now:)`` receives the decision that took them into account
/// (`Decision.resolutions`, `Decision.burstDecisions`, `Decision.proposals`), after which they
/// must no longer be returned. A tick that fails between the two simply sees them again next
/// tick. The operators' SQLite implementation (overrides, proposals and bursts tables) and
/// ``InMemoryOperatorInputs`` (tests, simulator) both follow it.
public protocol OperatorInputs: Sendable {
    /// The inputs for the tick at `now`. A failure does not fail the tick: the loop keeps the last
    /// overrides it received, applies no new resolution or burst request, and raises an
    /// `operator_inputs` alert.
    func inputs(now: Double) async throws -> OperatorInputBatch

    /// The decision computed from the last inputs: proposals filed, expired and resolved, burst
    /// requests decided.
    func record(_ decision: Decision, now: Double) async
}

/// Operator inputs held in memory: for tests, the simulator, and `serve` before the operators'
/// tables exist. Overrides stay until removed or expired; resolutions and burst requests stay
/// until a recorded decision mentions them.
public actor InMemoryOperatorInputs: OperatorInputs {
    private var overrides: [Override] = []
    private var resolutions: [ProposalResolution] = []
    private var burstRequests: [BurstRequest] = []
    private var proposals: [Proposal] = []
    private var outcomes: [BurstDecision] = []

    public init(overrides: [Override] = []) {
        self.overrides = overrides
    }

    /// Adds or replaces the override for (`tenant`, `upstream`).
    public func setOverride(_ override: Override) {
        overrides.removeAll { $0.tenant == override.tenant && $0.upstream == override.upstream }
        overrides.append(override)
    }

    /// Removes the override for (`tenant`, `upstream`).
    public func removeOverride(tenant: String, upstream: String? = nil) {
        overrides.removeAll { $0.tenant == tenant && $0.upstream == upstream }
    }

    /// Queues an SRE's approval or rejection for the next tick.
    public func resolve(_ resolution: ProposalResolution) {
        resolutions.append(resolution)
    }

    /// Queues a burst credit request for the next tick.
    public func requestBurst(_ request: BurstRequest) {
        burstRequests.append(request)
    }

    /// The proposals of the last recorded decision.
    public func currentProposals() -> [Proposal] { proposals }

    /// Every burst decision recorded so far, oldest first.
    public func burstOutcomes() -> [BurstDecision] { outcomes }

    public func inputs(now: Double) -> OperatorInputBatch {
        OperatorInputBatch(
            overrides: overrides.filter { $0.expiresAt > now }, resolutions: resolutions,
            burstRequests: burstRequests)
    }

    public func record(_ decision: Decision, now: Double) {
        let resolved = Set(decision.resolutions.map(\.resolution))
        resolutions.removeAll { resolved.contains($0) }
        let decided = Set(decision.burstDecisions.map(\.requestID))
        burstRequests.removeAll { decided.contains($0.id) }
        overrides.removeAll { $0.expiresAt <= now }
        proposals = decision.proposals
        outcomes += decision.burstDecisions
    }
}
