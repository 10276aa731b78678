import Counterpart
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing

// The fixture catalogue (fixtures/files, described by fixtures/manifest.json; see
// fixtures/README.md): files a client's tests can rely on, served as they are by
// `counterpart --root fixtures/files`. These tests hold the manifest to the files on disk
// and to what the server sends for each of them.

/// The repository's `fixtures` folder.
let catalogueFixtures = repositoryRoot.appendingPathComponent("fixtures")
let catalogueFolder = catalogueFixtures.appendingPathComponent("files")

/// One line of fixtures/manifest.json.
struct CatalogueEntry: Codable, Sendable, CustomTestStringConvertible {
    var name: String
    var size: Int
    var sha256: String
    var contentType: String

    var testDescription: String { name }
    var file: URL { catalogueFolder.appendingPathComponent(name) }
}

struct CatalogueManifest: Codable {
    var files: [CatalogueEntry]
}

func readCatalogueManifest() throws -> CatalogueManifest {
    try JSONDecoder().decode(CatalogueManifest.self, from: Data(contentsOf: catalogueFixtures.appendingPathComponent("manifest.json")))
}

/// The manifest's entries, the arguments of the tests below. Empty if the manifest cannot
/// be read, which `theManifestIsWellFormed` reports.
let catalogueEntries: [CatalogueEntry] = (try? readCatalogueManifest().files) ?? []

/// Percent-encodes every byte of the UTF-8 name but RFC 3986's unreserved characters.
func cataloguePathEncoded(_ name: String) -> String {
    var out = ""
    for byte in name.utf8 {
        switch byte {
        case 0x30...0x39, 0x41...0x5A, 0x61...0x7A, 0x2D, 0x2E, 0x5F, 0x7E:
            out.unicodeScalars.append(Unicode.Scalar(byte))
        default:
            out += String(format: "%%%02X", byte)
        }
    }
    return out
}

/// The names of `found` that are not in `expected`, and those of `expected` not found,
/// compared byte for byte (String's == takes NFC and NFD spellings as equal).
func catalogueDifference(_ found: [String], _ expected: [String]) -> (extra: [String], missing: [String]) {
    let foundBytes = Set(found.map { Array($0.utf8) })
    let expectedBytes = Set(expected.map { Array($0.utf8) })
    return (found.filter { !expectedBytes.contains(Array($0.utf8)) }.sorted(),
            expected.filter { !foundBytes.contains(Array($0.utf8)) }.sorted())
}

/// A server whose root is the repository's fixtures/files (served in place, nothing
/// copied) and whose uploads go to a temporary folder; stopped when the value goes away.
final class CatalogueServer: Sendable {
    let server: CounterpartServer
    private let uploads: URL

    init() throws {
        uploads = FileManager.default.temporaryDirectory.appendingPathComponent("counterpart-catalogue-\(UUID().uuidString)")
        server = try CounterpartServer(Configuration(root: catalogueFolder.path, uploads: uploads.path))
    }

    deinit {
        server.stop(grace: .seconds(1))
        try? FileManager.default.removeItem(at: uploads)
    }

    func url(_ name: String) -> String { server.baseURL.absoluteString + "/" + cataloguePathEncoded(name) }
}

@Suite("Fixture catalogue: the manifest and the files on disk")
struct FixtureCatalogueManifestTests {
    @Test func theManifestIsWellFormed() throws {
        let entries = try readCatalogueManifest().files
        #expect(!entries.isEmpty)
        let names = entries.map { Array($0.name.utf8) }
        // In byte order of the UTF-8 names, each once.
        #expect(names == names.sorted { $0.lexicographicallyPrecedes($1) })
        #expect(Set(names).count == names.count)
        for entry in entries {
            #expect(entry.sha256.count == 64 && entry.sha256.allSatisfy { "0123456789abcdef".contains($0) }, "\(entry.name)")
            #expect(entry.size >= 0)
            // NFC, byte for byte (String's == would take NFC and NFD as equal).
            #expect(Array(entry.name.precomposedStringWithCanonicalMapping.utf8) == Array(entry.name.utf8), "\(entry.name) is not NFC")
        }
    }

    @Test func theManifestNamesExactlyTheFilesOnDisk() throws {
        let onDisk = try FileManager.default.contentsOfDirectory(atPath: catalogueFolder.path)
        let (extra, missing) = catalogueDifference(onDisk, catalogueEntries.map(\.name))
        #expect(extra.isEmpty, "on disk but not in the manifest: \(extra)")
        #expect(missing.isEmpty, "in the manifest but not on disk: \(missing)")
    }

    @Test(arguments: catalogueEntries)
    func theFileOnDiskHasTheManifestsSizeAndDigest(_ entry: CatalogueEntry) throws {
        let data = try Data(contentsOf: entry.file)
        #expect(data.count == entry.size)
        #expect(try sha256(data) == entry.sha256)
    }

