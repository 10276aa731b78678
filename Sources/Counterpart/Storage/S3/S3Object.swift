/// What S3 says about one object: from a HEAD or GET's headers, or from a listing (which
/// gives neither the content type nor the metadata).
public struct S3ObjectInfo: Sendable, Equatable {
    /// Relative to the client's prefix.
    public var key: String
    public var size: Int64
    /// As S3 gives it, without the quotes: a multipart object's ends in `-N`.
    public var etag: String
    /// Seconds since 1970, UTC.
    public var lastModified: Int64
    public var contentType: String?
    /// The `x-amz-meta-*` headers: names lower-cased without the prefix, values decoded as
    /// `S3Metadata` encoded them.
    public var metadata: [String: String]

    public init(key: String, size: Int64, etag: String, lastModified: Int64, contentType: String? = nil, metadata: [String: String] = [:]) {
        self.key = key
        self.size = size
        self.etag = etag
        self.lastModified = lastModified
        self.contentType = contentType
        self.metadata = metadata
    }
}

/// The condition a write (PUT, copy) is made on.
public enum S3WriteCondition: Sendable, Equatable {
    case none
    /// Create only: `If-None-Match: *`; the write fails with `preconditionFailed` when the
    /// key exists. Atomic on RGW 16.2 for PUT (one of 16 racing writers wins).
    case ifNoneMatch
    /// Replace only this version: `If-Match: ETAG`. RGW matches only the unquoted form, so
    /// quotes given here are taken off.
    case ifMatch(String)
}
