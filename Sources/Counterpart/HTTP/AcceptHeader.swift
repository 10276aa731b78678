import HTTPTransfer

/// What a client prefers, from its `Accept` header (RFC 9110 §12.5.1).
struct AcceptHeader {
    private struct Range {
        var type: Substring
        var subtype: Substring
        var quality: Double
    }

    private var ranges: [Range] = []

    init(_ value: String?) {
        guard let value else { return }
        for member in value.split(separator: ",") {
            let pieces = member.split(separator: ";", omittingEmptySubsequences: false)
            let mediaRange = ASCII.trimmed(pieces[0]).lowercased()
            let type = mediaRange.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
            guard type.count == 2, !type[0].isEmpty, !type[1].isEmpty else { continue }
            var quality = 1.0
            for parameter in pieces.dropFirst() {
                let pair = parameter.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
                if pair.count == 2, ASCII.trimmed(pair[0]).lowercased() == "q", let q = Double(ASCII.trimmed(pair[1])), q.isFinite {
                    quality = max(0, min(1, q))
                }
            }
            ranges.append(Range(type: type[0], subtype: type[1], quality: quality))
        }
    }

    /// The quality the client gives `mediaType` (`type/subtype`), from the most specific
    /// matching range, and how specific that range is (2 exact, 1 `type/*`, 0 `*/*`).
    /// Without an Accept header everything is acceptable, equally.
    private func preference(for type: Substring, _ subtype: Substring) -> (quality: Double, specificity: Int) {
        guard !ranges.isEmpty else { return (1, 0) }
        if let exact = ranges.first(where: { $0.type == type && $0.subtype == subtype }) { return (exact.quality, 2) }
        if let typeWide = ranges.first(where: { $0.type == type && $0.subtype == "*" }) { return (typeWide.quality, 1) }
        if let any = ranges.first(where: { $0.type == "*" && $0.subtype == "*" }) { return (any.quality, 0) }
        return (0, 0)
    }

    /// Whether JSON is preferred to HTML: a higher quality, or the same quality from a
    /// more specific range (`Accept: application/json, text/plain, */*` asks for JSON).
    var prefersJSON: Bool { compareJSONToHTML() > 0 }
    /// Whether HTML is preferred to JSON (a browser).
    var prefersHTML: Bool { compareJSONToHTML() < 0 }

    private func compareJSONToHTML() -> Int {
        let json = preference(for: "application", "json")
        let html = preference(for: "text", "html")
        if json.quality != html.quality { return json.quality > html.quality ? 1 : -1 }
        return json.specificity - html.specificity
    }
}
