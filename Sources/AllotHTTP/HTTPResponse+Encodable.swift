import Foundation

extension HTTPResponse {
    /// A JSON response encoding `value` with Foundation's `JSONEncoder` (sorted keys, so bodies are
    /// stable). For control-plane endpoints where convenience beats speed; hot paths should write
    /// bytes with `JSONWriter` instead (STYLE.md: `JSONEncoder` runs at roughly 30 MB/s here).
    public static func json<Value: Encodable>(
        encoding value: Value, status: HTTPStatus = .ok, headers: HTTPHeaders = [:]
    ) throws -> HTTPResponse {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return json(bytes: Array(try encoder.encode(value)), status: status, headers: headers)
    }
}
