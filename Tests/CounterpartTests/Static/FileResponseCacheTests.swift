@testable import Counterpart
import Foundation
import HTTPTransfer
import Testing

/// A file written into `folder` and opened, with what `fstat` says of it.
private func writeAndOpen(_ bytes: [UInt8], _ name: String, in folder: URL) throws -> (OpenFile, FileIdentity) {
    let path = folder.appendingPathComponent(name).path
    try Data(bytes).write(to: URL(fileURLWithPath: path))
    let descriptor = open(path, O_RDONLY)
    try #require(descriptor >= 0)
    var info = stat()
    try #require(fstat(descriptor, &info) == 0)
    return (OpenFile(descriptor), FileIdentity(info))
}

/// Facts as the static files work them out.
private let facts = FileResponseCache.Facts(
    validators: RepresentationValidators(entityTag: EntityTag(checkedOpaque: "t"), lastModified: HTTPDate(secondsSince1970: 0)),
    contentType: "text/plain")

extension FileResponseCache {
    /// The kept plain answer for `path`, if it is the file `identity` describes.
    func answer(at path: String, identity: FileIdentity) -> Response? {
        if case .answer(let kept) = known(at: path, identity: identity, answerWanted: true) { return kept.response }
        return nil
    }
}

/// A 200 such as the static files make, before its bytes are kept.
private func plainResponse(length: Int, tag: String) -> Response {
    Response(status: 200, headers: [HTTPField(name: "ETag", value: "\"\(tag)\""), HTTPField(name: "Content-Type", value: "text/plain")],
             body: .bytes([]))
}

/// The kept answers on their own: when a file is kept, when it is found, what is let go.
/// The clock is handed in, so that "settled" needs no waiting here.
@Suite("Static files: the small-file cache")
struct FileResponseCacheTests {
    let folder: URL
    init() throws { folder = try makeTemporaryFolder("file-cache") }

