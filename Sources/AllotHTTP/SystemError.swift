import Glibc

/// A failed system call: which call, and the `errno` it left, with the C library's description.
///
/// Errors are values with context (STYLE.md): a log line or a test can say exactly which call
/// failed and why, rather than "socket error".
public struct SystemError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The system call or operation that failed, e.g. `"bind"` or `"epoll_ctl(ADD)"`.
    public var operation: String
    /// The `errno` value the call left.
    public var code: Int32

    public init(operation: String, code: Int32) {
        self.operation = operation
        self.code = code
    }

    /// Builds the error from the current `errno`; call it straight after the failing call.
    static func fromErrno(_ operation: String) -> SystemError {
        SystemError(operation: operation, code: errno)
    }

    /// The C library's description of `code` (e.g. "Address already in use").
    public var message: String {
        // glibc's strerror returns a static string for every known errno and is thread-safe since 2.32.
        String(cString: strerror(code))
    }

    public var description: String { "\(operation) failed: \(message) (errno \(code))" }
}
