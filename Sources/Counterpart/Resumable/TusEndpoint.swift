import HTTPTransfer

/// tus 1.0.0 at `/files/` (https://tus.io/protocols/resumable-upload): the core protocol
/// and the extensions creation, creation-with-upload, creation-defer-length, termination,
/// checksum, expiration and concatenation, on the resumable store. A finished upload
/// becomes a file in the uploads folder, named from its `filename` metadata.
struct TusEndpoint: Sendable {
    let store: ResumableStore
    let uploads: UploadStore
    let maxSize: UInt64
    let maxDrainBytes: UInt64

    static let version = "1.0.0"
    static let extensions = "creation,creation-with-upload,creation-defer-length,termination,checksum,expiration,concatenation"
    static let checksumAlgorithms = MessageDigest.Algorithm.allCases.map(\.rawValue).joined(separator: ",")
    static let offsetContentType = "application/offset+octet-stream"

    func respond(to head: RequestHead, segments: [String]) -> RequestAction {
        // Clients that cannot send PATCH or DELETE send POST with the method they mean.
        let method = head.method == "POST" ? (head.header("X-HTTP-Method-Override") ?? "POST") : head.method
        if method == "OPTIONS" { return .respond(options()) }
        guard head.header("Tus-Resumable") == Self.version else {
            return .respond(answer(412, error: "this server speaks tus \(Self.version): send Tus-Resumable: \(Self.version)",
                                   headers: [HTTPField(name: "Tus-Version", value: Self.version)]))
        }
        switch (method, segments.count) {
        case ("POST", 0): return create(head)
        case ("HEAD", 1): return .respond(status(of: segments[0]))
        case ("PATCH", 1): return append(head, to: segments[0])
        case ("DELETE", 1): return .respond(terminate(segments[0]))
        case (_, 0): return .respond(notAllowed(method, ["POST", "OPTIONS"]))
        case (_, 1): return .respond(notAllowed(method, ["HEAD", "PATCH", "DELETE", "OPTIONS"]))
        default: return .respond(answer(404, error: "\(head.path) is not a tus upload"))
        }
    }

    private func options() -> Response {
        answer(204, headers: [
            HTTPField(name: "Tus-Version", value: Self.version),
            HTTPField(name: "Tus-Extension", value: Self.extensions),
            HTTPField(name: "Tus-Max-Size", value: String(maxSize)),
            HTTPField(name: "Tus-Checksum-Algorithm", value: Self.checksumAlgorithms),
        ])
    }

    // MARK: - Creation

    private func create(_ head: RequestHead) -> RequestAction {
        let metadata: [String: String?]
        switch Self.parseMetadata(head.header("Upload-Metadata")) {
        case .success(let parsed): metadata = parsed
        case .failure(let error): return .respond(answer(400, error: error.description))
        }
        if let concat = head.header("Upload-Concat"), concat.hasPrefix("final") {
            return .respond(createFinal(concat, metadata: metadata, head: head))
        }
        let isPartial = head.header("Upload-Concat") == "partial"
        if let concat = head.header("Upload-Concat"), !isPartial {
            return .respond(answer(400, error: "Upload-Concat must be \"partial\" or \"final;<upload URLs>\", not \"\(concat)\""))
        }
        let length: UInt64?
        switch (head.header("Upload-Length"), head.header("Upload-Defer-Length")) {
        case (let text?, nil):
            guard let value = decimalNumber(text) else {
                return .respond(answer(400, error: "Upload-Length must be a number of bytes"))
            }
            guard value <= maxSize else { return .respond(answer(413, error: "the upload is \(value) bytes; this server takes at most \(maxSize)")) }
            length = value
        case (nil, "1"):
            length = nil
        case (nil, nil):
            return .respond(answer(400, error: "a new upload needs Upload-Length (or Upload-Defer-Length: 1)"))
        default:
            return .respond(answer(400, error: "send either Upload-Length or Upload-Defer-Length: 1, not both (and Upload-Defer-Length can only be 1)"))
        }
        let upload: ResumableStore.Upload
        do {
            upload = try store.create(kind: .tus, length: length, metadata: metadata, concatenation: isPartial ? .partial : nil)
        } catch {
            return .respond(failureAnswer(error))
        }
        let location = HTTPField(name: "Location", value: url(of: upload.id))
        guard head.announcesBody else {
            return .respond(answer(201, headers: [location, expires(upload)]))
        }
        // creation-with-upload: the body is the first chunk.
        guard head.header("Content-Type") == Self.offsetContentType else {
            return .respond(answer(415, error: "a body sent with the creation must be \(Self.offsetContentType)"))
        }
        return appendAction(head, upload: upload, created: location)
    }

