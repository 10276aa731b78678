import HTTPTransfer
import Synchronization

/// An `Upload-Draft-Interop-Version` of "Resumable Uploads for HTTP"
/// (draft-ietf-httpbis-resumable-upload), with what changed from one to the next. iOS and
/// macOS 17 send 3, 18.0 sends 5, 18.1 sends 6, 26 sends 8; the drafts define 3 to 9.
struct InteropVersion: Equatable, Sendable {
    let number: Int

    static let supported = 3...9

    /// The version a request speaks, if this server speaks it.
    init?(_ head: RequestHead) {
        guard let text = head.header("Upload-Draft-Interop-Version"), let number = Int(trimmed(text)),
              Self.supported.contains(number) else { return nil }
        self.number = number
    }

    init(number: Int) { self.number = number }

    /// Version 3 says `Upload-Incomplete` (true: more to come); later ones `Upload-Complete`.
    func completeness(_ complete: Bool) -> HTTPField {
        number == 3 ? HTTPField(name: "Upload-Incomplete", value: complete ? "?0" : "?1")
            : HTTPField(name: "Upload-Complete", value: complete ? "?1" : "?0")
    }

    /// Whether the request says its content ends the upload; nil when it does not say.
    func requestSaysComplete(_ head: RequestHead) -> Bool? {
        let name = number == 3 ? "Upload-Incomplete" : "Upload-Complete"
        switch head.header(name).map({ String(trimmed($0)) }) {
        case "?1": return number != 3
        case "?0": return number == 3
        default: return nil
        }
    }

    var versionField: HTTPField { HTTPField(name: "Upload-Draft-Interop-Version", value: String(number)) }
    /// From 6 (draft -04): appends are `application/partial-upload`.
    var requiresPartialUploadType: Bool { number >= 6 }
    /// From 6: `Upload-Limit`, `Upload-Length` in offset responses, problem details.
    var hasLimits: Bool { number >= 6 }
    /// Up to 6, every answer while the upload is active carries `Upload-Offset`; appends
    /// are answered 201. From 7, `Upload-Complete` instead, and 204.
    var offsetInAnswers: Bool { number <= 6 }
    var appendStatus: Int { number <= 6 ? 201 : 204 }
    /// Version 6 calls the lifetime limit `expires`, later ones `max-age`.
    var lifetimeKey: String { number == 6 ? "expires" : "max-age" }
    /// Version 8 (drafts -10, -11) wants `Accept-Patch` in OPTIONS answers.
    var announcesAcceptPatch: Bool { number == 8 }
    /// Version 9 (draft -12) also retrieves the offset with GET.
    var allowsGetForOffset: Bool { number >= 9 }
}

/// "Resumable Uploads for HTTP" in front of `POST /upload`: a POST that asks for it (with
/// `Upload-Draft-Interop-Version` and `Upload-Complete`, or `Upload-Incomplete` in
/// version 3) becomes an upload resource at `/resumable/<id>`, announced with a
/// `104 (Upload Resumption Supported)` before its body is read; once all of its content
/// has come — in one request or through appends after interruptions — the assembled body
/// is handled by `POST /upload` as if it had come in one piece, and its answer is the
/// answer. This is how URLSession (iOS 17 and later) makes an app's own upload resumable.
struct ResumableUploads: Sendable {
    let store: ResumableStore
    let target: UploadEndpoint
    let maxSize: UInt64
    let maxDrainBytes: UInt64
    /// The scheme and authority of this server, for absolute `Location`s when a request
    /// has no `Host` (known once the server listens: its port may have been picked).
    let origin: ServerOrigin
    let isHTTPS: Bool

    static let pathPrefix = "resumable"
    static let partialUploadType = "application/partial-upload"
    static let problemBase = "https://iana.org/assignments/http-problem-types#"

    // MARK: - Creation: POST /upload

