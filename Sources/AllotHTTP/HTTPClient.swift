@preconcurrency import Dispatch
import Glibc

/// A small async HTTP/1.1 client on its own event-loop thread.
///
/// ```swift
/// let client = try HTTPClient()
/// let response = try await client.get("http://127.0.0.1:8080/v1/snapshot?wait=60", timeout: .seconds(65))
/// await client.shutdown()
/// ```
///
/// Used by the gateway-side enforcement library (snapshot long-polls, telemetry batches), the
/// benchmarks and the tests. Like the server, all socket work happens on one epoll thread, so a
/// thousand concurrent long-polls cost a descriptor each and no thread; the awaiting tasks are
/// suspended, never blocked.
///
/// - Keep-alive: connections are pooled per host and port and reused (LIFO, so the warmest goes
///   first); an idle pooled connection the server closes is noticed and dropped at once.
/// - A request that fails on a *reused* connection before any response byte arrived (the server
///   closed it as we sent) is retried once on a fresh connection if its method is idempotent
///   (RFC 9110 §9.2.2); a `POST` is not, and fails with `.connectionClosed`.
/// - Bodies may be delimited by `Content-Length`, chunked, or the end of the connection.
/// - Each request has one timeout covering connect, send and receive; cancelling the calling task
///   cancels the request and closes its connection.
public final class HTTPClient: Sendable {
    public let configuration: HTTPClientConfiguration
    private let loop: EventLoop
    private let core: HTTPClientCore
    private let resolver = HostResolver()

    /// Starts the client's event-loop thread.
    public init(configuration: HTTPClientConfiguration = HTTPClientConfiguration()) throws {
        self.configuration = configuration
        loop = try EventLoop(name: "allot-http-client")
        core = HTTPClientCore(loop: loop, configuration: configuration)
        try loop.start()
    }

    deinit {
        let core = self.core
        loop.execute { core.shutDown() }
        loop.stop(completion: {})
    }

    /// Closes pooled connections, fails requests in flight with `.shutDown`, and stops the thread.
    public func shutdown() async {
        let core = self.core
        loop.execute { core.shutDown() }
        await loop.stop()
    }

    /// Sends `request` and returns the whole response.
    /// - Parameter timeout: overrides `configuration.timeout` for this request (e.g. 65 s for a 60 s
    ///   long-poll).
    public func execute(_ request: HTTPClientRequest, timeout: Duration? = nil) async throws(HTTPClientError)
        -> HTTPClientResponse
    {
        let url = try HTTPURL(request.url)
        let deadline = Posix.monotonicNanoseconds() &+ (timeout ?? configuration.timeout).nanoseconds
        let addresses = try await resolver.resolve(host: url.host, port: url.port)
        let pending = PendingClientRequest(
            key: url.authority, addresses: addresses, method: request.method,
            head: Self.encodeHead(request, url: url), body: request.body, deadline: deadline)
        let core = self.core
        let loop = self.loop
        let result = await withTaskCancellationHandler {
            await withCheckedContinuation {
                (continuation: CheckedContinuation<Result<HTTPClientResponse, HTTPClientError>, Never>) in
                pending.install { continuation.resume(returning: $0) }
                if !loop.execute({ core.start(pending) }) {
                    pending.complete(.failure(HTTPClientError(.shutDown, "the client was shut down")))
                }
            }
        } onCancel: {
            pending.markCancelled()
            loop.execute { core.cancel(pending) }
        }
        return try result.get()
    }

    /// `GET url`.
    public func get(_ url: String, headers: HTTPHeaders = [:], timeout: Duration? = nil) async throws(HTTPClientError)
        -> HTTPClientResponse
    {
        try await execute(HTTPClientRequest(method: .get, url: url, headers: headers), timeout: timeout)
    }

    /// `POST url` with `body`.
    public func post(_ url: String, body: [UInt8], headers: HTTPHeaders = [:], timeout: Duration? = nil)
        async throws(HTTPClientError) -> HTTPClientResponse
    {
        try await execute(HTTPClientRequest(method: .post, url: url, headers: headers, body: body), timeout: timeout)
    }

