@testable import HTTPTransfer
import Testing

/// A head from "Name: value" lines.
func resumableHead(_ method: String, _ lines: [String]) -> ResumableRequestHead {
    ResumableRequestHead(method: method, fields: lines.map { line in
        let colon = line.firstIndex(of: ":")!
        return (String(line[..<colon]), String(line[line.index(after: colon)...]))
    })
}

private func version(_ number: Int) -> InteropVersion { InteropVersion(number)! }

@Suite("Resumable uploads (IETF drafts): requests told from their heads, every interop version")
struct ResumableUploadRequestTests {
    static let maxSize: UInt64 = 1_000

    func target(_ method: String, _ lines: [String]) throws(ResumableUploadRefusal) -> ResumableUploadRequest? {
        try ResumableUploadRequest(target: resumableHead(method, lines), maxSize: Self.maxSize)
    }

    func resource(_ method: String, _ lines: [String], recorded: Int = 8) throws(ResumableUploadRefusal) -> ResumableUploadRequest {
        try ResumableUploadRequest(resource: resumableHead(method, lines), recorded: version(recorded))
    }

    func refusal(_ body: () throws(ResumableUploadRefusal) -> Any?) -> ResumableUploadRefusal? {
        do { _ = try body() } catch { return error }
        return nil
    }

    /// The completeness field a client of `number` sends.
    func complete(_ number: Int, _ complete: Bool) -> String {
        number == 3 ? "Upload-Incomplete: \(complete ? "?0" : "?1")" : "Upload-Complete: \(complete ? "?1" : "?0")"
    }

