import AllotJSON
import AllotTime

extension ProviderSignals {
    /// Parses one response's rate-limit headers (names case-insensitive) and, if given, its error body.
    ///
    /// Rules (SPEC §4 "Provider headers"):
    ///
    /// - `x-ratelimit-{limit,remaining}-{requests,tokens}` (OpenAI, Azure): integer; `-1` (Azure's "unknown")
    ///   → nil.
    /// - `x-ratelimit-reset-{requests,tokens}`: a Go duration (``GoDuration``: `6m0s`, `250ms`) or plain
    ///   seconds (some OpenAI-compatible servers); `-1` → nil.
    /// - `anthropic-ratelimit-{requests,tokens,input-tokens,output-tokens}-{limit,remaining}`: integer.
    /// - `anthropic-ratelimit-…-reset`: an RFC 3339 instant → seconds after `now`, clamped at 0.
    /// - `azure-openai-deployment-utilization`: a percentage, `87.5%` → 0.875 (clamped to 0…1).
    /// - `retry-after-ms`: decimal milliseconds → seconds; wins over `retry-after`.
    /// - `retry-after`: decimal seconds, or an HTTP date → seconds after `now`, clamped at 0.
    /// - Google error body: `RetryInfo.retryDelay` is the retry delay when no retry header was readable;
    ///   `QuotaFailure.violations` become ``quotaViolations``, and per dimension the most restrictive one
    ///   (lowest sustained per-minute rate) sets `limit` and `window` unless a header already gave a limit.
    ///   A violation counts tokens when its metric or id mentions tokens (Gemini's token quota is on input
    ///   tokens; it lands in ``tokens``, the dimension the capacity observer tracks).
    ///
    /// Values are trimmed of surrounding spaces and tabs (HTTP optional whitespace); anything else that is not
    /// exactly the expected form — inner whitespace, signs, exponents, Unicode digits, more than 18 digits,
    /// repeated duration units, a negative number other than `-1` — is unparseable: the field stays nil and the
    /// header name is added to ``unparseableHeaders``. Unknown headers are ignored and not counted.
    ///
    /// The family is the most specific convention seen: Anthropic headers → `anthropic`; Azure's utilisation
    /// header, a `-1` sentinel or an Azure-only header (`apim-request-id`, `x-ms-region`) → `azure`; other
    /// `x-ratelimit-*` → `openai`; a Google-shaped body → `google`; otherwise `generic`.
    ///
    /// - Parameters:
    ///   - headers: response header fields (name → value), verbatim.
    ///   - body: the error body, when the caller has it (gateways do; telemetry carries only `error_type`).
    ///   - now: the response time in seconds since the epoch, for absolute resets and HTTP dates.
    public init(headers: [String: String], body: ProviderErrorBody? = nil, now: Double) {
        var parser = SignalParser()
        for (name, value) in headers { parser.header(name, value) }
        self = parser.finish(body: body, now: now)
    }

    /// `init(headers:body:now:)` for header fields as ordered pairs (a
    /// gateway's HTTP client; repeated names: the last readable value wins).
    public init(headerFields: some Sequence<(String, String)>, body: ProviderErrorBody? = nil, now: Double) {
        var parser = SignalParser()
        for (name, value) in headerFields { parser.header(name, value) }
        self = parser.finish(body: body, now: now)
    }

    /// `init(headers:body:now:)` for the telemetry event's `headers` object
    /// (SPEC §3) without copying it into a dictionary. A JSON number is read as its decimal text; any other
    /// non-string value of a recognised header is unparseable.
    public init(headers: JSONObject, body: ProviderErrorBody? = nil, now: Double) {
        var parser = SignalParser()
        headers.forEachMember { name, value in
            switch value {
            case .string(let text): parser.header(name, text)
            case .int(let number): parser.header(name, String(number))
            case .double(let number): parser.header(name, number.description)
            default: parser.unreadable(name)
            }
        }
        self = parser.finish(body: body, now: now)
    }
}

