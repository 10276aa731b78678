@testable import Counterpart
import Testing

/// What a request's field names say about it, noted as the fields are read: body framing and
/// preconditions are looked for only when a field says so.
@Suite("Request heads: what the field names say")
struct FieldKindsTests {
    private func kinds(_ names: [String]) -> FieldKinds {
        FieldKinds(of: names.map { HTTPField(name: $0, value: "1") })
    }

    @Test(arguments: [["Content-Length"], ["content-length"], ["TRANSFER-ENCODING"], ["Host", "Transfer-Encoding"]])
    func aFramingFieldIsNoticedInAnyCase(_ names: [String]) {
        #expect(kinds(names).framesBody && !kinds(names).hasConditions)
    }

    @Test(arguments: [["If-None-Match"], ["if-modified-since"], ["IF-RANGE"], ["Host", "If-"]])
    func aFieldStartingIfDashIsAPrecondition(_ names: [String]) {
        #expect(kinds(names).hasConditions && !kinds(names).framesBody)
    }

    @Test(arguments: [[], ["Host"], ["If"], ["Iff-Match"], ["X-If-Match"], ["Content-Lengthy"], ["Content-Lengt"],
                      ["Transfer-Encodings"], ["Content_Length"], ["If_Match"]])
    func otherFieldsSayNeither(_ names: [String]) {
        #expect(!kinds(names).framesBody && !kinds(names).hasConditions)
    }

    @Test func theFirstRangeFieldIsFoundAsTheHeadIsRead() {
        let fields = [HTTPField(name: "Host", value: "x"), HTTPField(name: "rAnGe", value: "bytes=0-1"),
                      HTTPField(name: "Range", value: "bytes=5-6"), HTTPField(name: "Ranges", value: "no")]
        #expect(FieldKinds(of: fields).rangeIndex == 1)
        let head = RequestHead(method: "GET", path: "/a", query: [], version: "HTTP/1.1", headers: fields, clientAddress: "127.0.0.1")
        #expect(head.range == "bytes=0-1" && head.range == head.header("Range"))
        #expect(kinds(["Rang", "Ranges", "X-Range"]).rangeIndex == nil)
    }

    @Test func theHeadUsesThem() {
        let plain = RequestHead(method: "GET", path: "/a", query: [], version: "HTTP/1.1", headers: [HTTPField(name: "Host", value: "x")],
                                clientAddress: "127.0.0.1")
        #expect(!plain.hasConditionalFields && !plain.announcesBody)
        let conditional = RequestHead(method: "GET", path: "/a", query: [], version: "HTTP/1.1",
                                      headers: [HTTPField(name: "If-Match", value: "*"), HTTPField(name: "Content-Length", value: "3")],
                                      clientAddress: "127.0.0.1")
        #expect(conditional.hasConditionalFields && conditional.announcesBody && conditional.contentLength == 3)
    }
}
