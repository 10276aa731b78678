// The server suite: Counterpart end to end over loopback, beside nginx in the same run,
// with the clients people use (curl, wrk). The release `counterpart` binary and nginx run
// as child processes, each with a folder of its own under one temporary folder; both
// serve the same root folder. Everything is stopped and removed at the end, on a failure,
// and on Ctrl-C.

import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

enum ServerBenchmarks {
    static var suite: BenchmarkSuite {
        let bench = ServerBench()
        var sections = ServerMeasure.allCases.map { measure in
            BenchmarkSection(name: measure.key, summary: measure.summary + " (key: \(measure.key))") { context in
                bench.runComparison(measure, context: context)
            }
        }
        sections.append(BenchmarkSection(
            name: "threads",
            summary: "the benchmarks above (keys: \(ServerMeasure.allCases.map(\.key).joined(separator: ", "))) for "
                + "--threads \(ServerBench.threadModes.map(String.init).joined(separator: ", ")) beside nginx",
            runsByDefault: false
        ) { context in
            bench.runThreadModes(context: context)
        })
        return BenchmarkSuite(
            name: "server", summary: "Counterpart end to end over loopback beside nginx (curl, wrk)",
            sections: sections, finish: { bench.finish() })
    }
}

// MARK: - What is measured

enum ServerMeasure: CaseIterable {
    case upload, download, ranges, rangeRate, small

    var key: String {
        switch self {
        case .upload: "upload"
        case .download: "download"
        case .ranges: "ranges"
        case .rangeRate: "range-rate"
        case .small: "small"
        }
    }

    var summary: String {
        switch self {
        case .upload: "a 1 GiB multipart upload with curl -F: MB/s, Counterpart's peak RSS, SHA-256 checked"
        case .download: "a 1 GiB download with curl: MB/s"
        case .ranges: "\(ServerFixture.rangeCount) requests of 1 MiB ranges at random offsets of the 1 GiB file, one curl, one connection"
        case .rangeRate: "wrk request rate for a 1,000-byte range (Range: bytes=1000-1999)"
        case .small: "wrk request rate for a 4 KiB file"
        }
    }

    var needsBigFile: Bool { self == .upload || self == .download || self == .ranges }
    var needsWrk: Bool { self == .rangeRate || self == .small }

    /// The server's CPU time per unit of work, and the unit.
    var cpuUnit: String { needsWrk ? "CPU µs/req" : "CPU ms/GB" }
    func cpuPerUnit(seconds: Double, work: Double) -> Double {
        needsWrk ? seconds * 1e6 / work : seconds * 1e3 / (work / 1e9)
    }

    /// The unit of the figure compared (higher is better for all of them).
    var unit: String {
        switch self {
        case .upload, .download, .ranges: "MB/s"
        case .rangeRate, .small: "req/s"
        }
    }

    /// Counterpart's share of nginx's figure that the issue asks for.
    var ratioTarget: Double? {
        switch self {
        case .upload: 80
        case .download: 90
        case .small: 80
        case .ranges, .rangeRate: nil
        }
    }
}

/// The figures of one server for one measure.
struct MeasureResult {
    var figure = Samples()
    /// Upload: the peak RSS of the server (bytes) during each run.
    var peakRSS = Samples()
    /// The server's CPU time (user + system) per unit of work: µs per request for the
    /// request rates, ms per GB for the transfers.
    var cpu = Samples()
    var failure: String?
    /// What the client reported beside the figure (e.g. wrk's socket errors), once each.
    var notes: [String] = []
}

/// What one run gives.
struct RunFigure {
    var value: Double
    var peakRSS: Int? = nil
    var note: String? = nil
    /// Requests (wrk) or bytes (curl) the run moved, to divide the server's CPU time by.
    var work: Double = 0
}

// MARK: - The files served

/// The folder everything lives in, and the files both servers serve: a 4 KiB file and,
/// when there is room, a 1 GiB one of random bytes (1/8 with --quick).
final class ServerFixture {
    static let rangeCount = 200
    static let rangeLength = 1 << 20
    static let smallSize = 4096
    static let smallName = "small.bin"
    static let bigName = "big.bin"

    let folder: String
    let root: String
    let smallBytes: [UInt8]
    let bigSize: Int
    /// Nil when the big file could not be made (`bigSkipReason` says why).
    private(set) var bigSHA256: String?
    private(set) var bigSkipReason: String?
    /// The first byte of each 1 MiB range, the same for every server and run.
    let rangeOffsets: [Int]

    var smallPath: String { root + "/" + Self.smallName }
    var bigPath: String { root + "/" + Self.bigName }
    var hasBigFile: Bool { bigSHA256 != nil }

    init(quick: Bool) throws {
        var template = Array("/tmp/counterpart-bench-XXXXXX".utf8CString)
        guard let made = mkdtemp(&template) else { throw BenchFailure("cannot make a temporary folder in /tmp: \(String(cString: strerror(errno)))") }
        folder = String(cString: made)
        CleanupRegistry.shared.add(folder: folder)
        root = folder + "/root"
        bigSize = quick ? (1 << 30) / 8 : 1 << 30
        var random = SplitMix64(seed: 0xC0FFEE)
        var bytes = [UInt8](repeating: 0, count: Self.smallSize)
        bytes.withUnsafeMutableBytes { random.fill($0.baseAddress!, count: $0.count) }
        smallBytes = bytes
        rangeOffsets = (0..<Self.rangeCount).map { _ in random.next(below: (1 << 30) / (quick ? 8 : 1) - Self.rangeLength + 1) }

        // nginx's workers run as nobody when it is started by root: they must be able to
        // read the root and enter the folders.
        chmod(folder, 0o755)
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: false,
                                                attributes: [.posixPermissions: 0o755])
        guard FileManager.default.createFile(atPath: smallPath, contents: Data(smallBytes), attributes: [.posixPermissions: 0o644]) else {
            throw BenchFailure("cannot write \(smallPath)")
        }

