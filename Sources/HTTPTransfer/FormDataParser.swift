/// One part of a `multipart/form-data` body, as RFC 7578 reads it.
public struct FormPart: Equatable, Sendable {
    /// The `name` parameter of `Content-Disposition`.
    public var name: String
    /// The file name as the client sent it (see `ContentDisposition.filename`), or nil for
    /// a text field. A part with a `filename` or `filename*` parameter, even empty, is a file.
    public var filename: String?
    /// The part's `Content-Type`, or the RFC 7578 default: `text/plain` for a field,
    /// `application/octet-stream` for a file.
    public var contentType: String
    public var headers: MultipartHeaders
    /// 1-based position of the part in the body.
    public var number: Int
    /// Where the part's content starts in the body.
    public var contentOffset: Int

    public var isFile: Bool { filename != nil }
}

public enum FormDataEvent {
    case partBegin(FormPart)
    /// Content of the current part; valid only during the call (see `MultipartEvent`).
    case partData(UnsafeRawBufferPointer)
    case partEnd
    case end
}

/// `multipart/form-data` (RFC 7578) over `MultipartParser`: every part must have a
/// `Content-Disposition: form-data` with a `name`; the parts are classified as fields or
/// files; the form's text — field values, names and file names — is limited to
/// `limits.maxFieldBytes` in all.
///
/// A part with two `Content-Disposition` or two `Content-Type` headers is refused: which
/// one counts would be a guess, and servers that guess differently disagree on the form.
public struct FormDataParser {
    private var multipart: MultipartParser
    private var form: FormState

    public init(boundary: MultipartBoundary, limits: MultipartLimits = MultipartLimits()) {
        multipart = MultipartParser(boundary: boundary, limits: limits)
        form = FormState(maxFieldBytes: limits.maxFieldBytes, boundary: boundary.value)
    }

    /// Bytes of the body fed so far.
    public var bytesConsumed: Int { multipart.bytesConsumed }
    /// Whether the close delimiter has been read.
    public var isComplete: Bool { multipart.isComplete }

    public mutating func feed(
        _ chunk: UnsafeRawBufferPointer, _ handler: (FormDataEvent) throws -> Void
    ) throws {
        // The form state is moved out while the multipart parser runs: its callback may
        // not touch `self` (exclusive access).
        var form = self.form
        defer { self.form = form }
        try multipart.feed(chunk) { event in try form.handle(event, handler) }
    }

    public mutating func feed(_ chunk: [UInt8], _ handler: (FormDataEvent) throws -> Void) throws {
        try chunk.withUnsafeBytes { try feed($0, handler) }
    }

    /// Declares the end of the body: throws unless the close delimiter was read.
    public mutating func finish() throws {
        try multipart.finish()
    }
}

private struct FormState {
    let maxFieldBytes: Int
    let boundary: String
    var fieldBytes = 0
    var currentIsField = false
    var currentPart: MultipartPart?

    init(maxFieldBytes: Int, boundary: String) {
        self.maxFieldBytes = maxFieldBytes
        self.boundary = boundary
    }

    mutating func handle(_ event: MultipartEvent, _ handler: (FormDataEvent) throws -> Void) throws {
        switch event {
        case .partBegin(let part):
            let formPart = try classify(part)
            currentIsField = !formPart.isFile
            currentPart = part
            // Names and file names count too: they are echoed back in receipts.
            try count(formPart.name.utf8.count + (formPart.filename?.utf8.count ?? 0))
            try handler(.partBegin(formPart))
        case .partData(let bytes):
            if currentIsField { try count(bytes.count) }
            try handler(.partData(bytes))
        case .partEnd:
            try handler(.partEnd)
        case .end:
            try handler(.end)
        }
    }

    /// Adds to the bytes of text the form holds; throws past the limit.
    private mutating func count(_ bytes: Int) throws {
        fieldBytes += bytes
        if fieldBytes > maxFieldBytes, let part = currentPart {
            throw MultipartError(.fieldBytesExceeded(limit: maxFieldBytes), offset: part.offset,
                                 part: part.number, boundary: boundary)
        }
    }

    private func classify(_ part: MultipartPart) throws -> FormPart {
        func failure(_ kind: MultipartError.Kind) -> MultipartError {
            MultipartError(kind, offset: part.offset, part: part.number, boundary: boundary)
        }
        var dispositionText: String?
        var contentTypeText: String?
        for field in part.headers.fields {
            if ASCII.equalsIgnoringCase(field.name, "Content-Disposition") {
                if dispositionText != nil { throw failure(.duplicateHeader("Content-Disposition")) }
                dispositionText = field.value
            } else if ASCII.equalsIgnoringCase(field.name, "Content-Type") {
                if contentTypeText != nil { throw failure(.duplicateHeader("Content-Type")) }
                contentTypeText = field.value
            }
        }
        guard let dispositionText else {
            throw failure(.missingContentDisposition)
        }
        let disposition: ContentDisposition
        do {
            disposition = try ContentDisposition(parsing: dispositionText)
        } catch {
            throw failure(.invalidContentDisposition(error.description))
        }
        guard disposition.type == "form-data" else {
            throw failure(.invalidContentDisposition("its type is \"\(disposition.type)\", not \"form-data\""))
        }
        guard let name = disposition.name else {
            throw failure(.invalidContentDisposition("it has no name parameter"))
        }
        let filename = disposition.hasFilename ? (disposition.filename ?? "") : nil
        let contentType = contentTypeText
            ?? (filename == nil ? "text/plain" : "application/octet-stream")
        return FormPart(name: name, filename: filename, contentType: contentType,
                        headers: part.headers, number: part.number, contentOffset: part.contentOffset)
    }
}
