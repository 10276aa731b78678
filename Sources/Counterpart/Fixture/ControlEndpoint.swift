/// `/__counterpart/...`: the server's own endpoints for the tests that use it — health,
/// the request journal, clearing the uploads. Those that change state answer only
/// loopback clients unless the server allows remote control.
struct ControlEndpoint: Sendable {
    let journal: RequestJournal
    let store: UploadStore
    let allowsRemoteControl: Bool
    /// Told in the health answer, so that a client (the upload page) can refuse a file
    /// that is too large before sending it.
    let maxUploadBytes: UInt64

    static let prefix = "__counterpart"

    func respond(to head: RequestHead, segments: [String]) -> Response {
        switch (head.method, segments) {
        case ("GET", ["health"]), ("HEAD", ["health"]):
            return Responses.json(200, .object([("status", .string("ok")), ("maxUploadBytes", .unsigned(maxUploadBytes))]))
        case ("GET", ["requests"]), ("HEAD", ["requests"]):
            let path = head.queryArgument("path") ?? nil
            let method = head.queryArgument("method") ?? nil
            return Responses.json(200, .object([("requests", .array(journal.requests(path: path, method: method).map(\.json)))]))
        case ("DELETE", ["requests"]):
            if let refusal = refusedIfRemote(head) { return refusal }
            journal.clear()
            return Response(status: 204)
        case ("DELETE", ["uploads"]):
            if let refusal = refusedIfRemote(head) { return refusal }
            return Responses.json(200, .object([("removed", .number(Int64(store.removeStoredFiles())))]))
        case (_, ["health"]), (_, ["requests"]):
            return Responses.methodNotAllowed(head.method, allowed: segments == ["health"] ? ["GET", "HEAD"] : ["GET", "HEAD", "DELETE"], on: head.path)
        case (_, ["uploads"]):
            return Responses.methodNotAllowed(head.method, allowed: ["DELETE"], on: head.path)
        default:
            return Responses.error(404, "\(head.path) is not a control endpoint; they are /__counterpart/health, /__counterpart/requests and /__counterpart/uploads")
        }
    }

    private func refusedIfRemote(_ head: RequestHead) -> Response? {
        guard !allowsRemoteControl, !Self.isLoopback(head.clientAddress) else { return nil }
        return Responses.error(403, "\(head.method) \(head.path) answers only clients on this machine (start the server with --allow-remote-control)")
    }

    static func isLoopback(_ address: String) -> Bool {
        address.hasPrefix("127.") || address == "::1" || address.hasPrefix("::ffff:127.")
    }
}
