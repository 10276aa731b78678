import HTTPTransfer
import Testing

@Suite("Media types, boundaries and Content-Disposition")
struct HeaderValueTests {
    @Test(arguments: [
        ("multipart/form-data; boundary=abc", "abc"),
        ("multipart/form-data;boundary=abc", "abc"),
        ("Multipart/Form-Data; BOUNDARY=abc", "abc"),
        ("multipart/form-data; charset=utf-8; boundary=\"a b:c\"", "a b:c"),
        ("multipart/form-data; boundary=----WebKitFormBoundary0IQAt0HA7oxwIx3f", "----WebKitFormBoundary0IQAt0HA7oxwIx3f"),
        ("multipart/form-data; boundary=" + String(repeating: "x", count: 70), String(repeating: "x", count: 70)),
        ("multipart/form-data; boundary=\"'()+_,-./:=?\"", "'()+_,-./:=?"),
    ])
    func findsTheBoundary(_ contentType: String, _ boundary: String) throws {
        #expect(try MultipartBoundary(contentType: contentType).value == boundary)
    }

    @Test(arguments: [
        (nil, MultipartBoundaryError.notFormData(nil)),
        ("application/json", .notFormData("application/json")),
        ("multipart/mixed; boundary=abc", .notFormData("multipart/mixed")),
        ("text/plain;", .notFormData("text/plain")),
        ("multipart/form-data", .missingBoundary),
        ("multipart/form-data; charset=utf-8", .missingBoundary),
    ] as [(String?, MultipartBoundaryError)])
    func refusesWhatIsNotFormData(_ contentType: String?, _ error: MultipartBoundaryError) {
        #expect(throws: error) { try MultipartBoundary(contentType: contentType) }
    }

    @Test(arguments: [
        "multipart/form-data; boundary=",
        "multipart/form-data; boundary=\"\"",
        "multipart/form-data; boundary=" + String(repeating: "x", count: 71),
        "multipart/form-data; boundary=*****",
        "multipart/form-data; boundary=\"ends with space \"",
        "multipart/form-data; boundary=\"unterminated",
        "multipart/form-data; boundary=a; boundary=b",
        "multipart/form-data; boundary=naïve",
    ])
    func refusesInvalidBoundaries(_ contentType: String) {
        #expect {
            try MultipartBoundary(contentType: contentType)
        } throws: { error in
            if case .invalidBoundary = error as? MultipartBoundaryError { return true }
            return false
        }
    }

    @Test func boundaryErrorsAreSentences() {
        #expect(MultipartBoundaryError.notFormData("application/json").description
            == "the request's Content-Type is application/json; uploads must be multipart/form-data")
        #expect(MultipartBoundaryError.invalidBoundary("the boundary contains \"*\", which RFC 2046 does not allow in a boundary").description
            == "invalid multipart boundary: the boundary contains \"*\", which RFC 2046 does not allow in a boundary")
    }

    @Test(arguments: [
        ("report.pdf", "attachment; filename=\"report.pdf\""),
        ("say \"hi\".txt", "attachment; filename=\"say \\\"hi\\\".txt\""),
        ("naïve €.txt", "attachment; filename=\"na_ve _.txt\"; filename*=UTF-8''na%C3%AFve%20%E2%82%AC.txt"),
        ("照片.png", "attachment; filename=\"__.png\"; filename*=UTF-8''%E7%85%A7%E7%89%87.png"),
    ])
    func formatsAttachmentDispositions(_ filename: String, _ header: String) throws {
        #expect(ContentDisposition.attachment(filename: filename) == header)
        // And it reads back to the same name.
        #expect(try ContentDisposition(parsing: header).filename == filename)
    }

    @Test func extendedValuesRoundTrip() {
        for text in ["plain", "with space", "ü", "🙂 emoji", "a'b%c"] {
            #expect(ExtendedValue.decode(ExtendedValue.encode(text)) == text)
        }
        #expect(ExtendedValue.decode("UTF-8'en'%e2%82%ac") == "€")
        #expect(ExtendedValue.decode("no-quotes") == nil)
        #expect(ExtendedValue.decode("UTF-8''a b") == nil)
        #expect(ExtendedValue.decode("UTF-8''%E2%82") == nil)
    }

    @Test func parameterListsAreParsedStrictlyWhereItMatters() throws {
        let value = try ParameterizedValue(parsing: "form-data ;; name = \"a;b\" ; x=1")
        #expect(value.value == "form-data")
        #expect(value[parameter: "NAME"] == "a;b")
        #expect(value[parameter: "x"] == "1")
        #expect(throws: HeaderValueError.self) { try ParameterizedValue(parsing: "; name=a") }
        #expect(throws: HeaderValueError.self) { try ParameterizedValue(parsing: "form-data; name") }
        #expect(throws: HeaderValueError.self) { try ParameterizedValue(parsing: "form-data; name=\"a\" junk") }
        #expect(throws: HeaderValueError.self) { try ParameterizedValue(parsing: "form-data; na me=a") }
    }

    /// Quoted-strings: `\"` and `\\` are escapes, any other backslash is kept (Windows paths),
    /// names are lowercased, and a name given twice in any case is refused.
    @Test(arguments: [
        (#"form-data; name="plain""#, "plain"),
        (#"form-data; name="say \"hi\"""#, #"say "hi""#),
        (#"form-data; name="back\\slash""#, #"back\slash"#),
        (#"form-data; name="C:\dir\a.txt""#, #"C:\dir\a.txt"#),
        (#"form-data; name="ends\\""#, #"ends\"#),
        (#"form-data; NaMe="upper""#, "upper"),
        (#"form-data; name="""#, ""),
        ("form-data; name=\"caf\u{E9}\"", "caf\u{E9}"),
    ])
    func quotedValuesAreUnescapedOnlyWhereTheyEscape(_ header: String, _ name: String?) throws {
        let disposition = try ContentDisposition(parsing: header)
        #expect(disposition.name == name)
        #expect(disposition.parameters.map(\.name) == ["name"])
    }

    @Test(arguments: [
        (#"form-data; name="a"; NAME="b""#, #"parameter "name" is given twice"#),
        (#"form-data; name="open"#, #"the quoted value of "name" has no closing quote"#),
        (#"form-data; name="escaped end\""#, #"the quoted value of "name" has no closing quote"#),
        (#"form-data; name="a"b"#, #"unexpected text after the quoted value of "name""#),
    ])
    func brokenParameterListsSayWhy(_ header: String, _ why: String) {
        #expect(throws: HeaderValueError(why)) { try ParameterizedValue(parsing: header) }
    }

    @Test func aFileNameIsFoundWhicheverFormItTakes() throws {
        let both = try ContentDisposition(parsing: #"form-data; name="f"; filename="a.txt"; filename*=UTF-8''%E2%82%AC.txt"#)
        #expect(both.hasFilename && both.filename == "€.txt" && both[parameter: "FILENAME"] == "a.txt")
        let empty = try ContentDisposition(parsing: #"form-data; name="f"; filename="""#)
        #expect(empty.hasFilename && empty.filename == "")
        let invalidExtended = try ContentDisposition(parsing: #"form-data; name="f"; filename*=nonsense"#)
        #expect(invalidExtended.hasFilename && invalidExtended.filename == nil)
        #expect(try !ContentDisposition(parsing: #"form-data; name="f""#).hasFilename)
    }
}
