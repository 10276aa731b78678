import HTTPTransfer

/// What answers `GET` and `HEAD` for the files under a URL prefix: a local folder
/// (`StaticFiles`) or the objects of an object store (`StoredObjectFiles`).
protocol FileServing: Sendable {
    /// The answer for the file or folder at `segments` below the prefix.
    func respond(to head: RequestHead, segments: [String]) -> Response
}

/// Serves the files of one folder under a URL prefix: `GET` and `HEAD` with validators,
/// conditional requests, `Range` (single and multi-range) and `?download`; folders as their
/// `index.html` or a listing. Nothing outside the folder is ever reachable.
struct StaticFiles: FileServing {
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
    /// Names that are never served, wherever they are: what a local store keeps beside its
    /// uploads (`ServerStorage.isLocalBookkeeping`), whose folder may sit inside the root.
    var isUnserved: @Sendable (String) -> Bool = { _ in false }
    /// What answers for each file share (and small files' plain answers), kept while the
    /// file stays as it was.
    let cache = FileResponseCache()

    func respond(to head: RequestHead, segments: [String]) -> Response {
        guard head.method == "GET" || head.method == "HEAD" else {
            return Response.methodNotAllowed(head.method, allowed: ["GET", "HEAD"], on: "\(head.path) (a static path)")
        }
        guard serves(segments) else { return notFound(head) }
        let relative = Self.relativePath(segments)
        guard let (file, info) = openBeneath(relative) else {
            return errno == EACCES ? Response.error(403, "\(head.path) cannot be read") : notFound(head)
        }
        switch info.st_mode & S_IFMT {
        case S_IFREG:
            return respondWithFile(head: head, file: file, info: info, name: segments.last ?? "", at: relative)
        case S_IFDIR:
            return respondWithFolder(head: head, file: file, segments: segments, relative: relative)
        default:
            return Response.error(404, "\(head.path) is not a file")
        }
    }

    /// Whether names like these may be served here: an upload in progress or a resumable
    /// upload's state never is, wherever the uploads folder is, nor a hidden name where they
    /// are hidden.
    private func serves(_ segments: [String]) -> Bool {
        !segments.contains { segment in
            (hidesDotFiles && segment.hasPrefix(".")) || isUnserved(segment)
        }
    }

    private static func relativePath(_ segments: [String]) -> String {
        segments.count == 1 ? segments[0] : segments.isEmpty ? "." : segments.joined(separator: "/")
    }

    /// The regular file served at `segments` (beneath the folder), opened, and its status;
    /// nil when none is, by the same rules as `respond`.
    func openServedFile(_ segments: [String]) -> (OpenFile, stat)? {
        guard !segments.isEmpty, serves(segments), let (file, info) = openBeneath(Self.relativePath(segments)),
              info.st_mode & S_IFMT == S_IFREG else { return nil }
        return (file, info)
    }

    private func notFound(_ head: RequestHead) -> Response {
        Response.error(404, "\(head.path) was not found")
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
        let indexPath = relative + "/index.html"
        if servesIndexFiles, let (index, info) = openBeneath(indexPath), info.st_mode & S_IFMT == S_IFREG {
            return respondWithFile(head: head, file: index, info: info, name: "index.html", at: indexPath)
        }
        return DirectoryListing(urlPath: urlPath, entries: DirectoryListing.entries(of: file, at: relative, in: folder)).response(for: head)
    }

    /// The validators a file with the status `info` is served with.
    static func validators(of info: stat) -> RepresentationValidators {
        RepresentationValidators(entityTag: entityTag(of: info),
                                 lastModified: HTTPDate(secondsSince1970: Int64(Platform.modificationTime(info).tv_sec)))
    }

    /// A file's ETag. Strong: a new inode, size or nanosecond modification time makes a new tag.
    private static func entityTag(of info: stat) -> EntityTag {
        let modified = Platform.modificationTime(info)
        return EntityTag(checkedOpaque: ASCIIWriter.string(capacity: 4 * 16 + 3) { out in
            out.number(UInt64(info.st_ino), radix: 16)
            out.byte(0x2D)
            out.number(UInt64(info.st_size), radix: 16)
            out.byte(0x2D)
            out.number(UInt64(bitPattern: Int64(modified.tv_sec)), radix: 16)
            out.byte(0x2E)
            out.number(UInt64(modified.tv_nsec), radix: 16)
        })
    }

    /// The answer for the regular file `file`, opened at `path` beneath the folder.
    private func respondWithFile(head: RequestHead, file: OpenFile, info: stat, name: String, at path: String) -> Response {
        let inFull = RepresentationResponder.answersInFull(head)
        let identity = FileIdentity(info)
        let facts: FileResponseCache.Facts
        switch cache.known(at: path, identity: identity, answerWanted: inFull) {
        case .answer(let kept):
            return kept.response
        case .facts(let known):
            facts = known
        case nil:
            facts = FileResponseCache.Facts(validators: Self.validators(of: info), contentType: ContentTypes.forName(name))
            cache.remember(facts, at: path, identity: identity)
        }
        let representation = Representation(length: UInt64(info.st_size), validators: facts.validators, contentType: facts.contentType,
                                            name: name, source: file)
        let response = RepresentationResponder(head: head, representation: representation, extraHeaders: fileHeaders,
                                               rangePolicy: rangePolicy).respond()
        guard inFull, response.status == 200 else { return response }
        return cache.keep(response, of: file, facts: facts, at: path, identity: identity) ?? response
    }
}
