// The servers the server and scaling suites measure, each a child process with a folder of
// its own: the release `counterpart` (with `--baseline`, an earlier build of it too), nginx,
// and the C libmicrohttpd peer built from bench/peers/mhd_upload_server.c. All listen on
// 127.0.0.1 only.

import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Which server, and how it is started: what a section's line-up lists.
enum ServerSpec: Hashable {
    /// `sync` is Counterpart's `--sync` (`none` or `full`) and `memory` its
    /// `--connection-memory` in bytes; nil leaves the flag out.
    /// With `eventsReader`, a client reads `/__counterpart/events` all along. With
    /// `baseline`, the binary is the one given by `--baseline` (an earlier build), started
    /// with the same flags. A `twin` is a second Counterpart the same in every way, beside
    /// the first to measure how far two of the same differ in one run (the noise a reader's
    /// cost is judged against).
    case counterpart(threads: Int?, sync: String?, memory: Int? = nil, eventsReader: Bool = false, baseline: Bool = false, twin: Bool = false)
    case nginx(workers: String)
    /// bench/peers/mhd_upload_server.c: MHD_PostProcessor, file parts written as they come.
    case mhd

    static let counterpartDefault = ServerSpec.counterpart(threads: nil, sync: nil)
    /// Counterpart with the connection memory the C peer gets for the same work: its
    /// libmicrohttpd default (32 KiB) for small requests, 256 KiB for uploads. libmicrohttpd
    /// clears it before every request, and reads a body in pieces of about half of it.
    static let smallRequestMemory = ServerSpec.counterpart(threads: nil, sync: nil, memory: 32 << 10)
    static let uploadMemory = ServerSpec.counterpart(threads: nil, sync: "none", memory: uploadConnectionMemory)
    static let uploadConnectionMemory = 256 << 10

    var isCounterpart: Bool { if case .counterpart = self { true } else { false } }

    var hasEventsReader: Bool { if case .counterpart(_, _, _, true, _, _) = self { true } else { false } }

    /// The same Counterpart (same flags) run from the `--baseline` binary; nil for the other
    /// servers and for a Counterpart with an events reader.
    var baselineTwin: ServerSpec? {
        guard case .counterpart(let threads, let sync, let memory, false, false, false) = self else { return nil }
        return .counterpart(threads: threads, sync: sync, memory: memory, baseline: true)
    }

    /// A short name for the ratios.
    var shortName: String {
        switch self {
        case .counterpart(let threads, let sync, let memory, let reader, let baseline, let twin):
            "Counterpart" + (threads.map { " --threads \($0)" } ?? "") + Self.flagsText(sync: sync, memory: memory)
                + (reader ? " + events reader" : "") + (baseline ? " (baseline)" : "") + (twin ? " (twin)" : "")
        case .nginx(let workers): "nginx \(workers)w"
        case .mhd: "C MHD"
        }
    }

    /// ` --sync MODE --connection-memory NKiB`, those given: Counterpart's flags besides
    /// `--threads`, as names and labels show them.
    static func flagsText(sync: String?, memory: Int?) -> String {
        (sync.map { " --sync \($0)" } ?? "") + (memory.map { " --connection-memory \($0 >> 10)KiB" } ?? "")
    }

    /// A name for folders and the JSON summary.
    var key: String {
        switch self {
        case .counterpart(let threads, let sync, let memory, let reader, let baseline, let twin):
            "counterpart" + (threads.map { "-threads-\($0)" } ?? "") + (sync.map { "-sync-\($0)" } ?? "")
                + (memory.map { "-memory-\($0 >> 10)k" } ?? "") + (reader ? "-events-reader" : "") + (baseline ? "-baseline" : "")
                + (twin ? "-twin" : "")
        case .nginx(let workers): "nginx-\(workers)w"
        case .mhd: "mhd-c"
        }
    }
}

/// A server under test, running as a child process.
final class ServerUnderTest {
    let spec: ServerSpec
    let label: String
    private(set) var port: UInt16
    /// Where uploads end up: Counterpart's uploads folder, nginx's client_body_temp_path,
    /// the C peer's uploads folder.
    let storeFolder: String
    let logPath: String
    /// The clients that have read `/__counterpart/events`, for a spec with `eventsReader`:
    /// one for each process the server has been (`restart`), the last one reading now.
    var eventsReaders: [EventsReader] = []
    private var process: SessionProcess
    private var outputPipe: Pipe?
    private var stopped = false
    /// Starts the same server again, for `restart`; nil for one that cannot be.
    private let relaunch: (() throws -> Launched)?

    /// A server process just started, and the port it listens on.
    private struct Launched {
        let process: SessionProcess
        let port: UInt16
        let outputPipe: Pipe?
    }

