import HTTPTransfer

/// The protocol a resumable upload speaks, and every way the two differ in their answers
/// (the rest — claiming, appending, failing — is the same):
///
/// | | tus 1.0.0 | IETF drafts |
/// | --- | --- | --- |
/// | every answer carries | `Tus-Resumable: 1.0.0` | `Upload-Draft-Interop-Version` |
/// | another request writes to it | `423 Locked` | `409 Conflict` with `Upload-Offset` |
/// | wrong `Upload-Offset` | `409`, JSON error | `409`, problem details from 6 (+ `Upload-Complete: ?0` from 9) |
/// | `Upload-Offset` on other failures | no | up to version 6 (drafts -01 to -05) |
/// | error bodies | `{"error": …}` | problem details (RFC 9457) from 6 where the draft names a type |
enum ResumableDialect: Equatable {
    case tus
    case ietf(InteropVersion)

    var commonField: HTTPField {
        switch self {
        case .tus: HTTPField(name: "Tus-Resumable", value: TusRequest.version)
        case .ietf(let version): version.field
        }
    }

    /// `423 Locked` is WebDAV's (RFC 4918 §11.3), which tus adopted; the drafts say `409`.
    var busyStatus: Int { self == .tus ? 423 : 409 }

    var version: InteropVersion? {
        if case .ietf(let version) = self { return version }
        return nil
    }
}

/// One request's work on a resumable upload, for either protocol: its answers, and the
/// one sequence that appends to an upload — claim it, read the body into it, conclude.
struct ResumableSession {
    let store: ResumableStore
    let dialect: ResumableDialect
    let maxDrainBytes: UInt64

    /// Whether a request takes an upload over from an older request that still holds it
    /// (the default), or gets `423`/`409` as it would before (`Counterpart-Takeover: off`,
    /// for clients that test that path).
    static func takesOver(_ head: RequestHead) -> Bool {
        head.header("Counterpart-Takeover").map { !ASCII.equalsIgnoringCase($0, "off") } ?? true
    }

    /// Claims `upload` (as `head`'s request saw it; taking it over from a silent writer unless
    /// the request says not to) and reads the body into it: at most `limit` bytes, recording
    /// `length` first when it changes; `conclude` makes the answer once the bytes are in,
    /// while the upload is still held. The claim is given back when the answer is made, or
    /// when the action is dropped unanswered.
    func append(to upload: ResumableStore.Upload, from head: RequestHead, recording length: UInt64? = nil, limit: UInt64,
                checksum: (MessageDigest, [UInt8])? = nil, interim: [InformationalResponse] = [],
                conclude: @escaping ResumableAppend.Conclusion) -> RequestAction {
        let claimed: ResumableLocker.Claim?
        do { claimed = try store.claim(upload.id, takingOver: Self.takesOver(head)) } catch { return .respond(failure(error, upload: upload)) }
        guard let claim = claimed else { return .respond(busy(upload)) }
        // A request that found the upload busy a moment ago must not append to bytes it did
        // not see, nor to an upload another request has completed or removed. (Only the
        // progress counts: a writer that let go saved its offset and moved the expiry.)
        let found: ResumableStore.Upload?
        do {
            found = try store.current(upload.id)
        } catch {
            claim.release()
            return .respond(failure(error, upload: upload))
        }
        guard let found, found.isUnchanged(since: upload) else {
            claim.release()
            return .respond(found.map { offsetMismatch(provided: upload.offset, $0) } ?? failure(.notFound))
        }
        do throws(ResumableStore.Failure) {
            let current = length == nil || length == found.length ? found : try store.update(upload.id) { $0.length = length }
            let receiver = try ResumableAppend(session: self, claim: claim, upload: current, limit: limit, declared: head.contentLength,
                                               connection: head.connection, checksum: checksum, conclude: conclude)
            return .receiveBody(receiver, interim: interim)
        } catch {
            claim.release()
            return .respond(failure(error, upload: upload))
        }
    }