/// The recognised header names.
enum HeaderField {
    enum Kind { case limit, remaining, reset }
    enum Dimension { case requests, tokens, inputTokens, outputTokens }

    case openAI(Kind, Dimension)
    case anthropic(Kind, Dimension)
    case utilization
    case retryAfterMilliseconds
    case retryAfter
    /// A header only Azure OpenAI sends (`apim-request-id`, `x-ms-region`, `azureml-model-session`): it names
    /// the family when a gateway forwards all headers; its value is not read.
    case azureMarker

    /// Lower-case names with their meaning, bucketed by length: a name is compared only with the two or three
    /// known names of its length, from the last byte backwards (the shared `x-ratelimit-` or
    /// `anthropic-ratelimit-` prefixes would make a forward comparison slow to fail).
    static let byLength: [[([UInt8], HeaderField)]] = {
        var entries: [(String, HeaderField)] = [
            ("x-ratelimit-limit-requests", .openAI(.limit, .requests)),
            ("x-ratelimit-limit-tokens", .openAI(.limit, .tokens)),
            ("x-ratelimit-remaining-requests", .openAI(.remaining, .requests)),
            ("x-ratelimit-remaining-tokens", .openAI(.remaining, .tokens)),
            ("x-ratelimit-reset-requests", .openAI(.reset, .requests)),
            ("x-ratelimit-reset-tokens", .openAI(.reset, .tokens)),
            ("azure-openai-deployment-utilization", .utilization),
            ("retry-after-ms", .retryAfterMilliseconds),
            ("retry-after", .retryAfter),
            ("apim-request-id", .azureMarker),
            ("x-ms-region", .azureMarker),
            ("azureml-model-session", .azureMarker),
        ]
        let dimensions: [(String, Dimension)] = [
            ("requests", .requests), ("tokens", .tokens), ("input-tokens", .inputTokens),
            ("output-tokens", .outputTokens),
        ]
        for (dimensionName, dimension) in dimensions {
            for (kindName, kind) in [("limit", Kind.limit), ("remaining", .remaining), ("reset", .reset)] {
                entries.append(("anthropic-ratelimit-\(dimensionName)-\(kindName)", .anthropic(kind, dimension)))
            }
        }
        var buckets: [[([UInt8], HeaderField)]] = Array(repeating: [], count: maxLength + 1)
        for (name, field) in entries {
            precondition(name.utf8.count <= maxLength)
            buckets[name.utf8.count].append((Array(name.utf8), field))
        }
        return buckets
    }()

    /// Length of the longest recognised name.
    static let maxLength = 43

    /// The field a header name denotes, case-insensitively; nil for every other header.
    @inline(__always)
    static func match(_ name: String) -> HeaderField? {
        let length = name.utf8.count
        guard length <= maxLength, !byLength[length].isEmpty else { return nil }
        return ByteScan.withBytes(name) { match(bytes: $0) }
    }

    /// ``match(_:)`` over the name's raw bytes.
    static func match(bytes: UnsafeBufferPointer<UInt8>) -> HeaderField? {
        guard bytes.count <= maxLength else { return nil }
        for (literal, field) in byLength[bytes.count] where ByteScan.equalsLowercaseBackwards(bytes, literal) {
            return field
        }
        return nil
    }
}

/// Accumulates one response's signals; `ProviderSignals`'s initialisers and ``ProviderSignalsReader`` drive it.
///
/// The response time `now` is only needed to turn absolute instants (Anthropic's RFC 3339 resets, an HTTP-date
/// `retry-after`) into durations, so those are kept as read and resolved in ``finish(body:now:)``: a caller that
/// streams headers out of a telemetry event may meet them before the event's `ts`.
struct SignalParser {
    var signals = ProviderSignals()
    var retryAfterMilliseconds: Double?
    var retryAfter: PendingRetryAfter?
    /// Absolute reset instants (seconds since the epoch) per dimension, set instead of the dimension's `reset`
    /// (the later header wins, as for relative resets).
    var resetInstants = PendingResets()
    var sawOpenAI = false
    var sawAnthropic = false
    var sawAzure = false