        // The big file, its copy stored by Counterpart and the body stored by nginx, with room
        // to spare.
        let needed = UInt64(4 * bigSize)
        let free = ProcFS.freeBytes(at: folder) ?? 0
        guard free >= needed else {
            bigSkipReason = "only \(format(Double(free) / Double(1 << 30), decimals: 1)) GiB free in /tmp, "
                + "\(formatBytes(Int(needed))) needed (the file, its stored copies and room to spare)"
            return
        }
        printError("  [server] writing \(formatBytes(bigSize)) of random bytes to \(bigPath)…")
        try Self.writeRandomFile(bigPath, size: bigSize, seed: 0xB16F11E)
        let digest = try runCommand(findExecutable("sha256sum") ?? "/usr/bin/sha256sum", [bigPath])
        guard digest.status == 0, let hex = digest.output.split(separator: " ").first, hex.count == 64 else {
            throw BenchFailure("sha256sum \(bigPath) failed: \(digest.errorOutput)")
        }
        bigSHA256 = String(hex)
    }

    private static func writeRandomFile(_ path: String, size: Int, seed: UInt64) throws {
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard descriptor >= 0 else { throw BenchFailure("cannot create \(path): \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        var random = SplitMix64(seed: seed)
        let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: 4 << 20, alignment: 64)
        defer { chunk.deallocate() }
        var remaining = size
        while remaining > 0 {
            let count = min(remaining, chunk.count)
            random.fill(chunk.baseAddress!, count: count)
            var offset = 0
            while offset < count {
                let written = write(descriptor, chunk.baseAddress! + offset, count - offset)
                guard written > 0 else {
                    if written < 0, errno == EINTR { continue }
                    throw BenchFailure("cannot write \(path): \(String(cString: strerror(errno)))")
                }
                offset += written
            }
            remaining -= count
        }
    }

    /// The bytes `first...last` of the big file (or of the small one).
    func slice(ofBig big: Bool, first: Int, last: Int) -> [UInt8]? {
        if !big { return Array(smallBytes[first...last]) }
        guard let handle = FileHandle(forReadingAtPath: bigPath) else { return nil }
        defer { try? handle.close() }
        try? handle.seek(toOffset: UInt64(first))
        return (try? handle.read(upToCount: last - first + 1)).map { Array($0) }
    }

    func remove() {
        try? FileManager.default.removeItem(atPath: folder)
        CleanupRegistry.shared.remove(folder: folder)
    }
}

// MARK: - The servers

/// A server under test, running as a child process.
final class ServerUnderTest {
    enum Kind {
        case counterpart(threads: Int?)
        case nginx(workers: String)
    }

    let kind: Kind
    let label: String
    let port: UInt16
    /// Where uploads end up: Counterpart's uploads folder, nginx's client_body_temp_path.
    let storeFolder: String
    let logPath: String
    private let process: Process
    private let outputPipe: Pipe?
    private var stopped = false

    var isCounterpart: Bool { if case .counterpart = kind { true } else { false } }
    var pid: Int32 { process.processIdentifier }
    func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    private init(kind: Kind, label: String, port: UInt16, storeFolder: String, logPath: String, process: Process, outputPipe: Pipe?) {
        self.kind = kind
        self.label = label
        self.port = port
        self.storeFolder = storeFolder
        self.logPath = logPath
        self.process = process
        self.outputPipe = outputPipe
    }

    /// The processes whose memory is the server's: Counterpart, or nginx's workers.
    var memoryProcesses: [Int32] {
        isCounterpart ? [pid] : ProcFS.children(of: pid)
    }

    var isRunning: Bool { process.isRunning }

    /// The last lines of the server's stderr (Counterpart) or error log (nginx).
    func logTail() -> String {
        guard let text = MachineContext.readTextFile(logPath), !text.isEmpty else { return "(empty log)" }
        return text.split(separator: "\n").suffix(5).joined(separator: " | ")
    }

    /// Starts `counterpart --port 0 --root ROOT --uploads FOLDER/uploads --quiet [--threads N]`
    /// and reads its port from the first line it prints.
    static func startCounterpart(binary: String, threads: Int?, label: String, root: String, folder: String) throws -> ServerUnderTest {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let uploads = folder + "/uploads"
        let logPath = folder + "/counterpart.log"
        guard FileManager.default.createFile(atPath: logPath, contents: nil) else { throw BenchFailure("cannot create \(logPath)") }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: binary)
        process.arguments = ["--port", "0", "--root", root, "--uploads", uploads, "--quiet"]
            + (threads.map { ["--threads", String($0)] } ?? [])
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle(forWritingAtPath: logPath)
        process.standardInput = FileHandle.nullDevice
        try process.run()
        CleanupRegistry.shared.add(process: process.processIdentifier, stopSignal: SIGTERM)
        var server: ServerUnderTest? = nil
        defer { if server == nil { stop(process, label: label, graceSeconds: 0) } }

