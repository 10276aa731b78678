import Counterpart
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPTransfer
import Testing

@Suite("Bad input corpus: Range headers")
struct BadInputCorpusRangeTests {
    let server: TestServer
    init() throws { server = try makeCorpusServer() }

    /// CVE-2011-3192 ("Apache Killer") as it was sent: `bytes=0-,5-0,5-1,...,5-1299`.
    static let apacheKiller = "bytes=0-," + (0..<1_300).map { "5-\($0)" }.joined(separator: ",")
    /// The same shape without the invalid `5-0`: 51 overlapping ranges adding up past the file.
    static let overlapping = "bytes=0-," + (1...50).map { "5-\($0)" }.joined(separator: ",")
    static let thousandOneByteRanges = "bytes=" + (0..<1_000).map { "\($0 * 2)-\($0 * 2)" }.joined(separator: ",")
    /// About 30 KB of header: 7,600 ranges.
    static let thirtyKilobytes = "bytes=" + Array(repeating: "1-1", count: 7_600).joined(separator: ",")

    // README: a syntactically invalid header is ignored (200); more than 100 ranges, or
    // ranges adding up to more than the file, get the whole file (200).
    @Test(arguments: [
        ("CVE-2011-3192 as sent (with 5-0)", apacheKiller),
        ("51 overlapping ranges adding up past the file", overlapping),
        ("1,000 one-byte ranges", thousandOneByteRanges),
        ("a 30 KB Range header", thirtyKilobytes),
    ])
    func abusiveRangeSetsGetTheWholeFile(_ label: String, _ range: String) throws {
        let start = Date()
        let result = try curl(["-H", "Range: \(range)", server.url("/data.bin")])
        #expect(Date().timeIntervalSince(start) < 2, "\(label): slow")
        #expect(result.status == 200, "\(label)")
        #expect(result.header("Content-Range") == nil)
        #expect(result.body == sampleData, "\(label): not the whole file")
        expectNothingLeftBehind(server)
        try expectStillServing(server)
    }

    // README: a number too large for 64 bits counts as "past the end"; ranges past the end
    // are dropped, 416 if none is left; overlapping ranges are merged.
    @Test(arguments: [
        ("bytes=0-18446744073709551615", 206, "bytes 0-99999/100000"),
        ("bytes=0-99999999999999999999999999", 206, "bytes 0-99999/100000"),
        ("bytes=18446744073709551616-", 416, "bytes */100000"),
        ("bytes=99999999999999999999999999999-99999999999999999999999999999", 416, "bytes */100000"),
        ("bytes=9223372036854775807-", 416, "bytes */100000"),
        ("bytes=9223372036854775807-9223372036854775808", 416, "bytes */100000"),
        ("bytes=-18446744073709551616", 206, "bytes 0-99999/100000"),
        ("bytes=-99999999999999999999999", 206, "bytes 0-99999/100000"),
        ("bytes=0000000000000000000000000000000000000001-0000000000000000000000000000000000000002", 206, "bytes 1-2/100000"),
        ("bytes=18446744073709551615-18446744073709551615,0-0", 206, "bytes 0-0/100000"),
        ("bytes=" + Array(repeating: "0-99", count: 50).joined(separator: ","), 206, "bytes 0-99/100000"),
    ])
    func rangesWithHugeNumbers(_ range: String, _ status: Int, _ contentRange: String) throws {
        let result = try curl(["-H", "Range: \(range)", server.url("/data.bin")])
        #expect(result.status == status, "\(range.prefix(80))")
        #expect(result.header("Content-Range") == contentRange, "\(range.prefix(80))")
        if status == 206, let parsed = ContentRange(parsing: contentRange), case .satisfied(let range, _) = parsed {
            #expect(result.body == sampleData[Int(range.first)...Int(range.last)])
        } else {
            #expect(try result.json()["error"] is String)
        }
        try expectStillServing(server)
    }
}
