import Counterpart
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPTransfer
import Testing

/// SplitMix64's finaliser, written out apart from the server's.
func splitMix(_ value: UInt64) -> UInt64 {
    var z = value
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
}

@Suite("Resources that change on command")
struct ChangingResourceTests {
    @Test func eachVersionIsOtherBytesWithItsOwnValidators() throws {
        let server = try makeStaticServer()
        let today = try curl([server.url("/bytes/1000?seed=1")])
        let zero = try curl([server.url("/bytes/1000?seed=1&version=0")])
        let one = try curl([server.url("/bytes/1000?seed=1&version=1")])
        #expect(today.body == zero.body && today.header("ETag") == zero.header("ETag"))
        #expect(today.header("ETag") == "\"bytes-3e8-1\"")
        #expect(one.header("ETag") == "\"bytes-3e8-1-v1\"")
        #expect(today.header("Last-Modified") == "Mon, 30 Nov 2026 00:00:00 GMT")
        #expect(one.header("Last-Modified") == "Mon, 30 Nov 2026 00:00:01 GMT")
        #expect([UInt8](one.body) == GeneratedBytes(seed: 1, version: 1).bytes(from: 0, count: 1000))
        #expect(one.body != today.body)
        // The documented formula: version V is the stream of mix(seed + V · 0xD1B54A32D192ED03).
        let key = splitMix(1 &+ 1 &* 0xD1B5_4A32_D192_ED03)
        let firstWord = splitMix(key &+ 0x9E37_79B9_7F4A_7C15)
        #expect([UInt8](one.body.prefix(8)) == (0..<8).map { UInt8(truncatingIfNeeded: firstWord >> (8 * $0)) })
        #expect(try curl([server.url("/bytes/10?version=x")]).status == 400)
        #expect(try curl([server.url("/bytes/10?change-after=0")]).status == 400)
    }

    @Test func changeAfterRaisesTheVersionEveryKRequestsAndClearingStartsOver() throws {
        let server = try makeStaticServer()
        let url = server.url("/bytes/100?seed=2&change-after=2")
        // Range or not, a fault in the query or not: the same resource, counted.
        let tags = try [[url], ["-r", "0-9", url], [url + "&delay=1"], ["--head", url], [url]].map { try curl($0).header("ETag") ?? "" }
        #expect(tags == ["\"bytes-64-2\"", "\"bytes-64-2\"", "\"bytes-64-2-v1\"", "\"bytes-64-2-v1\"", "\"bytes-64-2-v2\""])
        #expect(try curl([server.url("/bytes/100?seed=2&change-after=2&version=5")]).header("ETag") == "\"bytes-64-2-v5\"")
        #expect(try curl(["-X", "DELETE", server.url("/__counterpart/faults")]).status == 204)
        #expect(try curl([url]).header("ETag") == "\"bytes-64-2\"")
    }

    /// The file changes between a cut download and its resume. curl -C - resumes with
    /// Range alone and splices two versions; a client that sends If-Range gets the new
    /// file whole.
    @Test func aResumerWithoutIfRangeSplicesAndOneWithIfRangeGetsTheNewFile() async throws {
        let server = try makeStaticServer()
        let target = "/bytes/200000?seed=4&change-after=1"
        let old = GeneratedBytes(seed: 4).sha256(from: 0, count: 200_000)
        let new = GeneratedBytes(seed: 4, version: 1).sha256(from: 0, count: 200_000)

        try server.server.faults.arm(method: "GET", path: "/bytes/200000", fault: "cut=50000", times: 1)
        let file = try temporaryFile("spliced.bin", Data())
        let first = try runCommand("/usr/bin/curl", ["-s", "-o", file, server.url(target)])
        #expect(first.status == 18)
        let resumed = try runCommand("/usr/bin/curl", ["-s", "-C", "-", "-o", file, server.url(target)])
        #expect(resumed.status == 0)
        let spliced = try Data(contentsOf: URL(fileURLWithPath: file))
        #expect(spliced.count == 200_000)
        let splicedHash = try sha256(spliced)
        #expect(splicedHash != old && splicedHash != new, "curl -C - got a file of two versions: the bug the fixture exposes")

        server.server.faults.clear()
        try server.server.faults.arm(method: "GET", path: "/bytes/200000", fault: "cut=50000", times: 1)
        let cut = try curl([server.url(target)])
        let tag = try #require(cut.header("ETag"))
        var request = URLRequest(url: URL(string: server.url(target))!)
        request.setValue("bytes=\(cut.body.count)-", forHTTPHeaderField: "Range")
        request.setValue(tag, forHTTPHeaderField: "If-Range")
        let (rest, response) = try await makeSession().data(for: request)
        let status = (response as? HTTPURLResponse)?.statusCode
        #expect(status == 200, "If-Range with the old ETag: the whole new file")
        let whole = status == 206 ? cut.body + rest : rest
        #expect(try sha256(whole) == new)
    }

