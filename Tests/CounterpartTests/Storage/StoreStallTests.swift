@testable import Counterpart
import Foundation
import Testing

/// The engine's radosgw, stopped with SIGSTOP and resumed with SIGCONT: a store that takes
/// connections and requests and answers nothing, as Ceph RGW does with a full OSD.
struct FreezableStore {
    static let skipReason: Comment = """
        set COUNTERPART_S3_FREEZE=1 beside COUNTERPART_S3_ENV: these tests stop the engine's radosgw \
        for seconds, so they run alone (make test-s3 runs them after the other S3 suites)
        """
    static var isEnabled: Bool {
        S3TestEngine.isAvailable && ProcessInfo.processInfo.environment["COUNTERPART_S3_FREEZE"] == "1"
    }

    let pid: pid_t

    /// radosgw's PID from the engine's `pids` (beside its s3.env), checked to be radosgw still.
    init() throws {
        let environmentFile = try #require(ProcessInfo.processInfo.environment["COUNTERPART_S3_ENV"])
        let folder = URL(fileURLWithPath: environmentFile).deletingLastPathComponent()
        let pids = try String(contentsOf: folder.appendingPathComponent("pids"), encoding: .utf8)
        let line = try #require(pids.split(separator: "\n").last { $0.hasPrefix("rgw ") }, "no rgw in \(folder.path)/pids")
        pid = try #require(pid_t(line.dropFirst(4)))
        let name = try String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8)
        try #require(name.hasPrefix("radosgw"), "PID \(pid) is \(name), not radosgw")
        // A run that died while the store was frozen would have left it so.
        kill(pid, SIGCONT)
    }

    /// Runs `body` while radosgw is stopped; it goes on however `body` ends.
    func frozen<Result>(_ body: () throws -> Result) rethrows -> Result {
        kill(pid, SIGSTOP)
        defer { kill(pid, SIGCONT) }
        return try body()
    }
}

/// A `counterpart` process on the engine, under a prefix of its own, with a client on the
/// same prefix to see what it stored.
final class StoreNode {
    let run: CommandRun
    let base: String
    let store: S3Client
    private let folder: URL

    init(_ flags: [String]) throws {
        let environment = try #require(S3TestEngine.environment)
        let prefix = "stall-\(UUID().uuidString.lowercased().prefix(8))/"
        store = try S3TestEngine.client(prefix: prefix)
        folder = try makeFolder()
        run = try CommandRun(["--port", "0", "--quiet", "--store", "s3://\(S3TestEngine.bucket)/\(prefix)",
                              "--s3-endpoint", try #require(environment["S3_ENDPOINT"])] + flags,
                             in: folder, environment: environment)
        base = String(run.firstLine().dropFirst("listening on ".count))
        try #require(base.hasPrefix("http://"), "the server did not start")
    }

    deinit {
        run.process.terminate()
        _ = run.waitForExit()
        try? FileManager.default.removeItem(at: folder)
    }

    func url(_ path: String) -> String { base + path }

    /// Every key under the prefix (the claims on names, resumable uploads' state too), and
    /// `.multipart-KEY` for each multipart upload left open.
    func keys() throws -> [String] {
        var keys: [String] = []
        var token: String?
        repeat {
            let page = try store.listObjects(prefix: "", continuationToken: token)
            keys += page.objects.map(\.key)
            token = page.nextContinuationToken
        } while token != nil
        return (keys + (try store.listMultipartUploads()).map { ".multipart-" + $0.key }).sorted()
    }
}

/// A store that stops answering: every request that needs it ends with a clear 503 within a
/// few seconds (`--s3-timeout`), or a download already under way is cut; nothing is left
/// behind; once the store answers again, the same requests succeed.
@Suite("A store that stops answering", .serialized, .enabled(if: FreezableStore.isEnabled, FreezableStore.skipReason))
struct StoreStallTests {
    /// Seconds a request to a frozen store may take to be answered: the store's timeout (2),
    /// libcurl's check once a second, the answer.
    static let answerWithin = 8.0

    /// 3 MB is one PUT when the body has ended (the final call waits on the store); 20 MB
    /// sends parts while the body comes (a body callback waits on the store).
    @Test(arguments: [3_000_000, 20_000_000])
    func aFormUploadGets503AndLeavesNothingThenSucceedsOnceTheStoreAnswers(size: Int) throws {
        let frozen = try FreezableStore()
        let node = try StoreNode(["--s3-timeout", "2", "--idle-timeout", "3"])
        let data = testBytes(count: size, seed: 61)
        let path = try temporaryFile("stalled.bin", data)
        let started = Date()
        let refused = try frozen.frozen { try curl(["-F", "note=x", "-F", "f=@\(path)", node.url("/upload")]) }
        let seconds = Date().timeIntervalSince(started)
        #expect(refused.status == 503, "curl exit \(refused.exitCode), \(refused.text)")
        #expect((try? refused.json()["error"] as? String)?.contains("object store") == true, "\(refused.text)")
        #expect(seconds < Self.answerWithin, "answered after \(seconds) s")
        // A request the store took while frozen would be carried out now: nothing is.
        Thread.sleep(forTimeInterval: 2)
        #expect(try node.keys() == [], "no object, no claim on the name, no multipart upload")

        let stored = try curl(["-F", "f=@\(path)", node.url("/upload")])
        #expect(stored.status == 200, "\(stored.text)")
        let file = try #require((try stored.json()["files"] as? [[String: Any]])?.first)
        #expect(file["url"] as? String == "/uploads/stalled.bin")
        #expect(file["sha256"] as? String == (try sha256(data)))
        #expect(try node.keys() == [".counterpart/names/stalled.bin", "stalled.bin"])
    }

