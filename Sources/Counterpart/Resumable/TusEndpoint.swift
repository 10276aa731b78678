import HTTPTransfer

/// tus 1.0.0 at `/files/` (https://tus.io/protocols/resumable-upload): the core protocol
/// and the extensions creation, creation-with-upload, creation-defer-length, termination,
/// checksum, expiration and concatenation, on the resumable store. A finished upload
/// becomes a file in the uploads folder, named from its `filename` metadata.
struct TusEndpoint: Sendable {
    let store: ResumableStore
    let uploads: any UploadStorage
    let maxSize: UInt64
    let maxDrainBytes: UInt64

    static let extensions = "creation,creation-with-upload,creation-defer-length,termination,checksum,expiration,concatenation"
    static let checksumAlgorithms = MessageDigest.Algorithm.allCases.map(\.rawValue).joined(separator: ",")
    static let digestLengths = Dictionary(uniqueKeysWithValues: MessageDigest.Algorithm.allCases.map { ($0.rawValue, $0.byteCount) })

    func respond(to head: RequestHead, segments: [String]) -> RequestAction {
        let request: TusRequest
        do {
            request = try TusRequest(head.resumable, segments: segments, maxSize: maxSize, digestLengths: Self.digestLengths)
        } catch {
            return .respond(refusal(error))
        }
        do throws(ResumableStore.Failure) {
            switch request {
            case .options: return .respond(options())
            case .create(let creation): return try create(creation, head)
            case .offset(let id):
                if ResumableSession.takesOver(head) { store.locker.takeOverIfSilent(id) }
                return .respond(status(of: try store.upload(id)))
            case .append(let id, let append): return self.append(append, to: try store.upload(id), head)
            case .cancel(let id): return .respond(session.cancel(try store.upload(id)))
            }
        } catch {
            return .respond(session.failure(error))
        }
    }

    private var session: ResumableSession { ResumableSession(store: store, dialect: .tus, maxDrainBytes: maxDrainBytes) }

    private func answer(_ status: Int, error: String? = nil, headers: [HTTPField] = []) -> Response {
        session.answer(status, error: error, headers: headers)
    }

    private func refusal(_ refusal: TusRefusal) -> Response {
        switch refusal {
        case .versionMismatch: answer(refusal.status, error: refusal.message, headers: [HTTPField(name: "Tus-Version", value: TusRequest.version)])
        case .methodNotAllowed(_, let allowed):
            answer(refusal.status, error: refusal.message, headers: [HTTPField(name: "Allow", value: allowed.joined(separator: ", "))])
        default: answer(refusal.status, error: refusal.message)
        }
    }

    private func options() -> Response {
        answer(204, headers: [
            HTTPField(name: "Tus-Version", value: TusRequest.version),
            HTTPField(name: "Tus-Extension", value: Self.extensions),
            HTTPField(name: "Tus-Max-Size", value: String(maxSize)),
            HTTPField(name: "Tus-Checksum-Algorithm", value: Self.checksumAlgorithms),
        ])
    }

    // MARK: - Creation

    private func create(_ creation: TusRequest.Creation, _ head: RequestHead) throws(ResumableStore.Failure) -> RequestAction {
        if case .final(let references) = creation.concatenation {
            return .respond(try createFinal(references, metadata: creation.metadata, owner: head.user))
        }
        let upload = try store.create(kind: .tus, length: creation.length, metadata: creation.metadata,
                                      concatenation: creation.concatenation == .partial ? .partial : nil, owner: head.user)
        let location = HTTPField(name: "Location", value: url(of: upload.id))
        guard creation.hasBody else {
            return .respond(answer(201, headers: [location, expires(upload)]))
        }
        // creation-with-upload: the body is the first chunk.
        return appendAction(head, upload: upload, checksum: creation.checksum, created: location)
    }

