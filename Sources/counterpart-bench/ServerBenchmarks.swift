// The server suite: Counterpart end to end over loopback, beside nginx and the C
// libmicrohttpd peer (bench/peers/mhd_upload_server.c) in the same run, with the clients
// people use (curl, wrk); and how Counterpart's cost grows with concurrent uploads and idle
// connections (ScalingBenchmarks.swift). The servers run as child processes, each with a
// folder of its own under one temporary folder; all serve the same root folder. Everything
// is stopped and removed at the end, on a failure, and on Ctrl-C.

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
            name: "scaling",
            summary: "Counterpart with \(ServerBench.concurrencyLevels.map(String.init).joined(separator: ", ")) concurrent uploads, "
                + "\(format(ServerBench.idleConnections)) idle keep-alive connections, and small GETs while a big upload runs (key: scaling)"
        ) { context in
            bench.runScaling(context: context)
        })
        sections.append(BenchmarkSection(
            name: "many-clients",
            summary: "Counterpart beside nginx holding \(ServerBench.slowHeadLevels.map { format($0) }.joined(separator: " and ")) slow heads, "
                + "\(ServerBench.idleLevels.map { format($0) }.joined(separator: " and ")) idle connections: RSS per connection, "
                + "a fresh GET's p50/p99 (key: many-clients)",
            runsByDefault: false
        ) { context in
            bench.runManyClients(context: context)
        })
        sections.append(BenchmarkSection(
            name: "object-store",
            summary: "Counterpart nodes on Ceph RGW (started here) beside the engine's own PUT and GET: a 1 GiB upload into one node "
                + "straight and behind nginx (TLS, HTTP/2), two at once into two nodes, \(format(ServerBench.objectStoreSmallFiles)) small files, "
                + "a download and 1 MiB Range GETs (p99); node RSS and CPU (key: object-store)",
            runsByDefault: false
        ) { context in
            bench.runObjectStore(context: context)
        })
        sections.append(BenchmarkSection(
            name: "threads",
            summary: "the benchmarks above (keys: \(ServerMeasure.allCases.map(\.key).joined(separator: ", "))) for "
                + "--threads \(ServerBench.threadModes.map(String.init).joined(separator: ", ")) beside nginx",
            runsByDefault: false
        ) { context in
            bench.runThreadModes(context: context)
        })
        return BenchmarkSuite(
            name: "server", summary: "Counterpart end to end over loopback beside nginx and the C libmicrohttpd peer (curl, wrk)",
            sections: sections, finish: { bench.finish() })
    }
}

// MARK: - What is measured

enum ServerMeasure: CaseIterable {
    case small, rangeRate, upload, download, ranges

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
        case .upload: "a 1 GiB multipart upload with curl -F: Counterpart --sync none and full, and --sync none with the C peer's 256 KiB of connection memory; the C peer, nginx storing the body, dd conv=fsync; MB/s, CPU per GB, peak RSS"
        case .download: "a 1 GiB download with curl: MB/s, CPU per GB, peak RSS"
        case .ranges: "\(ServerFixture.rangeCount) requests of 1 MiB ranges at random offsets of the 1 GiB file, one curl, one connection"
        case .rangeRate: "wrk request rate for a 1,000-byte range (Range: bytes=1000-1999), Counterpart also with the C peer's 32 KiB of connection memory, beside nginx with 1 and 2 workers and the C peer"
        case .small: "wrk request rate for a 4 KiB file, Counterpart also with the C peer's 32 KiB of connection memory, beside nginx with 1 and 2 workers and the C peer: req/s, CPU per request, p99, peak RSS"
        }
    }

    var needsBigFile: Bool { self == .upload || self == .download || self == .ranges }
    var needsWrk: Bool { self == .rangeRate || self == .small }

    /// The servers measured side by side, Counterpart first; with `eventsReader`, the same
    /// with a client reading its events before them all and its twin (the same again, without
    /// one) after them all. `measureAll` turns the order round each time, so that the two
    /// ends take the same places over two rounds (first and last, each right after itself
    /// where the rounds meet): a place in the order moves a server's figures by as much as a
    /// reader does (the middle one of three Counterparts, no reader in any, came out ahead).
    /// With `baseline`, each Counterpart (but one with a reader or a twin) followed by the
    /// same from the baseline binary.
    func lineup(eventsReader: Bool, baseline: Bool = false) -> [ServerSpec] {
        var lineup = baseLineup
        if eventsReader, let (_, reader, twin) = readerComparison {
            lineup.insert(reader, at: 0)
            lineup.append(twin)
        }
        if baseline {
            lineup = lineup.flatMap { spec in [spec] + (spec.baselineTwin.map { [$0] } ?? []) }
        }
        return lineup
    }

    private var baseLineup: [ServerSpec] {
        switch self {
        case .small, .rangeRate: [.counterpartDefault, .smallRequestMemory, .nginx(workers: "1"), .nginx(workers: "2"), .mhd]
        case .upload: [.counterpart(threads: nil, sync: "none"), .counterpart(threads: nil, sync: "full"), .uploadMemory, .mhd, .nginx(workers: "1")]
        case .download: [.counterpartDefault, .nginx(workers: "1"), .mhd]
        case .ranges: [.counterpartDefault, .nginx(workers: "1")]
        }
    }

    /// The ratios printed under the table, with the issue's targets.
    var comparisons: [Comparison] {
        let counterpart = ServerSpec.counterpartDefault
        let nginx1 = ServerSpec.nginx(workers: "1")
        switch self {
        case .small, .rangeRate:
            return [
                Comparison(counterpart, .server(nginx1), rateTarget: 0.9, cpuTarget: 1.3),
                Comparison(counterpart, .server(.nginx(workers: "2")), rateTarget: 0.8),
                Comparison(counterpart, .server(.mhd)),
                Comparison(.smallRequestMemory, .server(nginx1)),
                Comparison(.smallRequestMemory, .server(.mhd)),
            ]
        case .upload:
            let none = ServerSpec.counterpart(threads: nil, sync: "none")
            let full = ServerSpec.counterpart(threads: nil, sync: "full")
            return [
                Comparison(none, .server(.mhd), rateTarget: 0.75),
                Comparison(none, .server(nginx1), rateTarget: 1.0),
                Comparison(full, .dd, rateTarget: 0.85),
                Comparison(full, .server(.mhd)),
                Comparison(.uploadMemory, .server(.mhd)),
                Comparison(.uploadMemory, .server(nginx1)),
            ]
        case .download: return [Comparison(counterpart, .server(nginx1), rateTarget: 0.95), Comparison(counterpart, .server(.mhd))]
        case .ranges: return [Comparison(counterpart, .server(nginx1))]
        }
    }

    /// With `--events-reader`: Counterpart with a reader of its events and its twin without,
    /// each set beside `baseLineup`'s first Counterpart (nil for the measures not compared so).
    var readerComparison: (plain: ServerSpec, reader: ServerSpec, twin: ServerSpec)? {
        let plain = baseLineup[0]
        guard self == .small || self == .upload, case .counterpart(let threads, let sync, let memory, _, _, _) = plain else { return nil }
        return (plain, .counterpart(threads: threads, sync: sync, memory: memory, eventsReader: true),
                .counterpart(threads: threads, sync: sync, memory: memory, twin: true))
    }

    /// The pairs compared round by round, started afresh before every round: with
    /// `eventsReader`, the reader's server and its twin; with `baseline`, each Counterpart of
    /// the line-up and the same from the baseline binary.
    func roundByRoundPairs(eventsReader: Bool, baseline: Bool) -> [(ServerSpec, ServerSpec)] {
        var pairs: [(ServerSpec, ServerSpec)] = []
        if eventsReader, let (_, reader, twin) = readerComparison { pairs.append((reader, twin)) }
        if baseline { pairs += baseLineup.compactMap { spec in spec.baselineTwin.map { (spec, $0) } } }
        return pairs
    }

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
}

