// counterpart-examples BASE_URL <example> [args]: the seeds' clients (the Objective-C iOS
// tutorials the project was built against, redone on URLSession) run against a Counterpart
// server, saying what they do.
import CounterpartExamples
import Foundation

let usage = """
    usage: counterpart-examples BASE_URL <example> [args]
           counterpart-examples --help

    Runs one of the seeds' clients against the server at BASE_URL (e.g. http://127.0.0.1:8080,
    the address `make run` serves on) and prints what it does.

    examples:
      info PATH                     HEAD: size, type, suggested filename, ETag (seeds 000, 001)
      packets PATH [DEST] [--packet-size N]
                                    the file in Range packets "Bytes=from-to" of N bytes
                                    (default 20250, seed 000), appended to DEST
      resume PATH [DEST] [--cut N] [--pause-at N]
                                    resumable download to DEST by the local-size rules (seeds
                                    001, 004): equal: done; smaller: Range bytes=<size>-;
                                    larger: start over. --cut N: the first attempt asks the
                                    server to cut the connection after N bytes (?cut=N), then a
                                    second attempt resumes. --pause-at N: pauses once N bytes
                                    are on disk, then resumes.
      upload FILE... [--field NAME=VALUE]... [--path PATH]
                                    one multipart/form-data request (seeds 000, 001, 002) with
                                    every FILE (field "file") and field, with upload progress;
                                    prints the receipt (POST /upload unless --path)

    DEST defaults to the name the server suggests (HEAD with ?download), in the current folder.
    Exit status: 0 on success, 1 when the example fails, 2 for a usage error.
    """

struct UsageError: Error, CustomStringConvertible {
    var description: String
}

/// Prints a progress line each time another tenth is done. Unchecked: `last` is read and
/// written under `lock`.
final class ProgressPrinter: @unchecked Sendable {
    private let lock = NSLock()
    private var last = -1
    private let label: String

    init(_ label: String) { self.label = label }

    func report(_ done: Int64, of total: Int64) {
        let tenth = total <= 0 ? 10 : Int(done * 10 / total)
        let print: Bool = lock.withLock {
            guard tenth > last else { return false }
            last = tenth
            return true
        }
        if print { Swift.print("  \(label) \(tenth * 10) %  (\(done) of \(total) bytes)") }
    }
}

enum Command {
    static func main(_ arguments: [String]) async -> Int32 {
        if arguments.contains("--help") || arguments.contains("-h") {
            print(usage)
            return 0
        }
        do {
            guard arguments.count >= 2 else { throw UsageError(description: "BASE_URL and an example are required") }
            guard let base = URL(string: arguments[0]), let scheme = base.scheme, ["http", "https"].contains(scheme), base.host != nil else {
                throw UsageError(description: "BASE_URL \"\(arguments[0])\" is not an http:// URL")
            }
            var rest = Array(arguments.dropFirst(2))
            switch arguments[1] {
            case "info": try await info(base, &rest)
            case "packets": try await packets(base, &rest)
            case "resume": try await resume(base, &rest)
            case "upload": try await upload(base, &rest)
            default: throw UsageError(description: "unknown example \"\(arguments[1])\"; the examples are info, packets, resume, upload")
            }
            return 0
        } catch let error as UsageError {
            FileHandle.standardError.write(Data("counterpart-examples: \(error) (--help lists the examples)\n".utf8))
            return 2
        } catch let error as URLError {
            let url = error.failingURL.map { "\($0.absoluteString): " } ?? ""
            FileHandle.standardError.write(Data("counterpart-examples: \(url)\(error.localizedDescription)\n".utf8))
            return 1
        } catch {
            FileHandle.standardError.write(Data("counterpart-examples: \(error)\n".utf8))
            return 1
        }
    }

    /// Removes `--name VALUE` from `arguments` and returns VALUE.
    static func option(_ name: String, _ arguments: inout [String]) throws -> String? {
        guard let index = arguments.firstIndex(of: name) else { return nil }
        guard index + 1 < arguments.count else { throw UsageError(description: "\(name) needs a value") }
        let value = arguments[index + 1]
        arguments.removeSubrange(index...(index + 1))
        return value
    }