    private func createFinal(_ references: [String], metadata: [String: String?], owner: String?) throws(ResumableStore.Failure) -> Response {
        var parts: [ResumableStore.Upload] = []
        for reference in references {
            var part: ResumableStore.Upload?
            if let id = reference.split(separator: "/").last.map(String.init) {
                do {
                    part = try store.upload(id)
                } catch {
                    // A store that does not answer is not a reference that is wrong.
                    if case .storage = error { throw error }
                }
            }
            guard let part, part.concatenation == .partial else {
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
        var final = try store.create(kind: .tus, length: total, metadata: metadata, concatenation: .final(parts: parts.map(\.id)), owner: owner)
        let appender = try store.appender(final.id, at: 0)
        for part in parts { try store.readData(part.id) { bytes throws(StorageError) in try appender.write(bytes) } }
        final = try store.commitWrite(final.id, appender, offset: total)
        final = try finish(final)
        return answer(201, headers: [HTTPField(name: "Location", value: url(of: final.id))])
    }

    // MARK: - Core

    private func status(of upload: ResumableStore.Upload) -> Response {
        var headers = [ResumableSession.offsetField(upload), HTTPField(name: "Cache-Control", value: "no-store")]
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

    private func append(_ append: TusRequest.Append, to upload: ResumableStore.Upload, _ head: RequestHead) -> RequestAction {
        if case .final = upload.concatenation {
            return .respond(answer(403, error: "a final upload is made of its parts: it cannot be appended to"))
        }
        guard append.offset == upload.offset else { return .respond(session.offsetMismatch(provided: append.offset, upload)) }
        if let length = append.length {
            guard upload.length == nil || upload.length == length else {
                return .respond(answer(400, error: "the upload's length is already \(upload.length ?? 0)"))
            }
            guard length >= upload.offset, length <= maxSize else {
                return .respond(answer(400, error: "Upload-Length must be a number of bytes from \(upload.offset) to \(maxSize)"))
            }
        }
        if upload.storedName != nil {
            // Complete, and its data is a file in the uploads folder now: nothing to append to.
            let offset = ResumableSession.offsetField(upload)
            guard head.announcesBody else { return .respond(answer(204, headers: [offset])) }
            return .respond(answer(413, error: "the upload is complete: it takes no more bytes", headers: [offset]))
        }
        return appendAction(head, upload: upload, recording: append.length, checksum: append.checksum, created: nil)
    }

    /// Reads the request body into the upload (PATCH, or creation-with-upload).
    private func appendAction(_ head: RequestHead, upload: ResumableStore.Upload, recording length: UInt64? = nil,
                              checksum: TusRequest.Checksum?, created location: HTTPField?) -> RequestAction {
        let end = length ?? upload.length ?? maxSize
        let limit = end > upload.offset ? end - upload.offset : 0  // 0: stored under a larger --max-upload-bytes
        let digest = checksum.flatMap { checksum in MessageDigest.Algorithm(rawValue: checksum.algorithm).map { (MessageDigest($0), checksum.digest) } }
        return session.append(to: upload, from: head, recording: length, limit: limit, checksum: digest) { outcome throws(ResumableStore.Failure) in
            try conclude(outcome, created: location)
        }
    }

    private func conclude(_ outcome: ResumableAppend.Outcome, created location: HTTPField?) throws(ResumableStore.Failure) -> (Response, [ReceivedPart]) {
        switch outcome {
        case .appended(var upload):
            var parts: [ReceivedPart] = []
            if upload.isComplete, upload.storedName == nil, upload.concatenation != .partial {
                upload = try finish(upload)
                parts = [ReceivedPart(name: "tus", filename: upload.metadata["filename"].flatMap { $0.flatMap(Self.text) },
                                      contentType: upload.metadata["filetype"].flatMap { $0.flatMap(Self.text) } ?? "application/octet-stream",
                                      size: upload.offset, sha256: upload.sha256)]
            }
            let headers = [ResumableSession.offsetField(upload)] + (location.map { [$0] } ?? [])
                + (upload.storedName == nil ? [expires(upload)] : [])
            return (answer(location == nil ? 204 : 201, headers: headers), parts)
        case .checksumMismatch(let upload):
            return (answer(460, error: "the chunk does not match its Upload-Checksum: it was discarded",
                           headers: [ResumableSession.offsetField(upload)]), [])
        case .tooLarge(let upload, let limit):
            return (answer(413, error: "the chunk is longer than the \(limit) bytes the upload has left: it was discarded",
                           headers: [ResumableSession.offsetField(upload)]), [])
        }
    }

    /// A complete upload becomes a file in the uploads folder, with its SHA-256.
    private func finish(_ upload: ResumableStore.Upload) throws(ResumableStore.Failure) -> ResumableStore.Upload {
        // The digest is taken here, above the storage, so that every backend gives the same.
        let hasher = SHA256()
        try store.readData(upload.id) { bytes in hasher.update(bytes) }
        let digest = hasher.finish()
        let name = SafeFilename.make(from: upload.metadata["filename"].flatMap { $0.flatMap(Self.text) } ?? "")
        let stored = try store.moveData(upload.id, into: uploads, as: name)
        do { try uploads.syncNames() } catch { throw .storage(error) }
        return try store.update(upload.id) { $0.storedName = stored; $0.sha256 = digest }
    }

    // MARK: - Helpers

    private func expires(_ upload: ResumableStore.Upload) -> HTTPField {
        HTTPField(name: "Upload-Expires", value: HTTPDate(secondsSince1970: upload.expiresAt).description)
    }

    /// Where an upload is (relative: RFC 9110 §10.2.2 allows it, and tus clients resolve it).
    private func url(of id: String) -> String {
        "/files/\(id)"
    }

    /// A metadata value's text (values are base64 of UTF-8).
    static func text(_ base64: String) -> String? {
        Base64.decode(base64).flatMap { String(validating: $0, as: UTF8.self) }
    }
}
