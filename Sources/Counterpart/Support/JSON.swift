/// A JSON value with objects that keep their keys in order, so answers read the way the
/// contract shows them.
enum JSON: Equatable, Sendable {
    case string(String)
    case number(Int64)
    case unsigned(UInt64)
    case bool(Bool)
    case null
    case array([JSON])
    case object([(String, JSON)])

    static func == (a: JSON, b: JSON) -> Bool { a.serialized == b.serialized }

    /// Compact JSON text.
    var serialized: String {
        var out = ""
        write(to: &out)
        return out
    }

    var bytes: [UInt8] { Array(serialized.utf8) }

    private func write(to out: inout String) {
        switch self {
        case .string(let text): JSON.quote(text, into: &out)
        case .number(let n): out += String(n)
        case .unsigned(let n): out += String(n)
        case .bool(let b): out += b ? "true" : "false"
        case .null: out += "null"
        case .array(let items):
            out += "["
            for (index, item) in items.enumerated() {
                if index > 0 { out += "," }
                item.write(to: &out)
            }
            out += "]"
        case .object(let members):
            out += "{"
            for (index, (key, value)) in members.enumerated() {
                if index > 0 { out += "," }
                JSON.quote(key, into: &out)
                out += ":"
                value.write(to: &out)
            }
            out += "}"
        }
    }

    private static func quote(_ text: String, into out: inout String) {
        out += "\""
        // Most strings (paths, header names and values) need no escape: one append, not one
        // per scalar. 0xE2 leads U+2028 and U+2029 (and others): those take the slow path.
        if !text.utf8.contains(where: { $0 < 0x20 || $0 == 0x22 || $0 == 0x5C || $0 == 0x7F || $0 == 0xE2 }) {
            out += text
            out += "\""
            return
        }
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20 || scalar.value == 0x7F || (0x2028...0x2029).contains(scalar.value):
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default:
                out.unicodeScalars.append(scalar)
            }
        }
        out += "\""
    }
}
