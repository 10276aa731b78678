/// An `Upload-Draft-Interop-Version` of "Resumable Uploads for HTTP"
/// (draft-ietf-httpbis-resumable-upload), and every rule that changed from one to the next:
/// the code's side of the version table in docs/resumable-uploads.md. iOS and macOS 17
/// send 3, 18.0 sends 5, 18.1 sends 6, 26 sends 8; the drafts define 3 to 9.
public struct InteropVersion: Equatable, Hashable, Sendable, CustomStringConvertible {
    public let number: Int

    public static let supported = 3...9
    public static let newest = InteropVersion(9)!

    public init?(_ number: Int) {
        guard Self.supported.contains(number) else { return nil }
        self.number = number
    }

    /// What the request's `Upload-Draft-Interop-Version` says: nil when it has none.
    static func of(_ head: ResumableRequestHead) -> Result<InteropVersion, ResumableUploadRefusal>? {
        guard let text = head.field(fieldName) else { return nil }
        guard let version = ASCII.decimalNumber(text).flatMap({ Int(exactly: $0) }).flatMap(InteropVersion.init) else {
            return .failure(ResumableUploadRefusal(.unsupportedVersion(text), version: nil))
        }
        return .success(version)
    }

    /// The request's version, when it has one this server speaks.
    public static func requested(in head: ResumableRequestHead) -> InteropVersion? {
        if case .success(let version)? = of(head) { return version }
        return nil
    }

    public static let fieldName = "Upload-Draft-Interop-Version"
    public var description: String { String(number) }

    /// Version 3 says `Upload-Incomplete` (true: more to come); later ones `Upload-Complete`.
    public var completenessFieldName: String { number == 3 ? "Upload-Incomplete" : "Upload-Complete" }

    /// The structured-field boolean (RFC 9651 §3.3.6) that says `complete` in this version.
    public func completenessValue(_ complete: Bool) -> String { (number == 3) != complete ? "?1" : "?0" }

    /// Whether the request says its content ends the upload; nil when it does not say.
    func requestSaysComplete(_ head: ResumableRequestHead) -> Bool? {
        switch head.field(completenessFieldName) {
        case "?1": return number != 3
        case "?0": return number == 3
        default: return nil
        }
    }

    /// From 6 (draft -04): appends are `application/partial-upload`.
    public var requiresPartialUploadType: Bool { number >= 6 }
    /// From 6: `Upload-Limit`, `Upload-Length` in offset responses, problem details.
    public var hasLimits: Bool { number >= 6 }
    /// Up to 6 (drafts -01 to -05), every answer while the upload is active carries
    /// `Upload-Offset`, "either when the response is a success … or when the response is a
    /// failure"; appends are answered 201. From 7, `Upload-Complete` instead, and 204.
    public var offsetInAnswers: Bool { number <= 6 }
    public var appendStatus: Int { number <= 6 ? 201 : 204 }
    /// Final answers say `Upload-Complete` from 7 (and `Upload-Incomplete` in 3).
    public var completenessInFinalAnswers: Bool { number >= 7 || number == 3 }
    /// Version 6 calls the lifetime limit `expires`, later ones `max-age`.
    public var lifetimeKey: String { number == 6 ? "expires" : "max-age" }
    /// Version 8 (drafts -10, -11) wants `Accept-Patch` in OPTIONS answers.
    public var announcesAcceptPatch: Bool { number == 8 }
    /// Version 9 (draft -12) also retrieves the offset with GET.
    public var allowsGetForOffset: Bool { number >= 9 }
    /// Up to 6 (drafts -01 to -05), an offset request or a cancellation that carries
    /// `Upload-Offset`, `Upload-Complete`/`Upload-Incomplete` (or `Upload-Length`) "MUST"
    /// be rejected with 400.
    public var refusesUploadFieldsOutsideAppends: Bool { number <= 6 }
    /// From 9 (draft -12): a valid append to a completed upload gets its final answer again.
    public var replaysFinalAnswer: Bool { number >= 9 }
    /// From 9 (draft -12): a 409 for a mismatching offset says the upload is not complete.
    public var completenessInOffsetMismatch: Bool { number >= 9 }

    /// What an append that goes past the upload's length gets.
    public var appendPastLength: AppendPastLength {
        switch number {
        case ...6: .refused(status: 400)  // draft -05 §4.4: 400
        case 7: .refused(status: 413)  // drafts -06 to -08 say nothing more; kept as it was
        default: .invalidates  // draft -08 and later: "mark the upload resource as invalid"
        }
    }

    public enum AppendPastLength: Equatable, Sendable {
        /// Refused with this status; the upload stays as it was.
        case refused(status: Int)
        /// Refused with 400 (`inconsistent-upload-length`), and the upload is invalid from then on.
        case invalidates
    }
}
