/// One problem found while loading policy files: which file, where in it (a JSON path such as
/// `$.tiers.premium.floor.rpm`), what kind of problem and a message a person can act on.
public struct PolicyIssue: Sendable, Hashable, CustomStringConvertible {
    /// The kind of problem; stable strings for logs, metrics and tests.
    public enum Code: String, Sendable, Hashable, CaseIterable {
        case invalidJSON = "invalid_json"
        case unknownField = "unknown_field"
        case wrongType = "wrong_type"
        case negative
        case outOfRange = "out_of_range"
        case floorAboveCeiling = "floor_above_ceiling"
        case guardMinAboveGuardMax = "guard_min_above_guard_max"
        case unknownTier = "unknown_tier"
        case unknownUpstream = "unknown_upstream"
        case duplicate
        case missingField = "missing_field"
        case invalidValue = "invalid_value"
    }

    /// The policy file's name, e.g. `tiers.json`.
    public var file: String
    /// The JSON path of the offending value, e.g. `$.tiers.premium.floor.rpm`.
    public var path: String
    /// The kind of problem.
    public var code: Code
    /// What is wrong, and how to fix it when that is known (e.g. the nearest known field name).
    public var message: String

    public init(file: String, path: String, code: Code, message: String) {
        self.file = file
        self.path = path
        self.code = code
        self.message = message
    }

    /// `file: path: message`.
    public var description: String { "\(file): \(path): \(message)" }
}

/// Policy files that failed validation: every issue found, in file and path order.
///
/// The server keeps the previous policy in force and shows these in `/readyz`, `/v1/alerts`, the
/// logs and a metric (SPEC 10).
public struct PolicyError: Error, Sendable, Hashable, CustomStringConvertible {
    /// All issues; never empty.
    public var issues: [PolicyIssue]

    public init(issues: [PolicyIssue]) {
        self.issues = issues
    }

    /// One issue per line.
    public var description: String { issues.map(\.description).joined(separator: "\n") }
}

/// One policy file's name and bytes (the server reads the directory; the core never does I/O).
public struct PolicyFile: Sendable, Hashable {
    /// The file name, e.g. `tiers.json`; files are combined in name order.
    public var name: String
    /// The file's bytes (UTF-8 JSON).
    public var bytes: [UInt8]

    public init(name: String, bytes: [UInt8]) {
        self.name = name
        self.bytes = bytes
    }
}

/// Suggests the known name closest to a misspelt one (Levenshtein distance), for error messages.
public enum NameSuggestion {
    /// The closest of `candidates` to `name`, if it is close enough to be a plausible typo.
    public static func closest(to name: String, among candidates: [String]) -> String? {
        let lowered = name.lowercased()
        var best: (name: String, distance: Int)?
        for candidate in candidates {
            let distance = editDistance(Array(lowered.utf8), Array(candidate.lowercased().utf8))
            if best == nil || distance < best!.distance { best = (candidate, distance) }
        }
        guard let best else { return nil }
        let limit = max(2, min(name.count, best.name.count) / 3)
        return best.distance <= limit ? best.name : nil
    }

    /// `unknown field "x"` plus `; did you mean "y"?` when there is a close match, else the known names when
    /// there are at most 12. The one wording for a name not found, in policy files and operator requests alike.
    public static func unknownMessage(_ what: String, _ name: String, known: [String], listUpTo: Int = 12) -> String {
        var message = "unknown \(what) \"\(name)\""
        if let suggestion = closest(to: name, among: known) {
            message += "; did you mean \"\(suggestion)\"?"
        } else if known.count <= listUpTo {
            message += "; expected one of " + known.map { "\"\($0)\"" }.joined(separator: ", ")
        }
        return message
    }

    static func editDistance(_ a: [UInt8], _ b: [UInt8]) -> Int {
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                let substitution = previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)
                current[j] = min(previous[j] + 1, current[j - 1] + 1, substitution)
            }
            swap(&previous, &current)
        }
        return previous[b.count]
    }
}

/// A JSON path under construction, formatted like `$.tiers.premium.floor.rpm`; keys that are not
/// plain identifiers are bracketed: `$.upstreams["openai/gpt-4o"].price`.
struct JSONPath: Hashable, Sendable, CustomStringConvertible {
    private(set) var segments: [Segment] = []

    enum Segment: Hashable, Sendable {
        case key(String)
        case index(Int)
    }

    static let root = JSONPath()

    func key(_ name: String) -> JSONPath {
        var copy = self
        copy.segments.append(.key(name))
        return copy
    }

    func index(_ position: Int) -> JSONPath {
        var copy = self
        copy.segments.append(.index(position))
        return copy
    }

    /// This path and each shorter prefix, longest first.
    var prefixes: [JSONPath] {
        (0...segments.count).reversed().map { JSONPath(segments: Array(segments.prefix($0))) }
    }

    var description: String {
        var text = "$"
        for segment in segments {
            switch segment {
            case .index(let position):
                text += "[\(position)]"
            case .key(let name):
                if JSONPath.isIdentifier(name) {
                    text += "." + name
                } else {
                    text += "[\"" + name.replacingQuotes() + "\"]"
                }
            }
        }
        return text
    }

    private static func isIdentifier(_ name: String) -> Bool {
        guard let first = name.utf8.first, !(first >= 0x30 && first <= 0x39) else { return false }
        return name.utf8.allSatisfy { byte in
            (byte >= 0x61 && byte <= 0x7A) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x30 && byte <= 0x39)
                || byte == 0x5F || byte == 0x2D
        }
    }
}

extension String {
    fileprivate func replacingQuotes() -> String {
        var result = ""
        for character in self {
            switch character {
            case "\"": result += "\\\""
            case "\\": result += "\\\\"
            default: result.append(character)
            }
        }
        return result
    }
}