    private func createFinal(_ concat: String, metadata: [String: String?], head: RequestHead) -> Response {
        let references = concat.dropFirst("final;".count).split(separator: " ").map(String.init)
        guard concat.hasPrefix("final;"), !references.isEmpty else {
            return answer(400, error: "Upload-Concat: final needs the partial uploads' URLs, space-separated: final;/files/a /files/b")
        }
        var parts: [ResumableStore.Upload] = []
        for reference in references {
            guard let id = reference.split(separator: "/").last.map(String.init),
                  let part = try? store.upload(id), part.concatenation == .partial else {
                return answer(400, error: "\(reference) is not a partial upload of this server")
            }
            guard part.isComplete else { return answer(400, error: "the partial upload \(reference) is not complete") }
            parts.append(part)
        }
        var total: UInt64 = 0
        for part in parts {
            let (sum, overflow) = total.addingReportingOverflow(part.length ?? 0)
            guard !overflow, sum <= maxSize else { return answer(413, error: "the parts add up to more than \(maxSize) bytes, the most this server takes") }
            total = sum
        }
        do {
            var final = try store.create(kind: .tus, length: total, metadata: metadata, concatenation: .final(parts: parts.map(\.id)))
            let file = try store.openForAppending(final.id, at: 0)
            defer { close(file) }
            for part in parts {
                guard Self.copy(store.dataPath(part.id), to: file) else {
                    return answer(500, error: "the server could not join the parts: \(FileSystem.lastError())")
                }
            }
            final = try store.commitWrite(final.id, file: file, offset: total)
            final = try finish(final)
            return answer(201, headers: [HTTPField(name: "Location", value: url(of: final.id))])
        } catch let error as ResumableStore.Failure {
            return failureAnswer(error)
        } catch {
            return answer(500, error: "\(error)")
        }
    }

    // MARK: - Core

    private func status(of id: String) -> Response {
        let upload: ResumableStore.Upload
        do { upload = try store.upload(id) } catch { return failureAnswer(error) }
        var headers = [
            HTTPField(name: "Upload-Offset", value: String(upload.offset)),
            HTTPField(name: "Cache-Control", value: "no-store"),
        ]
        headers.append(upload.length.map { HTTPField(name: "Upload-Length", value: String($0)) }
            ?? HTTPField(name: "Upload-Defer-Length", value: "1"))
        if !upload.metadata.isEmpty {
            headers.append(HTTPField(name: "Upload-Metadata", value: upload.metadata.sorted { $0.key < $1.key }
                .map { entry in entry.value.map { "\(entry.key) \($0)" } ?? entry.key }.joined(separator: ",")))
        }
        switch upload.concatenation {
        case .partial: headers.append(HTTPField(name: "Upload-Concat", value: "partial"))
        case .final(let parts): headers.append(HTTPField(name: "Upload-Concat", value: "final;" + parts.map { "/files/\($0)" }.joined(separator: " ")))
        case nil: break
        }
        if upload.storedName == nil { headers.append(expires(upload)) }
        return answer(200, headers: headers)
    }

    private func append(_ head: RequestHead, to id: String) -> RequestAction {
        var upload: ResumableStore.Upload
        do { upload = try store.upload(id) } catch { return .respond(failureAnswer(error)) }
        guard head.header("Content-Type") == Self.offsetContentType else {
            return .respond(answer(415, error: "PATCH needs Content-Type: \(Self.offsetContentType)"))
        }
        if case .final = upload.concatenation {
            return .respond(answer(403, error: "a final upload is made of its parts: it cannot be appended to"))
        }
        guard let offsetText = head.header("Upload-Offset"), let offset = decimalNumber(offsetText) else {
            return .respond(answer(400, error: "PATCH needs Upload-Offset: the offset the bytes start at"))
        }
        guard offset == upload.offset else { return .respond(offsetMismatch(offset, upload)) }
        if let text = head.header("Upload-Length") {
            guard upload.length == nil || upload.length.map(String.init) == text else {
                return .respond(answer(400, error: "the upload's length is already \(upload.length ?? 0)"))
            }
            guard let length = decimalNumber(text), length >= upload.offset, length <= maxSize else {
                return .respond(answer(400, error: "Upload-Length must be a number of bytes from \(upload.offset) to \(maxSize)"))
            }
            do { upload = try store.update(id) { $0.length = length } } catch { return .respond(failureAnswer(error)) }
        }
        if upload.storedName != nil {
            // Complete, and its data is a file in the uploads folder now: nothing to append to.
            let offset = HTTPField(name: "Upload-Offset", value: String(upload.offset))
            guard head.announcesBody else { return .respond(answer(204, headers: [offset])) }
            return .respond(answer(413, error: "the upload is complete: it takes no more bytes", headers: [offset]))
        }
        return appendAction(head, upload: upload, created: nil)
    }

