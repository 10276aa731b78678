import HTTPTransfer

/// `POST /__counterpart/touch?path=/some/file`: gives a served file (under the root, or
/// `/uploads/…`) a new modification time, so a new ETag and `Last-Modified` — "the file
/// changed" between a download and its resume, without changing its bytes. Answers
/// `{"etag", "lastModified"}` as the file is now served.
struct TouchEndpoint: Sendable {
    let root: ServedFolder
    let uploads: ServedFolder

    func respond(to head: RequestHead) -> Response {
        guard head.method == "POST" else { return Response.methodNotAllowed(head.method, allowed: ["POST"], on: head.path) }
        guard case let target?? = head.queryArgument("path"), !target.isEmpty else {
            return Response.error(400, "touch needs the file's path: POST /__counterpart/touch?path=/some/file")
        }
        guard case .segments(var segments) = RequestPath(target), !segments.isEmpty else {
            return Response.error(400, "\(target) is not the path of a served file")
        }
        var folder = root
        if segments.first == "uploads" {
            folder = uploads
            segments.removeFirst()
            // Hidden names there are uploads in progress, never served.
            if segments.isEmpty || segments.contains(where: { $0.hasPrefix(".") }) { return notFound(target) }
        }
        let descriptor = folder.open(segments.joined(separator: "/"))
        guard descriptor >= 0 else { return notFound(target) }
        let file = OpenFile(descriptor)
        var info = stat()
        guard fstat(file.borrowed, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return notFound(target) }
        // Now, or a second past the old time when that is not later: Last-Modified counts
        // whole seconds, and it must change too.
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        if now.tv_sec <= Platform.modificationTime(info).tv_sec { now = timespec(tv_sec: Platform.modificationTime(info).tv_sec + 1, tv_nsec: 0) }
        var times = [now, now]  // access and modification
        guard futimens(file.borrowed, &times) == 0, fstat(file.borrowed, &info) == 0 else {
            return Response.error(500, "cannot change the modification time of \(target): \(FileSystem.lastError())")
        }
        return Response.json(200, .object([
            ("etag", .string(StaticFiles.entityTag(of: info).description)),
            ("lastModified", .string(HTTPDate(secondsSince1970: Int64(Platform.modificationTime(info).tv_sec)).description)),
        ]))
    }

    private func notFound(_ target: String) -> Response {
        Response.error(404, "\(target) is not a served file")
    }
}
