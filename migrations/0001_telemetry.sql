-- 0001 — telemetry (SPEC section 3): the rows gateways report and what the loop reads back.
--
-- Conventions for every Allot table:
--   * instants are INTEGER milliseconds since the Unix epoch (UTC), columns named *_ms;
--   * durations are INTEGER milliseconds too (REAL where gateways report fractions);
--   * tables are STRICT, so a value of the wrong type is an error instead of a silent conversion.
--
-- Names (tenant, upstream, gateway, model version) are interned: each gets a small integer `ref`
-- the first time it is seen, and the big tables store that integer. An events row is then about
-- 60-90 bytes instead of ~150, which matters at 100,000 events/s and 24 hours of retention.
-- `events` deliberately has no FOREIGN KEY clauses: TelemetryStore interns the names in the same
-- transaction that inserts the events (so the refs always exist), parent rows are never deleted,
-- and three parent lookups per inserted row would cost ingest throughput for no protection.

-- Tenants, registered automatically on first telemetry (SPEC section 3, cold start) with the
-- policy's default tier at that moment. Operators' overrides live in their own tables.
CREATE TABLE tenants (
    ref           INTEGER PRIMARY KEY,      -- interned id used by events and rollups
    id            TEXT    NOT NULL UNIQUE,  -- as gateways send it: 1-128 of [A-Za-z0-9._:-]
    tier          TEXT    NOT NULL,
    first_seen_ms INTEGER NOT NULL,         -- earliest event ts seen
    last_seen_ms  INTEGER NOT NULL          -- latest event ts seen (last activity)
) STRICT;

-- Upstream pools (provider/model), e.g. 'openai/gpt-4o'.
CREATE TABLE upstreams (
    ref           INTEGER PRIMARY KEY,
    id            TEXT    NOT NULL UNIQUE,
    first_seen_ms INTEGER NOT NULL,         -- earliest event ts seen
    last_seen_ms  INTEGER NOT NULL          -- latest event ts seen
) STRICT;

-- Gateway instances. Times here are the server's clock at ingest (last contact), not event
-- times: a gateway replaying an old buffer has still just been heard from.
CREATE TABLE gateways (
    ref           INTEGER PRIMARY KEY,
    id            TEXT    NOT NULL UNIQUE,
    first_seen_ms INTEGER NOT NULL,
    last_seen_ms  INTEGER NOT NULL
) STRICT;

-- Model versions reported by gateways (few distinct values; a change lowers the Observer's
-- confidence, SPEC section 4).
CREATE TABLE model_versions (
    ref           INTEGER PRIMARY KEY,
    id            TEXT    NOT NULL UNIQUE,
    first_seen_ms INTEGER NOT NULL
) STRICT;

