@testable import Counterpart
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import Testing

/// A server on a free port with its own temporary root and uploads folders, stopped and
/// removed when the value goes away.
///
/// With `COUNTERPART_TEST_STORE=s3` (and an engine, `COUNTERPART_S3_ENV`) its uploads go to
/// the object store instead, under a prefix of its own: `make test-s3` runs the storage
/// suites so, against both backends.
final class TestServer: Sendable {
    let server: CounterpartServer
    let root: URL
    let uploads: URL
    /// The object store the uploads go to, on the server's own prefix; nil: the uploads folder.
    let objectStore: S3Client?
    private let folder: URL

    /// Whether this run's test servers keep their uploads in the object store.
    static let usesObjectStore = ProcessInfo.processInfo.environment["COUNTERPART_TEST_STORE"] == "s3"

    init(configure: (inout Configuration) -> Void = { _ in }, populate: (URL) throws -> Void = { _ in }) throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("counterpart-test-\(UUID().uuidString)")
        root = folder.appendingPathComponent("public")
        uploads = folder.appendingPathComponent("uploads")
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        try populate(root)
        var configuration = Configuration(root: root.path, uploads: uploads.path)
        if Self.usesObjectStore {
            let client = try S3TestEngine.client()
            configuration.objectStore = client.configuration
            objectStore = client
        } else {
            objectStore = nil
        }
        configure(&configuration)
        server = try CounterpartServer(configuration)
    }

    deinit {
        server.stop(grace: .seconds(1))
        try? FileManager.default.removeItem(at: folder)
    }

    func url(_ path: String) -> String { server.baseURL.absoluteString + path }

    /// The names in the uploads folder, hidden temporary files included. In the object
    /// store: the objects' names, and `.multipart-KEY` for each multipart upload left open
    /// (what a temporary file is on disk).
    func uploadedNames() -> [String] {
        guard let objectStore else { return ((try? FileManager.default.contentsOfDirectory(atPath: uploads.path)) ?? []).sorted() }
        var names: [String] = []
        var token: String?
        repeat {
            guard let page = try? objectStore.listObjects(prefix: "", delimiter: "/", continuationToken: token) else { break }
            names += page.objects.map(\.key).filter { !$0.hasPrefix(".") }
            token = page.nextContinuationToken
        } while token != nil
        let open = (try? objectStore.listMultipartUploads()) ?? []
        names += open.filter { !$0.key.hasPrefix(".") }.map { ".multipart-" + $0.key }
        return names.sorted()
    }

    /// Puts a file in the uploads as another tool would (not through the server).
    func storeUpload(_ data: Data, as name: String) throws {
        guard let objectStore else {
            try FileManager.default.createDirectory(at: uploads, withIntermediateDirectories: true)
            return try data.write(to: uploads.appendingPathComponent(name))
        }
        try objectStore.putObject(name, bytes: [UInt8](data))
    }

    /// Resumable uploads in progress: those whose bytes are still in the store.
    func resumableUploadsInProgress() -> Int {
        guard let objectStore else {
            return ((try? FileManager.default.contentsOfDirectory(atPath: uploads.appendingPathComponent(".resumable").path)) ?? [])
                .filter { $0.hasSuffix(".data") }.count
        }
        let keys = (try? objectStore.listObjects(prefix: S3ResumableStorage.prefix).objects.map(\.key)) ?? []
        return keys.filter { $0.hasSuffix(".parts") }.count
    }

    /// What a failed or finished request must not leave: temporary files of uploads and of
    /// state saves (a folder), multipart uploads left open and staging objects (an object
    /// store).
    func temporaryFiles() -> [String] {
        guard objectStore != nil else {
            let top = (try? FileManager.default.contentsOfDirectory(atPath: uploads.path)) ?? []
            let resumable = (try? FileManager.default.contentsOfDirectory(atPath: uploads.appendingPathComponent(".resumable").path)) ?? []
            return top.filter { $0.hasPrefix(".counterpart-") } + resumable.filter { $0.hasSuffix(".tmp") }
        }
        let staged = (try? objectStore!.listObjects(prefix: ".counterpart/staging/").objects.map(\.key)) ?? []
        return uploadedNames().filter { $0.hasPrefix(".multipart-") } + staged
    }

    /// The bytes of the upload stored as `name`, from the folder or the object store.
    func uploadedData(_ name: String) throws -> Data {
        guard let objectStore else { return try Data(contentsOf: uploads.appendingPathComponent(name)) }
        return Data(try #require(try objectStore.getObject(name), "\(name) is not in the object store"))
    }

    /// Waits until `condition` holds (requests complete on server threads), up to 5 s.
    func eventually(_ condition: () -> Bool) -> Bool { waitUntil(condition) }
}

