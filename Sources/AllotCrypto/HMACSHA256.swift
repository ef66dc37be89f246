/// HMAC with SHA-256 (RFC 2104; test vectors in RFC 4231).
///
/// For values Allot signs and later verifies (e.g. opaque cursors or download links): compare a
/// presented MAC with `ConstantTime.equals`, never with `==`.
public struct HMACSHA256: Sendable {
    private var inner: SHA256
    private let outer: SHA256

    /// Starts a MAC under `key`. Keys longer than one block are hashed first, as RFC 2104 requires.
    public init(key: some Sequence<UInt8>) {
        var block = Array(key)
        if block.count > SHA256.blockSize {
            block = SHA256.hash(block).bytes
        }
        block.append(contentsOf: repeatElement(0, count: SHA256.blockSize - block.count))
        var inner = SHA256()
        inner.update(block.map { $0 ^ 0x36 })
        var outer = SHA256()
        outer.update(block.map { $0 ^ 0x5c })
        self.inner = inner
        self.outer = outer
    }

    /// Feeds message bytes.
    public mutating func update(_ bytes: some Sequence<UInt8>) {
        inner.update(bytes)
    }

    /// Feeds the UTF-8 encoding of a string.
    public mutating func update(_ string: String) {
        inner.update(string)
    }

    /// The MAC over everything fed so far.
    public func finalize() -> SHA256Digest {
        var outer = self.outer
        outer.update(inner.finalize().bytes)
        return outer.finalize()
    }

    /// One-shot MAC of bytes.
    public static func authenticationCode(for message: some Sequence<UInt8>, key: some Sequence<UInt8>)
        -> SHA256Digest
    {
        var mac = HMACSHA256(key: key)
        mac.update(message)
        return mac.finalize()
    }

    /// One-shot MAC of a string's UTF-8 encoding.
    public static func authenticationCode(for message: String, key: some Sequence<UInt8>) -> SHA256Digest {
        var mac = HMACSHA256(key: key)
        mac.update(message)
        return mac.finalize()
    }
}