-- One row per upstream attempt, or per request a gateway denied or queued locally.
--
-- `id` is the rowid. The feedback loop reads new rows with `WHERE id > ?` (SPEC section 2:
-- incrementally, never the whole table), a range scan of the table b-tree itself, in insertion
-- order. That is sound because there is one writer: a transaction that commits later always
-- holds larger ids, so a reader that has seen up to id N never misses a row below N.
-- Ids must never be reused, or the loop would skip new rows: RetentionPruner never deletes the
-- row with the largest id (SQLite picks max(id) + 1 for a new row; no AUTOINCREMENT cost).
CREATE TABLE events (
    id                      INTEGER PRIMARY KEY,
    ts_ms                   INTEGER NOT NULL,
    tenant_ref              INTEGER NOT NULL,
    upstream_ref            INTEGER NOT NULL,
    gateway_ref             INTEGER NOT NULL,
    -- ok 0, quota_exhausted 1, spend_cap 2, overloaded 3, server_error 4, timeout 5,
    -- denied_local 6, queued 7 (Outcome.storageCode)
    outcome                 INTEGER NOT NULL CHECK (outcome BETWEEN 0 AND 7),
    -- realtime 0, interactive 1, batch 2, background 3 (TaskClass.storageCode)
    task_class              INTEGER NOT NULL CHECK (task_class BETWEEN 0 AND 3),
    status                  INTEGER,           -- upstream HTTP status; NULL when none
    latency_ms              REAL,
    queue_ms                REAL,
    prompt_tokens           INTEGER,
    completion_tokens       INTEGER,
    estimated_tokens        INTEGER,
    retry                   INTEGER,
    task_id                 TEXT,
    model_ref               INTEGER,           -- model_versions.ref
    error_type              TEXT,
    -- What the provider's rate-limit headers (or Google error body) said; NULL = not said,
    -- never 0. Resets, windows and retry-after are durations in ms from the response.
    -- header_family: generic 0, openai 1, anthropic 2, azure 3, google 4; NULL without headers.
    header_family           INTEGER,
    limit_requests          INTEGER,
    remaining_requests      INTEGER,
    reset_requests_ms       INTEGER,
    window_requests_ms      INTEGER,
    limit_tokens            INTEGER,
    remaining_tokens        INTEGER,
    reset_tokens_ms         INTEGER,
    window_tokens_ms        INTEGER,
    limit_input_tokens      INTEGER,
    remaining_input_tokens  INTEGER,
    limit_output_tokens     INTEGER,
    remaining_output_tokens INTEGER,
    retry_after_ms          INTEGER,
    utilization             REAL,              -- Azure deployment utilisation, 0..1
    unparseable_headers     INTEGER NOT NULL DEFAULT 0
) STRICT;

-- Time ranges over raw events: retention deletes rows older than a cutoff, and a loop without a
-- checkpoint looks for the first event at or after an instant. Gateways may deliver late, so ts is
-- not monotonic in id; but it nearly is (ids follow arrival), so instead of an index on ts_ms (one
-- b-tree entry per event: 15-25% of the CPU of inserting one) this table keeps, per block of 4096
-- consecutive ids, the range of ts in it. Ingest upserts one or two rows per batch; a time-range
-- query visits only the blocks whose range overlaps and scans those by rowid, so its work is
-- bounded by 4096 rows per block it touches. Bounds are exact when written; RetentionPruner
-- recomputes a block's bounds after deleting from it and drops the row of an emptied block.
CREATE TABLE event_blocks (
    block     INTEGER PRIMARY KEY,      -- id / 4096: the block holds ids [block * 4096, block * 4096 + 4095]
    min_ts_ms INTEGER NOT NULL,         -- smallest ts_ms of the block's events
    max_ts_ms INTEGER NOT NULL          -- largest ts_ms of the block's events
) STRICT;

-- Per-minute rollups per tenant, upstream and task class: showback (GET /v1/costs), tenant
-- history and spend windows read these instead of raw events, and they are kept 30 days while
-- raw events are kept 24 hours. Summing over task_class gives the SPEC's per tenant x upstream
-- rollup; the class is part of the key because spend and showback group by it.
-- Counts include every outcome, so demand = requests (served + denied_local + queued + errors).
CREATE TABLE rollups_minute (
    tenant_ref          INTEGER NOT NULL,
    minute_ms           INTEGER NOT NULL,      -- start of the UTC minute the events' ts fall in
    upstream_ref        INTEGER NOT NULL,
    task_class          INTEGER NOT NULL CHECK (task_class BETWEEN 0 AND 3),
    requests            INTEGER NOT NULL,      -- events of any outcome
    ok                  INTEGER NOT NULL,
    quota_exhausted     INTEGER NOT NULL,
    spend_cap           INTEGER NOT NULL,
    overloaded          INTEGER NOT NULL,
    server_error        INTEGER NOT NULL,
    timeout             INTEGER NOT NULL,
    denied_local        INTEGER NOT NULL,
    queued              INTEGER NOT NULL,
    retries             INTEGER NOT NULL,      -- events with retry > 0
    prompt_tokens       INTEGER NOT NULL,      -- sums of what events reported (absent = 0)
    completion_tokens   INTEGER NOT NULL,
    estimated_tokens    INTEGER NOT NULL,
    latency_count       INTEGER NOT NULL,      -- events that reported latency_ms
    latency_sum_ms      REAL    NOT NULL,
    latency_max_ms      REAL    NOT NULL,
    queue_count         INTEGER NOT NULL,      -- events that reported queue_ms
    queue_sum_ms        REAL    NOT NULL,
    queue_max_ms        REAL    NOT NULL,
    -- Coarse latency histogram (counts per bucket, upper bounds inclusive) so that percentiles
    -- over hours or days can be estimated from rollups once the raw events are gone.
    latency_le_250ms    INTEGER NOT NULL,
    latency_le_500ms    INTEGER NOT NULL,
    latency_le_1s       INTEGER NOT NULL,
    latency_le_2500ms   INTEGER NOT NULL,
    latency_le_5s       INTEGER NOT NULL,
    latency_le_10s      INTEGER NOT NULL,
    latency_le_30s      INTEGER NOT NULL,
    latency_gt_30s      INTEGER NOT NULL,
    -- Tenant first: tenant history (one tenant over a time range) is a prefix range scan.
    PRIMARY KEY (tenant_ref, minute_ms, upstream_ref, task_class)
) STRICT, WITHOUT ROWID;

