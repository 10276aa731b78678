// The object-store section of the server suite (`--only server/object-store`, not run by
// default: it starts Ceph). Counterpart nodes on an S3 store beside the engine itself, in
// the same run:
//   - a throw-away Ceph RGW (scripts/ceph-s3, bluestore) and two clusters on it
//     (scripts/cluster: one node, and two nodes, behind nginx with TLS and HTTP/2);
//   - a 1 GiB upload (curl -F) into one node straight and through the front, and two at
//     once into the two-node cluster, beside the engine's own PUT of the same file (curl
//     --aws-sigv4 -T) and its own multipart upload with a node's parts: MB/s, each node's
//     peak RSS and CPU;
//   - many small files, eight at a time, beside as many PUTs;
//   - a 1 GiB download and 200 Range GETs of 1 MiB (p50, p99) beside the engine's own GETs,
//     straight and through the same nginx.
// Uploaded objects are deleted after each run: the engine's device holds a few GiB.

import Foundation

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

extension ServerBench {
    static let objectStoreSmallFiles = 1_000
    static let objectStoreSmallSize = 16 << 10
    static let objectStoreParallel = 8
    /// How a node sends a form upload's file to the store (`S3UploadStore.partSize`,
    /// `S3ObjectDestination.partsInFlight`): the engine's own multipart upload is measured
    /// with the same.
    static let objectStorePartSize = 8 << 20
    static let objectStorePartsInFlight = 2

    func runObjectStore(context: BenchContext) {
        let options = context.options
        guard options.wants(key: "object-store") else { return }
        let ready = prepare(options)
        print("""

            Object store: Counterpart nodes (--store s3://…) on Ceph RGW 16.2 (one OSD on bluestore, started here), straight and \
            behind nginx (TLS, HTTP/2, round robin), beside the engine's own PUT and GET of the same bytes (curl --aws-sigv4); \
            median [min–max] of \(options.runs) run(s) after a warm-up
            """)
        MachineContext.printLoadAverage("at start")
        defer { MachineContext.printLoadAverage("at end") }
        guard ready, let fixture, let curl else { return }
        guard fixture.hasBigFile else {
            print("  SKIPPED: no \(formatBytes(fixture.bigSize)) file: \(fixture.bigSkipReason ?? "")")
            return
        }
        guard let counterpart else { return }
        let setup: ObjectStoreSetup
        do {
            setup = try ObjectStoreSetup.start(folder: fixture.folder + "/object-store", counterpart: counterpart, bigSize: fixture.bigSize)
        } catch {
            print("  FAILED to start the engine and the nodes: \(error)")
            return
        }
        defer { setup.stop() }
        print("  engine: \(setup.engine.endpoint); one node behind \(setup.one.url); two nodes behind \(setup.two.url)")
        ObjectStoreRun(curl: curl, fixture: fixture, setup: setup, context: context).run()
    }
}

/// The engine's endpoint and key, read from the `s3.env` that scripts/ceph-s3 writes.
struct ObjectStoreEngine {
    let folder: String
    let endpoint: String
    let region: String
    let key: String
    let secret: String
    let pids: [Int32]

    /// curl's arguments that sign a request for this engine.
    var signing: [String] {
        ["--aws-sigv4", "aws:amz:\(region):s3", "--user", "\(key):\(secret)", "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD"]
    }

    /// The same, as lines of a curl configuration file (`-K`).
    var signingLines: String {
        "aws-sigv4 = \"aws:amz:\(region):s3\"\nuser = \"\(key):\(secret)\"\nheader = \"x-amz-content-sha256: UNSIGNED-PAYLOAD\"\n"
    }
}

/// A cluster started by scripts/cluster: its front (nginx), its nodes and where it keeps
/// its objects.
struct StoreCluster {
    let folder: String
    let url: String
    let certificate: String
    let nodes: [String]
    let nodePIDs: [Int32]
    let bucket: String
    let prefix: String
    /// The same nginx settings in front of the engine itself (a peer for what the front costs).
    let engineFront: String

    /// curl's arguments for the front: HTTP/2 over TLS, trusting its certificate.
    var frontArguments: [String] { ["--http2", "--cacert", certificate] }
    /// The same, as lines of a curl configuration file (`-K`).
    var frontLines: String { "http2\ncacert = \"\(certificate)\"\n" }
}

final class ObjectStoreSetup {
    let engine: ObjectStoreEngine
    let one: StoreCluster
    let two: StoreCluster
    private let scripts: String

    private init(engine: ObjectStoreEngine, one: StoreCluster, two: StoreCluster, scripts: String) {
        self.engine = engine
        self.one = one
        self.two = two
        self.scripts = scripts
    }

