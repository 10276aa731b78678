@testable import Counterpart
import Foundation
import Testing

/// The built `counterpart` executable, next to the test bundle.
func counterpartExecutable() throws -> URL {
    try builtProduct("counterpart")
}

/// A `counterpart` process with its pipes.
final class CommandRun {
    let process = Process()
    let output = Pipe()
    let errors = Pipe()

    /// `environment` is added to this process's own, without any `COUNTERPART_` variables it has.
    init(_ arguments: [String], in folder: URL? = nil, environment: [String: String] = [:]) throws {
        process.executableURL = try counterpartExecutable()
        process.arguments = arguments
        process.environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("COUNTERPART_") }
            .merging(environment) { $1 }
        process.standardOutput = output
        process.standardError = errors
        if let folder { process.currentDirectoryURL = folder }
        try process.run()
    }

    /// The first line on stdout (the `listening on` line).
    func firstLine() -> String {
        var line = Data()
        while true {
            let byte = output.fileHandleForReading.readData(ofLength: 1)
            if byte.isEmpty || byte == Data("\n".utf8) { break }
            line.append(byte)
        }
        return String(decoding: line, as: UTF8.self)
    }

    func waitForExit() -> (status: Int32, stdout: String, stderr: String) {
        let out = output.fileHandleForReading.readDataToEndOfFile()
        let err = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: out, as: UTF8.self), String(decoding: err, as: UTF8.self))
    }
}

/// The files process `pid` has mapped (/proc/PID/maps), read to its end: /proc's files say
/// they are empty, and a read by their size stops short.
func mappedFiles(of pid: Int32) throws -> String {
    let file = try FileHandle(forReadingFrom: URL(fileURLWithPath: "/proc/\(pid)/maps"))
    defer { try? file.close() }
    return String(decoding: try file.readToEnd() ?? Data(), as: UTF8.self)
}

/// A folder for the command to run in, its `public/` holding `files` (name: text).
func makeFolder(serving files: [String: String] = [:]) throws -> URL {
    let folder = try makeTemporaryFolder("command")
    try FileManager.default.createDirectory(at: folder.appendingPathComponent("public"), withIntermediateDirectories: true)
    for (name, text) in files {
        try Data(text.utf8).write(to: folder.appendingPathComponent("public/\(name)"))
    }
    return folder
}

@Suite("The command")
struct CommandTests {
    @Test func printsOneListeningLineServesAndStopsOnSIGTERM() throws {
        let folder = try makeFolder(serving: ["hi.txt": "hi"])
        defer { try? FileManager.default.removeItem(at: folder) }
        let run = try CommandRun(["--port", "0"], in: folder)
        let line = run.firstLine()
        #expect(line.hasPrefix("listening on http://127.0.0.1:"))
        let base = String(line.dropFirst("listening on ".count))
        #expect(try curl([base + "/hi.txt"]).text == "hi")
        // Defaults: ./public served, ./uploads created.
        #expect(FileManager.default.fileExists(atPath: folder.appendingPathComponent("uploads").path))
        run.process.terminate()
        let result = run.waitForExit()
        #expect(result.status == 0)
        #expect(result.stdout.isEmpty, "more than one line on stdout: \(result.stdout)")
        // One access-log line per request: method, path, status, bytes, duration.
        #expect(result.stderr.contains("127.0.0.1 GET /hi.txt 200 2 "))
    }

    @Test func quietLogsNothingPerRequest() throws {
        let folder = try makeFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let run = try CommandRun(["--port", "0", "--quiet", "--root", folder.appendingPathComponent("public").path,
                                  "--uploads", folder.appendingPathComponent("up").path])
        let base = String(run.firstLine().dropFirst("listening on ".count))
        _ = try curl([base + "/missing"])
        kill(run.process.processIdentifier, SIGINT)
        let result = run.waitForExit()
        #expect(result.status == 0)
        #expect(!result.stderr.contains("/missing"))
    }

