/// An incremental decoder of the chunked transfer coding (RFC 9112 §7.1), for request bodies on the
/// server and response bodies in the client.
///
/// Strict like the head parser: CRLF line endings only, hexadecimal sizes without sign or
/// whitespace before the digits, extensions skipped but bounded, trailer fields read and dropped
/// (bounded by `maxTrailerBytes`). The decoded size is checked against `maxBodyBytes` before any
/// chunk's data is buffered, so a huge declared chunk is refused without reading it.
struct ChunkedDecoder {
    enum Outcome: Equatable {
        case needMore
        case done
        case failure(HTTPError)
    }

    private enum State {
        case size
        case sizeExtension
        case sizeLF
        case data(remaining: Int)
        case dataCR
        case dataLF
        case trailer
        case trailerLF(emptyLine: Bool)
        case done
    }

    let maxBodyBytes: Int
    let maxTrailerBytes: Int
    /// A chunk-size line (size and extensions) longer than this is refused.
    let maxSizeLineBytes = 1024
    private var state = State.size
    private var size = 0
    private var digits = 0
    private var lineBytes = 0
    private var trailerBytes = 0
    private(set) var decodedBytes = 0

    init(maxBodyBytes: Int, maxTrailerBytes: Int) {
        self.maxBodyBytes = maxBodyBytes
        self.maxTrailerBytes = maxTrailerBytes
    }

    private static func malformed(_ message: String) -> Outcome {
        .failure(HTTPError(.badRequest, code: "malformed_chunked_body", message: message, field: "Transfer-Encoding"))
    }

    /// Decodes from `input`, appending chunk data to `body`. Returns how many input bytes were
    /// consumed (all of them unless the body ended or failed within `input`).
    mutating func decode(_ input: UnsafeBufferPointer<UInt8>, into body: inout [UInt8]) -> (
        consumed: Int, outcome: Outcome
    ) {
        var index = 0
        let count = input.count
        while index < count {
            let byte = input[index]
            switch state {
            case .size:
                if let value = PercentDecoding.hexValue(byte) {
                    digits += 1
                    guard digits <= 15 else {
                        return (index, .failure(.bodyTooLarge(limit: maxBodyBytes, field: "Transfer-Encoding")))
                    }
                    size = size << 4 | Int(value)
                    index += 1
                } else if digits > 0
                    && (byte == ASCII.cr || byte == UInt8(ascii: ";") || byte == ASCII.space
                        || byte == ASCII.tab)
                {
                    state = byte == ASCII.cr ? .sizeLF : .sizeExtension
                    index += 1
                } else {
                    return (index, Self.malformed("invalid chunk size"))
                }
                lineBytes += 1
            case .sizeExtension:
                if byte == ASCII.cr {
                    state = .sizeLF
                } else if !ASCII.isFieldValue(byte) {
                    return (index, Self.malformed("invalid character in chunk extension"))
                }
                lineBytes += 1
                index += 1
            case .sizeLF:
                guard byte == ASCII.lf else { return (index, Self.malformed("chunk size line without LF")) }
                index += 1
                guard decodedBytes + size <= maxBodyBytes else {
                    return (index, .failure(.bodyTooLarge(limit: maxBodyBytes, field: "Transfer-Encoding")))
                }
                state = size == 0 ? .trailer : .data(remaining: size)
                size = 0
                digits = 0
                lineBytes = 0
            case .data(let remaining):
                let take = min(remaining, count - index)
                body.append(contentsOf: UnsafeBufferPointer(rebasing: input[index..<(index + take)]))
                decodedBytes += take
                index += take
                state = take == remaining ? .dataCR : .data(remaining: remaining - take)
            case .dataCR:
                guard byte == ASCII.cr else { return (index, Self.malformed("chunk data longer than its size")) }
                state = .dataLF
                index += 1
            case .dataLF:
                guard byte == ASCII.lf else { return (index, Self.malformed("chunk data without CRLF")) }
                state = .size
                index += 1
            case .trailer:
                if byte == ASCII.cr {
                    state = .trailerLF(emptyLine: lineBytes == 0)
                } else if byte == ASCII.lf {
                    return (index, Self.malformed("bare LF in chunked trailer"))
                } else if !ASCII.isFieldValue(byte) {
                    return (index, Self.malformed("invalid character in chunked trailer"))
                } else {
                    lineBytes += 1
                }
                trailerBytes += 1
                index += 1
            case .trailerLF(let emptyLine):
                guard byte == ASCII.lf else { return (index, Self.malformed("bare CR in chunked trailer")) }
                index += 1
                if emptyLine {
                    state = .done
                    return (index, .done)
                }
                lineBytes = 0
                state = .trailer
            case .done:
                return (index, .done)
            }
            if lineBytes > maxSizeLineBytes && !isInTrailer {
                return (index, Self.malformed("chunk size line too long"))
            }
            if trailerBytes > maxTrailerBytes {
                return (
                    index,
                    .failure(
                        HTTPError(
                            .requestHeaderFieldsTooLarge, code: "headers_too_large",
                            message: "chunked trailer exceeds the limit of \(maxTrailerBytes) bytes"))
                )
            }
        }
        if case .done = state { return (index, .done) }
        return (index, .needMore)
    }

    private var isInTrailer: Bool {
        switch state {
        case .trailer, .trailerLF: true
        default: false
        }
    }
}
