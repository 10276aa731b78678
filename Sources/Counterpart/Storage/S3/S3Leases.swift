import Foundation

/// Leases on resumable uploads as objects of the store, `.counterpart/leases/ID`, written
/// with the store's atomic conditional writes: a lease is created with `If-None-Match: *`
/// (of servers racing for it, one wins) and renewed or taken over with `If-Match` on the
/// version read (one of the racers wins; RGW answers a lost race 412, or 500). No other
/// service is needed, and a lease outlives no holder: one not renewed for `leaseTimeout`
/// (a server killed) is taken over.
///
/// A holder renews while bytes come and before each save; a silent holder is taken over
/// only after `ResumableLocker.silenceBeforeTakeover`, so a save begun right after a renewal
/// finishes before anyone else may write.
final class S3Leases: ResumableLeases {
    let client: S3Client
    static let prefix = ".counterpart/leases/"
    /// A lease whose holder renewed nothing for this long is dead (its server died while it
    /// concluded, when it does not allow takeover).
    static let leaseTimeout: Int64 = 30_000

    init(client: S3Client) {
        self.client = client
    }

    private struct Lease: Codable {
        var owner: String
        /// Milliseconds since 1970 of the last renewal (bytes came then).
        var renewedAt: Int64
        /// Whether the holder reads a body now, so that a newer request may take over once it is silent.
        var allowsTakeover: Bool
    }

    private static func key(_ id: String) -> String { prefix + id }

    private static func now() -> Int64 { Int64(Date().timeIntervalSince1970 * 1000) }

    func acquire(_ id: String, owner: String, takingOver: Bool) throws(StorageError) -> String? {
        let lease = Lease(owner: owner, renewedAt: Self.now(), allowsTakeover: true)
        if let version = try write(lease, id, .ifNoneMatch) { return version }
        // Held: taken over only from a holder gone silent while it read a body, or dead.
        guard let (current, version) = try read(id) else {
            // Released meanwhile: try once more.
            return try write(lease, id, .ifNoneMatch)
        }
        let silence = Self.now() - current.renewedAt
        let silent = current.allowsTakeover && takingOver
            && silence >= Int64(ResumableLocker.silenceBeforeTakeover.components.seconds * 1000)
        guard silent || silence >= Self.leaseTimeout else { return nil }
        return try write(lease, id, .ifMatch(version))
    }

    func renew(_ id: String, owner: String, version: String, allowingTakeover: Bool) throws(StorageError) -> String? {
        try write(Lease(owner: owner, renewedAt: Self.now(), allowsTakeover: allowingTakeover), id, .ifMatch(version))
    }

    func release(_ id: String, owner: String, version: String) {
        // S3 has no conditional delete: the lease is read first, and deleted only while it is
        // still this holder's.
        guard let (current, _) = (try? read(id)) ?? nil, current.owner == owner else { return }
        try? client.deleteObject(Self.key(id))
    }

    /// Writes the lease on `condition`; its new version, or nil when the condition failed.
    /// Throws when the store failed.
    private func write(_ lease: Lease, _ id: String, _ condition: S3WriteCondition) throws(StorageError) -> String? {
        guard let bytes = try? JSONEncoder().encode(lease) else { return nil }
        do {
            return try client.putObject(Self.key(id), bytes: Array(bytes), condition: condition)
        } catch S3Error.preconditionFailed {
            return nil
        } catch {
            throw S3UploadStore.storageError(error, doing: "write the upload's lease")
        }
    }

    /// The lease and its version, from one GET; nil when there is none (or it cannot be
    /// read). Throws when the store failed.
    private func read(_ id: String) throws(StorageError) -> (Lease, String)? {
        var bytes: [UInt8] = []
        let info: S3ObjectInfo
        do {
            info = try client.getObject(Self.key(id), range: nil, body: { bytes.append(contentsOf: $0) })
        } catch S3Error.notFound {
            return nil
        } catch {
            throw S3UploadStore.storageError(error, doing: "read the upload's lease")
        }
        guard let lease = try? JSONDecoder().decode(Lease.self, from: Data(bytes)) else { return nil }
        return (lease, info.etag)
    }
}
