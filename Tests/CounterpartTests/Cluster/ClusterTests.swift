import Foundation
import Testing

/// The nodes and front that `scripts/cluster up` started: `COUNTERPART_CLUSTER_ENV` names its
/// cluster.env (`make test-s3` starts a cluster of three nodes on Ceph RGW behind nginx).
struct Cluster: Sendable {
    /// The front: HTTPS with HTTP/2, round robin over the nodes.
    let url: String
    /// The front's certificate, to trust.
    let certificate: String
    /// Each node's own address, to send one request of an upload to a chosen node.
    let nodes: [String]
    let folder: String

    static let skipReason: Comment = "COUNTERPART_CLUSTER_ENV is not set: `make test-s3` starts Ceph RGW and three nodes behind nginx"

    static let current: Cluster? = {
        guard let path = ProcessInfo.processInfo.environment["COUNTERPART_CLUSTER_ENV"], !path.isEmpty,
              let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        var values: [String: String] = [:]
        for line in text.split(separator: "\n") {
            guard let equals = line.firstIndex(of: "=") else { continue }
            values[String(line[..<equals])] = String(line[line.index(after: equals)...]).trimmingCharacters(in: CharacterSet(charactersIn: "\""))
        }
        guard let url = values["CLUSTER_URL"], let certificate = values["CLUSTER_CA"], let nodes = values["CLUSTER_NODES"] else { return nil }
        return Cluster(url: url, certificate: certificate, nodes: nodes.split(separator: " ").map(String.init),
                       folder: URL(fileURLWithPath: path).deletingLastPathComponent().path)
    }()

    /// curl through the front, over HTTP/2.
    func front(_ arguments: [String]) throws -> CurlResult {
        try curl(["--http2", "--cacert", certificate] + arguments)
    }

    /// The process of node `index` (0-based) now: the newest that `scripts/cluster` started.
    func pid(ofNode index: Int) -> Int32? {
        let lines = (try? String(contentsOfFile: folder + "/nodes", encoding: .utf8))?.split(separator: "\n") ?? []
        return lines.last { $0.split(separator: " ").first == Substring(String(index + 1)) }
            .flatMap { $0.split(separator: " ").last.flatMap { Int32($0) } }
    }

    /// Starts node `index` (0-based) again, after a kill.
    func restart(node index: Int) throws {
        let result = try runCommand(repositoryRoot.appendingPathComponent("scripts/cluster").path, ["restart-node", folder, String(index + 1)])
        try #require(result.status == 0, "\(result.output)")
    }
}

/// Several nodes on one object store behind a load balancer (round robin, no stickiness):
/// any node takes any request of an upload, and clients see one server.
@Suite("Several nodes behind one address", .serialized, .enabled(if: Cluster.current != nil, Cluster.skipReason))
struct ClusterTests {
    let cluster = Cluster.current!

    @Test func curlUploadsOverHTTP2AndEveryNodeServesTheSameFileAndETag() throws {
        let data = testBytes(count: 12_000_000, seed: 41)
        let path = try temporaryFile("cluster-form.bin", data)
        let upload = try cluster.front(["-w", "%{http_version}", "-F", "note=x", "-F", "f=@\(path)", cluster.url + "/upload"])
        #expect(upload.status == 200, "\(upload.text)")
        let file = try #require((try upload.json()["files"] as? [[String: Any]])?.first)
        #expect(file["sha256"] as? String == (try sha256(data)))
        let url = try #require(file["url"] as? String)
        var tags: Set<String> = []
        for node in cluster.nodes {
            let got = try curl([node + url])
            #expect(got.status == 200 && got.body == data, "\(node)")
            tags.insert(got.header("ETag") ?? "")
        }
        #expect(tags.count == 1 && tags.first?.isEmpty == false, "ETags: \(tags)")
        // Through the front, a conditional request answered by whichever node: 304.
        let again = try cluster.front(["-H", "If-None-Match: \(tags.first ?? "")", cluster.url + url])
        #expect(again.status == 304)
    }

