/// What the resumable-upload classifiers look at: a request's method and header fields,
/// as they arrived (the path is given to each classifier apart, already split).
public struct ResumableRequestHead: Sendable {
    public var method: String
    public var fields: [(name: String, value: String)]

    public init(method: String, fields: [(name: String, value: String)]) {
        self.method = method
        self.fields = fields
    }

    /// The first value of the field `name` (case-insensitive), without surrounding spaces.
    public func field(_ name: String) -> String? {
        fields.first { ASCII.equalsIgnoringCase($0.name, name) }.map { String(ASCII.trimmed($0.value[...])) }
    }

    /// Whether the field `name` is present at all.
    func has(_ name: String) -> Bool { fields.contains { ASCII.equalsIgnoringCase($0.name, name) } }

    /// The field as a number: `1*DIGIT` only (a sign, spaces inside or more than 2^64 − 1
    /// are not numbers); `.absent` when the field is not there.
    func number(_ name: String) -> FieldNumber {
        guard let text = field(name) else { return .absent }
        guard let value = ASCII.decimalNumber(text) else { return .invalid }
        return .value(value)
    }

    /// The field as a number, nil when it is absent; `invalid` is thrown when it is not a number.
    func optionalNumber<Refusal: Error>(_ name: String, invalid: Refusal) throws(Refusal) -> UInt64? {
        switch number(name) {
        case .absent: return nil
        case .invalid: throw invalid
        case .value(let value): return value
        }
    }

    /// `Content-Length`, when it is a valid number.
    var contentLength: UInt64? {
        if case .value(let length) = number("Content-Length") { return length }
        return nil
    }

    /// Whether a body follows (a non-zero Content-Length, or any Transfer-Encoding).
    var announcesBody: Bool {
        has("Transfer-Encoding") || field("Content-Length").map { $0 != "0" } ?? false
    }
}

/// A numeric field: there and valid, there and not a number, or not there.
enum FieldNumber: Equatable {
    case value(UInt64)
    case invalid
    case absent
}
