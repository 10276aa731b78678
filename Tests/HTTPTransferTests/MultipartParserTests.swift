import HTTPTransfer
import Testing

/// One rule of the multipart grammar: a body and what it must parse to, fed whole, byte
/// by byte, in 7-byte chunks and split at every position.
struct MultipartCase: CustomTestStringConvertible, Sendable {
    enum Expected: Sendable {
        case parts([Part])
        case error(Kind, part: Int?)
    }

    /// An expected part; `contentType` nil means "the default for its kind".
    struct Part: Sendable {
        var name: String
        var filename: String?
        var contentType: String?
        var content: String
        var headers: [[String]]? = nil
    }

    /// Error kinds compared by case, with the values that matter.
    enum Kind: Equatable, Sendable {
        case noDelimiter(firstLine: String), onlyCloseDelimiter(firstLine: String), malformedDelimiter, truncated(MultipartError.Location)
        case headerSectionTooLarge, malformedHeader, missingContentDisposition
        case invalidContentDisposition, duplicateHeader(String), tooManyParts, fieldBytesExceeded

        init(_ kind: MultipartError.Kind) {
            switch kind {
            case .noDelimiter(let line): self = .noDelimiter(firstLine: line)
            case .onlyCloseDelimiter(let line): self = .onlyCloseDelimiter(firstLine: line)
            case .malformedDelimiter: self = .malformedDelimiter
            case .truncated(let location): self = .truncated(location)
            case .headerSectionTooLarge: self = .headerSectionTooLarge
            case .malformedHeader: self = .malformedHeader
            case .missingContentDisposition: self = .missingContentDisposition
            case .invalidContentDisposition: self = .invalidContentDisposition
            case .duplicateHeader(let name): self = .duplicateHeader(name)
            case .tooManyParts: self = .tooManyParts
            case .fieldBytesExceeded: self = .fieldBytesExceeded
            }
        }
    }

    var rule: String
    var boundary = "B0undary"
    var body: [UInt8]
    var limits = MultipartLimits()
    var expected: Expected

    var testDescription: String { rule }
}

private func field(_ name: String, _ value: String) -> String {
    "Content-Disposition: form-data; name=\"\(name)\"\r\n\r\n\(value)"
}

