import AllotJSON
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

#if canImport(Glibc)
    private let systemWrite = Glibc.write
#elseif canImport(Darwin)
    private let systemWrite = Darwin.write
#endif

/// Where finished log lines go. A line is one JSON object followed by `\n`, already encoded.
public protocol LogSink: Sendable {
    /// Writes one complete line. Must not interleave with lines written concurrently, and must never throw or
    /// trap: logging is never a reason for the service to fail.
    func write(line: [UInt8])
}

/// Writes lines to a file descriptor — in the service, standard error (SPEC §13).
///
/// Each line goes out with `write(2)` calls made while holding this sink's lock, retried on `EINTR` and
/// continued after a partial write, so lines from many threads never interleave even when a line is longer
/// than `PIPE_BUF` (where the kernel alone would not guarantee atomicity). Use ``standardError``, the one
/// shared instance for fd 2, so that every writer in the process shares that lock.
///
/// Writing to a closed pipe raises `SIGPIPE`; the service ignores `SIGPIPE` process-wide (AllotHTTP), after
/// which the write fails with `EPIPE` and the line is dropped. Lines are also dropped on other write errors,
/// and when a non-blocking descriptor stays unwritable for a second.
///
/// `@unchecked Sendable`: the only state is the immutable descriptor and the lock; the lock serialises writes.
public final class FileDescriptorLogSink: LogSink, @unchecked Sendable {
    /// The process-wide sink for standard error.
    public static let standardError = FileDescriptorLogSink(fileDescriptor: 2)

    private let fileDescriptor: Int32
    private let lock = NSLock()

    /// A sink for any open descriptor the caller keeps open for the sink's lifetime (the sink never closes it).
    public init(fileDescriptor: Int32) {
        self.fileDescriptor = fileDescriptor
    }

    public func write(line: [UInt8]) {
        lock.lock()
        defer { lock.unlock() }
        line.withUnsafeBytes { bytes in
            _ = Self.writeAll(bytes) { chunk in
                let written = systemWrite(fileDescriptor, chunk.baseAddress, chunk.count)
                return (written, written < 0 ? errno : 0)
            } waitWritable: {
                var descriptor = pollfd(fd: fileDescriptor, events: Int16(POLLOUT), revents: 0)
                return poll(&descriptor, 1, 1_000) > 0
            }
        }
    }

    /// Writes every byte through `write`, continuing after partial writes, retrying `EINTR`, and waiting with
    /// `waitWritable` on `EAGAIN`. Returns false when the line had to be dropped. Separate from the system call
    /// so tests can drive every path.
    static func writeAll(
        _ bytes: UnsafeRawBufferPointer, write: (UnsafeRawBufferPointer) -> (written: Int, error: Int32),
        waitWritable: () -> Bool
    ) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let (written, error) = write(UnsafeRawBufferPointer(rebasing: bytes[offset...]))
            if written > 0 {
                offset += written
            } else if written < 0 && error == EINTR {
                continue
            } else if written < 0 && (error == EAGAIN || error == EWOULDBLOCK) {
                guard waitWritable() else { return false }
            } else {
                return false
            }
        }
        return true
    }
}

/// Keeps lines in memory, for tests: `lines` as text, `records` parsed back into JSON.
///
/// `@unchecked Sendable`: `stored` is only read or written while holding `lock`.
public final class CapturingLogSink: LogSink, @unchecked Sendable {
    private let lock = NSLock()
    private var stored: [[UInt8]] = []

    public init() {}

    public func write(line: [UInt8]) {
        lock.withLock { stored.append(line) }
    }

    /// Every line written so far, each including its trailing newline.
    public var lines: [String] {
        lock.withLock { stored.map { String(decoding: $0, as: UTF8.self) } }
    }

    /// Every line written so far, parsed back (nil for a line that is not one JSON value, which would be a bug).
    public var records: [JSON?] {
        lock.withLock { stored.map { try? JSON.parse($0) } }
    }

    /// Forgets everything written so far.
    public func removeAll() {
        lock.withLock { stored.removeAll() }
    }
}

/// Drops every line: for components under test that need a ``Logger`` but whose logs do not matter.
public struct DiscardingLogSink: LogSink {
    public init() {}
    public func write(line: [UInt8]) {}
}