        // "listening on http://127.0.0.1:PORT"
        let line = readLine(from: output.fileHandleForReading.fileDescriptor, seconds: 15)
        guard let line, line.hasPrefix("listening on "), let colon = line.lastIndex(of: ":"),
              let port = UInt16(line[line.index(after: colon)...].prefix { $0.isNumber }) else {
            let log = MachineContext.readTextFile(logPath) ?? ""
            throw BenchFailure("\(label) did not start (first line: \(line.map { "\"\($0)\"" } ?? "none")); stderr: \(log)")
        }
        server = ServerUnderTest(kind: .counterpart(threads: threads), label: label, port: port, storeFolder: uploads,
                                 logPath: logPath, process: process, outputPipe: output)
        return server!
    }

    /// Starts nginx with a configuration of its own in `folder`, on a free loopback port.
    static func startNginx(binary: String, workers: String, root: String, folder: String) throws -> ServerUnderTest {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o755])
        let label = "nginx (worker_processes \(workers))"
        let logPath = folder + "/error.log"
        var lastProblem = ""
        // A port free a moment ago may be taken by the time nginx binds it: try a few.
        for _ in 0..<5 {
            guard let port = LoopbackPort.free() else { throw BenchFailure("no free loopback port") }
            let configuration = nginxConfiguration(workers: workers, root: root, folder: folder, port: port)
            let configurationPath = folder + "/nginx.conf"
            try configuration.write(toFile: configurationPath, atomically: true, encoding: .utf8)
            try? FileManager.default.removeItem(atPath: logPath)
            let process = Process()
            process.executableURL = URL(fileURLWithPath: binary)
            process.arguments = ["-c", configurationPath, "-p", folder, "-e", logPath]
            process.standardOutput = FileHandle.nullDevice
            process.standardError = FileHandle.nullDevice
            process.standardInput = FileHandle.nullDevice
            try process.run()
            CleanupRegistry.shared.add(process: process.processIdentifier, stopSignal: SIGTERM)
            let deadline = monotonicNanoseconds() + 10_000_000_000
            while process.isRunning, !LoopbackPort.accepts(port), monotonicNanoseconds() < deadline { usleep(10_000) }
            if process.isRunning, LoopbackPort.accepts(port) {
                return ServerUnderTest(kind: .nginx(workers: workers), label: label, port: port, storeFolder: folder + "/body",
                                       logPath: logPath, process: process, outputPipe: nil)
            }
            stop(process, label: label, graceSeconds: 0)
            lastProblem = MachineContext.readTextFile(logPath) ?? "no error log"
            guard lastProblem.contains("Address already in use") else { break }
        }
        throw BenchFailure("nginx did not start: \(lastProblem)")
    }

    /// nginx as a file server: 1 worker by default, no access log, sendfile. POST /upload is
    /// read into a file that is kept (`client_body_in_file_only on`): the request body is
    /// read by the proxy module (nginx reads a body only for a handler that wants it), then
    /// a bodiless request to this same server answers 204.
    static func nginxConfiguration(workers: String, root: String, folder: String, port: UInt16) -> String {
        """
        # Written by counterpart-bench; removed at the end of the run.
        daemon off;
        master_process on;
        worker_processes \(workers);
        pid \(folder)/nginx.pid;
        error_log \(folder)/error.log warn;
        events { worker_connections 4096; }
        http {
            access_log off;
            sendfile on;
            tcp_nopush on;
            keepalive_requests 1000000;
            default_type application/octet-stream;
            client_body_temp_path \(folder)/body;
            proxy_temp_path \(folder)/proxy;
            fastcgi_temp_path \(folder)/fastcgi;
            uwsgi_temp_path \(folder)/uwsgi;
            scgi_temp_path \(folder)/scgi;
            server {
                listen 127.0.0.1:\(port);
                server_name localhost;
                root \(root);
                location = /upload {
                    client_body_in_file_only on;
                    client_max_body_size 2g;
                    proxy_pass http://127.0.0.1:\(port)/stored;
                    proxy_pass_request_body off;
                    proxy_set_header Content-Length "";
                    proxy_set_header Content-Type "";
                }
                location = /stored { return 204; }
            }
        }

        """
    }

    /// Stops the server: SIGTERM, then SIGKILL (with nginx's workers) if it lingers.
    func stop() {
        guard !stopped else { return }
        stopped = true
        Self.stop(process, label: label, graceSeconds: 10)
        try? outputPipe?.fileHandleForReading.close()
    }

    private static func stop(_ process: Process, label: String, graceSeconds: Double) {
        let pid = process.processIdentifier
        let children = ProcFS.children(of: pid)
        if process.isRunning { kill(pid, SIGTERM) }
        if !waitForExit(process, seconds: max(graceSeconds, 1)) {
            printError("  [server] \(label) (pid \(pid)) did not stop after SIGTERM: killing it")
            kill(pid, SIGKILL)
            _ = waitForExit(process, seconds: 5)
        }
        for child in children where ProcFS.isAlive(child) { kill(child, SIGKILL) }
        CleanupRegistry.shared.remove(process: pid)
    }

    deinit { stop() }

    /// One line from `descriptor`, waiting at most `seconds`; nil at EOF or on time-out.
    private static func readLine(from descriptor: Int32, seconds: Double) -> String? {
        var bytes: [UInt8] = []
        let deadline = monotonicNanoseconds() + UInt64(seconds * 1e9)
        while monotonicNanoseconds() < deadline {
            var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
            let ready = poll(&poller, 1, 100)
            if ready < 0, errno != EINTR { return nil }
            guard ready > 0 else { continue }
            var byte: UInt8 = 0
            let count = read(descriptor, &byte, 1)
            if count == 0 { return bytes.isEmpty ? nil : String(decoding: bytes, as: UTF8.self) }
            if count < 0 { if errno == EINTR { continue } else { return nil } }
            if byte == 0x0A { return String(decoding: bytes, as: UTF8.self) }
            bytes.append(byte)
        }
        return nil
    }
}

