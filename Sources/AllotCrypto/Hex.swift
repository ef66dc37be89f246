/// Lowercase hexadecimal encoding and strict decoding.
public enum Hex {
    private static let digits: [UInt8] = Array("0123456789abcdef".utf8)

    /// Encodes bytes as lowercase hex, two characters per byte.
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(bytes.underestimatedCount * 2)
        for byte in bytes {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }

    /// Decodes hex text, accepting upper- and lowercase digits.
    ///
    /// Strict: an odd number of digits, whitespace, a `0x` prefix or any other character is an
    /// error naming the offending offset, because a token hash that decodes "almost" is a bug.
    public static func decode(_ text: String) throws(CryptoError) -> [UInt8] {
        let utf8 = Array(text.utf8)
        guard utf8.count % 2 == 0 else {
            throw CryptoError(
                code: .invalidEncoding, message: "hex text has an odd number of characters (\(utf8.count))",
                offset: utf8.count)
        }
        var out: [UInt8] = []
        out.reserveCapacity(utf8.count / 2)
        var index = 0
        while index < utf8.count {
            let high = try value(utf8[index], at: index)
            let low = try value(utf8[index + 1], at: index + 1)
            out.append(high << 4 | low)
            index += 2
        }
        return out
    }

    private static func value(_ char: UInt8, at offset: Int) throws(CryptoError) -> UInt8 {
        switch char {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return char - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return char - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return char - UInt8(ascii: "A") + 10
        default:
            throw CryptoError(
                code: .invalidEncoding, message: "invalid hex character \(describeByte(char)) at offset \(offset)",
                offset: offset)
        }
    }
}
