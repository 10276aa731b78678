/// Where `POST /upload` and finished resumable uploads keep their files: a local folder
/// (`LocalUploadStore`) or an object store (`S3UploadStore`). The endpoints see only this.
///
/// Every backend keeps the same promises: a file appears under its name only when all of
/// it is stored, never replaces a file already there (a taken name gets `-1`, `-2`, …, see
/// `StoredNames`), and a file whose request fails leaves nothing behind.
protocol UploadStorage: AnyObject, Sendable {
    /// A new, empty file to write one upload into, to be stored under `name` (or a variant
    /// of it) once complete. An object store starts storing under the name before the file
    /// is complete (a multipart upload), so it is told now. `likelySize` is the size the
    /// file will probably have, when the request tells: a guess, which a backend may plan
    /// with but must not trust.
    func makeSink(named name: String, likelySize: UInt64?) throws(StorageError) -> UploadSink
    /// Makes the names committed so far durable: called once before answering for them.
    func syncNames() throws(StorageError)
    /// Throws (out of space) when `bytes` more would not fit.
    func ensureRoom(for bytes: UInt64) throws(StorageError)
    /// Removes a stored file (a request that failed after storing it).
    func remove(_ name: String)
    /// Removes every stored file (not those in progress); returns how many.
    func removeStoredFiles() -> Int
    /// Stores the complete local file at `path` (a finished resumable upload) under `name`
    /// or a variant of it; the caller removes `path`. Returns the name used.
    func importFile(at path: String, as name: String) throws(StorageError) -> String
}

/// Below the seam: where the bytes of one uploaded file go, in order (each call's offset
/// is where the last one ended), and how the complete file gets its name.
protocol UploadDestination: AnyObject, Sendable {
    /// Stores `bytes`, which start at `offset` in the file.
    func store(_ bytes: UnsafeRawBufferPointer, at offset: UInt64) throws(StorageError)
    /// From now on bytes mostly come in whole chunks of `UploadWriter.chunkSize` (a local
    /// file then writes them past the page cache); a hint, which a backend may ignore.
    func startWholeChunks()
    /// Every byte is stored, and no more will come; the name is given later (`commit`, in
    /// the body's order, after the parts that follow). Called once, on the thread that stored
    /// the last bytes.
    func endOfBytes() throws(StorageError)
    /// Every byte is stored: the file takes its name, or a variant of it when that is taken,
    /// never replacing one. Returns the name used.
    func commit() throws(StorageError) -> String
    /// Drops the file and everything stored of it.
    func discard()
}

extension UploadDestination {
    func endOfBytes() throws(StorageError) {}
}

/// An upload's file being written, with the SHA-256 of what went in: the writer (hashing,
/// chunks, threads) above the seam, its destination below.
final class UploadSink {
    private let destination: any UploadDestination
    private let writer: UploadWriter
    /// Checks the room left as the file grows (`UploadStorage.ensureRoom`).
    private let ensureRoom: (UInt64) throws(StorageError) -> Void
    private var checkedSpaceAt: UInt64 = 0
    private var ended = false

    init(destination: any UploadDestination, ensureRoom: @escaping (UInt64) throws(StorageError) -> Void) {
        self.destination = destination
        self.ensureRoom = ensureRoom
        writer = UploadWriter(destination: destination)
    }

    /// Bytes received so far (the last of them may still be in memory, on their way).
    var size: UInt64 { writer.size }

    func write(_ bytes: UnsafeRawBufferPointer) throws(StorageError) {
        if size - checkedSpaceAt >= FreeSpace.checkInterval {
            // The store does not see yet what waits in the writer's chunks.
            try ensureRoom(UInt64(bytes.count) + UploadWriter.bytesInMemory)
            checkedSpaceAt = size
        }
        try writer.append(bytes)
    }

    /// No byte comes after the ones written: the last are written while the caller goes on.
    func startFinishing() throws(StorageError) {
        try writer.startFinishing()
    }

    /// Writes the last bytes and returns the SHA-256 of everything written (the same, or
    /// the same failure, when asked again).
    func digest() throws(StorageError) -> String {
        try writer.finish()
    }

    /// Stores the complete file under its name or a variant of it; returns the name used.
    /// A sink that fails here is discarded.
    func commit() throws(StorageError) -> String {
        do {
            _ = try digest()
            let stored = try destination.commit()
            ended = true
            return stored
        } catch {
            discard()
            throw error
        }
    }

    /// Drops the file and what was stored of it.
    func discard() {
        guard !ended else { return }
        ended = true
        writer.cancel()
        destination.discard()
    }
}

/// The naming rule every backend follows when a name is taken: `a.png`, then `a-1.png` …
/// `a-100.png` (readable names for the usual few repeats, without a linear search through
/// thousands), then `a-<random>.png` 16 times (each almost surely free).
enum StoredNames {
    static let sequentialNames = 100
    static let randomNames = 16

    /// Tries `take` on `name` and its variants in turn until it returns true; the name
    /// taken. `take` throws for a failure other than "taken".
    static func first(for name: String, _ take: (String) throws(StorageError) -> Bool) throws(StorageError) -> String {
        var attempt = 0
        var candidate = name
        while try !take(candidate) {
            guard attempt < sequentialNames + randomNames else {
                throw StorageError(.failed, "the server could not store \(name): \(attempt + 1) names were taken")
            }
            attempt += 1
            let suffix = attempt <= sequentialNames ? String(attempt) : String(UInt64.random(in: 0..<(1 << 48)), radix: 36)
            candidate = SafeFilename.variant(of: name, suffix: suffix)
        }
        return candidate
    }
}
