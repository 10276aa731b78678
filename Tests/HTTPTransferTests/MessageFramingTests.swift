import HTTPTransfer
import Testing

@Suite("Message framing (RFC 9112 §6.3)")
struct MessageFramingTests {
    private func framing(_ lines: [String]) throws(MessageFraming.Refusal) -> MessageFraming {
        try MessageFraming(headers: lines.map { line in
            let colon = line.firstIndex(of: ":")!
            return (String(line[..<colon]), String(line[line.index(after: colon)...].drop { $0 == " " }))
        })
    }

    @Test(arguments: [
        ([], MessageFraming.none),
        (["Host: x"], .none),
        (["Content-Length: 0"], .length(0)),
        (["content-length: 42"], .length(42)),
        (["Content-Length: 42 "], .length(42)),
        (["Content-Length: 42, 42"], .length(42)),
        (["Content-Length: 42", "Content-Length: 42"], .length(42)),
        (["Content-Length: 18446744073709551615"], .length(.max)),
        (["Content-Length: 007"], .length(7)),
        (["Transfer-Encoding: chunked"], .chunked),
        (["Transfer-Encoding: Chunked"], .chunked),
        (["Transfer-Encoding: chunked\t"], .chunked),
        (["Host: x", "transfer-encoding: CHUNKED", "X-Other: y"], .chunked),
    ] as [([String], MessageFraming)])
    func framesValidHeads(_ lines: [String], _ expected: MessageFraming) throws {
        #expect(try framing(lines) == expected)
    }

    @Test(arguments: [
        // Smuggling: two ways to read the length.
        (["Content-Length: 5", "Transfer-Encoding: chunked"], 400),
        (["Transfer-Encoding: chunked", "Content-Length: 5"], 400),
        (["Content-Length: 0", "Content-Length: 5"], 400),
        (["Content-Length: 5, 6"], 400),
        // Not a number of bytes.
        (["Content-Length: -5"], 400),
        (["Content-Length: +5"], 400),
        (["Content-Length: 0x5"], 400),
        (["Content-Length: 5 5"], 400),
        (["Content-Length: "], 400),
        (["Content-Length: abc"], 400),
        (["Content-Length: 18446744073709551616"], 400),
        // Whitespace before the colon (RFC 9112 §5.1) or in a name.
        (["Transfer-Encoding : chunked"], 400),
        (["Content-Length\t: 5"], 400),
        (["X Y: z"], 400),
        // chunked not last, twice, or missing.
        (["Transfer-Encoding: chunked, gzip"], 400),
        (["Transfer-Encoding: chunked", "Transfer-Encoding: gzip"], 400),
        (["Transfer-Encoding: chunked, chunked"], 400),
        (["Transfer-Encoding: identity"], 400),
        (["Transfer-Encoding: xchunked"], 400),
        (["Transfer-Encoding: "], 400),
        // A member that is not a coding at all.
        (["Transfer-Encoding: \u{0B}chunked, chunked"], 400),
        (["Transfer-Encoding: , chunked"], 400),
        (["Transfer-Encoding: g(zip), chunked"], 400),
        // A coding this library does not decode, before chunked.
        (["Transfer-Encoding: gzip, chunked"], 501),
        (["Transfer-Encoding: gzip", "Transfer-Encoding: chunked"], 501),
        (["Transfer-Encoding: gzip;level=9, chunked"], 501),
    ])
    func refusesAmbiguousOrUnsupportedHeads(_ lines: [String], _ status: Int) {
        #expect(throws: MessageFraming.Refusal.self) { try framing(lines) }
        do {
            _ = try framing(lines)
        } catch {
            #expect(error.status == status, "\(lines): \(error)")
            #expect(!error.description.isEmpty)
        }
    }
}
