/// The element tree of the small XML documents S3 answers with (errors, listings, multipart
/// and copy results). A tolerant reader rather than FoundationXML: FoundationXML would add
/// libxml2 to what the ready binary needs, for documents this simple. Namespaces prefixes and
/// attributes are dropped; text is decoded (`&amp;`, `&#x2F;`…), CDATA kept as is.
struct S3XMLElement: Equatable {
    var name: String
    var text: String
    var children: [S3XMLElement]

    func child(_ name: String) -> S3XMLElement? { children.first { $0.name == name } }
    func children(_ name: String) -> [S3XMLElement] { children.filter { $0.name == name } }
    /// The text of the first child so named.
    subscript(_ name: String) -> String? { child(name)?.text }

    /// The document element, or nil when `bytes` is not a well-formed enough document.
    static func parse(_ bytes: [UInt8]) -> S3XMLElement? {
        var reader = Reader(bytes: bytes)
        return reader.document()
    }

    private struct Reader {
        let bytes: [UInt8]
        var index = 0

        init(bytes: [UInt8]) { self.bytes = bytes }

        mutating func document() -> S3XMLElement? {
            var stack: [S3XMLElement] = []
            var root: S3XMLElement?
            while index < bytes.count {
                if bytes[index] != UInt8(ascii: "<") {
                    let start = index
                    while index < bytes.count, bytes[index] != UInt8(ascii: "<") { index += 1 }
                    if !stack.isEmpty { stack[stack.count - 1].text += Self.decodeText(bytes[start..<index]) }
                    continue
                }
                if skip("<?", until: "?>") || skip("<!--", until: "-->") || skip("<!DOCTYPE", until: ">") { continue }
                if starts(with: "<![CDATA[") {
                    index += 9
                    let start = index
                    guard skipPast("]]>") else { return nil }
                    if !stack.isEmpty { stack[stack.count - 1].text += String(decoding: bytes[start..<(index - 3)], as: UTF8.self) }
                    continue
                }
                let tagStart = index + 1
                guard skipPast(">") else { return nil }
                var tag = bytes[tagStart..<(index - 1)]
                if tag.first == UInt8(ascii: "/") {
                    guard var element = stack.popLast(), Self.localName(tag.dropFirst()) == element.name else { return nil }
                    element.text = element.children.isEmpty ? element.text : ""
                    if stack.isEmpty { root = element } else { stack[stack.count - 1].children.append(element) }
                    continue
                }
                let selfClosing = tag.last == UInt8(ascii: "/")
                if selfClosing { tag = tag.dropLast() }
                let element = S3XMLElement(name: Self.localName(tag), text: "", children: [])
                if selfClosing {
                    if stack.isEmpty { root = element } else { stack[stack.count - 1].children.append(element) }
                } else {
                    stack.append(element)
                }
            }
            return stack.isEmpty ? root : nil
        }

        private func starts(with text: String) -> Bool {
            let pattern = Array(text.utf8)
            return index + pattern.count <= bytes.count && bytes[index..<(index + pattern.count)].elementsEqual(pattern)
        }

        private mutating func skip(_ opening: String, until closing: String) -> Bool {
            guard starts(with: opening) else { return false }
            if !skipPast(closing) { index = bytes.count }
            return true
        }

        /// Moves past the next `text`; false (and at the end) when there is none.
        private mutating func skipPast(_ text: String) -> Bool {
            let pattern = Array(text.utf8)
            while index + pattern.count <= bytes.count {
                if bytes[index..<(index + pattern.count)].elementsEqual(pattern) {
                    index += pattern.count
                    return true
                }
                index += 1
            }
            index = bytes.count
            return false
        }

        /// The tag's name without attributes or a namespace prefix.
        private static func localName(_ tag: ArraySlice<UInt8>) -> String {
            let name = tag.prefix { $0 != UInt8(ascii: " ") && $0 != UInt8(ascii: "\t") && $0 != UInt8(ascii: "\n") && $0 != UInt8(ascii: "\r") }
            let local = name.lastIndex(of: UInt8(ascii: ":")).map { name[($0 + 1)...] } ?? name
            return String(decoding: local, as: UTF8.self)
        }

        /// Character data with its references decoded; an unknown reference stays as written.
        static func decodeText(_ raw: ArraySlice<UInt8>) -> String {
            guard raw.contains(UInt8(ascii: "&")) else { return String(decoding: raw, as: UTF8.self) }
            var out: [UInt8] = []
            out.reserveCapacity(raw.count)
            var position = raw.startIndex
            while position < raw.endIndex {
                let byte = raw[position]
                guard byte == UInt8(ascii: "&"),
                      let semicolon = raw[position...].prefix(12).firstIndex(of: UInt8(ascii: ";")) else {
                    out.append(byte)
                    position += 1
                    continue
                }
                let entity = String(decoding: raw[(position + 1)..<semicolon], as: UTF8.self)
                if let replacement = Self.entity(entity) {
                    out.append(contentsOf: replacement.utf8)
                    position = semicolon + 1
                } else {
                    out.append(byte)
                    position += 1
                }
            }
            return String(decoding: out, as: UTF8.self)
        }

        private static func entity(_ name: String) -> String? {
            switch name {
            case "amp": return "&"
            case "lt": return "<"
            case "gt": return ">"
            case "quot": return "\""
            case "apos": return "'"
            default:
                let value: UInt32?
                if name.hasPrefix("#x") || name.hasPrefix("#X") {
                    value = UInt32(name.dropFirst(2), radix: 16)
                } else if name.hasPrefix("#") {
                    value = UInt32(name.dropFirst(), radix: 10)
                } else {
                    value = nil
                }
                return value.flatMap(Unicode.Scalar.init).map { String(Character($0)) }
            }
        }
    }
}

/// Text for an XML document the client sends (the part list of CompleteMultipartUpload).
enum S3XMLText {
    static func escaped(_ text: String) -> String {
        var out = ""
        for character in text {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            case "'": out += "&apos;"
            default: out.append(character)
            }
        }
        return out
    }
}