    @Test(arguments: InteropVersion.supported)
    func aCreation(number: Int) throws {
        let v = version(number)
        #expect(try target("POST", ["Upload-Draft-Interop-Version: \(number)", complete(number, true), "Content-Length: 10"])
            == .create(v, .init(complete: true, length: 10)))
        #expect(try target("POST", ["Upload-Draft-Interop-Version: \(number)", complete(number, false), "Content-Length: 10"])
            == .create(v, .init(complete: false, length: nil)))
        #expect(try target("POST", ["Upload-Draft-Interop-Version: \(number)", complete(number, false), "Upload-Length: 50", "Content-Length: 10"])
            == .create(v, .init(complete: false, length: 50)))
        // Version 3 clients may leave out Upload-Incomplete; from 4 it is an ordinary upload.
        let bare = try target("POST", ["Upload-Draft-Interop-Version: \(number)", "Content-Length: 10"])
        #expect(bare == (number == 3 ? .create(v, .init(complete: true, length: 10)) : nil))
        #expect(try target("OPTIONS", ["Upload-Draft-Interop-Version: \(number)"]) == .options(v))
        #expect(try target("GET", ["Upload-Draft-Interop-Version: \(number)"]) == nil)
    }

    @Test(arguments: InteropVersion.supported)
    func refusedCreations(number: Int) throws {
        let base = ["Upload-Draft-Interop-Version: \(number)", complete(number, true)]
        let cases: [([String], ResumableUploadRefusal.Reason, Int)] = [
            (["Upload-Offset: 5", "Content-Length: 1"], .offsetInCreation, 400),
            (["Upload-Length: +5", "Content-Length: 1"], .invalidLength, 400),
            (["Upload-Length: 20", "Content-Length: 10"], .inconsistentLength(declared: 20, ends: 10), 400),
            (["Content-Length: 1001"], .tooLarge(length: 1001, limit: Self.maxSize), 413),
        ]
        for (lines, reason, status) in cases {
            let refused = refusal { () throws(ResumableUploadRefusal) in try target("POST", base + lines) }
            #expect(refused == ResumableUploadRefusal(reason, version: version(number)), "\(lines)")
            #expect(refused?.status == status)
        }
        #expect(try target("POST", base + ["Upload-Offset: 0", "Content-Length: 1"]) != nil)
    }

    /// A version this server does not speak: an ordinary upload on the target (no 104, as
    /// the draft wants), refused with 400 on an upload resource (issue: never act on it).
    @Test(arguments: ["-1", "2", "10", "abc", "", "4.0"])
    func anUnsupportedVersion(text: String) throws {
        #expect(try target("POST", ["Upload-Draft-Interop-Version: \(text)", "Upload-Complete: ?1"]) == nil)
        for method in ["HEAD", "GET", "PATCH", "DELETE", "OPTIONS"] {
            let refused = refusal { () throws(ResumableUploadRefusal) in try resource(method, ["Upload-Draft-Interop-Version: \(text)", "Upload-Offset: 0"]) }
            #expect(refused == ResumableUploadRefusal(.unsupportedVersion(text), version: nil), "\(method)")
            #expect(refused?.status == 400)
            #expect(refused?.message.contains("3, 4, 5, 6, 7, 8, 9") == true)
        }
    }

    @Test(arguments: InteropVersion.supported)
    func offsetAndCancellation(number: Int) throws {
        let v = version(number)
        let header = "Upload-Draft-Interop-Version: \(number)"
        #expect(try resource("HEAD", [header]) == .offset(v))
        #expect(try resource("DELETE", [header]) == .cancel(v))
        #expect(try resource("OPTIONS", [header]) == .options(v))
        #expect(try resource("HEAD", [], recorded: number) == .offset(v))
        // Another supported version than the upload's is answered in its own.
        #expect(try resource("HEAD", [header], recorded: number == 3 ? 9 : 3) == .offset(v))
        let get = refusal { () throws(ResumableUploadRefusal) in try resource("GET", [header]) }
        #expect(get == (number >= 9 ? nil : ResumableUploadRefusal(.methodNotAllowed("GET"), version: v)))
        // Drafts -01 to -05: an offset request or a cancellation with upload fields is 400.
        for field in ["Upload-Offset: 0", complete(number, false)] {
            for (method, request) in [("HEAD", "an offset request"), ("DELETE", "a cancellation")] {
                let refused = refusal { () throws(ResumableUploadRefusal) in try resource(method, [header, field]) }
                let name = String(field.prefix { $0 != ":" })
                #expect(refused == (number <= 6 ? ResumableUploadRefusal(.uploadFields([name], in: request), version: v) : nil), "\(method) \(field)")
                #expect(refused.map(\.status) == (number <= 6 ? 400 : nil))
            }
        }
    }

    @Test(arguments: InteropVersion.supported)
    func anAppend(number: Int) throws {
        let v = version(number)
        let lines = ["Upload-Draft-Interop-Version: \(number)", "Upload-Offset: 30", "Content-Length: 5"]
        let typed = lines + ["Content-Type: Application/Partial-Upload; x=y"]
        #expect(try resource("PATCH", typed) == .append(v, .init(offset: 30, complete: nil, contentLength: 5)))
        #expect(try resource("PATCH", typed + [complete(number, true)]) == .append(v, .init(offset: 30, complete: true, contentLength: 5)))
        #expect(try resource("PATCH", typed + [complete(number, false)]) == .append(v, .init(offset: 30, complete: false, contentLength: 5)))
        let untyped = refusal { () throws(ResumableUploadRefusal) in try resource("PATCH", lines + ["Content-Type: application/octet-stream"]) }
        #expect(untyped.map(\.status) == (number >= 6 ? 415 : nil))
        let noOffset = refusal { () throws(ResumableUploadRefusal) in try resource("PATCH", ["Upload-Draft-Interop-Version: \(number)", "Content-Type: application/partial-upload", "Upload-Offset: -1"]) }
        #expect(noOffset == ResumableUploadRefusal(.missingOffset, version: v))
        let put = refusal { () throws(ResumableUploadRefusal) in try resource("PUT", lines) }
        #expect(put?.status == 405)
    }
}

@Suite("Resumable uploads (IETF drafts): appends decided against the upload, every interop version")
struct AppendDecisionTests {
    func decide(_ number: Int, offset: UInt64, complete: Bool? = nil, contentLength: UInt64?,
                upload: AppendDecision.Upload) -> AppendDecision {
        AppendDecision(.init(offset: offset, complete: complete, contentLength: contentLength), InteropVersion(number)!, to: upload, maxSize: 1_000)
    }