    /// The resumable creation for an upload request, or nil when it is an ordinary upload
    /// (no interop version, or one this server does not speak: then no 104 is sent, as the
    /// draft requires, and the upload goes on as a plain one).
    func creation(_ head: RequestHead) -> RequestAction? {
        guard head.method == "POST", let version = InteropVersion(head) else { return nil }
        // From version 4 a creation says `Upload-Complete`; version 3 clients may leave out
        // `Upload-Incomplete`, so there the interop version is enough.
        let declared = version.requestSaysComplete(head)
        if version.number > 3, declared == nil { return nil }
        let complete = declared ?? true
        if let offset = head.header("Upload-Offset"), trimmed(offset) != "0" {
            return .respond(answer(400, version, error: "an upload creation must not have Upload-Offset"))
        }
        // What the upload endpoint refuses on the head it refuses now, without a resource.
        if case .respond(let refusal) = target.respond(to: head) {
            return .respond(decorated(refusal, version, complete: true))
        }
        var length: UInt64?
        if let text = head.header("Upload-Length") {
            guard let value = decimalNumber(trimmed(text)) else { return .respond(answer(400, version, error: "Upload-Length must be a number of bytes")) }
            length = value
        }
        if complete, let contentLength = head.contentLength {
            if let length, length != contentLength {
                return .respond(problem(400, version, type: "inconsistent-upload-length",
                                        title: "Upload-Length \(length) and Content-Length \(contentLength) disagree"))
            }
            length = contentLength
        }
        if let length, length > maxSize {
            return .respond(answer(413, version, error: "the upload is \(length) bytes; this server takes at most \(maxSize)"))
        }
        let upload: ResumableStore.Upload
        do throws(ResumableStore.Failure) {
            upload = try store.create(kind: .ietf, length: length, requestHeaders: Self.targetHeaders(head),
                                      interopVersion: version.number)
        } catch {
            return .respond(failureAnswer(error, version))
        }
        _ = store.beginWriting(upload.id)
        let location = HTTPField(name: "Location", value: absoluteURL(of: upload.id, head))
        var interim = [version.versionField, location]
        if version.hasLimits { interim.append(limitField(upload, version)) }
        do throws(ResumableStore.Failure) {
            let receiver = try ResumableAppend(store: store, upload: upload, limit: (length ?? maxSize), declared: head.contentLength,
                                               maxDrainBytes: maxDrainBytes,
                                               checksum: nil) { outcome in
                conclude(outcome, version, complete: complete, location: location)
            }
            return .receiveBody(receiver, interim: [InformationalResponse(status: 104, reason: "Upload Resumption Supported", headers: interim)])
        } catch {
            store.endWriting(upload.id)
            store.remove(upload.id)
            return .respond(failureAnswer(error, version))
        }
    }

    /// `OPTIONS /upload` from a client that speaks a version: the limits, and for version
    /// 8 the `Accept-Patch` it wants.
    func optionsHeaders(_ head: RequestHead) -> [HTTPField] {
        guard let version = InteropVersion(head) else { return [] }
        var headers = [version.versionField]
        if version.hasLimits { headers.append(HTTPField(name: "Upload-Limit", value: limitValue(nil, version))) }
        if version.announcesAcceptPatch { headers.append(HTTPField(name: "Accept-Patch", value: Self.partialUploadType)) }
        return headers
    }

    // MARK: - The upload resource: /resumable/<id>

    func respond(to head: RequestHead, segments: [String]) -> RequestAction {
        guard segments.count == 1 else { return .respond(Responses.error(404, "\(head.path) is not an upload resource")) }
        let id = segments[0]
        let stored: ResumableStore.Upload
        do throws(ResumableStore.Failure) {
            stored = try store.upload(id)
            guard stored.kind == .ietf else { throw ResumableStore.Failure.notFound }
        } catch {
            return .respond(failureAnswer(error, InteropVersion(head) ?? InteropVersion(number: InteropVersion.supported.upperBound)))
        }
        let version = InteropVersion(head) ?? InteropVersion(number: stored.interopVersion ?? InteropVersion.supported.upperBound)
        switch head.method {
        case "HEAD":
            return .respond(offset(of: stored, version, head))
        case "GET" where version.allowsGetForOffset:
            return .respond(offset(of: stored, version, head))
        case "PATCH":
            return append(head, to: stored, version)
        case "DELETE":
            guard store.beginWriting(id) else {
                return .respond(answer(409, version, error: "another request is writing to this upload"))
            }
            defer { store.endWriting(id) }
            store.remove(id)
            return .respond(answer(204, version))
        case "OPTIONS":
            return .respond(answer(204, version, headers: [HTTPField(name: "Allow", value: "HEAD, PATCH, DELETE, OPTIONS")] + optionsHeaders(head)))
        default:
            return .respond(answer(405, version, error: "\(head.method) is not allowed on an upload resource; use HEAD, PATCH, DELETE or OPTIONS",
                                   headers: [HTTPField(name: "Allow", value: "HEAD, PATCH, DELETE, OPTIONS")]))
        }
    }

