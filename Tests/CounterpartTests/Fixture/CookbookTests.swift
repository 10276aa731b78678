// The README's cookbook, "Testing a client's retry and resume logic": each scenario's curl
// lines (run here as written there, against a server of the test's own) and the same
// scenario as a Swift test against the embedded server.
import Counterpart
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPTransfer
import Testing

/// Runs one of the README's shell lines in `folder`, with the README's address replaced by
/// `server`'s: its exit status and output.
func runReadmeLine(_ line: String, server: TestServer, in folder: URL) throws -> (status: Int32, output: String) {
    let readme = try String(contentsOf: repositoryRoot.appendingPathComponent("README.md"), encoding: .utf8)
    #expect(readme.contains(line), "the README no longer shows: \(line)")
    let command = line.replacingOccurrences(of: "http://127.0.0.1:8080", with: server.server.baseURL.absoluteString)
    return try runCommand("/bin/sh", ["-c", "cd '\(folder.path)' && \(command)"])
}

@Suite("Cookbook: testing a client's retry and resume logic")
struct CookbookTests {
    let folder: URL
    init() throws {
        folder = try makeTemporaryFolder("cookbook")
        try Data(testBytes(count: 200_000)).write(to: folder.appendingPathComponent("photo.jpg"))
    }

    // 1. Cut the first two uploads, then let the third through.