private let multipartCases: [MultipartCase] = [
    MultipartCase(
        rule: "a field and a file, CRLF",
        body: Array("--B0undary\r\nContent-Disposition: form-data; name=\"username\"\r\n\r\ndashen9\r\n--B0undary\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.png\"\r\nContent-Type: image/png\r\n\r\n\u{89}PNG data\r\n--B0undary--\r\n"),
        expected: .parts([
            .init(name: "username", filename: nil, contentType: "text/plain", content: "dashen9"),
            .init(name: "file", filename: "a.png", contentType: "image/png", content: "\u{89}PNG data"),
        ])),
    MultipartCase(
        rule: "bare LF line ends, decided by the first delimiter line (seed 000)",
        boundary: "itcast",
        body: Array("--itcast\nContent-Disposition: form-data; name=\"uploadFile\"; filename=\"header 1.png\"\nContent-Type: image/png\n\nPNG\r\nbytes\n--itcast\nContent-Disposition: form-data; name=\"submit\"\n\nSubmit\n--itcast--\n"),
        expected: .parts([
            .init(name: "uploadFile", filename: "header 1.png", contentType: "image/png", content: "PNG\r\nbytes"),
            .init(name: "submit", filename: nil, contentType: nil, content: "Submit"),
        ])),
    MultipartCase(
        rule: "no CRLF after the close delimiter (seeds 001 and 002)",
        boundary: "abc",
        body: Array("--abc\r\nContent-Disposition: form-data; name=\"f\";filename=\"x.jpg\"\r\nContent-Type: image/jpeg\r\n\r\nJPEG\r\n--abc--"),
        expected: .parts([.init(name: "f", filename: "x.jpg", contentType: "image/jpeg", content: "JPEG")])),
    MultipartCase(
        rule: "preamble and epilogue are ignored",
        body: Array("This is the preamble.\r\nIt has --B0undar lines too.\r\n--B0undary\r\n\(field("a", "1"))\r\n--B0undary--\r\nepilogue\r\n--B0undary\r\nnot a part\r\n"),
        expected: .parts([.init(name: "a", content: "1")])),
    MultipartCase(
        rule: "transport padding after delimiters",
        body: Array("--B0undary \t \r\n\(field("a", "1"))\r\n--B0undary\t\r\n\(field("b", "2"))\r\n--B0undary-- \r\n"),
        expected: .parts([.init(name: "a", content: "1"), .init(name: "b", content: "2")])),
    MultipartCase(
        rule: "a body with only the close delimiter has no parts",
        body: Array("--B0undary--\r\n"),
        expected: .parts([])),
    MultipartCase(
        rule: "empty content",
        body: Array("--B0undary\r\n\(field("a", ""))\r\n--B0undary\r\nContent-Disposition: form-data; name=\"f\"; filename=\"empty.bin\"\r\n\r\n\r\n--B0undary--"),
        expected: .parts([.init(name: "a", content: ""), .init(name: "f", filename: "empty.bin", contentType: "application/octet-stream", content: "")])),
    MultipartCase(
        rule: "boundary look-alikes in the content are data",
        body: Array("--B0undary\r\n\(field("a", "x\r\n--B0undar\r\n--B0undaryX\r\n--B0undary-x\r\n--\r\n-\r\r\n\n--B0undary\r--B0undary"))\r\n--B0undary--"),
        expected: .parts([.init(name: "a", content: "x\r\n--B0undar\r\n--B0undaryX\r\n--B0undary-x\r\n--\r\n-\r\r\n\n--B0undary\r--B0undary")])),
    MultipartCase(
        rule: "in a CRLF body, LF--boundary is data",
        body: Array("--B0undary\r\n\(field("a", "1\n--B0undary\r\n2"))\r\n--B0undary--"),
        expected: .parts([.init(name: "a", content: "1\n--B0undary\r\n2")])),
    MultipartCase(
        rule: "content that ends with CR and dashes before the delimiter",
        body: Array("--B0undary\r\n\(field("a", "end\r\r\n-"))\r\n--B0undary--"),
        expected: .parts([.init(name: "a", content: "end\r\r\n-")])),
    MultipartCase(
        rule: "header lines may end in LF inside a CRLF body",
        body: Array("--B0undary\r\nContent-Disposition: form-data; name=\"a\"\nContent-Type: text/csv\n\nx,y\r\n--B0undary--"),
        expected: .parts([.init(name: "a", contentType: "text/csv", content: "x,y")])),
    MultipartCase(
        rule: "header names are case-insensitive; values are trimmed; unknown headers are kept",
        body: Array("--B0undary\r\ncontent-disposition:form-data; name=\"a\"\r\nX-Custom:  kept  \r\nCONTENT-TYPE: \tapplication/json \r\n\r\n{}\r\n--B0undary--"),
        expected: .parts([.init(name: "a", contentType: "application/json", content: "{}",
                                headers: [["content-disposition", "form-data; name=\"a\""], ["X-Custom", "kept"], ["CONTENT-TYPE", "application/json"]])])),
    MultipartCase(
        rule: "a folded header line continues the previous value",
        body: Array("--B0undary\r\nContent-Disposition: form-data;\r\n name=\"folded\"\r\n\r\nv\r\n--B0undary--"),
        expected: .parts([.init(name: "folded", content: "v", headers: [["Content-Disposition", "form-data; name=\"folded\""]])])),
    MultipartCase(
        rule: "a quoted boundary with spaces",
        boundary: "gc0p4Jq0M2Yt08j34c0p ( 'x' )",
        body: Array("--gc0p4Jq0M2Yt08j34c0p ( 'x' )\r\n\(field("a", "1"))\r\n--gc0p4Jq0M2Yt08j34c0p ( 'x' )--"),
        expected: .parts([.init(name: "a", content: "1")])),
    MultipartCase(
        rule: "repeated names and several files per field are all kept, in order",
        body: Array("--B0undary\r\n\(field("tag", "a"))\r\n--B0undary\r\n\(field("tag", "b"))\r\n--B0undary\r\nContent-Disposition: form-data; name=\"f\"; filename=\"1.txt\"\r\n\r\none\r\n--B0undary\r\nContent-Disposition: form-data; name=\"f\"; filename=\"2.txt\"\r\n\r\ntwo\r\n--B0undary--"),
        expected: .parts([.init(name: "tag", content: "a"), .init(name: "tag", content: "b"),
                          .init(name: "f", filename: "1.txt", content: "one"), .init(name: "f", filename: "2.txt", content: "two")])),

    // A part may end right after its headers (RFC 2046 §5.1.1: `MIME-part-headers [CRLF *OCTET]`):
    // the header section's last line end is also the delimiter's. Go's mime/multipart reads it so.
    MultipartCase(
        rule: "a field with no body, first, then a field (CRLF)",
        boundary: "B",
        body: Array("--B\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n--B\r\nContent-Disposition: form-data; name=\"b\"\r\n\r\nx\r\n--B--\r\n"),
        expected: .parts([.init(name: "a", content: ""), .init(name: "b", content: "x")])),
    MultipartCase(
        rule: "a field with no body, alone and last, closes the body (CRLF)",
        boundary: "B",
        body: Array("--B\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n--B--\r\n"),
        expected: .parts([.init(name: "a", content: "")])),
    MultipartCase(
        rule: "a field with no body, first, then a field (LF)",
        boundary: "B",
        body: Array("--B\nContent-Disposition: form-data; name=\"a\"\n\n--B\nContent-Disposition: form-data; name=\"b\"\n\nx\n--B--\n"),
        expected: .parts([.init(name: "a", content: ""), .init(name: "b", content: "x")])),
    MultipartCase(
        rule: "a field with no body, alone and last, closes the body (LF)",
        boundary: "B",
        body: Array("--B\nContent-Disposition: form-data; name=\"a\"\n\n--B--"),
        expected: .parts([.init(name: "a", content: "")])),
    MultipartCase(
        rule: "a file with no body, first, then a field (CRLF)",
        body: Array("--B0undary\r\nContent-Disposition: form-data; name=\"f\"; filename=\"e.bin\"\r\nContent-Type: application/x-empty\r\n\r\n--B0undary\r\n\(field("a", "1"))\r\n--B0undary--"),
        expected: .parts([.init(name: "f", filename: "e.bin", contentType: "application/x-empty", content: ""), .init(name: "a", content: "1")])),
    MultipartCase(
        rule: "a file with no body, last after a field (CRLF)",
        body: Array("--B0undary\r\n\(field("a", "1"))\r\n--B0undary\r\nContent-Disposition: form-data; name=\"f\"; filename=\"e.bin\"\r\n\r\n--B0undary--\r\n"),
        expected: .parts([.init(name: "a", content: "1"), .init(name: "f", filename: "e.bin", content: "")])),
    MultipartCase(
        rule: "a file with no body, between two fields (LF)",
        body: Array("--B0undary\nContent-Disposition: form-data; name=\"a\"\n\n1\n--B0undary\nContent-Disposition: form-data; name=\"f\"; filename=\"e.bin\"\n\n--B0undary\nContent-Disposition: form-data; name=\"b\"\n\n2\n--B0undary--\n"),
        expected: .parts([.init(name: "a", content: "1"), .init(name: "f", filename: "e.bin", content: ""), .init(name: "b", content: "2")])),
    MultipartCase(
        rule: "headers ended by LF in a CRLF body, then the delimiter: an empty part",
        body: Array("--B0undary\r\nContent-Disposition: form-data; name=\"a\"\n\n--B0undary\r\n\(field("b", "2"))\r\n--B0undary--"),
        expected: .parts([.init(name: "a", content: ""), .init(name: "b", content: "2")])),
    MultipartCase(
        rule: "an empty part's delimiter may carry transport padding",
        body: Array("--B0undary\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n--B0undary \t\r\n\(field("b", "2"))\r\n--B0undary--"),
        expected: .parts([.init(name: "a", content: ""), .init(name: "b", content: "2")])),
    MultipartCase(
        rule: "boundary look-alikes right after the headers are data, without a line end added",
        body: Array("--B0undary\r\n\(field("a", "--B0undaryX"))\r\n--B0undary\r\n\(field("b", "--B0undary-x"))\r\n--B0undary\r\n\(field("c", "--B0undar"))\r\n--B0undary\r\n\(field("d", "-"))\r\n--B0undary--"),
        expected: .parts([.init(name: "a", content: "--B0undaryX"), .init(name: "b", content: "--B0undary-x"),
                          .init(name: "c", content: "--B0undar"), .init(name: "d", content: "-")])),
    MultipartCase(
        rule: "content that is a single line end is kept",
        body: Array("--B0undary\r\n\(field("a", "\r\n"))\r\n--B0undary--"),
        expected: .parts([.init(name: "a", content: "\r\n")])),

    // Content-Disposition
    MultipartCase(
        rule: "a valid filename* (UTF-8) wins over filename",
        body: Array("--B0undary\r\nContent-Disposition: form-data; name=\"f\"; filename=\"na_ve.txt\"; filename*=UTF-8''na%C3%AFve%20%E2%82%AC.txt\r\n\r\nx\r\n--B0undary--"),
        expected: .parts([.init(name: "f", filename: "naïve €.txt", content: "x")])),
    MultipartCase(
        rule: "filename* in ISO-8859-1",
        body: Array("--B0undary\r\nContent-Disposition: form-data; name=\"f\"; filename*=iso-8859-1'en'%A3%20rates.txt\r\n\r\nx\r\n--B0undary--"),
        expected: .parts([.init(name: "f", filename: "£ rates.txt", content: "x")])),
    MultipartCase(
        rule: "an empty filename* gives way to filename",
        body: Array("--B0undary\r\nContent-Disposition: form-data; name=\"f\"; filename=\"kept.txt\"; filename*=UTF-8''\r\n\r\nx\r\n--B0undary--"),
        expected: .parts([.init(name: "f", filename: "kept.txt", content: "x")])),
    MultipartCase(
        rule: "an empty filename* alone makes a file with an empty name",
        body: Array("--B0undary\r\nContent-Disposition: form-data; name=\"f\"; filename*=UTF-8''\r\n\r\nx\r\n--B0undary--"),
        expected: .parts([.init(name: "f", filename: "", content: "x")])),
    MultipartCase(
        rule: "an invalid filename* is ignored and does not blank filename",
        body: Array("--B0undary\r\nContent-Disposition: form-data; name=\"f\"; filename*=UTF-8''bad%ZZ; filename=\"good.txt\"\r\n\r\nx\r\n--B0undary--"),
        expected: .parts([.init(name: "f", filename: "good.txt", content: "x")])),
    MultipartCase(
        rule: "a filename* in an unknown charset is ignored",
        body: Array("--B0undary\r\nContent-Disposition: form-data; name=\"f\"; filename=\"good.txt\"; filename*=KOI8-R''%C1\r\n\r\nx\r\n--B0undary--"),
        expected: .parts([.init(name: "f", filename: "good.txt", content: "x")])),
    MultipartCase(
        rule: "an invalid filename* alone still makes a file, with an empty name",
        body: Array("--B0undary\r\nContent-Disposition: form-data; name=\"f\"; filename*=UTF-8''%FF\r\n\r\nx\r\n--B0undary--"),
        expected: .parts([.init(name: "f", filename: "", content: "x")])),
    MultipartCase(
        rule: "an empty filename makes a file",
        body: Array("--B0undary\r\nContent-Disposition: form-data; name=\"f\"; filename=\"\"\r\n\r\n\r\n--B0undary--"),
        expected: .parts([.init(name: "f", filename: "", contentType: "application/octet-stream", content: "")])),
    MultipartCase(
        rule: "quoted-string escapes are undone",
        body: Array("--B0undary\r\nContent-Disposition: form-data; name=\"q\\\"\"; filename=\"say \\\"hi\\\" \\\\ bye.txt\"\r\n\r\nx\r\n--B0undary--"),
        expected: .parts([.init(name: "q\"", filename: "say \"hi\" \\ bye.txt", content: "x")])),
    MultipartCase(
        rule: "bare backslashes of a Windows path are kept",
        body: Array("--B0undary\r\nContent-Disposition: form-data; name=\"f\"; filename=\"C:\\Users\\me\\photo.jpg\"\r\n\r\nx\r\n--B0undary--"),
        expected: .parts([.init(name: "f", filename: "C:\\Users\\me\\photo.jpg", content: "x")])),
    MultipartCase(
        rule: "percent sequences browsers write for quote, CR and LF are kept as sent",
        body: Array("--B0undary\r\nContent-Disposition: form-data; name=\"a%22b\"; filename=\"x%22y%0D%0Az%20.txt\"\r\n\r\nx\r\n--B0undary--"),
        expected: .parts([.init(name: "a%22b", filename: "x%22y%0D%0Az%20.txt", content: "x")])),
    MultipartCase(
        rule: "a decoy filename= inside another parameter's quoted value is not a filename",
        body: Array("--B0undary\r\nContent-Disposition: form-data; name=\"x; filename=evil.sh\"\r\n\r\nv\r\n--B0undary--"),
        expected: .parts([.init(name: "x; filename=evil.sh", filename: nil, content: "v")])),
    MultipartCase(
        rule: "raw UTF-8 in a filename, as browsers send it",
        body: Array("--B0undary\r\nContent-Disposition: form-data; name=\"f\"; filename=\"照片 résumé.png\"\r\n\r\nx\r\n--B0undary--"),
        expected: .parts([.init(name: "f", filename: "照片 résumé.png", content: "x")])),
    MultipartCase(
        rule: "filename bytes that are not UTF-8 are read as ISO-8859-1",
        body: Array("--B0undary\r\nContent-Disposition: form-data; name=\"f\"; filename=\"caf".utf8) + [0xE9] + Array(".txt\"\r\n\r\nx\r\n--B0undary--".utf8),
        expected: .parts([.init(name: "f", filename: "café.txt", content: "x")])),
    MultipartCase(
        rule: "an unquoted filename runs to the semicolon",
        body: Array("--B0undary\r\nContent-Disposition: form-data; name=plain; filename=my file.txt ; x=1\r\n\r\nx\r\n--B0undary--"),
        expected: .parts([.init(name: "plain", filename: "my file.txt", content: "x")])),
    MultipartCase(
        rule: "the disposition type and parameter names are case-insensitive",
        body: Array("--B0undary\r\nContent-Disposition: Form-Data; NAME=\"a\"; FileName=\"f.txt\"\r\n\r\nx\r\n--B0undary--"),
        expected: .parts([.init(name: "a", filename: "f.txt", content: "x")])),

    // Errors
    MultipartCase(
        rule: "no delimiter at all: the error quotes the body's first line",
        body: Array("--OtherBoundary\r\n\(field("a", "1"))\r\n--OtherBoundary--"),
        expected: .error(.noDelimiter(firstLine: "--OtherBoundary"), part: nil)),
    MultipartCase(
        rule: "parts written with another boundary, closed with ours: the error names both",
        body: Array("--OtherBoundary\r\n\(field("a", "1"))\r\n--OtherBoundary--\r\n--B0undary--\r\n"),
        expected: .error(.onlyCloseDelimiter(firstLine: "--OtherBoundary"), part: nil)),
    MultipartCase(
        rule: "text, then only the close delimiter, LF line ends",
        body: Array("hello\n--B0undary--"),
        expected: .error(.onlyCloseDelimiter(firstLine: "hello"), part: nil)),
    MultipartCase(
        rule: "only line ends and spaces before the close delimiter: an empty form",
        body: Array("\r\n \t\r\n--B0undary--\r\n"),
        expected: .parts([])),
    MultipartCase(
        rule: "an empty body has no delimiter",
        body: [],
        expected: .error(.noDelimiter(firstLine: ""), part: nil)),
    MultipartCase(
        rule: "a longer boundary that starts with ours is not a delimiter",
        body: Array("--B0undaryX\r\n\(field("a", "1"))\r\n--B0undaryX--"),
        expected: .error(.noDelimiter(firstLine: "--B0undaryX"), part: nil)),
    MultipartCase(
        rule: "text after the padding of a delimiter line",
        body: Array("--B0undary  junk\r\n\(field("a", "1"))\r\n--B0undary--"),
        expected: .error(.malformedDelimiter, part: 1)),
    MultipartCase(
        rule: "a CR not followed by LF after a delimiter",
        body: Array("--B0undary\r\n\(field("a", "1"))\r\n--B0undary\rX"),
        expected: .error(.malformedDelimiter, part: 2)),
    MultipartCase(
        rule: "truncated inside the data",
        body: Array("--B0undary\r\n\(field("a", "12345"))"),
        expected: .error(.truncated(.data), part: 1)),
    MultipartCase(
        rule: "truncated inside a delimiter's held-back prefix",
        body: Array("--B0undary\r\n\(field("a", "12345"))\r\n--B0und"),
        expected: .error(.truncated(.data), part: 1)),
    MultipartCase(
        rule: "truncated right after a part's headers",
        body: Array("--B0undary\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n"),
        expected: .error(.truncated(.data), part: 1)),
    MultipartCase(
        rule: "truncated in a delimiter right after a part's headers",
        body: Array("--B0undary\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n--B0undary"),
        expected: .error(.truncated(.delimiterLine), part: 1)),
    MultipartCase(
        rule: "truncated after a delimiter",
        body: Array("--B0undary\r\n\(field("a", "1"))\r\n--B0undary"),
        expected: .error(.truncated(.delimiterLine), part: 1)),
    MultipartCase(
        rule: "truncated after one dash of the close delimiter",
        body: Array("--B0undary\r\n\(field("a", "1"))\r\n--B0undary-"),
        expected: .error(.truncated(.delimiterLine), part: 1)),
    MultipartCase(
        rule: "truncated inside the headers",
        body: Array("--B0undary\r\nContent-Disposition: form-data; name=\"a\"\r\n"),
        expected: .error(.truncated(.headers), part: 1)),
    MultipartCase(
        rule: "a header section over the limit",
        body: Array("--B0undary\r\n\(field("a", "1"))\r\n--B0undary\r\nContent-Disposition: form-data; name=\"b\"\r\nX-Big: \(String(repeating: "x", count: 200))\r\n\r\nv\r\n--B0undary--"),
        limits: MultipartLimits(maxHeaderBytes: 128),
        expected: .error(.headerSectionTooLarge, part: 2)),
    MultipartCase(
        rule: "a header section exactly at the limit is accepted",
        body: Array("--B0undary\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nv\r\n--B0undary--"),
        limits: MultipartLimits(maxHeaderBytes: 44),
        expected: .parts([.init(name: "a", content: "v")])),
    MultipartCase(
        rule: "a header section one byte over the limit",
        body: Array("--B0undary\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nv\r\n--B0undary--"),
        limits: MultipartLimits(maxHeaderBytes: 43),
        expected: .error(.headerSectionTooLarge, part: 1)),
    MultipartCase(
        rule: "a header line that never ends is refused at the limit, not at the end of the body",
        body: Array("--B0undary\r\nX: " + String(repeating: "y", count: 300)),
        limits: MultipartLimits(maxHeaderBytes: 100),
        expected: .error(.headerSectionTooLarge, part: 1)),
    MultipartCase(
        rule: "a header line without a colon",
        body: Array("--B0undary\r\nContent-Disposition: form-data; name=\"a\"\r\nnot a header\r\n\r\nv\r\n--B0undary--"),
        expected: .error(.malformedHeader, part: 1)),
    MultipartCase(
        rule: "the seed's data right after the headers, without an empty line, is a malformed header",
        boundary: "itcast",
        body: Array("--itcast\nContent-Disposition: form-data; name=\"submit\"\nSubmit\n--itcast--\n"),
        expected: .error(.malformedHeader, part: 1)),
    MultipartCase(
        rule: "a header name with a space",
        body: Array("--B0undary\r\nContent Disposition: form-data; name=\"a\"\r\n\r\nv\r\n--B0undary--"),
        expected: .error(.malformedHeader, part: 1)),
    MultipartCase(
        rule: "a header line with a NUL byte",
        body: Array("--B0undary\r\nContent-Disposition: form-data; name=\"a\u{0}\"\r\n\r\nv\r\n--B0undary--"),
        expected: .error(.malformedHeader, part: 1)),
    MultipartCase(
        rule: "a first header line that starts with whitespace",
        body: Array("--B0undary\r\n Content-Disposition: form-data; name=\"a\"\r\n\r\nv\r\n--B0undary--"),
        expected: .error(.malformedHeader, part: 1)),
    MultipartCase(
        rule: "a part without Content-Disposition (the seed's misspelling)",
        boundary: "abc",
        body: Array("--abc\r\nContent-Disposittion: form-data; name=\"f\";filename=\"x.jpg\"\r\nContent-Type: image/hpeg\r\n\r\nJPEG\r\n--abc--"),
        expected: .error(.missingContentDisposition, part: 1)),
    MultipartCase(
        rule: "a part with no headers at all",
        body: Array("--B0undary\r\n\r\nv\r\n--B0undary--"),
        expected: .error(.missingContentDisposition, part: 1)),
    MultipartCase(
        rule: "a disposition type other than form-data",
        body: Array("--B0undary\r\nContent-Disposition: attachment; filename=\"a.txt\"\r\n\r\nv\r\n--B0undary--"),
        expected: .error(.invalidContentDisposition, part: 1)),
    MultipartCase(
        rule: "a Content-Disposition without name",
        body: Array("--B0undary\r\nContent-Disposition: form-data; filename=\"a.txt\"\r\n\r\nv\r\n--B0undary--"),
        expected: .error(.invalidContentDisposition, part: 1)),
    MultipartCase(
        rule: "an unterminated quoted-string",
        body: Array("--B0undary\r\nContent-Disposition: form-data; name=\"a\r\n\r\nv\r\n--B0undary--"),
        expected: .error(.invalidContentDisposition, part: 1)),
    MultipartCase(
        rule: "a parameter given twice",
        body: Array("--B0undary\r\nContent-Disposition: form-data; name=\"a\"; filename=\"1\"; filename=\"2\"\r\n\r\nv\r\n--B0undary--"),
        expected: .error(.invalidContentDisposition, part: 1)),
    MultipartCase(
        rule: "two Content-Disposition headers",
        body: Array("--B0undary\r\n\(field("a", "1"))\r\n--B0undary\r\nContent-Disposition: form-data; name=\"b\"\r\ncontent-disposition: form-data; name=\"c\"\r\n\r\nv\r\n--B0undary--"),
        expected: .error(.duplicateHeader("Content-Disposition"), part: 2)),
    MultipartCase(
        rule: "two Content-Type headers",
        body: Array("--B0undary\r\nContent-Disposition: form-data; name=\"b\"\r\nContent-Type: a/b\r\nContent-Type: c/d\r\n\r\nv\r\n--B0undary--"),
        expected: .error(.duplicateHeader("Content-Type"), part: 1)),
    MultipartCase(
        rule: "more parts than the limit",
        body: Array("--B0undary\r\n\(field("a", "1"))\r\n--B0undary\r\n\(field("b", "2"))\r\n--B0undary\r\n\(field("c", "3"))\r\n--B0undary--"),
        limits: MultipartLimits(maxParts: 2),
        expected: .error(.tooManyParts, part: 3)),
    MultipartCase(
        rule: "exactly the limit of parts is accepted",
        body: Array("--B0undary\r\n\(field("a", "1"))\r\n--B0undary\r\n\(field("b", "2"))\r\n--B0undary--"),
        limits: MultipartLimits(maxParts: 2),
        expected: .parts([.init(name: "a", content: "1"), .init(name: "b", content: "2")])),
    MultipartCase(
        rule: "text fields over the field-bytes limit",
        body: Array("--B0undary\r\n\(field("a", "12345"))\r\n--B0undary\r\n\(field("b", "678901"))\r\n--B0undary--"),
        limits: MultipartLimits(maxFieldBytes: 10),
        expected: .error(.fieldBytesExceeded, part: 2)),
    MultipartCase(
        rule: "names and file names count toward the field-bytes limit (they are echoed back)",
        body: Array("--B0undary\r\nContent-Disposition: form-data; name=\"f\"; filename=\"\(String(repeating: "n", count: 20))\"\r\n\r\nx\r\n--B0undary--"),
        limits: MultipartLimits(maxFieldBytes: 10),
        expected: .error(.fieldBytesExceeded, part: 1)),
    MultipartCase(
        rule: "more than 64 parameters make an invalid Content-Disposition",
        body: Array("--B0undary\r\nContent-Disposition: form-data; name=\"a\"\((0..<64).map { "; p\($0)=" }.joined())\r\n\r\nv\r\n--B0undary--"),
        expected: .error(.invalidContentDisposition, part: 1)),
    MultipartCase(
        rule: "file content does not count toward the field-bytes limit",
        body: Array("--B0undary\r\n\(field("a", "12345"))\r\n--B0undary\r\nContent-Disposition: form-data; name=\"f\"; filename=\"big\"\r\n\r\n0123456789012345678901234567890123456789\r\n--B0undary--"),
        limits: MultipartLimits(maxFieldBytes: 14),
        expected: .parts([.init(name: "a", content: "12345"),
                          .init(name: "f", filename: "big", content: "0123456789012345678901234567890123456789")])),
]

