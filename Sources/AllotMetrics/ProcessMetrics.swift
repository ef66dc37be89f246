import Glibc

/// The standard `process_*` metrics for Linux, read from `/proc` at render time.
///
/// Names and meanings follow the Prometheus client libraries' process collector, so existing
/// dashboards work: resident and virtual memory in bytes, CPU seconds (user + system), open and
/// maximum file descriptors, and the start time in seconds since the Unix epoch. SPEC section 13
/// bounds RSS at 10,000 tenants; this is how operators watch it. Any file that cannot be read or
/// parsed simply leaves its samples out: a metrics scrape must never take the process down.
public enum ProcessMetrics {
    /// Registers the process collector on `registry`.
    public static func register(on registry: MetricsRegistry) throws(MetricsError) {
        let descriptors = [
            try MetricDescriptor(
                name: "process_cpu_seconds_total", help: "Total user and system CPU time spent in seconds.",
                type: .counter),
            try MetricDescriptor(
                name: "process_resident_memory_bytes", help: "Resident memory size in bytes.", type: .gauge),
            try MetricDescriptor(
                name: "process_virtual_memory_bytes", help: "Virtual memory size in bytes.", type: .gauge),
            try MetricDescriptor(name: "process_open_fds", help: "Number of open file descriptors.", type: .gauge),
            try MetricDescriptor(
                name: "process_max_fds", help: "Maximum number of open file descriptors.", type: .gauge),
            try MetricDescriptor(
                name: "process_start_time_seconds", help: "Start time of the process since unix epoch in seconds.",
                type: .gauge),
        ]
        try registry.registerCollector(descriptors) { read().samples }
    }

    /// Reads the current figures from `/proc/self` (fields that cannot be read are nil).
    public static func read() -> ProcessSample {
        var sample = ProcessSample()
        if let text = ProcFile.read("/proc/self/stat"), let stat = ProcessStat(parsing: text) {
            let ticks = Double(clockTicksPerSecond)
            sample.cpuSeconds = Double(stat.userTicks + stat.systemTicks) / ticks
            sample.virtualMemoryBytes = Double(stat.virtualMemoryBytes)
            sample.residentMemoryBytes = Double(stat.residentPages) * Double(pageSize)
            if let boot = bootTime {
                sample.startTimeSeconds = boot + Double(stat.startTicks) / ticks
            }
        }
        sample.openFileDescriptors = countOpenFileDescriptors()
        if let limits = ProcFile.read("/proc/self/limits") {
            sample.maxFileDescriptors = parseMaxOpenFiles(limits)
        }
        return sample
    }

    private static let clockTicksPerSecond: Int = max(1, sysconf(Int32(_SC_CLK_TCK)))
    private static let pageSize: Int = max(1, sysconf(Int32(_SC_PAGESIZE)))
    /// System boot time (`btime` in `/proc/stat`), constant for the life of the process.
    private static let bootTime: Double? = ProcFile.read("/proc/stat").flatMap(parseBootTime)

    /// The `btime` line of `/proc/stat`: seconds since the epoch at which the system booted.
    public static func parseBootTime(_ text: String) -> Double? {
        for line in text.split(separator: "\n") where line.hasPrefix("btime ") {
            return Double(line.dropFirst(6).trimmingSpaces())
        }
        return nil
    }

    /// The soft limit from the "Max open files" row of `/proc/self/limits` (nil if "unlimited").
    public static func parseMaxOpenFiles(_ text: String) -> Double? {
        for line in text.split(separator: "\n") where line.hasPrefix("Max open files") {
            let fields = line.dropFirst("Max open files".count).split(separator: " ")
            return fields.first.flatMap { Double($0) }
        }
        return nil
    }