    /// libcurl (and OpenSSL, Kerberos, LDAP… under it) is loaded by the first S3 store only:
    /// a server on a local folder never maps it (the cluster's nodes do, ClusterTests).
    @Test func aServerOnALocalFolderDoesNotLoadLibcurl() throws {
        let folder = try makeFolder(serving: ["hi.txt": "hi"])
        defer { try? FileManager.default.removeItem(at: folder) }
        let run = try CommandRun(["--port", "0", "--quiet"], in: folder)
        let base = String(run.firstLine().dropFirst("listening on ".count))
        #expect(try curl([base + "/hi.txt"]).text == "hi")
        #expect(try curl(["-F", "f=@\(folder.appendingPathComponent("public/hi.txt").path)", base + "/upload"]).status == 200)
        let maps = try mappedFiles(of: run.process.processIdentifier)
        #expect(maps.contains("libmicrohttpd") && maps.contains("[stack]"), "the maps were not read whole: \(maps.suffix(300))")
        #expect(!maps.contains("libcurl"))
        #expect(!maps.contains("libssl"))
        run.process.terminate()
        #expect(run.waitForExit().status == 0)
    }

    @Test(arguments: [
        (["--port", "http"], "--port"), (["--port"], "--port"), (["--bogus"], "--bogus"),
        (["--max-upload-bytes", "lots"], "--max-upload-bytes"), (["--threads", "-1"], "--threads"),
        (["stray"], "stray"), (["--quiet=yes"], "--quiet"), (["--max-parts", "0"], "--max-parts"),
        (["--head-timeout", "-1"], "--head-timeout"), (["--min-free-disk", "much"], "--min-free-disk"),
        (["--max-connections-per-client=x"], "--max-connections-per-client"), (["--idle-timeout", "0"], "--idle-timeout"),
        (["--max-ranges", "1.5"], "--max-ranges"), (["--sync", "sometimes"], "--sync"), (["--max-part-header-bytes", "0"], "--max-part-header-bytes"),
        (["--connection-memory", "8KiB"], "--connection-memory"), (["--connection-memory", "32MiB"], "--connection-memory"),
        (["--evict-at", "150"], "--evict-at"), (["--min-head-rate", "fast"], "--min-head-rate"),
        (["--head-grace", "-1"], "--head-grace"), (["--min-body-rate", "slow"], "--min-body-rate"),
        (["--s3-timeout", "0"], "--s3-timeout"), (["--s3-timeout", "3601"], "--s3-timeout"), (["--s3-timeout", "soon"], "--s3-timeout"),
        (["--s3-timeout", "1.5"], "--s3-timeout"),
        // Without a store it has nothing to apply to (as --s3-endpoint).
        (["--s3-timeout", "5"], "--s3-timeout needs --store"),
    ])
    func badFlagsExitWith2AndNameTheFlag(_ arguments: [String], _ named: String) throws {
        let result = try CommandRun(arguments).waitForExit()
        #expect(result.status == 2)
        let lines = result.stderr.split(separator: "\n")
        #expect(lines.first?.hasPrefix("counterpart: ") == true)
        #expect(lines.first?.contains(named) == true)
        #expect(result.stderr.contains("usage: counterpart"))
        #expect(result.stdout.isEmpty)
    }

    /// `--sync full` syncs each upload (file and folder), and starts write-back as a long one
    /// streams through the page cache (where the file system takes direct I/O, whole chunks
    /// go past the cache and there is nothing to write back); `--sync none` makes no sync
    /// call at all. Counted with strace attached to the running command (every thread).
    @Test(arguments: [SyncMode.full, .none])
    func syncModeDecidesEverySyncCall(_ mode: SyncMode) throws {
        try #require(FileManager.default.isExecutableFile(atPath: "/usr/bin/strace"), "install strace (make test does)")
        let folder = try makeFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let run = try CommandRun(["--port", "0", "--quiet", "--sync", mode.rawValue], in: folder)
        let base = String(run.firstLine().dropFirst("listening on ".count))
        let trace = folder.appendingPathComponent("syscalls.txt").path
        let tracer = Process()
        tracer.executableURL = URL(fileURLWithPath: "/usr/bin/strace")
        tracer.arguments = ["-f", "-e", "trace=fsync,fdatasync,sync_file_range", "-o", trace, "-p", String(run.process.processIdentifier)]
        let attached = Pipe()
        tracer.standardError = attached
        try tracer.run()
        // strace says "Process N attached" on stderr once it traces the server.
        _ = attached.fileHandleForReading.readData(ofLength: 1)
        let upload = try temporaryFile("sync.bin", testBytes(count: 20 << 20, seed: 5))
        let reply = try curl(["-F", "file=@\(upload)", base + "/upload"])
        run.process.terminate()
        _ = run.waitForExit()
        tracer.waitUntilExit()
        #expect(reply.status == 200)
        let calls = try String(contentsOfFile: trace, encoding: .utf8).split(separator: "\n")
        let fsyncs = calls.filter { $0.contains("fsync(") }.count
        let writeBacks = calls.filter { $0.contains("sync_file_range(") }.count
        switch mode {
        case .full:
            #expect(fsyncs >= 2, "the file and the folder: \(calls)")
            let probe = open(folder.appendingPathComponent("probe").path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o644)
            defer { close(probe) }
            if Platform.setPageCacheBypass(probe, true) {
                #expect(writeBacks == 0, "20 MiB in whole chunks past the page cache: \(calls)")
            } else {
                #expect(writeBacks >= 2, "20 MiB through the page cache starts write-back every 8 MiB: \(calls)")
            }
        case .none:
            #expect(fsyncs == 0 && writeBacks == 0, "\(calls)")
        }
    }

