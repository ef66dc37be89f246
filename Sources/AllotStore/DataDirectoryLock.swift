import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// One `allot serve`'s exclusive hold on its data directory: an `flock` on `DIR/serve.lock`, which holds the pid of
/// the process that has it. Two services on one directory each ran their own loop and published interleaved versions
/// from two allocation histories (outside evaluation round 38, M3); the second now refuses to start. Other commands
/// take it too (`allot migrate`, which must not change a schema under a running service) or not (`allot tokens`,
/// `allot migrate --status`, which work beside one).
///
/// The system drops the lock when the process ends, however it ends (a `kill -9` leaves no stale lock: the file stays,
/// unlocked); ``release()`` drops it at a clean shutdown, so a service started again in the same process can take it.
public final class DataDirectoryLock: Sendable {
    /// `DIR/serve.lock`.
    public let path: String
    private let descriptor: Mutex<Int32>
    private let writable: Bool

    private init(path: String, descriptor: Int32, writable: Bool) {
        self.path = path
        self.descriptor = Mutex(descriptor)
        self.writable = writable
    }

    deinit {
        release()
    }

    /// Takes the lock of `directory` (created if it does not exist), or throws naming the process that holds it.
    public static func acquire(_ directory: DataDirectory) throws(StoreSetupError) -> DataDirectoryLock {
        try directory.create()
        let path = directory.path + "/serve.lock"
        // Readable by all (it holds a pid), so that a lock file another user created — a `sudo allot migrate` before
        // the service user's `allot serve` — can still be opened and locked read-only (outside evaluation round 39:
        // created 0600 by root, it stopped the service with "Permission denied"). Writing the pid is then skipped.
        var descriptor = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
        var code = errno
        var writable = true
        if descriptor < 0, code == EACCES, FileManager.default.fileExists(atPath: path) {
            descriptor = open(path, O_RDONLY | O_CLOEXEC)
            if descriptor < 0 { code = errno }
            writable = false
        }
        guard descriptor >= 0 else {
            let reason = String(cString: strerror(code))
            let hint =
                code == EACCES
                ? " (another user created it, e.g. a migrate run with sudo: remove it, or give it to this user)" : ""
            throw StoreSetupError(message: "cannot open \(path): \(reason)\(hint)")
        }
        guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
            let code = errno
            // The pid written by whoever wrote last; a holder that could only read the file wrote none, so a pid
            // that is no process now is not named (it was a `sudo allot migrate` long gone).
            let holder = Self.readPID(descriptor).flatMap { pid in kill(pid, 0) == 0 || errno == EPERM ? pid : nil }
            close(descriptor)
            guard code == EWOULDBLOCK else {
                throw StoreSetupError(message: "cannot lock \(path): \(String(cString: strerror(code)))")
            }
            let who = holder.map { "process \($0)" } ?? "another process"
            throw StoreSetupError(
                message: "data directory \(directory.path) is in use by another allot serve or migrate "
                    + "(\(who) holds \(path)): stop it first, or give this one another --data")
        }
        // Ours: record who holds it, for the message a second start prints.
        if writable {
            _ = fchmod(descriptor, 0o644)  // whatever the umask (fails harmlessly on a file another user owns)
            let text = Array("\(getpid())\n".utf8)
            _ = ftruncate(descriptor, 0)
            _ = text.withUnsafeBytes { pwrite(descriptor, $0.baseAddress, $0.count, 0) }
        }
        return DataDirectoryLock(path: path, descriptor: descriptor, writable: writable)
    }

    /// Drops the lock (idempotent).
    public func release() {
        descriptor.withLock { descriptor in
            guard descriptor >= 0 else { return }
            if writable { _ = ftruncate(descriptor, 0) }  // its pid no longer names a holder
            close(descriptor)  // closing the only descriptor of the open file releases its flock
            descriptor = -1
        }
    }

    /// The pid written in the lock file, if it reads as one.
    private static func readPID(_ descriptor: Int32) -> Int32? {
        var buffer = [UInt8](repeating: 0, count: 32)
        let count = buffer.withUnsafeMutableBytes { pread(descriptor, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return nil }
        let text = String(decoding: buffer[..<count], as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return Int32(text)
    }
}