    private func offset(of upload: ResumableStore.Upload, _ version: InteropVersion, _ head: RequestHead) -> Response {
        if version.number <= 6, ["Upload-Offset", "Upload-Complete", "Upload-Incomplete", "Upload-Length"].contains(where: { head.header($0) != nil }) {
            return answer(400, version, error: "an offset request must not carry Upload-Offset, Upload-Complete or Upload-Length")
        }
        var headers = [HTTPField(name: "Upload-Offset", value: String(upload.offset)), version.completeness(upload.answer != nil),
                       HTTPField(name: "Cache-Control", value: "no-store")]
        if version.hasLimits {
            if let length = upload.length { headers.append(HTTPField(name: "Upload-Length", value: String(length))) }
            headers.append(limitField(upload, version))
        }
        return answer(204, version, headers: headers)
    }

    private func append(_ head: RequestHead, to upload: ResumableStore.Upload, _ version: InteropVersion) -> RequestAction {
        if version.requiresPartialUploadType, head.header("Content-Type").map({ String(trimmed($0.split(separator: ";")[0])) }) != Self.partialUploadType {
            return .respond(answer(415, version, error: "an append needs Content-Type: \(Self.partialUploadType)"))
        }
        guard let offsetText = head.header("Upload-Offset"), let offset = decimalNumber(trimmed(offsetText)) else {
            return .respond(answer(400, version, error: "an append needs Upload-Offset: the offset its content starts at"))
        }
        if let stored = upload.answer { return .respond(appendToCompleted(stored, version, head)) }
        guard offset == upload.offset else { return .respond(offsetMismatch(upload, provided: offset, version)) }
        let declared = version.requestSaysComplete(head)
        let contentLength = head.contentLength
        // Checked before any sum: a Content-Length near 2^64 must not overflow `offset + contentLength`
        // (nor an upload stored under a larger --max-upload-bytes underflow `maxSize - offset`).
        if offset > maxSize || contentLength.map({ $0 > maxSize - offset }) == true {
            return .respond(answer(413, version, error: "this append would take the upload past \(maxSize) bytes, the most this server takes",
                                   headers: [limitField(upload, version)]))
        }
        let complete = declared ?? (upload.length != nil && contentLength.map { offset + $0 } == upload.length)
        var length = upload.length
        if complete, let contentLength {
            if let length, length != offset + contentLength {
                return .respond(problem(400, version, type: "inconsistent-upload-length",
                                        title: "the upload is \(length) bytes, but this append ends at \(offset + contentLength)"))
            }
            length = offset + contentLength
        }
        if let length, length > maxSize {
            return .respond(answer(413, version, error: "the upload is \(length) bytes; this server takes at most \(maxSize)",
                                   headers: [limitField(upload, version)]))
        }
        switch store.beginAppending(to: upload) {
        case .taken: break
        case .busy:
            return .respond(answer(409, version, error: "another request is writing to this upload",
                                   headers: [HTTPField(name: "Upload-Offset", value: String(upload.offset))]))
        case .changed(let current?): return .respond(offsetMismatch(current, provided: offset, version))
        case .changed(nil): return .respond(failureAnswer(.notFound, version))
        }
        do throws(ResumableStore.Failure) {
            let current = length == upload.length ? upload : try store.update(upload.id) { $0.length = length }
            let receiver = try ResumableAppend(store: store, upload: current, limit: (length ?? maxSize) - offset, declared: head.contentLength,
                                               maxDrainBytes: maxDrainBytes, checksum: nil) { outcome in
                conclude(outcome, version, complete: complete, location: nil)
            }
            return .receiveBody(receiver)
        } catch {
            store.endWriting(upload.id)
            return .respond(failureAnswer(error, version))
        }
    }

