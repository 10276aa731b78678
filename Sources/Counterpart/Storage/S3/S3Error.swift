/// Why an S3 call failed, as the layers above decide on it.
public enum S3Error: Error, Equatable, CustomStringConvertible {
    /// 404 for the key (NoSuchKey, or a HEAD's bodiless 404).
    case notFound
    /// A conditional write lost: 412, or on RGW also a 500 to a conditional PUT, which is what
    /// a loser of racing `If-Match` writers can get (RGW 16.2, measured).
    case preconditionFailed
    /// Any other answer that is not a success, with the S3 error code and message when the
    /// body had them (a HEAD's has none).
    case status(Int, code: String, message: String)
    /// No HTTP answer: the endpoint is down or unreachable, the connection broke, a time-out.
    case transport(String)
    /// The request was refused before it was sent (a metadata name S3 cannot carry, a key
    /// out of bounds).
    case invalidRequest(String)

    public var description: String {
        switch self {
        case .notFound:
            return "S3: no such key"
        case .preconditionFailed:
            return "S3: the condition of a conditional write did not hold"
        case .status(let status, let code, let message):
            let detail = [code, message].filter { !$0.isEmpty }.joined(separator: ": ")
            if detail.isEmpty {
                return status == 403
                    ? "S3 answered 403 without a reason (a HEAD has no body): check the access key, the secret and the region"
                    : "S3 answered \(status)"
            }
            return "S3 answered \(status) \(detail)"
        case .transport(let detail):
            return "S3 could not be reached: \(detail)"
        case .invalidRequest(let detail):
            return "S3 request refused before sending: \(detail)"
        }
    }
}