// MARK: - The suite

final class ServerBench {
    static let threadModes = [0, 1, 2, 4]
    static let wrkThreads = 2
    static let wrkConnections = 64

    private var fixture: ServerFixture?
    private var fixtureFailure: String?
    private var curl: String?
    private var wrk: String?
    private var nginx: String?
    private var counterpart: String?
    private var defaultThreads: String?
    private var announced = false

    init() {}

    // MARK: Set-up

    /// Finds the tools and makes the files, once per run. False when nothing can run.
    private func prepare(_ options: BenchOptions) -> Bool {
        if !announced {
            announced = true
            CleanupRegistry.shared.installSignalHandlers()
            curl = findExecutable("curl")
            wrk = findExecutable("wrk")
            nginx = findExecutable("nginx")
            let candidate = executableFolder() + "/counterpart"
            counterpart = access(candidate, X_OK) == 0 ? candidate : nil
            if let counterpart, let help = try? runCommand(counterpart, ["--help"], timeout: 10) {
                // "--threads N   threads polling connections (default 4; 0: one per connection)"
                if let range = help.output.range(of: "threads polling connections (default ") {
                    defaultThreads = String(help.output[range.upperBound...].prefix { $0.isNumber })
                }
            }
            let nginxVersion = nginx.flatMap { try? runCommand($0, ["-v"], timeout: 10) }
                .map { ($0.errorOutput + $0.output).trimmingCharacters(in: .whitespacesAndNewlines) }
            let wrkVersion = wrk.flatMap { try? runCommand($0, ["--version"], timeout: 10) }
                .flatMap { ($0.output + $0.errorOutput).split(separator: "\n").first.map { String($0.prefix(40)) } }
            print("""

                Server suite: Counterpart and nginx over loopback (127.0.0.1), started and stopped by this run
                  counterpart: \(counterpart ?? "NOT FOUND beside counterpart-bench: build it with `swift build -c release --product counterpart` (make bench does)")
                  nginx:       \(nginx.map { "\($0) (\(nginxVersion ?? "?")), worker_processes \(options.nginxWorkers)" } ?? "NOT FOUND: install it with `scripts/setup nginx wrk` (make bench does); Counterpart runs alone")
                  curl:        \(curl ?? "NOT FOUND")
                  wrk:         \(wrk.map { "\($0) (\(wrkVersion ?? "?")), \(Self.wrkThreads) threads, \(Self.wrkConnections) connections, \(duration(options)) s per run (2 s warm-up)" } ?? "NOT FOUND: the request-rate benchmarks are skipped")
                  nginx setup: access_log off; sendfile on; tcp_nopush on; keepalive_requests 1000000; no open_file_cache;
                               POST /upload stored with client_body_in_file_only on (read by proxy_pass to a bodiless 204)
                  client and servers share the \(MachineContext.processorCount()) CPUs; runs alternate between the servers
                  server CPU:  user + system time of the server's processes (Counterpart; nginx's workers) during a run, per
                               request or per GB (10^9 B): less disturbed by other load on the machine than the rates
                """)
            flushOutput()
            if counterpart != nil, curl != nil {
                do {
                    fixture = try ServerFixture(quick: options.quick)
                } catch {
                    fixtureFailure = "\(error)"
                }
                if let fixture {
                    print("  files:       \(fixture.root): \(ServerFixture.smallName) (\(formatBytes(ServerFixture.smallSize)))"
                        + (fixture.hasBigFile ? ", \(ServerFixture.bigName) (\(formatBytes(fixture.bigSize)), random, sha256 \(fixture.bigSHA256!.prefix(16))…)"
                            : "; \(formatBytes(fixture.bigSize)) parts SKIPPED: \(fixture.bigSkipReason ?? "")"))
                }
            }
        }
        if counterpart == nil || curl == nil {
            print("  skipped: \(counterpart == nil ? "the counterpart binary" : "curl") is missing")
            return false
        }
        if let fixtureFailure {
            print("  skipped: \(fixtureFailure)")
            return false
        }
        return fixture != nil
    }

    private func duration(_ options: BenchOptions) -> Int { options.duration ?? (options.quick ? 3 : 10) }

    func finish() {
        fixture?.remove()
        fixture = nil
    }

    private func counterpartLabel(threads: Int?) -> String {
        switch threads {
        case nil: return "Counterpart, default (\(defaultThreads.map { "\($0) polling threads" } ?? "--threads not given"))"
        case 0: return "Counterpart --threads 0 (thread per connection)"
        case 1: return "Counterpart --threads 1 (1 polling thread)"
        case let threads?: return "Counterpart --threads \(threads) (\(threads) polling threads)"
        }
    }

    /// Starts the servers; stops those started if one fails.
    private func startServers(counterpartThreads: [Int?], options: BenchOptions, fixture: ServerFixture) throws -> [ServerUnderTest] {
        var servers: [ServerUnderTest] = []
        var done = false
        defer { if !done { servers.forEach { $0.stop() } } }
        for threads in counterpartThreads {
            let name = threads.map { "counterpart-threads-\($0)" } ?? "counterpart-default"
            servers.append(try ServerUnderTest.startCounterpart(
                binary: counterpart!, threads: threads, label: counterpartLabel(threads: threads),
                root: fixture.root, folder: fixture.folder + "/" + name))
        }
        if let nginx {
            servers.append(try ServerUnderTest.startNginx(
                binary: nginx, workers: options.nginxWorkers, root: fixture.root,
                folder: fixture.folder + "/nginx-\(options.nginxWorkers)"))
        }
        // The servers must serve the same bytes, whole and in ranges.
        for server in servers {
            try checkServes(server, fixture: fixture)
        }
        done = true
        return servers
    }

