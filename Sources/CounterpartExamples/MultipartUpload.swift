import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPTransfer

/// Seeds 000, 001 and 002: a `multipart/form-data` body built by hand — a delimiter line,
/// `Content-Disposition: form-data; name="file"; filename="…"`, `Content-Type`, an empty
/// line, the bytes, and so on for each file and field, then the close delimiter — sent with
/// an upload task whose delegate reports progress (`didSendBodyData`, seed 002).
///
/// The body is written with `MultipartWriter` (CRLF line ends, quoted names escaped) into a
/// temporary file, file contents copied a chunk at a time, and sent from that file: memory
/// does not grow with the files. Several files (and fields) go in one request.
///
/// ```swift
/// let upload = try MultipartUpload(baseURL: server, parts: [
///     .file(URL(fileURLWithPath: "photo.png")),
///     .field(name: "username", value: "dashen9"),
/// ])
/// let receipt = try await upload.send { print("\(Int($0.fraction * 100)) %") }
/// print(receipt.files[0].sha256, receipt.files[0].url)
/// ```
public struct MultipartUpload: Sendable {
    /// One part of the form.
    public enum Part: Sendable, Equatable {
        case field(name: String, value: String)
        case file(field: String, filename: String, contentType: String, contents: Contents)

        /// A file from disk, its name and type taken from its path unless given.
        public static func file(_ path: URL, field: String = "file", filename: String? = nil,
                                contentType: String? = nil) -> Part {
            .file(field: field, filename: filename ?? path.lastPathComponent,
                  contentType: contentType ?? MultipartUpload.contentType(forExtension: path.pathExtension),
                  contents: .path(path))
        }

        /// A file from memory (seed 002's `UIImagePNGRepresentation`).
        public static func file(_ data: Data, field: String = "file", filename: String,
                                contentType: String? = nil) -> Part {
            .file(field: field, filename: filename,
                  contentType: contentType ?? MultipartUpload.contentType(forExtension: (filename as NSString).pathExtension),
                  contents: .data(data))
        }
    }

    public enum Contents: Sendable, Equatable {
        case path(URL)
        case data(Data)
    }

    /// The upload's progress, from `urlSession(_:task:didSendBodyData:totalBytesSent:totalBytesExpectedToSend:)`.
    public struct Progress: Sendable, Equatable {
        public var bytesSent: Int64
        public var bytesExpected: Int64
        public var fraction: Double { bytesExpected <= 0 ? 0 : Double(bytesSent) / Double(bytesExpected) }
    }

    public var url: URL
    public var parts: [Part]
    public var boundary: MultipartBoundary

    /// A random boundary by default; seed 002's is
    /// `try MultipartBoundary("----WebKitFormBoundary0IQAt0HA7oxwIx3f")`.
    public init(url: URL, parts: [Part], boundary: MultipartBoundary = .random()) {
        self.url = url
        self.parts = parts
        self.boundary = boundary
    }

    /// `path` (`/upload`) on the server at `baseURL`.
    public init(baseURL: URL, path: String = "/upload", parts: [Part], boundary: MultipartBoundary = .random()) throws {
        self.init(url: try ExampleURL.resolve(path, against: baseURL), parts: parts, boundary: boundary)
    }

    /// The request's `Content-Type`.
    public var contentType: String { MultipartWriter(boundary: boundary).contentType() }

    /// Writes the whole body to `file` and returns its length.
    @discardableResult
    public func writeBody(to file: URL) throws -> Int64 {
        guard FileManager.default.createFile(atPath: file.path, contents: nil) else {
            throw ExampleError.localFile(file.path, "cannot be created")
        }
        let out = try FileHandle(forWritingTo: file)
        defer { try? out.close() }
        var writer = MultipartWriter(boundary: boundary)
        var length: Int64 = 0
        func emit(_ bytes: some DataProtocol) throws {
            try out.write(contentsOf: bytes)
            length += Int64(bytes.count)
        }
        for part in parts {
            switch part {
            case .field(let name, let value):
                try emit(writer.beginPart(headers: MultipartWriter.formDataHeaders(name: name)))
                try emit(Data(value.utf8))
            case .file(let field, let filename, let contentType, let contents):
                try emit(writer.beginPart(headers: MultipartWriter.formDataHeaders(
                    name: field, filename: filename, contentType: contentType)))
                switch contents {
                case .data(let data):
                    try emit(data)
                case .path(let path):
                    let input: FileHandle
                    do { input = try FileHandle(forReadingFrom: path) } catch {
                        throw ExampleError.localFile(path.path, "cannot be read")
                    }
                    defer { try? input.close() }
                    while let chunk = try input.read(upToCount: 1 << 20), !chunk.isEmpty {
                        try emit(chunk)
                    }
                }
            }
        }
        try emit(writer.finish())
        return length
    }

