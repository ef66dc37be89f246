/// Bearer tokens for the HTTP API (SPEC section 8).
///
/// Format: `allot_` followed by 52 lowercase base32 characters encoding 32 random bytes (256 bits,
/// twice the SPEC's minimum of 128). The prefix makes a leaked token recognisable to people and
/// secret scanners; the base32 body (`a–z`, `2–7`) is one word for double-click selection and
/// needs no quoting in a shell or header. Only `storageHash(of:)` is ever persisted.
public enum APIToken {
    /// The fixed, recognisable prefix of every token.
    public static let prefix = "allot_"
    /// Random bytes per token.
    public static let randomByteCount = 32
    /// Length of the base32 body (`ceil(256 / 5)`).
    public static let bodyLength = 52
    /// Total length of a token string.
    public static let length = prefix.utf8.count + bodyLength

    /// Creates a new token from `SecureRandom`.
    public static func generate() throws(CryptoError) -> String {
        prefix + Base32.encode(try SecureRandom.bytes(randomByteCount))
    }

    /// The value stored in the database for a token: lowercase hex SHA-256 of its UTF-8 text.
    ///
    /// The whole string (prefix included) is hashed, so a token is looked up by exactly what the
    /// client presented. An unsalted fast hash is right here: the input carries 256 bits of
    /// entropy, so there is nothing for a dictionary or a slow KDF to protect.
    public static func storageHash(of token: String) -> String {
        SHA256.hash(token).hex
    }

    /// Whether `text` has the shape of a token this module generates (prefix, length, alphabet,
    /// canonical final character).
    ///
    /// Lets the server answer `401` for garbage without a database lookup; it says nothing about
    /// whether the token exists.
    public static func isWellFormed(_ text: String) -> Bool {
        guard text.utf8.count == length, text.hasPrefix(prefix) else { return false }
        let body = String(text.utf8.dropFirst(prefix.utf8.count))!
        guard let bytes = try? Base32.decode(body) else { return false }
        return bytes.count == randomByteCount
    }

    /// A short, non-secret form for listings and logs: the prefix and the first four body
    /// characters (20 of 256 bits), e.g. `allot_k3xq…`.
    public static func redacted(_ token: String) -> String {
        guard token.hasPrefix(prefix) else { return "…" }
        return String(token.prefix(prefix.count + 4)) + "…"
    }
}
