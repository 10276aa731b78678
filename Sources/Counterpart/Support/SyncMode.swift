/// How hard the server works to keep what it stored across a crash or a power cut: the one
/// owner of every fsync and write-back the uploads make.
public enum SyncMode: String, Sendable, CaseIterable {
    /// An upload's bytes and its name are on disk before the server answers for it (file and
    /// folder synced; long uploads start write-back as they stream, so the last sync is short).
    case full
    /// Nothing is synced: the kernel writes when it likes. For CI and test fixtures, where
    /// speed beats surviving a power cut; a server crash alone still loses nothing answered.
    case none

    /// Makes the file's bytes durable; whether that worked (always, with `none`).
    func syncFile(_ descriptor: Int32) -> Bool {
        self == .none || fsync(descriptor) == 0
    }

    /// Makes the folder's entries (names linked, renamed or removed) durable.
    func syncFolder(_ path: String) -> Bool {
        self == .none || FileSystem.syncFolder(path)
    }

    /// Starts writing `count` bytes from `offset` out, without waiting for them.
    func startWriteBack(_ descriptor: Int32, offset: UInt64, count: UInt64) {
        guard self == .full else { return }
        Platform.startWriteBack(descriptor, offset: Int64(offset), count: Int64(count))
    }
}