/// A ratio of two medians of the same run: `subject`'s over `peer`'s.
struct Comparison {
    enum Peer: Equatable {
        case server(ServerSpec)
        /// `dd bs=1M count=1024 conv=fsync` on the disk the uploads go to.
        case dd
    }

    let subject: ServerSpec
    let peer: Peer
    /// The least ratio of the figures (req/s, MB/s) the issue asks for.
    var rateTarget: Double? = nil
    /// The most ratio of server CPU per unit of work the issue allows.
    var cpuTarget: Double? = nil

    init(_ subject: ServerSpec, _ peer: Peer, rateTarget: Double? = nil, cpuTarget: Double? = nil) {
        self.subject = subject
        self.peer = peer
        self.rateTarget = rateTarget
        self.cpuTarget = cpuTarget
    }
}

/// The figures of one server for one measure.
struct MeasureResult {
    var figure = Samples()
    /// The peak RSS of the server (bytes) during each run.
    var peakRSS = Samples()
    /// The server's CPU time (user + system) per unit of work: µs per request for the
    /// request rates, ms per GB for the transfers.
    var cpu = Samples()
    /// wrk's 99th percentile latency, in ms.
    var p99 = Samples()
    var failure: String?
    /// What the client reported beside the figure (e.g. wrk's socket errors), once each.
    var notes: [String] = []
}

/// What one run gives.
struct RunFigure {
    var value: Double
    var note: String? = nil
    /// Requests (wrk) or bytes (curl) the run moved, to divide the server's CPU time by.
    var work: Double = 0
    var p99Milliseconds: Double? = nil
}

// MARK: - The files served

