/// Cross-origin access for browser apps on another origin (`--cors ORIGIN` or `*`): the
/// `Access-Control-*` headers on every answer, and the answer to preflight `OPTIONS`.
struct CORS: Sendable {
    /// The origin allowed, or `*` for any.
    let allowedOrigin: String

    /// Headers a page may read from answers: what download and resume code needs.
    static let exposedHeaders = "Content-Range, Content-Length, ETag, Accept-Ranges, Content-Disposition, Last-Modified"
    static let allowedMethods = "GET, HEAD, POST, DELETE, OPTIONS"
    static let maxAgeSeconds = 600

    /// The headers for a request from `origin`, or none when that origin is not allowed.
    func headers(for head: RequestHead) -> [HTTPField] {
        guard let origin = head.header("Origin") else { return [] }
        if allowedOrigin == "*" {
            return [HTTPField(name: "Access-Control-Allow-Origin", value: "*"),
                    HTTPField(name: "Access-Control-Expose-Headers", value: Self.exposedHeaders)]
        }
        guard origin == allowedOrigin else { return [HTTPField(name: "Vary", value: "Origin")] }
        return [HTTPField(name: "Access-Control-Allow-Origin", value: origin),
                HTTPField(name: "Vary", value: "Origin"),
                HTTPField(name: "Access-Control-Expose-Headers", value: Self.exposedHeaders)]
    }

    /// The answer to a preflight request (`OPTIONS` with `Origin` and
    /// `Access-Control-Request-Method`), or nil for any other request.
    func preflight(_ head: RequestHead) -> Response? {
        guard head.isCORSPreflight else { return nil }
        var headers = self.headers(for: head).filter { $0.name != "Access-Control-Expose-Headers" }
        if headers.contains(where: { $0.name == "Access-Control-Allow-Origin" }) {
            headers.append(HTTPField(name: "Access-Control-Allow-Methods", value: Self.allowedMethods))
            if let requested = head.header("Access-Control-Request-Headers") {
                headers.append(HTTPField(name: "Access-Control-Allow-Headers", value: requested))
            }
            headers.append(HTTPField(name: "Access-Control-Max-Age", value: String(Self.maxAgeSeconds)))
        }
        return Response(status: 204, headers: headers)
    }

    /// The action with these headers on its answer.
    func decorate(_ action: RequestAction, for head: RequestHead) -> RequestAction {
        let extra = headers(for: head)
        guard !extra.isEmpty else { return action }
        switch action {
        case .respond(var response):
            response.headers += extra
            return .respond(response)
        case .receiveBody(let receiver, let interim):
            return .receiveBody(AnswerMapping(receiver) { response in
                var response = response
                response.headers += extra
                return response
            }, interim: interim)
        case .reset:
            return .reset
        }
    }
}

/// A body receiver whose answer is changed on the way out.
final class AnswerMapping: RequestBodyReceiver {
    private let inner: any RequestBodyReceiver
    private let map: (Response) -> Response

    init(_ inner: any RequestBodyReceiver, map: @escaping (Response) -> Response) {
        self.inner = inner
        self.map = map
    }

    func receive(_ chunk: UnsafeRawBufferPointer) -> BodyIntake { inner.receive(chunk) }
    func finish() -> Response { map(inner.finish()) }
    func abandon() { inner.abandon() }
    var receivedParts: [ReceivedPart] { inner.receivedParts }
}
