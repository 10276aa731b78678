import HTTPTransfer
import Testing

struct RangeParseCase: CustomTestStringConvertible, Sendable {
    var rule: String
    var header: String
    var specs: [RangeSpec]?
    var testDescription: String { "\(rule): \(header)" }
}

private let rangeParseCases: [RangeParseCase] = [
    // RFC 9110 §14.1.2 examples
    .init(rule: "the first 500 bytes", header: "bytes=0-499", specs: [.closed(first: 0, last: 499)]),
    .init(rule: "the second 500 bytes", header: "bytes=500-999", specs: [.closed(first: 500, last: 999)]),
    .init(rule: "the final 500 bytes, suffix form", header: "bytes=-500", specs: [.suffix(length: 500)]),
    .init(rule: "the final 500 bytes, open form", header: "bytes=9500-", specs: [.from(first: 9500)]),
    .init(rule: "the first and last bytes", header: "bytes=0-0,-1", specs: [.closed(first: 0, last: 0), .suffix(length: 1)]),
    .init(rule: "whitespace in the RFC's own example", header: "bytes= 0-999, 4500-5499, -1000",
          specs: [.closed(first: 0, last: 999), .closed(first: 4500, last: 5499), .suffix(length: 1000)]),
    .init(rule: "adjacent ranges", header: "bytes=500-600,601-999", specs: [.closed(first: 500, last: 600), .closed(first: 601, last: 999)]),
    .init(rule: "overlapping ranges", header: "bytes=500-700,601-999", specs: [.closed(first: 500, last: 700), .closed(first: 601, last: 999)]),
    // leniencies
    .init(rule: "the unit is case-insensitive (Bytes= from an iOS seed)", header: "Bytes=20250-40499", specs: [.closed(first: 20250, last: 40499)]),
    .init(rule: "spaces around = and - and commas", header: " bytes = 1 - 2 ,\t3- , - 4 ", specs: [.closed(first: 1, last: 2), .from(first: 3), .suffix(length: 4)]),
    .init(rule: "empty list members are skipped", header: "bytes=,0-1,,5-6,", specs: [.closed(first: 0, last: 1), .closed(first: 5, last: 6)]),
    .init(rule: "a first position too large for 64 bits saturates", header: "bytes=99999999999999999999999-",
          specs: [.from(first: .max)]),
    .init(rule: "a last position too large for 64 bits saturates", header: "bytes=0-99999999999999999999999",
          specs: [.closed(first: 0, last: .max)]),
    .init(rule: "a zero-length suffix parses (and is unsatisfiable)", header: "bytes=-0", specs: [.suffix(length: 0)]),
    // ignored headers
    .init(rule: "another unit", header: "items=0-5", specs: nil),
    .init(rule: "no equals sign", header: "bytes 0-5", specs: nil),
    .init(rule: "last before first", header: "bytes=5-1", specs: nil),
    .init(rule: "one bad spec spoils the set", header: "bytes=0-1,5-1", specs: nil),
    .init(rule: "a negative first position", header: "bytes=--5", specs: nil),
    .init(rule: "a sign", header: "bytes=+1-2", specs: nil),
    .init(rule: "no numbers", header: "bytes=-", specs: nil),
    .init(rule: "an empty set", header: "bytes=", specs: nil),
    .init(rule: "only commas", header: "bytes=,,", specs: nil),
    .init(rule: "junk after a spec", header: "bytes=0-1x", specs: nil),
    .init(rule: "a decimal point", header: "bytes=0.5-1", specs: nil),
    .init(rule: "a prefix of the unit", header: "byte=0-1", specs: nil),
    .init(rule: "a longer unit", header: "bytesx=0-1", specs: nil),
    .init(rule: "an empty header", header: "", specs: nil),
]

struct RangeResolveCase: CustomTestStringConvertible, Sendable {
    var rule: String
    var header: String
    var length: UInt64
    var policy = RangePolicy()
    var expected: RangeResolution
    var testDescription: String { "\(rule): \(header) of \(length)" }
}

private func r(_ first: UInt64, _ last: UInt64) -> ByteRange { ByteRange(first: first, last: last) }