    @Test func helpPrintsUsage() throws {
        let result = try CommandRun(["--help"]).waitForExit()
        #expect(result.status == 0)
        #expect(result.stdout.contains("--max-upload-bytes"))
    }

    @Test func limitFlagsTakeEffect() throws {
        let folder = try makeFolder(serving: ["ten.txt": "0123456789"])
        defer { try? FileManager.default.removeItem(at: folder) }
        let run = try CommandRun(["--port", "0", "--quiet", "--max-parts", "2", "--max-field-bytes", "8", "--max-ranges", "2",
                                  "--max-part-header-bytes", "100", "--max-connections-per-client", "4",
                                  "--head-timeout", "5", "--idle-timeout", "5", "--max-connections", "50"], in: folder)
        let base = String(run.firstLine().dropFirst("listening on ".count))
        defer { run.process.terminate(); _ = run.waitForExit() }
        #expect(try curl(["-F", "a=1", "-F", "b=2", "-F", "c=3", base + "/upload"]).status == 413)
        #expect(try curl(["-F", "a=123456789", base + "/upload"]).status == 413)
        #expect(try curl(["-F", "a=1;headers=\"X-Long: \(String(repeating: "x", count: 100))\"", base + "/upload"]).status == 400)
        #expect(try curl(["-F", "a=1", "-F", "b=2", base + "/upload"]).status == 200)
        #expect(try curl(["-r", "0-0,2-2,4-4", base + "/ten.txt"]).status == 200)
        #expect(try curl(["-r", "0-0,2-2", base + "/ten.txt"]).status == 206)
    }

    @Test func connectionMemoryBoundsTheHeadAndCarriesUploads() throws {
        let folder = try makeFolder(serving: ["ten.txt": "0123456789"])
        defer { try? FileManager.default.removeItem(at: folder) }
        let header = "X-Padding: " + String(repeating: "x", count: 24 * 1024)
        for (memory, headStatus) in [("16KiB", 431), ("256KiB", 200)] {
            let run = try CommandRun(["--port", "0", "--quiet", "--connection-memory", memory], in: folder)
            let base = String(run.firstLine().dropFirst("listening on ".count))
            defer { run.process.terminate(); _ = run.waitForExit() }
            #expect(try curl(["-H", header, base + "/ten.txt"]).status == headStatus, "\(memory)")
            let upload = try curl(["-F", "file=@-;filename=big.bin", base + "/upload"], stdin: Data(repeating: 0x61, count: 3 << 20))
            #expect(upload.status == 200, "\(memory)")
            let files = try #require(upload.json()["files"] as? [[String: Any]])
            #expect(files.first?["size"] as? Int == 3 << 20, "\(memory)")
        }
    }

    @Test func minFreeDiskGives507() throws {
        let folder = try makeFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let run = try CommandRun(["--port", "0", "--quiet", "--min-free-disk", "1000000TiB"], in: folder)
        let base = String(run.firstLine().dropFirst("listening on ".count))
        defer { run.process.terminate(); _ = run.waitForExit() }
        #expect(try curl(["-F", "a=1", base + "/upload"]).status == 507)
    }

    @Test func aMissingRootIsAClearError() throws {
        let result = try CommandRun(["--port", "0", "--root", "/nonexistent/folder"]).waitForExit()
        #expect(result.status == 1)
        #expect(result.stderr.contains("/nonexistent/folder"))
    }

