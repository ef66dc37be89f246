import AllotSQLite

/// Why a telemetry batch could not be stored. Nothing of the batch was stored (its transaction
/// rolled back), and the store stays usable: the next batch tries again.
///
/// Renders at the HTTP edge as 503 `database_unavailable` (SPEC section 9, section 13: a database
/// that is locked, full or gone must produce an error, not a hang or a half-stored batch).
public struct TelemetryStoreError: Error, Sendable, Equatable, CustomStringConvertible {
    /// `database_unavailable`.
    public var code: String
    public var message: String
    /// The underlying SQLite error, when there is one.
    public var sqlite: SQLiteError?

    public init(code: String = "database_unavailable", message: String, sqlite: SQLiteError? = nil) {
        self.code = code
        self.message = message
        self.sqlite = sqlite
    }

    /// Wraps whatever the write path threw.
    init(_ error: any Error) {
        if let error = error as? TelemetryStoreError {
            self = error
        } else if let error = error as? SQLiteError {
            self.init(
                message: "the telemetry database is unavailable: \(error.codeName): \(error.message)", sqlite: error)
        } else {
            self.init(message: "the telemetry database is unavailable: \(error)")
        }
    }

    public var description: String { "\(code): \(message)" }
}

/// The outcome of one stored batch: returned only after its transaction has committed.
public struct IngestResult: Sendable, Equatable {
    /// Events stored.
    public var stored: Int
    /// The row id of the batch's first and last event. A batch's ids are contiguous: it is
    /// inserted by the only writer within one transaction.
    public var firstID: Int64
    public var lastID: Int64
    /// Tenants registered by this batch (with the default tier), sorted.
    public var registeredTenants: [String]
    /// Recognised rate-limit header values that could not be parsed (stored as NULL, counted).
    public var unparseableHeaders: Int
    /// The distinct unknown member names that were ignored (at most a few; see ``TelemetryDecoder``).
    public var ignoredFields: [String]
    /// True when the batch's ``TelemetryBatchKey`` had already stored it: `stored`, `firstID` and `lastID` are the
    /// first attempt's, and nothing was stored now.
    public var duplicate: Bool

    public init(
        stored: Int, firstID: Int64, lastID: Int64, registeredTenants: [String] = [], unparseableHeaders: Int = 0,
        ignoredFields: [String] = [], duplicate: Bool = false
    ) {
        self.duplicate = duplicate
        self.stored = stored
        self.firstID = firstID
        self.lastID = lastID
        self.registeredTenants = registeredTenants
        self.unparseableHeaders = unparseableHeaders
        self.ignoredFields = ignoredFields
    }
}

/// Why `POST /v1/telemetry` failed: the body was refused (nothing looked at the database), or the
/// database failed (nothing was stored).
public enum TelemetryIngestError: Error, Sendable, Equatable, CustomStringConvertible {
    case rejected(TelemetryRejection)
    case database(TelemetryStoreError)

    /// The HTTP status: the rejection's (400, 413, 415), or 503 for the database.
    public var status: Int {
        switch self {
        case .rejected(let rejection): rejection.status
        case .database: 503
        }
    }

    public var code: String {
        switch self {
        case .rejected(let rejection): rejection.code
        case .database(let error): error.code
        }
    }

    public var message: String {
        switch self {
        case .rejected(let rejection): rejection.message
        case .database(let error): error.message
        }
    }

    /// The field at fault, e.g. `[3].tenant`.
    public var field: String? {
        switch self {
        case .rejected(let rejection): rejection.field
        case .database: nil
        }
    }

    public var description: String { "\(status) \(code): \(message)" }
}
