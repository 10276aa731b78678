import HTTPTransfer

/// `POST /upload`: `multipart/form-data` parsed as it arrives, files streamed to the
/// upload store, the parts reported back as JSON (or HTML for a browser).
struct UploadEndpoint: Sendable {
    let store: any UploadStorage
    let limits: UploadLimits

    func respond(to head: RequestHead) -> RequestAction {
        switch admit(head) {
        case .answered(let response):
            return .respond(response)
        case .admitted(let boundary):
            return .receiveBody(receiver(for: head, boundary))
        }
    }

    private func receiver(for head: RequestHead, _ boundary: MultipartBoundary) -> UploadReceiver {
        UploadReceiver(store: store, limits: limits, boundary: boundary, bodyLength: head.contentLength,
                       answersHTML: AcceptHeader(head.header("Accept")).prefersHTML)
    }

    /// What the head alone decides: the answer (OPTIONS, a refusal), or the boundary to read the body with.
    enum Admission {
        case answered(Response)
        case admitted(MultipartBoundary)
    }

    /// Everything the head already condemns is answered before any body byte is stored
    /// (before `100 Continue` for a client that waits for it).
    func admit(_ head: RequestHead) -> Admission {
        switch head.method {
        case "POST":
            break
        case "OPTIONS":
            return .answered(Response(status: 204, headers: [HTTPField(name: "Allow", value: "POST, OPTIONS")]))
        default:
            return .answered(Response.methodNotAllowed(head.method, allowed: ["POST", "OPTIONS"], on: "/upload"))
        }
        let boundary: MultipartBoundary
        do {
            boundary = try MultipartBoundary(contentType: head.header("Content-Type"))
        } catch {
            return .answered(UploadFailure.response(for: error))
        }
        let declared = head.contentLength
        if let declared, declared > limits.maxBodyBytes {
            return .answered(UploadFailure.tooLarge(limits.maxBodyBytes, declared: declared))
        }
        do {
            try store.ensureRoom(for: declared ?? 0)
        } catch {
            return .answered(UploadFailure.response(for: error))
        }
        return .admitted(boundary)
    }

    /// The answer to `head` with the body that `readBody` hands over in pieces: an upload
    /// whose body came over several requests (a resumable upload), handled as if it had
    /// come in one.
    func process(_ head: RequestHead,
                 readBody: ((UnsafeRawBufferPointer) throws(StorageError) -> Void) throws(StorageError) -> Void) -> (Response, [ReceivedPart]) {
        let boundary: MultipartBoundary
        switch admit(head) {
        case .answered(let response): return (response, [])
        case .admitted(let admitted): boundary = admitted
        }
        let receiver = self.receiver(for: head, boundary)
        /// Why reading stopped early, when it did.
        struct TooLarge: Error {}
        do throws(StorageError) {
            var tooLarge = false
            try readBody { piece throws(StorageError) in
                guard !tooLarge else { return }
                if receiver.receive(piece) == .close { tooLarge = true }
            }
            if tooLarge {
                receiver.abandon()
                return (UploadFailure.tooLarge(limits.maxBodyBytes), receiver.receivedParts)
            }
        } catch {
            receiver.abandon()
            return (Response.error(error.status, "the server could not read the upload back: \(error.description)"), [])
        }
        let response = receiver.finish()
        return (response, receiver.receivedParts)
    }

}

/// Every way an upload fails, as the status and JSON error the contract gives it.
enum UploadFailure {
    static func response(for error: any Error) -> Response {
        switch error {
        case let error as MultipartBoundaryError:
            if case .notFormData = error { return Response.error(415, error.description) }
            return Response.error(400, error.description)
        case let error as MultipartError:
            return Response.error(error.isSizeLimit ? 413 : 400, error.description)
        case let error as StorageError:
            return Response.error(error.status, error.description)
        default:
            return Response.error(500, "the upload failed: \(error)")
        }
    }

    static func tooLarge(_ limit: UInt64, declared: UInt64? = nil) -> Response {
        let size = declared.map { "the body is \($0) bytes" } ?? "the body is larger than \(limit) bytes"
        return Response.error(413, "\(size); this server takes at most \(limit)")
    }
}

