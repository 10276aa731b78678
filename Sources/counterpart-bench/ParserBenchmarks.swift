// The parsers suite: the multipart/form-data parser against the limits of the same bytes
// (memmem, memcpy), the Range header parser, and SHA-256 as uploads are hashed.

import Counterpart
import HTTPTransfer

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

enum ParserBenchmarks {
    static var suite: BenchmarkSuite {
        BenchmarkSuite(name: "parsers", summary: "HTTPTransfer's parsers, in memory (no I/O)", sections: [
            BenchmarkSection(
                name: "multipart",
                summary: "FormDataParser on four generated bodies (keys: \(MultipartBody.allCases.map(\.key).joined(separator: ", "))), beside memmem, memcpy and libmicrohttpd's MHD_PostProcessor (the C peer, in memory)",
                run: runMultipart),
            BenchmarkSection(
                name: "range",
                summary: "RangeHeader(parsing:) + resolve(length:) on typical headers (key: range)",
                run: runRange),
            BenchmarkSection(
                name: "sha256",
                summary: "SHA-256 alone, as an upload's file is hashed (Counterpart's SHA256 on GnuTLS, 512 KiB chunks), beside memcpy of the same pieces (key: sha256)",
                run: runSHA256),
        ])
    }

    // MARK: - Multipart

    /// The chunk sizes the body is fed in: 64 KiB, and what libmicrohttpd hands a request
    /// handler at its default connection memory limit.
    static let chunkSizes = [64 * 1024, 16_248]
    static let copyChunk = 64 * 1024

    /// Limits as a server would configure them for these bodies: the default `maxParts`
    /// (1,000) would refuse the 10,000-field body.
    static let limits = MultipartLimits(maxParts: 100_000)

    enum MultipartBody: CaseIterable {
        case bigFile, manyFiles, smallFields, salted

        var key: String {
            switch self {
            case .bigFile: "multipart/big"
            case .manyFiles: "multipart/files"
            case .smallFields: "multipart/fields"
            case .salted: "multipart/salted"
            }
        }

        func generate(quick: Bool) -> GeneratedBody {
            let scale = quick ? 8 : 1
            switch self {
            case .bigFile: return .bigFile(size: (256 << 20) / scale, seed: 1)
            case .manyFiles: return .manyFiles(64, size: (4 << 20) / scale, seed: 2)
            case .smallFields: return .smallFields(10_000, seed: 3)
            case .salted: return .salted(size: (256 << 20) / scale, seed: 4)
            }
        }

        /// The issue's target for this body, where it sets a figure of its own (the other
        /// bodies are held to MHD_PostProcessor's figure, measured in the same run).
        func target(megabytesPerSecond: Double, partsPerSecond: Double, chunk: Int) -> TargetCheck? {
            let chunkText = chunk == 64 * 1024 ? "64 KiB chunks" : "\(format(chunk)) B chunks"
            switch self {
            case .bigFile, .manyFiles:
                return nil
            case .smallFields:
                return TargetCheck(name: "multipart, 10,000 small fields, \(chunkText)", measured: partsPerSecond,
                                   target: 1_000_000, unit: "parts/s", source: "issue")
            case .salted:
                return TargetCheck(name: "multipart, salted body, \(chunkText)", measured: megabytesPerSecond,
                                   target: 4_300, unit: "MB/s", source: "issue")
            }
        }
    }