    private func checkServes(_ server: ServerUnderTest, fixture: ServerFixture) throws {
        let small = try fetch(server.url("/" + ServerFixture.smallName), range: nil, fixture: fixture)
        guard small.status == 200, small.body == fixture.smallBytes else {
            throw BenchFailure("\(server.label) answers GET /\(ServerFixture.smallName) with \(small.status) and \(small.body.count) bytes, not 200 and the file")
        }
        let name = fixture.hasBigFile ? ServerFixture.bigName : ServerFixture.smallName
        let ranged = try fetch(server.url("/" + name), range: "1000-1999", fixture: fixture)
        guard ranged.status == 206, ranged.body == fixture.slice(ofBig: fixture.hasBigFile, first: 1000, last: 1999) else {
            throw BenchFailure("\(server.label) answers Range: bytes=1000-1999 of /\(name) with \(ranged.status) and \(ranged.body.count) bytes, not 206 and those bytes")
        }
    }

    private func fetch(_ url: String, range: String?, fixture: ServerFixture) throws -> (status: Int, body: [UInt8]) {
        let output = fixture.folder + "/fetched"
        defer { unlink(output) }
        let result = try runCommand(curl!, ["-s", "-o", output, "-w", "%{http_code}"] + (range.map { ["-r", $0] } ?? []) + [url], timeout: 30)
        let body = FileManager.default.contents(atPath: output).map { Array($0) } ?? []
        return (Int(result.output) ?? 0, body)
    }

    // MARK: Sections

    /// One measure, Counterpart in its default mode beside nginx, with the issue's target.
    func runComparison(_ measure: ServerMeasure, context: BenchContext) {
        let options = context.options
        guard options.wants(key: measure.key) else { return }
        let ready = prepare(options)
        print("\n\(title(measure, options: options))")
        print("  load avg:  \(MachineContext.loadAverage()) at start")
        flushOutput()
        defer {
            print("  load avg:  \(MachineContext.loadAverage()) at end")
            flushOutput()
        }
        guard ready, let fixture else { return }
        if let reason = skipReason(measure, fixture: fixture) {
            print("  SKIPPED: \(reason)")
            return
        }
        let servers: [ServerUnderTest]
        do {
            servers = try startServers(counterpartThreads: [nil], options: options, fixture: fixture)
        } catch {
            print("  FAILED to start the servers: \(error)")
            return
        }
        defer { servers.forEach { $0.stop() } }

        let results = measureAll(measure, servers: servers, fixture: fixture, options: options)
        print(render(measure, servers: servers, results: results))
        for (server, result) in zip(servers, results) {
            if let failure = result.failure { print("  \(server.label): FAILED: \(failure)") }
            for note in result.notes { print("  \(server.label): \(note)") }
        }

        // The ratio, and the issue's targets.
        guard let counterpartIndex = servers.firstIndex(where: \.isCounterpart) else { return }
        let counterpartResult = results[counterpartIndex]
        if let nginxIndex = servers.firstIndex(where: { !$0.isCounterpart }),
           !counterpartResult.figure.isEmpty, !results[nginxIndex].figure.isEmpty {
            let ratio = 100 * counterpartResult.figure.median / results[nginxIndex].figure.median
            let verdict = measure.ratioTarget.map { ratio >= $0 ? "PASS (target ≥ \(format($0)) %)" : "BELOW (target ≥ \(format($0)) %)" }
                ?? "(no target set)"
            print("  Counterpart/nginx: \(format(ratio, decimals: 1)) % of nginx's median \(verdict)")
            if let target = measure.ratioTarget {
                context.record(TargetCheck(
                    name: "\(shortTitle(measure, fixture: fixture)): Counterpart/nginx", measured: ratio, target: target,
                    unit: "% of nginx", source: "issue; nginx \(options.nginxWorkers) worker(s), same run"))
            }
        }
        if measure == .upload, !counterpartResult.peakRSS.isEmpty {
            let peak = counterpartResult.peakRSS.max / Double(1 << 20)
            print("  Counterpart peak RSS (VmHWM) over the runs: \(format(peak, decimals: 1)) MiB "
                + (peak < 64 ? "PASS (target < 64 MiB)" : "BELOW (target < 64 MiB)"))
            context.record(TargetCheck(
                name: "\(shortTitle(measure, fixture: fixture)): Counterpart peak RSS (largest of the runs)",
                measured: peak, target: 64, unit: "MiB", source: "issue, whatever the file size", comparison: .below))
        }
    }