    static func start(folder: String, counterpart: String, bigSize: Int) throws -> ObjectStoreSetup {
        let scripts = FileManager.default.currentDirectoryPath + "/scripts"
        guard FileManager.default.isExecutableFile(atPath: scripts + "/ceph-s3") else {
            throw BenchFailure("no scripts/ceph-s3 here: run from the repository (make bench)")
        }
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        let engineFolder = folder + "/engine"
        // Room for a run's uploads before the engine collects the deleted ones.
        setenv("CEPH_BLUESTORE_GIB", String(max(10, 24 * bigSize >> 30)), 1)
        printError("  [server/object-store] starting Ceph RGW (about 20 s)…")
        CleanupRegistry.shared.add(folder: folder)
        try runScript(scripts + "/ceph-s3", ["up", engineFolder, "bluestore"], log: folder + "/ceph-s3.log", timeout: 300)
        let values = try Self.environment(engineFolder + "/s3.env")
        let pids = (MachineContext.readTextFile(engineFolder + "/pids") ?? "").split(separator: "\n")
            .compactMap { $0.split(separator: " ").last.flatMap { Int32($0) } }
        for pid in pids { CleanupRegistry.shared.add(process: pid, stopSignal: SIGKILL) }
        guard let endpoint = values["S3_ENDPOINT"], let key = values["AWS_ACCESS_KEY_ID"], let secret = values["AWS_SECRET_ACCESS_KEY"] else {
            throw BenchFailure("\(engineFolder)/s3.env lacks S3_ENDPOINT or the key")
        }
        let engine = ObjectStoreEngine(folder: engineFolder, endpoint: endpoint, region: values["AWS_DEFAULT_REGION"] ?? "us-east-1",
                                       key: key, secret: secret, pids: pids)
        printError("  [server/object-store] starting one node, then two, behind nginx…")
        let one = try startCluster(folder + "/one", nodes: 1, counterpart: counterpart, scripts: scripts, s3env: engineFolder + "/s3.env")
        let two = try startCluster(folder + "/two", nodes: 2, counterpart: counterpart, scripts: scripts, s3env: engineFolder + "/s3.env")
        return ObjectStoreSetup(engine: engine, one: one, two: two, scripts: scripts)
    }

    private static func startCluster(_ folder: String, nodes: Int, counterpart: String, scripts: String, s3env: String) throws -> StoreCluster {
        try runScript(scripts + "/cluster", ["up", folder, String(nodes), "--binary", counterpart, "--s3-env", s3env],
                      log: folder + ".log", timeout: 120)
        let values = try environment(folder + "/cluster.env")
        let nodePIDs = (MachineContext.readTextFile(folder + "/nodes") ?? "").split(separator: "\n")
            .compactMap { $0.split(separator: " ").last.flatMap { Int32($0) } }
        for pid in nodePIDs { CleanupRegistry.shared.add(process: pid) }
        if let front = MachineContext.readTextFile(folder + "/nginx.pid.run").flatMap({ Int32($0.trimmingCharacters(in: .whitespacesAndNewlines)) }) {
            CleanupRegistry.shared.add(process: front)
        }
        guard let url = values["CLUSTER_URL"], let certificate = values["CLUSTER_CA"], let store = values["CLUSTER_STORE"],
              store.hasPrefix("s3://"), let engineFront = values["CLUSTER_ENGINE_FRONT"] else {
            throw BenchFailure("\(folder)/cluster.env lacks CLUSTER_URL, CLUSTER_CA, CLUSTER_STORE or CLUSTER_ENGINE_FRONT")
        }
        let location = store.dropFirst(5)
        let bucket = String(location.prefix { $0 != "/" })
        let prefix = String(location.dropFirst(bucket.count + 1))
        let nodeURLs = (values["CLUSTER_NODES"] ?? "").split(separator: " ").map(String.init)
        guard nodeURLs.count == nodes, nodePIDs.count == nodes else { throw BenchFailure("\(folder): \(nodeURLs.count) node URLs, \(nodePIDs.count) PIDs") }
        return StoreCluster(folder: folder, url: url, certificate: certificate, nodes: nodeURLs, nodePIDs: nodePIDs,
                            bucket: bucket, prefix: prefix, engineFront: engineFront)
    }

    /// Runs a set-up script to its end (its output to `log`, shown when it fails). Not with
    /// Foundation's Process: its wait for a script whose daemons outlive it never ended.
    static func runScript(_ script: String, _ arguments: [String], log: String, timeout: Double) throws {
        let process = try SessionProcess(script, arguments, output: nil, errorPath: log)
        guard waitForExit(process, seconds: timeout) else {
            kill(process.pid, SIGKILL)
            throw BenchFailure("\(script) \(arguments.joined(separator: " ")) did not end in \(Int(timeout)) s")
        }
        guard let status = process.terminationStatus, status == 0 else {
            throw BenchFailure("\(script) \(arguments.joined(separator: " ")) failed: \((MachineContext.readTextFile(log) ?? "").suffix(600))")
        }
    }

