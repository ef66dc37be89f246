import AllotSQLite
import AllotStore
import Testing

@testable import AllotCore

/// The operators' tables (migration 0003) without HTTP: tokens, audit log filters and paging,
/// overrides, override proposals and their conflicts.
@Suite struct OperatorStoreTests {
    static let now = 1_795_000_000.0

    func entry(_ action: String, subject: String = "acme", tenant: String? = "acme", at offset: Int64 = 0) -> AuditEntry
    {
        AuditEntry(
            atMs: Int64(Self.now * 1000) + offset, actor: "alice", action: action, subject: subject, tenant: tenant)
    }

    @Test func auditFiltersByFamilyLiterallyAndPagesNewestFirst() async throws {
        let log = AuditLog(pool: try await StoreDatabase.temporary())
        for (index, action) in [
            "override.set", "override_x.set", "overrides.set", "proposal.approve", "override.delete",
        ]
        .enumerated() {
            try await log.append(entry(action, at: Int64(index)))
        }
        let family = try await log.entries(AuditQuery(action: "override"))
        #expect(family.map(\.action) == ["override.delete", "override.set"])
        let exact = try await log.entries(AuditQuery(action: "override.set"))
        #expect(exact.map(\.action) == ["override.set"])
        let first = try await log.entries(AuditQuery(limit: 2))
        #expect(first.map(\.action) == ["override.delete", "proposal.approve"])
        let next = try await log.entries(AuditQuery(beforeID: first.last?.id, limit: 2))
        #expect(next.map(\.action) == ["overrides.set", "override_x.set"])
        let window = try await log.entries(
            AuditQuery(fromMs: Int64(Self.now * 1000) + 1, toMs: Int64(Self.now * 1000) + 3))
        #expect(window.map(\.action) == ["overrides.set", "override_x.set"])
        #expect(try await log.count() == 5)
    }