    @Test func aSettledFileIsKeptWithItsBytesAndFoundAgain() throws {
        let cache = FileResponseCache()
        let bytes = testBytes(count: 5_000).map { $0 }
        let (file, identity) = try writeAndOpen(bytes, "a.bin", in: folder)
        let kept = try #require(cache.keep(plainResponse(length: 5_000, tag: "a"), of: file, facts: facts, at: "a.bin", identity: identity,
                                           now: identity.changed.seconds + 2))
        guard case .bytes(let sent) = kept.body else { Issue.record("not from memory: \(kept.body)"); return }
        #expect(sent == bytes)
        #expect(kept.headers == plainResponse(length: 5_000, tag: "a").headers)
        let found = try #require(cache.answer(at: "a.bin", identity: identity))
        #expect(found.status == 200 && found.headers == kept.headers && found.bodyLength == 5_000)
        #expect(found.reusable != nil && found.reusable === kept.reusable)
        #expect(cache.usage == (1, 5_000))
    }

    @Test func aFileThatChangedWithinTheLastSecondIsNotKept() throws {
        let cache = FileResponseCache()
        let (file, identity) = try writeAndOpen([1, 2, 3], "fresh.txt", in: folder)
        #expect(cache.keep(plainResponse(length: 3, tag: "f"), of: file, facts: facts, at: "fresh.txt", identity: identity,
                           now: identity.changed.seconds + 1) == nil)
        #expect(cache.keep(plainResponse(length: 3, tag: "f"), of: file, facts: facts, at: "fresh.txt", identity: identity) == nil)
        #expect(cache.usage == (0, 0))
    }

    @Test func aFileThatChangesWhileItIsReadIsNotKept() throws {
        let cache = FileResponseCache()
        let (file, identity) = try writeAndOpen(Array(repeating: 0x61, count: 100), "moving.txt", in: folder)
        // Rewritten between the request's fstat and the cache's read: the read would hold
        // the new bytes under the old validators.
        try Data(repeating: 0x62, count: 100).write(to: folder.appendingPathComponent("moving.txt"))
        #expect(cache.keep(plainResponse(length: 100, tag: "m"), of: file, facts: facts, at: "moving.txt", identity: identity,
                           now: identity.changed.seconds + 2) == nil)
        #expect(cache.usage.files == 0)
    }

    @Test func anyOtherIdentityMisses() throws {
        let cache = FileResponseCache()
        let (file, identity) = try writeAndOpen(Array(repeating: 7, count: 10), "b.bin", in: folder)
        _ = try #require(cache.keep(plainResponse(length: 10, tag: "b"), of: file, facts: facts, at: "b.bin", identity: identity,
                                    now: identity.changed.seconds + 2))
        var changes: [FileIdentity] = []
        for change in 0..<5 {
            var other = identity
            switch change {
            case 0: other.size += 1
            case 1: other.modified.nanoseconds += 1
            case 2: other.changed.seconds += 1
            case 3: other.inode += 1
            default: other.device += 1
            }
            changes.append(other)
        }
        for other in changes { #expect(cache.answer(at: "b.bin", identity: other) == nil) }
        #expect(cache.answer(at: "c.bin", identity: identity) == nil)
        #expect(cache.answer(at: "b.bin", identity: identity) != nil)
    }

    @Test func filesLargerThanTheInMemoryLimitAreNotKept() throws {
        let cache = FileResponseCache()
        let size = FileResponseCache.maxFileBytes + 1
        let (file, identity) = try writeAndOpen(Array(repeating: 1, count: size), "big.bin", in: folder)
        #expect(cache.keep(plainResponse(length: size, tag: "g"), of: file, facts: facts, at: "big.bin", identity: identity,
                           now: identity.changed.seconds + 2) == nil)
    }

    @Test func theCapacityHoldsByLettingOlderFilesGo() throws {
        let cache = FileResponseCache(capacityBytes: 10_000)
        for index in 0..<5 {
            let (file, identity) = try writeAndOpen(Array(repeating: UInt8(index), count: 4_000), "\(index).bin", in: folder)
            _ = try #require(cache.keep(plainResponse(length: 4_000, tag: "\(index)"), of: file, facts: facts, at: "\(index).bin",
                                        identity: identity, now: identity.changed.seconds + 2))
            #expect(cache.usage.bytes <= 10_000)
        }
        #expect(cache.usage == (2, 8_000))
    }

    @Test func keepingAPathAgainReplacesItsEntry() throws {
        let cache = FileResponseCache()
        let (first, firstIdentity) = try writeAndOpen(Array(repeating: 1, count: 300), "same.txt", in: folder)
        _ = cache.keep(plainResponse(length: 300, tag: "1"), of: first, facts: facts, at: "same.txt", identity: firstIdentity, now: firstIdentity.changed.seconds + 2)
        let (second, secondIdentity) = try writeAndOpen(Array(repeating: 2, count: 200), "same.txt", in: folder)
        _ = cache.keep(plainResponse(length: 200, tag: "2"), of: second, facts: facts, at: "same.txt", identity: secondIdentity, now: secondIdentity.changed.seconds + 2)
        #expect(cache.usage == (1, 200))
        #expect(cache.answer(at: "same.txt", identity: firstIdentity) == nil)
        #expect(cache.answer(at: "same.txt", identity: secondIdentity)?.bodyLength == 200)
    }

    @Test func everyFilesFactsAreKnownWhileItStaysTheSame() throws {
        let cache = FileResponseCache()
        let (_, identity) = try writeAndOpen(Array(repeating: 3, count: 200_000), "large.bin", in: folder)
        cache.remember(facts, at: "large.bin", identity: identity)
        guard case .facts(let known) = cache.known(at: "large.bin", identity: identity, answerWanted: true) else {
            Issue.record("no facts for large.bin"); return
        }
        #expect(known.contentType == "text/plain" && known.validators.fields == facts.validators.fields)
        var touched = identity
        touched.modified.seconds += 1
        #expect(cache.known(at: "large.bin", identity: touched, answerWanted: false) == nil)
        #expect(cache.usage == (1, 0))
    }

    @Test func aKeptFileStillGivesItsFactsToRangesAndConditions() throws {
        let cache = FileResponseCache()
        let (file, identity) = try writeAndOpen([1, 2, 3], "e.txt", in: folder)
        _ = try #require(cache.keep(plainResponse(length: 3, tag: "e"), of: file, facts: facts, at: "e.txt", identity: identity,
                                    now: identity.changed.seconds + 2))
        guard case .facts = cache.known(at: "e.txt", identity: identity, answerWanted: false) else {
            Issue.record("the kept answer was offered where it does not fit"); return
        }
        #expect(cache.answer(at: "e.txt", identity: identity) != nil)
    }

    @Test func theNumberOfFilesKnownIsBounded() throws {
        let cache = FileResponseCache(capacityFiles: 3)
        for index in 0..<10 {
            let (_, identity) = try writeAndOpen([UInt8(index)], "n\(index)", in: folder)
            cache.remember(facts, at: "n\(index)", identity: identity)
            #expect(cache.usage.files <= 3)
        }
        #expect(cache.usage.files == 3)
    }

    @Test func changingAKeptResponseMakesItNoLongerReusable() throws {
        let cache = FileResponseCache()
        let (file, identity) = try writeAndOpen([1, 2, 3, 4], "d.txt", in: folder)
        let kept = try #require(cache.keep(plainResponse(length: 4, tag: "d"), of: file, facts: facts, at: "d.txt", identity: identity,
                                           now: identity.changed.seconds + 2))
        // What CORS, faults and the router do to a response on its way out.
        var decorated = kept
        decorated.headers.append(HTTPField(name: "Access-Control-Allow-Origin", value: "*"))
        var restatused = kept
        restatused.status = 503
        var rebodied = kept
        rebodied.body = .bytes([9])
        var delayed = kept
        delayed.delay = .milliseconds(10)
        #expect(decorated.reusable == nil && restatused.reusable == nil && rebodied.reusable == nil)
        #expect(delayed.reusable === kept.reusable)
    }
}

