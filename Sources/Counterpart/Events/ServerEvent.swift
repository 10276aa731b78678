import HTTPTransfer

/// One thing that happened on a server, as `/__counterpart/events` sends it and
/// `ServerEvents.subscribe()` yields it. Ids count up by one with no gaps, across kinds, from a number
/// taken from the clock at the start (a restarted server's are larger).
public struct ServerEvent: Sendable {
    public let id: UInt64
    let stored: Stored

    /// What an event holds, as it is kept: a finished request stays as the server saw it
    /// (the journal's own object), and its entry (redacted) is made only when someone reads
    /// it. One reference whatever the kind (the rarer kinds are boxed), so that the backlog
    /// moves only references under its lock.
    enum Stored: Sendable {
        case request(RequestJournal.Kept)
        indirect case transfer(Transfer)
        indirect case resumable(ResumableChange)
        indirect case rule(RuleChange)
    }

    /// What happened.
    public enum Kind: Sendable {
        /// A request finished, as the journal records it (with the same redaction).
        case request(RequestJournal.Entry)
        /// An upload or a download in flight moved on (at most every 250 ms), or ended.
        case transfer(Transfer)
        /// A resumable upload was created, moved its offset, was taken over, completed,
        /// expired or was removed.
        case resumable(ResumableChange)
        /// A fault rule was armed, fired, removed, or all were cleared.
        case rule(RuleChange)
    }

    public var kind: Kind {
        switch stored {
        case .request(let kept): return .request(RequestJournal.Entry(kept))
        case .transfer(let transfer): return .transfer(transfer)
        case .resumable(let change): return .resumable(change)
        case .rule(let change): return .rule(change)
        }
    }

    /// The SSE event name: `request`, `transfer`, `resumable` or `rule`.
    public var name: String {
        switch stored {
        case .request: return "request"
        case .transfer: return "transfer"
        case .resumable: return "resumable"
        case .rule: return "rule"
        }
    }

    /// An upload's or a download's body bytes so far.
    public struct Transfer: Sendable, Equatable {
        public enum Direction: String, Sendable { case upload, download }
        /// Counts up per server; the same for every event of one transfer.
        public var id: Int
        public var direction: Direction
        public var method: String
        /// The path as sent.
        public var path: String
        public var bytes: UInt64
        /// The body's length when the client (upload) or the server (download) told it.
        public var total: UInt64?
        /// Bytes per second since the transfer's previous event.
        public var bytesPerSecond: Double
        /// The last event of this transfer: it completed or was cut.
        public var ended: Bool

        /// `bytes / total`, when the total is known.
        public var fraction: Double? { total.map { $0 == 0 ? 1 : Double(bytes) / Double($0) } }
    }

    /// A resumable upload (tus or the IETF draft) changed.
    public struct ResumableChange: Sendable, Equatable {
        public enum Change: String, Sendable { case created, offset, takenOver = "taken-over", completed, expired, removed }
        public var change: Change
        public var upload: String
        /// `tus` or `ietf`.
        public var `protocol`: String
        public var offset: UInt64
        public var length: UInt64?
    }

    /// A fault rule changed.
    public struct RuleChange: Sendable, Equatable {
        public enum Change: String, Sendable { case armed, fired, removed, cleared }
        public var change: Change
        /// The rule with its counts after the change; nil when every rule was cleared.
        public var rule: ServerFaults.Armed?
    }
}

extension ServerEvent {
    /// The event as SSE text (WHATWG HTML §9.2): its id, its name, its JSON on one line,
    /// written straight into one array of about `capacity` bytes.
    func frame(capacity: Int = 256) -> [UInt8] {
        var out = JSONWriter(capacity: capacity)
        stored.writeFrame(id: id, to: &out)
        return out.bytes
    }
}

extension ServerEvent.Stored {
    var isRequest: Bool {
        if case .request = self { return true }
        return false
    }

    /// The SSE text of the event with this id, appended to `out` (a stream's own writer),
    /// made from what is stored as it is: no `ServerEvent` is made for it.
    func writeFrame(id: UInt64, to out: inout JSONWriter) {
        out.raw("id: ")
        out.digits(id)
        switch self {
        case .request: out.raw("\nevent: request\ndata: ")
        case .transfer: out.raw("\nevent: transfer\ndata: ")
        case .resumable: out.raw("\nevent: resumable\ndata: ")
        case .rule: out.raw("\nevent: rule\ndata: ")
        }
        writeData(to: &out)
        out.raw("\n\n")
    }

    /// The event's data: a request's as the journal writes it (`RequestJournal.writeEntry`).
    func writeData(to out: inout JSONWriter) {
        switch self {
        case .request(let kept):
            RequestJournal.writeEntry(of: kept.request, sequence: kept.sequence, to: &out)
        case .transfer(let transfer):
            transfer.write(to: &out)
        case .resumable(let change):
            out.value(change.json)
        case .rule(let change):
            out.value(.object([("change", .string(change.change.rawValue)), ("rule", change.rule?.json ?? .null)]))
        }
    }
}

extension ServerEvent.Transfer {
    func write(to out: inout JSONWriter) {
        out.beginObject()
        out.key("id")
        out.number(id)
        out.key("direction")
        out.string(direction.rawValue)
        out.key("method")
        out.string(method)
        out.key("path")
        out.string(path)
        out.key("bytes")
        out.unsigned(bytes)
        out.key("total")
        out.unsigned(total)
        out.key("bytesPerSecond")
        out.unsigned(UInt64(max(0, bytesPerSecond).rounded()))
        out.key("ended")
        out.bool(ended)
        out.endObject()
    }
}

extension ServerEvent.ResumableChange {
    var json: JSON {
        .object([
            ("change", .string(change.rawValue)),
            ("upload", .string(upload)),
            ("protocol", .string(self.protocol)),
            ("offset", .unsigned(offset)),
            ("length", length.map(JSON.unsigned) ?? .null),
        ])
    }
}
