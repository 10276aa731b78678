/// `/__counterpart/...`: the server's own endpoints for the tests that use it — health,
/// the request journal, clearing the uploads, fault rules. Those that change state answer
/// only loopback clients unless the server allows remote control.
struct ControlEndpoint: Sendable {
    let journal: RequestJournal
    let store: any UploadStorage
    let faults: FaultsControl
    let touch: TouchEndpoint
    let events: EventsEndpoint
    let allowsRemoteControl: Bool
    /// Told in the health answer, so that a client (the upload page) can refuse a file
    /// that is too large before sending it.
    let maxUploadBytes: UInt64

    static let prefix = "__counterpart"

    func action(for head: RequestHead, segments: [String]) -> RequestAction {
        if let live = events.page(for: head, segments: segments) { return .respond(live) }
        guard segments.first == "faults" else { return .respond(respond(to: head, segments: segments)) }
        if head.method != "GET", head.method != "HEAD", let refusal = refusedIfRemote(head) { return .respond(refusal) }
        return faults.action(for: head, segments: Array(segments.dropFirst()))
    }

    func respond(to head: RequestHead, segments: [String]) -> Response {
        switch (head.method, segments) {
        case ("GET", ["health"]), ("HEAD", ["health"]):
            return Response.json(200, .object([("status", .string("ok")), ("maxUploadBytes", .unsigned(maxUploadBytes))]))
        case ("GET", ["requests"]), ("HEAD", ["requests"]):
            let path = head.queryArgument("path") ?? nil
            let method = head.queryArgument("method") ?? nil
            return Response.json(200, written: journal.requestsJSON(path: path, method: method))
        case ("DELETE", ["requests"]):
            if let refusal = refusedIfRemote(head) { return refusal }
            journal.clear()
            return Response(status: 204)
        case ("DELETE", ["uploads"]):
            if let refusal = refusedIfRemote(head) { return refusal }
            return Response.json(200, .object([("removed", .number(Int64(store.removeStoredFiles())))]))
        case (_, ["health"]), (_, ["requests"]):
            return Response.methodNotAllowed(head.method, allowed: segments == ["health"] ? ["GET", "HEAD"] : ["GET", "HEAD", "DELETE"], on: head.path)
        case (_, ["touch"]):
            if let refusal = refusedIfRemote(head) { return refusal }
            return touch.respond(to: head)
        case (_, ["uploads"]):
            return Response.methodNotAllowed(head.method, allowed: ["DELETE"], on: head.path)
        default:
            return Response.error(404, "\(head.path) is not a control endpoint; they are /__counterpart/ (the live page), /__counterpart/events, /__counterpart/health, /__counterpart/requests, /__counterpart/uploads, /__counterpart/faults and /__counterpart/touch")
        }
    }

    private func refusedIfRemote(_ head: RequestHead) -> Response? {
        guard !allowsRemoteControl, !Self.isLoopback(head.clientAddress) else { return nil }
        return Response.error(403, "\(head.method) \(head.path) answers only clients on this machine (start the server with --allow-remote-control)")
    }

    static func isLoopback(_ address: String) -> Bool {
        address.hasPrefix("127.") || address == "::1" || address.hasPrefix("::ffff:127.")
    }
}
