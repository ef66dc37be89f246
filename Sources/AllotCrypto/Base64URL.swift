/// Base64url (RFC 4648 section 5) without padding, with strict decoding.
///
/// The URL- and filename-safe alphabet (`A–Z a–z 0–9 - _`) needs no escaping in headers, query
/// strings or JSON, which is why signed values and opaque cursors use it.
public enum Base64URL {
    static let alphabet: [UInt8] = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    /// Encodes bytes without `=` padding.
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        RadixCoding.encode(Array(bytes), alphabet: alphabet, bitsPerCharacter: 6)
    }

    /// Decodes unpadded base64url text.
    ///
    /// Strict, so that one value has exactly one spelling: rejects `=` padding, the standard
    /// alphabet's `+` and `/`, whitespace, a length of 4n+1 (no byte count produces it) and
    /// non-zero leftover bits in the last character.
    public static func decode(_ text: String) throws(CryptoError) -> [UInt8] {
        try RadixCoding.decode(text, alphabet: alphabet, bitsPerCharacter: 6, name: "base64url")
    }
}

/// Base32 (RFC 4648 section 6 alphabet) in lowercase, without padding, with strict decoding.
///
/// API tokens use it (see `APIToken`): only `a–z` and `2–7`, so a token is one "word" that a
/// double-click selects whole, has no characters that need quoting in a shell, and no `0`/`O` or
/// `1`/`l` look-alikes.
public enum Base32 {
    static let alphabet: [UInt8] = Array("abcdefghijklmnopqrstuvwxyz234567".utf8)

    /// Encodes bytes as lowercase base32 without `=` padding.
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        RadixCoding.encode(Array(bytes), alphabet: alphabet, bitsPerCharacter: 5)
    }

    /// Decodes lowercase unpadded base32.
    ///
    /// Strict: uppercase, padding, whitespace, impossible lengths (8n+1, 8n+3, 8n+6) and non-zero
    /// leftover bits are errors.
    public static func decode(_ text: String) throws(CryptoError) -> [UInt8] {
        try RadixCoding.decode(text, alphabet: alphabet, bitsPerCharacter: 5, name: "base32")
    }
}

/// Shared bit-packing for the power-of-two alphabets above.
enum RadixCoding {
    static func encode(_ bytes: [UInt8], alphabet: [UInt8], bitsPerCharacter: Int) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count * 8 + bitsPerCharacter - 1) / bitsPerCharacter)
        let mask = UInt32(1) << UInt32(bitsPerCharacter) - 1
        var buffer: UInt32 = 0
        var bits = 0
        for byte in bytes {
            buffer = buffer << 8 | UInt32(byte)
            bits += 8
            while bits >= bitsPerCharacter {
                bits -= bitsPerCharacter
                out.append(alphabet[Int(buffer >> UInt32(bits) & mask)])
            }
            buffer &= (1 << UInt32(bits)) - 1
        }
        if bits > 0 {
            out.append(alphabet[Int(buffer << UInt32(bitsPerCharacter - bits) & mask)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    static func decode(
        _ text: String, alphabet: [UInt8], bitsPerCharacter: Int, name: String
    ) throws(CryptoError) -> [UInt8] {
        var table = [Int8](repeating: -1, count: 256)
        for (value, char) in alphabet.enumerated() { table[Int(char)] = Int8(value) }

        let utf8 = Array(text.utf8)
        // A valid length leaves fewer leftover bits than one character carries.
        let leftover = utf8.count * bitsPerCharacter % 8
        guard leftover < bitsPerCharacter else {
            throw CryptoError(
                code: .invalidEncoding, message: "\(name) text has an impossible length (\(utf8.count))",
                offset: utf8.count)
        }
        var out: [UInt8] = []
        out.reserveCapacity(utf8.count * bitsPerCharacter / 8)
        var buffer: UInt32 = 0
        var bits = 0
        for (offset, char) in utf8.enumerated() {
            let value = table[Int(char)]
            guard value >= 0 else {
                throw CryptoError(
                    code: .invalidEncoding,
                    message: "invalid \(name) character \(describeByte(char)) at offset \(offset)", offset: offset)
            }
            buffer = buffer << UInt32(bitsPerCharacter) | UInt32(value)
            bits += bitsPerCharacter
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: buffer >> UInt32(bits)))
                buffer &= (1 << UInt32(bits)) - 1
            }
        }
        guard buffer == 0 else {
            throw CryptoError(
                code: .invalidEncoding,
                message: "\(name) text has non-zero padding bits in its last character", offset: utf8.count - 1)
        }
        return out
    }
}
