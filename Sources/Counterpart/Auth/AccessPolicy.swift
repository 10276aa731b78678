/// Which right a request needs, from its method, path and head alone (decided before any
/// endpoint takes a lock, a slot or a file).
enum AccessPolicy {
    struct Requirement: Equatable {
        /// nil: anyone (the health check, CORS preflights).
        var right: AccessRights?
        /// Ids of the resumable uploads (tus or IETF, one store) the request acts on: they
        /// answer only the user who created them.
        var uploads: [String] = []
    }

    static func requirement(for head: RequestHead, path: RequestPath) -> Requirement {
        // A browser sends a preflight without credentials (Fetch standard, "CORS-preflight
        // request"); the real request that follows carries them and is checked then.
        if head.isCORSPreflight { return Requirement(right: nil) }
        guard case .segments(let segments) = path, let first = segments.first else { return Requirement(right: .read) }
        switch first {
        case ControlEndpoint.prefix:
            // Liveness probes (a container's health check) and the upload page's size
            // check read only "ok" and the upload limit.
            return Requirement(right: segments.dropFirst() == ["health"] ? nil : .control)
        case "upload":
            return Requirement(right: segments.count == 1 ? .write : .read)
        case ResumableUploads.pathPrefix:
            return Requirement(right: .write, uploads: Array(segments.dropFirst().prefix(1)))
        case "files":
            var uploads = Array(segments.dropFirst().prefix(1))
            // tus concatenation names its partial uploads in the head (`final;/files/a /files/b`).
            if let concat = head.header("Upload-Concat"), concat.hasPrefix("final;") {
                uploads += concat.dropFirst("final;".count).split(separator: " ").compactMap { $0.split(separator: "/").last.map(String.init) }
            }
            return Requirement(right: .write, uploads: uploads)
        default:
            return Requirement(right: .read)
        }
    }
}
