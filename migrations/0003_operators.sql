-- 0003 — operators (SPEC sections 6.5, 6.7, 6.8, 8): API tokens, the audit log, overrides,
-- proposals awaiting an SRE, and burst credit requests.
--
-- Conventions as in 0001: instants are INTEGER milliseconds since the Unix epoch, tables STRICT.
-- Structured values (an override's terms, a proposal's evidence) are JSON text: they are read
-- whole by the server, never queried by field, and stay readable in the sqlite3 shell.

-- API tokens (SPEC 8). The token itself is never stored anywhere: only the lowercase hex SHA-256
-- of its text (AllotCrypto's APIToken.storageHash). A token is looked up by that hash, and the
-- stored hash is compared with the presented one in constant time. Revoked tokens stay (listing,
-- audit) with revoked_ms set; they never authenticate again.
CREATE TABLE api_tokens (
    id           TEXT    PRIMARY KEY,             -- public, non-secret id, e.g. 'tok-3f9a0c21b7e4'
    name         TEXT    NOT NULL,                -- who or what it is for; the audit log's "who"
    role         TEXT    NOT NULL CHECK (role IN ('gateway', 'operator', 'sre', 'admin')),
    token_hash   TEXT    NOT NULL UNIQUE CHECK (length(token_hash) = 64),
    created_ms   INTEGER NOT NULL,
    created_by   TEXT    NOT NULL,                -- 'cli', 'first-start', or the admin's token name
    last_used_ms INTEGER,                         -- refreshed at most about once a minute
    revoked_ms   INTEGER,
    revoked_by   TEXT
) STRICT, WITHOUT ROWID;

-- Every mutation by a person or a process (SPEC 8): override set/delete, proposal approval and
-- rejection, burst requests, token creation and revocation, policy reloads. Append-only: the
-- server never updates or deletes a row. `id` orders the log and is the paging cursor.
CREATE TABLE audit_log (
    id         INTEGER PRIMARY KEY,
    at_ms      INTEGER NOT NULL,
    actor      TEXT    NOT NULL,                  -- the token's name, 'dev', 'cli' or 'policy-watcher'
    actor_role TEXT,                              -- the token's role when a token acted
    action     TEXT    NOT NULL,                  -- e.g. 'override.set', 'proposal.approve', 'token.revoke'
    subject    TEXT    NOT NULL,                  -- tenant id, proposal id, token id, policy source
    tenant     TEXT,                              -- the tenant concerned, if any (for filtering)
    before     TEXT,                              -- JSON of the state before, NULL when none
    after      TEXT,                              -- JSON of the state after, NULL when none
    reason     TEXT                               -- why, as the actor gave it
) STRICT;
CREATE INDEX audit_log_by_tenant ON audit_log (tenant, id) WHERE tenant IS NOT NULL;
CREATE INDEX audit_log_by_time ON audit_log (at_ms);

-- Overrides in force or waiting to expire (SPEC 6.8), one per tenant and upstream ('' = every
-- upstream of the tenant). An expired row is ignored by every reader and pruned by the loop's
-- record step; the audit log keeps the history. `body` is the override as JSON (Override.json).
CREATE TABLE overrides (
    tenant      TEXT    NOT NULL,
    upstream    TEXT    NOT NULL DEFAULT '',
    body        TEXT    NOT NULL,
    actor       TEXT    NOT NULL,
    reason      TEXT    NOT NULL,
    created_ms  INTEGER NOT NULL,
    expires_ms  INTEGER NOT NULL,
    approved    INTEGER NOT NULL DEFAULT 0 CHECK (approved IN (0, 1)),  -- approved across a guardrail
    proposal_id TEXT,                                                 -- the approved proposal, if any
    PRIMARY KEY (tenant, upstream)
) STRICT, WITHOUT ROWID;

-- Proposals (SPEC 6.7, 6.8). Two sources:
--   engine:   the engine's guardrail proposals, mirrored from each tick's decision (the engine's
--             state is the authority; this table is what the API lists and what survives in the
--             record after the engine forgets a proposal);
--   override: operator overrides that cross a guardrail, held here until an SRE decides.
-- status: pending, approved, rejected, expired, withdrawn (an override proposal its tenant's
-- override was deleted under). `body` is the Proposal as JSON, with the evidence.
CREATE TABLE proposals (
    id          TEXT    PRIMARY KEY,
    source      TEXT    NOT NULL CHECK (source IN ('engine', 'override')),
    kind        TEXT    NOT NULL,
    tenant      TEXT    NOT NULL,
    upstream    TEXT    NOT NULL,
    status      TEXT    NOT NULL CHECK (status IN ('pending', 'approved', 'rejected', 'expired', 'withdrawn')),
    body        TEXT    NOT NULL,
    filed_ms    INTEGER NOT NULL,
    updated_ms  INTEGER NOT NULL,
    expires_ms  INTEGER NOT NULL,                 -- pending: expiry; approved: lapse; rejected: cool-down end
    decided_by  TEXT,
    decided_ms  INTEGER
) STRICT, WITHOUT ROWID;
CREATE INDEX proposals_by_status ON proposals (status, expires_ms);
CREATE INDEX proposals_by_tenant ON proposals (tenant, upstream);

-- SREs' approvals and rejections of engine proposals, waiting for the next tick (the engine
-- applies them in its decision; OperatorInputs.record then deletes them). At-least-once: a tick
-- that fails between reading and recording sees them again.
CREATE TABLE proposal_resolutions (
    proposal_id TEXT    PRIMARY KEY,
    verdict     TEXT    NOT NULL CHECK (verdict IN ('approve', 'reject')),
    actor       TEXT    NOT NULL,
    at_ms       INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

-- Burst credit requests (SPEC 6.5): pending until the next tick decides them, then the outcome
-- (granted, partially_granted, suspect, no_reserve, …) and the credit lent, if any. Kept for the
-- tenant's page and the gateways that asked; old rows are pruned after a day.
CREATE TABLE burst_requests (
    id           TEXT    PRIMARY KEY,
    tenant       TEXT    NOT NULL,
    upstream     TEXT    NOT NULL,
    calls        REAL    NOT NULL,
    tokens       REAL    NOT NULL,
    ttl_s        REAL    NOT NULL,
    task_id      TEXT,
    requested_ms INTEGER NOT NULL,
    requested_by TEXT    NOT NULL,
    status       TEXT    NOT NULL,                -- 'pending', then BurstDecision.Outcome's raw value
    decided_ms   INTEGER,
    credit       TEXT                             -- JSON of the credit lent, NULL when none
) STRICT, WITHOUT ROWID;
CREATE INDEX burst_requests_pending ON burst_requests (requested_ms) WHERE status = 'pending';
CREATE INDEX burst_requests_by_tenant ON burst_requests (tenant, requested_ms);
