import HTTPTransfer
import Testing

@Suite("Entity tags, dates and preconditions")
struct ValidatorTests {
    // RFC 9110 §8.8.3.2, the comparison table.
    @Test(arguments: [
        ("W/\"1\"", "W/\"1\"", false, true),
        ("W/\"1\"", "W/\"2\"", false, false),
        ("W/\"1\"", "\"1\"", false, true),
        ("\"1\"", "\"1\"", true, true),
    ])
    func comparesAsRFC9110Says(_ a: String, _ b: String, _ strong: Bool, _ weak: Bool) throws {
        let first = try #require(EntityTag(parsing: a))
        let second = try #require(EntityTag(parsing: b))
        #expect(first.strongMatches(second) == strong)
        #expect(first.weakMatches(second) == weak)
    }

    @Test(arguments: ["\"xyzzy\"", "W/\"xyzzy\"", "\"\"", "\"a!#~\u{80}\""])
    func parsesAndFormatsEntityTags(_ text: String) throws {
        #expect(try #require(EntityTag(parsing: text)).description == text)
    }

    @Test(arguments: ["xyzzy", "\"unterminated", "w/\"lower\"", "\"a\"b", "\"sp ace\"", "W/", "\"a\"\"b\""])
    func rejectsMalformedEntityTags(_ text: String) {
        #expect(EntityTag(parsing: text) == nil)
    }

    @Test func parsesTagLists() {
        #expect(EntityTagCondition(parsing: " * ") == .any)
        #expect(EntityTagCondition(parsing: "\"a\", W/\"b\" ,\"c\"") ==
            .tags([EntityTag("a")!, EntityTag("b", weak: true)!, EntityTag("c")!]))
        // Reading stops at the first member that is not a tag.
        #expect(EntityTagCondition(parsing: "\"a\", junk, \"c\"") == .tags([EntityTag("a")!]))
        #expect(EntityTagCondition(parsing: "junk") == .tags([]))
    }

    // RFC 9110 §5.6.7: the three forms of the same instant.
    @Test(arguments: ["Sun, 06 Nov 1994 08:49:37 GMT", "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994"])
    func parsesTheThreeDateForms(_ text: String) {
        #expect(HTTPDate(parsing: text)?.secondsSince1970 == 784_111_777)
    }

    @Test(arguments: [
        (Int64(0), "Thu, 01 Jan 1970 00:00:00 GMT"),
        (784_111_777, "Sun, 06 Nov 1994 08:49:37 GMT"),
        (951_782_400, "Tue, 29 Feb 2000 00:00:00 GMT"),
        (4_102_444_799, "Thu, 31 Dec 2099 23:59:59 GMT"),
        (-1, "Wed, 31 Dec 1969 23:59:59 GMT"),
    ])
    func formatsIMFFixdate(_ seconds: Int64, _ text: String) {
        let date = HTTPDate(secondsSince1970: seconds)
        #expect(date.description == text)
        #expect(HTTPDate(parsing: text) == date)
    }

    @Test func twoDigitYearsMoreThan50YearsAheadAreInThePastCentury() {
        let now = HTTPDate(parsing: "Mon, 30 Nov 2026 00:00:00 GMT")!
        #expect(HTTPDate(parsing: "Wednesday, 01-Jan-76 00:00:00 GMT", now: now)?.description == "Wed, 01 Jan 2076 00:00:00 GMT")
        #expect(HTTPDate(parsing: "Saturday, 01-Jan-77 00:00:00 GMT", now: now)?.description == "Sat, 01 Jan 1977 00:00:00 GMT")
    }

    @Test(arguments: [
        "", "Sun, 06 Nov 1994 08:49:37", "Sun, 06 Nov 1994 08:49:37 UTC", "Sun, 6 Nov 1994 08:49:37 GMT",
        "Sun, 31 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1994 24:00:00 GMT", "Sun, 06 Foo 1994 08:49:37 GMT",
        "Sun, 29 Feb 1900 00:00:00 GMT", "1994-11-06T08:49:37Z", "Sun, 06 Nov 1994 8:49:37 GMT", "Xyz, 06 Nov 1994 08:49:37 GMT",
        // found by fuzz-headers: signs passed Int(_:)
        "Sun, 06 Nov 1994 -1:49:37 GMT", "Sun, 06 Nov 1994 +1:49:37 GMT", "Sun, +6 Nov 1994 08:49:37 GMT",
        "Sun, 06 Nov +994 08:49:37 GMT", "Sunday, -6-Nov-94 08:49:37 GMT", "Sun Nov -6 08:49:37 1994",
    ])
    func rejectsInvalidDates(_ text: String) {
        #expect(HTTPDate(parsing: text) == nil)
    }

    @Test func readsALeapSecondAsTheMinutesLastSecond() {
        #expect(HTTPDate(parsing: "Sat, 31 Dec 2016 23:59:60 GMT")?.description == "Sat, 31 Dec 2016 23:59:59 GMT")
    }
}

struct PreconditionCase: CustomTestStringConvertible, Sendable {
    var rule: String
    var request: ConditionalRequest
    var expected: ConditionalRequest.Decision
    var testDescription: String { rule }
}

private let modified = "Sun, 06 Nov 1994 08:49:37 GMT"
private let earlier = "Sat, 05 Nov 1994 08:49:37 GMT"
private let later = "Mon, 07 Nov 1994 08:49:37 GMT"
private let validators = Validators(entityTag: EntityTag("v1"), lastModified: HTTPDate(parsing: modified))

