/// Percent-encoding of URL components (RFC 3986 §2.1), decoded once and strictly.
public enum PercentEncoding {
    /// The bytes `text` encodes, or nil when a `%` is not followed by two hex digits.
    /// With `plusAsSpace`, `+` is a space (form-urlencoded query values).
    public static func decodeBytes(_ text: String, plusAsSpace: Bool = false) -> [UInt8]? {
        let bytes = Array(text.utf8)
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == 0x25 {
                guard index + 2 < bytes.count, let high = hexValue(bytes[index + 1]), let low = hexValue(bytes[index + 2]) else {
                    return nil
                }
                out.append(high << 4 | low)
                index += 3
            } else {
                out.append(plusAsSpace && byte == 0x2B ? 0x20 : byte)
                index += 1
            }
        }
        return out
    }

    /// The text `text` encodes, or nil when it is malformed or not UTF-8.
    public static func decode(_ text: String, plusAsSpace: Bool = false) -> String? {
        decodeBytes(text, plusAsSpace: plusAsSpace).flatMap { String(validating: $0, as: UTF8.self) }
    }

    /// `text` with every byte but RFC 3986 unreserved characters percent-encoded; `/` is
    /// kept too when `keepingSlashes`.
    public static func encode(_ text: String, keepingSlashes: Bool = false) -> String {
        var out = ""
        for byte in text.utf8 {
            switch byte {
            case 0x30...0x39, 0x41...0x5A, 0x61...0x7A, 0x2D, 0x2E, 0x5F, 0x7E:
                out.unicodeScalars.append(Unicode.Scalar(byte))
            case 0x2F where keepingSlashes:
                out += "/"
            default:
                out += "%"
                out.unicodeScalars.append(hexDigits[Int(byte >> 4)])
                out.unicodeScalars.append(hexDigits[Int(byte & 0xF)])
            }
        }
        return out
    }

    static let hexDigits: [Unicode.Scalar] = Array("0123456789ABCDEF".unicodeScalars)

    static func hexValue(_ b: UInt8) -> UInt8? {
        switch b {
        case 0x30...0x39: return b - 0x30
        case 0x41...0x46: return b - 0x41 + 10
        case 0x61...0x66: return b - 0x61 + 10
        default: return nil
        }
    }
}
