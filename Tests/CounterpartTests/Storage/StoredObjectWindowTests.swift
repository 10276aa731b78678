@testable import Counterpart
import HTTPTransfer
import Testing

/// Which bytes a GET from the object store asks for before it knows the object's length
/// (no engine): one ranged GET then tells the length and brings the first bytes.
@Suite("Object store: the first window of a GET")
struct StoredObjectWindowTests {
    static let window = UInt64(StoredObjectSource.window)

    private func head(_ headers: [(String, String)], method: String = "GET") -> RequestHead {
        RequestHead(method: method, path: "/uploads/a.bin", query: [], version: "HTTP/1.1",
                    headers: headers.map { HTTPField(name: $0.0, value: $0.1) }, clientAddress: "127.0.0.1")
    }

    @Test(arguments: [
        ([(String, String)](), 0..<window, "no Range: the object's first window"),
        ([("Range", "bytes=0-0")], 0..<1, "the first byte"),
        ([("Range", "bytes=100-1048675")], 100..<1_048_676, "a 1 MiB range, exactly"),
        ([("Range", "bytes=5-")], 5..<(5 + window), "an open range: a window from its first byte"),
        ([("Range", "bytes=10-99999999999")], 10..<(10 + window), "a long range: its first window"),
        ([("Range", "bytes=0-18446744073709551615")], 0..<window, "a last position of 2^64-1 does not overflow"),
        ([("Range", "bytes=7-9"), ("If-Range", "\"tag\"")], 7..<10, "If-Range: the range, which it most often keeps"),
    ] as [([(String, String)], Range<UInt64>, String)])
    func aGetAsksForTheBytesItsAnswerStartsWith(headers: [(String, String)], expected: Range<UInt64>, rule: String) {
        #expect(StoredObjectFiles.firstWindow(for: head(headers)) == expected, "\(rule)")
    }

    @Test(arguments: [
        ("HEAD", [(String, String)](), "a HEAD has no bytes to fetch"),
        ("GET", [("Range", "bytes=-500")], "a suffix needs the length first"),
        ("GET", [("Range", "bytes=0-1,5-6")], "several ranges: a HEAD, then each range"),
        ("GET", [("Range", "bytes=18446744073709551000-")], "a first position past any S3 offset"),
        ("GET", [("If-None-Match", "\"tag\"")], "a 304 would send no bytes"),
        ("GET", [("If-Modified-Since", "Sun, 06 Dec 2026 00:00:00 GMT")], "a 304 would send no bytes"),
        ("GET", [("If-Match", "\"tag\"")], "a 412 would send no bytes"),
        ("GET", [("If-Unmodified-Since", "Sun, 06 Dec 2026 00:00:00 GMT")], "a 412 would send no bytes"),
    ] as [(String, [(String, String)], String)])
    func otherRequestsLookTheObjectUpFirst(method: String, headers: [(String, String)], rule: String) {
        #expect(StoredObjectFiles.firstWindow(for: head(headers, method: method)) == nil, "\(rule)")
    }
}
