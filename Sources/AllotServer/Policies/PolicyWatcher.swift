import AllotCore
import AllotLog
import AllotMetrics
import AllotTime

/// Hot reload of the policy files (SPEC 10): polls the directory's fingerprint, and when it
/// changed, reads and validates the files. A valid policy is handed to `onChange` and becomes
/// current; an invalid one is rejected with a message naming file, path and reason, the previous
/// policy stays in force, and the error stays visible (`/readyz`, `/v1/alerts`, the log and the
/// `allot_policy_error` metric) until a valid policy is loaded.
///
/// Polling rather than inotify: one `stat` per file per second is nothing, works on every file
/// system (including bind mounts and ConfigMap symlink swaps, where inotify misses changes), and
/// keeps the code small.
public actor PolicyWatcher {
    public let source: PolicySource
    public private(set) var current: LoadedPolicy
    /// The last rejected load, cleared by the next successful one.
    public private(set) var lastError: PolicyLoadError?
    /// When the last rejection happened (seconds since the epoch).
    public private(set) var lastErrorAt: Double?
    private var fingerprint: String
    private let logger: Logger
    private let onChange: @Sendable (LoadedPolicy, LoadedPolicy) async -> Void
    private let onReject: @Sendable (PolicyLoadError) async -> Void
    private let onRestore: @Sendable () async -> Void
    private let reloads: CounterFamily?
    private let errorGauge: Gauge?

    /// Loads the policy once; throws when it is invalid (there is no previous policy to keep).
    public init(
        source: PolicySource, logger: Logger, metrics: MetricsRegistry? = nil,
        onReject: @escaping @Sendable (_ error: PolicyLoadError) async -> Void = { _ in },
        onRestore: @escaping @Sendable () async -> Void = {},
        onChange: @escaping @Sendable (_ old: LoadedPolicy, _ new: LoadedPolicy) async -> Void
    ) throws(PolicyLoadError) {
        self.source = source
        self.logger = logger
        self.onChange = onChange
        self.onReject = onReject
        self.onRestore = onRestore
        fingerprint = source.fingerprint()
        current = try source.load()
        reloads = try? metrics?.counter(
            "allot_policy_reloads_total", help: "Policy reload attempts by result (applied, rejected).",
            labelNames: ["result"])
        errorGauge = try? metrics?.gauge(
            "allot_policy_error", help: "1 while the policy files on disk are rejected (the previous policy is in force).")
        errorGauge?.set(0)
    }

    /// Re-reads the files if they changed. Returns true when a new policy was applied.
    @discardableResult
    public func check(now: Double) async -> Bool {
        let latest = source.fingerprint()
        guard latest != fingerprint else { return false }
        fingerprint = latest
        do {
            let loaded = try source.load()
            guard loaded.version != current.version else {
                // The files are back to the policy in force (a bad edit reverted): nothing to apply, but the
                // rejection's alert must go (round 14: it stayed until a different policy was applied).
                if lastError != nil {
                    clearError()
                    await onRestore()
                }
                return false
            }
            let old = current
            current = loaded
            clearError()
            reloads?.labels(["applied"]).increment()
            logger.notice(
                "policy reloaded",
                ["source": .string(source.description), "version": .string(loaded.version), "previous": .string(old.version)])
            await onChange(old, loaded)
            return true
        } catch {
            lastError = error
            lastErrorAt = now
            errorGauge?.set(1)
            reloads?.labels(["rejected"]).increment()
            logger.error(
                "policy rejected; previous policy stays in force",
                ["source": .string(source.description), "error": .string(error.message), "version": .string(current.version)])
            await onReject(error)
            return false
        }
    }

    /// Checks every `interval` seconds until cancelled.
    public func run(clock: any AllotClock, interval: Double = 1) async {
        while !Task.isCancelled {
            do {
                try await clock.sleep(until: clock.now + interval)
            } catch {
                return
            }
            await check(now: clock.now)
        }
    }

    private func clearError() {
        if lastError != nil {
            lastError = nil
            lastErrorAt = nil
            errorGauge?.set(0)
        }
    }
}
