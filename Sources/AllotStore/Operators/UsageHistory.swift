import AllotSQLite

/// Served traffic of one upstream pool in one minute, summed over tenants and task classes: the
/// upstream chart of the dashboard (`GET /v1/upstreams?history_minutes=`).
public struct UpstreamMinute: Sendable, Hashable {
    public var upstream: String
    public var minuteMs: Int64
    /// Events of any outcome, and those that were served (`ok`).
    public var requests: Int64
    public var ok: Int64
    /// Answered 429 for quota, or overloaded (429/529/503).
    public var quotaExhausted: Int64
    public var overloaded: Int64
    /// Denied or queued locally by gateways (unmet demand).
    public var deniedLocal: Int64
    public var queued: Int64
    /// The served calls' tokens (outcome `ok`), as `GET /v1/costs` counts them.
    public var promptTokens: Int64
    public var completionTokens: Int64

    public init(
        upstream: String, minuteMs: Int64, requests: Int64, ok: Int64, quotaExhausted: Int64, overloaded: Int64,
        deniedLocal: Int64, queued: Int64, promptTokens: Int64, completionTokens: Int64
    ) {
        self.upstream = upstream
        self.minuteMs = minuteMs
        self.requests = requests
        self.ok = ok
        self.quotaExhausted = quotaExhausted
        self.overloaded = overloaded
        self.deniedLocal = deniedLocal
        self.queued = queued
        self.promptTokens = promptTokens
        self.completionTokens = completionTokens
    }
}

extension TelemetryStore {
    /// Per upstream and minute, the rollups of every tenant summed in SQL (one row per upstream
    /// and minute instead of one per tenant, upstream, class and minute), minutes in
    /// `[fromMs, toMs)`, ordered by upstream then minute.
    public nonisolated func upstreamMinutes(fromMs: Int64, toMs: Int64) async throws -> [UpstreamMinute] {
        try? await flushRollups()  // exact when the database can be written; a second stale at worst
        return try await pool.read { connection in
            try connection.queryAll(
                """
                SELECT u.id, r.minute_ms, sum(r.requests), sum(r.ok), sum(r.quota_exhausted), sum(r.overloaded),
                       sum(r.denied_local), sum(r.queued),
                       sum(\(TelemetryWriter.rollupReadExpression("served_prompt_tokens", table: "r."))),
                       sum(\(TelemetryWriter.rollupReadExpression("served_completion_tokens", table: "r.")))
                FROM rollups_minute r JOIN upstreams u ON u.ref = r.upstream_ref
                WHERE r.minute_ms >= ? AND r.minute_ms < ?
                GROUP BY r.upstream_ref, r.minute_ms
                ORDER BY u.id, r.minute_ms
                """, fromMs, toMs
            ) { row in
                UpstreamMinute(
                    upstream: row.string(0) ?? "", minuteMs: row.int64(1), requests: row.int64(2), ok: row.int64(3),
                    quotaExhausted: row.int64(4), overloaded: row.int64(5), deniedLocal: row.int64(6),
                    queued: row.int64(7), promptTokens: row.int64(8), completionTokens: row.int64(9))
            }
        }
    }
}
