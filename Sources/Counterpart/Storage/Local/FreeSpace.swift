/// The free space kept on the filesystem of the uploads folder: a write that would leave
/// less gets `507 Insufficient Storage` and stores nothing, so that a test run that
/// uploads too much fills neither the disk nor the uploads folder with half files.
struct FreeSpace: Sendable {
    let folder: String
    /// Bytes kept free; 0 keeps none (the filesystem's own ENOSPC still gives 507).
    let keep: UInt64

    /// Bytes written between two checks while a body streams in: a check (statvfs) costs
    /// about a microsecond, a MiB arrives in about one at the fastest.
    static let checkInterval: UInt64 = 1 << 20

    /// Bytes available to the server's user now; nil if the filesystem cannot say.
    func available() -> UInt64? {
        var info = statvfs()
        guard statvfs(folder, &info) == 0 else { return nil }
        return UInt64(info.f_bavail) * UInt64(info.f_frsize)
    }

    /// Throws (as out of space) when writing `bytes` more would leave less than `keep` free.
    func ensureRoom(for bytes: UInt64) throws(StorageError) {
        guard keep > 0, let available = available() else { return }
        let (needed, overflow) = bytes.addingReportingOverflow(keep)
        guard overflow || available < needed else { return }
        let what = bytes > 0 ? "\(bytes) bytes more would leave" : "it has"
        throw StorageError(.outOfSpace,
            "the uploads folder's filesystem has \(available) bytes free; \(what) less than the \(keep) this server keeps free")
    }
}
