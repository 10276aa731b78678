import Glibc

/// Maps method and path to an endpoint: `/upload` to uploads, `/uploads/...` to the
/// uploads folder, everything else to the static root. Routes on the decoded path, so
/// `//uploads/` and `/%75ploads/` go where `/uploads/` goes. Writes the access log.
struct Router: RequestHandler {
    let root: StaticFiles
    let uploadedFiles: StaticFiles
    let upload: UploadEndpoint
    let accessLog: Bool

    func handle(_ head: RequestHead) -> RequestAction {
        switch RequestPath(head.path) {
        case .malformed:
            return .respond(Responses.error(400, "the path \(head.path) has a malformed percent-encoding"))
        case .refused:
            return .respond(Responses.error(404, "\(head.path) was not found"))
        case .segments(["upload"]):
            return upload.respond(to: head)
        case .segments(let segments) where segments.first == "uploads":
            return .respond(uploadedFiles.respond(to: head, segments: Array(segments.dropFirst())))
        case .segments(let segments):
            return .respond(root.respond(to: head, segments: segments))
        }
    }

    func completed(_ request: CompletedRequest) {
        guard accessLog else { return }
        let head = request.head
        let duration = String(Int((request.seconds * 1000).rounded())) + "ms"
        var line = "\(head.clientAddress) \(head.method) \(head.target) \(request.status) \(request.bodyBytes) \(duration)"
        if !request.completed { line += " (not completed: the connection ended early)" }
        line += "\n"
        // One write per line keeps lines from concurrent requests whole.
        _ = line.withCString { write(2, $0, strlen($0)) }
    }
}