    @Test func stopRemovesPartialUploadsAndStartCleansACrashsLeftovers() throws {
        let folder = try makeFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let uploads = folder.appendingPathComponent("uploads")
        try FileManager.default.createDirectory(at: uploads, withIntermediateDirectories: true)
        // A temporary file of a server that crashed (no such process).
        try Data("stale".utf8).write(to: uploads.appendingPathComponent(".counterpart-999999999-1.part"))
        try Data("kept".utf8).write(to: uploads.appendingPathComponent("done.txt"))

        let run = try CommandRun(["--port", "0"], in: folder)
        let base = String(run.firstLine().dropFirst("listening on ".count))
        #expect(try FileManager.default.contentsOfDirectory(atPath: uploads.path) == ["done.txt"])

        // An upload that stalls halfway: its temporary file exists until the server stops.
        let port = UInt16(base.split(separator: ":").last!)!
        let head = "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=b\r\nContent-Length: 100000\r\n\r\n"
        let part = Array("--b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"stalled.bin\"\r\n\r\npartial data".utf8)
        let client = BackgroundCall { try RawHTTPConnection.exchange(port: port, Array(head.utf8) + part, timeout: 10) }
        #expect(waitUntil { ((try? FileManager.default.contentsOfDirectory(atPath: uploads.path)) ?? []).contains { $0.hasSuffix(".part") } })

        run.process.terminate()
        let started = Date()
        let result = run.waitForExit()
        #expect(result.status == 0)
        // The stalled request outlived the grace period and was cut.
        #expect(Date().timeIntervalSince(started) < 15)
        #expect(try FileManager.default.contentsOfDirectory(atPath: uploads.path) == ["done.txt"])
        _ = try? client.wait()
    }

    /// `kill -9` in the middle of resumable uploads: after a restart both protocols report
    /// the offset they had acknowledged and complete.
    @Test func resumableUploadsSurviveKill9() throws {
        let folder = try makeFolder()
        defer { try? FileManager.default.removeItem(at: folder) }
        let first = try CommandRun(["--port", "0", "--quiet"], in: folder)
        let base = String(first.firstLine().dropFirst("listening on ".count))
        let created = try curl(["-H", "Tus-Resumable: 1.0.0", "-X", "POST", "-H", "Upload-Length: 11",
                                "-H", "Upload-Metadata: filename \(Data("k.txt".utf8).base64EncodedString())", base + "/files"])
        let location = try #require(created.header("Location"))
        let patched = try curl(["-H", "Tus-Resumable: 1.0.0", "-X", "PATCH", "-H", "Upload-Offset: 0",
                                "-H", "Content-Type: application/offset+octet-stream", "--data-binary", "hello", base + location])
        #expect(patched.header("Upload-Offset") == "5")
        let ietf = try curl(["-H", "Content-Type: multipart/form-data; boundary=b", "-H", "Upload-Draft-Interop-Version: 8",
                             "-H", "Upload-Complete: ?0", "--data-binary", "--b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"i.txt\"\r\n\r\nhel",
                             base + "/upload"])
        let resource = try #require(ietf.header("Location"))
        kill(first.process.processIdentifier, SIGKILL)
        _ = first.waitForExit()

        let second = try CommandRun(["--port", "0", "--quiet"], in: folder)
        let again = String(second.firstLine().dropFirst("listening on ".count))
        defer { second.process.terminate(); _ = second.waitForExit() }
        #expect(try curl(["-I", "-H", "Tus-Resumable: 1.0.0", again + location]).header("Upload-Offset") == "5")
        let done = try curl(["-H", "Tus-Resumable: 1.0.0", "-X", "PATCH", "-H", "Upload-Offset: 5",
                             "-H", "Content-Type: application/offset+octet-stream", "--data-binary", " world", again + location])
        #expect(done.header("Upload-Offset") == "11")
        #expect(try String(contentsOf: folder.appendingPathComponent("uploads/k.txt"), encoding: .utf8) == "hello world")
        let moved = resource.replacingOccurrences(of: base, with: again)
        let offset = try curl(["-I", "-H", "Upload-Draft-Interop-Version: 8", moved]).header("Upload-Offset")
        let sent = "--b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"i.txt\"\r\n\r\nhel".utf8.count
        #expect(offset == String(sent))
        let finished = try curl(["-X", "PATCH", "-H", "Upload-Draft-Interop-Version: 8", "-H", "Upload-Complete: ?1",
                                 "-H", "Upload-Offset: \(sent)", "-H", "Content-Type: application/partial-upload",
                                 "--data-binary", "lo\r\n--b--\r\n", moved])
        #expect(finished.status == 200)
        #expect(try String(contentsOf: folder.appendingPathComponent("uploads/i.txt"), encoding: .utf8) == "hello")
    }
}
