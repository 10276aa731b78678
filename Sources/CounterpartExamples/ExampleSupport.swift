import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif

/// What went wrong in an example, in words a person can act on.
public enum ExampleError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The base URL and the path do not make a URL.
    case invalidURL(String)
    /// The answer was not HTTP.
    case notHTTP(URL)
    /// An HTTP status the example cannot go on with, and the server's `{"error": …}` if any.
    case httpStatus(Int, method: String, url: URL, message: String?)
    /// `HEAD` gave no `Content-Length`, so there is nothing to split or resume against.
    case unknownSize(URL)
    /// The server answered, but not with what was asked (a wrong `Content-Range`, a short
    /// packet, a body of the wrong length).
    case unexpectedResponse(URL, String)
    /// The file on the server changed while it was being fetched (its `ETag` no longer
    /// matched `If-Range`, or it shrank).
    case fileChanged(URL)
    /// The transfer stopped before the end (the connection was lost or cut); what arrived
    /// is on disk, and running the download again resumes from there.
    case interrupted(URL, bytesOnDisk: Int64, expectedSize: Int64, reason: String)
    /// A local file could not be read or written.
    case localFile(String, String)

    public var description: String {
        switch self {
        case .invalidURL(let text):
            return "\"\(text)\" is not a valid URL"
        case .notHTTP(let url):
            return "\(url.absoluteString) did not answer with HTTP"
        case .httpStatus(let status, let method, let url, let message):
            let reason = HTTPURLResponse.localizedString(forStatusCode: status)
            return "\(method) \(url.absoluteString) answered \(status) \(reason)" + (message.map { ": \($0)" } ?? "")
        case .unknownSize(let url):
            return "HEAD \(url.absoluteString) gave no Content-Length, so the file's size is unknown"
        case .unexpectedResponse(let url, let what):
            return "\(url.absoluteString): \(what)"
        case .fileChanged(let url):
            return "\(url.absoluteString) changed on the server during the download; run it again to start over"
        case .interrupted(let url, let onDisk, let expected, let reason):
            return "the download of \(url.absoluteString) stopped after \(onDisk) of \(expected) bytes (\(reason)); "
                + "the partial file is kept: run it again to resume"
        case .localFile(let path, let what):
            return "\(path): \(what)"
        }
    }
}

/// Building URLs on a server's base URL, and the sessions the examples use.
public enum ExampleURL {
    /// `path` (`/samples/hello.txt`, with a `?query` if wanted) on the server at `base`
    /// (`http://127.0.0.1:8080`). Characters a URL cannot hold (a space) are
    /// percent-encoded; `%` escapes already in `path` are kept.
    public static func resolve(_ path: String, against base: URL) throws(ExampleError) -> URL {
        var prefix = base.absoluteString
        while prefix.hasSuffix("/") { prefix.removeLast() }
        let path = path.hasPrefix("/") ? path : "/" + path
        if let url = URL(string: prefix + path) { return url }
        var allowed = CharacterSet.urlPathAllowed
        allowed.insert(charactersIn: "%?&=")
        guard let encoded = path.addingPercentEncoding(withAllowedCharacters: allowed),
              let url = URL(string: prefix + encoded) else { throw .invalidURL(prefix + path) }
        return url
    }

    /// `url` with one more query argument (`download`, `cut=100000`).
    public static func adding(query argument: String, to url: URL) -> URL {
        let text = url.absoluteString
        return URL(string: text + (text.contains("?") ? "&" : "?") + argument) ?? url
    }

    /// The last path component of `url`, percent-decoded, if it can name a file.
    static func fileName(of url: URL) -> String? {
        let name = url.lastPathComponent
        return name.isEmpty || name == "/" || name == "." || name == ".." ? nil : name
    }
}

enum Sessions {
    /// No cache (the examples are about what the server sends), no cookies, and a request
    /// timeout that notices a server that stops answering.
    static func configuration() -> URLSessionConfiguration {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.requestCachePolicy = .reloadIgnoringLocalCacheData
        configuration.urlCache = nil
        configuration.timeoutIntervalForRequest = 30
        return configuration
    }

    /// A session without a delegate, for the async `data(for:)` calls.
    static func plain() -> URLSession { URLSession(configuration: configuration()) }

    /// `response` as HTTP, or `ExampleError.notHTTP`.
    static func http(_ response: URLResponse, _ url: URL) throws(ExampleError) -> HTTPURLResponse {
        guard let http = response as? HTTPURLResponse else { throw .notHTTP(url) }
        return http
    }

    /// The `error` member of a JSON error body, or the body itself when it is short text.
    static func errorMessage(_ body: Data) -> String? {
        struct ErrorBody: Decodable { let error: String }
        if let decoded = try? JSONDecoder().decode(ErrorBody.self, from: body) { return decoded.error }
        let text = String(decoding: body.prefix(300), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return text.isEmpty ? nil : text
    }
}

/// Size of the file at `url` on disk, or nil if there is none.
func localFileSize(_ url: URL) -> Int64? {
    guard let attributes = try? FileManager.default.attributesOfItem(atPath: url.path),
          let size = attributes[.size] as? NSNumber else { return nil }
    return size.int64Value
}
