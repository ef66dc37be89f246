import AllotEnforcement
import Foundation

/// A minimal gateway loop: every request asks Allot's allocation for admission before it goes upstream, and
/// reports what happened afterwards. The upstream call is simulated here; put your provider call where it says.
///
/// Environment: `ALLOT_URL` (default `http://127.0.0.1:8080`), `ALLOT_TOKEN` (a `gateway` token; unset with
/// `allot serve --dev`), `GATEWAY_ID` (default `example-gw`), `REQUESTS` (default 200).
@main
struct MinimalGateway {
    static func main() async throws {
        let environment = ProcessInfo.processInfo.environment
        let gateway = try Gateway.connect(
            to: environment["ALLOT_URL"] ?? "http://127.0.0.1:8080",
            token: environment["ALLOT_TOKEN"],
            configuration: GatewayConfiguration(
                gatewayID: environment["GATEWAY_ID"] ?? "example-gw",
                onEvent: { event in print("allot:", event) }))
        gateway.start()
        guard await gateway.waitForSnapshot(timeout: 10) else {
            print("no snapshot from Allot within 10 s:", await gateway.snapshotClient?.status.lastError ?? "?")
            await gateway.stop()
            return
        }
        defer { print("telemetry:", gateway.reporter?.statistics ?? TelemetryStatistics()) }

        // Three tenants with different shapes of traffic, ten tasks in flight at a time.
        let tenants: [(id: String, taskClass: TaskClass, tokens: Int)] = [
            ("acme", .interactive, 1_200), ("globex", .batch, 6_000), ("initech", .realtime, 300),
        ]
        let total = Int(environment["REQUESTS"] ?? "") ?? 200
        let book = TaskBook()
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<total {
                if index >= 10 { await group.next() }
                let tenant = tenants[index % tenants.count]
                group.addTask {
                    await handle(
                        gateway, book: book, tenant: tenant.id, taskClass: tenant.taskClass, tokens: tenant.tokens,
                        taskID: "\(tenant.id)-task-\(index / 30)")
                }
            }
        }
        print("enforcing:", gateway.status)
        await gateway.stop()
    }

    /// One request through the gateway, with its agent task's context: when a tenant is over its allocation,
    /// the calls of its tasks that have started go before those of new tasks, and calls of tasks past their
    /// deadline stop taking capacity from the others.
    static func handle(
        _ gateway: Gateway, book: TaskBook, tenant: String, taskClass: TaskClass, tokens: Int, taskID: String
    ) async {
        let context = await book.context(of: taskID, now: gateway.clock.now)
        let admission: Admission
        do {
            admission = try await gateway.admit(
                tenant: tenant, upstream: "openai/gpt-4o", taskClass: taskClass, estimatedTokens: tokens,
                taskID: taskID, taskStartedAt: context.startedAt, taskDeadline: context.deadline)
        } catch {
            return  // cancelled
        }
        switch admission {
        case .admitted(let ticket):
            await book.admitted(taskID, at: ticket.admittedAt)
            // ↓ Your upstream call goes here. This stand-in takes 50–250 ms and uses 60–140% of the estimate.
            let started = Date()
            try? await Task.sleep(for: .milliseconds(Int.random(in: 50...250)))
            let used = Int(Double(tokens) * Double.random(in: 0.6...1.4))
            let headers = [("x-ratelimit-remaining-requests", "4999"), ("x-ratelimit-reset-tokens", "6m0s")]
            // ↑
            gateway.complete(
                ticket, status: 200, promptTokens: used * 3 / 4, completionTokens: used - used * 3 / 4,
                latency: Date().timeIntervalSince(started), headers: headers)
        case .denied(let denial):
            // Answer your caller: HTTP `suggestedStatus`, `Retry-After`, and Allot's JSON error body; or fall back
            // to a smaller model, or fail fast.
            let retryAfter = denial.retryAfterHeader ?? "-"
            let version = denial.snapshotVersion.map(String.init) ?? "-"
            print(
                "\(tenant): \(denial.suggestedStatus) \(denial.limit.rawValue) retry-after=\(retryAfter) v\(version):",
                denial.message)
        }
    }
}

/// Each agent task's context as the gateway wants it: when its first call was admitted (its work began then;
/// nil before, so a task that has not got anything yet does not jump ahead of the tenant's started tasks), and
/// its deadline (here two minutes after its first call was asked for).
actor TaskBook {
    private var started: [String: Double] = [:]
    private var deadlines: [String: Double] = [:]

    func context(of taskID: String, now: Double) -> (startedAt: Double?, deadline: Double) {
        let deadline = deadlines[taskID] ?? now + 120
        deadlines[taskID] = deadline
        return (started[taskID], deadline)
    }

    func admitted(_ taskID: String, at instant: Double) {
        if started[taskID] == nil { started[taskID] = instant }
    }
}
