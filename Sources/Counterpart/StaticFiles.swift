import Glibc
import HTTPTransfer

/// Serves the files of one folder under a URL prefix: `GET` and `HEAD` with validators,
/// conditional requests, `Range` (single and multi-range) and `?download`; folders as their
/// `index.html` or a listing. Nothing outside the folder is ever reachable.
struct StaticFiles: Sendable {
    /// The folder, as an absolute path with symlinks resolved.
    let folder: String
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
        guard let target = resolve(segments) else {
            return Responses.error(404, "\(head.path) was not found")
        }
        let file = open(target, O_RDONLY | O_CLOEXEC)
        guard file >= 0 else {
            return errno == EACCES ? Responses.error(403, "\(head.path) cannot be read") : Responses.error(404, "\(head.path) was not found")
        }
        var info = stat()
        guard fstat(file, &info) == 0 else {
            close(file)
            return Responses.error(404, "\(head.path) was not found")
        }
        switch info.st_mode & S_IFMT {
        case S_IFREG:
            return FileResponder(head: head, descriptor: file, info: info, path: target, rangePolicy: rangePolicy).respond()
        case S_IFDIR:
            close(file)
            return respondWithFolder(head: head, folderPath: target)
        default:
            close(file)
            return Responses.error(404, "\(head.path) is not a file")
        }
    }

    /// Percent-decodes each segment once. A segment that decodes to `.`, `..`, or holds a
    /// `/` or NUL (from `%2F`, `%00`) can only be an escape attempt: 404.
    private enum DecodedPath {
        case segments([String])
        case refused(Response)
    }

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

    /// The real path of `segments` under the folder, symlinks resolved, or nil when it
    /// does not exist or resolves outside the folder.
    private func resolve(_ segments: [String]) -> String? {
        let candidate = ([folder] + segments).joined(separator: "/")
        guard let resolved = realpath(candidate, nil) else { return nil }
        defer { free(resolved) }
        let path = String(cString: resolved)
        guard path == folder || path.hasPrefix(folder == "/" ? "/" : folder + "/") else { return nil }
        return path
    }

    private func respondWithFolder(head: RequestHead, folderPath: String) -> Response {
        guard head.path.hasSuffix("/") else {
            // Relative links in the folder's page need the trailing slash, as nginx does.
            let query = head.query.map { argument in argument.value.map { "\(argument.name)=\($0)" } ?? argument.name }
                .joined(separator: "&")
            let location = head.path + "/" + (query.isEmpty ? "" : "?" + query)
            return Response(status: 301, headers: [HTTPField(name: "Location", value: location)])
        }
        let index = folderPath + "/index.html"
        if let resolvedIndex = resolve(relativeSegments(of: index)) {
            let file = open(resolvedIndex, O_RDONLY | O_CLOEXEC)
            var info = stat()
            if file >= 0, fstat(file, &info) == 0, info.st_mode & S_IFMT == S_IFREG {
                return FileResponder(head: head, descriptor: file, info: info, path: resolvedIndex, rangePolicy: rangePolicy).respond()
            }
            if file >= 0 { close(file) }
        }
        return DirectoryListing(folderPath: folderPath, urlPath: head.path, hidesDotFiles: true).response(for: head)
    }

    private func relativeSegments(of path: String) -> [String] {
        path.dropFirst(folder.count).split(separator: "/").map(String.init)
    }
}

/// The answer for one open regular file.
private struct FileResponder {
    let head: RequestHead
    let descriptor: Int32
    let info: stat
    let path: String
    let rangePolicy: RangePolicy

    func respond() -> Response {
        let length = UInt64(info.st_size)
        // Strong: a new inode, size or nanosecond modification time makes a new tag.
        let entityTag = EntityTag(String(info.st_ino, radix: 16) + "-" + String(length, radix: 16) + "-"
            + String(info.st_mtim.tv_sec, radix: 16) + "." + String(info.st_mtim.tv_nsec, radix: 16))!
        let lastModified = HTTPDate(secondsSince1970: Int64(info.st_mtim.tv_sec))
        let contentType = ContentTypes.forPath(path)
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
            return Response(status: 200, headers: headers, body: .file(descriptor: descriptor, offset: 0, length: length))
        case .unsatisfiable:
            close(descriptor)
            return Responses.error(416, "the range \(rangeHeader ?? "") is outside \(head.path), which is \(length) bytes long",
                                   headers: headers + [HTTPField(name: "Content-Range", value: ContentRange.unsatisfied(completeLength: length).description)])
        case .partial(let ranges) where ranges.count == 1:
            let range = ranges[0]
            headers.append(HTTPField(name: "Content-Type", value: contentType))
            headers.append(HTTPField(name: "Content-Range", value: ContentRange.satisfied(range, completeLength: length).description))
            return Response(status: 206, headers: headers, body: .file(descriptor: descriptor, offset: range.first, length: range.count))
        case .partial(let ranges):
            let stream = ByteRangesStream(descriptor: descriptor, ranges: ranges, completeLength: length, contentType: contentType)
            headers.append(HTTPField(name: "Content-Type", value: stream.contentType))
            return Response(status: 206, headers: headers, body: .stream(length: stream.length, stream))
        }
    }

    /// `Content-Disposition: attachment` for `?download` (the file's own name) or
    /// `?download=NAME`.
    private func downloadDisposition() -> HTTPField? {
        guard let argument = head.queryArgument("download") else { return nil }
        let ownName = String(path.split(separator: "/").last ?? "download")
        let name = (argument?.isEmpty == false ? argument : nil) ?? ownName
        return HTTPField(name: "Content-Disposition", value: ContentDisposition.attachment(filename: name))
    }
}
