/// Where resumable uploads (tus, IETF) keep their state and their bytes, below the seam:
/// a hidden folder of the uploads folder (`LocalResumableStorage`) or objects of an object
/// store. `ResumableStore` above it owns the rules (offsets, expiry, limits); the claims on
/// an upload are `ResumableLocker`'s.
///
/// An upload's offset is what is durable: `ResumableAppender.sync` returns once the bytes
/// written so far survive a crash, and only then does the state move its offset.
protocol ResumableStorage: Sendable {
    /// Whether other servers write to the same store: each request then reads an upload's
    /// state from it, and claims take a lease there (`leases`).
    var isShared: Bool { get }
    /// The leases that make one request of all the servers sharing the store the writer of
    /// an upload; nil for a store of one server.
    var leases: (any ResumableLeases)? { get }
    /// Every upload's state found in the store (at start), by id. A state whose bytes hold
    /// more than it says (a crash between a sync and the state's save) is brought up to
    /// what is durable.
    func loadStates() -> [String: [UInt8]]
    /// One upload's state as stored now; nil when there is none. A store that cannot say
    /// throws (503), so that an upload is never reported missing for it.
    func loadState(of id: String) throws(StorageError) -> [UInt8]?
    /// Replaces an upload's state, durably and atomically.
    func saveState(_ state: [UInt8], of id: String) throws(StorageError)
    /// An upload's data, created empty.
    func createData(of id: String) throws(StorageError)
    /// Bytes of an upload's data that are durable (nil when it has none); throws when the
    /// store cannot say.
    func durableLength(of id: String) throws(StorageError) -> UInt64?
    /// Opens an upload's data to append at `offset` (what was durable): bytes past it, never
    /// acknowledged, are dropped.
    func appender(of id: String, at offset: UInt64) throws(StorageError) -> any ResumableAppender
    /// Reads an upload's data from the start, in pieces handed to `body`.
    func readData(of id: String, _ body: (UnsafeRawBufferPointer) throws(StorageError) -> Void) throws(StorageError)
    /// Moves a complete upload's data into `uploads` under `name` (or a variant of it);
    /// returns the name used. The data is gone from here after.
    func moveData(of id: String, into uploads: any UploadStorage, as name: String) throws(StorageError) -> String
    /// Removes an upload's data, keeping its state (a completed IETF upload keeps its answer).
    func removeData(of id: String)
    /// Removes an upload's state and data.
    func remove(_ id: String)
    /// Throws (out of space) when `bytes` more would not fit.
    func ensureRoom(for bytes: UInt64) throws(StorageError)
}

/// An upload's data open for appending, by one request at a time.
protocol ResumableAppender: AnyObject {
    func write(_ bytes: UnsafeRawBufferPointer) throws(StorageError)
    /// Makes every byte written so far durable.
    func sync() throws(StorageError)
    /// Cuts the data back to `offset` (a rejected chunk).
    func truncate(to offset: UInt64)
}
