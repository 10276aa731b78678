import Counterpart
import CounterpartExamples
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPTransfer
import Testing

/// The seeds' clients as runnable examples (Sources/CounterpartExamples and the
/// `counterpart-examples` command), each against a real server.
@Suite("Examples: the seeds' clients")
struct ExampleTests {
    let server: TestServer
    let big = testBytes(count: 300_000, seed: 11)
    let image = testBytes(count: 48_213, seed: 12)
    let exact = testBytes(count: 40_500, seed: 13)
    let large = testBytes(count: 3_000_000, seed: 14)
    let local: URL

    init() throws {
        server = try TestServer(serving: [
            "big.bin": big, "large.bin": large, "exact.bin": exact, "empty.bin": Data(), "itcast/images/head4.png": image,
        ])
        local = server.root.deletingLastPathComponent().appendingPathComponent("client")
        try FileManager.default.createDirectory(at: local, withIntermediateDirectories: true)
    }

    var base: URL { server.server.baseURL }

    func file(_ name: String) -> URL { local.appendingPathComponent(name) }

    /// Runs `download` and pauses it once `bytes` are on disk: its report.
    func runPausing(_ download: ResumableDownload, at bytes: Int64) async throws -> ResumableDownload.Report {
        try await download.run { step in
            if step.bytesOnDisk >= bytes { download.pause() }
        }
    }

    // MARK: FileInfo — HEAD (seeds 000 and 001)

    @Test func fileInfoGivesSizeTypeNameAndValidators() async throws {
        let info = try await FileInfo.fetch(baseURL: base, path: "/itcast/images/head4.png")
        #expect(info.size == Int64(image.count))
        #expect(info.mimeType == "image/png")
        #expect(info.suggestedFilename == "head4.png")
        #expect(info.acceptsRanges)
        #expect(info.url.absoluteString == server.url("/itcast/images/head4.png"))
        let head = try curl(["-I", server.url("/itcast/images/head4.png")])
        #expect(info.etag != nil && info.etag == head.header("ETag"))
        #expect(info.lastModified != nil && info.lastModified == head.header("Last-Modified"))
    }

    @Test func withoutDownloadTheSuggestedNameIsURLSessionsFallback() async throws {
        let info = try await FileInfo.fetch(baseURL: base, path: "/itcast/images/head4.png", askForFilename: false)
        #expect(info.size == Int64(image.count))
        #if os(Linux)
        // FoundationNetworking names a file only from Content-Disposition.
        #expect(info.suggestedFilename == "Unknown")
        #else
        #expect(info.suggestedFilename == "head4.png")
        #endif
    }

