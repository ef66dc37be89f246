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
        await withTaskGroup(of: Void.self) { group in
            for index in 0..<total {
                if index >= 10 { await group.next() }
                let tenant = tenants[index % tenants.count]
                group.addTask {
                    await handle(
                        gateway, tenant: tenant.id, taskClass: tenant.taskClass, tokens: tenant.tokens,
                        taskID: "\(tenant.id)-task-\(index / 30)")
                }
            }
        }
        print("enforcing:", gateway.status)
        await gateway.stop()
    }

    /// One request through the gateway.
    static func handle(_ gateway: Gateway, tenant: String, taskClass: TaskClass, tokens: Int, taskID: String) async {
        let admission: Admission
        do {
            admission = try await gateway.admit(
                tenant: tenant, upstream: "openai/gpt-4o", taskClass: taskClass, estimatedTokens: tokens,
                taskID: taskID)
        } catch {
            return  // cancelled
        }
        switch admission {
        case .admitted(let ticket):
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