    var isCounterpart: Bool { spec.isCounterpart }
    var pid: Int32 { process.pid }
    func url(_ path: String) -> String { "http://127.0.0.1:\(port)\(path)" }

    private init(spec: ServerSpec, label: String, launched: Launched, storeFolder: String, logPath: String,
                 relaunch: (() throws -> Launched)? = nil) {
        self.spec = spec
        self.label = label
        port = launched.port
        self.storeFolder = storeFolder
        self.logPath = logPath
        process = launched.process
        outputPipe = launched.outputPipe
        self.relaunch = relaunch
    }

    /// Stops the server and starts the same again: a fresh process, on a new port. Its
    /// events reader, if any, stops first; the caller attaches a new one.
    func restart() throws {
        guard let relaunch, !stopped else { throw BenchFailure("\(label) cannot be restarted") }
        eventsReaders.last?.stop()
        stop()
        let launched = try relaunch()  // stopped it stays if this fails
        process = launched.process
        port = launched.port
        outputPipe = launched.outputPipe
        stopped = false
    }

    /// The processes whose peak memory is the server's: the process itself, or nginx's
    /// workers (its master holds no request's memory).
    var memoryProcesses: [Int32] {
        if case .nginx = spec { return ProcFS.children(of: pid) }
        return [pid]
    }

    /// The server's CPU time so far: the process and all its descendants (nginx: the master
    /// and its workers), with their reaped children, as /proc counts them.
    var treeCPUSeconds: Double {
        ([pid] + ProcFS.descendants(of: pid)).compactMap(ProcFS.cpuSeconds).reduce(0, +)
    }

    /// The resident memory of the server now (the largest of its memory processes), bytes.
    var currentRSS: Int {
        memoryProcesses.compactMap { ProcFS.statusBytes($0, field: "VmRSS") }.max() ?? 0
    }

    var isRunning: Bool { process.isRunning }

    /// The last lines of the server's stderr (Counterpart, the C peer) or error log (nginx).
    func logTail() -> String {
        guard let text = MachineContext.readTextFile(logPath), !text.isEmpty else { return "(empty log)" }
        return text.split(separator: "\n").suffix(5).joined(separator: " | ")
    }

    /// Starts `counterpart --port 0 --root ROOT --uploads FOLDER/uploads --quiet [--threads N]
    /// [--sync MODE] EXTRA` (the build `make bench` made from this tree, or with `baseline`
    /// the earlier build given by `--baseline`).
    static func startCounterpart(
        binary: String, threads: Int?, sync: String?, memory: Int? = nil, extra: [String] = [], label: String, root: String, folder: String,
        eventsReader: Bool = false, baseline: Bool = false, twin: Bool = false
    ) throws -> ServerUnderTest {
        let uploads = folder + "/uploads"
        let base = ["--port", "0", "--root", root, "--uploads", uploads, "--quiet"]
            + (threads.map { ["--threads", String($0)] } ?? []) + (memory.map { ["--connection-memory", String($0)] } ?? []) + extra
        return try startListening(spec: .counterpart(threads: threads, sync: sync, memory: memory, eventsReader: eventsReader, baseline: baseline, twin: twin),
                                  binary: binary,
                                  arguments: base + (sync.map { ["--sync", $0] } ?? []), label: label, folder: folder, storeFolder: uploads)
    }

    /// Starts the C libmicrohttpd peer (2 threads, like the machine's cores) on `root` and
    /// FOLDER/uploads, with `connectionMemory` bytes per connection (nil: libmicrohttpd's
    /// default, 32 KiB, what a static server would run with).
    static func startMHD(binary: String, root: String, folder: String, connectionMemory: Int? = nil) throws -> ServerUnderTest {
        let uploads = folder + "/uploads"
        return try startListening(
            spec: .mhd, binary: binary,
            arguments: ["--port", "0", "--root", root, "--uploads", uploads, "--threads", "2"]
                + (connectionMemory.map { ["--connection-memory", String($0)] } ?? []),
            label: "C libmicrohttpd + MHD_PostProcessor", folder: folder, storeFolder: uploads)
    }

    /// Runs a server that prints "listening on http://127.0.0.1:PORT" once ready and reads
    /// its port from that line.
    private static func startListening(
        spec: ServerSpec, binary: String, arguments: [String], label: String, folder: String, storeFolder: String
    ) throws -> ServerUnderTest {
        let logPath = folder + "/\(spec.key).log"
        let launch = { try launchListening(binary: binary, arguments: arguments, label: label, logPath: logPath, storeFolder: storeFolder) }
        return ServerUnderTest(spec: spec, label: label, launched: try launch(), storeFolder: storeFolder, logPath: logPath, relaunch: launch)
    }