    @Test func curlResumesADownloadAndARangeComesFromTheStore() throws {
        let data = testBytes(count: 9_000_000, seed: 42)
        let url = try stored(data, as: "cluster-resume.bin")
        let folder = try makeTemporaryFolder("cluster-download")
        defer { try? FileManager.default.removeItem(at: folder) }
        let target = folder.appendingPathComponent("partial.bin")
        try data.prefix(3_000_000).write(to: target)
        let resumed = try runCommand("/usr/bin/curl", ["-sS", "--http2", "--cacert", cluster.certificate, "-C", "-", "-o", target.path, cluster.url + url])
        #expect(resumed.status == 0, "\(resumed.output)")
        #expect(try Data(contentsOf: target) == data)
        let range = try cluster.front(["-r", "5000000-5000099", cluster.url + url])
        #expect(range.status == 206 && range.body == data.subdata(in: 5_000_000..<5_000_100))
        let multi = try cluster.front(["-r", "0-9,8999990-", cluster.url + url])
        #expect(multi.status == 206 && multi.header("Content-Type")?.hasPrefix("multipart/byteranges") == true)
    }

    @Test func aria2cDownloadsInSegmentsThroughTheFront() throws {
        let data = testBytes(count: 16_000_000, seed: 43)
        let url = try stored(data, as: "cluster-aria.bin")
        let folder = try makeTemporaryFolder("cluster-aria")
        defer { try? FileManager.default.removeItem(at: folder) }
        let result = try runCommand("/usr/bin/aria2c", ["--ca-certificate=\(cluster.certificate)", "-x", "4", "-s", "4", "-k", "1M",
                                                        "--allow-overwrite=true", "-d", folder.path, "-o", "aria.bin", cluster.url + url])
        #expect(result.status == 0, "\(result.output)")
        #expect(try Data(contentsOf: folder.appendingPathComponent("aria.bin")) == data)
    }

    @Test func aTusUploadCreatedOnOneNodeIsAppendedOnAnotherAndCompletedOnTheFirst() throws {
        let data = testBytes(count: 11_000_000, seed: 44)
        let (a, b) = (cluster.nodes[0], cluster.nodes[1 % cluster.nodes.count])
        let created = try tus(["-X", "POST", "-H", "Upload-Length: \(data.count)", "-H", "Upload-Metadata: filename \(Data("cross.bin".utf8).base64EncodedString())", a + "/files"])
        #expect(created.status == 201)
        let location = try #require(created.header("Location"))
        let first = try tusPatch(b + location, offset: 0, data.prefix(6_000_000))
        #expect(first.status == 204 && first.header("Upload-Offset") == "6000000", "\(first.status) \(first.text)")
        #expect(try tus(["--head", a + location]).header("Upload-Offset") == "6000000")
        let last = try tusPatch(a + location, offset: 6_000_000, data.dropFirst(6_000_000))
        #expect(last.status == 204 && last.header("Upload-Offset") == "\(data.count)", "\(last.status) \(last.text)")
        #expect(try cluster.front([cluster.url + "/uploads/cross.bin"]).body == data)
    }

    @Test func twoNodesRacingToAppendToOneUploadOneWinsTheOtherGets423() throws {
        let data = testBytes(count: 600_000, seed: 45)
        let (a, b) = (cluster.nodes[0], cluster.nodes[1 % cluster.nodes.count])
        let created = try tus(["-X", "POST", "-H", "Upload-Length: \(data.count)", a + "/files"])
        let location = try #require(created.header("Location"))
        // The first append goes on for about 3 s (200 kB/s), bytes flowing all along: it is
        // not silent, so the second, on another node, may not take it over.
        let slow = try slowAppend(data, named: "race.bin", at: "200k", to: a + location)
        Thread.sleep(forTimeInterval: 1)
        let second = try tusPatch(b + location, offset: 0, data)
        #expect(second.status == 423, "\(second.status) \(second.text)")
        let first = try #require(slow.value)
        #expect(first.status == 204 && first.header("Upload-Offset") == "\(data.count)", "\(first.status) \(first.text)")
    }