    /// Removes the upload, unless another request is writing to it.
    func cancel(_ upload: ResumableStore.Upload) -> Response {
        let claimed: ResumableLocker.Claim?
        do { claimed = try store.locker.claim(upload.id) } catch { return failure(.storage(error)) }
        guard let claim = claimed else { return busy(upload) }
        store.remove(upload.id)
        claim.release()
        return answer(204)
    }

    // MARK: - Answers

    /// An answer with the protocol's own field; `upload`, when the answer is about an
    /// active one, adds its `Upload-Offset` where the protocol wants it on every answer.
    func answer(_ status: Int, error: String? = nil, headers: [HTTPField] = [], upload: ResumableStore.Upload? = nil) -> Response {
        var all = [dialect.commonField] + headers
        if let upload, dialect.version?.offsetInAnswers == true {
            all.append(Self.offsetField(upload))
        }
        if let error { return Response.error(status, error, headers: all) }
        return Response(status: status, headers: all)
    }

    /// An `application/problem+json` answer (RFC 9457) with the draft's problem type, where
    /// the protocol has them; a plain JSON error otherwise.
    func problem(_ status: Int, type: String, title: String, extra: [(String, JSON)] = [], headers: [HTTPField] = [],
                 upload: ResumableStore.Upload? = nil) -> Response {
        guard dialect.version?.hasLimits == true else { return answer(status, error: title, headers: headers, upload: upload) }
        return Self.problem(status, [("type", .string(Self.problemBase + type)), ("title", .string(title))] + extra,
                            headers: answer(status, headers: headers, upload: upload).headers)
    }

    static func problem(_ status: Int, _ members: [(String, JSON)], headers: [HTTPField] = []) -> Response {
        Response.json(status, .object(members), headers: headers, contentType: "application/problem+json")
    }

    static let problemBase = "https://iana.org/assignments/http-problem-types#"

    /// Every failure of the store, as the protocol answers it.
    func failure(_ failure: ResumableStore.Failure, upload: ResumableStore.Upload? = nil) -> Response {
        switch failure {
        case .notFound: return answer(404, error: "no such upload")
        case .expired: return answer(410, error: "the upload has expired")
        case .takenOver: return answer(409, error: "a newer request took this upload over: ask its offset")
        case .tooMany(let limit): return answer(503, error: "the server already has \(limit) uploads in progress")
        case .storage(let error): return answer(error.status, error: error.description, upload: upload)
        }
    }

    /// Another request is writing to the upload.
    func busy(_ upload: ResumableStore.Upload) -> Response {
        answer(dialect.busyStatus, error: "another request is writing to this upload",
               headers: dialect == .tus ? [] : [Self.offsetField(upload)])
    }

    /// 409: the request's `Upload-Offset` is not where `upload` is (now).
    func offsetMismatch(provided: UInt64, _ upload: ResumableStore.Upload) -> Response {
        guard let version = dialect.version else {
            return answer(409, error: "Upload-Offset is \(provided) but the upload is at \(upload.offset)", headers: [Self.offsetField(upload)])
        }
        return problem(409, type: "mismatching-upload-offset", title: "offset from request does not match offset of resource",
                       extra: [("expected-offset", .unsigned(upload.offset)), ("provided-offset", .unsigned(provided))],
                       headers: [Self.offsetField(upload)] + (version.completenessInOffsetMismatch ? [version.completeness(false)] : []))
    }

    static func offsetField(_ upload: ResumableStore.Upload) -> HTTPField {
        HTTPField(name: "Upload-Offset", value: String(upload.offset))
    }
}

extension RequestHead {
    /// The head as the resumable-upload classifiers see it.
    var resumable: ResumableRequestHead {
        ResumableRequestHead(method: method, fields: headers.map { ($0.name, $0.value) })
    }
}

extension InteropVersion {
    var field: HTTPField { HTTPField(name: Self.fieldName, value: String(number)) }

    func completeness(_ complete: Bool) -> HTTPField {
        HTTPField(name: completenessFieldName, value: completenessValue(complete))
    }
}
