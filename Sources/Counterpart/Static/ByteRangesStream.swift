import HTTPTransfer

/// A `multipart/byteranges` body (RFC 9110 §14.6) read as the connection takes it: part
/// headers from memory, part contents from the source, never the whole in memory.
final class ByteRangesStream: ResponseStream {
    private enum Segment {
        case text([UInt8])
        case content(offset: UInt64, length: UInt64)

        var length: UInt64 {
            switch self {
            case .text(let bytes): return UInt64(bytes.count)
            case .content(_, let length): return length
            }
        }
    }

    let contentType: String
    let length: UInt64
    private let source: any ByteSource
    private let segments: [Segment]
    /// Where each segment starts in the body.
    private let starts: [UInt64]
    private var current = 0

    init(source: any ByteSource, ranges: [ByteRange], completeLength: UInt64, contentType partType: String) {
        self.source = source
        var writer = MultipartWriter()
        var segments: [Segment] = []
        for range in ranges {
            segments.append(.text(writer.beginPart(headers: [
                .init(name: "Content-Type", value: partType),
                .init(name: "Content-Range", value: ContentRange.satisfied(range, completeLength: completeLength).description),
            ])))
            segments.append(.content(offset: range.first, length: range.count))
        }
        segments.append(.text(writer.finish()))
        self.segments = segments
        var starts: [UInt64] = []
        var total: UInt64 = 0
        for segment in segments {
            starts.append(total)
            total += segment.length
        }
        self.starts = starts
        length = total
        contentType = writer.contentType("multipart/byteranges")
    }

    func read(at position: UInt64, into buffer: UnsafeMutableRawBufferPointer) -> StreamRead {
        // MHD reads forward; look back only if it ever asks for an earlier position.
        if current >= segments.count || position < starts[current] { current = 0 }
        while current < segments.count, position >= starts[current] + segments[current].length { current += 1 }
        guard current < segments.count else { return .cut }
        let within = position - starts[current]
        let wanted = Int(min(UInt64(buffer.count), segments[current].length - within))
        switch segments[current] {
        case .text(let bytes):
            bytes.withUnsafeBytes { source in
                buffer.baseAddress!.copyMemory(from: source.baseAddress! + Int(within), byteCount: wanted)
            }
            return .bytes(wanted)
        case .content(let offset, _):
            let count = source.read(at: offset + within, into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<wanted]))
            return count.map { .bytes($0) } ?? .cut
        }
    }
}