    static func runMultipart(_ context: BenchContext) {
        let options = context.options
        print("""

            Multipart: FormDataParser, fed in chunks; MB = 10^6 bytes; median [min–max] of \(options.runs) run(s)
              (\(options.runs * smallBodyRepeats) for bodies under \(formatBytes(smallBody)), which parse in milliseconds, for both parsers)
              parser:  a server's consumer: file data only counted (slice lengths summed), field values
                       collected into [UInt8] arrays kept with their names; limits: maxParts 100,000
              memmem:  glibc memmem for "\\r\\n--" + boundary over the whole body, counting matches (one call per match)
              memcpy:  the body copied in \(formatBytes(copyChunk)) chunks into one \(formatBytes(copyChunk)) buffer
              MHD_PP:  libmicrohttpd's MHD_PostProcessor (64 KiB buffer) fed the same chunks in memory, its callback
                       counting parts and bytes (bench/peers/mhd_postprocessor_bench.c, run as a process of its own;
                       \(mhdParserPath(options) == nil ? "NOT BUILT in \(options.peersFolder): make bench compiles it" : "parts and bytes checked"))
            """)
        flushOutput()
        guard let memmem = Memmem() else {
            print("  memmem not found with dlsym: cannot run the multipart benchmarks")
            return
        }
        var table = Table([
            ("body", .left), ("size MB", .right), ("chunk B", .right), ("parser MB/s", .right),
            ("parts/s", .right), ("memmem MB/s", .right), ("memcpy MB/s", .right), ("parser/memmem", .right),
            ("MHD_PP MB/s", .right), ("parser/MHD_PP", .right),
        ])
        var notes: [String] = []
        for kind in MultipartBody.allCases where options.wants(key: kind.key) {
            measure(kind, options: options, memmem: memmem, into: &table, notes: &notes, context: context)
        }
        print(table.render())
        for note in notes { print("  " + note) }
    }

    /// Generates one body, checks the parser reads it right, times it, and frees it.
    private static func measure(
        _ kind: MultipartBody, options: BenchOptions, memmem: Memmem, into table: inout Table,
        notes: inout [String], context: BenchContext
    ) {
        printError("  [\(kind.key)] generating…")
        let body = kind.generate(quick: options.quick)
        let bytes = body.bytes
        let megabytes = Double(bytes.count) / 1e6
        let needle = body.delimiter

        // The bytes must be what they claim: exactly one delimiter per part (the first has
        // no CRLF before it; the close delimiter has), and the parser must hand back each
        // part's content exactly, at every chunk size.
        let delimiters = memmem.count(needle, in: bytes)
        guard delimiters == body.parts else {
            notes.append("\(body.label): INVALID BODY: memmem finds \(delimiters) delimiters, \(body.parts) expected")
            return
        }
        for chunk in chunkSizes {
            if let problem = validate(body, chunkSize: chunk) {
                notes.append("\(body.label): PARSER OUTPUT WRONG at \(format(chunk)) B chunks: \(problem)")
                return
            }
        }

        printError("  [\(kind.key)] \(body.label), \(format(megabytes, decimals: 1)) MB, \(body.parts) part\(body.parts == 1 ? "" : "s")"
                   + (body.nearBoundaries > 0 ? ", \(format(body.nearBoundaries)) near-boundaries" : "") + ": measuring…")
        let copyBuffer = UnsafeMutableRawBufferPointer.allocate(byteCount: copyChunk, alignment: 64)
        defer { copyBuffer.deallocate() }
        var parserSeconds = chunkSizes.map { _ in Samples() }
        var memmemSeconds = Samples()
        var memcpySeconds = Samples()
        var failure: String?
        // Run 0 warms up. The measurements are interleaved run by run, so that a noisy
        // neighbour slows them alike rather than one of them.
        for run in 0...runs(for: bytes.count, options) {
            for (index, chunk) in chunkSizes.enumerated() {
                var sink = ServerSink()
                let time = seconds {
                    do {
                        sink = try parseForServer(bytes, boundary: body.boundary, chunkSize: chunk)
                    } catch {
                        failure = "\(error)"
                    }
                }
                if failure == nil, let problem = sink.mismatch(with: body) { failure = problem }
                if let failure {
                    notes.append("\(body.label): PARSER FAILED at \(format(chunk)) B chunks: \(failure)")
                    return
                }
                blackHole(sink)
                if run > 0 { parserSeconds[index].append(time) }
            }
            var found = 0
            let memmemTime = seconds { found = memmem.count(needle, in: bytes) }
            precondition(found == body.parts, "memmem count changed")
            var last: UInt8 = 0
            let memcpyTime = seconds { last = copyInChunks(bytes, into: copyBuffer) }
            blackHole(last)
            if run > 0 {
                memmemSeconds.append(memmemTime)
                memcpySeconds.append(memcpyTime)
            }
        }

        notes.append("\(body.label): boundary \"\(body.boundary.value)\", \(format(body.parts)) part\(body.parts == 1 ? "" : "s"), "
                     + "\(format(bytes.count)) bytes, content checked byte for byte at each chunk size"
                     + (body.nearBoundaries > 0 ? "; \(format(body.nearBoundaries)) near-boundaries planted" : ""))
        let memmemRate = memmemSeconds.map { megabytes / $0 }
        let peer = measurePostProcessor(body, options: options)
        if let failure = peer.failure { notes.append("\(body.label): MHD_PostProcessor: \(failure)") }
        let section = "parsers/multipart"
        for (index, chunk) in chunkSizes.enumerated() {
            let rate = parserSeconds[index].map { megabytes / $0 }
            let partsRate = parserSeconds[index].map { Double(body.parts) / $0 }
            let peerRate = peer.seconds[index].map { megabytes / $0 }
            let ratio = rate.median / peerRate.median
            table.append([
                body.label, format(megabytes, decimals: 1), format(chunk), rate.formatted(),
                partsRate.formatted(), memmemRate.formatted(), memcpySeconds.map { megabytes / $0 }.formatted(),
                format(100 * rate.median / memmemRate.median) + " %",
                peerRate.formatted(), peerRate.isEmpty ? "—" : format(ratio, decimals: 2) + "×",
            ])
            let subject = "\(body.label), \(format(chunk)) B chunks"
            context.record(FigureRecord(section: section, subject: subject, metric: "FormDataParser", unit: "MB/s", samples: rate))
            context.record(FigureRecord(section: section, subject: subject, metric: "MHD_PostProcessor", unit: "MB/s", samples: peerRate))
            context.record(FigureRecord(section: section, subject: subject, metric: "memmem", unit: "MB/s", samples: memmemRate))
            if let target = kind.target(megabytesPerSecond: rate.median, partsPerSecond: partsRate.median, chunk: chunk) {
                context.record(target)
            }
            if !peerRate.isEmpty {
                // Today's parser is 1.6–3.6× MHD_PostProcessor: it must not fall below it.
                context.record(RatioRecord(section: section, name: "FormDataParser / MHD_PostProcessor, \(subject)", ratio: ratio,
                                           target: "≥ 1.00×", passes: ratio >= 1))
                context.record(TargetCheck(name: "multipart \(subject): parser / MHD_PostProcessor", measured: 100 * ratio,
                                           target: 100, unit: "%", source: "issue: must not fall; same run"))
            }
        }
    }

