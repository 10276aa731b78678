import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPTransfer

/// Seed 000's `downloadFileWithURL:`: `HEAD` for the size, then the file in packets of a
/// fixed size, each a `GET` with `Range: Bytes=from-to` (the seed's capital `B`; the unit is
/// case-insensitive), each appended to the local file. Every packet is `packetSize`
/// bytes but the last, which is what is left (1 to `packetSize` bytes).
///
/// Where the seed would go wrong, this does not: a local file of the right size counts as
/// downloaded (the seed's check), but one of another size is replaced, not appended to;
/// every packet is checked (`206`, the `Content-Range` asked for, its length); and each
/// request carries `If-Range` with the `ETag` from `HEAD`, so a file that changes on the
/// server between packets stops the download instead of mixing two versions.
///
/// ```swift
/// let report = try await PacketDownload(baseURL: server, path: "/samples/gradient.png",
///                                       to: URL(fileURLWithPath: "gradient.png")).run()
/// print(report.ranges)   // ["Bytes=0-20249", …]
/// ```
public struct PacketDownload: Sendable {
    /// The seed's `kBytesPerTimes`.
    public static let seedPacketSize: Int64 = 20_250

    public var url: URL
    public var destination: URL
    public var packetSize: Int64

    /// One packet as it was fetched.
    public struct Packet: Sendable, Equatable {
        /// The `Range` header sent: `Bytes=first-last`.
        public var range: String
        public var first: Int64
        public var last: Int64
        /// Bytes of the file on disk after this packet.
        public var bytesOnDisk: Int64
        /// The whole file's size.
        public var size: Int64
    }

    public struct Report: Sendable, Equatable {
        /// The file's size (from `HEAD`).
        public var size: Int64
        /// The `Range` headers sent, in order; empty when the file was already there.
        public var ranges: [String]
        /// The local file already had the server's size, so nothing was fetched.
        public var alreadyComplete: Bool
    }

    /// `packetSize` must be at least 1.
    public init(url: URL, to destination: URL, packetSize: Int64 = PacketDownload.seedPacketSize) {
        precondition(packetSize > 0, "a packet holds at least one byte")
        self.url = url
        self.destination = destination
        self.packetSize = packetSize
    }

    /// `path` (`/samples/gradient.png`) on the server at `baseURL`.
    public init(baseURL: URL, path: String, to destination: URL,
                packetSize: Int64 = PacketDownload.seedPacketSize) throws {
        self.init(url: try ExampleURL.resolve(path, against: baseURL), to: destination, packetSize: packetSize)
    }

    /// The seed's arithmetic: the byte ranges of a file of `size` bytes in packets of
    /// `packetSize`, the last one shorter (none for an empty file).
    public static func ranges(size: Int64, packetSize: Int64) -> [ClosedRange<Int64>] {
        var ranges: [ClosedRange<Int64>] = []
        var remaining = size
        var from: Int64 = 0
        while remaining > packetSize {
            ranges.append(from...(from + packetSize - 1))
            remaining -= packetSize
            from += packetSize
        }
        if remaining > 0 { ranges.append(from...(from + remaining - 1)) }
        return ranges
    }

    /// Downloads the file; `onPacket` is called after each packet is on disk.
    public func run(onPacket: @Sendable (Packet) -> Void = { _ in }) async throws -> Report {
        let info = try await FileInfo.fetch(url, askForFilename: false)
        if localFileSize(destination) == info.size {
            return Report(size: info.size, ranges: [], alreadyComplete: true)
        }
        // Start from an empty file: appending to a partial one of unknown origin (as the
        // seed does) would corrupt it. Resuming is ResumableDownload's job.
        try? FileManager.default.removeItem(at: destination)
        guard FileManager.default.createFile(atPath: destination.path, contents: nil) else {
            throw ExampleError.localFile(destination.path, "cannot be created")
        }
        let file = try FileHandle(forWritingTo: destination)
        defer { try? file.close() }

        let session = Sessions.plain()
        defer { session.finishTasksAndInvalidate() }
        var sent: [String] = []
        var onDisk: Int64 = 0
        for range in Self.ranges(size: info.size, packetSize: packetSize) {
            let header = "Bytes=\(range.lowerBound)-\(range.upperBound)"
            sent.append(header)
            var request = URLRequest(url: url, cachePolicy: .reloadIgnoringLocalCacheData, timeoutInterval: 30)
            request.setValue(header, forHTTPHeaderField: "Range")
            if let etag = info.etag { request.setValue(etag, forHTTPHeaderField: "If-Range") }
            let (data, response) = try await session.data(for: request)
            let http = try Sessions.http(response, url)
            switch http.statusCode {
            case 206: break
            case 200 where info.etag != nil: throw ExampleError.fileChanged(url)
            case 416: throw ExampleError.fileChanged(url)
            default:
                throw ExampleError.httpStatus(http.statusCode, method: "GET", url: url,
                                              message: http.statusCode == 200 ? "the Range header was ignored" : Sessions.errorMessage(data))
            }
            let expected = ContentRange.satisfied(ByteRange(first: UInt64(range.lowerBound), last: UInt64(range.upperBound)),
                                                  completeLength: UInt64(info.size))
            let got = http.value(forHTTPHeaderField: "Content-Range")
            guard let got, ContentRange(parsing: got) == expected else {
                throw ExampleError.unexpectedResponse(url, "asked for \(header), got Content-Range \(got ?? "(none)") instead of \(expected)")
            }
            guard Int64(data.count) == Int64(range.count) else {
                throw ExampleError.unexpectedResponse(url, "the packet \(header) has \(data.count) bytes, not \(range.count)")
            }
            try file.write(contentsOf: data)
            onDisk += Int64(data.count)
            onPacket(Packet(range: header, first: range.lowerBound, last: range.upperBound, bytesOnDisk: onDisk, size: info.size))
        }
        return Report(size: info.size, ranges: sent, alreadyComplete: false)
    }
}
