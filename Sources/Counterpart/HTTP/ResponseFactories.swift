/// The responses every endpoint builds: a JSON error, JSON, an HTML page, 405.
extension Response {
    /// `{"error": "<sentence>"}` with the given status.
    static func error(_ status: Int, _ message: String, headers: [HTTPField] = []) -> Response {
        json(status, .object([("error", .string(message))]), headers: headers)
    }

    /// `value` and a newline, as `contentType` (JSON, or a JSON-based type such as
    /// `application/problem+json`).
    static func json(_ status: Int, _ value: JSON, headers: [HTTPField] = [], contentType: String = "application/json") -> Response {
        Response(status: status, headers: headers + [HTTPField(name: "Content-Type", value: contentType)],
                 body: .bytes(value.bytes + [0x0A]))
    }

    /// JSON written before (`JSONWriter`), with the same end of line.
    static func json(_ status: Int, written: [UInt8]) -> Response {
        Response(status: status, headers: [HTTPField(name: "Content-Type", value: "application/json")], body: .bytes(written + [0x0A]))
    }

    static func html(_ status: Int, _ page: String, headers: [HTTPField] = []) -> Response {
        Response(status: status, headers: headers + [HTTPField(name: "Content-Type", value: "text/html; charset=utf-8")],
                 body: .bytes(Array(page.utf8)))
    }

    static func methodNotAllowed(_ method: String, allowed: [String], on what: String) -> Response {
        let allow = allowed.joined(separator: ", ")
        var message = "\(method) is not allowed on \(what); use \(allow)"
        if allowed.contains(method.uppercased()) {
            message += " (method names are case-sensitive: \(method.uppercased()), not \(method))"
        }
        return error(405, message, headers: [HTTPField(name: "Allow", value: allow)])
    }

    /// Text made safe for HTML.
    static func escapeHTML(_ text: String) -> String {
        var out = ""
        for character in text {
            if let escaped = htmlEscapes[character] { out += escaped } else { out.append(character) }
        }
        return out
    }

    private static let htmlEscapes: [Character: String] = ["&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;", "'": "&#39;"]
}
