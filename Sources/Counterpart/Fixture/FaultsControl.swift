import Foundation

/// `/__counterpart/faults`: arming, listing and removing fault rules over HTTP.
///
/// - `POST` with `{"method"?, "path", "fault", "times"?, "skip"?}` → 201 and the rule.
/// - `GET` → `{"faults": [rule, …]}` with their counts.
/// - `DELETE` → 204 (every rule, and the `/bytes` `change-after` counters); `DELETE …/<id>` → 204 or 404.
struct FaultsControl: Sendable {
    let faults: ServerFaults

    /// A rule's JSON is small: a larger body is a mistake.
    static let maxBodyBytes = 64 * 1024

    func action(for head: RequestHead, segments: [String]) -> RequestAction {
        switch (head.method, segments) {
        case ("GET", []), ("HEAD", []):
            return .respond(Response.json(200, .object([("faults", .array(faults.rules.map(\.json)))])))
        case ("POST", []):
            if let length = head.contentLength, length > UInt64(Self.maxBodyBytes) {
                return .respond(Response.error(413, "a fault rule is at most \(Self.maxBodyBytes) bytes of JSON"))
            }
            return .receiveBody(CollectedBody(limit: Self.maxBodyBytes) { body in arm(body) })
        case ("DELETE", []):
            faults.clear()
            return .respond(Response(status: 204))
        case ("DELETE", _) where segments.count == 1:
            guard let id = Int(segments[0]), faults.remove(id: id) else {
                return .respond(Response.error(404, "there is no fault rule \(segments[0]); GET /__counterpart/faults lists them"))
            }
            return .respond(Response(status: 204))
        case (_, []):
            return .respond(Response.methodNotAllowed(head.method, allowed: ["GET", "HEAD", "POST", "DELETE"], on: head.path))
        case (_, _) where segments.count == 1:
            return .respond(Response.methodNotAllowed(head.method, allowed: ["DELETE"], on: head.path))
        default:
            return .respond(Response.error(404, "\(head.path) is not a control endpoint; rules are at /__counterpart/faults and /__counterpart/faults/<id>"))
        }
    }

    private func arm(_ body: [UInt8]) -> Response {
        do {
            let rule = try Self.rule(fromJSON: body)
            return Response.json(201, faults.arm(rule).json)
        } catch {
            return Response.error(400, "invalid fault rule: \(error)")
        }
    }

    /// The rule a JSON object describes; unknown fields are refused, so that a misspelt
    /// `time` is not silently a rule without a limit.
    static func rule(fromJSON body: [UInt8]) throws(FaultRuleError) -> FaultRule {
        guard let object = (try? JSONSerialization.jsonObject(with: Data(body))) as? [String: Any] else {
            throw FaultRuleError(field: "body", "not a JSON object; send {\"path\": \"/upload\", \"fault\": \"cut=1MiB\", \"times\": 2}")
        }
        let known = ["method", "path", "fault", "times", "skip"]
        if let unknown = object.keys.sorted().first(where: { !known.contains($0) }) {
            throw FaultRuleError(field: unknown, "unknown field; a rule has \(known.joined(separator: ", "))")
        }
        func string(_ field: String) throws(FaultRuleError) -> String? {
            guard let value = object[field], !(value is NSNull) else { return nil }
            guard let text = value as? String else { throw FaultRuleError(field: field, "must be a string") }
            return text
        }
        func integer(_ field: String) throws(FaultRuleError) -> Int? {
            guard let value = object[field], !(value is NSNull) else { return nil }
            // Booleans are NSNumbers too; their type says which is which ("c", not "i" or "q").
            guard let number = value as? NSNumber, String(cString: number.objCType) != "c", let whole = value as? Int else {
                throw FaultRuleError(field: field, "must be a whole number")
            }
            return whole
        }
        guard let path = try string("path") else { throw FaultRuleError(field: "path", "is missing (e.g. \"/upload\" or \"/files/*\")") }
        guard let faultText = try string("fault") else { throw FaultRuleError(field: "fault", "is missing (e.g. \"cut=1MiB\")") }
        let fault: FaultSpec
        do { fault = try FaultSpec(parsing: faultText) } catch { throw FaultRuleError(field: "fault", "invalid fault: \(error)") }
        return try FaultRule(method: try string("method"), path: path, fault: fault, times: try integer("times"), skip: try integer("skip") ?? 0)
    }
}

extension ServerFaults.Armed {
    var json: JSON {
        .object([
            ("id", .number(Int64(id))),
            ("method", rule.method.map(JSON.string) ?? .null),
            ("path", .string(rule.path)),
            ("fault", .string(rule.fault.description)),
            ("times", rule.times.map { .number(Int64($0)) } ?? .null),
            ("skip", .number(Int64(rule.skip))),
            ("matched", .number(Int64(matched))),
            ("applied", .number(Int64(applied))),
            ("remaining", remaining.map { .number(Int64($0)) } ?? .null),
        ])
    }
}

/// A small request body read whole, then answered by `answer`; past `limit` the
/// connection closes (the head's `Content-Length` is checked before).
final class CollectedBody: RequestBodyReceiver {
    private let limit: Int
    private let answer: ([UInt8]) -> Response
    private var bytes: [UInt8] = []

    init(limit: Int, answer: @escaping ([UInt8]) -> Response) {
        self.limit = limit
        self.answer = answer
    }

    func receive(_ chunk: UnsafeRawBufferPointer) -> BodyIntake {
        guard bytes.count + chunk.count <= limit else { return .close }
        bytes += chunk
        return .consumed
    }

    func finish() -> Response { answer(bytes) }

    func abandon() {}

    var receivedParts: [ReceivedPart] { [] }
}
