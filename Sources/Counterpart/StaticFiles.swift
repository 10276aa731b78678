import Glibc
import HTTPTransfer

/// Serves the files of one folder under a URL prefix: `GET` and `HEAD` with validators,
/// conditional requests, `Range` (single and multi-range) and `?download`; folders as their
/// `index.html` or a listing. Nothing outside the folder is ever reachable.
struct StaticFiles: Sendable {
    let folder: ServedFolder
    /// The URL path segments the folder is served at (`[]` for the root, `["uploads"]`).
    let urlPrefix: [String]
    /// Whether names starting with a dot are hidden and refused.
    let hidesDotFiles: Bool
    /// Whether a folder's `index.html` stands for it (not in the uploads folder, where a
    /// client could upload one to replace the listing).
    let servesIndexFiles: Bool
    /// Headers added to every file response (the uploads folder sends files clients
    /// uploaded: they must not run as pages of this origin).
    let fileHeaders: [HTTPField]
    let rangePolicy: RangePolicy

    func respond(to head: RequestHead, segments: [String]) -> Response {
        guard head.method == "GET" || head.method == "HEAD" else {
            return Responses.methodNotAllowed(head.method, allowed: ["GET", "HEAD"], on: "\(head.path) (a static path)")
        }
        // Uploads in progress are never served, wherever the uploads folder is.
        guard !segments.contains(where: { $0.hasPrefix(UploadStore.temporaryPrefix) || (hidesDotFiles && $0.hasPrefix(".")) }) else {
            return notFound(head)
        }
        let relative = segments.isEmpty ? "." : segments.joined(separator: "/")
        guard let (file, info) = openBeneath(relative) else {
            return errno == EACCES ? Responses.error(403, "\(head.path) cannot be read") : notFound(head)
        }
        switch info.st_mode & S_IFMT {
        case S_IFREG:
            return FileResponder(head: head, file: file, info: info, name: segments.last ?? "",
                                 extraHeaders: fileHeaders, rangePolicy: rangePolicy).respond()
        case S_IFDIR:
            return respondWithFolder(head: head, file: file, segments: segments, relative: relative)
        default:
            return Responses.error(404, "\(head.path) is not a file")
        }
    }

    private func notFound(_ head: RequestHead) -> Response {
        Responses.error(404, "\(head.path) was not found")
    }

    /// The file or folder at `relative` beneath the served folder, opened, and its status.
    private func openBeneath(_ relative: String) -> (OpenFile, stat)? {
        let descriptor = folder.open(relative)
        guard descriptor >= 0 else { return nil }
        let file = OpenFile(descriptor)
        var info = stat()
        guard fstat(descriptor, &info) == 0 else { return nil }
        return (file, info)
    }

    private func respondWithFolder(head: RequestHead, file: OpenFile, segments: [String], relative: String) -> Response {
        let urlPath = RequestPath.encoded(urlPrefix + segments) + (urlPrefix.isEmpty && segments.isEmpty ? "" : "/")
        guard head.path.hasSuffix("/") else {
            // Relative links in the folder's page need the trailing slash, as nginx does.
            return Response(status: 301, headers: [HTTPField(name: "Location", value: urlPath + head.queryString)])
        }
        if servesIndexFiles, let (index, info) = openBeneath(relative + "/index.html"), info.st_mode & S_IFMT == S_IFREG {
            return FileResponder(head: head, file: index, info: info, name: "index.html",
                                 extraHeaders: fileHeaders, rangePolicy: rangePolicy).respond()
        }
        return DirectoryListing(folder: folder, relative: relative, file: file, urlPath: urlPath).response(for: head)
    }
}

/// The answer for one open regular file.
private struct FileResponder {
    let head: RequestHead
    let file: OpenFile
    let info: stat
    /// The file's name as requested: its extension gives the type, and `?download` uses it.
    let name: String
    let extraHeaders: [HTTPField]
    let rangePolicy: RangePolicy

    /// Bodies up to this size are read and sent from memory: libmicrohttpd sends such a
    /// response in one write, where a sendfile response costs a second one for the headers.
    static let smallBodyBytes: UInt64 = 64 * 1024