    @Test(arguments: InteropVersion.supported)
    func appendsToAnActiveUpload(number: Int) {
        let known = AppendDecision.Upload(offset: 100, length: 300, completed: false)
        let open = AppendDecision.Upload(offset: 100, length: nil, completed: false)
        #expect(decide(number, offset: 100, contentLength: 50, upload: known) == .proceed(complete: false, length: 300, limit: 200))
        #expect(decide(number, offset: 100, contentLength: 200, upload: known) == .proceed(complete: true, length: 300, limit: 200))
        #expect(decide(number, offset: 100, complete: true, contentLength: 50, upload: open) == .proceed(complete: true, length: 150, limit: 50))
        #expect(decide(number, offset: 100, complete: false, contentLength: nil, upload: open) == .proceed(complete: false, length: nil, limit: 900))
        #expect(decide(number, offset: 90, contentLength: 5, upload: known) == .mismatch(expected: 100))
        #expect(decide(number, offset: 100, contentLength: 201, upload: known) == .pastLength(length: 300, ends: 301))
        #expect(decide(number, offset: 100, complete: true, contentLength: 50, upload: known) == .inconsistentLength(length: 300, ends: 150))
        #expect(decide(number, offset: 100, contentLength: 901, upload: open) == .tooLarge(limit: 1_000))
        #expect(decide(number, offset: 100, contentLength: .max, upload: known) == .tooLarge(limit: 1_000))
    }

    @Test(arguments: InteropVersion.supported)
    func whatAnAppendPastTheLengthGets(number: Int) {
        let expected: InteropVersion.AppendPastLength = switch number {
        case ...6: .refused(status: 400)
        case 7: .refused(status: 413)
        default: .invalidates
        }
        #expect(InteropVersion(number)!.appendPastLength == expected)
    }

    @Test(arguments: InteropVersion.supported)
    func appendsToACompletedUpload(number: Int) {
        let done = AppendDecision.Upload(offset: 300, length: 300, completed: true)
        let empty = decide(number, offset: 300, complete: true, contentLength: 0, upload: done)
        let more = decide(number, offset: 300, complete: true, contentLength: 10, upload: done)
        let before = decide(number, offset: 200, complete: true, contentLength: 100, upload: done)
        switch number {
        case 9:
            // Only a valid request gets the final answer again.
            #expect(empty == .completed(.replay))
            #expect(more == .completed(.refused(problemType: "inconsistent-upload-length")))
            #expect(before == .completed(.refused(problemType: "inconsistent-upload-length")))
        case 8:
            #expect(empty == .completed(.gone))
            #expect(more == .completed(.refused(problemType: "inconsistent-upload-length")))
        default:
            #expect(empty == .completed(.refused(problemType: "completed-upload")))
            #expect(more == .completed(.refused(problemType: "completed-upload")))
        }
    }
}

@Suite("tus 1.0.0: requests told from their heads")
struct TusRequestTests {
    static let digests = ["sha1": 20, "sha256": 32, "md5": 16]

    func classify(_ method: String, _ segments: [String], _ lines: [String], tus: Bool = true) throws(TusRefusal) -> TusRequest {
        try TusRequest(resumableHead(method, (tus ? ["Tus-Resumable: 1.0.0"] : []) + lines), segments: segments, maxSize: 1_000,
                       digestLengths: Self.digests)
    }

    func refusal(_ method: String, _ segments: [String], _ lines: [String], tus: Bool = true) -> TusRefusal? {
        do { _ = try classify(method, segments, lines, tus: tus) } catch { return error }
        return nil
    }