    static func count(_ name: String, _ arguments: inout [String]) throws -> Int64? {
        guard let text = try option(name, &arguments) else { return nil }
        guard let value = Int64(text), value > 0 else { throw UsageError(description: "\(name) needs a positive number of bytes, not \"\(text)\"") }
        return value
    }

    /// PATH and an optional DEST; anything else is a usage error.
    static func pathAndDestination(_ arguments: [String], _ example: String) throws -> (String, String?) {
        if let unknown = arguments.first(where: { $0.hasPrefix("--") }) {
            throw UsageError(description: "\(example): unknown option \(unknown)")
        }
        guard let path = arguments.first else { throw UsageError(description: "\(example) needs the PATH of a file on the server") }
        guard arguments.count <= 2 else { throw UsageError(description: "\(example) takes PATH and DEST, not \(arguments.count) arguments") }
        return (path, arguments.count == 2 ? arguments[1] : nil)
    }

    /// DEST, or the server's suggested name in the current folder.
    static func destination(_ given: String?, base: URL, path: String) async throws -> URL {
        if let given { return URL(fileURLWithPath: given) }
        let info = try await FileInfo.fetch(baseURL: base, path: path)
        let suggested = (info.suggestedFilename.map { ($0 as NSString).lastPathComponent }) ?? ""
        let name = suggested.isEmpty || suggested == "." || suggested == ".." || suggested == "Unknown"
            ? URL(fileURLWithPath: path.split(separator: "?").first.map(String.init) ?? "download").lastPathComponent
            : suggested
        return URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent(name)
    }

    static func info(_ base: URL, _ arguments: inout [String]) async throws {
        let (path, extra) = try pathAndDestination(arguments, "info")
        guard extra == nil else { throw UsageError(description: "info takes only PATH") }
        let info = try await FileInfo.fetch(baseURL: base, path: path)
        print("HEAD \(info.url.absoluteString)?download")
        print("  size:               \(info.size) bytes")
        print("  type:               \(info.mimeType ?? "(none)")")
        print("  suggested filename: \(info.suggestedFilename ?? "(none)")")
        print("  ETag:               \(info.etag ?? "(none)")")
        print("  Last-Modified:      \(info.lastModified ?? "(none)")")
        print("  Accept-Ranges:      \(info.acceptsRanges ? "bytes" : "(none)")")
    }

    static func packets(_ base: URL, _ arguments: inout [String]) async throws {
        let packetSize = try count("--packet-size", &arguments) ?? PacketDownload.seedPacketSize
        let (path, dest) = try pathAndDestination(arguments, "packets")
        let destination = try await destination(dest, base: base, path: path)
        let download = try PacketDownload(baseURL: base, path: path, to: destination, packetSize: packetSize)
        print("GET \(download.url.absoluteString) in packets of \(packetSize) bytes -> \(destination.path)")
        let report = try await download.run { packet in
            print("  Range: \(packet.range)  ->  \(packet.bytesOnDisk) of \(packet.size) bytes on disk")
        }
        if report.alreadyComplete {
            print("already downloaded: \(destination.path) has the server's size, \(report.size) bytes")
        } else {
            print("done: \(report.ranges.count) packets, \(report.size) bytes in \(destination.path)")
        }
    }

