import HTTPTransfer

/// Faults to inject into one exchange, so that a client's handling of broken transfers
/// can be tested on purpose. Written `cut=1048576,delay=200` (also with `;` between, or as
/// query parameters `?cut=1048576&delay=200`).
public struct FaultSpec: Equatable, Sendable, CustomStringConvertible {
    /// Send the headers (full Content-Length), then close after this many body bytes; on
    /// an upload, close after reading this many request-body bytes.
    public var cut: UInt64?
    /// After this many body bytes, stop sending (or reading) but keep the connection open.
    public var stall: UInt64?
    /// Throttle the response body, or the reading of the upload body, to this many bytes
    /// per second.
    public var rate: UInt64?
    /// Wait this many milliseconds before the response headers.
    public var delayMilliseconds: UInt64?
    /// Answer with this status and a small JSON body instead.
    public var status: Int?
    /// Close the connection without any response (a TCP reset).
    public var reset: Bool

    /// The fault names, in the order they are described.
    public static let names = ["cut", "stall", "rate", "delay", "status", "reset"]

    public init(cut: UInt64? = nil, stall: UInt64? = nil, rate: UInt64? = nil, delayMilliseconds: UInt64? = nil,
                status: Int? = nil, reset: Bool = false) {
        self.cut = cut
        self.stall = stall
        self.rate = rate
        self.delayMilliseconds = delayMilliseconds
        self.status = status
        self.reset = reset
    }

    public var isEmpty: Bool { self == FaultSpec() }

    /// Parses `cut=1048576, delay=200` (`,` or `;` between faults). Byte counts take the
    /// suffixes of `ByteCount`: `cut=1M`, `rate=64KiB`.
    public init(parsing text: String) throws(FaultSpecError) {
        self.init()
        for item in text.split(whereSeparator: { $0 == "," || $0 == ";" }) {
            let pair = item.split(separator: "=", maxSplits: 1).map { String(ASCII.trimmed($0)) }
            guard let name = pair.first, !name.isEmpty else { continue }
            try set(name, pair.count == 2 ? pair[1] : nil)
        }
    }

    /// The faults named in query arguments (`?cut=…&delay=…`); other arguments are ignored.
    init(query: [(name: String, value: String?)]) throws(FaultSpecError) {
        self.init()
        for argument in query where Self.names.contains(argument.name) {
            try set(argument.name, argument.value.map { PercentEncoding.decode($0) ?? $0 })
        }
    }

    /// `other`'s faults where it has them, this one's elsewhere.
    func overridden(by other: FaultSpec) -> FaultSpec {
        FaultSpec(cut: other.cut ?? cut, stall: other.stall ?? stall, rate: other.rate ?? rate,
                  delayMilliseconds: other.delayMilliseconds ?? delayMilliseconds,
                  status: other.status ?? status, reset: other.reset || reset)
    }

    private mutating func set(_ name: String, _ value: String?) throws(FaultSpecError) {
        func bytes() throws(FaultSpecError) -> UInt64 {
            guard let value, let count = ByteCount.parse(value) else {
                throw FaultSpecError("\(name) needs a byte count (e.g. \(name)=1048576 or \(name)=1MiB)")
            }
            return count
        }
        switch name {
        case "cut": cut = try bytes()
        case "stall": stall = try bytes()
        case "rate":
            let value = try bytes()
            guard value > 0 else { throw FaultSpecError("rate needs at least 1 byte per second") }
            rate = value
        case "delay":
            guard let value, let milliseconds = ASCII.decimalNumber(value), milliseconds <= Self.maxDelayMilliseconds else {
                throw FaultSpecError("delay needs milliseconds from 0 to \(Self.maxDelayMilliseconds) (e.g. delay=200)")
            }
            delayMilliseconds = milliseconds
        case "status":
            guard let value, let code = Int(value), (200...599).contains(code) else {
                throw FaultSpecError("status needs an HTTP status from 200 to 599 (e.g. status=503)")
            }
            status = code
        case "reset":
            guard value == nil || value == "" || value == "1" || value == "true" else {
                throw FaultSpecError("reset takes no value")
            }
            reset = true
        default:
            throw FaultSpecError("unknown fault \"\(name)\"; the faults are \(Self.names.joined(separator: ", "))")
        }
    }

    /// A delay longer than this is surely a mistake (10 minutes).
    public static let maxDelayMilliseconds: UInt64 = 600_000

    /// `cut=…,stall=…` with the faults set.
    public var description: String {
        var parts: [String] = []
        if let cut { parts.append("cut=\(cut)") }
        if let stall { parts.append("stall=\(stall)") }
        if let rate { parts.append("rate=\(rate)") }
        if let delayMilliseconds { parts.append("delay=\(delayMilliseconds)") }
        if let status { parts.append("status=\(status)") }
        if reset { parts.append("reset") }
        return parts.joined(separator: ",")
    }
}

public struct FaultSpecError: Error, Equatable, Sendable, CustomStringConvertible {
    public var description: String
    init(_ description: String) { self.description = description }
}

/// Byte counts as people write them: `1048576`, `512K`, `10MiB`, `2G` (binary units).
public enum ByteCount {
    public static func parse(_ text: String) -> UInt64? {
        let units: [(String, UInt64)] = [("KIB", 1 << 10), ("MIB", 1 << 20), ("GIB", 1 << 30), ("TIB", 1 << 40),
                                         ("KB", 1 << 10), ("MB", 1 << 20), ("GB", 1 << 30), ("TB", 1 << 40),
                                         ("K", 1 << 10), ("M", 1 << 20), ("G", 1 << 30), ("T", 1 << 40), ("B", 1)]
        let upper = text.uppercased()
        for (suffix, factor) in units where upper.hasSuffix(suffix) {
            guard let number = ASCII.decimalNumber(upper.dropLast(suffix.count)) else { return nil }
            let (product, overflow) = number.multipliedReportingOverflow(by: factor)
            return overflow ? nil : product
        }
        return ASCII.decimalNumber(text)
    }
}
