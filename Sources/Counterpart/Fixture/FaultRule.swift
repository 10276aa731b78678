import HTTPTransfer

/// A fault armed on the server for the requests that match it, counted: "cut the first two
/// uploads, then let the third through", a retry loop's whole story, for clients whose
/// requests a test cannot change (no header, no query).
public struct FaultRule: Sendable, Equatable {
    /// The method it matches (exactly, `POST`); nil: any.
    public var method: String?
    /// The decoded path it matches exactly (`/upload`), or every path that starts with
    /// what comes before a final `*` (`/files/*`).
    public var path: String
    public var fault: FaultSpec
    /// How many matching requests it faults; nil: every one.
    public var times: Int?
    /// How many matching requests it lets through before it faults.
    public var skip: Int

    public init(method: String? = nil, path: String, fault: FaultSpec, times: Int? = nil, skip: Int = 0) throws(FaultRuleError) {
        if let method, method.isEmpty || !method.utf8.allSatisfy(ASCII.isTokenChar) {
            throw FaultRuleError(field: "method", "\"\(method)\" is not an HTTP method (e.g. POST)")
        }
        guard path.hasPrefix("/") else { throw FaultRuleError(field: "path", "\"\(path)\" must start with / (e.g. /upload or /files/*)") }
        guard !fault.isEmpty else { throw FaultRuleError(field: "fault", "a rule needs a fault (e.g. cut=1MiB or status=503)") }
        if let times, times < 1 { throw FaultRuleError(field: "times", "\(times) must be 1 or more (leave it out for no limit)") }
        guard skip >= 0 else { throw FaultRuleError(field: "skip", "\(skip) must be 0 or more") }
        self.method = method
        self.path = path
        self.fault = fault
        self.times = times
        self.skip = skip
    }

    /// The command line's form: `[METHOD] PATH FAULT… [times=N] [skip=N]`, words separated
    /// by spaces, faults in the fault-spec grammar (`POST /upload cut=1MiB times=2`).
    public init(parsing text: String) throws(FaultRuleError) {
        var words = text.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        var method: String?
        if let first = words.first, !first.hasPrefix("/"), !first.contains("=") {
            method = first
            words.removeFirst()
        }
        guard let path = words.first, path.hasPrefix("/") else {
            throw FaultRuleError(field: "path", "\"\(text)\" has no path; write [METHOD] PATH FAULT [times=N] [skip=N], e.g. POST /upload cut=1MiB times=2")
        }
        var faults: [String] = []
        var times: Int?
        var skip = 0
        for word in words.dropFirst() {
            if word.hasPrefix("times=") {
                guard let value = Int(word.dropFirst(6)) else { throw FaultRuleError(field: "times", "\"\(word)\" needs a number") }
                times = value
            } else if word.hasPrefix("skip=") {
                guard let value = Int(word.dropFirst(5)) else { throw FaultRuleError(field: "skip", "\"\(word)\" needs a number") }
                skip = value
            } else {
                faults.append(word)
            }
        }
        let fault: FaultSpec
        do { fault = try FaultSpec(parsing: faults.joined(separator: ",")) } catch {
            throw FaultRuleError(field: "fault", "invalid fault: \(error)")
        }
        try self.init(method: method, path: path, fault: fault, times: times, skip: skip)
    }

    func matches(method: String, path: String) -> Bool {
        if let expected = self.method, expected != method { return false }
        if self.path.hasSuffix("*") { return path.hasPrefix(self.path.dropLast()) }
        return path == self.path
    }

    /// `POST /upload cut=1048576 times=2`: the command line's form.
    public var description: String {
        ([method, path, fault.description, times.map { "times=\($0)" }, skip > 0 ? "skip=\(skip)" : nil] as [String?])
            .compactMap { $0 }.joined(separator: " ")
    }
}

/// A rule that cannot be armed, and the field that is wrong.
public struct FaultRuleError: Error, Equatable, Sendable, CustomStringConvertible {
    public var field: String
    public var reason: String

    init(field: String, _ reason: String) {
        self.field = field
        self.reason = reason
    }

    public var description: String { "\(field): \(reason)" }
}