    /// `KEY=VALUE` lines (a value may be in double quotes).
    static func environment(_ path: String) throws -> [String: String] {
        guard let text = MachineContext.readTextFile(path) else { throw BenchFailure("cannot read \(path)") }
        var values: [String: String] = [:]
        for line in text.split(separator: "\n") {
            guard let equals = line.firstIndex(of: "=") else { continue }
            var value = String(line[line.index(after: equals)...])
            if value.hasPrefix("\""), value.hasSuffix("\""), value.count >= 2 { value = String(value.dropFirst().dropLast()) }
            values[String(line[..<equals])] = value
        }
        return values
    }

    func stop() {
        for cluster in [one, two] {
            try? Self.runScript(scripts + "/cluster", ["down", cluster.folder], log: "/dev/null", timeout: 60)
            for pid in cluster.nodePIDs { CleanupRegistry.shared.remove(process: pid) }
        }
        try? Self.runScript(scripts + "/ceph-s3", ["down", engine.folder], log: "/dev/null", timeout: 120)
        for pid in engine.pids { CleanupRegistry.shared.remove(process: pid) }
    }
}

/// One run of the section's measurements.
private struct ObjectStoreRun {
    let curl: String
    let fixture: ServerFixture
    let setup: ObjectStoreSetup
    let context: BenchContext

    private var engine: ObjectStoreEngine { setup.engine }
    private var runs: Int { context.options.runs }
    private let section = "server/object-store"

    /// Who is measured in a table: a label and how one run of it goes.
    struct Subject {
        let label: String
        /// The node processes whose peak RSS and CPU are read around a run (none for the engine).
        let nodePIDs: [Int32]
        let measure: (_ run: Int) throws -> Double
    }

    struct Result {
        var figure = Samples()
        var peakRSS = Samples()
        var cpu = Samples()
        var failure: String?
    }

    func run() {
        uploads()
        smallFiles()
        let stored = storeBigFile()
        downloads(stored)
        ranges(stored)
    }

    // MARK: Measuring

    /// Runs each subject once to warm up, then `runs` times, alternating the order.
    private func measure(_ subjects: [Subject], tag: String) -> [Result] {
        var results = subjects.map { _ in Result() }
        for run in 0...runs {
            let order = run % 2 == 0 ? Array(subjects.indices) : subjects.indices.reversed()
            for index in order where results[index].failure == nil {
                let subject = subjects[index]
                printError("  [\(section)] \(tag): \(subject.label): \(run == 0 ? "warm-up" : "run \(run)/\(runs)")…")
                for pid in subject.nodePIDs { _ = ProcFS.resetPeakRSS(pid) }
                let cpuBefore = subject.nodePIDs.compactMap(ProcFS.cpuSeconds).reduce(0, +)
                do {
                    let figure = try subject.measure(run)
                    guard run > 0 else { continue }
                    results[index].figure.append(figure)
                    if !subject.nodePIDs.isEmpty {
                        let peaks = subject.nodePIDs.compactMap { ProcFS.statusBytes($0, field: "VmHWM") }
                        if let largest = peaks.max() { results[index].peakRSS.append(Double(largest) / Double(1 << 20)) }
                        results[index].cpu.append(subject.nodePIDs.compactMap(ProcFS.cpuSeconds).reduce(0, +) - cpuBefore)
                    }
                } catch {
                    results[index].failure = "\(error)"
                }
            }
        }
        return results
    }

    private func curlFigures(_ arguments: [String], what: String, timeout: Double = 600) throws -> [Substring] {
        let result = try runCommand(curl, arguments, timeout: timeout)
        guard result.status == 0, !result.timedOut else {
            throw BenchFailure("curl (\(what)) \(result.timedOut ? "timed out" : "failed with status \(result.status)"): \(result.errorOutput.prefix(300))")
        }
        return result.output.split(whereSeparator: { $0 == " " || $0 == "\n" })
    }

    /// An object's URL at the engine, or at the engine's side of a cluster's front.
    private func engineURL(_ bucket: String, _ key: String, through front: StoreCluster? = nil) -> String {
        "\(front?.engineFront ?? engine.endpoint)/\(bucket)/\(key)"
    }

    /// Deletes what `url` names at the engine (an object, or with `?uploadId=` a multipart upload).
    private func deleteFromEngine(_ url: String) {
        _ = try? runCommand(curl, engine.signing + ["-s", "-o", "/dev/null", "-X", "DELETE", url])
    }

    private func deleteObject(_ cluster: StoreCluster, _ name: String) {
        for key in [cluster.prefix + name, cluster.prefix + ".counterpart/names/" + name] {
            deleteFromEngine(engineURL(cluster.bucket, key))
        }
    }

    // MARK: 1 GiB uploads