    /// `retry-after` as read: seconds, or an HTTP date (its bytes and header name, parsed again against `now` at
    /// the end, since `now` places an RFC 850 two-digit year).
    enum PendingRetryAfter {
        case seconds(Double)
        case date([UInt8], name: String)
    }

    struct PendingResets {
        var requests: Double?
        var tokens: Double?
        var inputTokens: Double?
        var outputTokens: Double?
    }

    /// Reads one header field; unrecognised names are ignored.
    mutating func header(_ name: String, _ value: String) {
        guard let field = HeaderField.match(name) else { return }
        let readable = ByteScan.withBytes(value) { apply(field, ByteScan.trimmed($0), name: { name }) }
        if !readable { signals.unparseableHeaders.append(name) }
    }

    /// ``header(_:_:)`` over raw bytes: the name becomes a `String` only if its value is unparseable.
    mutating func header(name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {
        guard let field = HeaderField.match(bytes: name) else { return }
        let name = { String(decoding: name, as: UTF8.self) }
        if !apply(field, ByteScan.trimmed(value), name: name) { signals.unparseableHeaders.append(name()) }
    }

    /// Records a recognised header whose value is not text at all.
    mutating func unreadable(_ name: String) {
        switch HeaderField.match(name) {
        case nil: break
        case .azureMarker?: sawAzure = true
        case _?: signals.unparseableHeaders.append(name)
        }
    }

    /// Applies a value to its field; false when the value is unparseable. `name` gives the header's name as a
    /// `String` in the rare case that it must be kept.
    private mutating func apply(_ field: HeaderField, _ value: UnsafeBufferPointer<UInt8>, name: () -> String)
        -> Bool
    {
        switch field {
        case .openAI(let kind, let dimension):
            sawOpenAI = true
            if isUnknownSentinel(value) {
                sawAzure = true
                return true
            }
            switch kind {
            case .limit, .remaining:
                guard let count = ByteScan.integer(value) else { return false }
                set(kind, dimension, count: count)
            case .reset:
                guard let seconds = GoDuration.parse(utf8: value) ?? ByteScan.wholeDecimal(value) else { return false }
                setReset(dimension, seconds: seconds)
            }
        case .anthropic(let kind, let dimension):
            sawAnthropic = true
            if isUnknownSentinel(value) { return true }
            switch kind {
            case .limit, .remaining:
                guard let count = ByteScan.integer(value) else { return false }
                set(kind, dimension, count: count)
            case .reset:
                guard let instant = RFC3339.parse(utf8: value) else { return false }
                setReset(dimension, instant: instant)
            }
        case .utilization:
            sawAzure = true
            guard let last = value.last, last == ByteScan.percent,
                let percent = ByteScan.wholeDecimal(UnsafeBufferPointer(rebasing: value.dropLast()))
            else { return false }
            signals.utilization = min(percent / 100, 1)
        case .retryAfterMilliseconds:
            guard let milliseconds = ByteScan.wholeDecimal(value) else { return false }
            retryAfterMilliseconds = milliseconds / 1_000
        case .azureMarker:
            sawAzure = true
        case .retryAfter:
            if let seconds = ByteScan.wholeDecimal(value) {
                retryAfter = .seconds(seconds)
            } else if HTTPDate.parse(utf8: value) != nil {
                // Valid with or without `now` (which only places a two-digit year); resolved in `finish`.
                retryAfter = .date(Array(value), name: name())
            } else {
                return false
            }
        }
        return true
    }

    private mutating func setReset(_ dimension: HeaderField.Dimension, seconds: Double) {
        update(dimension) { $0.reset = seconds }
        setInstant(dimension, nil)
    }

    private mutating func setReset(_ dimension: HeaderField.Dimension, instant: Double) {
        update(dimension) { $0.reset = nil }
        setInstant(dimension, instant)
    }

    private mutating func setInstant(_ dimension: HeaderField.Dimension, _ instant: Double?) {
        switch dimension {
        case .requests: resetInstants.requests = instant
        case .tokens: resetInstants.tokens = instant
        case .inputTokens: resetInstants.inputTokens = instant
        case .outputTokens: resetInstants.outputTokens = instant
        }
    }

    /// `-1`: Azure's (and some proxies') way of saying "not known" (SPEC §4). Never a count.
    @inline(__always)
    private func isUnknownSentinel(_ value: UnsafeBufferPointer<UInt8>) -> Bool {
        value.count == 2 && value[0] == ByteScan.minus && value[1] == 0x31
    }

    private mutating func set(_ kind: HeaderField.Kind, _ dimension: HeaderField.Dimension, count: Int64) {
        if kind == .limit {
            update(dimension) { $0.limit = count }
        } else {
            update(dimension) { $0.remaining = count }
        }
    }

    @inline(__always)
    private mutating func update(_ dimension: HeaderField.Dimension, _ body: (inout RateLimitDimension) -> Void) {
        switch dimension {
        case .requests: body(&signals.requests)
        case .tokens: body(&signals.tokens)
        case .inputTokens: body(&signals.inputTokens)
        case .outputTokens: body(&signals.outputTokens)
        }
    }

    /// Resolves absolute instants against `now` (clamped at 0), precedence (retry headers before the body),
    /// reads a Google body, and names the family. Leaves the parser as it was (no copy of it is needed to
    /// finish).
    func finish(body: ProviderErrorBody?, now: Double) -> ProviderSignals {
        var signals = self.signals
        if let instant = resetInstants.requests { signals.requests.reset = max(0, instant - now) }
        if let instant = resetInstants.tokens { signals.tokens.reset = max(0, instant - now) }
        if let instant = resetInstants.inputTokens { signals.inputTokens.reset = max(0, instant - now) }
        if let instant = resetInstants.outputTokens { signals.outputTokens.reset = max(0, instant - now) }
        var retryAfterSeconds: Double?
        switch retryAfter {
        case .seconds(let seconds)?:
            retryAfterSeconds = seconds
        case .date(let bytes, let name)?:
            if let date = bytes.withUnsafeBufferPointer({ HTTPDate.parse(utf8: $0, now: now) }) {
                retryAfterSeconds = max(0, date - now)
            } else {
                signals.unparseableHeaders.append(name)  // a 29 February that `now` puts in a non-leap century
            }
        case nil:
            break
        }
        var isGoogle = false
        if let body, case .json = body {
            let google = body.googleDetails()
            isGoogle = google.isGoogle
            signals.unparseableHeaders.append(contentsOf: google.unparseable)
            signals.quotaViolations = google.violations
            retryAfterSeconds = retryAfterSeconds ?? google.retryDelay
            for dimension in QuotaDimension.allCases {
                // The most restrictive sustained rate is the one that binds.
                let binding = google.violations
                    .filter { $0.dimension == dimension && $0.value != nil }
                    .min { perMinute($0) < perMinute($1) }
                guard let binding else { continue }
                let target = RateLimitDimension(limit: binding.value, window: binding.window)
                switch dimension {
                case .requests where signals.requests.limit == nil:
                    signals.requests.limit = target.limit
                    signals.requests.window = target.window
                case .tokens where signals.tokens.limit == nil:
                    signals.tokens.limit = target.limit
                    signals.tokens.window = target.window
                default: break
                }
            }
        }
        signals.retryAfter = retryAfterMilliseconds ?? retryAfterSeconds
        // Dictionary order is random per process; sorted names make results comparable and logs stable.
        if signals.unparseableHeaders.count > 1 { signals.unparseableHeaders.sort() }
        if sawAnthropic {
            signals.family = .anthropic
        } else if sawAzure {
            signals.family = .azure
        } else if sawOpenAI {
            signals.family = .openai
        } else if isGoogle {
            signals.family = .google
        } else {
            signals.family = .generic
        }
        return signals
    }

    private func perMinute(_ violation: QuotaViolation) -> Double {
        Double(violation.value ?? .max) * 60 / (violation.window ?? 60)
    }
}