extension TestServer {
    /// A server whose root holds `files`, each at its slash-separated path (configured by
    /// `configure`).
    convenience init(configure: (inout Configuration) -> Void = { _ in }, serving files: [String: Data]) throws {
        try self.init(configure: configure, populate: { root in
            for (path, data) in files { try data.write(into: root, at: path) }
        })
    }
}

/// Polls `condition` every 20 ms until it holds or `seconds` pass; its last value.
func waitUntil(seconds: Double = 5, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if condition() { return true }
        Thread.sleep(forTimeInterval: 0.02)
    }
    return condition()
}

/// A new empty folder `prefix-<UUID>` in the temporary directory; the caller removes it.
func makeTemporaryFolder(_ prefix: String) throws -> URL {
    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    return folder
}

extension Data {
    /// Writes the bytes to `path` (slash-separated) below `folder`, making the folders on the way.
    func write(into folder: URL, at path: String) throws {
        let file = folder.appendingPathComponent(path)
        try FileManager.default.createDirectory(at: file.deletingLastPathComponent(), withIntermediateDirectories: true)
        try write(to: file)
    }
}

/// What a curl run saw.
struct CurlResult {
    var exitCode: Int32
    var status: Int
    /// Header fields of the last response, in order.
    var headers: [(name: String, value: String)]
    var body: Data

    func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    var text: String { String(decoding: body, as: UTF8.self) }

    func json() throws -> [String: Any] {
        try #require(try JSONSerialization.jsonObject(with: body) as? [String: Any], "not a JSON object: \(text)")
    }
}

/// `method` on `url` is refused with 405, the methods the resource allows and a JSON error.
func expectMethodNotAllowed(_ method: String, _ url: String, allow: String,
                            sourceLocation: SourceLocation = #_sourceLocation) throws {
    let result = try curl(["-X", method, url])
    #expect(result.status == 405, sourceLocation: sourceLocation)
    #expect(result.header("Allow") == allow, sourceLocation: sourceLocation)
    #expect(try result.json()["error"] is String, sourceLocation: sourceLocation)
}

/// The JSON listing at `url` (200, application/json, naming the folder `path`): its entries.
func jsonListing(_ url: String, of path: String, sourceLocation: SourceLocation = #_sourceLocation) throws -> [[String: Any]] {
    let result = try curl(["-H", "Accept: application/json", url])
    #expect(result.status == 200, sourceLocation: sourceLocation)
    #expect(result.header("Content-Type") == "application/json", sourceLocation: sourceLocation)
    let json = try result.json()
    #expect(json["path"] as? String == path, sourceLocation: sourceLocation)
    return try #require(json["entries"] as? [[String: Any]], sourceLocation: sourceLocation)
}

/// Runs /usr/bin/curl with `arguments` and returns the response it got.
func curl(_ arguments: [String], stdin: Data? = nil) throws -> CurlResult {
    let scratch = try makeTemporaryFolder("curl")
    defer { try? FileManager.default.removeItem(at: scratch) }
    let headerFile = scratch.appendingPathComponent("headers")
    let bodyFile = scratch.appendingPathComponent("body")
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
    process.arguments = ["--silent", "--show-error", "--max-time", "30", "--dump-header", headerFile.path,
                         "--output", bodyFile.path] + arguments
    let errors = Pipe()
    process.standardError = errors
    let input = Pipe()
    if stdin != nil { process.standardInput = input }
    try process.run()
    if let stdin {
        input.fileHandleForWriting.write(stdin)
        try input.fileHandleForWriting.close()
    }
    process.waitUntilExit()
    _ = errors.fileHandleForReading.readDataToEndOfFile()
    let headerText = (try? String(contentsOf: headerFile, encoding: .isoLatin1)) ?? ""
    // With --dump-header, curl writes the headers of every response (100 Continue,
    // redirects): the last block is the final response.
    let blocks = headerText.components(separatedBy: "\r\n\r\n").filter { !$0.isEmpty }
    let lines = (blocks.last ?? "").components(separatedBy: "\r\n")
    let status = lines.first.flatMap { Int($0.split(separator: " ").dropFirst().first ?? "") } ?? 0
    let headers = lines.dropFirst().compactMap { line -> (String, String)? in
        guard let colon = line.firstIndex(of: ":") else { return nil }
        return (String(line[..<colon]), line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces))
    }
    let body = (try? Data(contentsOf: bodyFile)) ?? Data()
    return CurlResult(exitCode: process.terminationStatus, status: status, headers: headers, body: body)
}