    /// Uploads the big file as `name` with curl -F, to `base` (a node or a front); checks the
    /// answer's size and SHA-256; returns the seconds curl took.
    private func uploadBig(to base: String, extra: [String], name: String) throws -> Double {
        let answerPath = fixture.folder + "/object-store-answer-\(name)"
        defer { unlink(answerPath) }
        let figures = try curlFigures(["-s", "-H", "Expect:", "-o", answerPath, "-w", "%{http_code} %{time_total}"] + extra
            + ["-F", "file=@\(fixture.bigPath);filename=\(name)", base + "/upload"], what: "upload")
        guard figures.count == 2, let status = Int(figures[0]), let time = Double(figures[1]), time > 0 else {
            throw BenchFailure("curl printed \(figures)")
        }
        let answer = FileManager.default.contents(atPath: answerPath) ?? Data()
        guard status == 200 else { throw BenchFailure("POST /upload answered \(status): \(String(decoding: answer.prefix(300), as: UTF8.self))") }
        let stored = try ServerBench.storedFiles(inAnswer: answer)
        guard stored.count == 1, stored[0].size == fixture.bigSize, stored[0].sha256 == fixture.bigSHA256 else {
            throw BenchFailure("stored \(stored); sent \(fixture.bigSize) bytes with SHA-256 \(fixture.bigSHA256 ?? "")")
        }
        return time
    }

    /// Uploads of the big file at once through a front (one curl, --parallel); the wall time.
    private func uploadBigInParallel(through front: StoreCluster, names: [String]) throws -> Double {
        let configuration = fixture.folder + "/object-store-parallel.curlrc"
        var text = ""
        for name in names {
            if !text.isEmpty { text += "next\n" }
            text += "url = \"\(front.url)/upload\"\nform = \"file=@\(fixture.bigPath);filename=\(name)\"\nheader = \"Expect:\"\n"
                + "output = \"/dev/null\"\nwrite-out = \"%{http_code}\\n\"\nsilent\n" + front.frontLines
        }
        try text.write(toFile: configuration, atomically: true, encoding: .utf8)
        var statuses: [Substring] = []
        let wall = try seconds { statuses = try curlFigures(["-Z", "--parallel-immediate", "--parallel-max", String(names.count), "-K", configuration], what: "parallel uploads") }
        guard statuses.count == names.count, statuses.allSatisfy({ $0 == "200" }) else { throw BenchFailure("answers \(statuses)") }
        return wall
    }

    /// The engine's own PUTs of the big file, `count` at once (straight, or through the
    /// engine's side of a cluster's front); the wall time.
    private func enginePut(count: Int, run: Int, through front: StoreCluster? = nil) throws -> Double {
        let keys = (0..<count).map { "engine/big-\(run)-\($0)\(front == nil ? "" : "-front").bin" }
        defer { for key in keys { deleteFromEngine(engineURL(setup.one.bucket, key)) } }
        var arguments = ["-s", "-Z", "--parallel-immediate", "--parallel-max", String(count)]
        for (index, key) in keys.enumerated() {
            if index > 0 { arguments.append("--next") }
            arguments += engine.signing + (front?.frontArguments ?? [])
                + ["-o", "/dev/null", "-w", "%{http_code}\\n", "-T", fixture.bigPath, engineURL(setup.one.bucket, key, through: front)]
        }
        var statuses: [Substring] = []
        let wall = try seconds { statuses = try curlFigures(arguments, what: "engine PUT") }
        guard statuses.count == count, statuses.allSatisfy({ $0 == "200" }) else { throw BenchFailure("the engine answered \(statuses)") }
        return wall
    }

