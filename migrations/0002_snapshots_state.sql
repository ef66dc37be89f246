-- 0002 — the feedback loop's memory (SPEC sections 2 and 7): published snapshots, the
-- estimators' and the engine's state, and what the Publisher knows about gateways.
--
-- Conventions as in 0001: instants are INTEGER milliseconds since the Unix epoch, tables STRICT.

-- Every published allocation snapshot, newest last. A row is written (and committed) BEFORE its
-- version becomes visible to any gateway, so a crash can lose a version nobody has seen but never
-- serve one that is not on disk. `version` is the snapshot's version and ETag; the next version
-- is always max(version) + 1, so versions only increase across restarts, even after a crash
-- between this INSERT and the publish (the unseen version is then served on restart). Old rows are
-- pruned, never the newest, so max(version) never goes back.
CREATE TABLE snapshots (
    version        INTEGER PRIMARY KEY,
    generated_ms   INTEGER NOT NULL,
    expires_ms     INTEGER NOT NULL,
    -- tick: a tick's decision; shrink: the first half of a make-before-break transition (growth
    -- held back); growth: its second half; drain: a lease that has already expired.
    kind           TEXT    NOT NULL CHECK (kind IN ('tick', 'shrink', 'growth', 'drain')),
    policy_version TEXT    NOT NULL,
    -- The global view, in AllotLoop's binary form of the snapshot (SnapshotContent+Binary.swift:
    -- 'ASC1', a string table, then every field). Not the JSON itself: encoding 10,000 tenants' JSON
    -- takes most of a tick, so it is encoded only when first served; the encoder is deterministic,
    -- so a restart serves byte for byte what was served before. (A JSON document is read too.)
    body           BLOB    NOT NULL,
    -- How each tenant's allocation is split between gateways (per-gateway slices); binary, see
    -- AllotLoop's SlicePlan codec.
    slices         BLOB    NOT NULL,
    -- For a 'shrink' row: the target (body and slices, same forms) to publish once the gateways enforcing
    -- the shrunk tenants have polled this version; NULL otherwise.
    pending_body   BLOB,
    pending_slices BLOB
) STRICT;

-- The loop's estimator state, so a restart resumes instead of starting blind (SPEC section 7):
-- capacity estimates, demand smoothing, dampers, burst debts, proposals. One row, replaced every
-- few ticks and at shutdown in one transaction with the telemetry cursor it corresponds to: after
-- a restart the loop re-reads the events after `last_event_id`, which the saved state has not
-- counted yet, so nothing is counted twice or skipped.
CREATE TABLE loop_checkpoint (
    singleton     INTEGER PRIMARY KEY CHECK (singleton = 1),
    saved_ms      INTEGER NOT NULL,
    -- events.id of the last telemetry row the saved estimator state includes.
    last_event_id INTEGER NOT NULL,
    tick          INTEGER NOT NULL,
    -- Encoding of the state blobs; a binary that does not know it starts blind rather than misread.
    format        INTEGER NOT NULL,
    observer      BLOB    NOT NULL,
    classifier    BLOB    NOT NULL,
    engine        BLOB    NOT NULL
) STRICT;

-- Gateways as the Publisher sees them from their snapshot polls: the version each one enforces
-- (what it sent in If-None-Match) and its last contact, for GET /v1/gateways, lag alerts,
-- per-gateway slices and make-before-break after a restart. Saved with the checkpoint.
CREATE TABLE gateway_contacts (
    id               TEXT    PRIMARY KEY,
    first_contact_ms INTEGER NOT NULL,
    last_contact_ms  INTEGER NOT NULL,
    enforced_version INTEGER,          -- NULL until the gateway sent a version it enforces
    polls            INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
