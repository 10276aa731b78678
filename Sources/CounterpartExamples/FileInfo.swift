import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What a `HEAD` request says about a file before downloading it: seed 000's
/// `fileSizeWithURL:` and seed 001's `getServerFileInfo:`. `HEAD` sends the headers `GET`
/// would send and no body, so the size (`expectedContentLength`) and the type come without
/// the data — the start of every segmented or resumable download.
///
/// ```swift
/// let info = try await FileInfo.fetch(baseURL: server, path: "/samples/hello.txt")
/// print(info.size, info.mimeType ?? "?", info.suggestedFilename ?? "?")
/// ```
public struct FileInfo: Sendable, Equatable {
    /// The file's URL (without the `download` argument added for the name).
    public var url: URL
    /// `Content-Length`: the whole file's size in bytes.
    public var size: Int64
    /// `Content-Type` without its parameters (`image/png`).
    public var mimeType: String?
    /// The name the server suggests, as URLSession reports it. On Linux, FoundationNetworking takes it only from
    /// `Content-Disposition` and says `"Unknown"` without one (Apple's URLSession falls back
    /// to the URL's last component); Counterpart sends it when the URL has `?download`,
    /// which `fetch(askForFilename: true)` adds.
    public var suggestedFilename: String?
    /// The strong validator to send as `If-Range` when resuming.
    public var etag: String?
    public var lastModified: String?
    /// `Accept-Ranges: bytes`: the server takes `Range` requests.
    public var acceptsRanges: Bool

    public init(url: URL, size: Int64, mimeType: String?, suggestedFilename: String?, etag: String?,
                lastModified: String?, acceptsRanges: Bool) {
        self.url = url
        self.size = size
        self.mimeType = mimeType
        self.suggestedFilename = suggestedFilename
        self.etag = etag
        self.lastModified = lastModified
        self.acceptsRanges = acceptsRanges
    }

    /// `HEAD` on `path` (`/samples/hello.txt`) of the server at `baseURL`.
    public static func fetch(baseURL: URL, path: String, askForFilename: Bool = true) async throws -> FileInfo {
        try await fetch(ExampleURL.resolve(path, against: baseURL), askForFilename: askForFilename)
    }

    /// `HEAD` on `url`; with `askForFilename`, on `url?download` so that the answer
    /// carries `Content-Disposition` and `suggestedFilename` is the file's name.
    /// Throws `ExampleError.httpStatus` unless the answer is 200, and
    /// `ExampleError.unknownSize` without a `Content-Length`.
    public static func fetch(_ url: URL, askForFilename: Bool = true) async throws -> FileInfo {
        var request = URLRequest(url: askForFilename ? ExampleURL.adding(query: "download", to: url) : url,
                                 cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: 30)
        request.httpMethod = "HEAD"
        let session = Sessions.plain()
        defer { session.finishTasksAndInvalidate() }
        let (_, response) = try await session.data(for: request)
        let http = try Sessions.http(response, url)
        guard http.statusCode == 200 else {
            throw ExampleError.httpStatus(http.statusCode, method: "HEAD", url: url, message: nil)
        }
        guard http.expectedContentLength >= 0 else { throw ExampleError.unknownSize(url) }
        return FileInfo(
            url: url, size: http.expectedContentLength, mimeType: http.mimeType, suggestedFilename: http.suggestedFilename,
            etag: http.value(forHTTPHeaderField: "ETag"), lastModified: http.value(forHTTPHeaderField: "Last-Modified"),
            acceptsRanges: http.value(forHTTPHeaderField: "Accept-Ranges")?.lowercased() == "bytes")
    }
}