/// The folder everything lives in, and the files every server serves: a 4 KiB file and,
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

        // The big file, the one copy stored at a time (uploads are removed after each run)
        // and dd's file, with room to spare.
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
            try writeAll(descriptor, UnsafeRawBufferPointer(start: chunk.baseAddress!, count: count), path: path)
            remaining -= count
        }
    }

    /// Writes all of `bytes` to `descriptor` (short writes and EINTR retried).
    private static func writeAll(_ descriptor: Int32, _ bytes: UnsafeRawBufferPointer, path: String) throws {
        var offset = 0
        while offset < bytes.count {
            let written = write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
            guard written > 0 else {
                if written < 0, errno == EINTR { continue }
                throw BenchFailure("cannot write \(path): \(String(cString: strerror(errno)))")
            }
            offset += written
        }
    }

    /// Right before each timed upload (and dd run): syncs, so that no dirty pages of an
    /// earlier run are written back during this one, then writes a file a little larger than
    /// the big one next to the uploads folders and deletes it. This machine hands memory
    /// that has been free for a few seconds back to its host; writing 1 GiB into pages that
    /// must come back first costs the writer 2–3 times the CPU (0.7–0.8 s against 1.8–2.4 s
    /// per GB for nginx in alternating runs), so whichever server ran after a pause looked
    /// slow. Freed just before, the memory is in the same state for every server.
    func prepareForTimedWrite() throws {
        sync()
        let path = folder + "/warm-page-cache.bin"
        defer { unlink(path) }
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw BenchFailure("cannot write \(path): \(String(cString: strerror(errno)))") }
        defer { close(descriptor) }
        let piece = [UInt8](repeating: 0, count: 1 << 20)
        for _ in 0..<(bigSize >> 20) + 64 {
            try piece.withUnsafeBytes { try Self.writeAll(descriptor, $0, path: path) }
        }
    }

    /// Copies the first `size` bytes of the big file to `path`; returns their SHA-256 (hex).
    func writePrefix(of size: Int, to path: String) throws -> String {
        guard let input = FileHandle(forReadingAtPath: bigPath) else { throw BenchFailure("cannot read \(bigPath)") }
        defer { try? input.close() }
        guard FileManager.default.createFile(atPath: path, contents: nil), let output = FileHandle(forWritingAtPath: path) else {
            throw BenchFailure("cannot create \(path)")
        }
        defer { try? output.close() }
        var remaining = size
        while remaining > 0, let chunk = try input.read(upToCount: min(remaining, 4 << 20)), !chunk.isEmpty {
            try output.write(contentsOf: chunk)
            remaining -= chunk.count
        }
        let digest = try runCommand(findExecutable("sha256sum") ?? "/usr/bin/sha256sum", [path])
        guard remaining == 0, digest.status == 0, let hex = digest.output.split(separator: " ").first, hex.count == 64 else {
            throw BenchFailure("cannot copy \(size) bytes to \(path) and hash them: \(digest.errorOutput)")
        }
        return String(hex)
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

// MARK: - The suite

final class ServerBench {
    static let threadModes = [0, 1, 2, 4]
    static let wrkThreads = 2
    static let wrkConnections = 64
    static let concurrencyLevels = [1, 16, 64, 256]
    static let idleConnections = 1_000

    private(set) var fixture: ServerFixture?
    private var fixtureFailure: String?
    private(set) var curl: String?
    private(set) var wrk: String?
    private var nginx: String?
    private(set) var counterpart: String?
    /// The earlier build given by `--baseline`, measured beside `counterpart`.
    private(set) var baseline: String?
    private var mhd: String?
    private var dd: String?
    private var defaultThreads: String?
    private var announced = false
    /// What an events reader asks for (`--events-reader`): `latest` or `all`.
    private var eventsReaderRequests = "latest"

    init() {}

    // MARK: Set-up

    /// Finds the tools and makes the files, once per run. False when nothing can run.
    func prepare(_ options: BenchOptions) -> Bool {
        eventsReaderRequests = options.eventsReaderRequests
        if !announced {
            announced = true
            CleanupRegistry.shared.installSignalHandlers()
            raiseDescriptorLimit()
            curl = findExecutable("curl")
            wrk = findExecutable("wrk")
            nginx = findExecutable("nginx")
            dd = findExecutable("dd")
            let candidate = executableFolder() + "/counterpart"
            counterpart = access(candidate, X_OK) == 0 ? candidate : nil
            let peer = options.peersFolder + "/mhd_upload_server"
            mhd = access(peer, X_OK) == 0 ? peer : nil
            baseline = options.baselinePath
            defaultThreads = counterpart.flatMap(Self.defaultThreads(of:))
            let baselineThreads = baseline.flatMap(Self.defaultThreads(of:))
            let nginxVersion = nginx.flatMap { try? runCommand($0, ["-v"], timeout: 10) }
                .map { ($0.errorOutput + $0.output).trimmingCharacters(in: .whitespacesAndNewlines) }
            let wrkVersion = wrk.flatMap { try? runCommand($0, ["--version"], timeout: 10) }
                .flatMap { ($0.output + $0.errorOutput).split(separator: "\n").first.map { String($0.prefix(40)) } }
            let threadsText = defaultThreads.map { "\($0) threads" } ?? "its default threads"
            print("""

                Server suite: Counterpart beside nginx and a C libmicrohttpd server, over loopback (127.0.0.1), started and stopped by this run
                  counterpart: \(counterpart.map { "\($0) (\(threadsText), --quiet)" } ?? "NOT FOUND beside counterpart-bench: build it with `swift build -c release --product counterpart` (make bench does)")\(baseline.map { "\n  baseline:    \($0) (--baseline: \(baselineThreads.map { "\($0) threads" } ?? "its default threads"), the same flags as counterpart beside each of its rows; ratios current / baseline)" } ?? "")
                  nginx:       \(nginx.map { "\($0) (\(nginxVersion ?? "?")), 1 and 2 workers" } ?? "NOT FOUND: install it with `scripts/setup nginx wrk` (make bench does); its rows are skipped")
                  C peer:      \(mhd.map { "\($0) (bench/peers/mhd_upload_server.c: libmicrohttpd \(libmicrohttpdVersion()), MHD_PostProcessor, 2 threads, epoll)" } ?? "NOT FOUND in \(options.peersFolder): make bench builds it with gcc; its rows are skipped")
                  curl:        \(curl ?? "NOT FOUND")
                  wrk:         \(wrk.map { "\($0) (\(wrkVersion ?? "?")), \(Self.wrkThreads) threads, \(Self.wrkConnections) connections, \(duration(options)) s per run (2 s warm-up)" } ?? "NOT FOUND: the request-rate benchmarks are skipped")
                  nginx setup: access_log off; sendfile on; tcp_nopush on; keepalive_requests 1000000; reuseport; no open_file_cache;
                               POST /upload stored with client_body_in_file_only on (read by proxy_pass to a bodiless 204)
                  client and servers share the \(MachineContext.processorCount()) CPUs; runs alternate between the servers
                  server CPU:  user + system time of the server's process tree (nginx: master and workers; with reaped children)
                               from /proc/PID/stat during a run, per request or per GB (10^9 B): less disturbed by other load than the rates
                  peak RSS:    VmHWM of the server's process (nginx: its worker), reset (clear_refs) before each run
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

    /// The default of `--threads` a Counterpart binary states in its `--help`.
    private static func defaultThreads(of binary: String) -> String? {
        guard let help = try? runCommand(binary, ["--help"], timeout: 10) else { return nil }
        // "--threads N   threads serving connections (default 2; 0: one per connection)"
        let text = help.output + help.errorOutput
        guard let range = text.range(of: "connections (default ") else { return nil }
        return String(text[range.upperBound...].prefix { $0.isNumber })
    }

    /// The libmicrohttpd the C peer was built with, as pkg-config names it.
    private func libmicrohttpdVersion() -> String {
        guard let pkgConfig = findExecutable("pkg-config"),
              let result = try? runCommand(pkgConfig, ["--modversion", "libmicrohttpd"], timeout: 10), result.status == 0 else { return "?" }
        return result.output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// 1,000 idle connections and 256 uploads at once need more descriptors than the
    /// usual soft limit of 1,024: the soft limit is raised to the hard one (the servers,
    /// started after this, inherit it).
    private func raiseDescriptorLimit() {
        var limit = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max else { return }
        limit.rlim_cur = limit.rlim_max
        setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }

    func duration(_ options: BenchOptions) -> Int { options.wrkSeconds }

    func finish() {
        fixture?.remove()
        fixture = nil
    }

    private func label(_ spec: ServerSpec) -> String {
        switch spec {
        case .counterpart(let threads, let sync, let memory, let reader, let baseline, let twin):
            let flags = ServerSpec.flagsText(sync: sync, memory: memory) + (!reader ? "" : eventsReaderRequests == "none" ? ", in the reader's place with no reader (a control)"
                                                                              : ", an events reader attached (requests=\(eventsReaderRequests))")
                + (baseline ? " (baseline)" : "") + (twin ? " (twin: the same again, no reader)" : "")
            switch threads {
            case nil: return "Counterpart" + flags
            case 0: return "Counterpart --threads 0 (thread per connection)" + flags
            case let threads?: return "Counterpart --threads \(threads)" + flags
            }
        case .nginx(let workers): return "nginx, \(workers) worker\(workers == "1" ? "" : "s")"
        case .mhd: return "C libmicrohttpd + MHD_PostProcessor"
        }
    }

    /// Starts the servers of `specs` that are installed (a missing one is listed in
    /// `missing`); stops those started if one fails.
    func startServers(_ specs: [ServerSpec], fixture: ServerFixture, counterpartExtra: [String] = [],
                      mhdConnectionMemory: Int? = nil, nginxWorkerConnections: Int = 4_096)
        throws -> (servers: [ServerUnderTest], missing: [String]) {
        var servers: [ServerUnderTest] = []
        var missing: [String] = []
        var done = false
        defer { if !done { servers.forEach { $0.stop() } } }
        for spec in specs {
            let folder = fixture.folder + "/" + spec.key
            switch spec {
            case .counterpart(let threads, let sync, let memory, let reader, let baseline, let twin):
                guard let binary = baseline ? self.baseline : counterpart else {
                    missing.append("\(label(spec)): no --baseline binary")
                    continue
                }
                let server = try ServerUnderTest.startCounterpart(
                    binary: binary, threads: threads, sync: sync, memory: memory, extra: counterpartExtra, label: label(spec),
                    root: fixture.root, folder: folder, eventsReader: reader, baseline: baseline, twin: twin)
                servers.append(server)
                if reader { try attachEventsReader(server) }
            case .nginx(let workers):
                guard let nginx else {
                    missing.append("\(label(spec)): nginx is not installed")
                    continue
                }
                servers.append(try ServerUnderTest.startNginx(binary: nginx, workers: workers, root: fixture.root, folder: folder,
                                                              workerConnections: nginxWorkerConnections))
            case .mhd:
                guard let mhd else {
                    missing.append("\(label(spec)): not built (make bench compiles bench/peers/mhd_upload_server.c)")
                    continue
                }
                servers.append(try ServerUnderTest.startMHD(binary: mhd, root: fixture.root, folder: folder,
                                                            connectionMemory: mhdConnectionMemory))
            }
        }
        // The servers must serve the same bytes, whole and in ranges.
        for server in servers {
            try checkServes(server, fixture: fixture)
        }
        done = true
        return (servers, missing)
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

    /// One measure: its line-up side by side, the ratios and the issue's targets.
    func runComparison(_ measure: ServerMeasure, context: BenchContext) {
        let options = context.options
        guard options.wants(key: measure.key) else { return }
        let ready = prepare(options)
        print("\n\(title(measure, options: options))")
        MachineContext.printLoadAverage("at start")
        defer { MachineContext.printLoadAverage("at end") }
        guard ready, let fixture else { return }
        if let reason = skipReason(measure, fixture: fixture) {
            print("  SKIPPED: \(reason)")
            return
        }
        let servers: [ServerUnderTest]
        do {
            // The C peer as each kind of server would run: tuned for large bodies on the upload
            // row, libmicrohttpd's default elsewhere (it zeroes that memory before every request).
            let started = try startServers(measure.lineup(eventsReader: options.eventsReader, baseline: baseline != nil), fixture: fixture,
                                           mhdConnectionMemory: measure == .upload ? ServerSpec.uploadConnectionMemory : nil)
            servers = started.servers
            for missing in started.missing { print("  not measured: \(missing)") }
        } catch {
            print("  FAILED to start the servers: \(error)")
            return
        }
        defer { servers.forEach { $0.stop() } }

        // The sync-full reference: what the disk the uploads go to writes with an fsync at the end.
        var ddRates = Samples()
        var ddFailure: String?
        // dd needs no warm-up: it runs after each timed round only.
        let eachRound: ((Int) -> Void)? = measure != .upload ? nil : { [self] run in
            guard run > 0, ddFailure == nil else { return }
            printError("  [server/upload] dd conv=fsync: run \(run)/\(options.runs)…")
            do {
                ddRates.append(try ddWithFsync(fixture: fixture))
            } catch {
                ddFailure = "\(error)"
            }
        }
        let results = measureAll(measure, servers: servers, fixture: fixture, options: options, eachRound: eachRound)
        print(render(measure, servers: servers, results: results, dd: measure == .upload ? (ddRates, fixture.bigSize) : nil))
        for (server, result) in zip(servers, results) {
            if let failure = result.failure { print("  \(server.label): FAILED: \(failure)") }
            for note in result.notes { print("  \(server.label): \(note)") }
            if !server.eventsReaders.isEmpty {
                server.eventsReaders.last?.stop()
                print("  \(server.label): \(EventsReader.summary(of: server.eventsReaders))")
            }
        }
        if let ddFailure { print("  dd: FAILED: \(ddFailure)") }
        record(measure, servers: servers, results: results, dd: ddRates, context: context)
        compare(measure, servers: servers, results: results, dd: ddRates, fixture: fixture, context: context)
        if options.eventsReader { compareReader(measure, servers: servers, results: results, fixture: fixture, context: context) }
        if baseline != nil { compareBaseline(measure, servers: servers, results: results, context: context) }
    }

    /// The figures of each server, for the JSON summary.
    private func record(_ measure: ServerMeasure, servers: [ServerUnderTest], results: [MeasureResult], dd: Samples, context: BenchContext) {
        let section = "server/\(measure.key)"
        for (server, result) in zip(servers, results) {
            context.record(FigureRecord(section: section, subject: server.label, metric: "rate", unit: measure.unit, samples: result.figure))
            context.record(FigureRecord(section: section, subject: server.label, metric: "server CPU", unit: measure.cpuUnit, samples: result.cpu))
            if !result.peakRSS.isEmpty {
                context.record(FigureRecord(section: section, subject: server.label, metric: "peak RSS", unit: "MiB",
                                            samples: result.peakRSS.map { $0 / Double(1 << 20) }))
            }
            if !result.p99.isEmpty {
                context.record(FigureRecord(section: section, subject: server.label, metric: "p99 latency", unit: "ms", samples: result.p99))
            }
        }
        if !dd.isEmpty {
            context.record(FigureRecord(section: section, subject: "dd bs=1M conv=fsync", metric: "rate", unit: "MB/s", samples: dd))
        }
    }

    /// The ratios of the measure's comparisons, checked against the issue's targets.
    private func compare(
        _ measure: ServerMeasure, servers: [ServerUnderTest], results: [MeasureResult], dd: Samples, fixture: ServerFixture,
        context: BenchContext
    ) {
        let section = "server/\(measure.key)"
        func result(_ spec: ServerSpec) -> (ServerUnderTest, MeasureResult)? {
            guard let index = servers.firstIndex(where: { $0.spec == spec }), !results[index].figure.isEmpty else { return nil }
            return (servers[index], results[index])
        }
        var lines: [String] = []
        for comparison in measure.comparisons {
            guard let (subject, subjectResult) = result(comparison.subject) else { continue }
            let peerLabel: String
            let peerFigure: Samples
            var peerCPU = Samples()
            switch comparison.peer {
            case .server(let spec):
                guard let (peer, peerResult) = result(spec) else { continue }
                peerLabel = peer.spec.shortName
                peerFigure = peerResult.figure
                peerCPU = peerResult.cpu
            case .dd:
                guard !dd.isEmpty else { continue }
                peerLabel = "dd conv=fsync"
                peerFigure = dd
            }
            let ratio = subjectResult.figure.median / peerFigure.median
            let name = "\(subject.spec.shortName) / \(peerLabel), \(measure.unit)"
            let passes = comparison.rateTarget.map { ratio >= $0 }
            let targetText = comparison.rateTarget.map { "≥ \(format($0, decimals: 2))×" }
            lines.append("\(name): \(format(ratio, decimals: 2))×" + (targetText.map { " (target \($0): \(passes! ? "PASS" : "BELOW"))" } ?? ""))
            context.record(RatioRecord(section: section, name: name, ratio: ratio, target: targetText, passes: passes))
            if let target = comparison.rateTarget {
                context.record(TargetCheck(
                    name: "\(shortTitle(measure, fixture: fixture)): \(subject.spec.shortName) / \(peerLabel)", measured: 100 * ratio,
                    target: 100 * target, unit: "%", source: "issue; same run"))
            }
            if !subjectResult.cpu.isEmpty, !peerCPU.isEmpty {
                let cpuRatio = subjectResult.cpu.median / peerCPU.median
                let cpuName = "\(subject.spec.shortName) / \(peerLabel), server \(measure.cpuUnit)"
                let cpuPasses = comparison.cpuTarget.map { cpuRatio <= $0 }
                let cpuTargetText = comparison.cpuTarget.map { "≤ \(format($0, decimals: 2))×" }
                lines.append("\(cpuName): \(format(cpuRatio, decimals: 2))×"
                    + (cpuTargetText.map { " (target \($0): \(cpuPasses! ? "PASS" : "BELOW"))" } ?? ""))
                context.record(RatioRecord(section: section, name: cpuName, ratio: cpuRatio, target: cpuTargetText, passes: cpuPasses))
                if let target = comparison.cpuTarget {
                    context.record(TargetCheck(
                        name: "\(shortTitle(measure, fixture: fixture)): CPU per request, \(subject.spec.shortName) / \(peerLabel)",
                        measured: 100 * cpuRatio, target: 100 * target, unit: "%", source: "issue; same run", comparison: .below))
                }
            }
        }
        if !lines.isEmpty {
            print("  Ratios of the medians:")
            for line in lines { print("    " + line) }
        }
        if measure == .upload, let (server, counterpartResult) = result(.counterpart(threads: nil, sync: "none")),
           !counterpartResult.peakRSS.isEmpty {
            let peak = counterpartResult.peakRSS.max / Double(1 << 20)
            print("  \(server.label): peak RSS (VmHWM) over the runs \(format(peak, decimals: 1)) MiB "
                + (peak < 64 ? "PASS (target < 64 MiB)" : "BELOW (target < 64 MiB)"))
            context.record(TargetCheck(
                name: "\(shortTitle(measure, fixture: fixture)): Counterpart peak RSS (largest of the runs)",
                measured: peak, target: 64, unit: "MiB", source: "issue, whatever the file size", comparison: .below))
        }
    }

    /// With `--events-reader`: whether a reader of the events leaves Counterpart within its
    /// noise. The noise is measured in the same run, not assumed: the twin (the same server
    /// again, no reader) is measured in every round as the reader's server is, at the other
    /// end of the order (`lineup`), so that both meet the machine alike, and both start afresh
    /// before every round, each first in turn (`restartPair`). Round by round, the
    /// reader's figure over the twin's is what the reader costs plus the noise; Wilcoxon's
    /// signed-rank test says how likely two of the same server were to differ that way by
    /// chance. Within the noise unless that is below 5 %. The ratios over Counterpart without
    /// a reader (in the middle) are printed for the figures themselves.
    private func compareReader(
        _ measure: ServerMeasure, servers: [ServerUnderTest], results: [MeasureResult], fixture: ServerFixture, context: BenchContext
    ) {
        guard let (plainSpec, readerSpec, twinSpec) = measure.readerComparison else { return }
        let result = { (spec: ServerSpec) in Self.result(of: spec, servers: servers, results: results) }
        guard let plain = result(plainSpec), let reader = result(readerSpec), let twin = result(twinSpec) else { return }
        let section = "server/\(measure.key)"
        print("  An events reader's cost, round by round (each round's figures divided), median [min–max]:")
        let readerName = eventsReaderRequests == "none" ? "Counterpart in the reader's place (no reader)" : readerSpec.shortName
        for (what, unit, readerFigures, twinFigures, plainFigures, higherIsBetter) in [
            ("rate", measure.unit, reader.figure, twin.figure, plain.figure, true),
            ("server CPU", measure.cpuUnit, reader.cpu, twin.cpu, plain.cpu, false),
        ] {
            guard let overPlain = RoundByRound(readerFigures, plainFigures, higherIsBetter: higherIsBetter),
                  let twinOverPlain = RoundByRound(twinFigures, plainFigures, higherIsBetter: higherIsBetter),
                  let overTwin = RoundByRound(readerFigures, twinFigures, higherIsBetter: higherIsBetter) else {
                print("    \(unit): not every round was measured; no comparison")
                continue
            }
            print("    \(readerName) / \(plainSpec.shortName), \(unit): \(overPlain.text)")
            print("    \(twinSpec.shortName) / \(plainSpec.shortName), \(unit): \(twinOverPlain.text)")
            let name = "\(readerName) / \(twinSpec.shortName), \(unit), round by round"
            // Worse with the reader: a lower rate, or more CPU per unit of work.
            guard let chance = overTwin.worseChance else {
                print("    \(name): \(overTwin.text); too few rounds to tell (at least \(SignedRank.fewestRounds): --runs)")
                continue
            }
            let passes = chance >= SignedRank.significance
            let verdict = "\(what) with a reader within the noise (two of the same differ so by chance: p = \(format(chance, decimals: 3)); "
                + "below \(format(SignedRank.significance, decimals: 2)) it is not noise)"
            print("    \(name): \(overTwin.text)")
            print("    \(verdict): \(passes ? "PASS" : "BELOW")")
            context.record(RatioRecord(section: section, name: "\(readerName) / \(plainSpec.shortName), \(unit), round by round",
                                       ratio: overPlain.ratios.median, target: nil, passes: nil))
            context.record(RatioRecord(section: section, name: "\(twinSpec.shortName) / \(plainSpec.shortName), \(unit), round by round",
                                       ratio: twinOverPlain.ratios.median, target: nil, passes: nil))
            context.record(RatioRecord(section: section, name: name, ratio: overTwin.ratios.median,
                                       target: "p ≥ \(format(SignedRank.significance, decimals: 2))", passes: passes))
            context.record(TargetCheck(
                name: "\(shortTitle(measure, fixture: fixture)): \(what) with an events reader against its twin, within the noise "
                    + "(signed-rank p)",
                measured: 100 * chance, target: 100 * SignedRank.significance, unit: "%", source: "issue; the twin in the same run"))
        }
    }

    /// The figures of `spec`'s server, from `results` (in the order of `servers`).
    private static func result(of spec: ServerSpec, servers: [ServerUnderTest], results: [MeasureResult]) -> MeasureResult? {
        servers.firstIndex { $0.spec == spec }.map { results[$0] }
    }

    /// With `--baseline`: each Counterpart over the same from the baseline binary, round by
    /// round, the two started afresh before every round, each first in turn (`restartPair`).
    /// Worse or better than the baseline only where Wilcoxon's signed-rank test puts the
    /// chance of two of the same differing so below 5 %; within the noise otherwise. Given
    /// this build itself as the baseline, the run is a control: two of the same.
    private func compareBaseline(_ measure: ServerMeasure, servers: [ServerUnderTest], results: [MeasureResult], context: BenchContext) {
        let result = { (spec: ServerSpec) in Self.result(of: spec, servers: servers, results: results) }
        let section = "server/\(measure.key)"
        print("  Against the baseline build, round by round (each round's figures divided), median [min–max]:")
        for (current, earlier) in measure.roundByRoundPairs(eventsReader: false, baseline: true) {
            guard let currentResult = result(current), let earlierResult = result(earlier) else { continue }
            for (unit, currentFigures, earlierFigures, higherIsBetter) in [
                (measure.unit, currentResult.figure, earlierResult.figure, true),
                (measure.cpuUnit, currentResult.cpu, earlierResult.cpu, false),
            ] {
                let name = "\(current.shortName) / \(earlier.shortName), \(unit), round by round"
                guard let compared = RoundByRound(currentFigures, earlierFigures, higherIsBetter: higherIsBetter) else {
                    print("    \(name): not every round was measured; no comparison")
                    continue
                }
                context.record(RatioRecord(section: section, name: name, ratio: compared.ratios.median, target: nil, passes: nil))
                guard let worse = compared.worseChance, let better = compared.betterChance else {
                    print("    \(name): \(compared.text); too few rounds to tell (at least \(SignedRank.fewestRounds): --runs)")
                    continue
                }
                let verdict = worse < SignedRank.significance ? "WORSE than the baseline"
                    : better < SignedRank.significance ? "better than the baseline" : "within the noise"
                print("    \(name): \(compared.text); two of the same differ so by chance, worse: p = \(format(worse, decimals: 3)), "
                    + "better: p = \(format(better, decimals: 3)): \(verdict)")
            }
        }
    }

    /// Writes the size of the big file with `dd if=/dev/zero bs=1M conv=fsync` next to the
    /// uploads folders (the same disk) and returns dd's MB/s (bytes over its own time,
    /// fsync included).
    private func ddWithFsync(fixture: ServerFixture) throws -> Double {
        guard let dd else { throw BenchFailure("dd is not installed") }
        let path = fixture.folder + "/dd-fsync.bin"
        defer { unlink(path) }
        try fixture.prepareForTimedWrite()
        let result = try runCommand(dd, ["if=/dev/zero", "of=\(path)", "bs=1M", "count=\(fixture.bigSize >> 20)", "conv=fsync"])
        guard result.status == 0 else { throw BenchFailure("dd failed: \(result.errorOutput.prefix(300))") }
        // "1073741824 bytes (1.1 GB, 1.0 GiB) copied, 3.85 s, 279 MB/s"
        guard let line = result.errorOutput.split(separator: "\n").first(where: { $0.contains(" copied, ") }),
              let bytes = Double(line.prefix { $0.isNumber }),
              let secondsText = line.components(separatedBy: " copied, ").last?.split(separator: " ").first,
              let seconds = Double(secondsText.replacingOccurrences(of: ",", with: ".")), seconds > 0 else {
            throw BenchFailure("dd printed \"\(result.errorOutput.prefix(300))\"")
        }
        return bytes / seconds / 1e6
    }

    /// Every measure for each thread mode of Counterpart, beside nginx, then a summary.
    func runThreadModes(context: BenchContext) {
        let options = context.options
        let ready = prepare(options)
        print("""

            Threading modes: Counterpart --threads \(Self.threadModes.map(String.init).joined(separator: ", ")) \
            (0: a thread per connection; N: N polling threads) beside nginx, all running at once; median [min–max] of \(options.runs) run(s)
            """)
        MachineContext.printLoadAverage("at start")
        defer { MachineContext.printLoadAverage("at end") }
        guard ready, let fixture else { return }
        let servers: [ServerUnderTest]
        do {
            let specs = Self.threadModes.map { ServerSpec.counterpart(threads: $0, sync: nil) } + [.nginx(workers: options.nginxWorkers)]
            servers = try startServers(specs, fixture: fixture).servers
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
            let results = measureAll(measure, servers: servers, fixture: fixture, options: options, eachRound: nil)
            print(render(measure, servers: servers, results: results, dd: nil, indent: "    "))
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
        let wrkLine = "wrk -t\(Self.wrkThreads) -c\(Self.wrkConnections) -d\(duration(options))s --latency"
        switch measure {
        case .upload:
            return "Upload: \(big) multipart body, curl -s -H 'Expect:' -F file=@\(ServerFixture.bigName) POST /upload; MB/s of body (MB = 10^6 B); "
                + "the stored file checked (Counterpart: size and SHA-256 of its answer; the C peer: size, and its SHA-256 after the warm-up; nginx: the body's size); "
                + "folders emptied, sync(2) and a file the big one's size written and deleted before each run (the same free memory for every server); median [min–max] of \(options.runs) run(s)"
        case .download:
            return "Download: GET /\(ServerFixture.bigName) (\(big)) with curl -s -o /dev/null; MB/s; median [min–max] of \(options.runs) run(s)"
        case .ranges:
            return "Ranges: \(ServerFixture.rangeCount) × GET /\(ServerFixture.bigName) with Range of 1 MiB at random offsets (the same ones "
                + "for all), one curl process, one kept-alive connection; MB/s and req/s over curl's time_total; median [min–max] of \(options.runs) run(s)"
        case .rangeRate:
            return "Range rate: \(wrkLine) GET /\(ServerFixture.bigName) with Range: bytes=1000-1999 (1,000 bytes); req/s; median [min–max] of \(options.runs) run(s)"
        case .small:
            return "Small file rate: \(wrkLine) GET /\(ServerFixture.smallName) (\(formatBytes(ServerFixture.smallSize))); req/s; median [min–max] of \(options.runs) run(s)"
        }
    }

    private func shortTitle(_ measure: ServerMeasure, fixture: ServerFixture) -> String {
        switch measure {
        case .upload: "\(formatBytes(fixture.bigSize)) upload"
        case .download: "\(formatBytes(fixture.bigSize)) download"
        case .ranges: "1 MiB ranges"
        case .rangeRate: "1,000-byte range rate"
        case .small: "\(formatBytes(ServerFixture.smallSize)) GET rate"
        }
    }

    private func skipReason(_ measure: ServerMeasure, fixture: ServerFixture) -> String? {
        if measure.needsBigFile, !fixture.hasBigFile { return "no \(formatBytes(fixture.bigSize)) file: \(fixture.bigSkipReason ?? "")" }
        if measure.needsWrk, wrk == nil { return "wrk is not installed (scripts/setup nginx wrk)" }
        return nil
    }

    // MARK: Measuring

    /// Run 0 warms up; the runs alternate the order of the servers, so that a noisy
    /// neighbour or leftover writeback slows them alike. `eachRound` runs after each round
    /// (a reference measured in the same rhythm, e.g. dd).
    private func measureAll(
        _ measure: ServerMeasure, servers: [ServerUnderTest], fixture: ServerFixture, options: BenchOptions,
        eachRound: ((Int) -> Void)?
    ) -> [MeasureResult] {
        var results = servers.map { _ in MeasureResult() }
        for run in 0...options.runs {
            if run > 0, !options.keepProcesses {
                for (first, second) in pairsStartedAfresh(measure, servers: servers, options: options)
                where results[first].failure == nil && results[second].failure == nil {
                    do {
                        try restartPair(servers[first], servers[second], round: run, measure: measure, fixture: fixture)
                    } catch {
                        for index in [first, second] { results[index].failure = "restarting it for run \(run): \(error)" }
                    }
                }
            }
            let order = run % 2 == 0 ? Array(servers.indices) : servers.indices.reversed()
            for index in order where results[index].failure == nil {
                let server = servers[index]
                printError("  [server/\(measure.key)] \(server.label): \(run == 0 ? "warm-up" : "run \(run)/\(options.runs)")…")
                do {
                    guard server.isRunning else { throw BenchFailure("the server has exited; its log: \(server.logTail())") }
                    if measure == .upload {
                        Self.emptyFolder(server.storeFolder)
                        try fixture.prepareForTimedWrite()
                    }
                    let memory = server.memoryProcesses
                    let resettable = memory.allSatisfy { ProcFS.resetPeakRSS($0) }
                    let cpuBefore = server.treeCPUSeconds
                    let figure = try measureOnce(measure, server: server, fixture: fixture, options: options, warmUp: run == 0)
                    let cpuAfter = server.treeCPUSeconds
                    let peak = memory.compactMap { ProcFS.statusBytes($0, field: "VmHWM") }.max()
                    if !resettable, run == 0 {
                        results[index].notes.append("the peak RSS could not be reset (/proc/PID/clear_refs): not measured")
                    }
                    if run > 0 {
                        results[index].figure.append(figure.value)
                        if resettable, let peak { results[index].peakRSS.append(Double(peak)) }
                        if figure.work > 0 {
                            results[index].cpu.append(measure.cpuPerUnit(seconds: cpuAfter - cpuBefore, work: figure.work))
                        }
                        if let p99 = figure.p99Milliseconds { results[index].p99.append(p99) }
                    }
                    if let note = figure.note { results[index].notes.append((run == 0 ? "warm-up: " : "run \(run): ") + note) }
                } catch {
                    results[index].failure = "\(error)" + (server.isRunning ? "" : "; the server exited, its log: \(server.logTail())")
                }
            }
            eachRound?(run)
        }
        return results
    }

    /// The places in `servers` of the pairs compared round by round: the events reader's
    /// server and its twin (`--events-reader`), and each Counterpart and the same from the
    /// baseline binary (`--baseline`).
    private func pairsStartedAfresh(_ measure: ServerMeasure, servers: [ServerUnderTest], options: BenchOptions) -> [(Int, Int)] {
        measure.roundByRoundPairs(eventsReader: options.eventsReader, baseline: baseline != nil).compactMap { first, second in
            guard let first = servers.firstIndex(where: { $0.spec == first }),
                  let second = servers.firstIndex(where: { $0.spec == second }) else { return nil }
            return (first, second)
        }
    }

    /// Before each timed round, the two of a pair compared round by round start afresh, each
    /// first in turn, and a reader attaches again: a difference between two processes that
    /// lasts as long as they do (where each one's memory and threads fell; which one started
    /// first) is then drawn anew each round instead of weighing on every round alike.
    private func restartPair(_ first: ServerUnderTest, _ second: ServerUnderTest, round: Int, measure: ServerMeasure,
                             fixture: ServerFixture) throws {
        let pair = [first, second]
        for server in round % 2 == 0 ? pair : pair.reversed() {
            printError("  [server/\(measure.key)] \(server.label): starting afresh for run \(round)…")
            try server.restart()
        }
        for server in pair where server.spec.hasEventsReader { try attachEventsReader(server) }
        for server in pair {
            try checkServes(server, fixture: fixture)
            // A fresh process's first requests fault its memory in: a second of them, as the
            // warm-up round gives every server two (the big files' rows dwarf them).
            if measure.needsWrk {
                let (path, range) = wrkTarget(measure, fixture: fixture)
                _ = try wrkRate(server, path: path, range: range, fixture: fixture, seconds: 1)
            }
        }
    }

    /// Attaches a client reading `server`'s events (none with `--events-reader=none`).
    private func attachEventsReader(_ server: ServerUnderTest) throws {
        guard eventsReaderRequests != "none" else { return }
        server.eventsReaders.append(try EventsReader(port: server.port, requests: eventsReaderRequests))
    }

    private func measureOnce(
        _ measure: ServerMeasure, server: ServerUnderTest, fixture: ServerFixture, options: BenchOptions, warmUp: Bool
    ) throws -> RunFigure {
        switch measure {
        case .upload: return try upload(server, fixture: fixture, checkContent: warmUp)
        case .download:
            return RunFigure(value: try download(server, fixture: fixture), work: Double(fixture.bigSize))
        case .ranges:
            return RunFigure(value: try ranges(server, fixture: fixture),
                             work: Double(ServerFixture.rangeCount * ServerFixture.rangeLength))
        case .rangeRate, .small:
            let (path, range) = wrkTarget(measure, fixture: fixture)
            return try wrkRate(server, path: path, range: range, fixture: fixture, seconds: warmUp ? 2 : duration(options))
        }
    }

    /// What wrk asks for in the rows it measures.
    private func wrkTarget(_ measure: ServerMeasure, fixture: ServerFixture) -> (path: String, range: String?) {
        if measure == .rangeRate {
            return ("/" + (fixture.hasBigFile ? ServerFixture.bigName : ServerFixture.smallName), "bytes=1000-1999")
        }
        return ("/" + ServerFixture.smallName, nil)
    }

    /// curl's `-w` figures, split on spaces.
    func curlFigures(_ result: CommandResult, what: String) throws -> [Substring] {
        guard result.status == 0, !result.timedOut else {
            throw BenchFailure("curl (\(what)) \(result.timedOut ? "timed out" : "failed with status \(result.status)"): \(result.errorOutput.prefix(300))")
        }
        return result.output.split(separator: " ")
    }

    /// With `checkContent` (the warm-up), the C peer's stored file is hashed too: its figure
    /// counts only if it stores the bytes sent. Counterpart's answer carries its hash.
    private func upload(_ server: ServerUnderTest, fixture: ServerFixture, checkContent: Bool) throws -> RunFigure {
        let answerPath = fixture.folder + "/upload-answer"
        defer { unlink(answerPath) }
        // Whatever happens, nothing stored stays.
        defer { Self.emptyFolder(server.storeFolder) }
        // `Expect:` off: no server pays curl's 100-continue round trip (1 s when unanswered).
        let result = try runCommand(curl!, [
            "-s", "-H", "Expect:", "-o", answerPath, "-w", "%{http_code} %{size_upload} %{time_total}",
            "-F", "file=@\(fixture.bigPath)", server.url("/upload"),
        ])
        let figures = try curlFigures(result, what: "upload")
        guard figures.count == 3, let status = Int(figures[0]), let sent = Double(figures[1]), let time = Double(figures[2]), time > 0 else {
            throw BenchFailure("curl printed \"\(result.output)\"")
        }
        let answer = FileManager.default.contents(atPath: answerPath) ?? Data()
        let answerText = String(decoding: answer.prefix(300), as: UTF8.self)
        switch server.spec {
        case .counterpart:
            guard status == 200 else { throw BenchFailure("POST /upload answered \(status): \(answerText)") }
            let stored = try Self.storedFiles(inAnswer: answer)
            guard stored.count == 1, stored[0].size == fixture.bigSize, stored[0].sha256 == fixture.bigSHA256 else {
                throw BenchFailure("stored \(stored.map { "\($0.size) bytes with SHA-256 \($0.sha256)" }); sent \(fixture.bigSize) with \(fixture.bigSHA256 ?? "")")
            }
        case .mhd:
            guard status == 200 else { throw BenchFailure("POST /upload answered \(status): \(answerText)") }
            let sizes = Self.fileSizes(in: server.storeFolder)
            guard sizes == [fixture.bigSize] else { throw BenchFailure("the C peer stored \(sizes) bytes; \(fixture.bigSize) sent in one part") }
            if checkContent {
                let stored = (try? FileManager.default.contentsOfDirectory(atPath: server.storeFolder)) ?? []
                let digest = try runCommand(findExecutable("sha256sum") ?? "/usr/bin/sha256sum", stored.map { server.storeFolder + "/" + $0 })
                guard digest.status == 0, digest.output.hasPrefix(fixture.bigSHA256 ?? "-") else {
                    throw BenchFailure("the C peer stored other bytes than were sent: \(digest.output.prefix(80))\(digest.errorOutput.prefix(200))")
                }
            }
        case .nginx:
            // nginx keeps the whole body (multipart framing and all) in a file of its own.
            guard status == 204 else { throw BenchFailure("POST /upload answered \(status)") }
            let sizes = Self.fileSizes(in: server.storeFolder)
            guard sizes.count == 1, Double(sizes[0]) == sent else {
                throw BenchFailure("nginx stored \(sizes) bytes; \(format(sent)) sent")
            }
        }
        return RunFigure(value: sent / time / 1e6, work: sent)
    }

    /// The `files` of Counterpart's JSON answer to POST /upload: size and SHA-256 of each.
    static func storedFiles(inAnswer answer: Data) throws -> [(size: Int, sha256: String)] {
        guard let object = try? JSONSerialization.jsonObject(with: answer) as? [String: Any],
              let files = object["files"] as? [[String: Any]] else {
            throw BenchFailure("the answer is not the expected JSON: \(String(decoding: answer.prefix(300), as: UTF8.self))")
        }
        return try files.map { file in
            guard let size = file["size"] as? Int, let digest = file["sha256"] as? String else {
                throw BenchFailure("a file of the answer has no size or sha256: \(file)")
            }
            return (size, digest)
        }
    }

    /// The sizes of the files in `folder`, its subfolders included (nginx spreads its
    /// temporary files over levels when configured to).
    static func fileSizes(in folder: String) -> [Int] {
        var sizes: [Int] = []
        guard let walker = FileManager.default.enumerator(atPath: folder) else { return [] }
        while let name = walker.nextObject() as? String {
            let attributes = try? FileManager.default.attributesOfItem(atPath: folder + "/" + name)
            if attributes?[.type] as? FileAttributeType == .typeRegular, let size = attributes?[.size] as? Int { sizes.append(size) }
        }
        return sizes
    }

    /// Removes what is in `folder`.
    static func emptyFolder(_ folder: String) {
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
        let run = try runWrk(url: server.url(path), range: range, threads: Self.wrkThreads, connections: Self.wrkConnections,
                             seconds: seconds, fixture: fixture)
        return RunFigure(value: run.rate, note: run.note, work: run.requests, p99Milliseconds: run.p99Milliseconds)
    }

    struct WrkRun {
        var rate: Double
        var requests: Double
        var p99Milliseconds: Double?
        var note: String?
    }

    /// `wrk --latency` on `url`; wrong answers (non-2xx) fail the run, socket errors are a note.
    func runWrk(url: String, range: String?, threads: Int, connections: Int, seconds: Int, fixture: ServerFixture) throws -> WrkRun {
        var arguments = ["-t\(threads)", "-c\(connections)", "-d\(seconds)s", "--timeout", "5s", "--latency"]
        if let range {
            let script = fixture.folder + "/range.lua"
            if !FileManager.default.fileExists(atPath: script) {
                try "wrk.headers[\"Range\"] = \"\(range)\"\n".write(toFile: script, atomically: true, encoding: .utf8)
            }
            arguments += ["-s", script]
        }
        let result = try runCommand(wrk!, arguments + [url], timeout: Double(seconds) + 60)
        guard result.status == 0, !result.timedOut else {
            throw BenchFailure("wrk \(result.timedOut ? "timed out" : "failed with status \(result.status)"): \((result.errorOutput + result.output).prefix(300))")
        }
        var rate: Double?
        var run = WrkRun(rate: 0, requests: 0)
        for line in result.output.split(separator: "\n") {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.contains(" requests in "), let count = Double(trimmed.prefix { $0.isNumber }) {
                // "193011 requests in 5.02s, 711.63MB read"
                run.requests = count
            } else if trimmed.hasPrefix("Requests/sec:") {
                rate = Double(trimmed.dropFirst("Requests/sec:".count).trimmingCharacters(in: .whitespaces))
            } else if trimmed.hasPrefix("99%") {
                // The latency distribution of --latency: "99%    3.21ms".
                run.p99Milliseconds = Self.milliseconds(trimmed.dropFirst(3).trimmingCharacters(in: .whitespaces))
            } else if trimmed.hasPrefix("Non-2xx or 3xx responses:") {
                // Wrong answers make the rate meaningless.
                throw BenchFailure("wrk reports \(trimmed)")
            } else if trimmed.hasPrefix("Socket errors:") {
                // Connections closed or timed out: reported beside the figure.
                run.note = "wrk reports \(trimmed)"
            }
        }
        guard let rate else { throw BenchFailure("no Requests/sec in wrk's output: \(result.output.prefix(300))") }
        run.rate = rate
        return run
    }

    /// wrk's durations ("812.00us", "3.21ms", "1.02s", "1.50m") in milliseconds.
    static func milliseconds(_ text: String) -> Double? {
        let number = text.prefix { $0.isNumber || $0 == "." }
        guard let value = Double(number) else { return nil }
        switch text.dropFirst(number.count) {
        case "us": return value / 1_000
        case "ms": return value
        case "s": return value * 1_000
        case "m": return value * 60_000
        default: return nil
        }
    }

    // MARK: Tables

    private func render(
        _ measure: ServerMeasure, servers: [ServerUnderTest], results: [MeasureResult], dd: (rates: Samples, bytes: Int)?,
        indent: String = "  "
    ) -> String {
        var columns: [(String, Table.Alignment)] = [("server", .left), (measure.unit, .right)]
        if measure == .ranges { columns.append(("req/s", .right)) }
        columns.append(("peak RSS MiB", .right))
        columns.append(("server " + measure.cpuUnit, .right))
        if measure.needsWrk { columns.append(("p99 ms", .right)) }
        var table = Table(columns)
        for (server, result) in zip(servers, results) {
            var row = [server.label, result.figure.formatted()]
            if measure == .ranges {
                row.append(result.figure.map { $0 * 1e6 / Double(ServerFixture.rangeLength) }.formatted())
            }
            row.append(result.peakRSS.map { $0 / Double(1 << 20) }.formatted(decimals: 1))
            row.append(result.cpu.formatted(decimals: measure.needsWrk ? 1 : 0))
            if measure.needsWrk { row.append(result.p99.formatted(decimals: 2)) }
            table.append(row)
        }
        if let dd {
            table.append(["dd if=/dev/zero bs=1M count=\(dd.bytes >> 20) conv=fsync (same disk)", dd.rates.formatted(), "—", "—"])
        }
        return table.render(indent: indent)
    }
}