    /// The engine's own multipart upload of the big file, sent as a node sends a form
    /// upload's file (whose size is known only at its end, so it cannot be one `PUT`): parts
    /// of the node's size, as many at once (one curl, `--parallel`), then the completion; the
    /// wall time of all of it. `parts`: the big file cut into parts (`cutIntoParts`).
    private func engineMultipartPut(run: Int, parts: Swift.Result<[String], any Error>) throws -> Double {
        let parts = try parts.get()
        let url = engineURL(setup.one.bucket, "engine/multipart-\(run).bin")
        var unfinished: String?
        defer {
            // An upload that failed half-way is aborted: its parts would hold the engine's room.
            if let unfinished { deleteFromEngine(url + "?uploadId=" + unfinished) }
            deleteFromEngine(url)
        }
        return try seconds {
            let created = try runCommand(curl, engine.signing + ["-s", "-X", "POST", url + "?uploads="])
            guard created.status == 0, let uploadID = Self.xmlElement("UploadId", in: created.output) else {
                throw BenchFailure("CreateMultipartUpload answered \(created.output.prefix(300))")
            }
            unfinished = uploadID
            let configuration = fixture.folder + "/object-store-multipart.curlrc"
            var text = ""
            for (index, path) in parts.enumerated() {
                if index > 0 { text += "next\n" }
                text += "url = \"\(url)?partNumber=\(index + 1)&uploadId=\(uploadID)\"\nupload-file = \"\(path)\"\n"
                    + "output = \"/dev/null\"\nsilent\nwrite-out = \"%{http_code} \(index + 1) %header{etag}\\n\"\n" + engine.signingLines
            }
            try text.write(toFile: configuration, atomically: true, encoding: .utf8)
            let figures = try curlFigures(["-Z", "--parallel-immediate", "--parallel-max", String(ServerBench.objectStorePartsInFlight),
                                           "-K", configuration], what: "engine parts")
            var etags: [Int: Substring] = [:]
            for index in stride(from: 0, to: figures.count - 2, by: 3) where figures[index] == "200" {
                if let number = Int(figures[index + 1]) { etags[number] = figures[index + 2] }
            }
            guard figures.count == 3 * parts.count, etags.count == parts.count else {
                throw BenchFailure("the engine took \(etags.count) parts of \(parts.count): \(figures.prefix(12))")
            }
            let completion = fixture.folder + "/object-store-multipart.xml"
            try ("<CompleteMultipartUpload>" + (1...parts.count).map { "<Part><PartNumber>\($0)</PartNumber><ETag>\(etags[$0]!)</ETag></Part>" }.joined()
                 + "</CompleteMultipartUpload>").write(toFile: completion, atomically: true, encoding: .utf8)
            let completed = try runCommand(curl, engine.signing + ["-s", "-w", "\n%{http_code}", "-X", "POST", "--data-binary", "@" + completion,
                                                                   url + "?uploadId=" + uploadID])
            // The store may answer 200 with an error in the body (S3's rule for completions).
            guard completed.output.hasSuffix("\n200"), Self.xmlElement("ETag", in: completed.output) != nil else {
                throw BenchFailure("CompleteMultipartUpload answered \(completed.output.prefix(300))")
            }
            unfinished = nil
        }
    }

    /// The big file cut into files of a part each, for the engine's multipart upload.
    private func cutIntoParts() throws -> [String] {
        let folder = fixture.folder + "/object-store-parts"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        guard let input = FileHandle(forReadingAtPath: fixture.bigPath) else { throw BenchFailure("cannot read \(fixture.bigPath)") }
        defer { try? input.close() }
        var paths: [String] = []
        while let piece = try input.read(upToCount: ServerBench.objectStorePartSize), !piece.isEmpty {
            let path = folder + "/part-\(paths.count + 1)"
            guard FileManager.default.createFile(atPath: path, contents: piece) else { throw BenchFailure("cannot write \(path)") }
            paths.append(path)
        }
        return paths
    }

    /// The text of the first `<name>…</name>` in an S3 answer.
    private static func xmlElement(_ name: String, in text: String) -> String? {
        guard let start = text.range(of: "<\(name)>"), let end = text.range(of: "</\(name)>", range: start.upperBound..<text.endIndex) else { return nil }
        return String(text[start.upperBound..<end.lowerBound])
    }