    @Test func touchGivesAServedFileNewValidators() throws {
        let server = try makeStaticServer()
        let before = try curl([server.url("/hello.txt")])
        let touched = try curl(["-X", "POST", server.url("/__counterpart/touch?path=/hello.txt")])
        #expect(touched.status == 200, "\(touched.text)")
        let answer = try touched.json()
        let after = try curl([server.url("/hello.txt")])
        #expect(answer["etag"] as? String == after.header("ETag") && after.header("ETag") != before.header("ETag"))
        #expect(answer["lastModified"] as? String == after.header("Last-Modified"))
        let beforeDate = try #require(HTTPDate(parsing: before.header("Last-Modified") ?? ""))
        let afterDate = try #require(HTTPDate(parsing: after.header("Last-Modified") ?? ""))
        #expect(beforeDate < afterDate)
        #expect(after.body == before.body)
        // A resume with If-Range of the old tag gets the whole file.
        let resumed = try curl(["-r", "2-", "-H", "If-Range: \(before.header("ETag") ?? "")", server.url("/hello.txt")])
        #expect(resumed.status == 200 && resumed.body == before.body)
        // An uploaded file too.
        let path = try temporaryFile("up.txt", Data("uploaded".utf8))
        #expect(try curl(["-F", "f=@\(path)", server.url("/upload")]).status == 200)
        let uploaded = try curl(["-X", "POST", server.url("/__counterpart/touch?path=/uploads/up.txt")])
        let served = try curl([server.url("/uploads/up.txt")])
        #expect(uploaded.status == 200)
        #expect(try uploaded.json()["etag"] as? String == served.header("ETag"))
    }

    @Test func touchReachesOnlyWhatAGetWould() throws {
        // A name that only an upload in progress has is never served, in the root either.
        let server = try TestServer(serving: [".counterpart-1-1.part": Data("partial".utf8), "site/.hidden": Data("h".utf8)])
        #expect(try curl([server.url("/.counterpart-1-1.part")]).status == 404)
        #expect(try curl(["-X", "POST", server.url("/__counterpart/touch?path=/.counterpart-1-1.part")]).status == 404)
        // Hidden names are served from the root (not from /uploads/), so touched there too.
        #expect(try curl([server.url("/site/.hidden")]).status == 200)
        #expect(try curl(["-X", "POST", server.url("/__counterpart/touch?path=/site/.hidden")]).status == 200)
    }

    @Test(arguments: [("POST", "?path=/missing.txt", 404), ("POST", "", 400), ("POST", "?path=", 400), ("GET", "?path=/hello.txt", 405),
                      ("POST", "?path=/list", 404), ("POST", "?path=/../etc/passwd", 400), ("POST", "?path=/uploads/.counterpart-1-1.part", 404)])
    func touchRefusesWhatIsNotAServedFile(_ method: String, _ query: String, _ status: Int) throws {
        let server = try makeStaticServer()
        let result = try curl(["-X", method, server.url("/__counterpart/touch" + query)])
        #expect(result.status == status, "\(result.text)")
        #expect(try result.json()["error"] is String)
    }
}