-- Showback across all tenants for [from, to) and retention of rollups by age both scan by time.
CREATE INDEX rollups_minute_by_time ON rollups_minute (minute_ms);

-- How far rollups_minute has counted the events: every event with id <= last_event_id is in the
-- rollups, none above. TelemetryStore sums new events into rollup rows in memory and writes them
-- every few seconds (and before every rollup read), moving this mark in the same transaction;
-- upserting the rollup rows with every batch would cost more than storing the events, because a
-- batch from many tenants touches almost one rollup row per event. After a crash the store counts
-- the events above the mark in SQL before anything else, so the rollups lose nothing.
CREATE TABLE rollup_progress (
    singleton     INTEGER PRIMARY KEY CHECK (singleton = 1),
    last_event_id INTEGER NOT NULL
) STRICT;
INSERT INTO rollup_progress (singleton, last_event_id) VALUES (1, 0);

-- For people reading the database with the sqlite3 shell: events with names instead of refs.
CREATE VIEW events_readable AS
SELECT
    e.id,
    strftime('%Y-%m-%dT%H:%M:%fZ', e.ts_ms / 1000.0, 'unixepoch') AS ts,
    g.id AS gateway,
    t.id AS tenant,
    u.id AS upstream,
    CASE e.outcome
        WHEN 0 THEN 'ok' WHEN 1 THEN 'quota_exhausted' WHEN 2 THEN 'spend_cap' WHEN 3 THEN 'overloaded'
        WHEN 4 THEN 'server_error' WHEN 5 THEN 'timeout' WHEN 6 THEN 'denied_local' WHEN 7 THEN 'queued'
    END AS outcome,
    e.status,
    e.latency_ms,
    e.queue_ms,
    e.prompt_tokens,
    e.completion_tokens,
    e.estimated_tokens,
    CASE e.task_class WHEN 0 THEN 'realtime' WHEN 1 THEN 'interactive' WHEN 2 THEN 'batch' WHEN 3 THEN 'background'
    END AS task_class,
    e.task_id,
    m.id AS model_version,
    e.retry,
    e.error_type,
    CASE e.header_family
        WHEN 0 THEN 'generic' WHEN 1 THEN 'openai' WHEN 2 THEN 'anthropic' WHEN 3 THEN 'azure' WHEN 4 THEN 'google'
    END AS header_family,
    e.limit_requests, e.remaining_requests, e.reset_requests_ms, e.window_requests_ms,
    e.limit_tokens, e.remaining_tokens, e.reset_tokens_ms, e.window_tokens_ms,
    e.limit_input_tokens, e.remaining_input_tokens, e.limit_output_tokens, e.remaining_output_tokens,
    e.retry_after_ms, e.utilization, e.unparseable_headers
FROM events e
JOIN tenants t ON t.ref = e.tenant_ref
JOIN upstreams u ON u.ref = e.upstream_ref
JOIN gateways g ON g.ref = e.gateway_ref
LEFT JOIN model_versions m ON m.ref = e.model_ref;