/// Limits on what one upload may cost.
struct UploadLimits: Sendable {
    var maxBodyBytes: UInt64
    var multipart: MultipartLimits
    /// After an error found mid-body, bytes still read (and discarded) so that the client
    /// gets its answer; a body that goes on longer is cut.
    var maxDrainBytes: UInt64
}

/// One upload in progress. Called from one connection thread at a time.
final class UploadReceiver: RequestBodyReceiver {
    private struct StoredFile {
        var part: FormPart
        var storedName: String
        var size: UInt64
        var sha256: String
    }

    private let store: any UploadStorage
    private let limits: UploadLimits
    private let answersHTML: Bool
    private let boundary: MultipartBoundary
    /// The body's length when the request gave it.
    private let bodyLength: UInt64?
    private var parser: FormDataParser
    private var received: UInt64 = 0
    /// The answer once something went wrong, and how much had been received then: from
    /// then on the body is only drained, up to `limits.maxDrainBytes` more.
    private var failure: Response?
    private var receivedAtFailure: UInt64 = 0
    private var currentPart: FormPart?
    private var sink: UploadSink?
    /// The file part before, whose last chunks are being hashed and written while the body
    /// goes on: stored under its name at the next part's end or the body's, so that the
    /// parts keep the body's order.
    private var finishing: (sink: UploadSink, part: FormPart)?
    private var fieldValue: [UInt8] = []
    private var fields: [(name: String, value: [UInt8])] = []
    private var files: [StoredFile] = []

    init(store: any UploadStorage, limits: UploadLimits, boundary: MultipartBoundary, bodyLength: UInt64?, answersHTML: Bool) {
        self.store = store
        self.limits = limits
        self.answersHTML = answersHTML
        self.boundary = boundary
        self.bodyLength = bodyLength
        parser = FormDataParser(boundary: boundary, limits: limits.multipart)
    }

    func receive(_ chunk: UnsafeRawBufferPointer) -> BodyIntake {
        received += UInt64(chunk.count)
        if received > limits.maxBodyBytes, failure == nil {
            fail(UploadFailure.tooLarge(limits.maxBodyBytes))
        }
        guard failure == nil else {
            return received - receivedAtFailure <= limits.maxDrainBytes ? .consumed : .close
        }
        do {
            try parser.feed(chunk) { event in try handle(event) }
        } catch {
            fail(UploadFailure.response(for: error))
        }
        return .consumed
    }

    /// Every complete part in the order it came, kept even when the upload then fails.
    private(set) var receivedParts: [ReceivedPart] = []

    func finish() -> Response {
        if failure == nil {
            do {
                try parser.finish()
                try storeFinishingFile()
                // The answer promises the files: their names must survive a crash too.
                if !files.isEmpty { try store.syncNames() }
            } catch {
                fail(UploadFailure.response(for: error))
            }
        }
        if let failure { return failure }
        return answersHTML ? htmlReceipt() : Response.json(200, jsonReceipt())
    }

    func abandon() {
        discardEverything()
    }

    private func handle(_ event: FormDataEvent) throws {
        switch event {
        case .partBegin(let part):
            currentPart = part
            if part.isFile {
                // Most clients send a file as the body's last part: its size is then known now.
                let likelySize = bodyLength.flatMap { boundary.sizeIfLastPart(startingAt: part.contentOffset, bodyLength: $0) }
                sink = try store.makeSink(named: SafeFilename.make(from: part.filename ?? ""), likelySize: likelySize)
            } else {
                fieldValue.removeAll(keepingCapacity: true)
            }
        case .partData(let bytes):
            if let sink { try sink.write(bytes) } else { fieldValue.append(contentsOf: bytes) }
        case .partEnd:
            guard let part = currentPart else { return }
            currentPart = nil
            try storeFinishingFile()
            if let sink {
                // Should writing fail, `self.sink` is still set and is discarded.
                try sink.startFinishing()
                finishing = (sink, part)
                self.sink = nil
            } else {
                fields.append((part.name, fieldValue))
                receivedParts.append(ReceivedPart(name: part.name, filename: nil, contentType: part.contentType,
                                                  size: UInt64(fieldValue.count), sha256: nil))
            }
        case .end:
            break
        }
    }

