/// Realistic telemetry batches for the ingest benchmark: a mix of providers with their real
/// rate-limit headers (OpenAI, Anthropic, Azure, Google error bodies), quota errors with
/// `retry-after`, overloads, locally denied and queued requests, and outcomes both reported and
/// left for the server to classify. Deterministic for a seed.
struct TelemetryLoadGenerator {
    var tenants: Int
    var gateways: Int
    private var state: UInt64

    init(seed: UInt64, tenants: Int = 1_000, gateways: Int = 8) {
        self.state = seed
        self.tenants = max(1, tenants)
        self.gateways = max(1, gateways)
    }

    /// SplitMix64.
    private mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    private mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }

    private static let upstreams: [(name: String, model: String, family: Int)] = [
        ("openai/gpt-4o", "gpt-4o-2024-08-06", 0),
        ("openai/gpt-4o-mini", "gpt-4o-mini-2024-07-18", 0),
        ("anthropic/claude-sonnet-4", "claude-sonnet-4-20250514", 1),
        ("azure/gpt-4o-eu", "gpt-4o-2024-08-06", 2),
        ("google/gemini-2.0-flash", "gemini-2.0-flash-001", 3),
    ]
    private static let taskClasses = ["realtime", "interactive", "interactive", "batch", "background"]

    /// A JSON array body of `count` events with timestamps from `startMs` on (one per millisecond).
    mutating func batch(count: Int, startMs: Int64, batchNumber: Int) -> [UInt8] {
        var text = "["
        text.reserveCapacity(count * 700)
        for index in 0..<count {
            if index > 0 { text += "," }
            appendEvent(to: &text, tsMs: startMs + Int64(index), task: "b\(batchNumber)-\(index / 4)")
        }
        text += "]"
        return Array(text.utf8)
    }

    private mutating func appendEvent(to text: inout String, tsMs: Int64, task: String) {
        let upstream = Self.upstreams[below(Self.upstreams.count)]
        let tenant = "tenant-\(below(tenants))"
        let gateway = "gw-\(below(gateways))"
        let taskClass = Self.taskClasses[below(Self.taskClasses.count)]
        let prompt = 200 + below(6_000)
        let completion = 20 + below(1_200)
        let latency = Double(300 + below(9_000)) + Double(below(1_000)) / 1_000
        let roll = below(100)
        text += #"{"ts":\#(tsMs),"gateway":"\#(gateway)","tenant":"\#(tenant)","upstream":"\#(upstream.name)","#
        text += #""task_class":"\#(taskClass)","task_id":"\#(task)","model_version":"\#(upstream.model)","#
        text += #""estimated_tokens":\#(prompt + completion),"retry":\#(roll >= 95 ? 1 : 0)"#
        switch roll {
        case 0..<2:  // denied locally: no upstream call at all
            text += #","outcome":"denied_local"}"#
            return
        case 2..<4:
            text += #","outcome":"queued","queue_ms":\#(below(2_000))}"#
            return
        default:
            break
        }
        let status: Int
        switch roll {
        case 4..<9: status = 429
        case 9..<10: status = upstream.family == 1 ? 529 : 503
        default: status = 200
        }
        if roll % 3 != 0 {  // most gateways say the outcome; the rest leave it to the classifier
            let outcome = status == 200 ? "ok" : status == 429 ? "quota_exhausted" : "overloaded"
            text += #","outcome":"\#(outcome)""#
        }
        text += #","status":\#(status),"latency_ms":\#(latency),"queue_ms":\#(below(50))"#
        if status == 200 { text += #","prompt_tokens":\#(prompt),"completion_tokens":\#(completion)"# }
        if status == 429 { text += #","error_type":"rate_limit_exceeded""# }
        let remainingRequests = status == 429 ? 0 : below(10_000)
        switch upstream.family {
        case 0:
            text += #","headers":{"x-ratelimit-limit-requests":"10000","x-ratelimit-limit-tokens":"2000000","#
            text +=
                #""x-ratelimit-remaining-requests":"\#(remainingRequests)","x-ratelimit-remaining-tokens":"\#(below(2_000_000))","#
            text +=
                #""x-ratelimit-reset-requests":"\#(below(60))ms","x-ratelimit-reset-tokens":"\#(below(6))m\#(below(60)).\#(below(100))s""#
            if status == 429 { text += #","retry-after":"\#(1 + below(20))""# }
            text += "}}"
        case 1:
            text += #","headers":{"anthropic-ratelimit-requests-limit":"4000","#
            text += #""anthropic-ratelimit-requests-remaining":"\#(remainingRequests)","#
            text += #""anthropic-ratelimit-requests-reset":"2026-11-22T03:00:\#(10 + below(50))Z","#
            text +=
                #""anthropic-ratelimit-tokens-limit":"400000","anthropic-ratelimit-tokens-remaining":"\#(below(400_000))","#
            text += #""anthropic-ratelimit-tokens-reset":"2026-11-22T03:00:\#(10 + below(50))Z""#
            if status == 429 { text += #","retry-after":"\#(1 + below(20))""# }
            text += "}}"
        case 2:
            text += #","headers":{"x-ratelimit-limit-tokens":"-1","x-ratelimit-remaining-tokens":"-1","#
            text += #""x-ratelimit-remaining-requests":"\#(remainingRequests)","#
            text += #""azure-openai-deployment-utilization":"\#(below(100)).\#(below(10))%""#
            if status == 429 { text += #","retry-after-ms":"\#(below(40_000))""# }
            text += "}}"
        default:
            if status == 429 {
                text += #","error_body":{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"#
                text += #""type.googleapis.com/google.rpc.RetryInfo","retryDelay":"\#(1 + below(30))s"}]}}}"#
            } else {
                text += "}"
            }
        }
    }
}
