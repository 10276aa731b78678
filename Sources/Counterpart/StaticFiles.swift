import Glibc
import HTTPTransfer

/// Serves the files of one folder under a URL prefix: `GET` and `HEAD` with validators,
/// conditional requests, `Range` (single and multi-range) and `?download`; folders as their
/// `index.html` or a listing. Nothing outside the folder is ever reachable.
struct StaticFiles: Sendable {
    let folder: ServedFolder
    /// The URL path the folder is served at, ending in `/`.
    let urlPrefix: String
    /// Whether names starting with a dot are hidden and refused (the uploads folder, where
    /// temporary files have such names).
    let hidesDotFiles: Bool
    let rangePolicy: RangePolicy

    func respond(to head: RequestHead, relativePath: Substring) -> Response {
        guard head.method == "GET" || head.method == "HEAD" else {
            return Responses.methodNotAllowed(head.method, allowed: ["GET", "HEAD"], on: "\(head.path) (a static path)")
        }
        let segments: [String]
        switch decodeSegments(relativePath) {
        case .segments(let decoded): segments = decoded
        case .refused(let response): return response
        }
        let relative = segments.isEmpty ? "." : segments.joined(separator: "/")
        guard let (file, info) = openBeneath(relative) else {
            return errno == EACCES ? Responses.error(403, "\(head.path) cannot be read") : Responses.error(404, "\(head.path) was not found")
        }
        switch info.st_mode & S_IFMT {
        case S_IFREG:
            return FileResponder(head: head, descriptor: file, info: info, name: segments.last ?? "", rangePolicy: rangePolicy).respond()
        case S_IFDIR:
            return respondWithFolder(head: head, descriptor: file, relative: relative)
        default:
            close(file)
            return Responses.error(404, "\(head.path) is not a file")
        }
    }

    private enum DecodedPath {
        case segments([String])
        case refused(Response)
    }

    /// Percent-decodes each segment once. A segment that decodes to `.`, `..`, or holds a
    /// `/` or NUL (from `%2F`, `%00`) can only be an escape attempt: 404.
    private func decodeSegments(_ path: Substring) -> DecodedPath {
        var segments: [String] = []
        for raw in path.split(separator: "/", omittingEmptySubsequences: true) {
            guard let bytes = PercentDecoding.decodeBytes(String(raw)) else {
                return .refused(Responses.error(400, "the path has a malformed percent-encoding: \(raw)"))
            }
            guard !bytes.contains(0x2F), !bytes.contains(0), bytes != [0x2E], bytes != [0x2E, 0x2E],
                  !(hidesDotFiles && bytes.first == 0x2E),
                  let segment = String(validating: bytes, as: UTF8.self) else {
                return .refused(Responses.error(404, "\(urlPrefix)\(path) was not found"))
            }
            segments.append(segment)
        }
        return .segments(segments)
    }

    /// The file or folder at `relative` beneath the served folder, opened, and its status.
    private func openBeneath(_ relative: String) -> (Int32, stat)? {
        let file = folder.open(relative)
        guard file >= 0 else { return nil }
        var info = stat()
        guard fstat(file, &info) == 0 else {
            close(file)
            return nil
        }
        return (file, info)
    }

    private func respondWithFolder(head: RequestHead, descriptor: Int32, relative: String) -> Response {
        guard head.path.hasSuffix("/") else {
            close(descriptor)
            // Relative links in the folder's page need the trailing slash, as nginx does.
            let query = head.query.map { argument in argument.value.map { "\(argument.name)=\($0)" } ?? argument.name }
                .joined(separator: "&")
            let location = head.path + "/" + (query.isEmpty ? "" : "?" + query)
            return Response(status: 301, headers: [HTTPField(name: "Location", value: location)])
        }
        if let (index, info) = openBeneath(relative + "/index.html") {
            if info.st_mode & S_IFMT == S_IFREG {
                close(descriptor)
                return FileResponder(head: head, descriptor: index, info: info, name: "index.html", rangePolicy: rangePolicy).respond()
            }
            close(index)
        }
        return DirectoryListing(descriptor: descriptor, urlPath: head.path).response(for: head)
    }
}

/// The answer for one open regular file.
private struct FileResponder {
    let head: RequestHead
    let descriptor: Int32
    let info: stat
    /// The file's name as requested: its extension gives the type, and `?download` uses it.
    let name: String
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
            close(descriptor)
            return Response(status: 304, headers: headers)
        case .preconditionFailed:
            close(descriptor)
            return Responses.error(412, "a precondition of the request (If-Match or If-Unmodified-Since) does not hold for \(head.path)",
                                   headers: headers)
        case .ignoreRange:
            resolution = .full
        case .proceed:
            break
        }

        if let download = downloadDisposition() { headers.append(download) }
        switch resolution {
        case .full:
            headers.append(HTTPField(name: "Content-Type", value: contentType))
            return Response(status: 200, headers: headers, body: body(offset: 0, length: length))
        case .unsatisfiable:
            close(descriptor)
            return Responses.error(416, "the range \(rangeHeader ?? "") is outside \(head.path), which is \(length) bytes long",
                                   headers: headers + [HTTPField(name: "Content-Range", value: ContentRange.unsatisfied(completeLength: length).description)])
        case .partial(let ranges) where ranges.count == 1:
            let range = ranges[0]
            headers.append(HTTPField(name: "Content-Type", value: contentType))
            headers.append(HTTPField(name: "Content-Range", value: ContentRange.satisfied(range, completeLength: length).description))
            return Response(status: 206, headers: headers, body: body(offset: range.first, length: range.count))
        case .partial(let ranges):
            let stream = ByteRangesStream(descriptor: descriptor, ranges: ranges, completeLength: length, contentType: contentType)
            headers.append(HTTPField(name: "Content-Type", value: stream.contentType))
            return Response(status: 206, headers: headers, body: .stream(length: stream.length, stream))
        }
    }

    /// `length` bytes from `offset`: read now when small, else sent from the descriptor.
    private func body(offset: UInt64, length: UInt64) -> ResponseBody {
        if length <= Self.smallBodyBytes, head.method == "GET", let bytes = readFully(offset: offset, length: Int(length)) {
            close(descriptor)
            return .bytes(bytes)
        }
        return .file(descriptor: descriptor, offset: offset, length: length)
    }

    /// The bytes, or nil when the file no longer has them all (it shrank since `fstat`;
    /// the descriptor response then ends the connection short, as for a big file).
    private func readFully(offset: UInt64, length: Int) -> [UInt8]? {
        var bytes = [UInt8](repeating: 0, count: length)
        var filled = 0
        while filled < length {
            let count = bytes.withUnsafeMutableBytes {
                pread(descriptor, $0.baseAddress! + filled, length - filled, off_t(offset) + off_t(filled))
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