    @Test func whatItAsks() throws {
        #expect(try classify("OPTIONS", [], [], tus: false) == .options)
        #expect(try classify("POST", [], ["Upload-Length: 11", "Upload-Metadata: filename aGVsbG8=,flag"])
            == .create(.init(length: 11, metadata: ["filename": "aGVsbG8=", "flag": String?.none], concatenation: nil, hasBody: false, checksum: nil)))
        #expect(try classify("POST", [], ["Upload-Defer-Length: 1", "Upload-Concat: partial"])
            == .create(.init(length: nil, metadata: [:], concatenation: .partial, hasBody: false, checksum: nil)))
        #expect(try classify("POST", [], ["Upload-Concat: final;/files/a /files/b"])
            == .create(.init(length: nil, metadata: [:], concatenation: .final(["/files/a", "/files/b"]), hasBody: false, checksum: nil)))
        #expect(try classify("POST", [], ["Upload-Length: 3", "Content-Length: 3", "Content-Type: application/offset+octet-stream",
                                          "Upload-Checksum: md5 AAAAAAAAAAAAAAAAAAAAAA=="])
            == .create(.init(length: 3, metadata: [:], concatenation: nil, hasBody: true, checksum: .init(algorithm: "md5", digest: Array(repeating: 0, count: 16)))))
        #expect(try classify("HEAD", ["x"], []) == .offset(id: "x"))
        #expect(try classify("PATCH", ["x"], ["Content-Type: application/offset+octet-stream", "Upload-Offset: 5", "Upload-Length: 9"])
            == .append(id: "x", .init(offset: 5, length: 9, checksum: nil)))
        #expect(try classify("POST", ["x"], ["X-HTTP-Method-Override: DELETE"]) == .cancel(id: "x"))
    }

    @Test(arguments: [
        ("POST", [], [String](), false, TusRefusal.versionMismatch, 412),
        ("POST", [], [], true, .missingLength, 400),
        ("POST", [], ["Upload-Length: 5", "Upload-Defer-Length: 1"], true, .ambiguousLength, 400),
        ("POST", [], ["Upload-Length: x"], true, .invalidLength(maxSize: 1_000), 400),
        ("POST", [], ["Upload-Length: 1001"], true, .tooLarge(1_001, limit: 1_000), 413),
        ("POST", [], ["Upload-Length: 5", "Upload-Concat: whole"], true, .invalidConcatenation("whole"), 400),
        ("POST", [], ["Upload-Concat: final"], true, .finalWithoutParts, 400),
        ("POST", [], ["Upload-Length: 5", "Content-Length: 5"], true, .notOffsetStream(creation: true), 415),
        ("PATCH", ["x"], ["Upload-Offset: 0"], true, .notOffsetStream(creation: false), 415),
        ("PATCH", ["x"], ["Content-Type: application/offset+octet-stream"], true, .missingOffset, 400),
        ("PATCH", ["x"], ["Content-Type: application/offset+octet-stream", "Upload-Offset: 0", "Upload-Checksum: crc32 AAAA"], true,
         .invalidChecksum(algorithms: ["md5", "sha1", "sha256"]), 400),
        ("PATCH", ["x"], ["Content-Type: application/offset+octet-stream", "Upload-Offset: 0", "Upload-Checksum: md5 AAAA"], true,
         .invalidDigest("md5"), 400),
        ("PUT", ["x"], [], true, .methodNotAllowed("PUT", allowed: ["HEAD", "PATCH", "DELETE", "OPTIONS"]), 405),
        ("GET", [], [], true, .methodNotAllowed("GET", allowed: ["POST", "OPTIONS"]), 405),
        ("HEAD", ["x", "y"], [], true, .notAnUpload, 404),
    ] as [(String, [String], [String], Bool, TusRefusal, Int)])
    func refusals(method: String, segments: [String], lines: [String], tus: Bool, expected: TusRefusal, status: Int) {
        let refused = refusal(method, segments, lines, tus: tus)
        #expect(refused == expected)
        #expect(refused?.status == status)
    }

    @Test(arguments: ["key aGk=,key aGk=", "key not-base64!", "a b c", ", key aGk="])
    func metadataThatIsRefused(metadata: String) {
        guard case .invalidMetadata? = refusal("POST", [], ["Upload-Length: 1", "Upload-Metadata: \(metadata)"]) else {
            Issue.record("\(metadata) was not refused")
            return
        }
    }
}
