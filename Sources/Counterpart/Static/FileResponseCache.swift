import Foundation
import Synchronization

/// A file as `fstat` sees it: any write, truncation, `touch` or replacement changes one of
/// these.
struct FileIdentity: Equatable, Sendable {
    var device: UInt64
    var inode: UInt64
    var size: Int64
    var modified: Timestamp
    var changed: Timestamp

    struct Timestamp: Equatable, Sendable {
        var seconds: Int64
        var nanoseconds: Int64
    }

    init(_ info: stat) {
        device = UInt64(info.st_dev)
        inode = UInt64(info.st_ino)
        size = Int64(info.st_size)
        let modified = Platform.modificationTime(info)
        let changed = Platform.statusChangeTime(info)
        self.modified = Timestamp(seconds: Int64(modified.tv_sec), nanoseconds: Int64(modified.tv_nsec))
        self.changed = Timestamp(seconds: Int64(changed.tv_sec), nanoseconds: Int64(changed.tv_nsec))
    }
}

/// The plain `200` answers (no `Range`, no `If-*`, no `?download`) for small files, kept
/// while each file stays as it was: a hit sends the same fields and bytes again without
/// reading the file or writing its validators, and libmicrohttpd's response object is made
/// once (`Response.reusable`). Each request still opens the file beneath the folder and
/// reads its status, as without the cache: a file that changed, moved or went away is
/// answered as it is now.
///
/// A file is kept only once its status change time (ctime) is more than `settledSeconds`
/// old. The kernel sets it to the current time on every write, truncation, `touch` or
/// rename of the file, and nobody can set it back. Its clock is coarse (a write soon after
/// another may get the same time), so a file that changed a moment ago could change again
/// without its ctime moving; one that has been still for a second cannot: any write after
/// it was read gives it a new ctime, and the entry no longer matches (the rule git uses
/// for its index).
final class FileResponseCache: Sendable {
    /// Files up to this size are kept (the size sent from memory anyway).
    static let maxFileBytes = Int(ResponseBody.inMemoryLimit)
    static let settledSeconds: Int64 = 1

    /// The most bytes of files kept at once.
    let capacityBytes: Int

    private struct Entry: Sendable {
        var identity: FileIdentity
        var headers: [HTTPField]
        var bytes: [UInt8]
        var reusable: ReusableResponse
    }

    private struct State {
        /// By the path beneath the folder the file was opened at.
        var entries: [String: Entry] = [:]
        var bytes = 0
    }

    private let state = Mutex(State())

    /// How many files are kept now, and their bytes.
    var usage: (files: Int, bytes: Int) {
        state.withLock { ($0.entries.count, $0.bytes) }
    }

    init(capacityBytes: Int = 8 << 20) {
        self.capacityBytes = capacityBytes
    }

    /// The kept answer for the file at `path`, if it is the file `identity` describes.
    func response(at path: String, identity: FileIdentity) -> Response? {
        guard let entry = state.withLock({ $0.entries[path] }), entry.identity == identity else { return nil }
        var response = Response(status: 200, headers: entry.headers, body: .bytes(entry.bytes))
        response.reusable = entry.reusable
        return response
    }

    /// `response` (a plain `200` for the whole of `file`) with its bytes read into memory
    /// and kept, when the file is small and settled and did not change while it was read;
    /// nil otherwise (the caller sends `response` as it is).
    /// `now`: seconds since 1970 (for tests).
    func keep(_ response: Response, of file: OpenFile, at path: String, identity: FileIdentity,
              now: Int64 = Int64(time(nil))) -> Response? {
        guard identity.size <= Self.maxFileBytes, Int(identity.size) <= capacityBytes,
              identity.changed.seconds + Self.settledSeconds < now else { return nil }
        var bytes = [UInt8](repeating: 0, count: Int(identity.size))
        var after = stat()
        guard bytes.withUnsafeMutableBytes({ file.readFully(at: 0, into: $0) }), fstat(file.borrowed, &after) == 0,
              FileIdentity(after) == identity else { return nil }
        let entry = Entry(identity: identity, headers: response.headers, bytes: bytes, reusable: ReusableResponse())
        state.withLock { state in
            if let replaced = state.entries.removeValue(forKey: path) { state.bytes -= replaced.bytes.count }
            while state.bytes + bytes.count > capacityBytes, let evicted = state.entries.first {
                state.entries.remove(at: state.entries.startIndex)
                state.bytes -= evicted.value.bytes.count
            }
            state.entries[path] = entry
            state.bytes += bytes.count
        }
        var kept = Response(status: 200, headers: entry.headers, body: .bytes(bytes))
        kept.reusable = entry.reusable
        return kept
    }
}
