/// What a client prefers, from its `Accept` header (RFC 9110 §12.5.1).
struct AcceptHeader {
    private var ranges: [(type: String, subtype: String, quality: Double)] = []

    init(_ value: String?) {
        guard let value else { return }
        for member in value.split(separator: ",") {
            let pieces = member.split(separator: ";").map { $0.trimmingCharacters(in: " \t") }
            let type = pieces[0].lowercased().split(separator: "/", maxSplits: 1)
            guard type.count == 2 else { continue }
            var quality = 1.0
            for parameter in pieces.dropFirst() {
                let pair = parameter.split(separator: "=", maxSplits: 1)
                if pair.count == 2, pair[0].trimmingCharacters(in: " ").lowercased() == "q",
                   let q = Double(pair[1].trimmingCharacters(in: " ")) {
                    quality = max(0, min(1, q))
                }
            }
            ranges.append((String(type[0]), String(type[1]), quality))
        }
    }

    /// The quality the client gives `mediaType` (`type/subtype`): from the most specific
    /// matching range; 1 when there is no Accept header.
    func quality(of mediaType: String) -> Double {
        guard !ranges.isEmpty else { return 1 }
        let parts = mediaType.split(separator: "/", maxSplits: 1).map(String.init)
        if let exact = ranges.first(where: { $0.type == parts[0] && $0.subtype == parts[1] }) { return exact.quality }
        if let typeWide = ranges.first(where: { $0.type == parts[0] && $0.subtype == "*" }) { return typeWide.quality }
        if let any = ranges.first(where: { $0.type == "*" && $0.subtype == "*" }) { return any.quality }
        return 0
    }

    /// Whether `text/html` is preferred to `application/json` (a browser).
    var prefersHTML: Bool { quality(of: "text/html") > quality(of: "application/json") }
    /// Whether `application/json` is preferred to `text/html`.
    var prefersJSON: Bool { quality(of: "application/json") > quality(of: "text/html") }
}

extension Substring {
    func trimmingCharacters(in set: String) -> String {
        String(drop { set.contains($0) }.reversed().drop { set.contains($0) }.reversed())
    }
}
