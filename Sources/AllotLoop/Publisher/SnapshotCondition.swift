/// A request's `If-None-Match` (RFC 9110 section 13.1.2) as the snapshot endpoint reads it: the
/// snapshot's ETag is its version, so the entity tags a gateway sends are the versions it holds.
///
/// Accepted forms, for gateways written in a hurry: `"42"` (the standard), `W/"42"` (weak
/// comparison is what If-None-Match uses anyway), `42` (unquoted), lists (`"41", "42"`), and `*`
/// (any current representation). Tags that are not versions are ignored: they match nothing.
public struct SnapshotCondition: Sendable, Equatable {
    /// `*`: matches whatever version is current.
    public var matchesAny: Bool
    /// The versions named.
    public var versions: [Int64]

    public init(matchesAny: Bool = false, versions: [Int64] = []) {
        self.matchesAny = matchesAny
        self.versions = versions
    }

    /// No condition (no header): never matches.
    public static let none = SnapshotCondition()

    /// Parses an `If-None-Match` value; nil or empty gives ``none``.
    public static func parse(_ header: String?) -> SnapshotCondition {
        guard let header else { return .none }
        var condition = SnapshotCondition()
        for raw in header.split(separator: ",") {
            var tag = raw.trimmingWhitespace()
            if tag == "*" {
                condition.matchesAny = true
                continue
            }
            if tag.hasPrefix("W/") || tag.hasPrefix("w/") { tag = tag.dropFirst(2) }
            if tag.count >= 2, tag.first == "\"", tag.last == "\"" { tag = tag.dropFirst().dropLast() }
            guard !tag.isEmpty, tag.count <= 19, tag.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }),
                let version = Int64(tag)
            else { continue }
            condition.versions.append(version)
        }
        return condition
    }

    /// Whether a gateway holding these tags already has `version` (→ 304).
    public func matches(_ version: Int64) -> Bool {
        matchesAny || versions.contains(version)
    }

    /// The version the gateway says it enforces: the newest it names (nil for `*` alone or none).
    public var enforcedVersion: Int64? { versions.max() }
}

extension Substring {
    /// Without leading and trailing spaces and tabs (HTTP's optional whitespace).
    fileprivate func trimmingWhitespace() -> Substring {
        var result = self
        while let first = result.first, first == " " || first == "\t" { result = result.dropFirst() }
        while let last = result.last, last == " " || last == "\t" { result = result.dropLast() }
        return result
    }
}