    /// A body that parses in a few milliseconds is timed many times: one preemption would
    /// otherwise decide a median of three.
    static let smallBody = 16 << 20
    static let smallBodyRepeats = 20

    /// Timed runs (after the warm-up) of a body of `size` bytes, the same for both parsers.
    static func runs(for size: Int, _ options: BenchOptions) -> Int {
        size < smallBody ? options.runs * smallBodyRepeats : options.runs
    }

    /// The C peer's executable, when `make bench` built it.
    static func mhdParserPath(_ options: BenchOptions) -> String? {
        let path = options.peersFolder + "/mhd_postprocessor_bench"
        return access(path, X_OK) == 0 ? path : nil
    }

    /// MHD_PostProcessor on `body` at each chunk size: the body is written to a file the C
    /// peer reads into memory; its first run warms up. Seconds per parse, per chunk size.
    private static func measurePostProcessor(_ body: GeneratedBody, options: BenchOptions) -> (seconds: [Samples], failure: String?) {
        var seconds = chunkSizes.map { _ in Samples() }
        guard let peer = mhdParserPath(options) else { return (seconds, "not built (make bench compiles bench/peers/mhd_postprocessor_bench.c)") }
        let folder = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp"
        let path = "\(folder)/counterpart-bench-body-\(getpid()).bin"
        CleanupRegistry.shared.add(folder: path)
        defer {
            unlink(path)
            CleanupRegistry.shared.remove(folder: path)
        }
        let descriptor = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { return (seconds, "cannot create \(path): \(String(cString: strerror(errno)))") }
        var offset = 0
        let bytes = body.bytes
        while offset < bytes.count {
            let written = write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
            guard written > 0 else { break }
            offset += written
        }
        close(descriptor)
        guard offset == bytes.count else { return (seconds, "cannot write \(path)") }
        printError("  [\(body.key)] MHD_PostProcessor: measuring…")
        for (index, chunk) in chunkSizes.enumerated() {
            do {
                let result = try runCommand(peer, [path, body.boundary.value, String(chunk), String(runs(for: bytes.count, options) + 1)], timeout: 300)
                guard result.status == 0 else { return (seconds, "exit status \(result.status): \(result.errorOutput.prefix(300))") }
                // "run SECONDS PARTS DATA_BYTES"
                let runs = result.output.split(separator: "\n").map { $0.split(separator: " ") }
                for (run, fields) in runs.enumerated() {
                    guard fields.count == 4, fields[0] == "run", let time = Double(fields[1]), let parts = Int(fields[2]),
                          let data = Int(fields[3]) else { return (seconds, "printed \"\(fields.joined(separator: " "))\"") }
                    guard parts == body.parts, data == body.fileBytes + body.fieldBytes else {
                        return (seconds, "saw \(parts) parts and \(data) bytes; \(body.parts) parts and \(body.fileBytes + body.fieldBytes) bytes written")
                    }
                    if run > 0 { seconds[index].append(time) }
                }
            } catch {
                return (seconds, "\(error)")
            }
        }
        return (seconds, nil)
    }

