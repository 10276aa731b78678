import HTTPTransfer
import Testing

@Suite("Multipart writer")
struct MultipartWriterTests {
    @Test func writesTheRFCShape() throws {
        let body = MultipartWriter.formData([
            (MultipartWriter.formDataHeaders(name: "a"), Array("1".utf8)),
            (MultipartWriter.formDataHeaders(name: "f", filename: "x \"y\".txt", contentType: "text/plain"), Array("hello".utf8)),
        ], boundary: try MultipartBoundary("XyZ"))
        #expect(String(decoding: body, as: UTF8.self) == """
            --XyZ\r
            Content-Disposition: form-data; name="a"\r
            \r
            1\r
            --XyZ\r
            Content-Disposition: form-data; name="f"; filename="x \\"y\\".txt"\r
            Content-Type: text/plain\r
            \r
            hello\r
            --XyZ--\r

            """)
    }

    @Test func anEmptyBodyIsJustTheCloseDelimiter() throws {
        var writer = MultipartWriter(boundary: try MultipartBoundary("b"))
        #expect(writer.finish() == Array("--b--\r\n".utf8))
    }

    @Test(arguments: ["simple", " x", "a b", "'()+_,-./:=?", "gc0p4Jq0M2Yt08j34c0p"])
    func theContentTypeRoundTripsTheBoundary(_ value: String) throws {
        // Found by fuzz-headers: a boundary with a space must be quoted.
        let writer = MultipartWriter(boundary: try MultipartBoundary(value))
        #expect(try MultipartBoundary(contentType: writer.contentType()).value == value)
    }

    @Test func randomBoundariesAreValidAndDistinct() {
        let boundaries = (0..<100).map { _ in MultipartBoundary.random().value }
        #expect(Set(boundaries).count == 100)
        #expect(boundaries.allSatisfy { (try? MultipartBoundary($0)) != nil })
    }

    /// Random forms with binary contents salted with CRLF, dashes and prefixes of the
    /// boundary, written by the writer and parsed back, whole and in random chunks.
    @Test(arguments: 0..<40)
    func randomFormsRoundTrip(seed: Int) throws {
        var random = SplitMix64(seed: UInt64(seed))
        let boundary = try MultipartBoundary(String(repeating: "-", count: Int(random.next() % 10))
            + String((0..<(1 + Int(random.next() % 40))).map { _ in Array("abcXYZ0129'()+_,-./:=?")[Int(random.next() % 22)] }))
        let delimiter = Array("\r\n--\(boundary.value)".utf8)
        var expected: [ParsedFormPart] = []
        for index in 0..<Int(random.next() % 6) {
            let isFile = random.next() % 2 == 0
            var content: [UInt8] = []
            for _ in 0..<Int(random.next() % 40) {
                switch random.next() % 4 {
                case 0: content += delimiter.prefix(Int(random.next() % UInt64(delimiter.count)))
                case 1: content += Array("\r\n-".utf8)
                default: content += (0..<Int(random.next() % 30)).map { _ in UInt8(truncatingIfNeeded: random.next()) }
                }
            }
            if !isFile { content = content.map { $0 == 0 ? 0x20 : $0 } }
            let filename: String? = isFile ? "file \(index) \"q\" \\ ü.bin" : nil
            let contentType = isFile ? "application/x-test-\(index)" : "text/plain"
            expected.append(ParsedFormPart(
                name: "field \(index)", filename: filename, contentType: contentType,
                headers: MultipartWriter.formDataHeaders(name: "field \(index)", filename: filename, contentType: contentType),
                content: content))
        }
        let body = MultipartWriter.formData(expected.map { ($0.headers, $0.content) }, boundary: boundary)
        let cuts = [Chunking.whole, .every(1 + Int(random.next() % 64)), .split(at: Int(random.next() % UInt64(body.count + 1)))]
        for chunking in cuts {
            #expect(parseForm(body, boundary: boundary.value, chunking: chunking) == .success(expected), "\(chunking)")
        }
    }
}

/// A small deterministic generator, so a failing seed can be replayed.
struct SplitMix64 {
    var state: UInt64
    init(seed: UInt64) { state = seed }
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}