    @Test func fileInfoOfAMissingFileIsA404() async throws {
        await #expect(throws: ExampleError.httpStatus(404, method: "HEAD", url: try ExampleURL.resolve("/nope.bin", against: base), message: nil)) {
            try await FileInfo.fetch(baseURL: base, path: "/nope.bin")
        }
    }

    @Test func pathsAreResolvedOnTheBaseURL() throws {
        let base = try #require(URL(string: "http://127.0.0.1:8080/"))
        #expect(try ExampleURL.resolve("/samples/hello.txt", against: base).absoluteString == "http://127.0.0.1:8080/samples/hello.txt")
        #expect(try ExampleURL.resolve("uploads/a b.png", against: base).absoluteString == "http://127.0.0.1:8080/uploads/a%20b.png")
        #expect(try ExampleURL.resolve("/uploads/a%20b.png?cut=10", against: base).absoluteString
                == "http://127.0.0.1:8080/uploads/a%20b.png?cut=10")
        let url = try ExampleURL.resolve("/x?cut=10", against: base)
        #expect(ExampleURL.adding(query: "download", to: url).absoluteString == "http://127.0.0.1:8080/x?cut=10&download")
    }

    // MARK: PacketDownload — Range packets of 20,250 bytes (seed 000)

    @Test func packetArithmeticIsTheSeeds() {
        #expect(PacketDownload.ranges(size: 48_213, packetSize: 20_250) == [0...20_249, 20_250...40_499, 40_500...48_212])
        #expect(PacketDownload.ranges(size: 40_500, packetSize: 20_250) == [0...20_249, 20_250...40_499])
        #expect(PacketDownload.ranges(size: 1, packetSize: 20_250) == [0...0])
        #expect(PacketDownload.ranges(size: 0, packetSize: 20_250) == [])
    }

    @Test func downloadsInPacketsTheLastShorter() async throws {
        let destination = file("head4.png")
        let packets = Locked<[PacketDownload.Packet]>([])
        let download = try PacketDownload(baseURL: base, path: "/itcast/images/head4.png", to: destination)
        #expect(download.packetSize == 20_250)
        let report = try await download.run { packet in packets.mutate { $0.append(packet) } }
        #expect(report.ranges == ["Bytes=0-20249", "Bytes=20250-40499", "Bytes=40500-48212"])
        #expect(!report.alreadyComplete)
        #expect(packets.value.map(\.range) == report.ranges)
        #expect(packets.value.map(\.bytesOnDisk) == [20_250, 40_500, 48_213])
        let downloaded = try Data(contentsOf: destination)
        #expect(downloaded == image)
        #expect(try sha256(downloaded) == sha256(image))

        // The seed's check: a local file of the server's size is not fetched again.
        let again = try await download.run()
        #expect(again.alreadyComplete && again.ranges.isEmpty)
    }

    @Test func anExactMultipleEndsWithAFullPacketAndAnEmptyFileHasNone() async throws {
        let exactReport = try await PacketDownload(baseURL: base, path: "/exact.bin", to: file("exact.bin")).run()
        #expect(exactReport.ranges == ["Bytes=0-20249", "Bytes=20250-40499"])
        #expect(try Data(contentsOf: file("exact.bin")) == exact)

        let emptyReport = try await PacketDownload(baseURL: base, path: "/empty.bin", to: file("empty.bin")).run()
        #expect(emptyReport.ranges.isEmpty && emptyReport.size == 0)
        #expect(try Data(contentsOf: file("empty.bin")).isEmpty)
    }

    @Test func aLocalFileOfAnotherSizeIsReplacedNotAppendedTo() async throws {
        let destination = file("big.bin")
        try big.prefix(12_345).write(to: destination)
        let report = try await PacketDownload(baseURL: base, path: "/big.bin", to: destination, packetSize: 100_000).run()
        #expect(report.ranges == ["Bytes=0-99999", "Bytes=100000-199999", "Bytes=200000-299999"])
        #expect(try sha256(Data(contentsOf: destination)) == sha256(big))
    }

    // MARK: ResumableDownload — the local-size rules, cuts and pauses (seeds 001 and 004)

    @Test func aFreshDownloadStreamsToDiskWithProgressTo100Percent() async throws {
        let destination = file("large.bin")
        let progress = Locked<[ResumableDownload.Progress]>([])
        let download = try ResumableDownload(baseURL: base, path: "/large.bin", to: destination)
        let report = try await download.run { step in progress.mutate { $0.append(step) } }
        #expect(report.start == .fromStart)
        #expect(report.range == "bytes=0-")
        #expect(report.status == 206)
        #expect(report.bytesReceived == Int64(large.count) && report.isComplete)
        #expect(try sha256(Data(contentsOf: destination)) == sha256(large))
        let steps = progress.value
        #expect(steps.count > 2)
        #expect(steps.last?.fraction == 1.0)
        #expect(zip(steps, steps.dropFirst()).allSatisfy { $0.bytesOnDisk <= $1.bytesOnDisk })
    }

    @Test func localSizeRulesEqualSmallerLarger() async throws {
        let destination = file("big.bin")
        let download = try ResumableDownload(baseURL: base, path: "/big.bin", to: destination)

        // Smaller: resume with bytes=<local size>-.
        try big.prefix(100_000).write(to: destination)
        let resumed = try await download.run()
        #expect(resumed.start == .resumed(at: 100_000))
        #expect(resumed.range == "bytes=100000-")
        #expect(resumed.status == 206)
        #expect(resumed.bytesReceived == 200_000)
        #expect(try sha256(Data(contentsOf: destination)) == sha256(big))

        // Equal: done, nothing asked.
        let done = try await download.run()
        #expect(done.start == .alreadyComplete && done.range == nil && done.bytesReceived == 0 && done.isComplete)

        // Larger: delete and start over.
        try (big + Data("extra".utf8)).write(to: destination)
        let restarted = try await download.run()
        #expect(restarted.start == .restarted(discarded: Int64(big.count) + 5))
        #expect(restarted.range == "bytes=0-")
        #expect(try sha256(Data(contentsOf: destination)) == sha256(big))
    }

    @Test func survivesAServerSideCutAndResumes() async throws {
        let destination = file("big.bin")
        // The server sends Content-Length 300000, then closes after 100,000 body bytes.
        let cut = try ResumableDownload(baseURL: base, path: "/big.bin?cut=100000", to: destination)
        do {
            let report = try await cut.run()
            Issue.record("the cut download completed: \(report) (does the server implement ?cut= yet?)")
        } catch let error as ExampleError {
            guard case .interrupted(_, let onDisk, let expected, _) = error else {
                Issue.record("expected .interrupted, got \(error)")
                return
            }
            #expect(onDisk == 100_000 && expected == 300_000)
            #expect(error.description.contains("run it again to resume"))
        }
        #expect(try Data(contentsOf: destination) == big.prefix(100_000))

        let download = try ResumableDownload(baseURL: base, path: "/big.bin", to: destination)
        let report = try await download.run()
        #expect(report.start == .resumed(at: 100_000))
        #expect(report.range == "bytes=100000-")
        #expect(report.status == 206 && report.isComplete)
        #expect(try sha256(Data(contentsOf: destination)) == sha256(big))
    }

    @Test func pausesAndResumesLater() async throws {
        let destination = file("large.bin")
        let download = try ResumableDownload(baseURL: base, path: "/large.bin", to: destination)
        let paused = try await runPausing(download, at: 500_000)
        #expect(paused.paused && !paused.isComplete)
        #expect(paused.bytesOnDisk >= 500_000 && paused.bytesOnDisk < Int64(large.count))
        let partial = try Data(contentsOf: destination)
        #expect(Int64(partial.count) == paused.bytesOnDisk)
        #expect(partial == large.prefix(partial.count))

        let progress = Locked<[ResumableDownload.Progress]>([])
        let resumed = try await download.run { step in progress.mutate { $0.append(step) } }
        #expect(resumed.start == .resumed(at: paused.bytesOnDisk))
        #expect(resumed.range == "bytes=\(paused.bytesOnDisk)-")
        #expect(resumed.status == 206 && resumed.isComplete)
        #expect(progress.value.first?.bytesOnDisk == paused.bytesOnDisk)
        #expect(progress.value.last?.fraction == 1.0)
        #expect(try sha256(Data(contentsOf: destination)) == sha256(large))
    }

    @Test func pausesAServerThatStalledAndResumesFromExactlyWhereItStopped() async throws {
        let destination = file("big.bin")
        // The server sends 150,000 bytes and then nothing, keeping the connection open.
        let stalled = try ResumableDownload(baseURL: base, path: "/big.bin?stall=150000", to: destination)
        let report = try await runPausing(stalled, at: 150_000)
        #expect(report.paused && report.bytesOnDisk == 150_000)
        let resumed = try await ResumableDownload(baseURL: base, path: "/big.bin", to: destination).run()
        #expect(resumed.start == .resumed(at: 150_000) && resumed.isComplete)
        #expect(try sha256(Data(contentsOf: destination)) == sha256(big))
    }

    @Test func cancellingTheTaskStopsTheTransferAndKeepsThePartialFile() async throws {
        let destination = file("big.bin")
        let download = try ResumableDownload(baseURL: base, path: "/big.bin?stall=120000", to: destination)
        let reached = Locked(false)
        let task = Task { try await download.run { step in if step.bytesOnDisk >= 120_000 { reached.mutate { $0 = true } } } }
        for _ in 0..<500 where !reached.value { try await Task.sleep(for: .milliseconds(10)) }
        #expect(reached.value)
        task.cancel()
        await #expect(throws: CancellationError.self) { try await task.value }
        #expect(try Data(contentsOf: destination) == big.prefix(120_000))
    }

    @Test func aFileChangedBetweenPauseAndResumeIsFetchedWhole() async throws {
        let destination = file("large.bin")
        let download = try ResumableDownload(baseURL: base, path: "/large.bin", to: destination)
        let paused = try await runPausing(download, at: 500_000)
        #expect(paused.paused)
        // A new version of the same size: only the ETag tells it apart.
        let changed = testBytes(count: large.count, seed: 15)
        try changed.write(to: server.root.appendingPathComponent("large.bin"))
        let report = try await download.run()
        #expect(report.start == .resumed(at: paused.bytesOnDisk))
        #expect(report.status == 200)   // If-Range did not match: the whole new file
        #expect(try sha256(Data(contentsOf: destination)) == sha256(changed))
    }

    @Test func aMissingFileIsAClearError() async throws {
        let download = try ResumableDownload(baseURL: base, path: "/nope.bin", to: file("nope.bin"))
        do {
            _ = try await download.run()
            Issue.record("a missing file downloaded")
        } catch let error as ExampleError {
            #expect(error.description.contains("404"))
        }
        #expect(!FileManager.default.fileExists(atPath: file("nope.bin").path))
    }

    // MARK: MultipartUpload — hand-built bodies, progress through the delegate (seeds 000, 001, 002)

    @Test func uploadsAFileAndAFieldWithProgress() async throws {
        let boundary = try MultipartBoundary("----WebKitFormBoundary0IQAt0HA7oxwIx3f")
        let upload = try MultipartUpload(baseURL: base, parts: [
            .file(image, filename: "Snip20151228_572.png"),
            .field(name: "username", value: "dashen9"),
        ], boundary: boundary)
        #expect(upload.contentType == "multipart/form-data; boundary=\"----WebKitFormBoundary0IQAt0HA7oxwIx3f\""
                || upload.contentType == "multipart/form-data; boundary=----WebKitFormBoundary0IQAt0HA7oxwIx3f")
        let bodyFile = file("body")
        let length = try upload.writeBody(to: bodyFile)
        let body = try Data(contentsOf: bodyFile)
        #expect(Int64(body.count) == length)
        #expect(body.starts(with: Data("--\(boundary.value)\r\nContent-Disposition: form-data; name=\"file\"; filename=\"Snip20151228_572.png\"\r\nContent-Type: image/png\r\n\r\n".utf8)))

        let progress = Locked<[MultipartUpload.Progress]>([])
        let receipt = try await upload.send { step in progress.mutate { $0.append(step) } }
        #expect(receipt.fields == [UploadReceipt.Field(name: "username", value: "dashen9", valueBase64: nil)])
        let stored = try #require(receipt.files.first)
        #expect(receipt.files.count == 1)
        #expect(stored.field == "file" && stored.filename == "Snip20151228_572.png" && stored.contentType == "image/png")
        #expect(stored.size == Int64(image.count))
        #expect(stored.sha256 == (try sha256(image)))
        #expect(stored.url == "/uploads/Snip20151228_572.png")
        #expect(try server.uploadedData("Snip20151228_572.png") == image)
        // didSendBodyData reached the whole body.
        let last = try #require(progress.value.last)
        #expect(last.bytesSent == length && last.bytesExpected == length && last.fraction == 1.0)
    }

    @Test func uploadsSeveralFilesInOneRequestAndTheyComeBackByTheirURL() async throws {
        let onDisk = file("big copy.bin")
        try big.write(to: onDisk)
        let text = Data("hello, counterpart\n".utf8)
        let upload = try MultipartUpload(baseURL: base, parts: [
            .file(onDisk, field: "files"),
            .file(image, field: "files", filename: "header 1.png"),
            .field(name: "username", value: "dashen9"),
            .file(text, field: "notes", filename: "notes.txt"),
            .field(name: "submit", value: "Submit"),
        ])
        let receipt = try await upload.send()
        #expect(receipt.fields.map(\.name) == ["username", "submit"])
        #expect(receipt.files.map(\.filename) == ["big copy.bin", "header 1.png", "notes.txt"])
        #expect(receipt.files.map(\.field) == ["files", "files", "notes"])
        #expect(receipt.files.map(\.contentType) == ["application/octet-stream", "image/png", "text/plain"])
        for (stored, original) in zip(receipt.files, [big, image, text]) {
            #expect(stored.size == Int64(original.count))
            #expect(stored.sha256 == (try sha256(original)))
            // The receipt's url serves the stored file (and would take Range).
            let (data, response) = try await makeSession().data(from: try ExampleURL.resolve(stored.url, against: base))
            #expect((response as? HTTPURLResponse)?.statusCode == 200)
            #expect(data == original)
        }
    }

    @Test func anUploadTheServerRefusesIsAnErrorWithItsMessage() async throws {
        let upload = try MultipartUpload(baseURL: base, path: "/itcast/images/head4.png", parts: [.field(name: "a", value: "b")])
        do {
            _ = try await upload.send()
            Issue.record("a POST to a static file succeeded")
        } catch let ExampleError.httpStatus(status, method, _, message) {
            #expect(status == 405 && method == "POST")
            #expect(message?.isEmpty == false)
        }
    }

    // MARK: the command

    @Test func theCommandRunsEachExample() async throws {
        let info = try await runExamples([base.absoluteString, "info", "/itcast/images/head4.png"], in: local)
        #expect(info.status == 0)
        #expect(info.stdout.contains("size:               48213 bytes"))
        #expect(info.stdout.contains("suggested filename: head4.png"))

        let packets = try await runExamples([base.absoluteString, "packets", "/itcast/images/head4.png"], in: local)
        #expect(packets.status == 0)
        #expect(packets.stdout.contains("Range: Bytes=40500-48212"))
        #expect(try Data(contentsOf: file("head4.png")) == image)   // named by ?download

        let resume = try await runExamples([base.absoluteString, "resume", "/big.bin", "got.bin", "--cut", "100000"], in: local)
        #expect(resume.status == 0, "\(resume.stderr)")
        #expect(resume.stdout.contains("interrupted"))
        #expect(resume.stdout.contains("local file was smaller (100000 bytes): sent Range bytes=100000-, got 206"))
        #expect(try sha256(Data(contentsOf: file("got.bin"))) == sha256(big))

        try text("hello\n").write(to: file("a.txt"))
        let upload = try await runExamples([base.absoluteString, "upload", "a.txt", "head4.png", "--field", "username=dashen9"], in: local)
        #expect(upload.status == 0, "\(upload.stderr)")
        #expect(upload.stdout.contains("field username = dashen9"))
        #expect(upload.stdout.contains("sha256 \(try sha256(image))"))
        #expect(upload.stdout.contains("sent 100 %"))
    }

    @Test func theCommandFailsClearly() async throws {
        let help = try await runExamples(["--help"], in: local)
        #expect(help.status == 0 && help.stdout.contains("resume PATH [DEST]"))

        let missing = try await runExamples([base.absoluteString, "resume", "/nope.bin", "x.bin"], in: local)
        #expect(missing.status == 1)
        #expect(missing.stderr.contains("404 Not Found"))

        let unknown = try await runExamples([base.absoluteString, "frobnicate"], in: local)
        #expect(unknown.status == 2 && unknown.stderr.contains("unknown example \"frobnicate\""))

        let badURL = try await runExamples(["localhost:8080", "info", "/x"], in: local)
        #expect(badURL.status == 2 && badURL.stderr.contains("BASE_URL"))
    }

    func text(_ string: String) -> Data { Data(string.utf8) }
}

