#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
@testable import HTTPTransfer
import Testing

/// The byte-by-byte formatters on the request path say exactly what the slow general ones did.
@Suite("Formatting on the request path")
struct FormattingTests {
    /// What the C library writes for `seconds` as an IMF-fixdate.
    private func strftimeDate(_ seconds: Int64) -> String {
        var time = time_t(seconds)
        var parts = tm()
        gmtime_r(&time, &parts)
        var buffer = [CChar](repeating: 0, count: 64)
        let count = strftime(&buffer, buffer.count, "%a, %d %b %Y %H:%M:%S GMT", &parts)
        return String(decoding: buffer[..<count].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    @Test(arguments: [
        Int64(0), 784_111_777, 951_782_400 /* 2000-02-29 */, 1_709_164_800 /* 2024-02-29 */, 4_107_542_399,
        253_402_300_799 /* 9999-12-31 23:59:59 */, -1, 86_399, 1_798_761_600,
    ])
    func datesAreWhatStrftimeWrites(_ seconds: Int64) {
        #expect(HTTPDate(secondsSince1970: seconds).description == strftimeDate(seconds))
    }

    @Test func everyDayOfFourCenturiesIsWhatStrftimeWrites() {
        // A day at a time with a changing time of day, from 1900 to 2300: every leap rule.
        var seconds: Int64 = -2_208_988_800
        var mismatches: [Int64] = []
        while seconds < 10_413_792_000 {
            if HTTPDate(secondsSince1970: seconds).description != strftimeDate(seconds) { mismatches.append(seconds) }
            seconds += 86_400 + 3_601
        }
        #expect(mismatches.isEmpty)
    }

    @Test func earlyYearsHaveFourDigits() {
        // strftime writes year 1 as "1"; IMF-fixdate wants 4DIGIT.
        #expect(HTTPDate(secondsSince1970: -62_135_596_800).description == "Mon, 01 Jan 0001 00:00:00 GMT")
    }

    @Test func yearsPastFourDigitsKeepTheGeneralForm() {
        // 10000-01-01 00:00:00: no four-digit form exists; the general one writes it in full.
        #expect(HTTPDate(secondsSince1970: 253_402_300_800).description == "Sat, 01 Jan 10000 00:00:00 GMT")
    }

    @Test(arguments: [UInt64(0), 1, 9, 10, 15, 16, 255, 4096, 0xdead_beef, UInt64.max, 1 << 63])
    func numbersAreWhatStringRadixWrites(_ value: UInt64) {
        for radix in [2, 10, 16] {
            let written = ASCIIWriter.string(capacity: 80) { out in
                out.text("bytes ")
                out.number(value, radix: UInt64(radix))
                out.byte(0x2D)
                out.number(7, radix: UInt64(radix), minimumDigits: 3)
            }
            let seven = String(7, radix: radix)
            #expect(written == "bytes \(String(value, radix: radix))-\(String(repeating: "0", count: max(0, 3 - seven.count)) + seven)")
        }
    }

    @Test func contentRangesAreWhatRFC9110Shows() {
        #expect(ContentRange.satisfied(ByteRange(first: 42, last: 1233), completeLength: 1234).description == "bytes 42-1233/1234")
        #expect(ContentRange.satisfied(ByteRange(first: 42, last: 1233), completeLength: nil).description == "bytes 42-1233/*")
        #expect(ContentRange.unsatisfied(completeLength: 1234).description == "bytes */1234")
    }

    @Test func caseInsensitiveEqualityComparesEveryByte() {
        #expect(ASCII.equalsIgnoringCase("Content-Length", "content-length"))
        #expect(ASCII.equalsIgnoringCase("", ""))
        #expect(!ASCII.equalsIgnoringCase("Content-Length", "Content-Lengtx"))
        #expect(!ASCII.equalsIgnoringCase("If-Range", "If-Rang"))
        #expect(!ASCII.equalsIgnoringCase("é", "É"))  // only ASCII folds
        #expect(ASCII.equalsIgnoringCase("Ünï", "Ünï"))
    }
}