    /// What a server does with the events: counts file bytes (touching nothing but the
    /// slice's length), and collects each field's value with its name.
    struct ServerSink {
        var parts = 0
        var fileParts = 0
        var fileBytes = 0
        var fields: [(name: String, value: [UInt8])] = []
        private var fieldName: String?
        private var fieldValue: [UInt8] = []
        var ended = false

        @inline(__always)
        mutating func consume(_ event: FormDataEvent) {
            switch event {
            case .partBegin(let part):
                parts += 1
                if part.isFile {
                    fileParts += 1
                    fieldName = nil
                } else {
                    fieldName = part.name
                    fieldValue = []
                }
            case .partData(let slice):
                if fieldName == nil {
                    fileBytes &+= slice.count
                } else {
                    fieldValue.append(contentsOf: slice)
                }
            case .partEnd:
                if let name = fieldName {
                    fields.append((name, fieldValue))
                    fieldName = nil
                }
            case .end:
                ended = true
            }
        }

        /// Why this is not what `body` holds, or nil when it is.
        func mismatch(with body: GeneratedBody) -> String? {
            let fieldBytes = fields.reduce(0) { $0 + $1.value.count }
            if !ended { return "no end event" }
            if parts != body.parts || fileParts != body.fileParts || fields.count != body.fieldParts {
                return "\(parts) parts (\(fileParts) files, \(fields.count) fields); \(body.parts) expected"
            }
            if fileBytes != body.fileBytes || fieldBytes != body.fieldBytes {
                return "\(fileBytes) file bytes, \(fieldBytes) field bytes; \(body.fileBytes), \(body.fieldBytes) expected"
            }
            return nil
        }
    }

    /// The timed loop: a fresh parser, as for each request, fed the body chunk by chunk.
    @inline(never)
    static func parseForServer(
        _ body: UnsafeRawBufferPointer, boundary: MultipartBoundary, chunkSize: Int
    ) throws -> ServerSink {
        var parser = FormDataParser(boundary: boundary, limits: limits)
        var sink = ServerSink()
        var offset = 0
        while offset < body.count {
            let end = min(offset + chunkSize, body.count)
            try parser.feed(UnsafeRawBufferPointer(rebasing: body[offset..<end])) { event in sink.consume(event) }
            offset = end
        }
        try parser.finish()
        return sink
    }

    /// Parses `body` checking every byte of content against where it was written. Untimed.
    static func validate(_ body: GeneratedBody, chunkSize: Int) -> String? {
        let bytes = body.bytes
        var parser = FormDataParser(boundary: body.boundary, limits: limits)
        var part = -1
        var offset = 0
        var problem: String?
        var ended = false
        do {
            var position = 0
            while position < bytes.count, problem == nil {
                let end = min(position + chunkSize, bytes.count)
                try parser.feed(UnsafeRawBufferPointer(rebasing: bytes[position..<end])) { event in
                    guard problem == nil else { return }
                    switch event {
                    case .partBegin:
                        part += 1
                        offset = 0
                        if part >= body.contents.count { problem = "more parts than written" }
                    case .partData(let slice):
                        let content = body.contents[part]
                        if offset + slice.count > content.count {
                            problem = "part \(part + 1): more content than written"
                        } else if memcmp(slice.baseAddress!, bytes.baseAddress! + content.lowerBound + offset, slice.count) != 0 {
                            problem = "part \(part + 1): content differs at offset \(offset)"
                        }
                        offset += slice.count
                    case .partEnd:
                        if offset != body.contents[part].count {
                            problem = "part \(part + 1): \(offset) bytes of content, \(body.contents[part].count) written"
                        }
                    case .end:
                        ended = true
                    }
                }
                position = end
            }
            try parser.finish()
        } catch {
            return "\(error)"
        }
        if problem == nil, !ended || part + 1 != body.contents.count {
            problem = "\(part + 1) parts, \(body.contents.count) written"
        }
        return problem
    }