    /// Reads the request body into the upload (PATCH, or creation-with-upload).
    private func appendAction(_ head: RequestHead, upload: ResumableStore.Upload, created location: HTTPField?) -> RequestAction {
        var checksum: (MessageDigest, [UInt8])?
        if let text = head.header("Upload-Checksum") {
            let parts = text.split(separator: " ", maxSplits: 1).map(String.init)
            guard parts.count == 2, let algorithm = MessageDigest.Algorithm(rawValue: parts[0]) else {
                return .respond(answer(400, error: "Upload-Checksum must be \"<algorithm> <base64 digest>\" with an algorithm of \(Self.checksumAlgorithms)"))
            }
            guard let expected = Base64.decode(parts[1]), expected.count == algorithm.byteCount else {
                return .respond(answer(400, error: "the Upload-Checksum digest is not a base64 \(algorithm.rawValue) digest"))
            }
            checksum = (MessageDigest(algorithm), expected)
        }
        switch store.beginAppending(to: upload) {
        case .taken: break
        case .busy: return .respond(answer(423, error: "another request is writing to this upload"))
        case .changed(let current?): return .respond(offsetMismatch(upload.offset, current))
        case .changed(nil): return .respond(failureAnswer(.notFound))
        }
        let end = upload.length ?? maxSize
        let limit = end > upload.offset ? end - upload.offset : 0  // 0: stored under a larger --max-upload-bytes
        do {
            let receiver = try ResumableAppend(store: store, upload: upload, limit: limit, declared: head.contentLength, maxDrainBytes: maxDrainBytes,
                                               checksum: checksum) { outcome in conclude(outcome, created: location) }
            return .receiveBody(receiver)
        } catch {
            store.endWriting(upload.id)
            return .respond(failureAnswer(error))
        }
    }

    private func conclude(_ outcome: ResumableAppend.Outcome, created location: HTTPField?) -> (Response, [ReceivedPart]) {
        switch outcome {
        case .appended(var upload):
            var parts: [ReceivedPart] = []
            if upload.isComplete, upload.storedName == nil, upload.concatenation != .partial {
                do {
                    upload = try finish(upload)
                    parts = [ReceivedPart(name: "tus", filename: upload.metadata["filename"].flatMap { $0.flatMap(Self.text) },
                                          contentType: upload.metadata["filetype"].flatMap { $0.flatMap(Self.text) } ?? "application/octet-stream",
                                          size: upload.offset, sha256: upload.sha256)]
                } catch {
                    return (failureAnswer(error as? ResumableStore.Failure ?? .io("\(error)")), [])
                }
            }
            let headers = [HTTPField(name: "Upload-Offset", value: String(upload.offset))] + (location.map { [$0] } ?? [])
                + (upload.storedName == nil ? [expires(upload)] : [])
            return (answer(location == nil ? 204 : 201, headers: headers), parts)
        case .checksumMismatch(let upload):
            return (answer(460, error: "the chunk does not match its Upload-Checksum: it was discarded",
                           headers: [HTTPField(name: "Upload-Offset", value: String(upload.offset))]), [])
        case .tooLarge(let upload, let limit):
            return (answer(413, error: "the chunk is longer than the \(limit) bytes the upload has left: it was discarded",
                           headers: [HTTPField(name: "Upload-Offset", value: String(upload.offset))]), [])
        case .failed(let failure):
            return (failureAnswer(failure), [])
        }
    }

    /// 409: the request's `Upload-Offset` is not where `upload` is (now).
    private func offsetMismatch(_ offset: UInt64, _ upload: ResumableStore.Upload) -> Response {
        answer(409, error: "Upload-Offset is \(offset) but the upload is at \(upload.offset)",
               headers: [HTTPField(name: "Upload-Offset", value: String(upload.offset))])
    }

