// TEMPORARY: AllotCore (branch `core`) defines `TaskClass` with the same cases; this copy goes away
// when it lands on main, and the storage codes below move to `TaskClass+Storage.swift`.

/// A task class (SPEC section 3 telemetry `task_class`).
public enum TaskClass: String, Sendable, Hashable, Codable, CaseIterable {
    case realtime
    case interactive
    case batch
    case background
}
