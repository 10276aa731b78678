// The scaling section of the server suite (`--only server/scaling`): how Counterpart's cost
// grows with what it holds at once.
//   - 1, 16, 64 and 256 concurrent uploads (one curl, --parallel) of the same total size,
//     each stored and its SHA-256 checked against the JSON answer: throughput, peak RSS,
//     RSS per connection;
//   - idle keep-alive connections (250, then 1,000), each having had one GET answered:
//     RSS and RSS per connection;
//   - the p99 of small GETs (wrk --latency) alone, and while 1 GiB uploads run back to back.
// It prints whether any of it grows worse than linearly.

import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension ServerBench {
    /// The total body of one concurrency level, split between its uploads (1/8 with --quick).
    private static func scalingTotal(quick: Bool) -> Int { quick ? 32 << 20 : 256 << 20 }
    private static let scalingIdleLevels = [250, idleConnections]

    func runScaling(context: BenchContext) {
        let options = context.options
        guard options.wants(key: "scaling") else { return }
        let ready = prepare(options)
        print("""

            Scaling: Counterpart --sync none --max-connections 2000, alone; median [min–max] of \(options.runs) run(s)
            """)
        MachineContext.printLoadAverage("at start")
        defer { MachineContext.printLoadAverage("at end") }
        guard ready, let fixture else { return }
        guard fixture.hasBigFile else {
            print("  SKIPPED: no \(formatBytes(fixture.bigSize)) file: \(fixture.bigSkipReason ?? "")")
            return
        }
        let server: ServerUnderTest
        do {
            let started = try startServers([.counterpart(threads: nil, sync: "none")], fixture: fixture,
                                           counterpartExtra: ["--max-connections", "2000"])
            server = started.servers[0]
        } catch {
            print("  FAILED to start Counterpart: \(error)")
            return
        }
        defer { server.stop() }

        var verdicts: [String] = []
        concurrentUploads(server, fixture: fixture, context: context, verdicts: &verdicts)
        idleConnections(server, fixture: fixture, context: context, verdicts: &verdicts)
        latencyUnderUpload(server, fixture: fixture, context: context)
        if !verdicts.isEmpty {
            print("\n  Growth:")
            for verdict in verdicts { print("    " + verdict) }
        }
    }

    // MARK: Concurrent uploads

    private func concurrentUploads(_ server: ServerUnderTest, fixture: ServerFixture, context: BenchContext, verdicts: inout [String]) {
        let options = context.options
        let total = Self.scalingTotal(quick: options.quick)
        print("""

              Concurrent uploads: N at once from one curl (-Z --parallel-max N, -H 'Expect:'), each \(formatBytes(total))/N of the big
              file's first bytes, \(formatBytes(total)) in all; each stored file's size and SHA-256 (from the JSON answer) checked, and N files stored.
              MB/s = all bodies / wall time; peak RSS = VmHWM (reset before each run); per connection = (peak − RSS before) / N
            """)
        var table = Table([
            ("uploads at once", .right), ("each", .right), ("MB/s", .right), ("peak RSS MiB", .right), ("RSS before MiB", .right),
            ("KiB per connection", .right), ("server CPU ms/GB", .right), ("stored right", .right),
        ])
        var perConnection: [(level: Int, kib: Double)] = []
        var wallSeconds: [(Int, Double)] = []
        var cpuPerGB: [(Int, Double)] = []
        for level in Self.concurrencyLevels {
            let size = total / level
            printError("  [server/scaling] \(level) concurrent upload(s) of \(formatBytes(size))…")
            let source = fixture.folder + "/scaling-\(size).bin"
            defer { unlink(source) }
            let digest: String
            do {
                digest = try fixture.writePrefix(of: size, to: source)
            } catch {
                print("  \(level) uploads: FAILED: \(error)")
                continue
            }
            var rates = Samples(), peaks = Samples(), befores = Samples(), perConnectionKiB = Samples(), cpu = Samples()
            var storedRight = 0
            var failure: String?
            // Only the first level warms up: the server is warm for the next ones.
            let firstRun = level == Self.concurrencyLevels.first ? 0 : 1
            for run in firstRun...options.runs where failure == nil {
                do {
                    let figure = try uploadConcurrently(server, level: level, source: source, size: size, digest: digest, fixture: fixture)
                    storedRight = figure.storedRight
                    if run > 0 {
                        rates.append(figure.megabytesPerSecond)
                        peaks.append(Double(figure.peakRSS) / Double(1 << 20))
                        befores.append(Double(figure.rssBefore) / Double(1 << 20))
                        perConnectionKiB.append(Double(max(0, figure.peakRSS - figure.rssBefore)) / 1024 / Double(level))
                        cpu.append(figure.cpuSeconds * 1e3 / (Double(total) / 1e9))
                    }
                } catch {
                    failure = "\(error)"
                }
            }
            table.append([
                format(level), formatBytes(size), rates.formatted(), peaks.formatted(decimals: 1), befores.formatted(decimals: 1),
                perConnectionKiB.formatted(), cpu.formatted(), failure == nil ? "\(storedRight)/\(level)" : "FAILED",
            ])
            if let failure { print("  \(level) uploads: FAILED: \(failure)") }
            let section = "server/scaling"
            let subject = "\(level) concurrent uploads"
            context.record(FigureRecord(section: section, subject: subject, metric: "throughput", unit: "MB/s", samples: rates))
            context.record(FigureRecord(section: section, subject: subject, metric: "peak RSS", unit: "MiB", samples: peaks))
            context.record(FigureRecord(section: section, subject: subject, metric: "RSS per connection", unit: "KiB", samples: perConnectionKiB))
            context.record(FigureRecord(section: section, subject: subject, metric: "server CPU", unit: "CPU ms/GB", samples: cpu))
            guard failure == nil, !rates.isEmpty else { continue }
            perConnection.append((level, perConnectionKiB.median))
            wallSeconds.append((level, Double(total) / 1e6 / rates.median))
            cpuPerGB.append((level, cpu.median))
            if level == Self.concurrencyLevels.last {
                context.record(TargetCheck(
                    name: "\(level) concurrent uploads: stored with the right SHA-256", measured: Double(storedRight),
                    target: Double(level), unit: "uploads", source: "issue"))
                context.record(TargetCheck(
                    name: "\(level) concurrent uploads: RSS per upload connection", measured: perConnectionKiB.median,
                    target: 256, unit: "KiB", source: "issue", comparison: .below))
            }
        }
        print(table.render(indent: "    "))
        verdicts.append(Self.growthVerdict("upload RSS per connection", perConnection.map { ($0.level, $0.kib) }, slack: 64))
        verdicts.append(Self.totalVerdict("upload wall time for the same bytes", wallSeconds))
        verdicts.append(Self.totalVerdict("upload server CPU per GB", cpuPerGB))
    }

    private struct ConcurrentFigure {
        var megabytesPerSecond: Double
        var peakRSS: Int
        var rssBefore: Int
        var cpuSeconds: Double
        var storedRight: Int
    }

    /// One run of `level` uploads at once; throws unless every one was stored right.
    private func uploadConcurrently(
        _ server: ServerUnderTest, level: Int, source: String, size: Int, digest: String, fixture: ServerFixture
    ) throws -> ConcurrentFigure {
        let answers = fixture.folder + "/scaling-answers"
        try? FileManager.default.removeItem(atPath: answers)
        try FileManager.default.createDirectory(atPath: answers, withIntermediateDirectories: true)
        defer {
            try? FileManager.default.removeItem(atPath: answers)
            Self.emptyFolder(server.storeFolder)
        }
        var configuration = ""
        for index in 0..<level {
            if index > 0 { configuration += "next\n" }
            configuration += """
                url = "\(server.url("/upload"))"
                form = "file=@\(source);filename=upload-\(index).bin"
                header = "Expect:"
                output = "\(answers)/\(index).json"
                silent
                write-out = "%{http_code} %{size_upload}\\n"

                """
        }
        let configurationPath = fixture.folder + "/scaling.curlrc"
        try configuration.write(toFile: configurationPath, atomically: true, encoding: .utf8)
        defer { unlink(configurationPath) }
        Self.emptyFolder(server.storeFolder)
        // Every level's uploads write into memory in the same state, as the upload section's.
        try fixture.prepareForTimedWrite()
        let rssBefore = server.currentRSS
        ProcFS.resetPeakRSS(server.pid)
        let cpuBefore = server.treeCPUSeconds
        var result: CommandResult?
        let wall = try seconds {
            result = try runCommand(curl!, ["-Z", "--parallel-immediate", "--parallel-max", String(level), "-K", configurationPath])
        }
        let cpu = server.treeCPUSeconds - cpuBefore
        let peak = ProcFS.statusBytes(server.pid, field: "VmHWM") ?? 0
        guard let result, result.status == 0, !result.timedOut else {
            throw BenchFailure("curl \(result?.timedOut == true ? "timed out" : "failed with status \(result?.status ?? -1)"): \(result?.errorOutput.prefix(300) ?? "")")
        }
        let statuses = result.output.split(separator: "\n")
        guard statuses.count == level, statuses.allSatisfy({ $0.hasPrefix("200 ") }) else {
            let wrong = statuses.filter { !$0.hasPrefix("200 ") }.prefix(3)
            throw BenchFailure("\(statuses.count) answers for \(level) uploads; not 200: \(wrong)")
        }
        var storedRight = 0
        for index in 0..<level {
            let answer = FileManager.default.contents(atPath: "\(answers)/\(index).json") ?? Data()
            let stored = try Self.storedFiles(inAnswer: answer)
            if stored.count == 1, stored[0].size == size, stored[0].sha256 == digest { storedRight += 1 }
        }
        let onDisk = Self.fileSizes(in: server.storeFolder).filter { $0 == size }.count
        guard storedRight == level, onDisk == level else {
            throw BenchFailure("\(storedRight) of \(level) answers name a file of \(size) bytes with SHA-256 \(digest.prefix(16))…; \(onDisk) such files stored")
        }
        return ConcurrentFigure(megabytesPerSecond: Double(size * level) / wall / 1e6, peakRSS: peak, rssBefore: rssBefore,
                                cpuSeconds: cpu, storedRight: storedRight)
    }

    // MARK: Idle connections

    private func idleConnections(_ server: ServerUnderTest, fixture: ServerFixture, context: BenchContext, verdicts: inout [String]) {
        print("""

              Idle keep-alive connections: each opened, one GET /\(ServerFixture.smallName) answered on it in full, then left open;
              RSS (VmRSS) 0.5 s after the last, minus RSS before; each checked still open before it is closed
            """)
        var table = Table([
            ("connections", .right), ("RSS before MiB", .right), ("RSS with them MiB", .right), ("KiB per connection", .right),
            ("still open", .right),
        ])
        var perConnection: [(Int, Double)] = []
        for level in Self.scalingIdleLevels {
            printError("  [server/scaling] \(level) idle keep-alive connections…")
            Thread.sleep(forTimeInterval: 0.5)
            let before = server.currentRSS
            var sockets: [Int32] = []
            defer { sockets.forEach { close($0) } }
            var failure: String?
            for _ in 0..<level {
                do {
                    sockets.append(try Self.openKeptAlive(port: server.port))
                } catch {
                    failure = "\(error)"
                    break
                }
            }
            Thread.sleep(forTimeInterval: 0.5)
            let with = server.currentRSS
            let open = sockets.filter(Self.isStillOpen).count
            let kib = Double(max(0, with - before)) / 1024 / Double(max(1, sockets.count))
            table.append([format(level), format(Double(before) / Double(1 << 20), decimals: 1),
                          format(Double(with) / Double(1 << 20), decimals: 1), format(kib, decimals: 1),
                          "\(open)/\(level)"])
            if let failure { print("    \(level) connections: FAILED after \(sockets.count): \(failure)") }
            context.record(FigureRecord(section: "server/scaling", subject: "\(level) idle keep-alive connections",
                                        metric: "RSS per connection", unit: "KiB", samples: Samples([kib])))
            context.record(FigureRecord(section: "server/scaling", subject: "\(level) idle keep-alive connections",
                                        metric: "RSS", unit: "MiB", samples: Samples([Double(with) / Double(1 << 20)])))
            if failure == nil, open == level { perConnection.append((level, kib)) }
            sockets.forEach { close($0) }
            sockets = []
        }
        print(table.render(indent: "    "))
        verdicts.append(Self.growthVerdict("idle connection RSS per connection", perConnection, slack: 16))
    }

    /// A connection to 127.0.0.1:`port` on which one GET has been answered in full.
    static func openKeptAlive(port: UInt16) throws -> Int32 {
        let descriptor = try connectLoopback(port: port, from: nil, receiveTimeout: 5)
        let request = Array("GET /\(ServerFixture.smallName) HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".utf8)
        guard write(descriptor, request, request.count) == request.count else {
            close(descriptor)
            throw BenchFailure("cannot send the GET")
        }
        // Read the head, then exactly Content-Length bytes of body.
        var received: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 16 * 1024)
        var expected: Int?
        while expected.map({ received.count < $0 }) ?? true {
            let count = read(descriptor, &buffer, buffer.count)
            guard count > 0 else {
                close(descriptor)
                throw BenchFailure("the connection ended after \(received.count) bytes of the answer")
            }
            received += buffer[0..<count]
            if expected == nil, let end = received.firstRange(of: Array("\r\n\r\n".utf8)) {
                let head = String(decoding: received[..<end.lowerBound], as: UTF8.self).lowercased()
                guard head.hasPrefix("http/1.1 200"),
                      let line = head.split(separator: "\r\n").first(where: { $0.hasPrefix("content-length:") }),
                      let length = Int(line.dropFirst("content-length:".count).trimmingCharacters(in: .whitespaces)) else {
                    close(descriptor)
                    throw BenchFailure("not a 200 with a Content-Length: \(head.prefix(200))")
                }
                expected = end.upperBound + length
            }
        }
        return descriptor
    }

    /// Whether the server has not closed the connection: nothing to read (a close would
    /// make the socket readable, at end of stream) and no error.
    static func isStillOpen(_ descriptor: Int32) -> Bool {
        var poller = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        return poll(&poller, 1, 0) == 0
    }

    // MARK: Latency under an upload

    private func latencyUnderUpload(_ server: ServerUnderTest, fixture: ServerFixture, context: BenchContext) {
        guard wrk != nil else {
            print("\n  Small GETs during an upload: SKIPPED (wrk is not installed)")
            return
        }
        let seconds = duration(context.options)
        print("""

              Small GETs during an upload: wrk -t1 -c8 -d\(seconds)s --latency GET /\(ServerFixture.smallName), alone and while
              \(formatBytes(fixture.bigSize)) uploads (curl -F, each checked) run back to back; one run each
            """)
        var table = Table([("GETs", .left), ("req/s", .right), ("p99 ms", .right), ("uploads done", .right)])
        do {
            printError("  [server/scaling] small GETs alone…")
            let alone = try runWrk(url: server.url("/" + ServerFixture.smallName), range: nil, threads: 1, connections: 8,
                                   seconds: seconds, fixture: fixture)
            table.append(["alone", format(alone.rate), alone.p99Milliseconds.map { format($0, decimals: 2) } ?? "—", "—"])

            printError("  [server/scaling] small GETs during uploads…")
            let uploader = BackgroundUploads(curl: curl!, url: server.url("/upload"), file: fixture.bigPath,
                                             answerPath: fixture.folder + "/latency-answer", size: fixture.bigSize,
                                             digest: fixture.bigSHA256!, storeFolder: server.storeFolder)
            uploader.start()
            Thread.sleep(forTimeInterval: 0.3)
            let during: WrkRun
            do {
                during = try runWrk(url: server.url("/" + ServerFixture.smallName), range: nil, threads: 1, connections: 8,
                                    seconds: seconds, fixture: fixture)
            } catch {
                _ = uploader.stop()
                throw error
            }
            let uploads = uploader.stop()
            table.append(["during uploads", format(during.rate), during.p99Milliseconds.map { format($0, decimals: 2) } ?? "—",
                          uploads.failure == nil ? format(uploads.done) : "FAILED"])
            print(table.render(indent: "    "))
            if let failure = uploads.failure { print("    an upload FAILED: \(failure)") }
            for (name, run) in [("alone", alone), ("during uploads", during)] {
                context.record(FigureRecord(section: "server/scaling", subject: "small GETs \(name)", metric: "p99 latency",
                                            unit: "ms", samples: Samples(run.p99Milliseconds.map { [$0] } ?? [])))
                context.record(FigureRecord(section: "server/scaling", subject: "small GETs \(name)", metric: "rate",
                                            unit: "req/s", samples: Samples([run.rate])))
            }
        } catch {
            print(table.render(indent: "    "))
            print("    FAILED: \(error)")
        }
    }

    // MARK: Verdicts

    /// Whether a cost of moving the same bytes (wall time, CPU per GB) grows faster than the
    /// number of connections it is spread over, from one level to the next.
    static func totalVerdict(_ name: String, _ points: [(Int, Double)]) -> String {
        guard points.count >= 2 else { return "\(name): not enough levels measured to judge" }
        let text = points.map { "\(format($0.1, decimals: $0.1 < 10 ? 2 : 0)) at \(format($0.0))" }.joined(separator: ", ")
        for (previous, next) in zip(points, points.dropFirst()) where next.1 / previous.1 > Double(next.0) / Double(previous.0) {
            return "\(name): WORSE THAN LINEAR from \(format(previous.0)) to \(format(next.0)) connections (\(text))"
        }
        let growth = points.last!.1 / points.first!.1
        return "\(name): linear or better, \(format(growth, decimals: 2))× from \(format(points.first!.0)) to \(format(points.last!.0)) connections (\(text))"
    }

    /// Whether a per-unit cost (KiB per connection) stays flat as the count grows: worse than
    /// linear when, from one level to the next, it grows by more than half plus `slack` KiB.
    static func growthVerdict(_ name: String, _ points: [(Int, Double)], slack: Double) -> String {
        guard points.count >= 2 else { return "\(name): not enough levels measured to judge" }
        // From the second level on: one connection alone also carries fixed costs.
        let judged = points.count > 2 ? Array(points.dropFirst()) : points
        for (previous, next) in zip(judged, judged.dropFirst()) where next.1 > previous.1 * 1.5 + slack {
            return "\(name): WORSE THAN LINEAR: \(format(previous.1, decimals: 1)) KiB at \(format(previous.0)), "
                + "\(format(next.1, decimals: 1)) KiB at \(format(next.0))"
        }
        let text = judged.map { "\(format($0.1, decimals: 1)) KiB at \(format($0.0))" }.joined(separator: ", ")
        return "\(name): linear or better (\(text))"
    }
}