    /// The store's timeout longer than the idle timeout: the server's wait must not count as
    /// the client's silence, or the connection is closed before its 503 goes out (curl then
    /// sees only `100 Continue`).
    @Test func theStoresWaitIsNotTheClientsSilence() throws {
        let frozen = try FreezableStore()
        let node = try StoreNode(["--s3-timeout", "3", "--idle-timeout", "1"])
        let path = try temporaryFile("waited.bin", testBytes(count: 20_000_000, seed: 62))
        try node.store.putObject("there.txt", bytes: Array("there".utf8))
        let (upload, download) = try frozen.frozen {
            (try curl(["-F", "f=@\(path)", node.url("/upload")]), try curl([node.url("/uploads/there.txt")]))
        }
        #expect(upload.status == 503, "curl exit \(upload.exitCode), \(upload.text)")
        #expect(download.status == 503, "curl exit \(download.exitCode), \(download.text)")
        #expect(try curl([node.url("/uploads/there.txt")]).text == "there")
    }

    @Test func aDownloadAndAListingGet503() throws {
        let frozen = try FreezableStore()
        let node = try StoreNode(["--s3-timeout", "2", "--idle-timeout", "3"])
        try node.store.putObject("kept.txt", bytes: Array("kept".utf8))
        try frozen.frozen {
            for path in ["/uploads/kept.txt", "/uploads/", "/uploads/folder/"] {
                let started = Date()
                let answer = try curl([node.url(path)])
                #expect(answer.status == 503, "\(path): curl exit \(answer.exitCode), \(answer.text)")
                #expect((try? answer.json()["error"] as? String)?.contains("object store") == true, "\(path): \(answer.text)")
                #expect(Date().timeIntervalSince(started) < Self.answerWithin, "\(path)")
            }
            let head = try curl(["--head", node.url("/uploads/kept.txt")])
            #expect(head.status == 503)
        }
        #expect(try curl([node.url("/uploads/kept.txt")]).text == "kept")
    }

    /// Its status and headers have gone out: it ends short, and curl says so. The node reads
    /// a window ahead, the sockets hold megabytes and curl's limit lets it start fast (some
    /// 19 MB in 2.5 s at 4M): the object is large enough and the rate low enough that most
    /// of it is still in the store when it stops.
    @Test func aDownloadUnderWayIsCut() throws {
        let frozen = try FreezableStore()
        let node = try StoreNode(["--s3-timeout", "2", "--idle-timeout", "3"])
        let data = testBytes(count: 48_000_000, seed: 63)
        try node.store.putObject("large.bin", bytes: [UInt8](data))
        let url = node.url("/uploads/large.bin")
        let download = BackgroundCall { try curl(["--limit-rate", "1M", url]) }
        Thread.sleep(forTimeInterval: 1.5)
        let cut = try frozen.frozen { try download.wait() }
        #expect(cut.status == 200)
        #expect(cut.exitCode == 18, "curl: partial file")
        #expect(cut.body.count < data.count && cut.body == data.prefix(cut.body.count))
        #expect(try curl([node.url("/uploads/large.bin")]).body == data)
    }

    @Test func resumableRequestsGet503AndTheUploadGoesOnOnceTheStoreAnswers() throws {
        let frozen = try FreezableStore()
        let node = try StoreNode(["--s3-timeout", "2", "--idle-timeout", "3"])
        let data = testBytes(count: 3_000_000, seed: 64)
        let tus = ["-H", "Tus-Resumable: 1.0.0"]
        let created = try curl(tus + ["-X", "POST", "-H", "Upload-Length: \(data.count)",
                                      "-H", "Upload-Metadata: filename \(Data("resumed.bin".utf8).base64EncodedString())", node.url("/files")])
        let location = try #require(created.header("Location"))
        let body = try temporaryFile("chunk", data)
        let patch = tus + ["-X", "PATCH", "-H", "Upload-Offset: 0", "-H", "Content-Type: application/offset+octet-stream",
                           "--data-binary", "@\(body)", node.url(location)]
        try frozen.frozen {
            let offset = try curl(tus + ["--head", node.url(location)])
            #expect(offset.status == 503, "not 404: the upload is not known to be gone")
            let append = try curl(patch)
            #expect(append.status == 503, "\(append.text)")
            let cancel = try curl(tus + ["-X", "DELETE", node.url(location)])
            #expect(cancel.status == 503, "\(cancel.text)")
        }
        // The store stops mid-append: the lease cannot be renewed, nothing more is written,
        // and the client gets a 503 (it had its connection closed with no answer). libcurl
        // judges a request that sent a body by its rate over its last few seconds: the
        // renewal fails some 6 s after the store's timeout.
        let slow = BackgroundCall { try curl(["--limit-rate", "200k"] + patch) }
        Thread.sleep(forTimeInterval: 1.5)
        let cut = try frozen.frozen { try slow.wait() }
        #expect(cut.status == 503, "curl exit \(cut.exitCode), \(cut.text)")

        let offset = try #require(Int(try curl(tus + ["--head", node.url(location)]).header("Upload-Offset") ?? ""))
        let rest = try temporaryFile("rest", data.dropFirst(offset))
        let done = try curl(tus + ["-X", "PATCH", "-H", "Upload-Offset: \(offset)", "-H", "Content-Type: application/offset+octet-stream",
                                   "--data-binary", "@\(rest)", node.url(location)])
        #expect(done.status == 204 && done.header("Upload-Offset") == "\(data.count)", "\(done.status) \(done.text)")
        #expect(try curl([node.url("/uploads/resumed.bin")]).body == data)
    }
}