    /// Waits for the file part before to be written, and stores it under its name.
    private func storeFinishingFile() throws {
        guard let (sink, part) = finishing else { return }
        // Should hashing or storing fail, `finishing` is still set and is discarded.
        let digest = try sink.digest()
        let name = try sink.commit()
        finishing = nil
        files.append(StoredFile(part: part, storedName: name, size: sink.size, sha256: digest))
        receivedParts.append(Self.receipt(of: part, size: sink.size, sha256: digest))
    }

    /// What the journal keeps of a complete file part.
    private static func receipt(of part: FormPart, size: UInt64, sha256: String) -> ReceivedPart {
        ReceivedPart(name: part.name, filename: part.filename, contentType: part.contentType, size: size, sha256: sha256)
    }

    /// Records the first failure and removes everything this request stored.
    private func fail(_ response: Response) {
        guard failure == nil else { return }
        failure = response
        receivedAtFailure = received
        discardEverything()
    }

    private func discardEverything() {
        if let (sink, part) = finishing {
            finishing = nil
            // A complete part is recorded even when the upload then fails.
            if let digest = try? sink.digest() { receivedParts.append(Self.receipt(of: part, size: sink.size, sha256: digest)) }
            sink.discard()
        }
        sink?.discard()
        sink = nil
        for file in files { store.remove(file.storedName) }
        files.removeAll()
    }

    private func url(of file: StoredFile) -> String {
        "/uploads/" + PercentEncoding.encode(file.storedName)
    }

    private func jsonReceipt() -> JSON {
        .object([
            ("fields", .array(fields.map { field in
                let value: (String, JSON)
                if let text = String(validating: field.value, as: UTF8.self) {
                    value = ("value", .string(text))
                } else {
                    value = ("valueBase64", .string(Base64.encode(field.value)))
                }
                return .object([("name", .string(field.name)), value])
            })),
            ("files", .array(files.map { file in
                .object([
                    ("field", .string(file.part.name)),
                    ("filename", .string(file.part.filename ?? "")),
                    ("contentType", .string(file.part.contentType)),
                    ("size", .unsigned(file.size)),
                    ("sha256", .string(file.sha256)),
                    ("url", .string(url(of: file))),
                ])
            })),
        ])
    }

    private func htmlReceipt() -> Response {
        let escape = Response.escapeHTML
        var rows = ""
        for file in files {
            rows += "<tr><td>\(escape(file.part.name))</td><td><a href=\"\(escape(url(of: file)))\">\(escape(file.storedName))</a></td>"
                + "<td>\(escape(file.part.filename ?? ""))</td><td>\(escape(file.part.contentType))</td>"
                + "<td class=\"n\">\(file.size)</td><td><code>\(file.sha256)</code></td></tr>\n"
        }
        var fieldRows = ""
        for field in fields {
            let value = String(validating: field.value, as: UTF8.self) ?? "(\(field.value.count) bytes, not UTF-8)"
            fieldRows += "<tr><td>\(escape(field.name))</td><td>\(escape(value))</td></tr>\n"
        }
        return Response.html(200, """
            <!doctype html>
            <html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
            <title>Upload received</title>
            <style>body{font-family:system-ui,sans-serif;margin:2rem;color:#111}table{border-collapse:collapse;margin-bottom:1.5rem}
            td,th{padding:.3rem .8rem;text-align:left;vertical-align:top}.n{text-align:right}code{font-size:.8rem;word-break:break-all}</style>
            </head><body>
            <h1>Upload received</h1>
            <h2>Files (\(files.count))</h2>
            <table><thead><tr><th>Field</th><th>Stored as</th><th>Sent as</th><th>Type</th><th class="n">Bytes</th><th>SHA-256</th></tr></thead>
            <tbody>
            \(rows)</tbody></table>
            <h2>Fields (\(fields.count))</h2>
            <table><thead><tr><th>Name</th><th>Value</th></tr></thead>
            <tbody>
            \(fieldRows)</tbody></table>
            <p><a href="/">Upload more</a> · <a href="/uploads/">All uploads</a></p>
            </body></html>

            """)
    }
}
