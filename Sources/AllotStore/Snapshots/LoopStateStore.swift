import AllotSQLite

/// The loop's estimator state at one tick: what a restart resumes from (SPEC section 7: "resumes
/// from persisted estimator state … rather than starting blind"). The state blobs are opaque here;
/// `format` says how AllotLoop encoded them.
public struct LoopCheckpoint: Sendable, Equatable {
    public var savedMs: Int64
    /// The last telemetry row (events.id) the states include; the loop resumes reading after it.
    public var lastEventID: Int64
    /// The tick count at the checkpoint.
    public var tick: Int64
    public var format: Int
    public var observer: [UInt8]
    public var classifier: [UInt8]
    public var engine: [UInt8]

    public init(
        savedMs: Int64, lastEventID: Int64, tick: Int64, format: Int, observer: [UInt8], classifier: [UInt8],
        engine: [UInt8]
    ) {
        self.savedMs = savedMs
        self.lastEventID = lastEventID
        self.tick = tick
        self.format = format
        self.observer = observer
        self.classifier = classifier
        self.engine = engine
    }
}

/// A gateway as the Publisher knows it from its snapshot polls (a row of `gateway_contacts`).
public struct GatewayContactRecord: Sendable, Equatable {
    public var id: String
    public var firstContactMs: Int64
    public var lastContactMs: Int64
    /// The version the gateway last said it enforces (its `If-None-Match`); nil if never said.
    public var enforcedVersion: Int64?
    public var polls: Int64
    /// When it said it leaves (`DELETE /v1/gateways/{id}`); nil if it has not (or polled again since).
    public var leftMs: Int64?
    /// When the version it enforces was superseded (its `lag_s` counts from here); nil while it is current or not yet
    /// seen superseded.
    public var behindSinceMs: Int64?

    public init(
        id: String, firstContactMs: Int64, lastContactMs: Int64, enforcedVersion: Int64?, polls: Int64,
        leftMs: Int64? = nil, behindSinceMs: Int64? = nil
    ) {
        self.id = id
        self.firstContactMs = firstContactMs
        self.lastContactMs = lastContactMs
        self.enforcedVersion = enforcedVersion
        self.polls = polls
        self.leftMs = leftMs
        self.behindSinceMs = behindSinceMs
    }
}

/// `loop_checkpoint` and `gateway_contacts`: the loop's memory between runs.
///
/// Both are written together every few ticks and at shutdown (``save(_:contacts:)``), one
/// transaction, off the tick's critical path.
public struct LoopStateStore: Sendable {
    public let pool: DatabasePool

    public init(pool: DatabasePool) {
        self.pool = pool
    }

    /// Replaces the checkpoint and upserts the gateway contacts, in one transaction.
    ///
    /// - Parameters:
    ///   - forgetBeforeMs: Contacts whose last contact is older are deleted (gateways long gone); nil keeps every row.
    ///   - leaving: Contacts to mark as left (`left_ms`), with when they left: kept (or saved, for one that left before
    ///     it was first saved), so that a restart knows them gone.
    public func save(
        _ checkpoint: LoopCheckpoint, contacts: [GatewayContactRecord], forgetBeforeMs: Int64? = nil,
        leaving: [(id: String, atMs: Int64)] = []
    ) async throws {
        try await pool.write { connection in
            try connection.run(
                """
                INSERT OR REPLACE INTO loop_checkpoint
                    (singleton, saved_ms, last_event_id, tick, format, observer, classifier, engine)
                VALUES (1, ?, ?, ?, ?, ?, ?, ?)
                """,
                checkpoint.savedMs, checkpoint.lastEventID, checkpoint.tick, checkpoint.format, checkpoint.observer,
                checkpoint.classifier, checkpoint.engine)
            try Self.upsert(contacts, connection: connection)
            if let forgetBeforeMs {
                try connection.run("DELETE FROM gateway_contacts WHERE last_contact_ms < ?", forgetBeforeMs)
            }
            // An upsert, not an update: a gateway that polled and left between two checkpoints has no row yet.
            for left in leaving {
                try connection.run(
                    """
                    INSERT INTO gateway_contacts (id, first_contact_ms, last_contact_ms, polls, left_ms)
                    VALUES (?1, ?2, ?2, 0, ?2)
                    ON CONFLICT (id) DO UPDATE SET
                        last_contact_ms = max(last_contact_ms, excluded.last_contact_ms),
                        left_ms = excluded.left_ms
                    """, left.id, left.atMs)
            }
        }
    }

    /// Upserts gateway contacts alone (e.g. when no checkpoint is due).
    public func saveContacts(_ contacts: [GatewayContactRecord]) async throws {
        guard !contacts.isEmpty else { return }
        try await pool.write { connection in try Self.upsert(contacts, connection: connection) }
    }

    /// The saved checkpoint, or nil when the loop never saved one.
    public func checkpoint() async throws -> LoopCheckpoint? {
        try await pool.read { connection in
            try connection.queryOne(
                "SELECT saved_ms, last_event_id, tick, format, observer, classifier, engine FROM loop_checkpoint"
            ) { row in
                LoopCheckpoint(
                    savedMs: row.int64(0), lastEventID: row.int64(1), tick: row.int64(2), format: row.int(3),
                    observer: row.blob(4) ?? [], classifier: row.blob(5) ?? [], engine: row.blob(6) ?? [])
            }
        }
    }

    /// Every saved gateway contact, by id.
    public func contacts() async throws -> [GatewayContactRecord] {
        try await pool.read { connection in
            try connection.queryAll(
                """
                SELECT id, first_contact_ms, last_contact_ms, enforced_version, polls, left_ms, behind_since_ms
                FROM gateway_contacts ORDER BY id
                """
            ) { row in
                GatewayContactRecord(
                    id: row.string(0) ?? "", firstContactMs: row.int64(1), lastContactMs: row.int64(2),
                    enforcedVersion: row.optionalInt64(3), polls: row.int64(4), leftMs: row.optionalInt64(5),
                    behindSinceMs: row.optionalInt64(6))
            }
        }
    }

    /// The id of the first telemetry event whose `ts` is at or after `ms` (through the
    /// `events_by_time` index), or nil when there is none: where a loop without a checkpoint may
    /// start reading recent history instead of the whole 24 hours.
    public func firstEventID(atOrAfterMs ms: Int64) async throws -> Int64? {
        try await pool.read { connection in
            try connection.queryValue("SELECT min(id) FROM events WHERE ts_ms >= ?", ms)?.int64
        }
    }

    private static func upsert(_ contacts: [GatewayContactRecord], connection: SQLiteConnection) throws {
        for contact in contacts {
            try connection.run(
                """
                INSERT INTO gateway_contacts
                    (id, first_contact_ms, last_contact_ms, enforced_version, polls, behind_since_ms)
                VALUES (?, ?, ?, ?, ?, ?)
                ON CONFLICT (id) DO UPDATE SET
                    first_contact_ms = min(first_contact_ms, excluded.first_contact_ms),
                    last_contact_ms = max(last_contact_ms, excluded.last_contact_ms),
                    enforced_version = coalesce(excluded.enforced_version, enforced_version),
                    polls = excluded.polls,
                    left_ms = NULL,
                    behind_since_ms = excluded.behind_since_ms
                """,
                contact.id, contact.firstContactMs, contact.lastContactMs, contact.enforcedVersion, contact.polls,
                contact.behindSinceMs)
        }
    }
}
