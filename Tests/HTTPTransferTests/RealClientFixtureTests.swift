import Foundation
import HTTPTransfer
import Testing

/// multipart/form-data bodies captured from real clients (curl, Python requests, headless
/// Chromium, URLSession on Linux, and the hand-built bodies of the iOS tutorials in the
/// seeds), each with its expected parse computed independently of this parser. See
/// fixtures/README.md for how each one was made; fixtures/tools/capture_all.py remakes them.
@Suite("Real client fixtures")
struct RealClientFixtureTests {
    @Test("the fixture folders are found and hold the corpus")
    func fixturesArePresent() {
        #expect(validFixtureNames.count >= 10, "no fixtures found in \(fixturesDirectory.path)/multipart")
        #expect(invalidFixtureNames.count >= 5, "no fixtures found in \(fixturesDirectory.path)/multipart-invalid")
    }

    @Test("a real client's body parses to the expected parts, however it is cut", arguments: validFixtureNames)
    func parsesRealClientBody(_ name: String) throws {
        let (fixture, results) = try parseEveryWay(ValidFixture.self, in: "multipart", name)
        let expected = try fixture.parts.map { try $0.parsed() }
        for (result, chunking) in results {
            switch result {
            case .failure(let error):
                Issue.record("\(name) (\(fixture.client)), fed \(chunking): rejected: \(error)")
            case .success(let parts):
                #expect(parts.count == expected.count, "\(name), fed \(chunking): \(parts.count) parts, expected \(expected.count)")
                for (index, (got, want)) in zip(parts, expected).enumerated() {
                    let label = "\(name), fed \(chunking), part \(index + 1)"
                    #expect(got.name == want.name, "\(label): name")
                    #expect(got.filename == want.filename, "\(label): filename")
                    #expect(got.contentType == want.contentType, "\(label): content type")
                    #expect(got.headers == want.headers, "\(label): headers")
                    #expect(got.content == want.content, "\(label): content (\(got.content.count) bytes, expected \(want.content.count))")
                }
            }
        }
    }

    @Test("a broken body from a real client is refused with the expected error", arguments: invalidFixtureNames)
    func refusesBrokenBody(_ name: String) throws {
        let (fixture, results) = try parseEveryWay(InvalidFixture.self, in: "multipart-invalid", name)
        for (result, chunking) in results {
            switch result {
            case .success(let parts):
                Issue.record("\(name) (\(fixture.client)), fed \(chunking): accepted with \(parts.count) parts, expected \(fixture.error)")
            case .failure(let error):
                #expect(caseName(of: error.kind) == fixture.error, "\(name), fed \(chunking): \(error.kind), expected \(fixture.error): \(error)")
                if let part = fixture.part {
                    #expect(error.part == part, "\(name), fed \(chunking): error in part \(error.part.map(String.init) ?? "nil"), expected \(part): \(error)")
                }
            }
        }
    }
}

// MARK: - Fixture files

private let fixturesDirectory = URL(fileURLWithPath: #filePath)
    .deletingLastPathComponent()  // HTTPTransferTests
    .deletingLastPathComponent()  // Tests
    .deletingLastPathComponent()  // package root
    .appendingPathComponent("fixtures")

private let validFixtureNames = fixtureNames(in: "multipart")
private let invalidFixtureNames = fixtureNames(in: "multipart-invalid")

/// The names of the fixtures in `folder`: every `<name>.json` with a `<name>.body`.
private func fixtureNames(in folder: String) -> [String] {
    let directory = fixturesDirectory.appendingPathComponent(folder)
    let files = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
    return files.filter { $0.hasSuffix(".json") }
        .map { String($0.dropLast(".json".count)) }
        .filter { files.contains("\($0).body") }
        .sorted()
}

private func fixtureURL(_ folder: String, _ name: String, _ ext: String) -> URL {
    fixturesDirectory.appendingPathComponent(folder).appendingPathComponent("\(name).\(ext)")
}

/// What a fixture's `<name>.json` says about its `<name>.body`.
private protocol CapturedFixture: Decodable {
    /// The client that sent the body.
    var client: String { get }
    /// The request's Content-Type, with the boundary.
    var contentType: String { get }
}

/// The fixture `name` in `folder` and the distinct parses of its body however it is cut,
/// expecting them all to agree.
private func parseEveryWay<Fixture: CapturedFixture>(
    _ type: Fixture.Type, in folder: String, _ name: String
) throws -> (fixture: Fixture, results: [(result: Result<[ParsedFormPart], MultipartError>, chunking: Chunking)]) {
    let fixture = try JSONDecoder().decode(Fixture.self, from: Data(contentsOf: fixtureURL(folder, name, "json")))
    let body = try [UInt8](Data(contentsOf: fixtureURL(folder, name, "body")))
    let boundary = try MultipartBoundary(contentType: fixture.contentType)
    let results = distinctResults(body, boundary: boundary.value)
    #expect(results.count == 1, "\(name): \(results.count) different results depending on how the body is cut: \(results.map { "\($0.chunking): \($0.result)" })")
    return (fixture, results)
}

private struct ValidFixture: CapturedFixture {
    var client: String
    var contentType: String
    var parts: [ExpectedPart]
}

private struct ExpectedPart: Decodable {
    var name: String
    var filename: String?
    var contentType: String
    var headers: [[String]]
    var contentBase64: String

    func parsed() throws -> ParsedFormPart {
        guard let content = Data(base64Encoded: contentBase64) else {
            throw FixtureError("part \(name): contentBase64 is not base64")
        }
        let fields = try headers.map { pair -> MultipartHeaders.Field in
            guard pair.count == 2 else { throw FixtureError("part \(name): a header is not a [name, value] pair") }
            return MultipartHeaders.Field(name: pair[0], value: pair[1])
        }
        return ParsedFormPart(name: name, filename: filename, contentType: contentType, headers: fields,
                              content: [UInt8](content))
    }
}

private struct InvalidFixture: CapturedFixture {
    var client: String
    var contentType: String
    /// A `MultipartError.Kind` case name.
    var error: String
    var part: Int?
}

private struct FixtureError: Error, CustomStringConvertible {
    var description: String
    init(_ description: String) { self.description = description }
}

/// `truncated(Location.data)` → `truncated`.
private func caseName(of kind: MultipartError.Kind) -> String {
    String(String(describing: kind).prefix { $0 != "(" })
}

// MARK: - Chunkings

/// The distinct parses of `body` over the ways of cutting it: every split point for a
/// small body (`parseFormEveryWay`); for one over 20 KB, where that is quadratic, whole,
/// in 1, 7 and 4096-byte chunks, and split at ~200 evenly spaced points.
private func distinctResults(
    _ body: [UInt8], boundary: String
) -> [(result: Result<[ParsedFormPart], MultipartError>, chunking: Chunking)] {
    if body.count <= 20_000 { return parseFormEveryWay(body, boundary: boundary) }
    let splits = (0...200).map { Chunking.split(at: body.count * $0 / 200) }
    var distinct: [(result: Result<[ParsedFormPart], MultipartError>, chunking: Chunking)] = []
    for chunking in [.whole, .every(1), .every(7), .every(4096)] + splits {
        let result = parseForm(body, boundary: boundary, chunking: chunking)
        if !distinct.contains(where: { $0.result == result }) { distinct.append((result, chunking)) }
    }
    return distinct
}
