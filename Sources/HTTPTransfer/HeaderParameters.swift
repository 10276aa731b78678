/// A header value of the shape `value *( OWS ";" OWS name=value )`, as used by
/// `Content-Type` (RFC 9110 §8.3.1) and `Content-Disposition` (RFC 6266, RFC 7578 §4.2).
public struct ParameterizedValue: Equatable, Sendable {
    /// The value before the first `;`, trimmed (e.g. `multipart/form-data`, `form-data`).
    public var value: String
    /// Parameters in the order they appeared; names lowercased, quoted-string escapes undone.
    /// An extended parameter (RFC 8187, name ending in `*`) keeps its raw `charset'lang'value`.
    public var parameters: [Parameter]

    public struct Parameter: Equatable, Sendable {
        public var name: String
        public var value: String
        public init(name: String, value: String) {
            self.name = name
            self.value = value
        }
    }

    public init(value: String, parameters: [Parameter] = []) {
        self.value = value
        self.parameters = parameters
    }

    /// Parameters one value may have: real headers have a handful; a limit keeps a hostile
    /// one from costing more than a glance.
    public static let maxParameters = 64

    /// The value of the parameter `name` (case-insensitive), if present.
    public subscript(parameter name: String) -> String? {
        Self.value(of: ASCII.lowercased(name), in: parameters)
    }

    /// The value of the parameter `lowercasedName` in `parameters`.
    static func value(of lowercasedName: String, in parameters: [Parameter]) -> String? {
        parameters.first { $0.name == lowercasedName }?.value
    }

    /// Parses `text`. Throws on an empty value, a parameter without `=`, an unterminated
    /// quoted-string, text after a closing quote, a parameter given twice, or more than
    /// `maxParameters` parameters.
    ///
    /// Deliberate leniencies, as browsers' and Go's parsers have them: empty list members
    /// (`;;`) are skipped; an unquoted value runs to the next `;` even if it is not a token;
    /// a backslash in a quoted-string escapes only `"` and `\` — any other backslash is kept,
    /// so the Windows paths that old browsers send (`C:\dir\a.txt`) survive.
    public init(parsing text: String) throws(HeaderValueError) {
        let bytes = Array(text.utf8)
        var index = 0
        while index < bytes.count, bytes[index] != ASCII.semicolon { index += 1 }
        let main = ASCII.trimmed(bytes[0..<index])
        guard !main.isEmpty else { throw HeaderValueError("the value is empty") }
        value = headerText(main)
        parameters = []

        while index < bytes.count {
            index += 1  // past ";"
            while index < bytes.count, ASCII.isWhitespace(bytes[index]) { index += 1 }
            if index == bytes.count { break }
            if bytes[index] == ASCII.semicolon { continue }

            let nameStart = index
            while index < bytes.count, bytes[index] != ASCII.equals, bytes[index] != ASCII.semicolon {
                index += 1
            }
            let rawName = ASCII.trimmed(bytes[nameStart..<index])
            guard index < bytes.count, bytes[index] == ASCII.equals else {
                throw HeaderValueError("parameter \"\(headerText(rawName))\" has no \"=value\"")
            }
            guard !rawName.isEmpty, rawName.allSatisfy(ASCII.isTokenChar) else {
                throw HeaderValueError("\"\(headerText(rawName))\" is not a valid parameter name")
            }
            // Names are tokens (ASCII): lowercased into the string as it is made.
            let name = String(unsafeUninitializedCapacity: rawName.count) { out in
                for (offset, byte) in rawName.enumerated() { out[offset] = ASCII.lower(byte) }
                return rawName.count
            }
            index += 1  // past "="
            while index < bytes.count, ASCII.isWhitespace(bytes[index]) { index += 1 }

            let parameterValue: String
            if index < bytes.count, bytes[index] == ASCII.quote {
                index += 1
                let valueStart = index
                var escaped = false
                var closed = false
                while index < bytes.count {
                    let byte = bytes[index]
                    if byte == ASCII.quote { closed = true; break }
                    if Self.isEscape(bytes, at: index) {
                        escaped = true
                        index += 2
                        continue
                    }
                    index += 1
                }
                guard closed else {
                    throw HeaderValueError("the quoted value of \"\(name)\" has no closing quote")
                }
                let quoted = bytes[valueStart..<index]
                index += 1  // past the closing quote
                while index < bytes.count, ASCII.isWhitespace(bytes[index]) { index += 1 }
                guard index == bytes.count || bytes[index] == ASCII.semicolon else {
                    throw HeaderValueError("unexpected text after the quoted value of \"\(name)\"")
                }
                // Most quoted values have no escapes: their bytes are the value.
                parameterValue = escaped ? headerText(Self.unescaped(quoted)) : headerText(quoted)
            } else {
                let valueStart = index
                while index < bytes.count, bytes[index] != ASCII.semicolon { index += 1 }
                parameterValue = headerText(ASCII.trimmed(bytes[valueStart..<index]))
            }
            // A handful of parameters at most (maxParameters): a scan beats hashing into a set.
            guard !parameters.contains(where: { $0.name == name }) else {
                throw HeaderValueError("parameter \"\(name)\" is given twice")
            }
            guard parameters.count < Self.maxParameters else {
                throw HeaderValueError("more than \(Self.maxParameters) parameters")
            }
            parameters.append(Parameter(name: name, value: parameterValue))
        }
    }