    private func uploads() {
        let megabytes = Double(fixture.bigSize) / 1e6
        let one = setup.one, two = setup.two
        // Cut once for all runs; without them only the multipart peer fails.
        defer { try? FileManager.default.removeItem(atPath: fixture.folder + "/object-store-parts") }
        let parts = Swift.Result { try cutIntoParts() }
        let subjects = [
            Subject(label: "engine: PUT (curl --aws-sigv4 -T)", nodePIDs: []) { run in megabytes / (try enginePut(count: 1, run: run)) },
            Subject(label: "1 node, straight (HTTP/1.1)", nodePIDs: one.nodePIDs) { run in
                let name = "straight-\(run).bin"
                defer { deleteObject(one, name) }
                return megabytes / (try uploadBig(to: one.nodes[0], extra: [], name: name))
            },
            Subject(label: "1 node behind nginx (TLS, HTTP/2)", nodePIDs: one.nodePIDs) { run in
                let name = "front-\(run).bin"
                defer { deleteObject(one, name) }
                return megabytes / (try uploadBig(to: one.url, extra: one.frontArguments, name: name))
            },
            Subject(label: "engine: 2 PUTs at once", nodePIDs: []) { run in 2 * megabytes / (try enginePut(count: 2, run: run)) },
            Subject(label: "2 nodes behind nginx, 2 uploads at once", nodePIDs: two.nodePIDs) { run in
                let names = ["two-\(run)-a.bin", "two-\(run)-b.bin"]
                defer { for name in names { deleteObject(two, name) } }
                return 2 * megabytes / (try uploadBigInParallel(through: two, names: names))
            },
            Subject(label: "engine: multipart PUT, \(ServerBench.objectStorePartSize >> 20) MiB parts, \(ServerBench.objectStorePartsInFlight) at once",
                    nodePIDs: []) { run in megabytes / (try engineMultipartPut(run: run, parts: parts)) },
            Subject(label: "engine: PUT behind the same nginx", nodePIDs: []) { run in megabytes / (try enginePut(count: 1, run: run, through: one)) },
        ]
        print("""

              Upload: \(formatBytes(fixture.bigSize)) with curl -s -H 'Expect:' -F (the node's answer's size and SHA-256 checked), or PUT to the \
            engine; MB/s of the file (MB = 10^6 B); peak RSS = the largest node's VmHWM (reset before each run); node CPU = all nodes' CPU seconds
            """)
        let results = measure(subjects, tag: "upload")
        render(subjects, results, unit: "MB/s", cpuLabel: "node CPU s")
        ratio(results[1], over: results[0], "1 node straight / engine PUT", target: 0.8)
        ratio(results[2], over: results[0], "1 node behind nginx / engine PUT", target: 0.8)
        ratio(results[4], over: results[3], "2 nodes behind nginx / engine, 2 at once", target: 0.8)
        // A node must send a form upload's file as a multipart upload: what the engine gives
        // its own multipart upload with the node's parts says how much of the gap is the node's.
        ratio(results[5], over: results[0], "engine multipart PUT / engine PUT", target: nil)
        ratio(results[1], over: results[5], "1 node straight / engine multipart PUT", target: nil)
        ratio(results[6], over: results[0], "engine PUT behind nginx / engine PUT (what the front costs)", target: nil)
        ratio(results[2], over: results[6], "1 node behind nginx / engine PUT behind the same nginx", target: nil)
        for index in [1, 2, 4] {
            if let peak = results[index].peakRSS.values.max() {
                context.record(TargetCheck(name: "object store: node peak RSS, \(subjects[index].label)", measured: peak, target: 64,
                                           unit: "MiB", source: "#24", comparison: .below))
            }
        }
    }

    // MARK: Small files

    private func smallFiles() {
        let count = ServerBench.objectStoreSmallFiles
        let size = ServerBench.objectStoreSmallSize
        let path = fixture.folder + "/object-store-small.bin"
        do {
            _ = try fixture.writePrefix(of: size, to: path)
        } catch {
            print("  Small files: FAILED to write the file: \(error)")
            return
        }
        let one = setup.one, two = setup.two
        func nodeConfiguration(_ base: String, front: StoreCluster?, run: Int, tag: String) throws -> String {
            let file = fixture.folder + "/object-store-small-\(tag).curlrc"
            var text = ""
            for index in 0..<count {
                if index > 0 { text += "next\n" }
                text += "url = \"\(base)/upload\"\nform = \"file=@\(path);filename=s\(run)-\(tag)-\(index).bin\"\n"
                    + "output = \"/dev/null\"\nwrite-out = \"%{http_code}\\n\"\nsilent\n"
                    + (front?.frontLines ?? "")
            }
            try text.write(toFile: file, atomically: true, encoding: .utf8)
            return file
        }
        func timed(_ configuration: String, expect status: String) throws -> Double {
            var statuses: [Substring] = []
            let wall = try seconds {
                statuses = try curlFigures(["-Z", "--parallel-immediate", "--parallel-max", String(ServerBench.objectStoreParallel), "-K", configuration],
                                           what: "small files")
            }
            let wrong = statuses.filter { $0 != status }
            guard statuses.count == count, wrong.isEmpty else { throw BenchFailure("\(statuses.count) answers, \(wrong.count) not \(status): \(wrong.prefix(3))") }
            return Double(count) / wall
        }
        func removeAll(_ cluster: StoreCluster, run: Int, tag: String) {
            // One listing-free sweep: the names are known.
            let file = fixture.folder + "/object-store-delete.curlrc"
            var text = ""
            for index in 0..<count {
                for key in ["s\(run)-\(tag)-\(index).bin", ".counterpart/names/s\(run)-\(tag)-\(index).bin"] {
                    if !text.isEmpty { text += "next\n" }
                    text += "url = \"\(engineURL(cluster.bucket, cluster.prefix + key))\"\nrequest = \"DELETE\"\noutput = \"/dev/null\"\nsilent\n"
                        + engine.signingLines
                }
            }
            if (try? text.write(toFile: file, atomically: true, encoding: .utf8)) != nil {
                _ = try? runCommand(curl, ["-Z", "--parallel-max", "16", "-K", file])
            }
        }
        let subjects = [
            Subject(label: "engine: PUT", nodePIDs: []) { run in
                let file = fixture.folder + "/object-store-small-engine.curlrc"
                var text = ""
                for index in 0..<count {
                    if index > 0 { text += "next\n" }
                    text += "url = \"\(engineURL(one.bucket, "engine/s\(run)-\(index).bin"))\"\nupload-file = \"\(path)\"\n"
                        + "output = \"/dev/null\"\nwrite-out = \"%{http_code}\\n\"\nsilent\n"
                        + engine.signingLines
                }
                try text.write(toFile: file, atomically: true, encoding: .utf8)
                return try timed(file, expect: "200")
            },
            Subject(label: "1 node, straight (HTTP/1.1)", nodePIDs: one.nodePIDs) { run in
                defer { removeAll(one, run: run, tag: "straight") }
                return try timed(try nodeConfiguration(one.nodes[0], front: nil, run: run, tag: "straight"), expect: "200")
            },
            Subject(label: "1 node behind nginx (TLS, HTTP/2)", nodePIDs: one.nodePIDs) { run in
                defer { removeAll(one, run: run, tag: "front") }
                return try timed(try nodeConfiguration(one.url, front: one, run: run, tag: "front"), expect: "200")
            },
            Subject(label: "2 nodes behind nginx", nodePIDs: two.nodePIDs) { run in
                defer { removeAll(two, run: run, tag: "two") }
                return try timed(try nodeConfiguration(two.url, front: two, run: run, tag: "two"), expect: "200")
            },
        ]
        print("""

              Small files: \(format(count)) files of \(formatBytes(size)), \(ServerBench.objectStoreParallel) at a time from one curl \
            (-Z --parallel-max \(ServerBench.objectStoreParallel)), each its own POST /upload (-F), or its own PUT to the engine; files/s. \
            A node claims each name (a conditional PUT) and puts the file (a conditional PUT): two requests to the engine for \
            one (the names are all free)
            """)
        let results = measure(subjects, tag: "small files")
        render(subjects, results, unit: "files/s", cpuLabel: "node CPU s")
        ratio(results[1], over: results[0], "small files: 1 node straight / engine PUT", target: nil)
        ratio(results[3], over: results[0], "small files: 2 nodes behind nginx / engine PUT", target: nil)
    }

