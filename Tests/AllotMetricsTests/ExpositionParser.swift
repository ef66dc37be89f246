/// A strict reader of the text exposition format 0.0.4, written independently of the renderer so
/// that tests check the output against the format's grammar rather than against itself.
struct ExpositionParser {
    struct Sample: Equatable {
        var name: String
        var labels: [String: String]
        var value: Double
    }

    struct Family {
        var name: String
        var help: String
        var type: String
        var samples: [Sample] = []
    }

    struct Failure: Error, CustomStringConvertible {
        let line: Int
        let reason: String
        var description: String { "line \(line): \(reason)" }
    }

    /// Parses a whole exposition, checking: every line ends in `\n`; HELP then TYPE open each family;
    /// a family's samples follow it contiguously and use its name (or `_bucket`/`_sum`/`_count` for
    /// histograms); names and label names are valid; values are Go floats; no series repeats; no
    /// family name repeats; histogram buckets are cumulative and end in `+Inf` equal to `_count`.
    static func parse(_ text: String) throws -> [Family] {
        guard text.isEmpty || text.hasSuffix("\n") else { throw Failure(line: 0, reason: "no final newline") }
        var families: [Family] = []
        var seenSeries = Set<String>()
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false).dropLast()
        var index = 0
        for raw in lines {
            index += 1
            let line = String(raw)
            if line.hasPrefix("# HELP ") {
                let rest = line.dropFirst(7)
                guard let space = rest.firstIndex(of: " ") else {
                    throw Failure(line: index, reason: "HELP without text")
                }
                let name = String(rest[..<space])
                guard isMetricName(name) else { throw Failure(line: index, reason: "bad name \(name)") }
                guard !families.contains(where: { $0.name == name }) else {
                    throw Failure(line: index, reason: "family \(name) appears twice")
                }
                let help = try unescape(rest[rest.index(after: space)...], quotes: false, line: index)
                families.append(Family(name: name, help: help, type: ""))
            } else if line.hasPrefix("# TYPE ") {
                let parts = line.dropFirst(7).split(separator: " ")
                guard parts.count == 2, var family = families.last, family.name == parts[0], family.type.isEmpty
                else {
                    throw Failure(line: index, reason: "TYPE does not follow its HELP")
                }
                guard ["counter", "gauge", "histogram", "summary", "untyped"].contains(parts[1]) else {
                    throw Failure(line: index, reason: "unknown type \(parts[1])")
                }
                family.type = String(parts[1])
                families[families.count - 1] = family
            } else if line.hasPrefix("#") || line.isEmpty {
                throw Failure(line: index, reason: "unexpected line \(line)")
            } else {
                guard var family = families.last, !family.type.isEmpty else {
                    throw Failure(line: index, reason: "sample before HELP/TYPE")
                }
                let sample = try parseSample(line, line: index)
                let allowed =
                    family.type == "histogram"
                    ? [family.name + "_bucket", family.name + "_sum", family.name + "_count"] : [family.name]
                guard allowed.contains(sample.name) else {
                    throw Failure(line: index, reason: "sample \(sample.name) outside its family \(family.name)")
                }
                let labelText = sample.labels.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
                let key = sample.name + "|" + labelText.joined(separator: ",")
                guard seenSeries.insert(key).inserted else {
                    throw Failure(line: index, reason: "duplicate series \(key)")
                }
                family.samples.append(sample)
                families[families.count - 1] = family
            }
        }
        for family in families where family.type == "histogram" {
            try checkHistogram(family)
        }
        return families
    }

    /// Buckets of each series are cumulative (non-decreasing in `le`), end at `+Inf`, and `+Inf`
    /// equals `_count`.
    private static func checkHistogram(_ family: Family) throws {
        var bySeries: [[String: String]: [(le: Double, count: Double)]] = [:]
        var counts: [[String: String]: Double] = [:]
        for sample in family.samples {
            var labels = sample.labels
            if sample.name.hasSuffix("_bucket") {
                guard let le = labels.removeValue(forKey: "le").flatMap(parseFloat) else {
                    throw Failure(line: 0, reason: "\(family.name): bucket without le")
                }
                bySeries[labels, default: []].append((le, sample.value))
            } else if sample.name.hasSuffix("_count") {
                counts[labels] = sample.value
            }
        }
        for (labels, buckets) in bySeries {
            let sorted = buckets.sorted { $0.le < $1.le }
            guard sorted.last?.le == .infinity else { throw Failure(line: 0, reason: "\(family.name): no +Inf") }
            for (a, b) in zip(sorted, sorted.dropFirst()) where b.count < a.count {
                throw Failure(line: 0, reason: "\(family.name): buckets not cumulative")
            }
            guard counts[labels] == sorted.last?.count else {
                throw Failure(line: 0, reason: "\(family.name): +Inf bucket differs from _count")
            }
        }
    }

    private static func parseSample(_ line: String, line number: Int) throws -> Sample {
        var chars = Substring(line)
        let nameEnd = chars.firstIndex(where: { $0 == "{" || $0 == " " }) ?? chars.endIndex
        let name = String(chars[..<nameEnd])
        guard isMetricName(name) else { throw Failure(line: number, reason: "bad sample name \(name)") }
        chars = chars[nameEnd...]
        var labels: [String: String] = [:]
        if chars.first == "{" {
            chars = chars.dropFirst()
            while chars.first != "}" {
                guard let equals = chars.firstIndex(of: "=") else {
                    throw Failure(line: number, reason: "label without =")
                }
                let labelName = String(chars[..<equals])
                guard isLabelName(labelName) else {
                    throw Failure(line: number, reason: "bad label name \(labelName)")
                }
                chars = chars[chars.index(after: equals)...]
                guard chars.first == "\"" else { throw Failure(line: number, reason: "unquoted label value") }
                chars = chars.dropFirst()
                var raw = ""
                while true {
                    guard let c = chars.first else {
                        throw Failure(line: number, reason: "unterminated label value")
                    }
                    chars = chars.dropFirst()
                    if c == "\"" { break }
                    if c == "\\" {
                        guard let next = chars.first else { throw Failure(line: number, reason: "dangling escape") }
                        chars = chars.dropFirst()
                        raw.append("\\")
                        raw.append(next)
                    } else {
                        raw.append(c)
                    }
                }
                guard labels[labelName] == nil else {
                    throw Failure(line: number, reason: "label \(labelName) repeated")
                }
                labels[labelName] = try unescape(Substring(raw), quotes: true, line: number)
                if chars.first == "," { chars = chars.dropFirst() }
            }
            chars = chars.dropFirst()
        }
        guard chars.first == " " else { throw Failure(line: number, reason: "no space before value") }
        let valueText = String(chars.dropFirst())
        guard let value = parseFloat(valueText) else { throw Failure(line: number, reason: "bad value \(valueText)") }
        return Sample(name: name, labels: labels, value: value)
    }

    static func parseFloat(_ text: String) -> Double? {
        switch text {
        case "+Inf": return .infinity
        case "-Inf": return -.infinity
        case "NaN": return .nan
        default:
            guard !text.isEmpty, text.allSatisfy({ "0123456789.eE+-".contains($0) }) else { return nil }
            return Double(text)
        }
    }

    private static func unescape(_ text: Substring, quotes: Bool, line: Int) throws -> String {
        var out = ""
        var iterator = text.makeIterator()
        while let c = iterator.next() {
            if c == "\n" { throw Failure(line: line, reason: "raw newline") }
            if quotes && c == "\"" { throw Failure(line: line, reason: "raw quote") }
            guard c == "\\" else {
                out.append(c)
                continue
            }
            switch iterator.next() {
            case "\\": out.append("\\")
            case "n": out.append("\n")
            case "\"" where quotes: out.append("\"")
            default: throw Failure(line: line, reason: "bad escape")
            }
        }
        return out
    }

    private static func isMetricName(_ name: String) -> Bool {
        guard let first = name.first, first.isASCII, first.isLetter || first == "_" || first == ":" else {
            return false
        }
        return name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == ":") }
    }

    private static func isLabelName(_ name: String) -> Bool {
        guard let first = name.first, first.isASCII, first.isLetter || first == "_" else { return false }
        return name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }
    }
}
