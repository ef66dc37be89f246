import AllotCore
import AllotSignals

// Small integers for the enumerations stored in every telemetry row. They keep `events` rows small
// (one byte instead of a string) and are a storage contract: `migrations/0001_telemetry.sql`
// repeats them in its CHECK constraints and in the `events_readable` view. Never renumber; add at
// the end.

extension Outcome {
    /// The code stored in `events.outcome`: ok 0, quota_exhausted 1, spend_cap 2, overloaded 3,
    /// server_error 4, timeout 5, denied_local 6, queued 7.
    public var storageCode: Int {
        switch self {
        case .ok: 0
        case .quotaExhausted: 1
        case .spendCap: 2
        case .overloaded: 3
        case .serverError: 4
        case .timeout: 5
        case .deniedLocal: 6
        case .queued: 7
        }
    }

    /// The outcome stored as `code`, or nil for a code this build does not know.
    public init?(storageCode code: Int) {
        switch code {
        case 0: self = .ok
        case 1: self = .quotaExhausted
        case 2: self = .spendCap
        case 3: self = .overloaded
        case 4: self = .serverError
        case 5: self = .timeout
        case 6: self = .deniedLocal
        case 7: self = .queued
        default: return nil
        }
    }
}

extension TaskClass {
    /// The code stored in `events.task_class` and `rollups_minute.task_class`: realtime 0,
    /// interactive 1, batch 2, background 3.
    public var storageCode: Int {
        switch self {
        case .realtime: 0
        case .interactive: 1
        case .batch: 2
        case .background: 3
        }
    }

    /// The task class stored as `code`, or nil for a code this build does not know.
    public init?(storageCode code: Int) {
        switch code {
        case 0: self = .realtime
        case 1: self = .interactive
        case 2: self = .batch
        case 3: self = .background
        default: return nil
        }
    }
}

extension HeaderFamily {
    /// The code stored in `events.header_family`: generic 0, openai 1, anthropic 2, azure 3, google 4.
    public var storageCode: Int {
        switch self {
        case .generic: 0
        case .openai: 1
        case .anthropic: 2
        case .azure: 3
        case .google: 4
        }
    }

    /// The family stored as `code`, or nil for a code this build does not know.
    public init?(storageCode code: Int) {
        switch code {
        case 0: self = .generic
        case 1: self = .openai
        case 2: self = .anthropic
        case 3: self = .azure
        case 4: self = .google
        default: return nil
        }
    }
}