    static func resume(_ base: URL, _ arguments: inout [String]) async throws {
        let cut = try count("--cut", &arguments)
        let pauseAt = try count("--pause-at", &arguments)
        let (path, dest) = try pathAndDestination(arguments, "resume")
        let destination = try await destination(dest, base: base, path: path)
        var attempt = 1
        if let cut {
            let faulty = try ResumableDownload(baseURL: base, path: path + (path.contains("?") ? "&" : "?") + "cut=\(cut)", to: destination)
            print("attempt \(attempt): GET \(faulty.url.absoluteString) (the server cuts the connection after \(cut) bytes)")
            do {
                let report = try await runOnce(faulty, pauseAt: nil)
                print("  not cut: the transfer completed (\(report.bytesOnDisk) bytes)")
            } catch let error as ExampleError {
                guard case .interrupted(_, let onDisk, let expected, let reason) = error else { throw error }
                print("  interrupted (\(reason)): \(onDisk) of \(expected) bytes on disk")
            }
            attempt += 1
        }
        let download = try ResumableDownload(baseURL: base, path: path, to: destination)
        while true {
            print("attempt \(attempt): GET \(download.url.absoluteString) -> \(destination.path) (local size \(localSize(destination).map(String.init) ?? "none"))")
            let report = try await runOnce(download, pauseAt: attempt == 1 || cut != nil && attempt == 2 ? pauseAt : nil)
            if report.paused {
                print("  paused with \(report.bytesOnDisk) of \(report.expectedSize) bytes on disk")
                attempt += 1
                continue
            }
            print("done: \(report.bytesOnDisk) bytes in \(destination.path)")
            return
        }
    }

    static func localSize(_ url: URL) -> Int64? {
        (try? FileManager.default.attributesOfItem(atPath: url.path)[.size] as? NSNumber)?.int64Value
    }

    static func runOnce(_ download: ResumableDownload, pauseAt: Int64?) async throws -> ResumableDownload.Report {
        let printer = ProgressPrinter("downloaded")
        let report = try await download.run { progress in
            printer.report(progress.bytesOnDisk, of: progress.expectedSize)
            if let pauseAt, progress.bytesOnDisk >= pauseAt, progress.bytesOnDisk < progress.expectedSize { download.pause() }
        }
        let asked = "sent Range \(report.range ?? "-"), got \(report.status.map(String.init) ?? "no answer")"
        switch report.start {
        case .alreadyComplete: print("  local size equals the server's (\(report.expectedSize) bytes): already complete, nothing fetched")
        case .fromStart: print("  no local file: \(asked)")
        case .resumed(let at): print("  local file was smaller (\(at) bytes): \(asked)")
        case .restarted(let discarded): print("  local file was larger than the server's (\(discarded) bytes): deleted it, \(asked)")
        }
        return report
    }

    static func upload(_ base: URL, _ arguments: inout [String]) async throws {
        let path = try option("--path", &arguments) ?? "/upload"
        var fields: [MultipartUpload.Part] = []
        while let field = try option("--field", &arguments) {
            guard let equals = field.firstIndex(of: "=") else { throw UsageError(description: "--field needs NAME=VALUE, not \"\(field)\"") }
            fields.append(.field(name: String(field[..<equals]), value: String(field[field.index(after: equals)...])))
        }
        if let unknown = arguments.first(where: { $0.hasPrefix("--") }) { throw UsageError(description: "upload: unknown option \(unknown)") }
        guard !arguments.isEmpty else { throw UsageError(description: "upload needs at least one FILE") }
        let files = arguments.map { MultipartUpload.Part.file(URL(fileURLWithPath: $0)) }
        let upload = try MultipartUpload(baseURL: base, path: path, parts: files + fields)
        print("POST \(upload.url.absoluteString)  Content-Type: \(upload.contentType)")
        let printer = ProgressPrinter("sent")
        let receipt = try await upload.send { printer.report($0.bytesSent, of: $0.bytesExpected) }
        for field in receipt.fields {
            print("  field \(field.name) = \(field.value ?? "(base64) " + (field.valueBase64 ?? ""))")
        }
        for file in receipt.files {
            print("  file \(file.field): \(file.filename), \(file.contentType), \(file.size) bytes, sha256 \(file.sha256)")
            print("    stored at \(base.absoluteString.trimmingCharacters(in: CharacterSet(charactersIn: "/")))\(file.url)")
        }
    }
}

exit(await Command.main(Array(CommandLine.arguments.dropFirst())))
