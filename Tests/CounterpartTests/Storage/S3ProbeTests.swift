@testable import Counterpart
import Foundation
import Testing

/// What the S3 engine does where the storage design depends on it, with rough rates: run by
/// hand (`COUNTERPART_S3_PROBES=1` beside an engine), not by `make test-s3`. Prints figures.
@Suite("S3 engine probes", .enabled(if: S3TestEngine.isAvailable && ProcessInfo.processInfo.environment["COUNTERPART_S3_PROBES"] == "1",
                                    "set COUNTERPART_S3_PROBES=1 (and COUNTERPART_S3_ENV) to probe the engine"),
       .serialized)
struct S3ProbeTests {
    static let mebibyte = 1 << 20

    static func seconds(_ body: () throws -> Void) rethrows -> Double {
        let start = ContinuousClock.now
        try body()
        let elapsed = ContinuousClock.now - start
        return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
    }

    static func report(_ line: String) { print("probe: \(line)") }

    /// How much the engine holds: the RADOS objects in RGW's data pool (a copy that moved
    /// its data adds one per 4 MiB) and the OSD's resident memory (memstore keeps the data
    /// there). The cluster's ceph.conf and pids are beside its s3.env.
    static func engineUsage() throws -> String {
        let environmentFile = try #require(ProcessInfo.processInfo.environment["COUNTERPART_S3_ENV"])
        let folder = URL(fileURLWithPath: environmentFile).deletingLastPathComponent()
        let objects = try runCommand("/usr/bin/rados", ["-c", folder.appendingPathComponent("ceph.conf").path, "-p", "default.rgw.buckets.data", "ls"])
        let pids = try String(contentsOf: folder.appendingPathComponent("pids"), encoding: .utf8)
        let osd = pids.split(separator: "\n").first { $0.hasPrefix("osd ") }.map { String($0.dropFirst(4)) } ?? "?"
        let status = (try? String(contentsOfFile: "/proc/\(osd)/status", encoding: .utf8)) ?? ""
        let rss = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") }.map { $0.split(separator: " ").dropFirst().first.map(String.init) ?? "?" } ?? "?"
        return "\(objects.output.split(separator: "\n").count) RADOS objects in the data pool, OSD RSS \((Int(rss) ?? 0) / 1024) MiB"
    }

    static func tally(_ outcomes: [WriteOutcome]) -> String {
        var counts: [String: Int] = [:]
        for outcome in outcomes {
            switch outcome {
            case .won: counts["won", default: 0] += 1
            case .lost(let error): counts["\(error)", default: 0] += 1
            case .failed(let text): counts[text, default: 0] += 1
            }
        }
        return counts.sorted { $0.key < $1.key }.map { "\($0.value) × \($0.key)" }.joined(separator: ", ")
    }

    @Test func ifNoneMatchOnACopy() throws {
        let s3 = try S3TestEngine.client()
        try s3.putObject("source", bytes: Array("source".utf8))
        try s3.putObject("existing", bytes: Array("existing".utf8))
        let onto = WriteOutcome { try s3.copyObject(from: "source", to: "existing", condition: .ifNoneMatch) }
        Self.report("copy with If-None-Match: * onto an existing key: \(Self.tally([onto])), the key now holds \"\(String(decoding: try s3.getObject("existing") ?? [], as: UTF8.self))\"")
        for round in 0..<5 {
            let outcomes = onThreads(8) { _ in WriteOutcome { try s3.copyObject(from: "source", to: "raced-\(round)", condition: .ifNoneMatch) } }
            Self.report("round \(round): 8 racing copies with If-None-Match: * to one new key: \(Self.tally(outcomes))")
        }
        let stale = WriteOutcome { try s3.copyObject(from: "source", to: "existing", condition: .ifMatch("0123456789abcdef0123456789abcdef")) }
        Self.report("copy with If-Match: <another ETag> onto an existing key: \(Self.tally([stale]))")
    }

    @Test func racingIfMatchWriters() throws {
        let s3 = try S3TestEngine.client()
        for round in 0..<5 {
            let etag = try s3.putObject("state", bytes: Array("round \(round)".utf8))
            let outcomes = onThreads(8) { index in WriteOutcome { try s3.putObject("state", bytes: Array("writer \(index)".utf8), condition: .ifMatch(etag)) } }
            Self.report("round \(round): 8 racing If-Match PUTs: \(Self.tally(outcomes))")
        }
    }

