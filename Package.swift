// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "Counterpart",
    platforms: [.macOS(.v13)],
    products: [
        .library(name: "HTTPTransfer", targets: ["HTTPTransfer"]),
    ],
    targets: [
        // The formats of file transfer over HTTP: pure Swift, no I/O, no C targets.
        .target(name: "HTTPTransfer"),
        .executableTarget(name: "counterpart-bench", dependencies: ["HTTPTransfer"]),
        // libFuzzer targets: built with `scripts/fuzz` (see the README); a plain build
        // compiles them with a stub entry point.
        .executableTarget(name: "fuzz-multipart", dependencies: ["HTTPTransfer"], path: "Fuzz/multipart"),
        .executableTarget(name: "fuzz-headers", dependencies: ["HTTPTransfer"], path: "Fuzz/headers"),
        .testTarget(name: "HTTPTransferTests", dependencies: ["HTTPTransfer"]),
    ],
    swiftLanguageModes: [.v6]
)
