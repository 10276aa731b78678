import HTTPTransfer

/// `POST /__counterpart/touch?path=/some/file`: gives a served file (under the root, or
/// `/uploads/…`) a new modification time, so a new ETag and `Last-Modified` — "the file
/// changed" between a download and its resume, without changing its bytes. Answers
/// `{"etag", "lastModified"}` as the file is now served.
struct TouchEndpoint: Sendable {
    let root: StaticFiles
    /// The uploads folder; nil when uploads are objects of an object store, whose
    /// modification time only a new object changes.
    let uploads: StaticFiles?

    func respond(to head: RequestHead) -> Response {
        guard head.method == "POST" else { return Response.methodNotAllowed(head.method, allowed: ["POST"], on: head.path) }
        guard case let target?? = head.queryArgument("path"), !target.isEmpty else {
            return Response.error(400, "touch needs the file's path: POST /__counterpart/touch?path=/some/file")
        }
        guard case .segments(let segments) = RequestPath(target), !segments.isEmpty else {
            return Response.error(400, "\(target) is not the path of a served file")
        }
        // Served as a GET of the path would be: the same folder, the same hidden names.
        if segments.first == "uploads", uploads == nil {
            return Response.error(501, "\(target) is an object of the object store (--store): touch changes files of folders only")
        }
        let (files, inFolder) = uploads.map { segments.starts(with: $0.urlPrefix) } == true
            ? (uploads!, Array(segments.dropFirst(uploads!.urlPrefix.count))) : (root, segments)
        guard let (file, opened) = files.openServedFile(inFolder) else { return notFound(target) }
        var info = opened
        // Now, or a second past the old time when that is not later: Last-Modified counts
        // whole seconds, and it must change too.
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        if now.tv_sec <= Platform.modificationTime(info).tv_sec { now = timespec(tv_sec: Platform.modificationTime(info).tv_sec + 1, tv_nsec: 0) }
        var times = [now, now]  // access and modification
        guard futimens(file.borrowed, &times) == 0, fstat(file.borrowed, &info) == 0 else {
            return Response.error(500, "cannot change the modification time of \(target): \(FileSystem.lastError())")
        }
        let validators = StaticFiles.validators(of: info)
        return Response.json(200, .object([
            ("etag", .string(validators.entityTag.description)), ("lastModified", .string(validators.lastModified.description)),
        ]))
    }

    private func notFound(_ target: String) -> Response {
        Response.error(404, "\(target) is not a served file")
    }
}
