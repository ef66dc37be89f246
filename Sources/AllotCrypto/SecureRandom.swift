import Glibc

/// Cryptographically secure random bytes straight from the kernel.
///
/// We do not lean on `SystemRandomNumberGenerator`: its documentation promises "cryptographically
/// secure" only as a platform-dependent property, and tokens (SPEC section 8) must not rest on an
/// undocumented assumption. Instead this calls `getrandom(2)` with no flags, which blocks only
/// until the kernel's pool is first initialised at boot and then never fails for sizes we use.
/// `getrandom` is looked up with `dlsym` because Swift's `Glibc` module does not export
/// `<sys/random.h>`; on a libc or kernel without it (`ENOSYS`) we read `/dev/urandom` instead.
public enum SecureRandom {
    /// Returns `count` random bytes.
    public static func bytes(_ count: Int) throws(CryptoError) -> [UInt8] {
        precondition(count >= 0, "SecureRandom.bytes needs a non-negative count")
        var out = [UInt8](repeating: 0, count: count)
        // `withUnsafeMutableBytes` rethrows untyped errors, so carry the typed one out in a Result.
        let result = out.withUnsafeMutableBytes { buffer in Result { () throws(CryptoError) in try fill(buffer) } }
        try result.get()
        return out
    }

    /// Fills a buffer with random bytes, looping over short reads and `EINTR`.
    public static func fill(_ buffer: UnsafeMutableRawBufferPointer) throws(CryptoError) {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        if let getrandom = Kernel.getrandom {
            var filled = 0
            while filled < buffer.count {
                // At most 32 MiB per call: larger requests may legitimately return short.
                let chunk = min(buffer.count - filled, 1 << 25)
                let result = getrandom(base + filled, chunk, 0)
                if result > 0 {
                    filled += result
                    continue
                }
                let error = Glibc.errno
                if result < 0 && error == EINTR { continue }
                if result < 0 && error == ENOSYS { break }
                throw CryptoError(
                    code: .randomUnavailable, message: "getrandom failed: \(errorText(error))", errno: error)
            }
            if filled == buffer.count { return }
        }
        try fillFromDevice(buffer)
    }

    /// Fills a buffer by reading a random device: the fallback when `getrandom(2)` does not exist.
    ///
    /// Public so the fallback is tested directly and usable where a seccomp filter forbids
    /// `getrandom`. Loops over short reads and `EINTR`; end of file is an error.
    public static func fillFromDevice(_ buffer: UnsafeMutableRawBufferPointer, path: String = "/dev/urandom")
        throws(CryptoError)
    {
        guard let base = buffer.baseAddress, buffer.count > 0 else { return }
        var fd: Int32
        repeat {
            fd = open(path, O_RDONLY | O_CLOEXEC)
        } while fd < 0 && Glibc.errno == EINTR
        guard fd >= 0 else {
            let error = Glibc.errno
            throw CryptoError(
                code: .randomUnavailable, message: "cannot open \(path): \(errorText(error))", errno: error)
        }
        defer { close(fd) }  // Never retried: after EINTR the descriptor state is unspecified.
        var filled = 0
        while filled < buffer.count {
            let result = read(fd, base + filled, buffer.count - filled)
            if result > 0 {
                filled += result
            } else if result < 0 && Glibc.errno == EINTR {
                continue
            } else {
                let error: Int32? = result < 0 ? Glibc.errno : nil
                throw CryptoError(
                    code: .randomUnavailable,
                    message: "cannot read \(path): \(error.map(errorText) ?? "unexpected end of file")", errno: error)
            }
        }
    }

    private static func errorText(_ code: Int32) -> String {
        String(cString: strerror(code))
    }
}

/// The libc entry points we resolve at run time.
private enum Kernel {
    typealias GetRandom = @convention(c) (UnsafeMutableRawPointer?, Int, UInt32) -> Int

    /// `getrandom(2)` from the already-loaded libc (`dlsym(RTLD_DEFAULT, …)`), or nil if absent.
    static let getrandom: GetRandom? = {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "getrandom") else { return nil }
        return unsafeBitCast(symbol, to: GetRandom.self)
    }()
}