/// Files old enough to be kept, made once for the suite below: they settle (see
/// `FileResponseCache`) in at most two seconds.
private let settledRoot: URL = {
    let root = FileManager.default.temporaryDirectory.appendingPathComponent("counterpart-settled-\(UUID().uuidString)")
    let files: [String: Data] = [
        "kept.txt": testBytes(count: 5_000, seed: 11), "head.bin": testBytes(count: 3_000, seed: 12),
        "ranged.txt": Data("0123456789abcdefghij".utf8), "rewritten.bin": testBytes(count: 4_096, seed: 13),
        "cors.txt": testBytes(count: 2_000, seed: 14), "site/index.html": Data("<h1>kept</h1>".utf8),
    ]
    for (path, data) in files { try! data.write(into: root, at: path) }
    var info = stat()
    let newest = files.keys.map { root.appendingPathComponent($0).path }.map { path -> Int in
        stat(path, &info)
        return Int(Platform.statusChangeTime(info).tv_sec)
    }.max()!
    while Int(time(nil)) <= newest + Int(FileResponseCache.settledSeconds) { Thread.sleep(forTimeInterval: 0.05) }
    atexit { try? FileManager.default.removeItem(at: settledRoot) }
    return root
}()

/// A server on the settled files (each test its own, and its own uploads folder).
private func settledServer(configure: (inout Configuration) -> Void = { _ in }) throws -> CounterpartServer {
    // Inside the settled folder, so that it goes with it.
    var configuration = Configuration(root: settledRoot.path, uploads: settledRoot.appendingPathComponent(".uploads-\(UUID().uuidString)").path)
    configure(&configuration)
    return try CounterpartServer(configuration)
}

/// Headers as a client compares them: all but `Date`, which moves.
private func comparable(_ result: CurlResult) -> [String] {
    result.headers.filter { $0.name.lowercased() != "date" }.map { "\($0.name): \($0.value)" }
}

/// Small files answered from the cache, over real connections: what a client sees must be
/// what it would see without it, however the file changes.
@Suite("Static files: kept small files over HTTP")
struct KeptFileTests {
    @Test func aSettledFileIsAnsweredFromTheCacheTheSameEachTime() throws {
        let files = StaticFiles(folder: try ServedFolder(path: settledRoot.path), urlPrefix: [], hidesDotFiles: false, servesIndexFiles: true,
                                fileHeaders: [], rangePolicy: RangePolicy())
        let head = RequestHead(method: "GET", path: "/kept.txt", query: [], version: "HTTP/1.1", headers: [], clientAddress: "127.0.0.1")
        let first = files.respond(to: head, segments: ["kept.txt"])
        let second = files.respond(to: head, segments: ["kept.txt"])
        #expect(first.reusable != nil && first.reusable === second.reusable)
        #expect(files.cache.usage == (1, 5_000))
        guard case .bytes(let bytes) = second.body else { Issue.record("not from memory: \(second.body)"); return }
        #expect(Data(bytes) == testBytes(count: 5_000, seed: 11))

        let server = try settledServer()
        defer { server.stop() }
        let url = server.baseURL.absoluteString + "/kept.txt"
        let results = try (0..<3).map { _ in try curl([url]) }
        for result in results {
            #expect(result.status == 200 && result.body == testBytes(count: 5_000, seed: 11))
            #expect(comparable(result) == comparable(results[0]))
        }
        #expect(results[0].header("Content-Length") == "5000" && results[0].header("ETag") != nil)
        let index = try curl([server.baseURL.absoluteString + "/site/"])
        #expect(index.status == 200 && index.text == "<h1>kept</h1>" && index.header("Content-Type") == "text/html; charset=utf-8")
        #expect(try curl([server.baseURL.absoluteString + "/site/"]).text == "<h1>kept</h1>")
        // The journal counts what each answer carried.
        let journaled = server.journal.waitForRequests(path: "/kept.txt", count: 3)
        #expect(journaled.map(\.responseBodyBytes) == [5_000, 5_000, 5_000])
    }