/// The SHA-256 of `data`, by sha256sum (an independent implementation).
func sha256(_ data: Data) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/sha256sum")
    let input = Pipe()
    let output = Pipe()
    process.standardInput = input
    process.standardOutput = output
    try process.run()
    DispatchQueue.global().async {
        input.fileHandleForWriting.write(data)
        try? input.fileHandleForWriting.close()
    }
    let result = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return String(decoding: result.prefix(64), as: UTF8.self)
}

/// Deterministic bytes for test files.
func testBytes(count: Int, seed: UInt64 = 1) -> Data {
    var state = seed
    var data = Data(capacity: count)
    for _ in 0..<count {
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        data.append(UInt8(truncatingIfNeeded: state >> 33))
    }
    return data
}

/// A URLSession that neither caches nor reuses state between tests.
func makeSession() -> URLSession {
    let configuration = URLSessionConfiguration.ephemeral
    configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
    configuration.urlCache = nil
    configuration.timeoutIntervalForRequest = 30
    return URLSession(configuration: configuration)
}

extension HTTPURLResponse {
    func header(_ name: String) -> String? { value(forHTTPHeaderField: name) }
}

/// Runs a blocking call on a thread of its own (not the tests' cooperative pool, which a
/// blocking call could starve) and waits for its result.
/// Unchecked: `result` is written once by the thread before `done` is signalled and read
/// only after `wait()` has seen that signal.
final class BackgroundCall<T>: @unchecked Sendable {
    private let done = DispatchSemaphore(value: 0)
    private var result: Result<T, any Error>?

    init(_ body: @escaping @Sendable () throws -> T) {
        let thread = Thread { [self] in
            result = Result { try body() }
            done.signal()
        }
        thread.start()
    }

    func wait() throws -> T {
        done.wait()
        return try result!.get()
    }
}

/// Runs `executable` to its end: its exit status and its stdout followed by its stderr.
func runCommand(_ executable: String, _ arguments: [String]) throws -> (status: Int32, output: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: executable)
    process.arguments = arguments
    let output = Pipe()
    let errors = Pipe()
    process.standardOutput = output
    process.standardError = errors
    process.standardInput = FileHandle.nullDevice
    try process.run()
    let errorText = BackgroundRead(errors.fileHandleForReading)
    let text = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: text, as: UTF8.self) + errorText.wait())
}

/// Reads a pipe to its end on another thread, so that neither pipe of a process fills up;
/// what has come so far can be looked at meanwhile (`soFar`).
/// Unchecked: `data` is only touched under `lock`.
final class BackgroundRead: @unchecked Sendable {
    private let done = DispatchSemaphore(value: 0)
    private let lock = NSLock()
    private var data = Data()

    init(_ handle: FileHandle) {
        // A thread of its own: the reads block, and Dispatch's pool here grows by a thread
        // now and then, so twenty readers on it waited seconds for their turn to begin.
        let thread = Thread { [self] in
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                lock.withLock { data.append(chunk) }
            }
            done.signal()
        }
        thread.start()
    }

    /// What has been read until now.
    var soFar: String { lock.withLock { String(decoding: data, as: UTF8.self) } }

    /// The last `bytes` read until now (cheap to look at again and again, however much has come).
    func tail(_ bytes: Int) -> String { lock.withLock { String(decoding: data.suffix(bytes), as: UTF8.self) } }

    func wait() -> String {
        done.wait()
        return soFar
    }
}