    /// 409: the append starts at `provided`, but `upload` is at another offset.
    private func offsetMismatch(_ upload: ResumableStore.Upload, provided: UInt64, _ version: InteropVersion) -> Response {
        problem(409, version, type: "mismatching-upload-offset", title: "offset from request does not match offset of resource",
                extra: [("expected-offset", .unsigned(upload.offset)), ("provided-offset", .unsigned(provided))],
                headers: [HTTPField(name: "Upload-Offset", value: String(upload.offset))]
                    + (version.number >= 9 ? [version.completeness(false)] : []))
    }

    /// An append to an upload whose answer was already given.
    private func appendToCompleted(_ stored: ResumableStore.StoredAnswer, _ version: InteropVersion, _ head: RequestHead) -> Response {
        switch version.number {
        case 9...:
            // Draft -12: the server may replay the final response.
            return decorated(Response(status: stored.status, headers: stored.headers.map { HTTPField(name: $0[0], value: $0[1]) },
                                      body: .bytes(stored.body)), version, complete: true)
        case 8 where head.header("Content-Length") == "0":
            return problem(410, version, type: "completed-upload", title: "the upload is already complete")
        case 8:
            return problem(400, version, type: "inconsistent-upload-length", title: "the upload is already complete: it takes no more bytes")
        default:
            return problem(400, version, type: "completed-upload", title: "the upload is already complete")
        }
    }

    // MARK: - Answers

    /// The answer once a request's bytes are in: the target's answer when the upload is
    /// complete, else the acknowledgement of the version.
    private func conclude(_ outcome: ResumableAppend.Outcome, _ version: InteropVersion, complete: Bool,
                          location: HTTPField?) -> (Response, [ReceivedPart]) {
        switch outcome {
        case .appended(let upload) where complete:
            if let length = upload.length, length != upload.offset {
                return (problem(400, version, type: "inconsistent-upload-length",
                                title: "the upload was to be \(length) bytes but ended at \(upload.offset)"), [])
            }
            let (response, parts) = target.process(Self.targetHead(upload), bodyAt: store.dataPath(upload.id))
            let body: [UInt8]
            if case .bytes(let bytes) = response.body { body = bytes } else { body = [] }
            _ = try? store.update(upload.id) { upload in
                upload.length = upload.offset
                upload.clientCompleted = true
                upload.answer = ResumableStore.StoredAnswer(status: response.status, headers: response.headers.map { [$0.name, $0.value] }, body: body)
            }
            unlink(store.dataPath(upload.id))
            var final = decorated(response, version, complete: true)
            if version.offsetInAnswers { final.headers.append(HTTPField(name: "Upload-Offset", value: String(upload.offset))) }
            if let location { final.headers.append(location) }
            return (final, parts)
        case .appended(let upload):
            var headers = [version.completeness(false)]
            if let location { headers.append(location) }
            if version.offsetInAnswers { headers.append(HTTPField(name: "Upload-Offset", value: String(upload.offset))) }
            if version.hasLimits { headers.append(limitField(upload, version)) }
            return (answer(location == nil ? version.appendStatus : 201, version, headers: headers), [])
        case .tooLarge(let upload, let limit):
            return (answer(413, version, error: "the content is longer than the \(limit) bytes the upload has left: it was discarded",
                           headers: [HTTPField(name: "Upload-Offset", value: String(upload.offset)), version.completeness(false)]
                               + (version.hasLimits ? [limitField(upload, version)] : [])), [])
        case .checksumMismatch(let upload):
            return (answer(400, version, error: "the content does not match its digest",
                           headers: [HTTPField(name: "Upload-Offset", value: String(upload.offset))]), [])
        case .failed(let failure):
            return (failureAnswer(failure, version), [])
        }
    }