    /// Every measure for each thread mode of Counterpart, beside nginx, then a summary.
    func runThreadModes(context: BenchContext) {
        let options = context.options
        let ready = prepare(options)
        print("""

            Threading modes: Counterpart --threads \(Self.threadModes.map(String.init).joined(separator: ", ")) \
            (0: a thread per connection; N: N polling threads) beside nginx, all running at once; median [min–max] of \(options.runs) run(s)
            """)
        print("  load avg:  \(MachineContext.loadAverage()) at start")
        flushOutput()
        defer {
            print("  load avg:  \(MachineContext.loadAverage()) at end")
            flushOutput()
        }
        guard ready, let fixture else { return }
        let servers: [ServerUnderTest]
        do {
            servers = try startServers(counterpartThreads: Self.threadModes, options: options, fixture: fixture)
        } catch {
            print("  FAILED to start the servers: \(error)")
            return
        }
        defer { servers.forEach { $0.stop() } }

        var summary: [(ServerMeasure, [MeasureResult])] = []
        for measure in [ServerMeasure.small, .rangeRate, .download, .ranges, .upload] where options.wants(key: measure.key) {
            print("\n  \(title(measure, options: options))")
            if let reason = skipReason(measure, fixture: fixture) {
                print("    SKIPPED: \(reason)")
                continue
            }
            print("    load avg:  \(MachineContext.loadAverage())")
            let results = measureAll(measure, servers: servers, fixture: fixture, options: options)
            print(render(measure, servers: servers, results: results, indent: "    "))
            for (server, result) in zip(servers, results) {
                if let failure = result.failure { print("    \(server.label): FAILED: \(failure)") }
                for note in result.notes { print("    \(server.label): \(note)") }
            }
            summary.append((measure, results))
            flushOutput()
        }
        guard !summary.isEmpty else { return }

        print("\n  Summary (medians; the best Counterpart mode of each column marked *)")
        var columns: [(String, Table.Alignment)] = [("server", .left)]
        for (measure, _) in summary {
            columns.append(("\(measure.key) \(measure.unit)", .right))
            columns.append((measure.cpuUnit, .right))
        }
        var table = Table(columns)
        let best: [Int?] = summary.map { _, results in
            servers.indices.filter { servers[$0].isCounterpart && !results[$0].figure.isEmpty }
                .max { results[$0].figure.median < results[$1].figure.median }
        }
        for (index, server) in servers.enumerated() {
            var row = [server.label]
            for (column, (_, results)) in summary.enumerated() {
                let samples = results[index].figure
                row.append(samples.isEmpty ? "—" : format(samples.median) + (best[column] == index ? " *" : "  "))
                row.append(format(results[index].cpu.median, decimals: summary[column].0.needsWrk ? 1 : 0))
            }
            table.append(row)
        }
        print(table.render(indent: "  "))
        for (column, (measure, _)) in summary.enumerated() {
            guard let index = best[column] else { continue }
            print("  best for \(measure.key): \(servers[index].label)")
        }
    }

    private func title(_ measure: ServerMeasure, options: BenchOptions) -> String {
        let big = formatBytes(options.quick ? (1 << 30) / 8 : 1 << 30)
        let wrkLine = "wrk -t\(Self.wrkThreads) -c\(Self.wrkConnections) -d\(duration(options))s"
        switch measure {
        case .upload:
            return "Upload: \(big) multipart body, curl -s -F file=@\(ServerFixture.bigName) POST /upload; MB/s of body (MB = 10^6 B); "
                + "peak RSS = VmHWM of the server (nginx: its worker), reset before each run; median [min–max] of \(options.runs) run(s)"
        case .download:
            return "Download: GET /\(ServerFixture.bigName) (\(big)) with curl -s -o /dev/null; MB/s; median [min–max] of \(options.runs) run(s)"
        case .ranges:
            return "Ranges: \(ServerFixture.rangeCount) × GET /\(ServerFixture.bigName) with Range of 1 MiB at random offsets (the same ones "
                + "for both), one curl process, one kept-alive connection; MB/s and req/s over curl's time_total; median [min–max] of \(options.runs) run(s)"
        case .rangeRate:
            return "Range rate: \(wrkLine) GET /\(ServerFixture.bigName) with Range: bytes=1000-1999 (1,000 bytes); req/s; median [min–max] of \(options.runs) run(s)"
        case .small:
            return "Small file rate: \(wrkLine) GET /\(ServerFixture.smallName) (\(formatBytes(ServerFixture.smallSize))); req/s; median [min–max] of \(options.runs) run(s)"
        }
    }

    private func shortTitle(_ measure: ServerMeasure, fixture: ServerFixture) -> String {
        switch measure {
        case .upload: "\(formatBytes(fixture.bigSize)) multipart upload"
        case .download: "\(formatBytes(fixture.bigSize)) download"
        case .ranges: "1 MiB ranges"
        case .rangeRate: "1,000-byte range rate"
        case .small: "\(formatBytes(ServerFixture.smallSize)) file rate"
        }
    }

    private func skipReason(_ measure: ServerMeasure, fixture: ServerFixture) -> String? {
        if measure.needsBigFile, !fixture.hasBigFile { return "no \(formatBytes(fixture.bigSize)) file: \(fixture.bigSkipReason ?? "")" }
        if measure.needsWrk, wrk == nil { return "wrk is not installed (scripts/setup nginx wrk)" }
        return nil
    }

    // MARK: Measuring

    /// Run 0 warms up; the runs alternate the order of the servers, so that a noisy
    /// neighbour or leftover writeback slows them alike.
    private func measureAll(_ measure: ServerMeasure, servers: [ServerUnderTest], fixture: ServerFixture, options: BenchOptions) -> [MeasureResult] {
        var results = servers.map { _ in MeasureResult() }
        for run in 0...options.runs {
            let order = run % 2 == 0 ? Array(servers.indices) : servers.indices.reversed()
            for index in order where results[index].failure == nil {
                let server = servers[index]
                printError("  [server/\(measure.key)] \(server.label): \(run == 0 ? "warm-up" : "run \(run)/\(options.runs)")…")
                do {
                    guard server.isRunning else { throw BenchFailure("the server has exited; its log: \(server.logTail())") }
                    let cpuProcesses = server.memoryProcesses
                    let cpuBefore = cpuProcesses.compactMap(ProcFS.cpuSeconds).reduce(0, +)
                    let figure = try measureOnce(measure, server: server, fixture: fixture, options: options, warmUp: run == 0)
                    let cpuAfter = cpuProcesses.compactMap(ProcFS.cpuSeconds).reduce(0, +)
                    if run > 0 {
                        results[index].figure.append(figure.value)
                        if let peak = figure.peakRSS { results[index].peakRSS.append(Double(peak)) }
                        if figure.work > 0 {
                            results[index].cpu.append(measure.cpuPerUnit(seconds: cpuAfter - cpuBefore, work: figure.work))
                        }
                    }
                    if let note = figure.note { results[index].notes.append((run == 0 ? "warm-up: " : "run \(run): ") + note) }
                } catch {
                    results[index].failure = "\(error)" + (server.isRunning ? "" : "; the server exited, its log: \(server.logTail())")
                }
            }
        }
        return results
    }