    @Test func aNodeKilledMidAppendIsTakenOverAndTheUploadResumesExactToTheByte() throws {
        guard cluster.nodes.count >= 2 else { return }
        let data = testBytes(count: 40_000_000, seed: 46)
        let (a, b) = (cluster.nodes[0], cluster.nodes[1])
        // A name of its own: the cluster's store outlives a run of the suite.
        let name = "killed-node-\(UUID().uuidString.prefix(8)).bin"
        let created = try tus(["-X", "POST", "-H", "Upload-Length: \(data.count)",
                               "-H", "Upload-Metadata: filename \(Data(name.utf8).base64EncodedString())", a + "/files"])
        let location = try #require(created.header("Location"))
        let append = try slowAppend(data, named: "kill.bin", at: "4M", to: a + location)
        // Past the first save (every 16 MiB), well before the end.
        Thread.sleep(forTimeInterval: 5.5)
        let node = try #require(cluster.pid(ofNode: 0))
        #expect(kill(node, SIGKILL) == 0)
        _ = append.value
        defer { try? cluster.restart(node: 0) }
        // On another node: the offset the dead node made durable (a multiple of its save
        // interval), then the rest from there, once its lease has gone quiet.
        let offset = try #require(UInt64(try tus(["--head", b + location]).header("Upload-Offset") ?? ""))
        #expect(offset < UInt64(data.count))
        var last = try tusPatch(b + location, offset: Int(offset), data.dropFirst(Int(offset)))
        let deadline = Date().addingTimeInterval(10)
        while last.status == 423, Date() < deadline {
            Thread.sleep(forTimeInterval: 0.5)
            last = try tusPatch(b + location, offset: Int(offset), data.dropFirst(Int(offset)))
        }
        #expect(last.status == 204 && last.header("Upload-Offset") == "\(data.count)", "\(last.status) \(last.text)")
        let stored = try cluster.front([cluster.url + "/uploads/" + name])
        let firstDifference = zip(stored.body, data).enumerated().first { $0.element.0 != $0.element.1 }?.offset
        #expect(try sha256(stored.body) == (try sha256(data)),
                "resumed from \(offset): \(stored.body.count) bytes stored, the first wrong at \(firstDifference.map(String.init) ?? "none")")
    }

    @Test func tuspyCutAndResumedAcrossNodes() throws {
        let data = testBytes(count: 3_000_000, seed: 47)
        let path = try temporaryFile("cluster-tuspy.bin", data)
        let environment = ["REQUESTS_CA_BUNDLE=\(cluster.certificate)"]
        // Every request is cut after 400,000 bytes; round robin sends each to another node.
        let first = try runCommand("/usr/bin/env", environment + [buildPython, "-c", tuspyUpload, cluster.url + "/files", path, "1000000",
                                                                  "Counterpart-Fault=cut=400000"])
        #expect(first.output.hasPrefix("FAILED \(cluster.url)/files/"), "\(first.output)")
        let location = String(first.output.split(separator: " ")[1])
        let resumed = try runCommand("/usr/bin/env", environment + [buildPython, "-c", tuspyUpload, cluster.url + "/files", path, "1000000",
                                                                    "resume=\(location)"])
        #expect(!resumed.output.hasPrefix("FAILED"), "\(resumed.output)")
        #expect(try cluster.front([cluster.url + "/uploads/cluster-tuspy.bin"]).body == data)
    }

    @Test func anIETFUploadStartedOnOneNodeIsResumedOnAnother() throws {
        let content = Array(testBytes(count: 2_000_000, seed: 48))
        let boundary = "ClusterB"
        let form = Array("--\(boundary)\r\nContent-Disposition: form-data; name=\"f\"; filename=\"ietf-cluster.bin\"\r\n\r\n".utf8) + content
            + Array("\r\n--\(boundary)--\r\n".utf8)
        let (a, b) = (cluster.nodes[0], cluster.nodes[1 % cluster.nodes.count])
        let firstPart = try temporaryFile("ietf-first", Data(form.prefix(700_000)))
        let started = try curl(["-H", "Upload-Draft-Interop-Version: 6", "-H", "Upload-Complete: ?0",
                                "-H", "Content-Type: multipart/form-data; boundary=\(boundary)", "--data-binary", "@\(firstPart)", a + "/upload"])
        #expect(started.status == 201, "\(started.status) \(started.text)")
        let location = try #require(started.header("Location").flatMap { URL(string: $0)?.path })
        let offset = try curl(["--head", "-H", "Upload-Draft-Interop-Version: 6", b + location])
        #expect(offset.header("Upload-Offset") == "700000")
        let rest = try temporaryFile("ietf-rest", Data(form.dropFirst(700_000)))
        let finished = try curl(["-X", "PATCH", "-H", "Upload-Draft-Interop-Version: 6", "-H", "Upload-Complete: ?1",
                                 "-H", "Upload-Offset: 700000", "-H", "Content-Type: application/partial-upload",
                                 "--data-binary", "@\(rest)", b + location])
        #expect(finished.status == 200, "\(finished.status) \(finished.text)")
        let file = try #require((try finished.json()["files"] as? [[String: Any]])?.first)
        #expect(file["sha256"] as? String == (try sha256(Data(content))))
        #expect(try cluster.front([cluster.url + (file["url"] as? String ?? "")]).body == Data(content))
    }

    @Test func urlSessionUploadsAndDownloadsThroughTheFront() throws {
        let data = testBytes(count: 3_000_000, seed: 49)
        _ = try stored(data, as: "cluster-urlsession.bin")
        // URLSession on Linux trusts only the system store: it runs in a mount namespace of
        // its own where the store also holds the front's certificate (as TLSTests does).
        let bundle = try temporaryFile("bundle.pem", try Data(contentsOf: URL(fileURLWithPath: "/etc/ssl/certs/ca-certificates.crt"))
            + Data(contentsOf: URL(fileURLWithPath: cluster.certificate)))
        let examples = try builtProduct("counterpart-examples").path
        let folder = try makeTemporaryFolder("cluster-urlsession")
        defer { try? FileManager.default.removeItem(at: folder) }
        let script = """
            mount --bind '\(bundle)' /etc/ssl/certs/ca-certificates.crt && cd '\(folder.path)' && \
            '\(examples)' '\(cluster.url)' info /uploads/cluster-urlsession.bin && \
            '\(examples)' '\(cluster.url)' resume /uploads/cluster-urlsession.bin
            """
        let result = try runCommand("/usr/bin/unshare", ["--user", "--map-root-user", "--mount", "/bin/sh", "-c", script])
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.contains("3000000"), "\(result.output)")
    }

    /// A node on an S3 store has libcurl loaded (a server on a local folder does not:
    /// CommandTests).
    @Test func aNodeOnTheObjectStoreHasLoadedLibcurl() throws {
        _ = try stored(testBytes(count: 1_000, seed: 51), as: "cluster-libcurl.bin")
        let pid = try #require(cluster.pid(ofNode: 0))
        let maps = try mappedFiles(of: pid)
        #expect(maps.contains("/libcurl.so"))  // libcurl.so.4 resolved: libcurl.so.4.8.0 on Debian 12
    }

    /// Stores `data` as `name` through the front; its URL.
    private func stored(_ data: Data, as name: String) throws -> String {
        let path = try temporaryFile(name, data)
        let upload = try cluster.front(["-F", "f=@\(path)", cluster.url + "/upload"])
        let url = try #require((try upload.json()["files"] as? [[String: Any]])?.first?["url"] as? String, "\(upload.text)")
        return url
    }

    /// A tus append of all of `data` from offset 0 at curl's `--limit-rate`, on a thread of
    /// its own; its answer (nil when curl could not run).
    private func slowAppend(_ data: Data, named name: String, at rate: String, to url: String) throws -> DetachedResult<CurlResult?> {
        let body = try temporaryFile(name, data)
        return Thread.detachedResult {
            try? tus(["-X", "PATCH", "-H", "Upload-Offset: 0", "-H", "Content-Type: application/offset+octet-stream",
                      "--limit-rate", rate, "--data-binary", "@\(body)", url])
        }
    }

    private func tusPatch(_ url: String, offset: Int, _ bytes: Data) throws -> CurlResult {
        let body = try temporaryFile("chunk", bytes)
        return try tus(["-X", "PATCH", "-H", "Upload-Offset: \(offset)", "-H", "Content-Type: application/offset+octet-stream",
                        "--data-binary", "@\(body)", url])
    }
}

extension Thread {
    /// Runs `body` on a thread of its own; its result, waited for when read.
    static func detachedResult<Result: Sendable>(_ body: @escaping @Sendable () -> Result) -> DetachedResult<Result> {
        let result = DetachedResult<Result>()
        Thread { result.set(body()) }.start()
        return result
    }
}

/// A value a thread of its own makes.
final class DetachedResult<Result: Sendable>: @unchecked Sendable {
    private let done = DispatchSemaphore(value: 0)
    private var stored: Result?

    fileprivate func set(_ value: Result) {
        stored = value
        done.signal()
    }

    var value: Result {
        done.wait()
        done.signal()
        return stored!
    }
}