    func respond() -> Response {
        let length = UInt64(info.st_size)
        // Strong: a new inode, size or nanosecond modification time makes a new tag.
        let entityTag = EntityTag(String(info.st_ino, radix: 16) + "-" + String(length, radix: 16) + "-"
            + String(info.st_mtim.tv_sec, radix: 16) + "." + String(info.st_mtim.tv_nsec, radix: 16))!
        let lastModified = HTTPDate(secondsSince1970: Int64(info.st_mtim.tv_sec))
        let contentType = ContentTypes.forName(name)
        var headers = [
            HTTPField(name: "Accept-Ranges", value: "bytes"),
            HTTPField(name: "ETag", value: entityTag.description),
            HTTPField(name: "Last-Modified", value: lastModified.description),
        ]

        let rangeHeader = head.method == "GET" ? head.header("Range") : nil
        let conditions = ConditionalRequest(
            method: head.method, ifMatch: head.header("If-Match"), ifNoneMatch: head.header("If-None-Match"),
            ifModifiedSince: head.header("If-Modified-Since"), ifUnmodifiedSince: head.header("If-Unmodified-Since"),
            ifRange: head.header("If-Range"), hasRange: rangeHeader != nil)
        var resolution = RangeResolution(rangeHeader: rangeHeader, length: length, policy: rangePolicy)
        switch conditions.evaluate(Validators(entityTag: entityTag, lastModified: lastModified)) {
        case .notModified:
            // libmicrohttpd sends no body with a 304 but announces the size it was given:
            // give it the file's, so Content-Length says what a 200 would send (RFC 9110
            // §8.6), not 0.
            return Response(status: 304, headers: headers, body: .file(file, offset: 0, length: length))
        case .preconditionFailed:
            return Responses.error(412, "a precondition of the request (If-Match or If-Unmodified-Since) does not hold for \(head.path)",
                                   headers: headers)
        case .ignoreRange:
            resolution = .full
        case .proceed:
            break
        }
        if case .unsatisfiable = resolution {
            return Responses.error(416, "the range \(rangeHeader ?? "") is outside \(head.path), which is \(length) bytes long",
                                   headers: headers + [HTTPField(name: "Content-Range", value: ContentRange.unsatisfied(completeLength: length).description)])
        }

        headers += extraHeaders
        if let download = downloadDisposition() { headers.append(download) }
        switch resolution {
        case .full, .unsatisfiable:
            headers.append(HTTPField(name: "Content-Type", value: contentType))
            return Response(status: 200, headers: headers, body: body(offset: 0, length: length))
        case .partial(let ranges) where ranges.count == 1:
            let range = ranges[0]
            headers.append(HTTPField(name: "Content-Type", value: contentType))
            headers.append(HTTPField(name: "Content-Range", value: ContentRange.satisfied(range, completeLength: length).description))
            return Response(status: 206, headers: headers, body: body(offset: range.first, length: range.count))
        case .partial(let ranges):
            let stream = ByteRangesStream(file: file, ranges: ranges, completeLength: length, contentType: contentType)
            headers.append(HTTPField(name: "Content-Type", value: stream.contentType))
            return Response(status: 206, headers: headers, body: .stream(length: stream.length, stream))
        }
    }

    /// `length` bytes from `offset`: read now when small, else sent from the descriptor.
    private func body(offset: UInt64, length: UInt64) -> ResponseBody {
        if length <= Self.smallBodyBytes, head.method == "GET", let bytes = readFully(offset: offset, length: Int(length)) {
            return .bytes(bytes)
        }
        return .file(file, offset: offset, length: length)
    }

    /// The bytes, or nil when the file no longer has them all (it shrank since `fstat`;
    /// the descriptor response then ends the connection short, as for a big file).
    private func readFully(offset: UInt64, length: Int) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: length)
        var filled = 0
        while filled < length {
            let count = bytes.withUnsafeMutableBytes {
                pread(file.borrowed, $0.baseAddress! + filled, length - filled, off_t(offset) + off_t(filled))
            }
            if count < 0, errno == EINTR { continue }
            guard count > 0 else { return nil }
            filled += count
        }
        return bytes
    }

    /// `Content-Disposition: attachment` for `?download` (the file's own name) or
    /// `?download=NAME`.
    private func downloadDisposition() -> HTTPField? {
        guard let argument = head.queryArgument("download") else { return nil }
        let chosen = (argument?.isEmpty == false ? argument : nil) ?? (name.isEmpty ? "download" : name)
        return HTTPField(name: "Content-Disposition", value: ContentDisposition.attachment(filename: chosen))
    }
}