    /// The request head: `Host` and `Content-Length` are the client's, other fields as given (control
    /// bytes in values become spaces, names that are not tokens are dropped).
    static func encodeHead(_ request: HTTPClientRequest, url: HTTPURL) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(128 + url.target.utf8.count + request.headers.count * 32)
        bytes.append(contentsOf: request.method.rawValue.utf8)
        bytes.append(ASCII.space)
        bytes.append(contentsOf: url.target.utf8)
        bytes.append(contentsOf: " HTTP/1.1\r\nHost: ".utf8)
        bytes.append(contentsOf: url.authority.utf8)
        bytes.append(contentsOf: "\r\n".utf8)
        if !request.body.isEmpty || [.post, .put, .patch].contains(request.method) {
            bytes.append(contentsOf: "Content-Length: ".utf8)
            ResponseEncoder.appendDecimal(request.body.count, to: &bytes)
            bytes.append(contentsOf: "\r\n".utf8)
        }
        for (name, value) in request.headers {
            if HTTPHeaders.equalNames(name, "host") || HTTPHeaders.equalNames(name, "content-length")
                || HTTPHeaders.equalNames(name, "transfer-encoding")
            {
                continue
            }
            guard !name.isEmpty, name.utf8.allSatisfy(ASCII.isToken) else { continue }
            bytes.append(contentsOf: name.utf8)
            bytes.append(contentsOf: ": ".utf8)
            for byte in value.utf8 { bytes.append(ASCII.isFieldValue(byte) ? byte : ASCII.space) }
            bytes.append(contentsOf: "\r\n".utf8)
        }
        bytes.append(contentsOf: "\r\n".utf8)
        return bytes
    }
}

/// Resolves host names off the cooperative pool and caches the answers for a minute.
///
/// Numeric addresses resolve at once without a system resolver call. Names go through
/// `getaddrinfo`, which blocks, so it runs on a Dispatch queue rather than on a Swift
/// concurrency thread or the event loop.
final class HostResolver: Sendable {
    private struct Entry {
        var addresses: [SocketAddress]
        var expires: UInt64
    }

    private let cache = Locked<[String: Entry]>([:])
    private static let ttl: UInt64 = 60_000_000_000
    private static let queue = DispatchQueue(label: "allot.http.resolver", attributes: .concurrent)

    func resolve(host: String, port: Int) async throws(HTTPClientError) -> [SocketAddress] {
        let key = "\(host):\(port)"
        let now = Posix.monotonicNanoseconds()
        if let entry = cache.withLock({ $0[key] }), entry.expires > now { return entry.addresses }
        if let numeric = try? SocketAddress.resolveNumeric(host: host, port: port) { return numeric }
        let result = await withCheckedContinuation {
            (continuation: CheckedContinuation<Result<[SocketAddress], HTTPClientError>, Never>) in
            Self.queue.async {
                do throws(AddressResolutionError) {
                    // IPv4 first: servers here usually listen on 127.0.0.1, and "localhost" lists ::1 first.
                    let addresses = try SocketAddress.resolve(host: host, port: port)
                        .sorted { $0.family == AF_INET && $1.family != AF_INET }
                    continuation.resume(
                        returning: addresses.isEmpty
                            ? .failure(HTTPClientError(.unresolvableHost, "\(host) has no address"))
                            : .success(addresses))
                } catch {
                    continuation.resume(
                        returning: .failure(HTTPClientError(.unresolvableHost, "\(host): \(error.message)")))
                }
            }
        }
        let addresses = try result.get()
        cache.withLock { $0[key] = Entry(addresses: addresses, expires: now + Self.ttl) }
        return addresses
    }
}

extension SocketAddress {
    /// Resolves a numeric IPv4 or IPv6 host without any lookup; throws for names.
    static func resolveNumeric(host: String, port: Int) throws(AddressResolutionError) -> [SocketAddress] {
        var storage = sockaddr_storage()
        var v4 = in_addr()
        if inet_pton(AF_INET, host, &v4) == 1 {
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = UInt16(port).bigEndian
            address.sin_addr = v4
            withUnsafeMutableBytes(of: &storage) { target in
                withUnsafeBytes(of: address) { target.copyMemory(from: $0) }
            }
            return [SocketAddress(storage: storage, length: socklen_t(MemoryLayout<sockaddr_in>.size))]
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, host, &v6) == 1 {
            var address = sockaddr_in6()
            address.sin6_family = sa_family_t(AF_INET6)
            address.sin6_port = UInt16(port).bigEndian
            address.sin6_addr = v6
            withUnsafeMutableBytes(of: &storage) { target in
                withUnsafeBytes(of: address) { target.copyMemory(from: $0) }
            }
            return [SocketAddress(storage: storage, length: socklen_t(MemoryLayout<sockaddr_in6>.size))]
        }
        throw AddressResolutionError(host: host, message: "not a numeric address")
    }
}
