/// "Did you mean …?" for mistyped options and commands.
enum Suggestion {
    /// The candidate closest to `word` by optimal-string-alignment distance (edits: insert, delete,
    /// substitute, swap two adjacent characters), if it is close enough to be a plausible typo:
    /// at most 1 edit for names up to 5 characters, 2 up to 8, 3 beyond. Ties go to the earlier
    /// candidate (declaration order). Words longer than 64 characters get no suggestion.
    static func nearest(to word: String, in candidates: [String]) -> String? {
        let word = Array(word.lowercased())
        guard !word.isEmpty, word.count <= 64 else { return nil }
        var best: (candidate: String, distance: Int)?
        for candidate in candidates {
            let target = Array(candidate.lowercased())
            let threshold = target.count <= 5 ? 1 : target.count <= 8 ? 2 : 3
            guard abs(target.count - word.count) <= threshold else { continue }
            let distance = editDistance(word, target)
            if distance <= threshold, distance < (best?.distance ?? .max) {
                best = (candidate, distance)
            }
        }
        return best?.candidate
    }

    /// Optimal string alignment distance (restricted Damerau–Levenshtein).
    static func editDistance(_ a: [Character], _ b: [Character]) -> Int {
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var previousPrevious = [Int](repeating: 0, count: b.count + 1)
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    current[j] = min(current[j], previousPrevious[j - 2] + 1)
                }
            }
            (previousPrevious, previous, current) = (previous, current, previousPrevious)
        }
        return previous[b.count]
    }
}