    @Test func tokensAreFoundByHashAndRevokedOnce() async throws {
        let pool = try await StoreDatabase.temporary()
        let tokens = TokenStore(pool: pool)
        let hash = String(repeating: "ab", count: 32)
        let record = TokenRecord(id: "tok-1", name: "gw", role: "gateway", createdMs: 1, createdBy: "cli")
        #expect(try await tokens.createFirst(record, hash: hash, audit: entry("token.create", subject: "tok-1")))
        var second = record
        second.id = "tok-2"
        #expect(!(try await tokens.createFirst(second, hash: String(repeating: "cd", count: 32), audit: entry("x"))))
        #expect(try await tokens.token(hash: hash)?.record.id == "tok-1")
        #expect(try await tokens.token(hash: String(repeating: "ef", count: 32)) == nil)
        // A hash that is not 64 characters is refused by the schema.
        await #expect(throws: (any Error).self) {
            try await tokens.create(second, hash: "short", audit: self.entry("token.create"))
        }
        let audit = AuditLog(pool: pool)
        let revoked = try await tokens.revoke(id: "tok-1", atMs: 5, by: "admin") { _, _ in self.entry("token.revoke") }
        #expect(revoked?.after.revokedMs == 5)
        let again = try await tokens.revoke(id: "tok-1", atMs: 9, by: "admin") { _, _ in self.entry("token.revoke") }
        #expect(again?.after.revokedMs == 5)
        #expect(try await tokens.revoke(id: "tok-9", atMs: 9, by: "admin") { _, _ in self.entry("x") } == nil)
        #expect(try await audit.entries(AuditQuery(action: "token.revoke")).count == 1)
        try await tokens.touch(id: "tok-1", atMs: 7)
        try await tokens.touch(id: "tok-1", atMs: 6)  // never goes back
        #expect(try await tokens.token(id: "tok-1")?.lastUsedMs == 7)
    }

    /// A gateway token's scope is stored and read back (by id, by hash, in the list); the scope's rules: an exact
    /// id, or a prefix ending in `*`, in gateway ids' characters.
    @Test func aGatewayScopeIsStoredAndMatchesIdsOrPrefixes() async throws {
        let tokens = TokenStore(pool: try await StoreDatabase.temporary())
        let hash = String(repeating: "ab", count: 32)
        let record = TokenRecord(
            id: "tok-1", name: "eu", role: "gateway", createdMs: 1, createdBy: "cli", gatewayScope: "gw-eu-*")
        try await tokens.create(record, hash: hash, audit: entry("token.create", subject: "tok-1"))
        #expect(try await tokens.token(id: "tok-1")?.gatewayScope == "gw-eu-*")
        #expect(try await tokens.token(hash: hash)?.record.gatewayScope == "gw-eu-*")
        #expect(try await tokens.all().map(\.json).first?["gateway_scope"] == "gw-eu-*")

        #expect(GatewayScope.allows("gw-eu-*", gateway: "gw-eu-7"))
        #expect(GatewayScope.allows("gw-eu-*", gateway: "gw-eu-"))
        #expect(!GatewayScope.allows("gw-eu-*", gateway: "gw-us-1"))
        #expect(GatewayScope.allows("gw-1", gateway: "gw-1"))
        #expect(!GatewayScope.allows("gw-1", gateway: "gw-10"))
        #expect(GatewayScope.allows("*", gateway: "anything"))
        #expect(GatewayScope.allows(nil, gateway: "anything"))
        let longest = String(repeating: "g", count: 127) + "*"
        for valid in ["gw-1", "gw-eu-*", "*", "a/b:c.d_e-*", longest] { #expect(GatewayScope.isValid(valid)) }
        for invalid in ["", "**", "gw*eu", "gw eu", "é", String(repeating: "g", count: 129), "g" + longest] {
            #expect(!GatewayScope.isValid(invalid), "\(invalid)")
        }
    }

    @Test func theFirstTokenOfARoleIsCreatedWhateverOtherRolesExist() async throws {
        let tokens = TokenStore(pool: try await StoreDatabase.temporary())
        let operatorToken = TokenRecord(id: "tok-1", name: "cs", role: "operator", createdMs: 1, createdBy: "cli")
        try await tokens.create(operatorToken, hash: String(repeating: "ab", count: 32), audit: entry("token.create"))
        // An operator token made before the first start does not stand in for the admin token.
        let admin = TokenRecord(id: "tok-2", name: "admin", role: "admin", createdMs: 2, createdBy: "first-start")
        #expect(try await tokens.createFirst(admin, hash: String(repeating: "cd", count: 32), audit: entry("x")))
        // A revoked admin token still counts: revoking it is not asking for a new one.
        _ = try await tokens.revoke(id: "tok-2", atMs: 3, by: "admin") { _, _ in self.entry("token.revoke") }
        var another = admin
        another.id = "tok-3"
        #expect(!(try await tokens.createFirst(another, hash: String(repeating: "ef", count: 32), audit: entry("x"))))
        #expect(try await tokens.all().map(\.id) == ["tok-1", "tok-2"])
    }

    @Test func overridesExpireAndProposalsConflict() async throws {
        let store = OperatorStore(pool: try await StoreDatabase.temporary())
        let override = Override(
            tenant: "acme", weight: 2, actor: "bob", reason: "promise", createdAt: Self.now, expiresAt: Self.now + 60)
        let previous = try await store.setOverride(override, now: Self.now) { _ in self.entry("override.set") }
        #expect(previous == nil)
        #expect(try await store.overrides(now: Self.now + 59).map(\.override) == [override])
        #expect(try await store.overrides(now: Self.now + 60).isEmpty)
        #expect(try await store.inputs(now: Self.now + 1).overrides == [override])

        var ceiling = override
        ceiling.ceiling = PerDimension(rpm: .absolute(1), tpm: nil)
        let proposal = Proposal.forOverride(ceiling, crossings: [], settings: ProposalSettings())
        try await store.fileOverrideProposal(proposal, now: Self.now, audit: entry("override.propose"))
        await #expect(throws: OperatorStoreError.self) {
            try await store.fileOverrideProposal(proposal, now: Self.now, audit: self.entry("override.propose"))
        }
        // While it waits, no direct override of the same tenant and upstream either.
        await #expect(throws: OperatorStoreError.self) {
            try await store.setOverride(override, now: Self.now) { _ in self.entry("override.set") }
        }
        let rejected = try await store.resolve(
            id: proposal.id, verdict: .reject, actor: "sre", now: Self.now + 1, settings: ProposalSettings()
        ) { _, _ in self.entry("proposal.reject") }
        #expect(rejected.storedStatus == "rejected")
        #expect(rejected.proposal.expiresAt == Self.now + 1 + ProposalSettings().rejectCooldownSeconds)
        do {
            try await store.fileOverrideProposal(proposal, now: Self.now + 2, audit: entry("override.propose"))
            Issue.record("a rejected proposal was filed again during its cool-down")
        } catch let error as OperatorStoreError {
            #expect(error.code == "proposal_rejected")
        }
    }
}

/// Burst credit the engine lent unasked (SPEC 6.5) is kept beside the requests operators sent.
@Suite struct DetectedBurstStoreTests {
    @Test func aCreditLentUnaskedIsStoredAsADecidedRequest() async throws {
        let store = OperatorStore(pool: try await StoreDatabase.temporary())
        let now = OperatorStoreTests.now
        let request = BurstRequest(
            id: "detected-acme-\(Int64(now * 1000))", tenant: "acme", upstream: "p/m", calls: 60, tokens: 0,
            ttlSeconds: 120, requestedAt: now)
        let credit = BurstCredit(
            id: request.id, tenant: "acme", upstream: "p/m", taskID: nil, rate: PerDimension(rpm: 30, tpm: 0),
            grantedAt: now, expiresAt: now + 120)
        let decision = Decision(
            now: now, allocations: [], pools: [], proposals: [], expiredProposals: [], resolutions: [],
            burstDecisions: [
                BurstDecision(
                    requestID: request.id, tenant: "acme", upstream: "p/m", outcome: .granted, credit: credit)
            ], detectedBursts: [request], budgets: [], alerts: [])
        try await store.record(decision, now: now)
        // Recorded twice (a tick retried): still one row.
        try await store.record(decision, now: now)
        let stored = try await store.bursts(tenant: "acme")
        #expect(stored.count == 1)
        let row = try #require(stored.first)
        #expect(row.request == request)
        #expect(row.requestedBy == OperatorStore.detectedBy)
        #expect(row.status == "granted")
        #expect(row.decidedAt == now)
        #expect(row.credit == credit)
        // Never handed to the engine as a pending request.
        #expect(try await store.inputs(now: now).burstRequests.isEmpty)
    }
}
