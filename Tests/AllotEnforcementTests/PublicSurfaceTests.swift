// Only the library product: every type its public API names must be reachable through it (outside evaluation
// round 32: `Snapshot`, `RateLimits`, `Bucket`, `AllotClock`, `ManualClock` could not be named without importing
// modules that are not products). This file compiles only if they are.
import AllotEnforcement
import Testing

@Suite struct PublicSurfaceTests {
    @Test func aGatewayIsBuiltAndFedWithTheProductAlone() throws {
        let clock: any AllotClock = ManualClock(now: 1_000)
        let limits = RateLimits(rpm: Bucket(rate: 60, burst: 2), tpm: Bucket(rate: 60_000, burst: 10_000))
        let tenant = TenantEntry(
            id: "acme", upstream: "openai/gpt-4o", tier: "standard", priority: 2, rpm: Bucket(rate: 60, burst: 2),
            tpm: Bucket(rate: 60_000, burst: 10_000), queueWeight: 1, reason: Reasons(rpm: "demand", tpm: "demand"),
            maxConcurrency: 8)
        let snapshot = Snapshot(
            version: 3, generatedAt: 1_000, expiresAt: 1_300, refreshMs: 5_000, policyVersion: "p", upstreams: [],
            tenants: [tenant], defaultLimits: limits, fallback: Fallback(tenants: [], defaultLimits: limits))
        let gateway = Gateway(configuration: GatewayConfiguration(gatewayID: "gw-1"), clock: clock, seed: 1)
        gateway.apply(snapshot)
        let admission = gateway.tryAdmit(AdmissionRequest(tenant: "acme", upstream: "openai/gpt-4o"))
        #expect(admission.ticket != nil)
        #expect(gateway.status.version == 3)
        // The HTTP client's types, for `Gateway.connect(…, http:)` and the transports.
        let http = AllotHTTPClientConfiguration()
        let client = try AllotHTTPClient(configuration: http)
        _ = HTTPTelemetryTransport(baseURL: "http://127.0.0.1:1", token: nil, client: client, timeout: 1)
        #expect(SystemClock().now > 1_000)
    }
}
