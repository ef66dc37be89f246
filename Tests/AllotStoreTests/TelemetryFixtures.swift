import AllotJSON
import AllotSQLite
import Testing

@testable import AllotStore

/// Factories for telemetry tests.
enum TelemetryFixtures {
    /// 2026-11-22T03:00:00Z, the fixtures' "now".
    static let now: Double = 1_795_316_400
    static let nowMs: Int64 = 1_795_316_400_000

    /// A valid event with OpenAI headers; `overrides` replace (or, with `nil`, remove) members.
    static func event(_ overrides: [String: JSON?] = [:], tsMs: Int64 = nowMs - 1_000) -> JSON {
        var object: JSONObject = [
            "ts": .int(tsMs),
            "gateway": "gw-eu-1",
            "tenant": "acme",
            "upstream": "openai/gpt-4o",
            "outcome": "ok",
            "status": 200,
            "latency_ms": 812.5,
            "queue_ms": 3.25,
            "prompt_tokens": 1200,
            "completion_tokens": 350,
            "estimated_tokens": 1600,
            "task_class": "interactive",
            "task_id": "task-1",
            "model_version": "gpt-4o-2024-08-06",
            "retry": 0,
            "headers": [
                "x-ratelimit-limit-requests": "10000",
                "x-ratelimit-remaining-requests": "9998",
                "x-ratelimit-reset-requests": "12ms",
                "x-ratelimit-limit-tokens": "2000000",
                "x-ratelimit-remaining-tokens": "1999000",
                "x-ratelimit-reset-tokens": "2m59.56s",
            ],
        ]
        for (key, value) in overrides { object[key] = value }
        return .object(object)
    }

    static func array(_ events: [JSON]) -> [UInt8] { JSON.array(events).serialized() }

    static func ndjson(_ events: [JSON]) -> [UInt8] {
        Array(events.map { $0.serializedString() }.joined(separator: "\n").utf8) + [0x0A]
    }

    /// A store over a fresh migrated temporary database.
    static func makeStore(configuration: TelemetryStore.Configuration = .init()) async throws -> TelemetryStore {
        TelemetryStore(pool: try await StoreDatabase.temporary(), configuration: configuration)
    }

    /// Row counts of every telemetry table.
    static func counts(_ pool: DatabasePool) async throws -> [String: Int64] {
        try await pool.read { connection in
            var counts: [String: Int64] = [:]
            for table in ["events", "tenants", "upstreams", "gateways", "model_versions", "rollups_minute"] {
                counts[table] = try connection.queryOne("SELECT count(*) FROM \(table)") { $0.int64(0) } ?? -1
            }
            return counts
        }
    }
}

extension TelemetryStore {
    /// Ingests `body` as the HTTP route does, with the fixtures' clock and tier `standard`.
    func ingest(_ body: [UInt8], format: TelemetryFormat = .jsonArray, now: Double = TelemetryFixtures.now)
        async throws(TelemetryIngestError) -> IngestResult
    {
        try await ingest(body: body, format: format, defaultTier: "standard", now: now)
    }
}
