import CLinux
import Glibc

/// An IPv4 or IPv6 socket address, as the kernel sees it.
struct SocketAddress: @unchecked Sendable, CustomStringConvertible {
    // `sockaddr_storage` is plain bytes with no pointers; sharing a copy between threads is safe.
    var storage: sockaddr_storage
    var length: socklen_t

    init(storage: sockaddr_storage, length: socklen_t) {
        self.storage = storage
        self.length = length
    }

    var family: Int32 { Int32(storage.ss_family) }

    /// The port in host byte order.
    var port: Int {
        withUnsafeBytes(of: storage) { raw in
            switch family {
            case AF_INET: Int(UInt16(bigEndian: raw.load(as: sockaddr_in.self).sin_port))
            case AF_INET6: Int(UInt16(bigEndian: raw.load(as: sockaddr_in6.self).sin6_port))
            default: 0
            }
        }
    }

    /// The numeric host, e.g. `127.0.0.1` or `::1`.
    var host: String {
        var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        let ok: Bool = withUnsafeBytes(of: storage) { raw in
            switch family {
            case AF_INET:
                var address = raw.load(as: sockaddr_in.self).sin_addr
                return inet_ntop(AF_INET, &address, &text, socklen_t(text.count)) != nil
            case AF_INET6:
                var address = raw.load(as: sockaddr_in6.self).sin6_addr
                return inet_ntop(AF_INET6, &address, &text, socklen_t(text.count)) != nil
            default:
                return false
            }
        }
        guard ok else { return "unknown" }
        return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// `host:port`, with IPv6 hosts in brackets (`[::1]:8080`).
    var description: String {
        family == AF_INET6 ? "[\(host)]:\(port)" : "\(host):\(port)"
    }

    /// Resolves `host` (a numeric address or a name) and `port` with `getaddrinfo`.
    ///
    /// Name resolution may block; callers on the event loop only pass numeric hosts, which are
    /// resolved without any network traffic (`AI_NUMERICHOST` is tried first).
    static func resolve(host: String, port: Int, passive: Bool = false) throws(AddressResolutionError)
        -> [SocketAddress]
    {
        if let numeric = try? lookup(host: host, port: port, flags: AI_NUMERICHOST | (passive ? AI_PASSIVE : 0)),
            !numeric.isEmpty
        {
            return numeric
        }
        return try lookup(host: host, port: port, flags: passive ? AI_PASSIVE : 0)
    }

    private static func lookup(host: String, port: Int, flags: Int32) throws(AddressResolutionError) -> [SocketAddress]
    {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_family = AF_UNSPEC
        hints.ai_flags = flags
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let first = list else {
            throw AddressResolutionError(host: host, message: String(cString: gai_strerror(status)))
        }
        defer { freeaddrinfo(list) }
        var result: [SocketAddress] = []
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        while let entry = cursor {
            if let address = entry.pointee.ai_addr,
                entry.pointee.ai_family == AF_INET || entry.pointee.ai_family == AF_INET6
            {
                var storage = sockaddr_storage()
                let length = entry.pointee.ai_addrlen
                withUnsafeMutableBytes(of: &storage) { target in
                    target.copyMemory(from: UnsafeRawBufferPointer(start: address, count: Int(length)))
                }
                result.append(SocketAddress(storage: storage, length: length))
            }
            cursor = entry.pointee.ai_next
        }
        return result
    }

    /// The local address a socket is bound to (`getsockname`).
    static func local(of fd: Int32) throws(SystemError) -> SocketAddress {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let status = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard status == 0 else { throw SystemError.fromErrno("getsockname") }
        return SocketAddress(storage: storage, length: length)
    }

    func withSockaddr<T>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> T) -> T {
        withUnsafeBytes(of: storage) { raw in
            body(raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), length)
        }
    }
}

/// A host name or address that `getaddrinfo` could not resolve.
struct AddressResolutionError: Error, Sendable, CustomStringConvertible {
    var host: String
    var message: String

    /// `cannot resolve host "no-such-host.invalid": Name or service not known` (was printed as the struct's dump).
    var description: String { "cannot resolve host \"\(host)\": \(message)" }
}

extension SocketAddress {
    /// Opens a non-blocking, close-on-exec listening TCP socket bound to `address`.
    ///
    /// `SO_REUSEADDR` lets a restarted server bind while old connections sit in `TIME_WAIT`.
    /// With `reusePort`, several sockets (one per event loop) may listen on the same port and the
    /// kernel spreads new connections over them (`SO_REUSEPORT`).
    static func listen(on address: SocketAddress, backlog: Int32, reusePort: Bool = false) throws(SystemError) -> Int32
    {
        let fd = socket(address.family, Int32(SOCK_STREAM.rawValue) | ALLOT_SOCK_NONBLOCK | ALLOT_SOCK_CLOEXEC, 0)
        guard fd >= 0 else { throw SystemError.fromErrno("socket") }
        do throws(SystemError) {
            try Posix.setOption(fd, SOL_SOCKET, SO_REUSEADDR, 1)
            if reusePort { try Posix.setOption(fd, SOL_SOCKET, SO_REUSEPORT, 1) }
            let bound = address.withSockaddr { bind(fd, $0, $1) }
            guard bound == 0 else { throw SystemError.fromErrno("bind(\(address))") }
            guard Glibc.listen(fd, backlog) == 0 else { throw SystemError.fromErrno("listen") }
        } catch {
            Posix.close(fd)
            throw error
        }
        return fd
    }
}
