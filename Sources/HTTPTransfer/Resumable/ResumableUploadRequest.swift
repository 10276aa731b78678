/// A request of "Resumable Uploads for HTTP" (draft-ietf-httpbis-resumable-upload), told
/// from its head alone, as swift-nio-extras' `HTTPResumableUploadProtocol.identifyRequest`
/// does: what it asks, with its parameters, or why it is refused. No state, no I/O; what
/// depends on the upload as it stands is `AppendDecision`'s.
public enum ResumableUploadRequest: Equatable, Sendable {
    /// A `POST` to the target resource that asks for a resumable upload.
    case create(InteropVersion, Creation)
    /// `OPTIONS` from a client that speaks a version (on the target or an upload resource).
    case options(InteropVersion)
    /// `HEAD` (or `GET` from version 9) on an upload resource.
    case offset(InteropVersion)
    /// `PATCH` on an upload resource.
    case append(InteropVersion, Append)
    /// `DELETE` on an upload resource.
    case cancel(InteropVersion)

    public struct Creation: Equatable, Sendable {
        /// Whether the request's content is the whole upload.
        public var complete: Bool
        /// The length, when `Upload-Length` or (for a complete one) `Content-Length` says it.
        public var length: UInt64?
    }

    public struct Append: Equatable, Sendable {
        public var offset: UInt64
        /// What the request says of completeness; nil when it does not say.
        public var complete: Bool?
        public var contentLength: UInt64?
    }

    /// The version the request is answered in.
    public var version: InteropVersion {
        switch self {
        case .create(let version, _), .options(let version), .offset(let version), .append(let version, _), .cancel(let version):
            version
        }
    }

    /// The methods an upload resource takes.
    public static let resourceMethods = ["HEAD", "PATCH", "DELETE", "OPTIONS"]
    public static let partialUploadType = "application/partial-upload"

    /// A request to the target resource (`POST /upload`): nil when it is an ordinary
    /// request — no interop version, one this server does not speak (the draft wants no
    /// 104 then: the upload goes on as a plain one), or, from version 4, no `Upload-Complete`.
    public init?(target head: ResumableRequestHead, maxSize: UInt64) throws(ResumableUploadRefusal) {
        guard case .success(let version)? = InteropVersion.of(head) else { return nil }
        switch head.method {
        case "OPTIONS":
            self = .options(version)
            return
        case "POST": break
        default: return nil
        }
        // Version 3 clients may leave out `Upload-Incomplete`: the interop version is enough.
        let declared = version.requestSaysComplete(head)
        if version.number > 3, declared == nil { return nil }
        let complete = declared ?? true
        func refuse(_ reason: ResumableUploadRefusal.Reason) -> ResumableUploadRefusal { ResumableUploadRefusal(reason, version: version) }
        switch head.number("Upload-Offset") {
        case .absent, .value(0): break
        default: throw refuse(.offsetInCreation)
        }
        var length = try head.optionalNumber("Upload-Length", invalid: refuse(.invalidLength))
        if complete, let contentLength = head.contentLength {
            if let length, length != contentLength { throw refuse(.inconsistentLength(declared: length, ends: contentLength)) }
            length = contentLength
        }
        if let length, length > maxSize { throw refuse(.tooLarge(length: length, limit: maxSize)) }
        self = .create(version, Creation(complete: complete, length: length))
    }