    @Test func headOfAKeptFileSendsGetsHeadersAndNoBody() throws {
        let server = try settledServer()
        defer { server.stop() }
        let url = server.baseURL.absoluteString + "/head.bin"
        let get = try curl([url])
        let head = try curl(["--head", url])
        #expect(head.status == 200 && comparable(head) == comparable(get))
        let raw = try RawHTTPConnection.exchange(port: server.port, Array("HEAD /head.bin HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8))
        #expect(raw.text.hasPrefix("HTTP/1.1 200 OK\r\n") && raw.text.hasSuffix("\r\n\r\n") && raw.text.contains("Content-Length: 3000\r\n"))
        #expect(try curl([url]).body == testBytes(count: 3_000, seed: 12))
        #expect(server.journal.waitForRequests(path: "/head.bin", method: "HEAD", count: 2).map(\.responseBodyBytes) == [0, 0])
    }

    @Test func rangesConditionsAndDownloadsOfAKeptFileAreAnsweredAsAlways() throws {
        let server = try settledServer()
        defer { server.stop() }
        let url = server.baseURL.absoluteString + "/ranged.txt"
        let whole = try curl([url])
        let tag = try #require(whole.header("ETag"))
        let range = try curl(["-H", "Range: bytes=2-5", url])
        #expect(range.status == 206 && range.text == "2345" && range.header("Content-Range") == "bytes 2-5/20")
        #expect(try curl(["-H", "If-None-Match: \(tag)", url]).status == 304)
        #expect(try curl(["-H", "If-Match: \"other\"", url]).status == 412)
        let download = try curl([url + "?download"])
        #expect(download.header("Content-Disposition")?.hasPrefix("attachment") == true && download.text == "0123456789abcdefghij")
        // None of those answers was kept in place of the plain one.
        let again = try curl([url])
        #expect(again.status == 200 && again.header("Content-Disposition") == nil && again.header("Content-Range") == nil)
        #expect(comparable(again) == comparable(whole))
    }

    @Test func aKeptFileRewrittenAtOnceIsServedAsItIsNow() throws {
        let server = try settledServer()
        defer { server.stop() }
        let url = server.baseURL.absoluteString + "/rewritten.bin"
        let file = settledRoot.appendingPathComponent("rewritten.bin")
        let before = try curl([url])
        #expect(try curl([url]).body == testBytes(count: 4_096, seed: 13))
        // The same size, other bytes, within the same second.
        try testBytes(count: 4_096, seed: 99).write(to: file)
        let after = try curl([url])
        #expect(after.body == testBytes(count: 4_096, seed: 99))
        #expect(after.header("ETag") != before.header("ETag"))
        // Written in place (same inode), shorter.
        let handle = try FileHandle(forWritingTo: file)
        try handle.truncate(atOffset: 10)
        try handle.close()
        #expect(try curl([url]).body == testBytes(count: 4_096, seed: 99).prefix(10))
        try FileManager.default.removeItem(at: file)
        #expect(try curl([url]).status == 404)
    }

    @Test func corsAndFaultsStillApplyToKeptFiles() throws {
        let server = try settledServer { $0.corsOrigin = "*" }
        defer { server.stop() }
        let url = server.baseURL.absoluteString + "/cors.txt"
        for _ in 0..<3 {
            let result = try curl(["-H", "Origin: https://app.example", url])
            #expect(result.status == 200 && result.header("Access-Control-Allow-Origin") == "*")
            #expect(result.body == testBytes(count: 2_000, seed: 14))
        }
        let cut = try curl([url + "?cut=100"])
        #expect(cut.exitCode != 0 && cut.body.count == 100)
        let failed = try curl([url + "?status=503"])
        #expect(failed.status == 503)
        #expect(try curl([url]).body == testBytes(count: 2_000, seed: 14))
    }
}