    private static func launchListening(
        binary: String, arguments: [String], label: String, logPath: String, storeFolder: String
    ) throws -> Launched {
        try FileManager.default.createDirectory(atPath: storeFolder, withIntermediateDirectories: true)
        guard FileManager.default.createFile(atPath: logPath, contents: nil) else { throw BenchFailure("cannot create \(logPath)") }
        let output = Pipe()
        let process = try SessionProcess(binary, arguments, output: output.fileHandleForWriting.fileDescriptor, errorPath: logPath)
        // The child holds its own copy: the line below then ends at EOF if the server exits.
        try? output.fileHandleForWriting.close()
        CleanupRegistry.shared.add(process: process.pid, stopSignal: SIGTERM)
        var launched: Launched? = nil
        defer { if launched == nil { stop(process, label: label, graceSeconds: 0) } }

        let line = readLine(from: output.fileHandleForReading.fileDescriptor, seconds: 15)
        guard let line, line.hasPrefix("listening on "), let colon = line.lastIndex(of: ":"),
              let port = UInt16(line[line.index(after: colon)...].prefix { $0.isNumber }) else {
            _ = waitForExit(process, seconds: 2)
            let status = process.terminationStatus
            let log = MachineContext.readTextFile(logPath) ?? ""
            throw BenchFailure("\(label) did not start (first line: \(line.map { "\"\($0)\"" } ?? "none")"
                + (status.map { ", exit status \($0)" } ?? "") + "); stderr: \(log.prefix(400))")
        }
        launched = Launched(process: process, port: port, outputPipe: output)
        return launched!
    }

    /// Starts nginx with a configuration of its own in `folder`, on a free loopback port.
    static func startNginx(binary: String, workers: String, root: String, folder: String, workerConnections: Int = 4_096) throws -> ServerUnderTest {
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o755])
        let label = "nginx, \(workers) worker\(workers == "1" ? "" : "s")"
        let logPath = folder + "/error.log"
        var lastProblem = ""
        // A port free a moment ago may be taken by the time nginx binds it: try a few.
        for _ in 0..<5 {
            guard let port = LoopbackPort.free() else { throw BenchFailure("no free loopback port") }
            let configuration = nginxConfiguration(workers: workers, root: root, folder: folder, port: port, workerConnections: workerConnections)
            let configurationPath = folder + "/nginx.conf"
            try configuration.write(toFile: configurationPath, atomically: true, encoding: .utf8)
            try? FileManager.default.removeItem(atPath: logPath)
            let process = try SessionProcess(binary, ["-c", configurationPath, "-p", folder, "-e", logPath])
            CleanupRegistry.shared.add(process: process.pid, stopSignal: SIGTERM)
            let deadline = monotonicNanoseconds() + 10_000_000_000
            while process.isRunning, !LoopbackPort.accepts(port), monotonicNanoseconds() < deadline { usleep(10_000) }
            if process.isRunning, LoopbackPort.accepts(port) {
                return ServerUnderTest(spec: .nginx(workers: workers), label: label, launched: Launched(process: process, port: port, outputPipe: nil),
                                       storeFolder: folder + "/body", logPath: logPath)
            }
            stop(process, label: label, graceSeconds: 0)
            lastProblem = MachineContext.readTextFile(logPath) ?? "no error log"
            guard lastProblem.contains("Address already in use") else { break }
        }
        throw BenchFailure("nginx did not start: \(lastProblem)")
    }

    /// nginx as a file server: no access log, sendfile, `reuseport`. POST /upload is read
    /// into a file that is kept (`client_body_in_file_only on`, in 256 KiB writes): the
    /// request body is read by the proxy module (nginx reads a body only for a handler that
    /// wants it), then a bodiless request to this same server answers 204. No parsing, no
    /// hashing, no fsync: what storing the bytes costs nginx.
    static func nginxConfiguration(workers: String, root: String, folder: String, port: UInt16, workerConnections: Int = 4_096) -> String {
        """
        # Written by counterpart-bench; removed at the end of the run.
        daemon off;
        master_process on;
        worker_processes \(workers);
        pid \(folder)/nginx.pid;
        error_log \(folder)/error.log warn;
        events { worker_connections \(workerConnections); }
        http {
            access_log off;
            sendfile on;
            tcp_nopush on;
            keepalive_requests 1000000;
            default_type application/octet-stream;
            client_body_temp_path \(folder)/body;
            client_body_buffer_size 256k;
            proxy_temp_path \(folder)/proxy;
            fastcgi_temp_path \(folder)/fastcgi;
            uwsgi_temp_path \(folder)/uwsgi;
            scgi_temp_path \(folder)/scgi;
            server {
                listen 127.0.0.1:\(port) reuseport;
                server_name localhost;
                root \(root);
                location = /upload {
                    client_body_in_file_only on;
                    client_max_body_size 0;
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

    private static func stop(_ process: SessionProcess, label: String, graceSeconds: Double) {
        let pid = process.pid
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