    /// A request to an upload resource made in version `recorded`: a request without a
    /// version is taken to speak it; one in another supported version is answered in its
    /// own (clients do ask an offset in another), one in a version this server does not
    /// speak is refused before it touches the upload.
    public init(resource head: ResumableRequestHead, recorded: InteropVersion) throws(ResumableUploadRefusal) {
        let version: InteropVersion
        switch InteropVersion.of(head) {
        case .success(let requested)?: version = requested
        case .failure(let refusal)?: throw refusal
        case nil: version = recorded
        }
        func refuse(_ reason: ResumableUploadRefusal.Reason) -> ResumableUploadRefusal { ResumableUploadRefusal(reason, version: version) }
        // Drafts -01 to -05 (versions 3 to 6): an offset request or a cancellation that
        // carries the fields of an append "MUST" be rejected with 400.
        func refuseUploadFields(_ names: [String], in request: String) throws(ResumableUploadRefusal) {
            let present = names.filter(head.has)
            if version.refusesUploadFieldsOutsideAppends, !present.isEmpty { throw refuse(.uploadFields(present, in: request)) }
        }
        switch head.method {
        case "GET" where !version.allowsGetForOffset:
            throw refuse(.methodNotAllowed(head.method))
        case "HEAD", "GET":
            try refuseUploadFields(["Upload-Offset", "Upload-Complete", "Upload-Incomplete", "Upload-Length"], in: "an offset request")
            self = .offset(version)
        case "DELETE":
            try refuseUploadFields(["Upload-Offset", "Upload-Complete", "Upload-Incomplete"], in: "a cancellation")
            self = .cancel(version)
        case "PATCH":
            if version.requiresPartialUploadType,
               head.field("Content-Type").map({ ASCII.lowercased(String(ASCII.trimmed($0.split(separator: ";", omittingEmptySubsequences: false)[0]))) })
                != Self.partialUploadType {
                throw refuse(.notPartialUpload)
            }
            guard case .value(let offset) = head.number("Upload-Offset") else { throw refuse(.missingOffset) }
            self = .append(version, Append(offset: offset, complete: version.requestSaysComplete(head), contentLength: head.contentLength))
        case "OPTIONS":
            self = .options(version)
        default:
            throw refuse(.methodNotAllowed(head.method))
        }
    }
}

/// Why a resumable-upload request is refused, before it touches any upload.
public struct ResumableUploadRefusal: Error, Equatable, Sendable {
    public enum Reason: Equatable, Sendable {
        case unsupportedVersion(String)
        case offsetInCreation
        case invalidLength
        case inconsistentLength(declared: UInt64, ends: UInt64)
        case tooLarge(length: UInt64, limit: UInt64)
        case uploadFields([String], in: String)
        case notPartialUpload
        case missingOffset
        case methodNotAllowed(String)
    }

    public var reason: Reason
    /// The version to answer in: nil when the request's is one this server does not speak.
    public var version: InteropVersion?

    public init(_ reason: Reason, version: InteropVersion?) {
        self.reason = reason
        self.version = version
    }

    public var status: Int {
        switch reason {
        case .tooLarge: 413
        case .notPartialUpload: 415
        case .methodNotAllowed: 405
        default: 400
        }
    }

    /// The draft's problem type (from version 6 the answer is `application/problem+json`).
    public var problemType: String? {
        if case .inconsistentLength = reason { return "inconsistent-upload-length" }
        return nil
    }

    public var message: String {
        switch reason {
        case .unsupportedVersion(let text):
            "Upload-Draft-Interop-Version \(text) is not one this server speaks; it speaks "
                + InteropVersion.supported.map(String.init).joined(separator: ", ")
        case .offsetInCreation: "an upload creation must not have Upload-Offset"
        case .invalidLength: "Upload-Length must be a number of bytes"
        case .inconsistentLength(let declared, let ends): "Upload-Length \(declared) and Content-Length \(ends) disagree"
        case .tooLarge(let length, let limit): "the upload is \(length) bytes; this server takes at most \(limit)"
        case .uploadFields(let fields, let request): "\(request) must not carry \(fields.joined(separator: ", "))"
        case .notPartialUpload: "an append needs Content-Type: \(ResumableUploadRequest.partialUploadType)"
        case .missingOffset: "an append needs Upload-Offset: the offset its content starts at"
        case .methodNotAllowed(let method):
            "\(method) is not allowed on an upload resource; use \(ResumableUploadRequest.resourceMethods.joined(separator: ", "))"
        }
    }
}
