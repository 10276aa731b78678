/// What a credential lets its holder do: a set of `read`, `write` and `control`, written
/// `read,write` in the auth and token files.
public struct AccessRights: OptionSet, Sendable, Hashable, CustomStringConvertible {
    public let rawValue: UInt8

    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// `GET` and `HEAD` of files under the root and `/uploads/`, listings, `/bytes/N`.
    public static let read = AccessRights(rawValue: 1)
    /// `POST /upload`, tus at `/files/`, the IETF resumable resources at `/resumable/`.
    public static let write = AccessRights(rawValue: 2)
    /// The `/__counterpart/` endpoints that change state, and the request journal.
    public static let control = AccessRights(rawValue: 4)

    private static let named: [(name: String, rights: AccessRights)] = [("read", .read), ("write", .write), ("control", .control)]

    /// `read`, `read,write`, `read,write,control`…: each name once at most, in any order.
    public init?(parsing text: some StringProtocol) {
        var rights: AccessRights = []
        for name in text.split(separator: ",", omittingEmptySubsequences: false) {
            guard let right = Self.named.first(where: { $0.name == name })?.rights, !rights.contains(right) else { return nil }
            rights.insert(right)
        }
        guard !rights.isEmpty else { return nil }
        self = rights
    }

    public var description: String {
        Self.named.filter { contains($0.rights) }.map(\.name).joined(separator: ",")
    }
}