    /// Entries of `/proc/self/fd`, less the descriptor `opendir` itself holds while counting.
    static func countOpenFileDescriptors() -> Double? {
        guard let directory = opendir("/proc/self/fd") else { return nil }
        defer { closedir(directory) }
        var count = 0
        while let entry = readdir(directory) {
            let isDot = withUnsafeBytes(of: entry.pointee.d_name) { $0.first == UInt8(ascii: ".") }
            if !isDot { count += 1 }
        }
        return Double(max(0, count - 1))
    }
}

/// One reading of the process figures; nil where `/proc` could not tell.
public struct ProcessSample: Sendable, Equatable {
    public var cpuSeconds: Double?
    public var residentMemoryBytes: Double?
    public var virtualMemoryBytes: Double?
    public var openFileDescriptors: Double?
    public var maxFileDescriptors: Double?
    public var startTimeSeconds: Double?

    public init() {}

    var samples: [CollectedSample] {
        let pairs: [(String, Double?)] = [
            ("process_cpu_seconds_total", cpuSeconds),
            ("process_resident_memory_bytes", residentMemoryBytes),
            ("process_virtual_memory_bytes", virtualMemoryBytes),
            ("process_open_fds", openFileDescriptors),
            ("process_max_fds", maxFileDescriptors),
            ("process_start_time_seconds", startTimeSeconds),
        ]
        return pairs.compactMap { name, value in value.map { CollectedSample(family: name, value: $0) } }
    }
}

/// The fields we need from `/proc/[pid]/stat` (proc(5)).
public struct ProcessStat: Sendable, Equatable {
    /// Field 14, `utime`, in clock ticks.
    public var userTicks: UInt64
    /// Field 15, `stime`, in clock ticks.
    public var systemTicks: UInt64
    /// Field 22, `starttime`, clock ticks after boot.
    public var startTicks: UInt64
    /// Field 23, `vsize`, bytes.
    public var virtualMemoryBytes: UInt64
    /// Field 24, `rss`, pages.
    public var residentPages: UInt64

    /// Parses the one-line contents of `/proc/[pid]/stat`; nil if it does not have the shape.
    ///
    /// Field 2 is the command name in parentheses and may itself contain spaces and `)`, so the
    /// fields are counted from the *last* `)` in the line.
    public init?(parsing text: String) {
        guard let close = text.utf8.lastIndex(of: UInt8(ascii: ")")) else { return nil }
        // After ") " comes field 3 (state); field n is at index n - 3.
        let rest = text[text.index(after: close)...].split(separator: " ", omittingEmptySubsequences: true)
        func field(_ number: Int) -> UInt64? {
            let index = number - 3
            guard index >= 0, index < rest.count else { return nil }
            return UInt64(rest[index].trimmingSpaces())
        }
        guard let user = field(14), let system = field(15), let start = field(22), let vsize = field(23),
            let rss = field(24)
        else { return nil }
        userTicks = user
        systemTicks = system
        startTicks = start
        virtualMemoryBytes = vsize
        residentPages = rss
    }
}

/// Reading small pseudo-files whose `stat` size is 0, so they are read until end of file.
enum ProcFile {
    /// The file's contents as UTF-8 (invalid bytes repaired), or nil if it cannot be read.
    /// Reads at most `limit` bytes: these files are small, and a runaway read must stay bounded.
    static func read(_ path: String, limit: Int = 1 << 20) -> String? {
        var fd: Int32
        repeat {
            fd = open(path, O_RDONLY | O_CLOEXEC)
        } while fd < 0 && errno == EINTR
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 4096)
        while bytes.count < limit {
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n > 0 {
                bytes.append(contentsOf: chunk[0..<n])
            } else if n == 0 {
                break
            } else if errno != EINTR {
                return nil
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

extension Substring {
    /// Drops leading and trailing spaces, tabs and newlines (no Foundation here).
    fileprivate func trimmingSpaces() -> Substring {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\n" }
        guard let first = firstIndex(where: { !isSpace($0) }) else { return self[endIndex...] }
        let last = lastIndex(where: { !isSpace($0) })!
        return self[first...last]
    }
}