private let preconditionCases: [PreconditionCase] = [
    .init(rule: "no conditions", request: .init(method: "GET"), expected: .proceed),
    .init(rule: "If-Match with the current tag", request: .init(method: "GET", ifMatch: "\"v1\""), expected: .proceed),
    .init(rule: "If-Match with another tag", request: .init(method: "GET", ifMatch: "\"v0\", \"v2\""), expected: .preconditionFailed),
    .init(rule: "If-Match uses strong comparison", request: .init(method: "GET", ifMatch: "W/\"v1\""), expected: .preconditionFailed),
    .init(rule: "If-Match: * matches an existing representation", request: .init(method: "GET", ifMatch: "*"), expected: .proceed),
    .init(rule: "an unreadable If-Match fails", request: .init(method: "GET", ifMatch: "v1"), expected: .preconditionFailed),
    .init(rule: "If-Unmodified-Since before the modification", request: .init(method: "GET", ifUnmodifiedSince: earlier), expected: .preconditionFailed),
    .init(rule: "If-Unmodified-Since at the modification", request: .init(method: "GET", ifUnmodifiedSince: modified), expected: .proceed),
    .init(rule: "If-Unmodified-Since is ignored when If-Match is present", request: .init(method: "GET", ifMatch: "\"v1\"", ifUnmodifiedSince: earlier), expected: .proceed),
    .init(rule: "an invalid If-Unmodified-Since is ignored", request: .init(method: "GET", ifUnmodifiedSince: "yesterday"), expected: .proceed),
    .init(rule: "If-None-Match with the current tag: 304", request: .init(method: "GET", ifNoneMatch: "\"v1\""), expected: .notModified),
    .init(rule: "If-None-Match uses weak comparison", request: .init(method: "HEAD", ifNoneMatch: "W/\"v1\""), expected: .notModified),
    .init(rule: "If-None-Match: * on GET", request: .init(method: "GET", ifNoneMatch: "*"), expected: .notModified),
    .init(rule: "If-None-Match with another tag", request: .init(method: "GET", ifNoneMatch: "\"v0\""), expected: .proceed),
    .init(rule: "If-None-Match matching on another method: 412", request: .init(method: "POST", ifNoneMatch: "\"v1\""), expected: .preconditionFailed),
    .init(rule: "If-Modified-Since at the modification: 304", request: .init(method: "GET", ifModifiedSince: modified), expected: .notModified),
    .init(rule: "If-Modified-Since after the modification: 304", request: .init(method: "GET", ifModifiedSince: later), expected: .notModified),
    .init(rule: "If-Modified-Since before the modification", request: .init(method: "GET", ifModifiedSince: earlier), expected: .proceed),
    .init(rule: "If-Modified-Since is ignored when If-None-Match is present", request: .init(method: "GET", ifNoneMatch: "\"v0\"", ifModifiedSince: later), expected: .proceed),
    .init(rule: "If-Modified-Since is ignored on POST", request: .init(method: "POST", ifModifiedSince: later), expected: .proceed),
    .init(rule: "If-Match failing wins over If-None-Match", request: .init(method: "GET", ifMatch: "\"v0\"", ifNoneMatch: "\"v1\""), expected: .preconditionFailed),
    .init(rule: "If-Range with the current tag", request: .init(method: "GET", ifRange: "\"v1\"", hasRange: true), expected: .proceed),
    .init(rule: "If-Range with another tag: the whole file", request: .init(method: "GET", ifRange: "\"v0\"", hasRange: true), expected: .ignoreRange),
    .init(rule: "If-Range with a weak tag never matches", request: .init(method: "GET", ifRange: "W/\"v1\"", hasRange: true), expected: .ignoreRange),
    .init(rule: "If-Range with the exact date", request: .init(method: "GET", ifRange: modified, hasRange: true), expected: .proceed),
    .init(rule: "If-Range with another date", request: .init(method: "GET", ifRange: later, hasRange: true), expected: .ignoreRange),
    .init(rule: "If-Range that is neither tag nor date", request: .init(method: "GET", ifRange: "garbage", hasRange: true), expected: .ignoreRange),
    .init(rule: "If-Range without Range is ignored", request: .init(method: "GET", ifRange: "\"v0\""), expected: .proceed),
    .init(rule: "If-Range on HEAD is ignored", request: .init(method: "HEAD", ifRange: "\"v0\"", hasRange: true), expected: .proceed),
    .init(rule: "304 comes before If-Range", request: .init(method: "GET", ifNoneMatch: "\"v1\"", ifRange: "\"v0\"", hasRange: true), expected: .notModified),
]

@Suite("Preconditions (RFC 9110 §13.2.2)")
struct PreconditionTests {
    @Test(arguments: preconditionCases)
    func evaluates(_ testCase: PreconditionCase) {
        #expect(testCase.request.evaluate(validators) == testCase.expected)
    }

    @Test func aRepresentationWithoutValidators() {
        let none = Validators()
        #expect(ConditionalRequest(method: "GET", ifMatch: "\"v1\"").evaluate(none) == .preconditionFailed)
        #expect(ConditionalRequest(method: "GET", ifMatch: "*").evaluate(none) == .proceed)
        #expect(ConditionalRequest(method: "GET", ifModifiedSince: later).evaluate(none) == .proceed)
        #expect(ConditionalRequest(method: "GET", ifRange: modified, hasRange: true).evaluate(none) == .ignoreRange)
    }
}
