import Glibc

/// Maps method and path to an endpoint: `/upload` to uploads, `/uploads/...` to the
/// uploads folder, everything else to the static root. Writes the access log.
struct Router: RequestHandler {
    let root: StaticFiles
    let uploadedFiles: StaticFiles
    let upload: UploadEndpoint
    let accessLog: Bool

    func handle(_ head: RequestHead) -> RequestAction {
        let path = head.path
        if path == "/upload" {
            return upload.respond(to: head)
        }
        if path == "/uploads" || path.hasPrefix("/uploads/") {
            return .respond(uploadedFiles.respond(to: head, relativePath: path.dropFirst("/uploads".count)))
        }
        return .respond(root.respond(to: head, relativePath: path[...]))
    }

    func completed(_ request: CompletedRequest) {
        guard accessLog else { return }
        let head = request.head
        let target = head.query.isEmpty ? head.path
            : head.path + "?" + head.query.map { argument in argument.value.map { "\(argument.name)=\($0)" } ?? argument.name }.joined(separator: "&")
        let duration = String(Int((request.seconds * 1000).rounded())) + "ms"
        var line = "\(head.clientAddress) \(head.method) \(target) \(request.status) \(request.bodyBytes) \(duration)"
        if !request.completed { line += " (not completed: the connection ended early)" }
        line += "\n"
        // One write per line keeps lines from concurrent requests whole.
        _ = line.withCString { write(2, $0, strlen($0)) }
    }
}
