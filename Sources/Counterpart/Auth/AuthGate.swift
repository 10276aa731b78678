/// Decides on a request's head, before the router takes anything, whether it may go on:
/// the right its path needs (`AccessPolicy`), the credential it carries (`AccessControl`),
/// the owner of the resumable upload it touches, and the rule that the control endpoints
/// answer only this machine unless remote control is allowed.
struct AuthGate: Sendable {
    /// nil: no credentials configured, every client may do everything (but remote control).
    let accessControl: AccessControl?
    let allowsRemoteControl: Bool
    /// The user who created a resumable upload: `.some(nil)` for one created without
    /// credentials, nil when there is no such upload.
    let ownerOfUpload: @Sendable (String) -> String??
    let failures: FailureLog

    enum Decision {
        /// Go on, as this user (nil without credentials).
        case pass(user: String?)
        case refuse(Response)
    }

    func decide(_ head: RequestHead, path: RequestPath) -> Decision {
        // Without credentials only remote control is refused: a client on this machine (and
        // every client, with remote control allowed) passes without a look at its path.
        if accessControl == nil, allowsRemoteControl || ControlEndpoint.isLoopback(head.clientAddress) { return .pass(user: nil) }
        let requirement = AccessPolicy.requirement(for: head, path: path)
        guard let right = requirement.right else { return .pass(user: nil) }
        var user: String?
        if let accessControl {
            let credentials = PresentedCredentials(head)
            switch accessControl.authenticate(credentials) {
            case .rejected(let reason, let triedName):
                failures.record(client: head.clientAddress, name: triedName)
                return .refuse(Response.error(401, reason, headers: accessControl.challenges(after: credentials)))
            case .authenticated(let name, let rights):
                guard rights.contains(right) else {
                    return .refuse(Response.error(403, "\(name) may not \(Self.verb(right)) (\(head.method) \(head.path) needs the right \"\(right)\"; \(name) has \"\(rights)\")"))
                }
                user = name
            }
        }
        if right == .control, !allowsRemoteControl, !ControlEndpoint.isLoopback(head.clientAddress) {
            return .refuse(Response.error(403, "\(head.method) \(head.path) answers only clients on this machine (start the server with --allow-remote-control)"))
        }
        // Ownership counts only while there are credentials: a server restarted without
        // them lets anyone finish what its users began, as it lets them do everything else.
        for id in requirement.uploads where accessControl != nil {
            if case .some(.some(let owner)) = ownerOfUpload(id), owner != user {
                return .refuse(Response.error(403, "the upload \(id) belongs to another user"))
            }
        }
        return .pass(user: user)
    }

    private static func verb(_ right: AccessRights) -> String {
        switch right {
        case .write: return "upload"
        case .control: return "use the control endpoints"
        default: return "read files"
        }
    }
}