    @Test func curlRetriesTwoCutUploads() throws {
        let server = try TestServer()
        let arm = try runReadmeLine(#"curl -s -X POST http://127.0.0.1:8080/__counterpart/faults -d '{"method": "POST", "path": "/upload", "fault": "cut=64KiB", "times": 2}'"#, server: server, in: folder)
        #expect(arm.output.contains(#""remaining":2"#), "\(arm.output)")
        let upload = try runReadmeLine("curl -s --retry 2 --retry-all-errors --retry-delay 0 -F file=@photo.jpg http://127.0.0.1:8080/upload", server: server, in: folder)
        #expect(upload.status == 0 && upload.output.contains(#""filename":"photo.jpg""#), "\(upload.output)")
        let listed = try runReadmeLine("curl -s http://127.0.0.1:8080/__counterpart/faults", server: server, in: folder)
        #expect(listed.output.contains(#""matched":2,"applied":2,"remaining":0"#), "\(listed.output)")
        #expect(server.server.journal.waitForRequests(path: "/upload", count: 3).map { $0.fault?.rule != nil } == [true, true, false])
    }

    @Test func urlSessionRetriesTwoCutUploads() async throws {
        let server = try TestServer()
        try server.server.faults.arm(method: "POST", path: "/upload", fault: "cut=64KiB", times: 2)
        let body = MultipartWriter.formData([(MultipartWriter.formDataHeaders(name: "file", filename: "photo.jpg"), [UInt8](testBytes(count: 200_000)))],
                                            boundary: try MultipartBoundary("cookbook"))
        var request = URLRequest(url: server.server.baseURL.appendingPathComponent("upload"))
        request.httpMethod = "POST"
        request.setValue("multipart/form-data; boundary=cookbook", forHTTPHeaderField: "Content-Type")
        // The client under test: up to three tries.
        var attempts = 0
        var status: Int?
        while attempts < 3, status != 200 {
            attempts += 1
            status = try? await (makeSession().upload(for: request, from: Data(body)).1 as? HTTPURLResponse)?.statusCode
        }
        #expect(status == 200 && attempts == 3)
        #expect(server.server.faults.rules.first?.remaining == 0)
    }

    // 2. A 503 twice, then the answer.

    @Test func curlRetriesTwo503s() throws {
        let server = try makeStaticServer()
        _ = try runReadmeLine(#"curl -s -X POST http://127.0.0.1:8080/__counterpart/faults -d '{"path": "/hello.txt", "fault": "status=503", "times": 2}'"#, server: server, in: folder)
        let fetched = try runReadmeLine("curl -s -f --retry 2 --retry-delay 0 http://127.0.0.1:8080/hello.txt", server: server, in: folder)
        #expect(fetched.status == 0 && fetched.output == "hello\n", "\(fetched.output)")
    }

    @Test func urlSessionRetriesTwo503s() async throws {
        let server = try makeStaticServer()
        try server.server.faults.arm(path: "/hello.txt", fault: "status=503", times: 2)
        var statuses: [Int] = []
        while statuses.last != 200, statuses.count < 5 {
            let (_, response) = try await makeSession().data(from: server.server.baseURL.appendingPathComponent("hello.txt"))
            statuses.append((response as? HTTPURLResponse)?.statusCode ?? 0)
        }
        #expect(statuses == [503, 503, 200])
        #expect(server.server.journal.waitForRequests(path: "/hello.txt", count: 3).compactMap(\.fault?.fault) == ["status=503", "status=503"])
    }

    // 3. Failures at random, the same in every run.

    @Test func seededFailuresRepeatFromRunToRun() throws {
        let server = try makeStaticServer()
        var runs: [[Int]] = []
        for _ in 0..<2 {
            _ = try runReadmeLine("curl -s -X DELETE http://127.0.0.1:8080/__counterpart/faults", server: server, in: folder)
            _ = try runReadmeLine(#"curl -s -X POST http://127.0.0.1:8080/__counterpart/faults -d '{"path": "/bytes/*", "fault": "fail=0.3,seed=1"}'"#, server: server, in: folder)
            runs.append(try (0..<10).map { _ in try curl([server.url("/bytes/1KiB")]).status })
        }
        #expect(runs[0] == runs[1] && runs[0].contains(503) && runs[0].contains(200), "\(runs)")
    }

    // 4. A connection reset in the middle, a slow first byte.

    @Test func curlSeesAResetAndASlowFirstByte() throws {
        let server = try makeStaticServer()
        let reset = try runReadmeLine("curl -s -S -o /dev/null 'http://127.0.0.1:8080/bytes/1MiB?reset=64KiB'", server: server, in: folder)
        #expect(reset.status == 56 && reset.output.contains("reset"), "\(reset.output)")
        let slow = try runReadmeLine("curl -s -o /dev/null -w '%{time_starttransfer} %{time_total}\\n' 'http://127.0.0.1:8080/bytes/1KiB?first-byte=1000'", server: server, in: folder)
        let times = slow.output.split(whereSeparator: { $0 == " " || $0 == "\n" }).compactMap { Double($0) }
        #expect(times.count == 2 && times[1] >= 0.95 && times[1] - times[0] >= 0.7, "\(slow.output)")
    }

    // 5. The file changes between the download and its resume.

    @Test func curlResumingWithoutIfRangeSplicesTwoVersions() throws {
        let server = try makeStaticServer()
        _ = try runReadmeLine(#"curl -s -X POST http://127.0.0.1:8080/__counterpart/faults -d '{"path": "/bytes/1MiB", "fault": "cut=256KiB", "times": 1}'"#, server: server, in: folder)
        let cut = try runReadmeLine("curl -s -o file.bin 'http://127.0.0.1:8080/bytes/1MiB?seed=7&change-after=1'", server: server, in: folder)
        #expect(cut.status == 18)
        let resumed = try runReadmeLine("curl -s -C - -o file.bin 'http://127.0.0.1:8080/bytes/1MiB?seed=7&change-after=1'", server: server, in: folder)
        #expect(resumed.status == 0)
        let file = try Data(contentsOf: folder.appendingPathComponent("file.bin"))
        let hash = try sha256(file)
        #expect(file.count == 1 << 20)
        #expect(hash != GeneratedBytes(seed: 7).sha256(from: 0, count: 1 << 20) && hash != GeneratedBytes(seed: 7, version: 1).sha256(from: 0, count: 1 << 20))
        let touched = try runReadmeLine("curl -s -X POST 'http://127.0.0.1:8080/__counterpart/touch?path=/hello.txt'", server: server, in: folder)
        #expect(touched.output.contains(#""etag":"#) && touched.output.contains(#""lastModified":"#), "\(touched.output)")
    }

    @Test func urlSessionWithIfRangeGetsTheNewFileWhole() async throws {
        let server = try makeStaticServer()
        try server.server.faults.arm(path: "/bytes/1MiB", fault: "cut=256KiB", times: 1)
        let url = server.server.baseURL.appendingPathComponent("bytes/1MiB")
        var components = URLComponents(url: url, resolvingAgainstBaseURL: false)!
        components.queryItems = [URLQueryItem(name: "seed", value: "7"), URLQueryItem(name: "change-after", value: "1")]
        let partial = PartialDownload()
        URLSession(configuration: .ephemeral, delegate: partial, delegateQueue: nil).dataTask(with: components.url!).resume()
        let (first, error) = await partial.result()
        #expect(error != nil && first.count <= 256 * 1024)
        let tag = try #require(partial.response?.value(forHTTPHeaderField: "ETag"))
        // The client under test resumes with If-Range: a 200 means "start over".
        var request = URLRequest(url: components.url!)
        request.setValue("bytes=\(first.count)-", forHTTPHeaderField: "Range")
        request.setValue(tag, forHTTPHeaderField: "If-Range")
        let (rest, response) = try await makeSession().data(for: request)
        let whole = (response as? HTTPURLResponse)?.statusCode == 206 ? first + rest : rest
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        #expect(try sha256(whole) == GeneratedBytes(seed: 7, version: 1).sha256(from: 0, count: 1 << 20))
    }

    // 6. A tus upload whose PATCH is cut once: tuspy retries and resumes.

    @Test func tuspyResumesAPatchCutByARule() throws {
        let server = try TestServer()
        _ = try runReadmeLine(#"curl -s -X POST http://127.0.0.1:8080/__counterpart/faults -d '{"method": "PATCH", "path": "/files/*", "fault": "cut=100KiB", "times": 1}'"#, server: server, in: folder)
        let data = testBytes(count: 600_000, seed: 9)
        let path = try temporaryFile("tus.bin", data)
        let uploaded = try python(tuspyRetrying, [server.url("/files"), path])
        #expect(!uploaded.output.hasPrefix("FAILED"), "\(uploaded.output)")
        #expect(try sha256(try server.uploadedData("tus.bin")) == (try sha256(data)))
        #expect(server.server.faults.rules.first?.applied == 1)
    }
}

/// The README's tuspy client: retries a failed chunk after asking the server for its offset.
let tuspyRetrying = """
    import sys
    from tusclient import client
    uploader = client.TusClient(sys.argv[1]).uploader(sys.argv[2], chunk_size=200000, retries=3, retry_delay=0,
                                                      metadata={"filename": sys.argv[2].split("/")[-1]})
    try:
        uploader.upload()
    except Exception as error:
        print("FAILED", repr(error))
    """