/// A value shared with callbacks that run on URLSession's queues.
/// Unchecked: `stored` is read and written under `lock`.
final class Locked<Value: Sendable>: @unchecked Sendable {
    private let lock = NSLock()
    private var stored: Value

    init(_ value: Value) { stored = value }

    var value: Value { lock.withLock { stored } }

    func mutate(_ change: (inout Value) -> Void) { lock.withLock { change(&stored) } }
}

/// Runs the built `counterpart-examples` in `folder` and waits for it without blocking a
/// thread of the tests' pool.
func runExamples(_ arguments: [String], in folder: URL) async throws -> (status: Int32, stdout: String, stderr: String) {
    let executable = try builtProduct("counterpart-examples")
    let id = UUID().uuidString
    let out = FileManager.default.temporaryDirectory.appendingPathComponent("examples-\(id).out")
    let err = FileManager.default.temporaryDirectory.appendingPathComponent("examples-\(id).err")
    defer {
        try? FileManager.default.removeItem(at: out)
        try? FileManager.default.removeItem(at: err)
    }
    _ = FileManager.default.createFile(atPath: out.path, contents: nil)
    _ = FileManager.default.createFile(atPath: err.path, contents: nil)
    let process = Process()
    process.executableURL = executable
    process.arguments = arguments
    process.currentDirectoryURL = folder
    process.standardOutput = try FileHandle(forWritingTo: out)
    process.standardError = try FileHandle(forWritingTo: err)
    let status: Int32 = try await withCheckedThrowingContinuation { continuation in
        process.terminationHandler = { continuation.resume(returning: $0.terminationStatus) }
        do { try process.run() } catch {
            process.terminationHandler = nil
            continuation.resume(throwing: error)
        }
    }
    return (status, try String(contentsOf: out, encoding: .utf8), try String(contentsOf: err, encoding: .utf8))
}