    private func terminate(_ id: String) -> Response {
        do { _ = try store.upload(id) } catch { return failureAnswer(error) }
        guard store.beginWriting(id) else { return answer(423, error: "another request is writing to this upload") }
        defer { store.endWriting(id) }
        store.remove(id)
        return answer(204)
    }

    /// A complete upload becomes a file in the uploads folder, with its SHA-256.
    private func finish(_ upload: ResumableStore.Upload) throws -> ResumableStore.Upload {
        let path = store.dataPath(upload.id)
        guard let digest = SHA256.hex(ofFile: path) else { throw ResumableStore.Failure.io("cannot read the upload back") }
        let name = SafeFilename.make(from: upload.metadata["filename"].flatMap { $0.flatMap(Self.text) } ?? "")
        let stored = try uploads.place(path, as: name)
        unlink(path)
        try uploads.syncFolder()
        return try store.update(upload.id) { $0.storedName = stored; $0.sha256 = digest }
    }

    // MARK: - Helpers

    /// Every tus answer carries `Tus-Resumable`.
    private func answer(_ status: Int, error: String? = nil, headers: [HTTPField] = []) -> Response {
        let all = [HTTPField(name: "Tus-Resumable", value: Self.version)] + headers
        if let error { return Responses.error(status, error, headers: all) }
        return Response(status: status, headers: all)
    }

    private func notAllowed(_ method: String, _ allowed: [String]) -> Response {
        answer(405, error: "\(method) is not allowed here; use \(allowed.joined(separator: ", "))",
               headers: [HTTPField(name: "Allow", value: allowed.joined(separator: ", "))])
    }

    private func failureAnswer(_ failure: ResumableStore.Failure) -> Response {
        switch failure {
        case .notFound: return answer(404, error: "no such upload")
        case .expired: return answer(410, error: "the upload has expired")
        case .locked: return answer(423, error: "another request is writing to this upload")
        case .tooMany(let limit): return answer(503, error: "the server already has \(limit) uploads in progress")
        case .insufficientStorage(let reason): return answer(507, error: reason)
        case .io(let reason): return answer(500, error: reason)
        }
    }

    private func expires(_ upload: ResumableStore.Upload) -> HTTPField {
        HTTPField(name: "Upload-Expires", value: HTTPDate(secondsSince1970: upload.expiresAt).description)
    }

    /// Where an upload is (relative: RFC 9110 §10.2.2 allows it, and tus clients resolve it).
    private func url(of id: String) -> String {
        "/files/\(id)"
    }

    private static func copy(_ path: String, to destination: Int32) -> Bool {
        let source = open(path, O_RDONLY | O_CLOEXEC)
        guard source >= 0 else { return false }
        defer { close(source) }
        var buffer = [UInt8](repeating: 0, count: 1 << 20)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(source, $0.baseAddress, $0.count) }
            if count < 0, errno == EINTR { continue }
            guard count >= 0 else { return false }
            if count == 0 { return true }
            let written = buffer.withUnsafeBytes { write(destination, $0.baseAddress, count) }
            guard written == count else { return false }
        }
    }

    /// A metadata value's text (values are base64 of UTF-8).
    static func text(_ base64: String) -> String? {
        Base64.decode(base64).flatMap { String(validating: $0, as: UTF8.self) }
    }

    /// `Upload-Metadata: key base64,key2 base64,flag` (keys unique, ASCII, no spaces or
    /// commas; values base64).
    static func parseMetadata(_ text: String?) -> Result<[String: String?], HeaderValueError> {
        guard let text, !trimmed(text).isEmpty else { return .success([:]) }
        var metadata: [String: String?] = [:]
        for pair in text.split(separator: ",", omittingEmptySubsequences: false) {
            let pieces = trimmed(pair).split(separator: " ", omittingEmptySubsequences: true).map(String.init)
            guard (1...2).contains(pieces.count), let key = pieces.first,
                  key.unicodeScalars.allSatisfy({ $0.isASCII && $0.value > 0x20 && $0 != "," }) else {
                return .failure(HeaderValueError("Upload-Metadata must be \"key base64value\" pairs separated by commas"))
            }
            if pieces.count == 2, Base64.decode(pieces[1]) == nil {
                return .failure(HeaderValueError("the Upload-Metadata value of \"\(key)\" is not base64"))
            }
            guard metadata[key] == nil else { return .failure(HeaderValueError("the Upload-Metadata key \"\(key)\" is given twice")) }
            metadata[key] = pieces.count == 2 ? pieces[1] : String?.none
        }
        return .success(metadata)
    }
}
