import Counterpart
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing

/// What each seed client (the Objective-C iOS tutorials the project was built against) does,
/// translated to URLSession, against a real server. A seed's quirks are kept where they are the client's real
/// behaviour (LF line ends, "Bytes=" ranges, no final CRLF), and fixed where the seed's
/// code could not compile (typos), with the typo's own outcome tested as well.
@Suite("Seed clients")
struct SeedClientTests {
    let server: TestServer
    let video = testBytes(count: 250_000, seed: 4)
    let image = testBytes(count: 48_213, seed: 5)

    init() throws {
        server = try TestServer(serving: ["resources/videos/minion_01.mp4": video, "itcast/images/head4.png": image])
    }

    // MARK: seed 000 — HEAD for the size, then 20,250-byte Range packets, then an LF-only upload

    /// `fileSizeWithURL:`: a HEAD request; `expectedContentLength` is the size.
    func fileSize(_ url: URL) async throws -> Int64 {
        var request = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: 2)
        request.httpMethod = "HEAD"
        let (_, response) = try await makeSession().data(for: request)
        return response.expectedContentLength
    }

    @Test func seed000DownloadsInRangePackets() async throws {
        let url = URL(string: server.url("/itcast/images/head4.png"))!
        let fileSize = try await fileSize(url)
        #expect(fileSize == 48_213)

        // `downloadFileWithURL:`: packets of kBytesPerTimes bytes, "Bytes=from-to", appended.
        let bytesPerTimes: Int64 = 20_250
        var cache = Data()
        var ranges: [String] = []
        var remaining = fileSize
        var from: Int64 = 0
        func packet(_ from: Int64, _ to: Int64) async throws {
            var request = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: 2)
            let range = "Bytes=\(from)-\(to)"
            ranges.append(range)
            request.setValue(range, forHTTPHeaderField: "Range")
            let (data, response) = try await makeSession().data(for: request)
            #expect((response as? HTTPURLResponse)?.statusCode == 206)
            cache.append(data)
        }
        while remaining > bytesPerTimes {
            try await packet(from, from + bytesPerTimes - 1)
            remaining -= bytesPerTimes
            from += bytesPerTimes
        }
        try await packet(from, from + remaining - 1)
        #expect(ranges == ["Bytes=0-20249", "Bytes=20250-40499", "Bytes=40500-48212"])
        #expect(cache == image)
        // The seed's "already downloaded" check: local size equals the HEAD size.
        #expect(Int64(cache.count) == fileSize)
    }

    @Test func seed000UploadsAnLFOnlyBody() async throws {
        // `topStringWithMimeType:uploadFile:` and `bottomString`, boundary "itcast", "\n" line ends.
        let top = "--itcast\nContent-Disposition: form-data; name=\"uploadFile\"; filename=\"header 1.png\"\nContent-Type: image/png\n\n"
        let bottom = "\n--itcast\nContent-Disposition: form-data; name=\"submit\"\n\nSubmit\n--itcast--\n"
        var body = Data(top.utf8)
        body.append(image)
        body.append(Data(bottom.utf8))
        var request = URLRequest(url: URL(string: server.url("/upload"))!, cachePolicy: .useProtocolCachePolicy, timeoutInterval: 2)
        request.httpBody = body
        request.httpMethod = "POST"
        request.setValue(String(body.count), forHTTPHeaderField: "Content-Length")
        request.setValue("multipart/form-data; boundary=itcast", forHTTPHeaderField: "Content-Type")
        let (data, response) = try await makeSession().data(for: request)
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        let json = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        let file = try #require((json["files"] as? [[String: Any]])?.first)
        #expect(file["filename"] as? String == "header 1.png")
        #expect(file["field"] as? String == "uploadFile")
        #expect(file["size"] as? Int == image.count)
        #expect(file["url"] as? String == "/uploads/header%201.png")
        #expect((json["fields"] as? [[String: Any]])?.first?["value"] as? String == "Submit")
        #expect(try server.uploadedData("header 1.png") == image)
    }

    // MARK: seed 001 — boundary "abc" without a space, no final CRLF; HEAD for file info; resume rules

    func seed001Body(disposition: String) -> Data {
        var body = Data("--abc\r\n\(disposition): form-data; name=\"userfile\";filename=\"photo.jpg\"\r\nContent-Type: image/hpeg\r\n\r\n".utf8)
        body.append(image)
        body.append(Data("\r\n--abc--".utf8))
        return body
    }

    func post(_ body: Data, contentType: String, method: String = "POST") async throws -> (Int, [String: Any]) {
        var request = URLRequest(url: URL(string: server.url("/upload"))!)
        request.httpMethod = method
        request.setValue(contentType, forHTTPHeaderField: "Content-Type")
        request.httpBody = body
        let (data, response) = try await makeSession().data(for: request)
        let json = (try? JSONSerialization.jsonObject(with: data) as? [String: Any]) ?? [:]
        return ((response as? HTTPURLResponse)?.statusCode ?? 0, json)
    }

    @Test func seed001UploadsWithBoundaryABC() async throws {
        let (status, json) = try await post(seed001Body(disposition: "Content-Disposition"), contentType: "multipart/form-data;boundary=abc")
        #expect(status == 200)
        let file = try #require((json["files"] as? [[String: Any]])?.first)
        #expect(file["filename"] as? String == "photo.jpg")
        #expect(file["contentType"] as? String == "image/hpeg")
        #expect(file["size"] as? Int == image.count)
    }

    @Test func seed001sMisspelledHeaderGetsAClear400() async throws {
        let (status, json) = try await post(seed001Body(disposition: "Content-Disposittion"), contentType: "multipart/form-data;boundary=abc")
        #expect(status == 400)
        #expect((json["error"] as? String)?.contains("no Content-Disposition header") == true)
        #expect(server.eventually { server.uploadedNames().isEmpty })
    }

    @Test func seed001sLowercaseMethodIsSentUppercaseByURLSession() async throws {
        // The seed sets HTTPMethod = @"post". URLSession sends POST; a client that sends
        // "post" on the wire gets 405 with a hint (methods are case-sensitive, RFC 9110 §9.1;
        // see UploadErrorTests).
        let (status, _) = try await post(seed001Body(disposition: "Content-Disposition"), contentType: "multipart/form-data;boundary=abc", method: "post")
        #expect(status == 200)
        let raw = try curl(["-X", "post", "-H", "Content-Type: multipart/form-data;boundary=abc", "--data-binary", "--abc--", server.url("/upload")])
        #expect(raw.status == 405)
        #expect((try raw.json()["error"] as? String)?.contains("POST, not post") == true)
    }

    @Test func seed001GetsFileInfoAndResumesByTheLocalSizeRules() async throws {
        let url = URL(string: server.url("/resources/videos/minion_01.mp4"))!
        // `getServerFileInfo:`: HEAD → expectedContentLength and suggestedFilename.
        // Apple's URLSession falls back to the URL's last path component for the name;
        // Linux's FoundationNetworking says "Unknown" unless Content-Disposition names the
        // file, which `?download` adds.
        var head = URLRequest(url: URL(string: url.absoluteString + "?download")!)
        head.httpMethod = "HEAD"
        let (_, info) = try await makeSession().data(for: head)
        #expect(info.expectedContentLength == Int64(video.count))
        #expect(info.mimeType == "video/mp4")
        #expect(info.suggestedFilename == "minion_01.mp4")

        let folder = try makeTemporaryFolder("seed001")
        defer { try? FileManager.default.removeItem(at: folder) }
        let path = folder.appendingPathComponent(try #require(info.suggestedFilename))

        // `checkLocalFileInfo` + `downloadFile:`: smaller → resume with bytes=N-; equal →
        // done; larger → delete and start over.
        func download() async throws -> String {
            let local = (try? Data(contentsOf: path)) ?? Data()
            if Int64(local.count) == info.expectedContentLength { return "complete" }
            var start = local.count
            if Int64(local.count) > info.expectedContentLength {
                try FileManager.default.removeItem(at: path)
                start = 0
            }
            var request = URLRequest(url: url)
            request.setValue("bytes=\(start)-", forHTTPHeaderField: "Range")
            let (data, response) = try await makeSession().data(for: request)
            let status = (response as? HTTPURLResponse)?.statusCode
            #expect(status == 206)
            var file = start == 0 ? Data() : local
            file.append(data)
            try file.write(to: path)
            return start == 0 ? "from the start" : "resumed at \(start)"
        }
        try video.prefix(100_000).write(to: path)
        #expect(try await download() == "resumed at 100000")
        #expect(try Data(contentsOf: path) == video)
        #expect(try await download() == "complete")
        try (video + Data("extra".utf8)).write(to: path)
        #expect(try await download() == "from the start")
        #expect(try Data(contentsOf: path) == video)
    }

    // MARK: seed 002 — uploadTask with a WebKit-style boundary, progress through the delegate

    @Test func seed002UploadsWithProgress() async throws {
        let boundary = "----WebKitFormBoundary0IQAt0HA7oxwIx3f"
        var body = Data("--\(boundary)\r\nContent-Disposition: form-data; name=\"file\"; filename=\"Snip20151228_572.png\"\r\nContent-Type: image/png\r\n\r\n".utf8)
        body.append(image)
        body.append(Data("\r\n--\(boundary)\r\nContent-Disposition: form-data; name=\"username\"\r\n\r\ndashen9\r\n--\(boundary)--".utf8))
        var request = URLRequest(url: URL(string: server.url("/upload"))!)
        request.httpMethod = "POST"
        request.setValue("multipart/form-data; boundary=\(boundary)", forHTTPHeaderField: "Content-Type")

        let recorder = UploadRecorder()
        let session = URLSession(configuration: .ephemeral, delegate: recorder, delegateQueue: nil)
        session.uploadTask(with: request, from: body).resume()
        let (data, response) = try await recorder.result()
        #expect((response as? HTTPURLResponse)?.statusCode == 200)
        let json = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
        #expect((json["files"] as? [[String: Any]])?.first?["filename"] as? String == "Snip20151228_572.png")
        #expect((json["fields"] as? [[String: Any]])?.first?["value"] as? String == "dashen9")
        // `didSendBodyData:totalBytesSent:totalBytesExpectedToSend:` reached the whole body.
        let last = try #require(recorder.progress.last)
        #expect(last.sent == Int64(body.count) && last.expected == Int64(body.count))
        #expect(recorder.progress.count >= 1)
    }

    // MARK: seed 004 — resumable download: bytes=N- appended to an output stream after a pause

    @Test func seed004PausesAndResumesADownload() async throws {
        let url = URL(string: server.url("/resources/videos/minion_01.mp4"))!
        // The first request (currentSize 0) gets the whole length; the app pauses after
        // some bytes — here, it stops reading after the first 60,000.
        var request = URLRequest(url: url)
        request.setValue("bytes=0-", forHTTPHeaderField: "Range")
        let (first, firstResponse) = try await makeSession().data(for: request)
        let totalSize = firstResponse.expectedContentLength
        #expect(totalSize == Int64(video.count))
        var stream = first.prefix(60_000)

        // Resume: "bytes=%zd-" with currentSize; append what comes.
        var resume = URLRequest(url: url)
        resume.setValue("bytes=\(stream.count)-", forHTTPHeaderField: "Range")
        let (rest, restResponse) = try await makeSession().data(for: resume)
        #expect((restResponse as? HTTPURLResponse)?.statusCode == 206)
        #expect(restResponse.expectedContentLength == totalSize - 60_000)
        stream.append(rest)
        #expect(stream == video)
    }
}