    // MARK: Downloads and ranges

    /// The name under which the big file is kept for the downloads (stored once through
    /// the two-node front, so that either node serves what the other stored).
    private func storeBigFile() -> String? {
        let name = "download.bin"
        do {
            _ = try uploadBig(to: setup.two.url, extra: setup.two.frontArguments, name: name)
            let key = "engine/download.bin"
            let put = try curlFigures(engine.signing + ["-s", "-o", "/dev/null", "-w", "%{http_code}", "-T", fixture.bigPath,
                                                        engineURL(setup.two.bucket, key)], what: "engine PUT")
            guard put.first == "200" else { throw BenchFailure("the engine answered \(put)") }
            return name
        } catch {
            print("\n  Downloads and ranges: FAILED to store the file: \(error)")
            return nil
        }
    }

    private func downloads(_ stored: String?) {
        guard let stored else { return }
        let two = setup.two
        let megabytes = Double(fixture.bigSize) / 1e6
        func get(_ arguments: [String]) throws -> Double {
            let figures = try curlFigures(["-s", "-o", "/dev/null", "-w", "%{http_code} %{size_download} %{time_total}"] + arguments, what: "GET")
            guard figures.count == 3, figures[0] == "200", Int(figures[1]) == fixture.bigSize, let time = Double(figures[2]), time > 0 else {
                throw BenchFailure("GET answered \(figures)")
            }
            return megabytes / time
        }
        let subjects = [
            Subject(label: "engine: GET", nodePIDs: []) { _ in try get(engine.signing + [engineURL(two.bucket, "engine/download.bin")]) },
            Subject(label: "node, straight (HTTP/1.1)", nodePIDs: [two.nodePIDs[0]]) { _ in try get([two.nodes[0] + "/uploads/" + stored]) },
            Subject(label: "2 nodes behind nginx (TLS, HTTP/2)", nodePIDs: two.nodePIDs) { _ in try get(two.frontArguments + [two.url + "/uploads/" + stored]) },
        ]
        print("""

              Download: GET of the \(formatBytes(fixture.bigSize)) file with curl -s -o /dev/null; MB/s
            """)
        let results = measure(subjects, tag: "download")
        render(subjects, results, unit: "MB/s", cpuLabel: "node CPU s")
        ratio(results[1], over: results[0], "download: node straight / engine GET", target: nil)
        ratio(results[2], over: results[0], "download: behind nginx / engine GET", target: nil)
    }

