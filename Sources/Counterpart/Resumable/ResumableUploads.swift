import HTTPTransfer
import Synchronization

/// "Resumable Uploads for HTTP" in front of `POST /upload`: a POST that asks for it (with
/// `Upload-Draft-Interop-Version` and `Upload-Complete`, or `Upload-Incomplete` in
/// version 3) becomes an upload resource at `/resumable/<id>`, announced with a
/// `104 (Upload Resumption Supported)` before its body is read; once all of its content
/// has come — in one request or through appends after interruptions — the assembled body
/// is handled by `POST /upload` as if it had come in one piece, and its answer is the
/// answer. Every other request to `/upload` goes to `POST /upload` untouched. This is how
/// URLSession (iOS 17 and later) makes an app's own upload resumable.
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

    private func session(_ version: InteropVersion) -> ResumableSession {
        ResumableSession(store: store, dialect: .ietf(version), maxDrainBytes: maxDrainBytes)
    }

    // MARK: - The target resource: /upload

    func respond(toTarget head: RequestHead) -> RequestAction {
        // An ordinary upload (most): no interop version, nothing for this layer to read.
        guard head.header(InteropVersion.fieldName) != nil else { return target.respond(to: head) }
        let request: ResumableUploadRequest?
        do {
            request = try ResumableUploadRequest(target: head.resumable, maxSize: maxSize)
        } catch {
            return .respond(refusal(error))
        }
        switch request {
        case .create(let version, let creation)?:
            return create(creation, version, head)
        case .options(let version)?:
            // The target's own answer, with what a client of this version wants to know.
            let action = target.respond(to: head)
            guard case .respond(var response) = action else { return action }
            response.headers += optionsFields(version)
            return .respond(response)
        case nil, .offset?, .append?, .cancel?:
            return target.respond(to: head)
        }
    }

    private func create(_ creation: ResumableUploadRequest.Creation, _ version: InteropVersion, _ head: RequestHead) -> RequestAction {
        let session = session(version)
        // What the upload endpoint refuses on the head it refuses now, without a resource.
        if case .answered(let refusal) = target.admit(head) { return .respond(decorated(refusal, version, complete: true)) }
        let upload: ResumableStore.Upload
        do throws(ResumableStore.Failure) {
            upload = try store.create(kind: .ietf, length: creation.length, requestHeaders: Self.targetHeaders(head), interopVersion: version.number, owner: head.user)
        } catch {
            return .respond(session.failure(error))
        }
        let location = HTTPField(name: "Location", value: absoluteURL(of: upload.id, head))
        var interim = [version.field, location]
        if version.hasLimits { interim.append(limitField(upload, version)) }
        let action = session.append(to: upload, from: head, limit: creation.length ?? maxSize,
                                    interim: [InformationalResponse(status: 104, reason: "Upload Resumption Supported", headers: interim)]) { outcome in
            conclude(outcome, version, complete: creation.complete, location: location)
        }
        // No 104 went out: the resource was never announced.
        if case .respond = action { store.remove(upload.id) }
        return action
    }

    /// `OPTIONS` from a client that speaks a version: the limits, and for version 8 the
    /// `Accept-Patch` it wants.
    private func optionsFields(_ version: InteropVersion) -> [HTTPField] {
        var fields = [version.field]
        if version.hasLimits { fields.append(limitField(nil, version)) }
        if version.announcesAcceptPatch { fields.append(HTTPField(name: "Accept-Patch", value: ResumableUploadRequest.partialUploadType)) }
        return fields
    }

    // MARK: - The upload resource: /resumable/<id>

    func respond(toResource head: RequestHead, segments: [String]) -> RequestAction {
        guard segments.count == 1 else { return .respond(Response.error(404, "\(head.path) is not an upload resource")) }
        let upload: ResumableStore.Upload
        do throws(ResumableStore.Failure) {
            upload = try store.upload(segments[0])
            guard upload.kind == .ietf else { throw .notFound }
        } catch {
            return .respond(session(InteropVersion.requested(in: head.resumable) ?? .newest).failure(error))
        }
        let request: ResumableUploadRequest
        do {
            request = try ResumableUploadRequest(resource: head.resumable, recorded: upload.interopVersion.flatMap(InteropVersion.init) ?? .newest)
        } catch {
            return .respond(refusal(error, upload: upload))
        }
        if let reason = upload.invalid {
            // Only a cancellation still acts on an invalid upload (interop 8 and later).
            if case .cancel = request {} else {
                return .respond(session(request.version).problem(400, type: "inconsistent-upload-length", title: "the upload is invalid: \(reason)"))
            }
        }
        switch request {
        case .offset(let version):
            // A writer made to let go has just saved what it wrote: only then is the upload read again.
            guard ResumableSession.takesOver(head), store.locker.takeOverIfSilent(upload.id) else { return .respond(offset(of: upload, version)) }
            return .respond(offset(of: (try? store.upload(upload.id)) ?? upload, version))
        case .append(let version, let append):
            return self.append(append, to: upload, version, head)
        case .cancel(let version):
            return .respond(session(version).cancel(upload))
        case .options(let version):
            return .respond(session(version).answer(204, headers: [Self.allowField] + optionsFields(version)))
        case .create(let version, _):
            return .respond(refusal(ResumableUploadRefusal(.methodNotAllowed(head.method), version: version), upload: upload))
        }
    }

    private static let allowField = HTTPField(name: "Allow", value: ResumableUploadRequest.resourceMethods.joined(separator: ", "))

    private func offset(of upload: ResumableStore.Upload, _ version: InteropVersion) -> Response {
        var headers = [ResumableSession.offsetField(upload), version.completeness(upload.answer != nil),
                       HTTPField(name: "Cache-Control", value: "no-store")]
        if version.hasLimits {
            if let length = upload.length { headers.append(HTTPField(name: "Upload-Length", value: String(length))) }
            headers.append(limitField(upload, version))
        }
        return session(version).answer(204, headers: headers)
    }

    private func append(_ append: ResumableUploadRequest.Append, to upload: ResumableStore.Upload, _ version: InteropVersion,
                        _ head: RequestHead) -> RequestAction {
        let session = session(version)
        let state = AppendDecision.Upload(offset: upload.offset, length: upload.length, completed: upload.answer != nil)
        switch AppendDecision(append, version, to: state, maxSize: maxSize) {
        case .proceed(let complete, let length, let limit):
            return session.append(to: upload, from: head, recording: length, limit: limit) { outcome in
                conclude(outcome, version, complete: complete, location: nil)
            }
        case .mismatch:
            return .respond(session.offsetMismatch(provided: append.offset, upload))
        case .pastLength(let length, let ends):
            return .respond(pastLength(upload, session, version, title: "the upload is \(length) bytes, but this append ends at \(ends)"))
        case .inconsistentLength(let length, let ends):
            return .respond(session.problem(400, type: "inconsistent-upload-length",
                                            title: "the upload is \(length) bytes, but this append ends at \(ends)", upload: upload))
        case .tooLarge(let limit):
            return .respond(session.answer(413, error: "this append would take the upload past \(limit) bytes, the most this server takes",
                                           headers: [limitField(upload, version)], upload: upload))
        case .completed(.replay):
            guard let stored = upload.answer else { return .respond(session.failure(.notFound)) }
            return .respond(decorated(Response(status: stored.status, headers: stored.headers.map { HTTPField(name: $0[0], value: $0[1]) },
                                               body: .bytes(stored.body)), version, complete: true))
        case .completed(.gone):
            return .respond(session.problem(410, type: "completed-upload", title: "the upload is already complete"))
        case .completed(.refused(let type)):
            return .respond(session.problem(400, type: type, title: "the upload is already complete: it takes no more bytes", upload: upload))
        }
    }

    /// An append past the upload's length: refused, and from version 8 the upload is
    /// invalid from then on (`InteropVersion.appendPastLength`).
    private func pastLength(_ upload: ResumableStore.Upload, _ session: ResumableSession, _ version: InteropVersion, title: String) -> Response {
        switch version.appendPastLength {
        case .refused(let status) where status == 400:
            return session.problem(400, type: "inconsistent-upload-length", title: title, upload: upload)
        case .refused(let status):
            return session.answer(status, error: title, headers: [limitField(upload, version)], upload: upload)
        case .invalidates:
            let invalid = (try? store.update(upload.id) { $0.invalid = title }) ?? upload
            return session.problem(400, type: "inconsistent-upload-length", title: title + "; the upload is invalid now", upload: invalid)
        }
    }

    // MARK: - Answers

    /// The answer once a request's bytes are in: the target's answer when the upload is
    /// complete, else the acknowledgement of the version.
    private func conclude(_ outcome: ResumableAppend.Outcome, _ version: InteropVersion, complete: Bool,
                          location: HTTPField?) -> (Response, [ReceivedPart]) {
        let session = session(version)
        switch outcome {
        case .appended(let upload) where complete:
            if let length = upload.length, length != upload.offset {
                return (session.problem(400, type: "inconsistent-upload-length",
                                        title: "the upload was to be \(length) bytes but ended at \(upload.offset)", upload: upload), [])
            }
            let (response, parts) = target.process(Self.targetHead(upload)) { receive throws(StorageError) in
                do throws(ResumableStore.Failure) {
                    try store.readData(upload.id, receive)
                } catch {
                    if case .storage(let failure) = error { throw failure }
                    throw StorageError(.failed, "the upload's data is gone")
                }
            }
            let body: [UInt8]
            if case .bytes(let bytes) = response.body { body = bytes } else { body = [] }
            _ = try? store.update(upload.id) { upload in
                upload.length = upload.offset
                upload.answer = ResumableStore.StoredAnswer(status: response.status, headers: response.headers.map { [$0.name, $0.value] }, body: body)
            }
            store.removeData(upload.id)
            var final = decorated(response, version, complete: true)
            if version.offsetInAnswers { final.headers.append(ResumableSession.offsetField(upload)) }
            if let location { final.headers.append(location) }
            return (final, parts)
        case .appended(let upload):
            var headers = [version.completeness(false)]
            if let location { headers.append(location) }
            if version.hasLimits { headers.append(limitField(upload, version)) }
            return (session.answer(location == nil ? version.appendStatus : 201, headers: headers, upload: upload), [])
        case .tooLarge(let upload, let limit) where upload.length != nil:
            return (pastLength(upload, session, version, title: "the content is longer than the \(limit) bytes the upload has left: it was discarded"), [])
        case .tooLarge(let upload, let limit):
            return (session.answer(413, error: "the content is longer than the \(limit) bytes the upload has left: it was discarded",
                                   headers: [ResumableSession.offsetField(upload), version.completeness(false)]
                                       + (version.hasLimits ? [limitField(upload, version)] : [])), [])
        case .checksumMismatch(let upload):
            return (session.answer(400, error: "the content does not match its digest", headers: [ResumableSession.offsetField(upload)]), [])
        }
    }

    /// A refusal on the head, in the request's version; one for a version this server
    /// does not speak names the versions it does (problem details, RFC 9457).
    private func refusal(_ refusal: ResumableUploadRefusal, upload: ResumableStore.Upload? = nil) -> Response {
        guard let version = refusal.version else {
            return ResumableSession.problem(refusal.status, [
                ("title", .string(refusal.message)),
                ("supported-versions", .array(InteropVersion.supported.map { .number(Int64($0)) })),
            ])
        }
        let session = session(version)
        var headers: [HTTPField] = []
        if case .methodNotAllowed = refusal.reason { headers.append(Self.allowField) }
        if case .tooLarge = refusal.reason { headers.append(limitField(upload, version)) }
        if let type = refusal.problemType { return session.problem(refusal.status, type: type, title: refusal.message, headers: headers, upload: upload) }
        return session.answer(refusal.status, error: refusal.message, headers: headers, upload: upload)
    }

    private func decorated(_ response: Response, _ version: InteropVersion, complete: Bool) -> Response {
        var response = response
        response.headers += [version.field] + (version.completenessInFinalAnswers ? [version.completeness(complete)] : [])
        return response
    }

    /// `Upload-Limit: max-size=N, max-age=S` (`expires=S` in version 6): the size this server
    /// takes and the seconds the upload has left (a new one: the whole expiry).
    private func limitField(_ upload: ResumableStore.Upload?, _ version: InteropVersion) -> HTTPField {
        let remaining = upload.map { max(0, $0.expiresAt - Int64(time(nil))) } ?? Int64(store.limits.expirySeconds)
        return HTTPField(name: "Upload-Limit", value: "max-size=\(maxSize), \(version.lifetimeKey)=\(remaining)")
    }

    private func absoluteURL(of id: String, _ head: RequestHead) -> String {
        let host = head.header("Host").flatMap { $0.utf8.allSatisfy { $0 > 0x20 && $0 != 0x2F && $0 < 0x7F } ? $0 : nil }
        // Behind a proxy that ends TLS (a load balancer in front of several servers), the
        // scheme the client used is the proxy's `X-Forwarded-Proto`.
        let forwarded = head.header("X-Forwarded-Proto").map { $0.lowercased() }
        let scheme = forwarded == "https" || forwarded == "http" ? forwarded! : (isHTTPS ? "https" : "http")
        let base = host.map { scheme + "://" + $0 } ?? origin.value
        return base + "/" + Self.pathPrefix + "/" + id
    }

    /// The headers of the creation request the target resource must see: those of the
    /// protocol and the framing go.
    private static func targetHeaders(_ head: RequestHead) -> [[String]] {
        let protocolHeaders: Set<String> = ["upload-draft-interop-version", "upload-complete", "upload-incomplete", "upload-offset",
                                           "upload-length", "content-length", "transfer-encoding", "expect", "counterpart-fault",
                                           "authorization", "proxy-authorization", "cookie"]
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