@Suite("Multipart parser")
struct MultipartParserTests {
    @Test(arguments: multipartCases)
    func parsesTheSameEveryWayItIsCut(_ testCase: MultipartCase) {
        let results = parseFormEveryWay(testCase.body, boundary: testCase.boundary, limits: testCase.limits)
        #expect(results.count == 1, "the result depends on how the body is cut: \(results.map { "\($0.chunking): \($0.result)" })")
        guard let result = results.first?.result else { return }

        switch (testCase.expected, result) {
        case (.parts(let expected), .success(let parts)):
            #expect(parts.count == expected.count, "\(parts)")
            for (part, want) in zip(parts, expected) {
                #expect(part.name == want.name)
                #expect(part.filename == want.filename)
                #expect(part.contentType == (want.contentType ?? (want.filename == nil ? "text/plain" : "application/octet-stream")))
                #expect(part.content == Array(want.content.utf8) || part.content == want.content.unicodeScalars.map { UInt8(truncatingIfNeeded: $0.value) },
                        "content of \(part.name): \(part.content)")
                if let headers = want.headers {
                    #expect(part.headers.map { [$0.name, $0.value] } == headers)
                }
            }
        case (.error(let kind, let partNumber), .failure(let error)):
            #expect(MultipartCase.Kind(error.kind) == kind, "\(error)")
            #expect(error.part == partNumber, "\(error)")
            #expect(!error.description.isEmpty)
        default:
            Issue.record("expected \(testCase.expected), got \(result)")
        }
    }

    @Test func errorsSayWhereAndWhy() {
        let body = Array("--B0undary\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n12345")
        guard case .failure(let error) = parseForm(body, boundary: "B0undary") else {
            Issue.record("a truncated body parsed")
            return
        }
        #expect(error.offset == body.count)
        #expect(error.description == "the body is truncated: it ends at byte \(body.count) inside the data of part 1, before the close delimiter \"--B0undary--\"")
    }

    @Test func aDelimiterErrorPointsAtTheOffendingByte() {
        let body = Array("--B0undary  junk\r\n")
        guard case .failure(let error) = parseForm(body, boundary: "B0undary") else {
            Issue.record("a malformed delimiter parsed")
            return
        }
        #expect(error.offset == 12)
    }

    @Test func contentIsHandedOutAsSlicesOfTheInput() throws {
        // One big chunk: the content event must point into the caller's buffer, not a copy.
        let content = [UInt8](repeating: 0x61, count: 100_000)
        var writer = MultipartWriter(boundary: try MultipartBoundary("b"))
        let body = writer.beginPart(headers: MultipartWriter.formDataHeaders(name: "f", filename: "a")) + content + writer.finish()
        var parser = FormDataParser(boundary: try MultipartBoundary("b"))
        try body.withUnsafeBytes { buffer in
            try parser.feed(buffer) { event in
                if case .partData(let slice) = event {
                    #expect(slice.count == content.count)
                    #expect(slice.baseAddress! >= buffer.baseAddress! && slice.baseAddress! < buffer.baseAddress! + buffer.count)
                }
            }
        }
        try parser.finish()
    }

    @Test func memoryStaysBoundedWhateverThePartSize() throws {
        // 64 MiB of content fed in 64 KiB chunks with a boundary prefix at every chunk end:
        // the parser never holds more than the boundary's length between chunks.
        let boundary = try MultipartBoundary("boundary-123")
        var parser = FormDataParser(boundary: boundary)
        var writer = MultipartWriter(boundary: boundary)
        try parser.feed(writer.beginPart(headers: MultipartWriter.formDataHeaders(name: "f", filename: "big"))) { _ in }
        var chunk = [UInt8](repeating: 0x78, count: 65_536)
        chunk.replaceSubrange((65_536 - 8)..., with: Array("\r\n--boun".utf8))
        var total = 0
        for _ in 0..<1024 {
            try parser.feed(chunk) { event in
                if case .partData(let slice) = event {
                    total += slice.count
                    #expect(slice.count <= 65_536)
                }
            }
        }
        try parser.feed(writer.finish()) { event in if case .partData(let slice) = event { total += slice.count } }
        try parser.finish()
        #expect(total == 1024 * 65_536)
    }

    @Test func aFailedParserRefusesMoreInput() throws {
        var parser = FormDataParser(boundary: try MultipartBoundary("b"))
        #expect(throws: MultipartError.self) { try parser.feed(Array("--b junk\r\n")) { _ in } }
        #expect(throws: MultipartError.self) { try parser.feed(Array("--b\r\n")) { _ in } }
    }

    @Test func errorsFromTheHandlerPropagate() throws {
        struct DiskFull: Error {}
        var parser = FormDataParser(boundary: try MultipartBoundary("b"))
        #expect(throws: DiskFull.self) {
            try parser.feed(Array("--b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"x\"\r\n\r\ndata")) { event in
                if case .partData = event { throw DiskFull() }
            }
        }
    }

    /// Each part says where its content starts in the body, however the body is cut into
    /// chunks (headers split across reads included).
    @Test func eachPartSaysWhereItsContentStarts() throws {
        let first = "--b\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\n"
        let second = "\r\n--b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"x.bin\"\r\nContent-Type: image/png\r\n\r\n"
        let text = first + "one" + second + "0123456789" + "\r\n--b--\r\n"
        let body = Array(text.utf8)
        for chunking in Chunking.all(for: body) {
            var parser = FormDataParser(boundary: try MultipartBoundary("b"))
            var offsets: [Int] = []
            for chunk in chunking.chunks(of: body) {
                try parser.feed(Array(chunk)) { event in
                    if case .partBegin(let part) = event { offsets.append(part.contentOffset) }
                }
            }
            try parser.finish()
            #expect(offsets == [first.utf8.count, first.utf8.count + 3 + second.utf8.count], "\(chunking)")
        }
    }

    /// The size guessed for a file that is the body's last part is exact for a body closed
    /// as curl and browsers close one, and never negative.
    @Test func theSizeOfALastPartIsGuessedFromTheBodysLength() throws {
        let boundary = try MultipartBoundary("b")
        let head = "--b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"x\"\r\n\r\n"
        let body = head + String(repeating: "z", count: 1_000) + "\r\n--b--\r\n"
        #expect(boundary.sizeIfLastPart(startingAt: head.utf8.count, bodyLength: UInt64(body.utf8.count)) == 1_000)
        #expect(boundary.sizeIfLastPart(startingAt: head.utf8.count, bodyLength: UInt64(head.utf8.count + 10)) == 1)
        #expect(boundary.sizeIfLastPart(startingAt: head.utf8.count, bodyLength: UInt64(head.utf8.count + 9)) == 0)
        #expect(boundary.sizeIfLastPart(startingAt: head.utf8.count, bodyLength: UInt64(head.utf8.count + 8)) == nil)
        #expect(boundary.sizeIfLastPart(startingAt: 100, bodyLength: 50) == nil)
    }
}
