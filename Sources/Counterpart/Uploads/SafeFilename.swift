/// Turns the file name a client sent into a name that is safe to store: the last path
/// component (after `/` or `\`), without control or invisible formatting characters
/// (right-to-left overrides included), without leading dots or spaces, at most
/// `maxBytes` of UTF-8 (an extension of up to 32 bytes kept), and never empty. A name
/// that is taken gets a `-N` suffix, which may add a few bytes (`StoredNames`).
enum SafeFilename {
    static let maxBytes = 200
    static let fallback = "upload"

    static func make(from clientName: String) -> String {
        let base = clientName.split(whereSeparator: { $0 == "/" || $0 == "\\" }).last.map(String.init) ?? ""
        var cleaned = String.UnicodeScalarView()
        for scalar in base.unicodeScalars {
            switch scalar.properties.generalCategory {
            case .control, .format, .lineSeparator, .paragraphSeparator, .surrogate, .privateUse, .unassigned:
                continue
            default:
                cleaned.append(scalar)
            }
        }
        var name = Substring(String(cleaned))
        while let first = name.first, first == "." || first.isWhitespace { name.removeFirst() }
        while let last = name.last, last.isWhitespace { name.removeLast() }
        let trimmed = truncated(String(name))
        return trimmed.isEmpty ? fallback : trimmed
    }

    /// `name` with `-suffix` before its extension: `a.png` → `a-1.png`.
    static func variant(of name: String, suffix: String) -> String {
        let (stem, ext) = split(name)
        return "\(stem)-\(suffix)\(ext)"
    }

    /// What every variant of `name` starts with: `a.png` → `a-`.
    static func variantPrefix(of name: String) -> String { split(name).stem + "-" }

    private static func split(_ name: String) -> (stem: String, ext: String) {
        guard let dot = name.lastIndex(of: "."), dot != name.startIndex else { return (name, "") }
        return (String(name[..<dot]), String(name[dot...]))
    }

    private static func truncated(_ name: String) -> String {
        guard name.utf8.count > maxBytes else { return name }
        var (stem, ext) = split(name)
        if ext.utf8.count > 32 { ext = "" }
        while !stem.isEmpty, stem.utf8.count + ext.utf8.count > maxBytes { stem.removeLast() }
        return stem + ext
    }
}
