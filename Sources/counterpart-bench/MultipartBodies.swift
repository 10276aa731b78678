// The multipart/form-data bodies the parser benchmarks read, generated in memory up front
// with `MultipartWriter`, from a fixed seed (the same bytes on every run).

import HTTPTransfer

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// SplitMix64 (Steele, Lea, Flood 2014): fast, deterministic, good enough for test data.
struct SplitMix64 {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    @inline(__always)
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A number in `0..<bound` (the modulo bias is irrelevant here).
    @inline(__always)
    mutating func next(below bound: Int) -> Int { Int(next() % UInt64(bound)) }

    /// Fills `count` bytes at `start` with random bytes, eight at a time.
    mutating func fill(_ start: UnsafeMutableRawPointer, count: Int) {
        var offset = 0
        while offset + 8 <= count {
            start.storeBytes(of: next(), toByteOffset: offset, as: UInt64.self)
            offset += 8
        }
        var last = next()
        while offset < count {
            start.storeBytes(of: UInt8(truncatingIfNeeded: last), toByteOffset: offset, as: UInt8.self)
            last >>= 8
            offset += 1
        }
    }
}

/// A generated body: its bytes in one allocation (freed with the object), its boundary,
/// and where each part's content lies, to check what the parser hands out.
final class GeneratedBody {
    let key: String
    let label: String
    let boundary: MultipartBoundary
    private let storage: UnsafeMutableRawBufferPointer
    private(set) var count = 0
    /// Content of each part, as offsets into the body.
    private(set) var contents: [Range<Int>] = []
    private(set) var fileParts = 0
    private(set) var fieldParts = 0
    private(set) var fileBytes = 0
    private(set) var fieldBytes = 0
    /// Near-boundaries planted in the content (the salted body).
    private(set) var nearBoundaries = 0
    private var writer: MultipartWriter

    init(key: String, label: String, boundary: MultipartBoundary, capacity: Int) {
        self.key = key
        self.label = label
        self.boundary = boundary
        storage = .allocate(byteCount: capacity, alignment: 4096)
        writer = MultipartWriter(boundary: boundary)
    }

    deinit { storage.deallocate() }

    var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: storage.baseAddress, count: count) }
    var parts: Int { contents.count }

    /// `\r\n--boundary`: what a delimiter after the first looks like.
    var delimiter: [UInt8] { Array("\r\n--\(boundary.value)".utf8) }

    private func append(_ bytes: [UInt8]) {
        precondition(count + bytes.count <= storage.count, "body capacity exceeded")
        bytes.withUnsafeBytes { storage.baseAddress!.advanced(by: count).copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
        count += bytes.count
    }

    /// Reserves `length` bytes of content, fills them with `fill`, and records them.
    private func appendContent(length: Int, _ fill: (UnsafeMutableRawBufferPointer) -> Void) {
        precondition(count + length <= storage.count, "body capacity exceeded")
        fill(UnsafeMutableRawBufferPointer(rebasing: storage[count..<(count + length)]))
        contents.append(count..<(count + length))
        count += length
    }

    func appendFile(name: String, filename: String, length: Int, _ fill: (UnsafeMutableRawBufferPointer) -> Void) {
        append(writer.beginPart(headers: MultipartWriter.formDataHeaders(
            name: name, filename: filename, contentType: "application/octet-stream")))
        appendContent(length: length, fill)
        fileParts += 1
        fileBytes += length
    }

    func appendField(name: String, value: [UInt8]) {
        append(writer.beginPart(headers: MultipartWriter.formDataHeaders(name: name)))
        value.withUnsafeBytes { source in appendContent(length: source.count) { $0.copyMemory(from: source) } }
        fieldParts += 1
        fieldBytes += value.count
    }

    func finish() { append(writer.finish()) }

    func countNearBoundaries(_ count: Int) { nearBoundaries += count }
}

extension GeneratedBody {
    /// Room for the headers of `parts` parts and the close delimiter.
    private static func capacity(content: Int, parts: Int) -> Int { content + parts * 512 + 512 }

