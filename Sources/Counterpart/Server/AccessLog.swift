/// The access log: one line per request on stderr, as text or as a JSON object (JSON lines,
/// for log collectors). Both carry the same fields: client, method, target, status, body
/// bytes (0 for HEAD), duration in milliseconds, and whether the response went out in full.
public enum AccessLogFormat: String, Sendable, CaseIterable {
    case text
    case json

    /// The line for one request, with its newline.
    func line(for request: CompletedRequest) -> String {
        let head = request.head
        let milliseconds = Int((request.seconds * 1000).rounded())
        // A body of no set length (the event stream) is logged as what it sent.
        let bytes = request.bodyBytes == .max ? request.bytesSent ?? 0 : request.bodyBytes
        switch self {
        case .text:
            var line = "\(head.clientAddress) \(head.method) \(head.target) \(request.status) \(bytes) \(milliseconds)ms"
            if !request.completed { line += " (not completed: the connection ended early)" }
            return line + "\n"
        case .json:
            let object = JSON.object([
                ("client", .string(head.clientAddress)),
                ("method", .string(head.method)),
                ("target", .string(head.target)),
                ("status", .number(Int64(request.status))),
                ("bytes", .unsigned(bytes)),
                ("ms", .number(Int64(milliseconds))),
                ("completed", .bool(request.completed)),
            ])
            return object.serialized + "\n"
        }
    }
}