    /// Sends the form and returns the server's receipt. `progress` is called (on a
    /// URLSession queue) as the body goes out. Throws `ExampleError.httpStatus` with the
    /// server's message for an error answer.
    public func send(progress: @escaping @Sendable (Progress) -> Void = { _ in }) async throws -> UploadReceipt {
        let body = FileManager.default.temporaryDirectory.appendingPathComponent("counterpart-examples-\(UUID().uuidString).body")
        defer { try? FileManager.default.removeItem(at: body) }
        let length = try writeBody(to: body)

        var request = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: 60)
        request.httpMethod = "POST"
        request.setValue(contentType, forHTTPHeaderField: "Content-Type")
        request.setValue(String(length), forHTTPHeaderField: "Content-Length")
        request.setValue("application/json", forHTTPHeaderField: "Accept")

        let answer = ResponseBody()
        let transfer = DelegatedTask(onData: answer.append, onSent: { sent, expected in
            progress(Progress(bytesSent: sent, bytesExpected: expected > 0 ? expected : length))
        })
        let response = try await transfer.run(request, body: .file(body))
        let data = answer.data
        guard response.statusCode == 200 else {
            throw ExampleError.httpStatus(response.statusCode, method: "POST", url: url, message: Sessions.errorMessage(data))
        }
        do {
            return try JSONDecoder().decode(UploadReceipt.self, from: data)
        } catch {
            throw ExampleError.unexpectedResponse(url, "the answer is not an upload receipt: \(String(decoding: data.prefix(200), as: UTF8.self))")
        }
    }

    /// A `Content-Type` for a file extension, as a client would pick one.
    public static func contentType(forExtension ext: String) -> String {
        switch ext.lowercased() {
        case "png": return "image/png"
        case "jpg", "jpeg": return "image/jpeg"
        case "gif": return "image/gif"
        case "txt": return "text/plain"
        case "html", "htm": return "text/html"
        case "json": return "application/json"
        case "pdf": return "application/pdf"
        case "mp4": return "video/mp4"
        case "zip": return "application/zip"
        default: return "application/octet-stream"
        }
    }
}

/// Counterpart's answer to `POST /upload`: the fields and files in the order they arrived.
public struct UploadReceipt: Decodable, Sendable, Equatable {
    public struct Field: Decodable, Sendable, Equatable {
        public var name: String
        /// The value, when it is UTF-8.
        public var value: String?
        /// The value in base64, when it is not.
        public var valueBase64: String?

        public init(name: String, value: String?, valueBase64: String? = nil) {
            self.name = name
            self.value = value
            self.valueBase64 = valueBase64
        }
    }

    public struct File: Decodable, Sendable, Equatable {
        /// The form field (`name=` of the part).
        public var field: String
        /// The name as the client sent it.
        public var filename: String
        public var contentType: String
        public var size: Int64
        /// SHA-256 of the stored bytes, lowercase hex.
        public var sha256: String
        /// Where the stored file is served (`/uploads/photo.png`), with Range.
        public var url: String

        public init(field: String, filename: String, contentType: String, size: Int64, sha256: String, url: String) {
            self.field = field
            self.filename = filename
            self.contentType = contentType
            self.size = size
            self.sha256 = sha256
            self.url = url
        }
    }

    public var fields: [Field]
    public var files: [File]

    public init(fields: [Field], files: [File]) {
        self.fields = fields
        self.files = files
    }
}

/// The body of an answer, collected. Unchecked: `collected` is read and written under `lock`.
final class ResponseBody: @unchecked Sendable {
    private let lock = NSLock()
    private var collected = Data()

    func append(_ data: Data) { lock.withLock { collected.append(data) } }
    var data: Data { lock.withLock { collected } }
}
