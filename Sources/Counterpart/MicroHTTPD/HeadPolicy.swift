import CGnuTLS
import CMicroHTTPD
import Dispatch
import Foundation
import HTTPTransfer
import Synchronization

// Answers the adapter itself decides on a request's head, before the router sees it.

/// The refusal of a head whose body framing is ambiguous or unsupported (RFC 9112 §6.3),
/// or that libmicrohttpd would frame otherwise than RFC 9112 does: it takes a body as
/// chunked only when the first `Transfer-Encoding` is exactly `chunked`, and reads any
/// other until the connection closes. The connection closes after the answer: the bytes
/// that follow cannot be trusted to start a request.
func headRefusal(_ head: RequestHead) -> Response? {
    let close = HTTPField(name: "Connection", value: "close")
    switch head.framing {
    case .failure(let refusal):
        return Response.error(refusal.status, refusal.description, headers: [close])
    case .success(.chunked):
        if let coding = head.header("Transfer-Encoding"), !ASCII.equalsIgnoringCase(coding, "chunked") {
            return Response.error(400, "Transfer-Encoding \"\(coding)\" must be exactly \"chunked\" here (libmicrohttpd frames no other spelling)",
                                   headers: [close])
        }
        return nil
    case .success:
        return nil
    }
}

/// The answer to a request on a connection past its client's limit; the connection then closes.
func tooManyConnections(_ held: Int, limit: Int, from client: String) -> Response {
    Response.error(503, "\(client) has \(held) connections open; this server takes at most \(limit) from one client",
                    headers: [HTTPField(name: "Connection", value: "close"), HTTPField(name: "Retry-After", value: "1")])
}

/// Reads a request body and throws it away, then gives the response decided on its head.
final class BodyDrain: RequestBodyReceiver {
    private let response: Response
    private let limit: UInt64
    private var received: UInt64 = 0

    init(response: Response, limit: UInt64) {
        self.response = response
        self.limit = limit
    }

    func receive(_ chunk: UnsafeRawBufferPointer) -> BodyIntake {
        received += UInt64(chunk.count)
        return received <= limit ? .consumed : .close
    }

    func finish() -> Response { response }

    func abandon() {}

    var receivedParts: [ReceivedPart] { [] }
}