private let rangeResolveCases: [RangeResolveCase] = [
    .init(rule: "a closed range", header: "bytes=0-499", length: 10_000, expected: .partial([r(0, 499)])),
    .init(rule: "a suffix", header: "bytes=-500", length: 10_000, expected: .partial([r(9500, 9999)])),
    .init(rule: "an open range", header: "bytes=9500-", length: 10_000, expected: .partial([r(9500, 9999)])),
    .init(rule: "first and last byte", header: "bytes=0-0,-1", length: 10_000, expected: .partial([r(0, 0), r(9999, 9999)])),
    .init(rule: "last clamped to the end", header: "bytes=9000-20000", length: 10_000, expected: .partial([r(9000, 9999)])),
    .init(rule: "a suffix longer than the file is the whole file", header: "bytes=-20000", length: 10_000, expected: .partial([r(0, 9999)])),
    .init(rule: "the seed's packets: 20,250-byte steps", header: "bytes=20250-40499", length: 48_213, expected: .partial([r(20250, 40499)])),
    .init(rule: "the seed's last packet", header: "bytes=40500-48212", length: 48_213, expected: .partial([r(40500, 48212)])),
    .init(rule: "a resume at the current size", header: "bytes=1000-", length: 1000, expected: .unsatisfiable),
    .init(rule: "a range past the end", header: "bytes=10000-10010", length: 10_000, expected: .unsatisfiable),
    .init(rule: "unsatisfiable ranges are dropped from a set", header: "bytes=20000-,0-9", length: 10_000, expected: .partial([r(0, 9)])),
    .init(rule: "a zero-length suffix is unsatisfiable", header: "bytes=-0", length: 10_000, expected: .unsatisfiable),
    .init(rule: "nothing is satisfiable in an empty file", header: "bytes=0-", length: 0, expected: .unsatisfiable),
    .init(rule: "not even a suffix in an empty file", header: "bytes=-1", length: 0, expected: .unsatisfiable),
    .init(rule: "an invalid header means the whole file", header: "bytes=5-1", length: 10_000, expected: .full),
    .init(rule: "another unit means the whole file", header: "pages=1-2", length: 10_000, expected: .full),
    .init(rule: "overlapping ranges are coalesced", header: "bytes=500-700,601-999", length: 10_000, expected: .partial([r(500, 999)])),
    .init(rule: "adjacent ranges are coalesced", header: "bytes=500-600,601-999", length: 10_000, expected: .partial([r(500, 999)])),
    .init(rule: "coalescing keeps the order the client asked for", header: "bytes=9000-9099,0-99,50-149", length: 10_000,
          expected: .partial([r(9000, 9099), r(0, 149)])),
    .init(rule: "disjoint ranges stay in request order", header: "bytes=900-999,0-99", length: 10_000, expected: .partial([r(900, 999), r(0, 99)])),
    .init(rule: "without coalescing, overlaps are kept", header: "bytes=500-700,601-999", length: 10_000,
          policy: RangePolicy(coalesce: false), expected: .partial([r(500, 700), r(601, 999)])),
    .init(rule: "more ranges than the limit: the whole file", header: "bytes=" + (0..<101).map { "\($0 * 10)-\($0 * 10 + 1)" }.joined(separator: ","),
          length: 10_000, expected: .full),
    .init(rule: "exactly the limit of ranges is served", header: "bytes=" + (0..<100).map { "\($0 * 10)-\($0 * 10 + 1)" }.joined(separator: ","),
          length: 10_000, expected: .partial((0..<100).map { r(UInt64($0) * 10, UInt64($0) * 10 + 1) })),
    .init(rule: "Apache Killer: overlapping ranges asking for more than the file get the whole file",
          header: "bytes=0-," + (1..<50).map { "5-\($0)" }.joined(separator: ","), length: 10_000, expected: .full),
    .init(rule: "a total above the length, even without coalescing, gets the whole file", header: "bytes=0-5999,4000-9999",
          length: 10_000, policy: RangePolicy(coalesce: false), expected: .full),
]

@Suite("Range")
struct RangeTests {
    @Test(arguments: rangeParseCases)
    func parses(_ testCase: RangeParseCase) {
        #expect(RangeHeader(parsing: testCase.header)?.specs == testCase.specs)
    }

    @Test(arguments: rangeResolveCases)
    func resolves(_ testCase: RangeResolveCase) {
        #expect(RangeResolution(rangeHeader: testCase.header, length: testCase.length, policy: testCase.policy) == testCase.expected)
    }

    @Test func noHeaderMeansTheWholeRepresentation() {
        #expect(RangeResolution(rangeHeader: nil, length: 10) == .full)
    }

    @Test(arguments: [
        ("bytes 0-499/1234", ContentRange.satisfied(ByteRange(first: 0, last: 499), completeLength: 1234)),
        ("bytes 500-999/*", ContentRange.satisfied(ByteRange(first: 500, last: 999), completeLength: nil)),
        ("bytes */47022", ContentRange.unsatisfied(completeLength: 47022)),
    ])
    func contentRangeRoundTrips(_ text: String, _ value: ContentRange) {
        #expect(value.description == text)
        #expect(ContentRange(parsing: text) == value)
    }

    @Test(arguments: [
        "bytes 5-1/10", "bytes 0-10/10", "bytes */*", "bytes 0-1", "items 0-1/10", "bytes -1-2/10", "bytes 0-1/x", "",
    ])
    func invalidContentRangeIsRejected(_ text: String) {
        #expect(ContentRange(parsing: text) == nil)
    }

    @Test func contentRangeParsingIsLenientAboutCaseAndSpace() {
        #expect(ContentRange(parsing: "Bytes  0-0/1 ") == .satisfied(ByteRange(first: 0, last: 0), completeLength: 1))
    }
}
