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

/// What the answers for a file share, kept while the file stays as it was (its
/// `FileIdentity`): its validators with their fields and its media type, for every file
/// served; and for small files, the plain `200` (no `Range`, no `If-*`, no `?download`)
/// whole, so that a hit sends the same fields and bytes again without reading the file,
/// and libmicrohttpd's response object is made once (`Response.reusable`). Each request
/// still opens the file beneath the folder and reads its status, as without the cache: a
/// file that changed, moved or went away is answered as it is now.
///
/// The validators follow from the status alone. A file's bytes are kept only once its
/// status change time (ctime) is more than `settledSeconds` old. The kernel sets it to the
/// current time on every write, truncation, `touch` or rename of the file, and nobody can
/// set it back. Its clock is coarse (a write soon after another may get the same time), so
/// a file that changed a moment ago could change again without its ctime moving; one that
/// has been still for a second cannot: any write after it was read gives it a new ctime,
/// and the entry no longer matches (the rule git uses for its index).
final class FileResponseCache: Sendable {
    /// Files up to this size are kept whole (the size sent from memory anyway).
    static let maxFileBytes = Int(ResponseBody.inMemoryLimit)
    static let settledSeconds: Int64 = 1

    /// The most bytes of files kept at once.
    let capacityBytes: Int
    /// The most files known at once.
    let capacityFiles: Int

    /// A file's validators and media type.
    struct Facts: Sendable {
        var validators: RepresentationValidators
        var contentType: String
    }

    /// What is known of a file, when it is still the file `identity` describes.
    enum Known: Sendable {
        /// Its plain `200`, kept whole.
        case answer(Kept)
        case facts(Facts)
    }

    /// A small file's plain `200`: its fields and bytes, and what the adapter made of them.
    struct Kept: Sendable {
        var headers: [HTTPField]
        var bytes: [UInt8]
        var reusable: ReusableResponse

        var response: Response {
            var response = Response(status: 200, headers: headers, body: .bytes(bytes))
            response.reusable = reusable
            return response
        }
    }

    private struct Entry: Sendable {
        var identity: FileIdentity
        var facts: Facts
        var kept: Kept?
    }

    private struct State {
        /// By the path beneath the folder the file was opened at.
        var entries: [String: Entry] = [:]
        var bytes = 0
    }

    private let state = Mutex(State())

    /// How many files are known now, and the bytes kept.
    var usage: (files: Int, bytes: Int) {
        state.withLock { ($0.entries.count, $0.bytes) }
    }

    init(capacityBytes: Int = 8 << 20, capacityFiles: Int = 4096) {
        self.capacityBytes = capacityBytes
        self.capacityFiles = capacityFiles
    }

    /// What is known of the file at `path`, if it is the file `identity` describes: its
    /// plain `200` when that is `wanted` and kept, else its facts.
    func known(at path: String, identity: FileIdentity, answerWanted wanted: Bool) -> Known? {
        state.withLock { state in
            guard let entry = state.entries[path], entry.identity == identity else { return nil }
            if wanted, let kept = entry.kept { return .answer(kept) }
            return .facts(entry.facts)
        }
    }

    /// Notes `facts` for the file at `path` (replacing what was known of an earlier file there).
    func remember(_ facts: Facts, at path: String, identity: FileIdentity) {
        store(Entry(identity: identity, facts: facts), at: path)
    }

    /// `response` (a plain `200` for the whole of `file`) with its bytes read into memory
    /// and kept, when the file is small and settled and did not change while it was read;
    /// nil otherwise (the caller sends `response` as it is). `now`: seconds since 1970.
    func keep(_ response: Response, of file: OpenFile, facts: Facts, at path: String, identity: FileIdentity,
              now: Int64 = Int64(time(nil))) -> Response? {
        guard identity.size <= Self.maxFileBytes, Int(identity.size) <= capacityBytes,
              identity.changed.seconds + Self.settledSeconds < now else { return nil }
        var bytes = [UInt8](repeating: 0, count: Int(identity.size))
        var after = stat()
        guard bytes.withUnsafeMutableBytes({ file.readFully(at: 0, into: $0) }), fstat(file.borrowed, &after) == 0,
              FileIdentity(after) == identity else { return nil }
        let kept = Kept(headers: response.headers, bytes: bytes, reusable: ReusableResponse())
        store(Entry(identity: identity, facts: facts, kept: kept), at: path)
        return kept.response
    }

    private func store(_ entry: Entry, at path: String) {
        let added = entry.kept?.bytes.count ?? 0
        let dropped: [Entry] = state.withLock { state in
            var dropped: [Entry] = []
            if let replaced = state.entries.removeValue(forKey: path) {
                state.bytes -= replaced.kept?.bytes.count ?? 0
                dropped.append(replaced)
            }
            while state.bytes + added > capacityBytes || state.entries.count >= capacityFiles, let evicted = state.entries.first {
                state.entries.remove(at: state.entries.startIndex)
                state.bytes -= evicted.value.kept?.bytes.count ?? 0
                dropped.append(evicted.value)
            }
            state.entries[path] = entry
            state.bytes += added
            return dropped
        }
        _ = dropped  // released here, outside the lock
    }
}