    private func measureOnce(
        _ measure: ServerMeasure, server: ServerUnderTest, fixture: ServerFixture, options: BenchOptions, warmUp: Bool
    ) throws -> RunFigure {
        switch measure {
        case .upload: return try upload(server, fixture: fixture)
        case .download:
            return RunFigure(value: try download(server, fixture: fixture), work: Double(fixture.bigSize))
        case .ranges:
            return RunFigure(value: try ranges(server, fixture: fixture),
                             work: Double(ServerFixture.rangeCount * ServerFixture.rangeLength))
        case .rangeRate:
            let name = fixture.hasBigFile ? ServerFixture.bigName : ServerFixture.smallName
            return try wrkRate(server, path: "/" + name, range: "bytes=1000-1999", fixture: fixture,
                               seconds: warmUp ? 2 : duration(options))
        case .small:
            return try wrkRate(server, path: "/" + ServerFixture.smallName, range: nil, fixture: fixture,
                               seconds: warmUp ? 2 : duration(options))
        }
    }

    /// curl's `-w` figures, split on spaces.
    private func curlFigures(_ result: CommandResult, what: String) throws -> [Substring] {
        guard result.status == 0, !result.timedOut else {
            throw BenchFailure("curl (\(what)) \(result.timedOut ? "timed out" : "failed with status \(result.status)"): \(result.errorOutput.prefix(300))")
        }
        return result.output.split(separator: " ")
    }

    private func upload(_ server: ServerUnderTest, fixture: ServerFixture) throws -> RunFigure {
        let memory = server.memoryProcesses
        let resettable = memory.allSatisfy { ProcFS.resetPeakRSS($0) }
        let answerPath = fixture.folder + "/upload-answer"
        defer { unlink(answerPath) }
        // Whatever happens, nothing stored stays.
        defer { Self.emptyFolder(server.storeFolder) }
        let result = try runCommand(curl!, [
            "-s", "-o", answerPath, "-w", "%{http_code} %{size_upload} %{time_total}",
            "-F", "file=@\(fixture.bigPath)", server.url("/upload"),
        ])
        let peak = resettable ? memory.compactMap { ProcFS.statusBytes($0, field: "VmHWM") }.max() : nil
        let figures = try curlFigures(result, what: "upload")
        guard figures.count == 3, let status = Int(figures[0]), let sent = Double(figures[1]), let time = Double(figures[2]), time > 0 else {
            throw BenchFailure("curl printed \"\(result.output)\"")
        }
        let answer = FileManager.default.contents(atPath: answerPath) ?? Data()
        if server.isCounterpart {
            guard status == 200 else { throw BenchFailure("POST /upload answered \(status): \(String(decoding: answer.prefix(300), as: UTF8.self))") }
            guard let object = try? JSONSerialization.jsonObject(with: answer) as? [String: Any],
                  let files = object["files"] as? [[String: Any]], files.count == 1,
                  let digest = files[0]["sha256"] as? String, let size = files[0]["size"] as? Int else {
                throw BenchFailure("the answer is not the expected JSON: \(String(decoding: answer.prefix(300), as: UTF8.self))")
            }
            guard size == fixture.bigSize, digest == fixture.bigSHA256 else {
                throw BenchFailure("stored \(size) bytes with SHA-256 \(digest); sent \(fixture.bigSize) with \(fixture.bigSHA256 ?? "")")
            }
        } else {
            // nginx keeps the whole body (multipart framing and all) in a file of its own.
            guard status == 204 else { throw BenchFailure("POST /upload answered \(status)") }
            let stored = (try? FileManager.default.contentsOfDirectory(atPath: server.storeFolder)) ?? []
            let sizes = stored.compactMap { name in
                (try? FileManager.default.attributesOfItem(atPath: server.storeFolder + "/" + name))?[.size] as? Int
            }
            guard sizes.count == 1, Double(sizes[0]) == sent else {
                throw BenchFailure("nginx stored \(sizes) bytes in \(stored.count) file(s); \(format(sent)) sent")
            }
        }
        return RunFigure(value: sent / time / 1e6, peakRSS: peak,
                         note: resettable ? nil : "the peak RSS could not be reset (/proc/PID/clear_refs): not measured", work: sent)
    }