    @Test func theRandomFileIsSplitMix64FromSeed1() throws {
        // As fixtures/README.md documents it: the generator's UInt64s, little-endian.
        let data = try Data(contentsOf: catalogueFolder.appendingPathComponent("random-5MiB.bin"))
        #expect(data.count == 5 << 20)
        var state: UInt64 = 1
        var expected = [UInt8]()
        expected.reserveCapacity(5 << 20)
        while expected.count < 5 << 20 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            z ^= z >> 31
            withUnsafeBytes(of: z.littleEndian) { expected += $0 }
        }
        #expect(data == Data(expected))
    }

    @Test(arguments: [("photo.png", 256, 256), ("\u{7167}\u{7247} 2024.png", 64, 48)])
    func thePNGsArePNGs(_ name: String, _ width: Int, _ height: Int) throws {
        let data = try [UInt8](Data(contentsOf: catalogueFolder.appendingPathComponent(name)))
        #expect(data.prefix(8) == [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A])
        #expect(data[12..<16] == Array("IHDR".utf8)[...])
        let be32 = { (at: Int) in data[at..<at + 4].reduce(0) { $0 << 8 | Int($1) } }
        #expect(be32(16) == width)
        #expect(be32(20) == height)
        #expect(data.suffix(8) == Array("IEND".utf8) + [0xAE, 0x42, 0x60, 0x82])
    }

    @Test func theJPEGIsABaselineJPEG() throws {
        let data = try [UInt8](Data(contentsOf: catalogueFolder.appendingPathComponent("photo.jpg")))
        #expect(data.prefix(2) == [0xFF, 0xD8])
        #expect(data.suffix(2) == [0xFF, 0xD9])
        // Walk the marker segments up to the frame header: SOF0 (baseline), 256×256, 3 components.
        var at = 2
        var frame: (marker: UInt8, height: Int, width: Int, components: Int)?
        while at + 4 <= data.count, data[at] == 0xFF, frame == nil {
            let marker = data[at + 1]
            let length = Int(data[at + 2]) << 8 | Int(data[at + 3])
            if (0xC0...0xCF).contains(marker), ![0xC4, 0xC8, 0xCC].contains(marker) {
                frame = (marker, Int(data[at + 5]) << 8 | Int(data[at + 6]), Int(data[at + 7]) << 8 | Int(data[at + 8]), Int(data[at + 9]))
            }
            at += 2 + length
        }
        let found = try #require(frame)
        #expect(found.marker == 0xC0)
        #expect(found.width == 256 && found.height == 256 && found.components == 3)
    }
}

@Suite("Fixture catalogue: served by counterpart --root fixtures/files")
struct FixtureCatalogueServingTests {
    let server: CatalogueServer
    init() throws { server = try CatalogueServer() }

    @Test(arguments: catalogueEntries)
    func getSendsTheManifestsBytesAndType(_ entry: CatalogueEntry) throws {
        let result = try curl([server.url(entry.name)])
        #expect(result.status == 200)
        #expect(result.body.count == entry.size)
        #expect(try sha256(result.body) == entry.sha256)
        #expect(result.header("Content-Type") == entry.contentType)
        #expect(result.header("Content-Length") == String(entry.size))
        #expect(result.header("Accept-Ranges") == "bytes")
    }

    @Test(arguments: catalogueEntries)
    func headGivesTheManifestsLengthAndType(_ entry: CatalogueEntry) throws {
        let result = try curl(["--head", server.url(entry.name)])
        #expect(result.status == 200)
        #expect(result.header("Content-Length") == String(entry.size))
        #expect(result.header("Content-Type") == entry.contentType)
    }

    @Test(arguments: catalogueEntries)
    func aRangeOfTheMiddleThirdIsThoseBytes(_ entry: CatalogueEntry) throws {
        guard entry.size > 0 else {
            // RFC 9110 §14.1.1: no range of an empty file is satisfiable.
            let result = try curl(["-H", "Range: bytes=0-0", server.url(entry.name)])
            #expect(result.status == 416)
            #expect(result.header("Content-Range") == "bytes */0")
            return
        }
        let first = entry.size / 3
        let last = max(first, 2 * entry.size / 3 - 1)
        let result = try curl(["-H", "Range: bytes=\(first)-\(last)", server.url(entry.name)])
        #expect(result.status == 206)
        #expect(result.header("Content-Range") == "bytes \(first)-\(last)/\(entry.size)")
        #expect(result.header("Content-Length") == String(last - first + 1))
        #expect(result.header("Content-Type") == entry.contentType)
        let file = try Data(contentsOf: entry.file)
        #expect(result.body == file[first...last])
    }

    @Test(arguments: catalogueEntries)
    func urlSessionFetchesItByItsName(_ entry: CatalogueEntry) async throws {
        // As a client test would build the URL: Foundation does the percent-encoding.
        let url = server.server.baseURL.appendingPathComponent(entry.name)
        let (data, response) = try await makeSession().data(from: url)
        let http = try #require(response as? HTTPURLResponse)
        #expect(http.statusCode == 200)
        #expect(data.count == entry.size)
        #expect(try sha256(data) == entry.sha256)
        #expect(http.header("Content-Type") == entry.contentType)
    }

    @Test func theJSONListingOfTheRootIsTheManifest() throws {
        let listed = try jsonListing(server.url(""), of: "/")
        let names = listed.map { $0["name"] as? String ?? "" }
        #expect(names.count == catalogueEntries.count)
        let (extra, missing) = catalogueDifference(names, catalogueEntries.map(\.name))
        #expect(extra.isEmpty, "listed but not in the manifest: \(extra)")
        #expect(missing.isEmpty, "in the manifest but not listed: \(missing)")
        for entry in catalogueEntries {
            let item = try #require(listed.first { ($0["name"] as? String).map { Array($0.utf8) } == Array(entry.name.utf8) },
                                    "\(entry.name) is not listed")
            #expect(item["type"] as? String == "file", "\(entry.name)")
            #expect(item["size"] as? Int == entry.size, "\(entry.name)")
            #expect(item["url"] as? String == "/" + cataloguePathEncoded(entry.name), "\(entry.name)")
        }
    }
}
