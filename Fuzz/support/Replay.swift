#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The entry point of a fuzz target built without libFuzzer: replays the input files
/// given as arguments through `check` (a violation traps), or says how to fuzz.
public func replayInputs(target: String, check: ([UInt8]) -> Void) {
    let files = CommandLine.arguments.dropFirst()
    if files.isEmpty {
        print("\(target) is a libFuzzer target: run `scripts/fuzz SECONDS \(target)` (or pass input files to replay them here)")
        return
    }
    for path in files {
        guard let bytes = readFile(path) else {
            print("\(target): cannot read \(path)")
            continue
        }
        check(bytes)
        print("\(target): \(path): \(bytes.count) bytes, no violation")
    }
}

/// A file's bytes.
func readFile(_ path: String) -> [UInt8]? {
    guard let file = fopen(path, "rb") else { return nil }
    defer { fclose(file) }
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65_536)
    while true {
        let count = fread(&buffer, 1, buffer.count, file)
        if count <= 0 { break }
        bytes += buffer[0..<count]
    }
    return bytes
}