/// Uploads the big file again and again on a thread of its own until stopped, checking each.
private final class BackgroundUploads: @unchecked Sendable {
    private let curl: String, url: String, file: String, answerPath: String, digest: String, storeFolder: String
    private let size: Int
    private let stopping = Atomic<Bool>(false)
    private let finished = DispatchSemaphore(value: 0)
    // Written by the thread only, read after `finished`.
    private var done = 0
    private var failure: String?

    init(curl: String, url: String, file: String, answerPath: String, size: Int, digest: String, storeFolder: String) {
        self.curl = curl
        self.url = url
        self.file = file
        self.answerPath = answerPath
        self.size = size
        self.digest = digest
        self.storeFolder = storeFolder
    }

    func start() {
        Thread { [self] in
            while !stopping.load(ordering: .relaxed), failure == nil {
                do {
                    let result = try runCommand(curl, ["-s", "-H", "Expect:", "-o", answerPath, "-w", "%{http_code}", "-F", "file=@\(file)", url])
                    let answer = FileManager.default.contents(atPath: answerPath) ?? Data()
                    let stored = try ServerBench.storedFiles(inAnswer: answer)
                    if result.output == "200", stored.count == 1, stored[0].size == size, stored[0].sha256 == digest {
                        done += 1
                    } else {
                        failure = "answered \(result.output): \(String(decoding: answer.prefix(200), as: UTF8.self))"
                    }
                } catch {
                    failure = "\(error)"
                }
                ServerBench.emptyFolder(storeFolder)
            }
            unlink(answerPath)
            finished.signal()
        }.start()
    }

    /// Lets the upload in progress finish, then returns how many were stored right.
    func stop() -> (done: Int, failure: String?) {
        stopping.store(true, ordering: .relaxed)
        finished.wait()
        return (done, failure)
    }
}
