import HTTPTransfer

/// `/__counterpart/`: a page that shows the server's events as they happen — the request
/// log, transfers in flight, resumable uploads, fault rules — in plain HTML, CSS and
/// JavaScript served from here (nothing to fetch from elsewhere), with the rights of the
/// other control endpoints.
enum LivePage {
    static let assets: [String: (contentType: String, body: String)] = [
        "live.css": ("text/css; charset=utf-8", css),
        "live.js": ("text/javascript; charset=utf-8", js),
    ]
}

extension EventsEndpoint {
    /// The page, its style and script, and the event stream; nil for the other control paths.
    func page(for head: RequestHead, segments: [String]) -> Response? {
        let (contentType, body): (String, String)
        switch segments {
        case ["events"]:
            return respond(to: head)
        case []:
            (contentType, body) = ("text/html; charset=utf-8", LivePage.html)
        case _ where segments.count == 1 && LivePage.assets[segments[0]] != nil:
            (contentType, body) = LivePage.assets[segments[0]]!
        default:
            return nil
        }
        guard head.method == "GET" || head.method == "HEAD" else {
            return Response.methodNotAllowed(head.method, allowed: ["GET", "HEAD"], on: head.path)
        }
        return Response(status: 200, headers: [
            HTTPField(name: "Content-Type", value: contentType),
            HTTPField(name: "Cache-Control", value: "no-cache"),
            HTTPField(name: "X-Content-Type-Options", value: "nosniff"),
        ], body: .bytes(Array(body.utf8)))
    }
}
