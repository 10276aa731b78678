/// What becomes of an append (`PATCH`) to an upload resource, given the upload as it
/// stands: the rules of the drafts that need the upload's offset and length as well as the
/// request's head. No state, no I/O.
public enum AppendDecision: Equatable, Sendable {
    /// Read the content: at most `limit` bytes; record `length` (newly known when the
    /// request completes the upload); `complete` when the content ends the upload.
    case proceed(complete: Bool, length: UInt64?, limit: UInt64)
    /// 409: the upload is at `expected`.
    case mismatch(expected: UInt64)
    /// The content would go past the upload's length (`InteropVersion.appendPastLength`).
    case pastLength(length: UInt64, ends: UInt64)
    /// 400 `inconsistent-upload-length`: the request completes the upload at another length.
    case inconsistentLength(length: UInt64, ends: UInt64)
    /// 413: past the most this server takes.
    case tooLarge(limit: UInt64)
    /// The upload is complete and its final answer given: what this request gets instead.
    case completed(Completed)

    public enum Completed: Equatable, Sendable {
        /// The final answer again (version 9, for a valid request only).
        case replay
        /// 410 `completed-upload` (version 8, an empty append).
        case gone
        /// 400 with this problem type.
        case refused(problemType: String)
    }

    /// The upload an append is decided against.
    public struct Upload: Equatable, Sendable {
        public var offset: UInt64
        public var length: UInt64?
        /// Whether its final answer was given.
        public var completed: Bool

        public init(offset: UInt64, length: UInt64?, completed: Bool) {
            self.offset = offset
            self.length = length
            self.completed = completed
        }
    }

    public init(_ append: ResumableUploadRequest.Append, _ version: InteropVersion, to upload: Upload, maxSize: UInt64) {
        let contentLength = append.contentLength
        // Sums are checked before they are made: a Content-Length near 2^64 must not overflow.
        let (ends, overflow) = append.offset.addingReportingOverflow(contentLength ?? 0)
        if upload.completed {
            self = .completed(Self.toCompleted(append, version, upload, ends: overflow ? .max : ends))
            return
        }
        guard append.offset == upload.offset else {
            self = .mismatch(expected: upload.offset)
            return
        }
        // The server's own limit first (413 in every version); an upload stored under a
        // larger --max-upload-bytes must not underflow `maxSize - offset` either.
        guard !overflow, ends <= maxSize else {
            self = .tooLarge(limit: maxSize)
            return
        }
        if let length = upload.length, contentLength != nil, ends > length {
            self = .pastLength(length: length, ends: ends)
            return
        }
        let complete = append.complete ?? (upload.length != nil && contentLength != nil && ends == upload.length)
        var length = upload.length
        if complete, contentLength != nil {
            if let length, length != ends {
                self = .inconsistentLength(length: length, ends: ends)
                return
            }
            length = ends
        }
        if let length, length > maxSize {
            self = .tooLarge(limit: maxSize)
            return
        }
        self = .proceed(complete: complete, length: length, limit: (length ?? maxSize) - append.offset)
    }

    private static func toCompleted(_ append: ResumableUploadRequest.Append, _ version: InteropVersion, _ upload: Upload, ends: UInt64) -> Completed {
        if version.replaysFinalAnswer {
            // Draft -12 lets the server answer a retried completing request with its final
            // response — a request that is valid against the upload, not one that adds bytes.
            return append.offset == upload.offset && ends == upload.offset ? .replay : .refused(problemType: "inconsistent-upload-length")
        }
        switch version.number {
        case 8: return append.contentLength == 0 ? .gone : .refused(problemType: "inconsistent-upload-length")
        default: return .refused(problemType: "completed-upload")
        }
    }
}
