/// `Content-Disposition` of a `multipart/form-data` part (RFC 7578 §4.2) and of a
/// download (RFC 6266).
public struct ContentDisposition: Equatable, Sendable {
    /// Lowercased disposition type: `form-data`, `attachment`, `inline`.
    public var type: String
    public var parameters: [ParameterizedValue.Parameter]

    public init(parsing text: String) throws(HeaderValueError) {
        let parsed = try ParameterizedValue(parsing: text)
        guard parsed.value.utf8.allSatisfy(ASCII.isTokenChar) else {
            throw HeaderValueError("\"\(parsed.value)\" is not a disposition type")
        }
        type = ASCII.lowercased(parsed.value)
        parameters = parsed.parameters
    }

    public subscript(parameter name: String) -> String? {
        ParameterizedValue.value(of: ASCII.lowercased(name), in: parameters)
    }

    /// The `name` parameter.
    public var name: String? { ParameterizedValue.value(of: "name", in: parameters) }

    /// Whether a `filename` or `filename*` parameter is present, even empty: such a
    /// part is a file (RFC 7578 §4.2).
    public var hasFilename: Bool { parameters.contains { $0.name == "filename" || $0.name == "filename*" } }

    /// The file name as the client sent it: a valid, non-empty `filename*` (RFC 8187) wins
    /// over `filename`; an invalid or empty one (`filename*=UTF-8''`) gives way to
    /// `filename`, as Werkzeug and python-multipart read it. Never percent-decoded otherwise
    /// (HTML Standard: browsers write `%22`, `%0D`, `%0A` for `"`, CR, LF and mean them
    /// literally).
    public var filename: String? {
        let plain = ParameterizedValue.value(of: "filename", in: parameters)
        if let extended = ParameterizedValue.value(of: "filename*", in: parameters),
           let decoded = ExtendedValue.decode(extended), !decoded.isEmpty || plain == nil {
            return decoded
        }
        return plain
    }

    /// `attachment; filename="…"` for a download, with `filename*=UTF-8''…` when the name
    /// is not plain printable ASCII (RFC 6266 §4.3): the plain `filename` then carries an
    /// ASCII stand-in for old clients.
    public static func attachment(filename: String) -> String {
        let isPlain = filename.unicodeScalars.allSatisfy { $0.value >= 0x20 && $0.value < 0x7F }
        var fallback = ""
        for scalar in filename.unicodeScalars {
            switch scalar.value {
            case 0x22, 0x5C: fallback += "\\"; fallback.unicodeScalars.append(scalar)
            case 0x20..<0x7F: fallback.unicodeScalars.append(scalar)
            default: fallback += "_"
            }
        }
        var header = "attachment; filename=\"\(fallback)\""
        if !isPlain { header += "; filename*=\(ExtendedValue.encode(filename))" }
        return header
    }
}
