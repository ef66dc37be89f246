import AllotCore
import AllotEnforcement
import AllotLoop
import AllotProtocol
import AllotSQLite
import AllotStore
import AllotTime
import Foundation

/// The `allot` strategy's control plane: the real ``LoopRunner`` on a temporary SQLite database
/// (migrated with the embedded migrations), fed the gateways' telemetry through the same decoder
/// and store `POST /v1/telemetry` uses, ticked on a ``ManualClock``; its gateways take their
/// slices the way `GET /v1/snapshot?gateway=ID` hands them out.
final class AllotDriver {
    let clock: ManualClock
    let runner: LoopRunner
    let database: DatabasePool
    let directory: String
    let sink = TelemetryCollector()
    let epoch: Double
    private let decoder = TelemetryDecoder()
    private let defaultTier: String

    init(policy: Policy, epoch: Double) async throws {
        self.epoch = epoch
        clock = ManualClock(now: epoch)
        directory = NSTemporaryDirectory() + "allot-sim-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        database = try await StoreDatabase.open(
            path: directory + "/allot.sqlite", configuration: SQLiteConfiguration(synchronous: .off))
        defaultTier = policy.defaultTier
        runner = try await LoopRunner.open(
            store: TelemetryStore(pool: database, clock: clock), policy: policy,
            policyVersion: LoopRunner.policyVersion(of: policy), clock: clock, estimators: .standard,
            configuration: LoopConfiguration(checkpointEveryTicks: 1_000_000))
    }

    /// Delivers the telemetry collected since the last call, then runs one tick at simulated `time`.
    func tick(at time: Double) async throws {
        clock.advance(to: epoch + time)
        // Growth whose make-before-break wait is over by now is published here, before the tick,
        // rather than by the publisher's deadline task, which the advance just woke and which would
        // otherwise race the tick's own publish.
        try await releaseHeldGrowth(at: time)
        // Posted in batches no larger than the ingest route accepts, as a gateway's reporter does: a busy
        // scenario (a hammering tenant, a long tick) collects more than one batch's worth between ticks.
        let records = sink.take()
        let size = max(1, decoder.validation.maxEvents)
        for start in stride(from: 0, to: records.count, by: size) {
            let body = TelemetryRecord.encodeBatch(records[start..<min(records.count, start + size)])
            let batch = try decoder.decode(body, format: .jsonArray, now: epoch + time)
            _ = try await runner.telemetry.ingest(batch, defaultTier: defaultTier, now: epoch + time)
        }
        _ = await runner.tick(now: epoch + time)
    }

    /// Polls for `gateway` as the snapshot route does, with the version it enforces; returns a newer
    /// snapshot (its slice) if there is one.
    func poll(gateway: String, enforcing version: Int64?) async throws -> Snapshot? {
        let condition = SnapshotCondition(versions: version.map { [$0] } ?? [])
        switch await runner.publisher.poll(gateway: gateway, condition: condition, wait: 0) {
        case .modified(_, let body): return try Snapshot(decoding: body)
        case .notModified, .unavailable: return nil
        }
    }

    /// Publishes growth held for make-before-break once every gateway confirmed the shrink; returns
    /// once it is visible.
    ///
    /// Always through the publisher's gate, never after a look at `isHoldingGrowth`: the poll that
    /// confirmed the shrink has already started a release of its own, which clears the held growth
    /// before its version is persisted and visible, so whether the gateways' next poll saw that
    /// version depended on scheduling. Queued behind that release, this call returns after it.
    func releaseHeldGrowth(at time: Double) async throws {
        try await runner.publisher.releaseHeldGrowth(now: epoch + time)
    }

    /// One line per pool of what the Observer concluded at the last tick (state, estimate, header limit,
    /// utilisation, short-window p95 latency, circuit and shed classes, signals): `ALLOT_SIM_DEBUG`'s trace.
    func observerTrace(at time: Double) -> [String] {
        guard let report = runner.view.observer else { return [] }
        // A stated limit can be any number a header carries: whole numbers as such, the rest as they are.
        func number(_ value: Double?) -> String {
            value.map { $0.isFinite && abs($0) < 1e15 ? String(Int($0.rounded())) : String($0) } ?? "-"
        }
        return report.upstreams.map { status in
            "t=\(Int(time)) \(status.upstream) \(status.state.rawValue) est=\(number(status.estimate.rpm))/"
                + "\(number(status.estimate.tpm)) limit=\(number(status.headerLimit.rpm))/\(number(status.headerLimit.tpm)) "
                + "served=\(number(status.served.rpm)) util=\(status.utilisation.rpm.map { String(format: "%.2f", $0) } ?? "-") "
                + "p95=\(number(status.latencyShort.p95))ms circuit=\(status.circuitOpen ? "open" : "closed")"
                + (status.shed.isEmpty ? "" : " shed=\(status.shed.joined(separator: ","))")
                + (status.signals.isEmpty ? "" : " | " + status.signals.joined(separator: " | "))
        }
    }

    /// One line per allocation of the last tick for the tenants named in `tenants` (`*`: every tenant): class (and
    /// `suspect` when the Classifier flags the tenant so), and per dimension the demand, upper bound, fair-share
    /// level, target, published value and the damping action taken: `ALLOT_SIM_TENANTS`'s trace.
    func tenantTrace(at time: Double, tenants: Set<String>) -> [String] {
        guard let decision = runner.view.decision else { return [] }
        let number = Self.traceNumber
        let suspects = Set((runner.view.classifier?.statuses ?? []).filter(\.suspect).map(\.key))
        return decision.allocations.filter { tenants.contains($0.tenant) || tenants.contains("*") }.map { allocation in
            var line = "t=\(Int(time)) \(allocation.tenant) \(allocation.upstream) \(allocation.tenantClass.rawValue)"
            if suspects.contains(AllocationKey(tenant: allocation.tenant, upstream: allocation.upstream)) {
                line += " suspect"
            }
            for (name, value) in [("rpm", allocation.rpm), ("tpm", allocation.tpm)] {
                guard let e = value?.explanation else { continue }
                line += " | \(name) D=\(number(e.demand)) up=\(number(e.upper)) level=\(number(e.level)) "
                    + "T=\(number(e.target)) P=\(number(e.published)) \(e.damping.rawValue)"
            }
            return line
        }
    }

    /// A value of ``tenantTrace(at:tenants:)``: whole numbers from 10 up, one decimal from 1, two below (on a
    /// pool of a few rpm, `D=4 up=2 level=0 T=0 P=0` said nothing); `-` for none.
    static func traceNumber(_ value: Double?) -> String {
        guard let value else { return "-" }
        guard value.isFinite else { return String(value) }
        switch abs(value) {
        case 10...: return String(Int(value.rounded()))
        case 1...: return String(format: "%.1f", value)
        case 0: return "0"
        default: return String(format: "%.2f", value)
        }
    }

    /// The Observer's capacity estimate of `pool`, per minute.
    func estimate(pool: String) -> (rpm: Double?, tpm: Double?) {
        guard let observation = runner.view.observer?.pools.first(where: { $0.upstream == pool }) else {
            return (nil, nil)
        }
        return (observation.capacity.rpm, observation.capacity.tpm)
    }

    func close() async {
        await runner.shutdown()
        await database.close()
        try? FileManager.default.removeItem(atPath: directory)
    }
}

/// The gateways' telemetry, collected in-process between ticks (what their reporters would post): each
/// event checked against the ingest bounds as a reporter checks it (``TelemetryRecord/validated()``), so an
/// attempt number past 1,000 (a tenant hammering on) is clamped rather than costing the whole batch.
///
/// `@unchecked Sendable`: `records` is only touched while holding `lock`.
final class TelemetryCollector: TelemetrySink, @unchecked Sendable {
    private let lock = NSLock()
    private var records: [TelemetryRecord] = []

    func record(_ event: TelemetryRecord) {
        guard let event = event.validated() else { return }
        lock.withLock { records.append(event) }
    }

    func take() -> [TelemetryRecord] {
        lock.withLock {
            defer { records.removeAll(keepingCapacity: true) }
            return records
        }
    }
}
