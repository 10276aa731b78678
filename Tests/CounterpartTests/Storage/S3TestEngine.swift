@testable import Counterpart
import Foundation
import Synchronization
import Testing

/// The S3 engine the S3 suites run against: `COUNTERPART_S3_ENV` names the `s3.env` that
/// `scripts/ceph-s3 up` wrote (`make test-s3` starts the engine and sets it).
enum S3TestEngine {
    static let skipReason: Comment = "COUNTERPART_S3_ENV is not set: `make test-s3` starts Ceph RGW and runs the S3 suites"

    /// The variables of the engine's s3.env, or nil when there is no engine.
    static let environment: [String: String]? = {
        guard let path = ProcessInfo.processInfo.environment["COUNTERPART_S3_ENV"], !path.isEmpty,
              let text = try? String(contentsOfFile: path, encoding: .utf8) else { return nil }
        var variables: [String: String] = [:]
        for line in text.split(separator: "\n") {
            guard let equals = line.firstIndex(of: "=") else { continue }
            variables[String(line[..<equals])] = String(line[line.index(after: equals)...])
        }
        return variables
    }()

    static var isAvailable: Bool { environment != nil }

    static let bucket = "counterpart-tests"

    /// A client on the test bucket under a prefix of its own (so tests running at once do
    /// not see each other's keys); the bucket is created on first use.
    static func client(prefix: String = "t-\(UUID().uuidString.lowercased().prefix(8))/",
                       secret: String? = nil, accessKey: String? = nil, endpoint: String? = nil) throws -> S3Client {
        let environment = try #require(environment)
        var configuration = try S3Configuration(storeURL: "s3://\(bucket)/\(prefix)",
                                                endpoint: endpoint ?? environment["S3_ENDPOINT"], environment: environment)
        if let secret { configuration.secretAccessKey = secret }
        if let accessKey { configuration.accessKeyID = accessKey }
        let client = try S3Client(configuration)
        try bucketCreated.withLock { created in
            if !created, endpoint == nil, secret == nil, accessKey == nil {
                try client.createBucketIfMissing()
                created = true
            }
        }
        return client
    }

    private static let bucketCreated = Mutex(false)
}

/// Runs `body` on `count` threads released together (a race needs them at the gate at once,
/// which a pool sized to the cores would not give), and returns their results in order.
func onThreads<Result: Sendable>(_ count: Int, _ body: @escaping @Sendable (Int) -> Result) -> [Result] {
    let results = Mutex<[Int: Result]>([:])
    let ready = DispatchGroup()
    let done = DispatchGroup()
    let gate = DispatchSemaphore(value: 0)
    for index in 0..<count {
        ready.enter()
        done.enter()
        let thread = Thread {
            ready.leave()
            gate.wait()
            let result = body(index)
            results.withLock { $0[index] = result }
            done.leave()
        }
        thread.start()
    }
    ready.wait()
    for _ in 0..<count { gate.signal() }
    done.wait()
    return results.withLock { all in (0..<count).map { all[$0]! } }
}

/// The outcome of one racing write: its ETag, or the error it got.
enum WriteOutcome: Sendable, Equatable {
    case won(String)
    case lost(S3Error)
    case failed(String)

    init(_ write: () throws -> String) {
        do { self = .won(try write()) } catch let error as S3Error { self = .lost(error) } catch { self = .failed("\(error)") }
    }

    var won: Bool { if case .won = self { true } else { false } }
}
