/// The outcome of one upstream attempt, as reported in telemetry (SPEC §3 `outcome`).
///
/// Raw values are exactly the SPEC's wire strings. The first six come from an upstream response and are what
/// ``ErrorClassifier`` produces; `deniedLocal` and `queued` describe requests a gateway held back itself (so
/// unmet demand is visible) and are only ever set by gateways.
public enum Outcome: String, Sendable, Hashable, CaseIterable, Codable {
    /// The upstream served the attempt (or refused it for the caller's own fault; see ``ErrorClassifier``).
    case ok
    /// A rate limit was hit: feeds the capacity estimate (multiplicative decrease, SPEC §4).
    case quotaExhausted = "quota_exhausted"
    /// A spend or billing cap (or an account-level refusal): retrying cannot help; alert, no capacity change.
    case spendCap = "spend_cap"
    /// The provider is overloaded (429 `overloaded`, 529, 503): health state and circuit breaker.
    case overloaded
    /// Any other upstream failure.
    case serverError = "server_error"
    /// The attempt timed out (408, 504, a timeout error type).
    case timeout
    /// The gateway denied the request locally (allocation exhausted).
    case deniedLocal = "denied_local"
    /// The gateway queued the request locally.
    case queued

    /// False for outcomes that never reached the upstream (`denied_local`, `queued`).
    public var reachedUpstream: Bool {
        self != .deniedLocal && self != .queued
    }
}
