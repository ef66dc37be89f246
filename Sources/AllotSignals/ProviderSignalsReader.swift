/// Builds ``ProviderSignals`` from header fields handed over one at a time as raw UTF-8 bytes.
///
/// Why it exists: telemetry ingest (SPEC §3, §13) parses the `headers` object of every event, up to 100,000
/// events per second. Going through `init(headers:body:now:)` would first make a `String` of every header name
/// and value (and a dictionary or array of them) only for the parser to read their bytes again. This reader
/// takes the bytes where they lie (e.g. inside the request body) and allocates nothing for recognised headers
/// with readable values; unknown headers cost one length check.
///
/// The rules are exactly those of ``ProviderSignals/init(headers:body:now:)`` (same parser); the only
/// difference is that the response time `now` is given at the end, in ``signals(body:now:)``, so the fields may
/// be read before it is known (a telemetry event's `ts` may come after its `headers`).
///
/// ```swift
/// var reader = ProviderSignalsReader()
/// reader.read(name: nameBytes, value: valueBytes)  // once per header field
/// let signals = reader.signals(now: eventTime)
/// ```
public struct ProviderSignalsReader: Sendable {
    private var parser = SignalParser()
    /// Header fields read so far (recognised or not).
    public private(set) var fieldCount = 0

    public init() {}

    /// Reads one header field. Names are matched case-insensitively; unrecognised ones are ignored; a recognised
    /// one whose value cannot be read is listed in ``ProviderSignals/unparseableHeaders`` (its name as given).
    /// The bytes are only read during the call.
    public mutating func read(name: UnsafeBufferPointer<UInt8>, value: UnsafeBufferPointer<UInt8>) {
        fieldCount += 1
        parser.header(name: name, value: value)
    }

    /// The signals of the fields read, with absolute resets and HTTP-date `retry-after` values turned into
    /// seconds after `now` (the response time, seconds since the epoch), and `body` read as in
    /// ``ProviderSignals/init(headers:body:now:)``.
    public func signals(body: ProviderErrorBody? = nil, now: Double) -> ProviderSignals {
        parser.finish(body: body, now: now)
    }
}