    /// glibc's memmem, which Swift's Glibc module does not declare (it needs _GNU_SOURCE).
    struct Memmem {
        private typealias Function = @convention(c) (
            UnsafeRawPointer?, Int, UnsafeRawPointer?, Int
        ) -> UnsafeMutableRawPointer?

        private let function: Function

        init?() {
            guard let symbol = dlsym(nil, "memmem") else { return nil }
            function = unsafeBitCast(symbol, to: Function.self)
        }

        /// Occurrences of `needle` in `haystack`, not overlapping.
        @inline(never)
        func count(_ needle: [UInt8], in haystack: UnsafeRawBufferPointer) -> Int {
            needle.withUnsafeBytes { needle in
                guard var start = haystack.baseAddress else { return 0 }
                let end = start + haystack.count
                var found = 0
                while let hit = function(start, end - start, needle.baseAddress, needle.count) {
                    found += 1
                    start = UnsafeRawPointer(hit) + needle.count
                }
                return found
            }
        }
    }

    /// Copies `body` chunk by chunk into `buffer`; returns the last byte copied.
    @inline(never)
    static func copyInChunks(_ body: UnsafeRawBufferPointer, into buffer: UnsafeMutableRawBufferPointer) -> UInt8 {
        var offset = 0
        var length = 0
        while offset < body.count {
            length = min(buffer.count, body.count - offset)
            memcpy(buffer.baseAddress!, body.baseAddress! + offset, length)
            offset += length
        }
        return length > 0 ? buffer[length - 1] : 0
    }

    // MARK: - SHA-256