    /// Whether `bytes[index]` is a backslash that escapes the byte after it, a `"` or a `\`
    /// (any other backslash is kept, as the parser's leniencies say).
    private static func isEscape<Bytes: RandomAccessCollection<UInt8>>(_ bytes: Bytes, at index: Int) -> Bool where Bytes.Index == Int {
        bytes[index] == ASCII.backslash && index + 1 < bytes.endIndex
            && (bytes[index + 1] == ASCII.quote || bytes[index + 1] == ASCII.backslash)
    }

    /// A quoted-string's content with its escapes undone.
    private static func unescaped(_ quoted: ArraySlice<UInt8>) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(quoted.count)
        var index = quoted.startIndex
        while index < quoted.endIndex {
            let byte = quoted[index]
            if isEscape(quoted, at: index) {
                out.append(quoted[index + 1])
                index += 2
                continue
            }
            out.append(byte)
            index += 1
        }
        return out
    }
}

/// Why a header value could not be parsed: one sentence for the person who sent it.
public struct HeaderValueError: Error, Equatable, Sendable, CustomStringConvertible {
    public var description: String
    public init(_ description: String) { self.description = description }
}

/// RFC 8187 extended parameter values (`filename*=UTF-8''na%C3%AFve.txt`).
public enum ExtendedValue {
    /// Decodes `charset'language'value-chars`. Only UTF-8 and ISO-8859-1 are accepted
    /// (the two charsets RFC 8187 requires); anything malformed gives nil.
    public static func decode(_ raw: String) -> String? {
        let bytes = Array(raw.utf8)
        guard let firstQuote = bytes.firstIndex(of: 0x27),
              let secondQuote = bytes[(firstQuote + 1)...].firstIndex(of: 0x27) else { return nil }
        let charset = bytes[..<firstQuote]
        let encoded = bytes[(secondQuote + 1)...]
        var decoded: [UInt8] = []
        decoded.reserveCapacity(encoded.count)
        var index = encoded.startIndex
        while index < encoded.endIndex {
            let byte = encoded[index]
            if byte == 0x25 {
                guard index + 2 < encoded.endIndex,
                      let high = PercentEncoding.hexValue(encoded[index + 1]), let low = PercentEncoding.hexValue(encoded[index + 2])
                else { return nil }
                decoded.append(high << 4 | low)
                index += 3
            } else if isAttrChar(byte) {
                decoded.append(byte)
                index += 1
            } else {
                return nil
            }
        }
        if ASCII.equalsIgnoringCase(charset, "utf-8".utf8) {
            return String(validating: decoded, as: UTF8.self)
        }
        if ASCII.equalsIgnoringCase(charset, "iso-8859-1".utf8) {
            var text = String()
            text.unicodeScalars.append(contentsOf: decoded.map { Unicode.Scalar($0) })
            return text
        }
        return nil
    }

    /// `UTF-8''` followed by `text` percent-encoded where RFC 8187 requires it.
    public static func encode(_ text: String) -> String {
        var out = "UTF-8''"
        for byte in text.utf8 {
            if isAttrChar(byte) {
                out.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                out += "%"
                out.unicodeScalars.append(PercentEncoding.hexDigits[Int(byte >> 4)])
                out.unicodeScalars.append(PercentEncoding.hexDigits[Int(byte & 0xF)])
            }
        }
        return out
    }

    /// RFC 8187 §3.2.1 `attr-char`.
    static func isAttrChar(_ b: UInt8) -> Bool {
        switch b {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A: return true
        default: return Array("!#$&+-.^_`|~".utf8).contains(b)
        }
    }
}
