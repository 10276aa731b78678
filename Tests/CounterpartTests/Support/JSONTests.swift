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