    private func ranges(_ stored: String?) {
        guard let stored else { return }
        let two = setup.two
        let length = ServerFixture.rangeLength
        /// One curl for all the ranges (`next` between them, one kept-alive connection); the
        /// p99 of their times in milliseconds, and their p50 beside it.
        func rangeTimes(_ url: String, extraLines: String, tag: String) throws -> (p50: Double, p99: Double) {
            let file = fixture.folder + "/object-store-ranges-\(tag).curlrc"
            var text = ""
            for (index, first) in fixture.rangeOffsets.enumerated() {
                if index > 0 { text += "next\n" }
                text += "url = \"\(url)\"\nrange = \"\(first)-\(first + length - 1)\"\noutput = \"/dev/null\"\nsilent\n"
                    + "write-out = \"%{http_code} %{size_download} %{time_total}\\n\"\n"
                text += extraLines
            }
            try text.write(toFile: file, atomically: true, encoding: .utf8)
            let figures = try curlFigures(["-K", file], what: "ranges")
            guard figures.count == 3 * fixture.rangeOffsets.count else { throw BenchFailure("\(figures.count / 3) answers of \(fixture.rangeOffsets.count)") }
            var times: [Double] = []
            for index in stride(from: 0, to: figures.count, by: 3) {
                guard figures[index] == "206", Int(figures[index + 1]) == length, let time = Double(figures[index + 2]) else {
                    throw BenchFailure("a range answered \(figures[index]) with \(figures[index + 1]) bytes")
                }
                times.append(time * 1_000)
            }
            times.sort()
            let percentile = { (fraction: Double) in times[max(0, Int((fraction * Double(times.count)).rounded(.up)) - 1)] }
            return (percentile(0.5), percentile(0.99))
        }
        var medians: [String: Samples] = [:]
        func subject(_ label: String, _ pids: [Int32], _ url: String, _ extraLines: String, _ tag: String) -> Subject {
            Subject(label: label, nodePIDs: pids) { run in
                let times = try rangeTimes(url, extraLines: extraLines, tag: tag)
                if run > 0 { medians[label, default: Samples()].append(times.p50) }
                return times.p99
            }
        }
        let subjects = [
            subject("engine: ranged GET", [], engineURL(two.bucket, "engine/download.bin"), engine.signingLines, "engine"),
            subject("node, straight (HTTP/1.1)", [two.nodePIDs[0]], two.nodes[0] + "/uploads/" + stored, "", "straight"),
            subject("2 nodes behind nginx (TLS, HTTP/2)", two.nodePIDs, two.url + "/uploads/" + stored, two.frontLines, "front"),
            subject("engine behind the same nginx", [], engineURL(two.bucket, "engine/download.bin", through: two),
                    engine.signingLines + two.frontLines, "engine-front"),
        ]
        print("""

              Ranges: \(fixture.rangeOffsets.count) GETs of 1 MiB at random offsets of the \(formatBytes(fixture.bigSize)) file (the same \
            offsets for all), one curl, one kept-alive connection; p99 of each run's times in ms (lower is better; p50 in the notes)
            """)
        let results = measure(subjects, tag: "ranges")
        render(subjects, results, unit: "p99 ms", cpuLabel: "node CPU s")
        for subject in subjects {
            if let p50 = medians[subject.label] { print("    p50 ms, \(subject.label): \(p50.formatted(decimals: 1))") }
        }
        // Lower is better: the target is the node's p99 at most twice the engine's.
        for index in [1, 2] {
            let node = results[index].figure.median, direct = results[0].figure.median
            guard (node / direct).isFinite else { continue }
            context.record(RatioRecord(section: section, name: "Range p99: \(subjects[index].label) / engine", ratio: node / direct,
                                       target: "≤ 2 (lower is better)", passes: node / direct <= 2))
        }
        // What the front itself costs, and the nodes beside the engine behind the same front.
        ratio(results[3], over: results[0], "Range p99: engine behind nginx / engine (what the front costs)", target: nil)
        ratio(results[2], over: results[3], "Range p99: 2 nodes behind nginx / engine behind the same nginx", target: nil)
    }

    // MARK: Tables and ratios

    private func render(_ subjects: [Subject], _ results: [Result], unit: String, cpuLabel: String) {
        var table = Table([("", .left), (unit, .right), ("peak RSS MiB", .right), (cpuLabel, .right)])
        for (subject, result) in zip(subjects, results) {
            if let failure = result.failure {
                table.append([subject.label, "FAILED", "", ""])
                print("    \(subject.label): FAILED: \(failure)")
                continue
            }
            table.append([subject.label, result.figure.formatted(decimals: unit == "p99 ms" ? 1 : 0),
                          subject.nodePIDs.isEmpty ? "—" : result.peakRSS.formatted(decimals: 1),
                          subject.nodePIDs.isEmpty ? "—" : result.cpu.formatted(decimals: 2)])
            context.record(FigureRecord(section: section, subject: subject.label, metric: unit, unit: unit, samples: result.figure))
        }
        print(table.render())
    }

    private func ratio(_ numerator: Result, over denominator: Result, _ name: String, target: Double?) {
        let value = numerator.figure.median / denominator.figure.median
        guard value.isFinite else { return }
        context.record(RatioRecord(section: section, name: name, ratio: value, target: target.map { "≥ \(format($0, decimals: 1))" },
                                   passes: target.map { value >= $0 }))
    }
}
