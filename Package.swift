// swift-tools-version:6.0
import PackageDescription

let package = Package(
    name: "Counterpart",
    // macOS 15: the server's locks are the standard library's Mutex (Synchronization).
    platforms: [.macOS(.v15)],
    products: [
        .library(name: "HTTPTransfer", targets: ["HTTPTransfer"]),
        .library(name: "Counterpart", targets: ["Counterpart"]),
        .executable(name: "counterpart", targets: ["counterpart"]),
        .executable(name: "counterpart-examples", targets: ["counterpart-examples"]),
    ],
    targets: [
        // The formats of file transfer over HTTP: pure Swift, no I/O, no C targets.
        .target(name: "HTTPTransfer"),
        .systemLibrary(name: "CMicroHTTPD", pkgConfig: "libmicrohttpd", providers: [.apt(["libmicrohttpd-dev"]), .brew(["libmicrohttpd"])]),
        .systemLibrary(name: "CGnuTLS", pkgConfig: "gnutls", providers: [.apt(["libgnutls28-dev"]), .brew(["gnutls"])]),
        // Linux-only calls (openat2, sync_file_range, POLLRDHUP); empty elsewhere. Only
        // Support/Platform.swift uses it.
        .systemLibrary(name: "CLinux"),
        .systemLibrary(name: "CCrypt", pkgConfig: "libxcrypt", providers: [.apt(["libcrypt-dev"])]),
        // libcurl's easy interface with non-variadic setopt/getinfo wrappers, for the S3 client
        // (Storage/S3/CurlTransfer.swift is its only importer): its built-in AWS SigV4 signs.
        // Loaded with dlopen by the first S3 store, not linked: only curl's headers
        // (libcurl4-openssl-dev) are needed to build, and libcurl4 only to use an S3 store.
        .target(name: "CCurl", linkerSettings: [.linkedLibrary("dl", .when(platforms: [.linux]))]),
        // The server: the libmicrohttpd adapter (the only importer of CMicroHTTPD) and the endpoints.
        .target(name: "Counterpart", dependencies: ["HTTPTransfer", "CMicroHTTPD", "CGnuTLS", "CLinux", "CCrypt", "CCurl"]),
        .executableTarget(name: "counterpart", dependencies: ["Counterpart"]),
        // The seeds' clients (the Objective-C iOS tutorials the project was built against) on
        // URLSession, as a library the tests run
        // and as a command that runs them against a server.
        .target(name: "CounterpartExamples", dependencies: ["HTTPTransfer"]),
        .executableTarget(name: "counterpart-examples", dependencies: ["CounterpartExamples"]),
        .executableTarget(name: "counterpart-bench", dependencies: ["Counterpart", "HTTPTransfer"]),
        // libFuzzer targets: built with `scripts/fuzz` (see the README); a plain build
        // compiles them with a stub entry point.
        .executableTarget(name: "fuzz-multipart", dependencies: ["HTTPTransfer", "FuzzSupport"], path: "Fuzz/multipart"),
        .executableTarget(name: "fuzz-headers", dependencies: ["HTTPTransfer", "FuzzSupport"], path: "Fuzz/headers"),
        .target(name: "FuzzSupport", path: "Fuzz/support"),
        .testTarget(name: "HTTPTransferTests", dependencies: ["HTTPTransfer"]),
        .testTarget(name: "CounterpartTests", dependencies: ["Counterpart", "HTTPTransfer", "CounterpartExamples"]),
    ],
    swiftLanguageModes: [.v6]
)
