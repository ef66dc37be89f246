/// An error from AllotCrypto, with enough context to say what was wrong and where.
public struct CryptoError: Error, Sendable, Equatable, CustomStringConvertible {
    /// What kind of failure this is.
    public enum Code: String, Sendable {
        /// Text given to a strict decoder (hex, base64url, base32) was not in its alphabet or shape.
        case invalidEncoding = "invalid_encoding"
        /// The kernel gave us no random bytes (neither `getrandom(2)` nor `/dev/urandom` worked).
        case randomUnavailable = "random_unavailable"
    }

    /// The kind of failure.
    public let code: Code
    /// A human-readable explanation, e.g. "invalid hex character 'g' at offset 3".
    public let message: String
    /// The byte/character offset in the input at fault, when there is one.
    public let offset: Int?
    /// The `errno` reported by the system call, when there is one.
    public let errno: Int32?

    /// Creates an error value.
    public init(code: Code, message: String, offset: Int? = nil, errno: Int32? = nil) {
        self.code = code
        self.message = message
        self.offset = offset
        self.errno = errno
    }

    public var description: String { "\(code.rawValue): \(message)" }
}

/// Renders one input byte for an error message without echoing raw control bytes.
func describeByte(_ byte: UInt8) -> String {
    if byte >= 0x20 && byte < 0x7f {
        return "'\(Character(Unicode.Scalar(byte)))'"
    }
    return "byte 0x" + Hex.encode([byte])
}