    /// A boundary as curl makes one: 24 dashes and 16 hex digits.
    static func curlBoundary(_ random: inout SplitMix64) -> MultipartBoundary {
        let hex = Array("0123456789abcdef".utf8)
        let digits = (0..<16).map { _ in hex[random.next(below: 16)] }
        return try! MultipartBoundary(String(repeating: "-", count: 24) + String(decoding: digits, as: UTF8.self))
    }

    /// One file part of `size` random bytes.
    static func bigFile(size: Int, seed: UInt64) -> GeneratedBody {
        var random = SplitMix64(seed: seed)
        let body = GeneratedBody(key: "multipart/big", label: "1 file × \(formatBytes(size))",
                                 boundary: curlBoundary(&random), capacity: capacity(content: size, parts: 1))
        body.appendFile(name: "file", filename: "upload.bin", length: size) { random.fill($0.baseAddress!, count: $0.count) }
        body.finish()
        return body
    }

    /// `files` file parts of `size` random bytes each.
    static func manyFiles(_ files: Int, size: Int, seed: UInt64) -> GeneratedBody {
        var random = SplitMix64(seed: seed)
        let body = GeneratedBody(key: "multipart/files", label: "\(files) files × \(formatBytes(size))",
                                 boundary: curlBoundary(&random), capacity: capacity(content: files * size, parts: files))
        for index in 1...files {
            body.appendFile(name: "file\(index)", filename: "upload-\(index).bin", length: size) {
                random.fill($0.baseAddress!, count: $0.count)
            }
        }
        body.finish()
        return body
    }

    /// `fields` text fields named `field0000`… with values of 12–28 bytes (20 on average).
    static func smallFields(_ fields: Int, seed: UInt64) -> GeneratedBody {
        var random = SplitMix64(seed: seed)
        let body = GeneratedBody(key: "multipart/fields", label: "\(format(fields)) fields × ~20 B",
                                 boundary: curlBoundary(&random), capacity: capacity(content: fields * 28, parts: fields))
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789 ".utf8)
        for index in 0..<fields {
            let digits = String(index)
            let name = "field" + String(repeating: "0", count: max(0, 4 - digits.count)) + digits
            let value = (0..<(12 + random.next(below: 17))).map { _ in alphabet[random.next(below: alphabet.count)] }
            body.appendField(name: name, value: value)
        }
        body.finish()
        return body
    }

    /// One file part of `size` random bytes where, every 512–1,535 bytes (1 KiB on average),
    /// `\r\n--` and a random-length proper prefix of the boundary are planted, followed by a
    /// byte that does not continue the boundary: near-boundaries, never a delimiter.
    static func salted(size: Int, seed: UInt64) -> GeneratedBody {
        var random = SplitMix64(seed: seed)
        let boundary = curlBoundary(&random)
        let body = GeneratedBody(key: "multipart/salted", label: "1 file × \(formatBytes(size)), salted",
                                 boundary: boundary, capacity: capacity(content: size, parts: 1))
        let prefix = Array("\r\n--".utf8)
        let boundaryBytes = Array(boundary.value.utf8)
        var planted = 0
        body.appendFile(name: "file", filename: "salted.bin", length: size) { content in
            let start = content.baseAddress!
            random.fill(start, count: content.count)
            var position = 512 + random.next(below: 1024)
            while position + prefix.count + boundaryBytes.count + 1 <= content.count {
                let length = random.next(below: boundaryBytes.count)  // 0 ..< whole boundary
                var offset = position
                for byte in prefix + boundaryBytes[0..<length] {
                    content[offset] = byte
                    offset += 1
                }
                // The boundary is ASCII: flipping the top bit makes the next byte differ from it.
                if content[offset] == boundaryBytes[length] { content[offset] ^= 0x80 }
                planted += 1
                position = offset + 1 + 512 + random.next(below: 1024)
            }
        }
        body.countNearBoundaries(planted)
        body.finish()
        return body
    }
}
