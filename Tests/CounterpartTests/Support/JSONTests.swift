@testable import Counterpart
import Foundation
import Testing

/// JSON strings as the server writes them: most need no escape and are copied whole; the
/// rest go scalar by scalar. Both must give text that parses back to the same string.
@Suite("JSON strings")
struct JSONTests {
    static let cases: [(name: String, text: String, json: String)] = [
        ("plain ASCII is copied whole", "/upload?x=1", #""/upload?x=1""#),
        ("empty", "", #""""#),
        ("non-ASCII without an escape", "résumé Ωμέγα 😀", #""résumé Ωμέγα 😀""#),
        ("a quote", #"say "hi""#, #""say \"hi\"""#),
        ("a backslash", #"C:\path"#, #""C:\\path""#),
        ("newline, return, tab", "a\nb\rc\td", #""a\nb\rc\td""#),
        ("other control characters and DEL", "\u{1}\u{1F}\u{7F}", #""\u0001\u001f\u007f""#),
        ("line and paragraph separators (not valid in JavaScript strings before ES2019)", "a\u{2028}b\u{2029}", #""a\u2028b\u2029""#),
        ("other characters led by 0xE2 stay as they are", "€ — ✓", #""€ — ✓""#),
    ]

    @Test(arguments: cases)
    func stringsAreQuoted(_ example: (name: String, text: String, json: String)) throws {
        let written = JSON.string(example.text).serialized
        #expect(written == example.json, "\(example.name)")
        let parsed = try JSONSerialization.jsonObject(with: Data(("[" + written + "]").utf8)) as? [String]
        #expect(parsed == [example.text], "\(example.name)")
    }
}

/// Numbers and nesting as `JSONWriter` writes them: what `String(n)` writes, commas between
/// members and items only.
@Suite("JSON values")
struct JSONValueTests {
    @Test func numbersAndNesting() {
        for n: Int64 in [0, 7, -7, 10, 99, 100, 1_796_400_123_456_042, .max, .min] {
            #expect(JSON.number(n).serialized == String(n))
        }
        for n: UInt64 in [0, 9, 10, 12_345, .max] { #expect(JSON.unsigned(n).serialized == String(n)) }
        let value = JSON.object([
            ("a", .array([])), ("b", .object([])), ("c", .array([.null, .bool(true), .array([.number(-1)]), .object([("k", .string("v"))])])),
            ("d\"", .bool(false)),
        ])
        #expect(value.serialized == #"{"a":[],"b":{},"c":[null,true,[-1],{"k":"v"}],"d\"":false}"#)
    }
}