    @Test func aCopyOfALargeMultipartObject() throws {
        let s3 = try S3TestEngine.client()
        let part = [UInt8](repeating: 0x5A, count: 16 * Self.mebibyte)
        let upload = try s3.createMultipartUpload("large")
        var parts: [(number: Int, etag: String)] = []
        let multipart = try Self.seconds {
            try part.withUnsafeBytes { bytes in
                for number in 1...16 { parts.append((number, try s3.uploadPart("large", uploadID: upload, number: number, bytes: bytes))) }
            }
            try s3.completeMultipartUpload("large", uploadID: upload, parts: parts)
        }
        Self.report(String(format: "256 MiB as a 16-part multipart upload: %.2f s", multipart))
        let whole = [UInt8](repeating: 0x5A, count: 256 * Self.mebibyte)
        let put = try Self.seconds { try s3.putObject("large-put", bytes: whole) }
        Self.report(String(format: "256 MiB in one PUT: %.2f s", put))
        Self.report("before the copies: \(try Self.engineUsage())")
        for round in 0..<3 {
            let copy = try Self.seconds { try s3.copyObject(from: "large", to: "large-copy-\(round)") }
            Self.report(String(format: "server-side copy of the 256 MiB multipart object: %.3f s", copy))
        }
        Self.report("after 3 copies of the multipart object: \(try Self.engineUsage())")
        let copyOfPut = try Self.seconds { try s3.copyObject(from: "large-put", to: "large-put-copy") }
        Self.report(String(format: "server-side copy of the 256 MiB single-PUT object: %.3f s", copyOfPut))
        #expect(try s3.headObject("large-copy-0")?.size == Int64(256 * Self.mebibyte))
        var read = 0
        try s3.getObject("large-copy-0", range: nil) { read += $0.count }
        #expect(read == 256 * Self.mebibyte)
        for key in ["large", "large-put", "large-copy-0", "large-copy-1", "large-copy-2", "large-put-copy"] { try s3.deleteObject(key) }
    }

    @Test func rates() throws {
        let s3 = try S3TestEngine.client()
        let large = [UInt8](repeating: 0xA5, count: 64 * Self.mebibyte)
        let putLarge = try Self.seconds { for index in 0..<8 { try s3.putObject("large-\(index)", bytes: large) } }
        Self.report(String(format: "PUT 8 × 64 MiB: %.2f s, %.0f MiB/s", putLarge, 512 / putLarge))
        var received = 0
        let getLarge = try Self.seconds { for index in 0..<8 { try s3.getObject("large-\(index)", range: nil) { received += $0.count } } }
        #expect(received == 8 * 64 * Self.mebibyte)
        Self.report(String(format: "GET 8 × 64 MiB: %.2f s, %.0f MiB/s", getLarge, 512 / getLarge))

        let small = [UInt8](repeating: 0x33, count: 4096)
        let before = s3.connectionsOpened
        let putSmall = try Self.seconds { for index in 0..<1000 { try s3.putObject("small/\(index)", bytes: small) } }
        Self.report(String(format: "PUT 1000 × 4 KiB: %.2f s, %.0f objects/s", putSmall, 1000 / putSmall))
        let getSmall = try Self.seconds { for index in 0..<1000 { _ = try s3.getObject("small/\(index)") } }
        Self.report(String(format: "GET 1000 × 4 KiB: %.2f s, %.0f objects/s", getSmall, 1000 / getSmall))
        let headSmall = try Self.seconds { for index in 0..<1000 { _ = try s3.headObject("small/\(index)") } }
        Self.report(String(format: "HEAD 1000 × 4 KiB: %.2f s, %.0f objects/s", headSmall, 1000 / headSmall))
        Self.report("connections opened for those 3000 calls: \(s3.connectionsOpened - before)")
        let deleteSmall = try Self.seconds { for index in 0..<1000 { try s3.deleteObject("small/\(index)") } }
        Self.report(String(format: "DELETE 1000: %.2f s, %.0f objects/s", deleteSmall, 1000 / deleteSmall))
        for index in 0..<8 { try s3.deleteObject("large-\(index)") }
    }
}