    /// What hashing costs an upload by itself: every stored file's SHA-256 is computed as
    /// it is written, in chunks the size an upload hands its hashing thread.
    static func runSHA256(_ context: BenchContext) {
        guard context.options.wants(key: "sha256") else { return }
        let size = context.options.quick ? 32 << 20 : 256 << 20
        let piece = 512 * 1024
        let bytes = UnsafeMutableRawBufferPointer.allocate(byteCount: size, alignment: 64)
        let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: piece, alignment: 64)
        defer { bytes.deallocate(); scratch.deallocate() }
        var random = SplitMix64(seed: 1)
        random.fill(bytes.baseAddress!, count: size)
        let cpuInfo = MachineContext.readTextFile("/proc/cpuinfo") ?? ""
        let extensions = cpuInfo.contains(" sha_ni") ? "has the SHA extensions (sha_ni)" : "has no SHA extensions (no sha_ni in /proc/cpuinfo)"
        print("""

            SHA-256: \(format(size >> 20)) MiB of random bytes in \(piece / 1024) KiB pieces; MB/s, median [min–max] of \(context.options.runs) run(s)
              hash:    Counterpart's SHA256 (GnuTLS's gnutls_hash), what every stored upload goes through; this CPU \(extensions)
              memcpy:  the same pieces copied into one \(piece / 1024) KiB buffer: what copying the bytes into an upload's chunks costs
            """)
        flushOutput()
        var hashTimes = Samples()
        var copyTimes = Samples()
        for run in 0...context.options.runs {
            let hashTime = seconds {
                let hasher = SHA256()
                for offset in stride(from: 0, to: size, by: piece) {
                    hasher.update(UnsafeRawBufferPointer(rebasing: bytes[offset..<(offset + piece)]))
                }
                blackHole(hasher.finish())
            }
            let copyTime = seconds { blackHole(copyInChunks(UnsafeRawBufferPointer(bytes), into: scratch)) }
            if run > 0 {
                hashTimes.append(hashTime)
                copyTimes.append(copyTime)
            }
        }
        let megabytes = Double(size) / 1e6
        let hashRate = hashTimes.map { megabytes / $0 }
        let copyRate = copyTimes.map { megabytes / $0 }
        var table = Table([("work", .left), ("MB/s", .right), ("CPU ms per GB", .right)])
        table.append(["SHA-256", hashRate.formatted(), format(1e6 / hashRate.median)])
        table.append(["memcpy", copyRate.formatted(), format(1e6 / copyRate.median)])
        print(table.render())
        let subject = "\(size >> 20) MiB in \(piece / 1024) KiB pieces"
        context.record(FigureRecord(section: "parsers/sha256", subject: subject, metric: "SHA-256", unit: "MB/s", samples: hashRate))
        context.record(FigureRecord(section: "parsers/sha256", subject: subject, metric: "memcpy", unit: "MB/s", samples: copyRate))
    }

    // MARK: - Range

    static func runRange(_ context: BenchContext) {
        guard context.options.wants(key: "range") else { return }
        let length: UInt64 = 10_000_000
        let hundred = "bytes=" + (0..<100).map { "\($0 * 1000)-\($0 * 1000 + 499)" }.joined(separator: ",")
        let headers = ["bytes=0-499", "bytes=500-", "bytes=-500", "bytes=0-0,-1", "bytes= 0-999, 4500-5499, -1000", hundred]
        print("""

            Range: RangeHeader(parsing:) + resolve(length: \(format(Int(length)))); ns per header, median [min–max] of \(context.options.runs) run(s)
            """)
        flushOutput()
        var table = Table([
            ("header", .left), ("iterations", .right), ("ns/header", .right), ("headers/s", .right), ("result", .left),
        ])
        for header in headers {
            // Four separately allocated copies, indexed at run time, so that the parse cannot
            // be hoisted out of the loop as loop-invariant.
            let copies = (0..<4).map { _ in String(decoding: Array(header.utf8), as: UTF8.self) }
            // Calibrate (this also warms up): about 0.25 s per run, at most 1,000,000 parses,
            // from a probe of at least 30 ms so that one preemption does not skew it.
            var probe = 1_000
            var probeTime = 0.0
            while true {
                let iterations = probe
                probeTime = seconds { blackHole(parseRanges(copies, length: length, iterations: iterations)) }
                if probeTime >= 0.03 || probe >= 1_000_000 { break }
                probe *= 4
            }
            let perHeader = probeTime / Double(probe)
            let iterations = perHeader * 1_000_000 <= 0.25
                ? 1_000_000 : max(10_000, Int(0.25 / perHeader) / 1_000 * 1_000)
            var times = Samples()
            for run in 0...context.options.runs {
                var digest: UInt64 = 0
                let time = seconds { digest = parseRanges(copies, length: length, iterations: iterations) }
                blackHole(digest)
                if run > 0 { times.append(time) }
            }
            let nanoseconds = times.map { $0 * 1e9 / Double(iterations) }
            let shown = header.count > 40 ? String(header.prefix(30)) + "… (\(header.utf8.count) B)" : "\"\(header)\""
            table.append([
                shown, format(iterations), nanoseconds.formatted(decimals: 1),
                format(1e9 / nanoseconds.median), describe(RangeHeader(parsing: header)?.resolve(length: length)),
            ])
        }
        print(table.render())
    }

    /// The timed loop: parse and resolve, `iterations` times; a digest of the results.
    @inline(never)
    static func parseRanges(_ headers: [String], length: UInt64, iterations: Int) -> UInt64 {
        var digest: UInt64 = 0
        for index in 0..<iterations {
            guard let header = RangeHeader(parsing: headers[index & 3]) else {
                digest &+= 7
                continue
            }
            switch header.resolve(length: length) {
            case .full: digest &+= 1
            case .unsatisfiable: digest &+= 2
            case .partial(let ranges): digest &+= UInt64(ranges.count) &+ ranges[0].first
            }
        }
        return digest
    }

    private static func describe(_ resolution: RangeResolution?) -> String {
        switch resolution {
        case nil: return "ignored (invalid)"
        case .full: return "200, whole"
        case .unsatisfiable: return "416"
        case .partial(let ranges):
            return "206, \(ranges.count) range\(ranges.count == 1 ? "" : "s")"
                + (ranges.count <= 3 ? ": " + ranges.map(\.description).joined(separator: ", ") : "")
        }
    }
}