    /// Removes what is in `folder`, its subfolders included (nginx spreads its temporary
    /// files over levels when configured to).
    private static func emptyFolder(_ folder: String) {
        for name in (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? [] {
            try? FileManager.default.removeItem(atPath: folder + "/" + name)
        }
    }

    private func download(_ server: ServerUnderTest, fixture: ServerFixture) throws -> Double {
        let result = try runCommand(curl!, [
            "-s", "-o", "/dev/null", "-w", "%{http_code} %{size_download} %{time_total}", server.url("/" + ServerFixture.bigName),
        ])
        let figures = try curlFigures(result, what: "download")
        guard figures.count == 3, let status = Int(figures[0]), let size = Int(figures[1]), let time = Double(figures[2]), time > 0 else {
            throw BenchFailure("curl printed \"\(result.output)\"")
        }
        guard status == 200, size == fixture.bigSize else { throw BenchFailure("GET answered \(status) with \(size) bytes") }
        return Double(size) / time / 1e6
    }

    /// One curl for all the ranges (`--next` between them), so the connection is reused.
    private func ranges(_ server: ServerUnderTest, fixture: ServerFixture) throws -> Double {
        let configurationPath = fixture.folder + "/ranges-\(server.port).curlrc"
        if !FileManager.default.fileExists(atPath: configurationPath) {
            var text = ""
            for (index, first) in fixture.rangeOffsets.enumerated() {
                if index > 0 { text += "next\n" }
                text += """
                    url = "\(server.url("/" + ServerFixture.bigName))"
                    range = "\(first)-\(first + ServerFixture.rangeLength - 1)"
                    output = "/dev/null"
                    silent
                    write-out = "%{http_code} %{size_download} %{time_total} %{num_connects}\\n"

                    """
            }
            try text.write(toFile: configurationPath, atomically: true, encoding: .utf8)
        }
        let result = try runCommand(curl!, ["-K", configurationPath])
        guard result.status == 0, !result.timedOut else {
            throw BenchFailure("curl (ranges) \(result.timedOut ? "timed out" : "failed with status \(result.status)"): \(result.errorOutput.prefix(300))")
        }
        let lines = result.output.split(separator: "\n")
        guard lines.count == ServerFixture.rangeCount else {
            throw BenchFailure("curl answered \(lines.count) of \(ServerFixture.rangeCount) requests")
        }
        var total = 0.0
        var connects = 0
        for line in lines {
            let fields = line.split(separator: " ")
            guard fields.count == 4, fields[0] == "206", Int(fields[1]) == ServerFixture.rangeLength,
                  let time = Double(fields[2]), let connected = Int(fields[3]) else {
                throw BenchFailure("a range request answered \"\(line)\", not 206 with \(ServerFixture.rangeLength) bytes")
            }
            total += time
            connects += connected
        }
        if connects != 1 {
            throw BenchFailure("\(connects) connections for \(ServerFixture.rangeCount) requests: the server does not keep the connection alive")
        }
        return Double(ServerFixture.rangeCount * ServerFixture.rangeLength) / total / 1e6
    }

    private func wrkRate(_ server: ServerUnderTest, path: String, range: String?, fixture: ServerFixture, seconds: Int) throws -> RunFigure {
        var arguments = ["-t\(Self.wrkThreads)", "-c\(Self.wrkConnections)", "-d\(seconds)s", "--timeout", "5s"]
        if let range {
            let script = fixture.folder + "/range.lua"
            if !FileManager.default.fileExists(atPath: script) {
                try "wrk.headers[\"Range\"] = \"\(range)\"\n".write(toFile: script, atomically: true, encoding: .utf8)
            }
            arguments += ["-s", script]
        }
        let result = try runCommand(wrk!, arguments + [server.url(path)], timeout: Double(seconds) + 60)
        guard result.status == 0, !result.timedOut else {
            throw BenchFailure("wrk \(result.timedOut ? "timed out" : "failed with status \(result.status)"): \((result.errorOutput + result.output).prefix(300))")
        }
        var rate: Double?
        var note: String?
        var requests = 0.0
        for line in result.output.split(separator: "\n") {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.contains(" requests in "), let count = Double(trimmed.prefix { $0.isNumber }) {
                // "193011 requests in 5.02s, 711.63MB read"
                requests = count
            } else if trimmed.hasPrefix("Requests/sec:") {
                rate = Double(trimmed.dropFirst("Requests/sec:".count).trimmingCharacters(in: .whitespaces))
            } else if trimmed.hasPrefix("Non-2xx or 3xx responses:") {
                // Wrong answers make the rate meaningless.
                throw BenchFailure("wrk reports \(trimmed)")
            } else if trimmed.hasPrefix("Socket errors:") {
                // Connections closed or timed out: reported beside the figure.
                note = "wrk reports \(trimmed)"
            }
        }
        guard let rate else { throw BenchFailure("no Requests/sec in wrk's output: \(result.output.prefix(300))") }
        return RunFigure(value: rate, note: note, work: requests)
    }

    // MARK: Tables

    private func render(_ measure: ServerMeasure, servers: [ServerUnderTest], results: [MeasureResult], indent: String = "  ") -> String {
        var columns: [(String, Table.Alignment)] = [("server", .left), (measure.unit, .right)]
        if measure == .ranges { columns.append(("req/s", .right)) }
        if measure == .upload { columns.append(("peak RSS MiB", .right)) }
        columns.append(("vs nginx", .right))
        columns.append(("server " + measure.cpuUnit, .right))
        var table = Table(columns)
        let nginxMedian = zip(servers, results).first { !$0.0.isCounterpart }.map { $0.1.figure.median }
        for (server, result) in zip(servers, results) {
            var row = [server.label, result.figure.formatted()]
            if measure == .ranges {
                row.append(result.figure.map { $0 * 1e6 / Double(ServerFixture.rangeLength) }.formatted())
            }
            if measure == .upload { row.append(result.peakRSS.map { $0 / Double(1 << 20) }.formatted(decimals: 1)) }
            if let nginxMedian, !result.figure.isEmpty, nginxMedian.isFinite {
                row.append(format(100 * result.figure.median / nginxMedian, decimals: 1) + " %")
            } else {
                row.append("—")
            }
            row.append(result.cpu.formatted(decimals: measure.needsWrk ? 1 : 0))
            table.append(row)
        }
        return table.render(indent: indent)
    }
}