    private func decorated(_ response: Response, _ version: InteropVersion, complete: Bool) -> Response {
        var response = response
        response.headers += [version.versionField] + (version.number >= 7 || version.number == 3 ? [version.completeness(complete)] : [])
        return response
    }

    private func answer(_ status: Int, _ version: InteropVersion, error: String? = nil, headers: [HTTPField] = []) -> Response {
        let all = [version.versionField] + headers
        if let error { return Responses.error(status, error, headers: all) }
        return Response(status: status, headers: all)
    }

    /// An `application/problem+json` answer (RFC 9457) with the draft's problem type, from
    /// version 6; a plain JSON error before.
    private func problem(_ status: Int, _ version: InteropVersion, type: String, title: String,
                         extra: [(String, JSON)] = [], headers: [HTTPField] = []) -> Response {
        guard version.hasLimits else { return answer(status, version, error: title, headers: headers) }
        var response = Responses.json(status, .object([("type", .string(Self.problemBase + type)), ("title", .string(title))] + extra),
                                      headers: [version.versionField] + headers)
        response.headers = response.headers.map { $0.name == "Content-Type" ? HTTPField(name: "Content-Type", value: "application/problem+json") : $0 }
        return response
    }

    private func failureAnswer(_ failure: ResumableStore.Failure, _ version: InteropVersion) -> Response {
        switch failure {
        case .notFound: return answer(404, version, error: "no such upload")
        case .expired: return answer(410, version, error: "the upload has expired")
        case .locked: return answer(409, version, error: "another request is writing to this upload")
        case .tooMany(let limit): return answer(503, version, error: "the server already has \(limit) uploads in progress")
        case .insufficientStorage(let reason): return answer(507, version, error: reason)
        case .io(let reason): return answer(500, version, error: reason)
        }
    }

    private func limitField(_ upload: ResumableStore.Upload?, _ version: InteropVersion) -> HTTPField {
        HTTPField(name: "Upload-Limit", value: limitValue(upload, version))
    }

    /// `max-size=N, max-age=S` (`expires=S` in version 6): the size this server takes and
    /// the seconds the upload has left (a new one: the whole expiry).
    private func limitValue(_ upload: ResumableStore.Upload?, _ version: InteropVersion) -> String {
        let remaining = upload.map { max(0, $0.expiresAt - Int64(time(nil))) } ?? Int64(store.limits.expirySeconds)
        return "max-size=\(maxSize), \(version.lifetimeKey)=\(remaining)"
    }

    private func absoluteURL(of id: String, _ head: RequestHead) -> String {
        let host = head.header("Host").flatMap { $0.utf8.allSatisfy { $0 > 0x20 && $0 != 0x2F && $0 < 0x7F } ? $0 : nil }
        let base = host.map { (isHTTPS ? "https://" : "http://") + $0 } ?? origin.value
        return base + "/" + Self.pathPrefix + "/" + id
    }

    /// The headers of the creation request the target resource must see: those of the
    /// protocol and the framing go.
    private static func targetHeaders(_ head: RequestHead) -> [[String]] {
        let protocolHeaders: Set<String> = ["upload-draft-interop-version", "upload-complete", "upload-incomplete", "upload-offset",
                                           "upload-length", "content-length", "transfer-encoding", "expect", "counterpart-fault"]
        return head.headers.filter { !protocolHeaders.contains($0.name.lowercased()) }.map { [$0.name, $0.value] }
    }

    /// The creation request as the target sees it, with the assembled body's length.
    private static func targetHead(_ upload: ResumableStore.Upload) -> RequestHead {
        RequestHead(method: "POST", path: "/upload", query: [], version: "HTTP/1.1",
                    headers: (upload.requestHeaders ?? []).map { HTTPField(name: $0[0], value: $0[1]) }
                        + [HTTPField(name: "Content-Length", value: String(upload.offset))],
                    clientAddress: "-")
    }
}

/// `scheme://host:port` of a server, set once it listens.
final class ServerOrigin: Sendable {
    private let state = Mutex("")
    var value: String { state.withLock { $0 } }
    func set(_ origin: String) { state.withLock { $0 = origin } }
}