/// A delegate-driven upload task, as seed 002 runs it: progress, response, data, completion.
/// Unchecked: every stored property is read and written under `lock`.
final class UploadRecorder: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private var received = Data()
    private var response: URLResponse?
    private var sent: [(sent: Int64, expected: Int64)] = []
    private var continuation: CheckedContinuation<(Data, URLResponse), any Error>?
    private var outcome: Result<(Data, URLResponse), any Error>?

    var progress: [(sent: Int64, expected: Int64)] { lock.withLock { sent } }

    func result() async throws -> (Data, URLResponse) {
        try await withCheckedThrowingContinuation { continuation in
            let done: Result<(Data, URLResponse), any Error>? = lock.withLock {
                if outcome == nil { self.continuation = continuation }
                return outcome
            }
            if let done { continuation.resume(with: done) }
        }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didSendBodyData bytesSent: Int64,
                    totalBytesSent: Int64, totalBytesExpectedToSend: Int64) {
        lock.withLock { sent.append((totalBytesSent, totalBytesExpectedToSend)) }
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                    completionHandler: @escaping (URLSession.ResponseDisposition) -> Void) {
        lock.withLock { self.response = response }
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        lock.withLock { received.append(data) }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let (waiting, result): (CheckedContinuation<(Data, URLResponse), any Error>?, Result<(Data, URLResponse), any Error>) = lock.withLock {
            let result: Result<(Data, URLResponse), any Error>
            if let error { result = .failure(error) } else if let response { result = .success((received, response)) } else {
                result = .failure(URLError(.badServerResponse))
            }
            outcome = result
            defer { continuation = nil }
            return (continuation, result)
        }
        waiting?.resume(with: result)
        session.finishTasksAndInvalidate()
    }
}
