import Counterpart
import Foundation
#if canImport(FoundationNetworking)
import FoundationNetworking
#endif
import HTTPTransfer
import Testing

/// Runs curl and measures how long it took.
func timedCurl(_ arguments: [String]) throws -> (result: CurlResult, seconds: Double) {
    let start = Date()
    let result = try curl(arguments)
    return (result, Date().timeIntervalSince(start))
}

@Suite("Faults on demand")
struct FaultTests {
    let server: TestServer
    init() throws { server = try makeStaticServer() }

    @Test func cutSendsTheFullLengthThenClosesAndCurlResumes() throws {
        let cut = try curl([server.url("/data.bin?cut=30000")])
        #expect(cut.exitCode == 18)  // partial file: fewer bytes than Content-Length
        #expect(cut.header("Content-Length") == "100000")
        #expect(cut.body == sampleData.prefix(30_000))
        // curl -C - asks for the rest with Range and completes the file.
        let output = try temporaryFile("data.bin", cut.body)
        let resume = Process()
        resume.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        resume.arguments = ["-s", "-C", "-", "-o", output, server.url("/data.bin")]
        try resume.run()
        resume.waitUntilExit()
        #expect(resume.terminationStatus == 0)
        #expect(try sha256(try Data(contentsOf: URL(fileURLWithPath: output))) == (try sha256(sampleData)))
    }

    @Test func cutCountsBytesOfARangeResponse() throws {
        let result = try curl(["-H", "Range: bytes=1000-9999", "-H", "Counterpart-Fault: cut=500", server.url("/data.bin")])
        #expect(result.exitCode == 18)
        #expect(result.status == 206)
        #expect(result.body == sampleData[1000..<1500])
    }

    @Test func urlSessionSeesTheCutAndResumesWithRange() async throws {
        let url = URL(string: server.url("/data.bin"))!
        let partial = PartialDownload()
        let session = URLSession(configuration: .ephemeral, delegate: partial, delegateQueue: nil)
        session.dataTask(with: URL(string: server.url("/data.bin?cut=40000"))!).resume()
        let (first, error) = await partial.result()
        // The connection closed before Content-Length bytes: an error, with what came.
        #expect(error != nil)
        #expect(first.count <= 40_000 && first == sampleData.prefix(first.count))
        var request = URLRequest(url: url)
        request.setValue("bytes=\(first.count)-", forHTTPHeaderField: "Range")
        let (rest, response) = try await makeSession().data(for: request)
        #expect((response as? HTTPURLResponse)?.statusCode == 206)
        #expect(first + rest == sampleData)
    }

    @Test func stallTripsTheClientsTimeout() throws {
        let (result, seconds) = try timedCurl(["--max-time", "2", server.url("/data.bin?stall=10000")])
        #expect(result.exitCode == 28)
        #expect(result.body == sampleData.prefix(10_000))
        #expect(seconds >= 1.5)
    }

    @Test func urlSessionTimesOutOnAStall() async throws {
        let configuration = URLSessionConfiguration.ephemeral
        configuration.timeoutIntervalForRequest = 1
        let session = URLSession(configuration: configuration)
        await #expect(throws: (any Error).self) {
            _ = try await session.data(from: URL(string: server.url("/data.bin?stall=1000"))!)
        }
    }

    @Test func rateThrottlesTheBody() throws {
        // 100,000 bytes at 100,000 B/s: about a second (asserted loosely: the machine is shared).
        let (result, seconds) = try timedCurl([server.url("/data.bin?rate=100000")])
        #expect(result.body == sampleData)
        #expect(seconds >= 0.8 && seconds < 10, "took \(seconds) s")
    }

    @Test func delayWaitsBeforeTheHeaders() throws {
        let (result, seconds) = try timedCurl(["-w", "", server.url("/hello.txt?delay=400")])
        #expect(result.status == 200)
        #expect(seconds >= 0.35)
    }

    @Test func statusAnswersWithThatCode() throws {
        let result = try curl([server.url("/data.bin?status=503")])
        #expect(result.status == 503)
        #expect(try result.json()["status"] as? Int == 503)
        #expect(try result.json()["fault"] as? String == "status=503")
    }

    @Test func resetClosesWithoutAnyResponse() throws {
        let result = try curl([server.url("/hello.txt?reset")])
        #expect(result.exitCode == 56)  // connection reset by peer
        #expect(result.status == 0)
    }

    @Test(arguments: ["cutt=1", "cut=x", "rate=0", "status=99", "delay=-1", "reset=maybe"])
    func anInvalidFaultIs400AndSaysWhy(_ fault: String) throws {
        let result = try curl(["-H", "Counterpart-Fault: \(fault)", server.url("/hello.txt")])
        #expect(result.status == 400)
        #expect((try result.json()["error"] as? String)?.hasPrefix("invalid fault: ") == true)
    }

    @Test func faultsAreDeterministic() throws {
        let first = try curl([server.url("/data.bin?cut=12345")])
        let second = try curl([server.url("/data.bin?cut=12345")])
        #expect(first.body == second.body)
        #expect(first.body.count == 12_345)
    }
}

@Suite("Faults: server-wide and on uploads")
struct ServerWideFaultTests {
    @Test func aServerWideFaultAppliesToEveryRequestAndARequestOverridesIt() throws {
        let server = try makeStaticServer { $0.faults = try! FaultSpec(parsing: "status=418") }
        #expect(try curl([server.url("/hello.txt")]).status == 418)
        #expect(try curl([server.url("/hello.txt?status=200")]).status == 200)
        // The control endpoints are never faulted.
        #expect(try curl([server.url("/__counterpart/health")]).status == 200)
    }

    @Test func aCutUploadLeavesNothing() throws {
        let server = try TestServer()
        let path = try temporaryFile("cut.bin", testBytes(count: 500_000))
        let result = try curl(["-F", "f=@\(path)", server.url("/upload?cut=200000")])
        #expect(result.exitCode != 0)
        #expect(server.eventually { server.uploadedNames().isEmpty }, "left: \(server.uploadedNames())")
    }

    @Test func aStalledUploadLeavesNothing() throws {
        let server = try TestServer()
        let path = try temporaryFile("stall.bin", testBytes(count: 500_000))
        let result = try curl(["--max-time", "2", "-H", "Counterpart-Fault: stall=100000", "-F", "f=@\(path)", server.url("/upload")])
        #expect(result.exitCode == 28)
        #expect(server.eventually { server.uploadedNames().isEmpty }, "left: \(server.uploadedNames())")
    }

    @Test func aThrottledUploadIsStoredWhole() throws {
        let server = try TestServer()
        let data = testBytes(count: 200_000)
        let path = try temporaryFile("slow.bin", data)
        let (result, seconds) = try timedCurl(["-F", "f=@\(path)", server.url("/upload?rate=200000")])
        #expect(result.status == 200)
        #expect(seconds >= 0.7, "took \(seconds) s")
        #expect((try result.json()["files"] as? [[String: Any]])?.first?["sha256"] as? String == (try sha256(data)))
    }

    @Test func aStalledDownloadIsCutWhenTheServerStops() throws {
        let server = try makeStaticServer()
        let download = BackgroundCall { try curl([server.url("/data.bin?stall=1000")]) }
        Thread.sleep(forTimeInterval: 0.5)
        server.server.stop(grace: .milliseconds(200))
        #expect(try download.wait().exitCode == 18)
    }

    @Test func faultsWorkWithAThreadPerConnectionToo() throws {
        let server = try makeStaticServer { $0.threads = 0 }
        let (delayed, seconds) = try timedCurl([server.url("/hello.txt?delay=300")])
        #expect(delayed.status == 200 && seconds >= 0.25)
        #expect(try curl(["--max-time", "2", server.url("/data.bin?stall=1000")]).exitCode == 28)
        let (throttled, throttledSeconds) = try timedCurl([server.url("/data.bin?rate=200000")])
        #expect(throttled.body == sampleData && throttledSeconds >= 0.4)
    }
}

/// A data task that keeps what arrived before it failed.
/// Unchecked Sendable: every stored property is read and written under `lock`.
final class PartialDownload: NSObject, URLSessionDataDelegate, @unchecked Sendable {
    private let lock = NSLock()
    private var received = Data()
    private var outcome: (Data, (any Error)?)?
    private var waiting: CheckedContinuation<(Data, (any Error)?), Never>?

    func result() async -> (Data, (any Error)?) {
        await withCheckedContinuation { continuation in
            let done: (Data, (any Error)?)? = lock.withLock {
                if outcome == nil { waiting = continuation }
                return outcome
            }
            if let done { continuation.resume(returning: done) }
        }
    }

    private var receivedResponse: HTTPURLResponse?

    /// The response's head, once it has come.
    var response: HTTPURLResponse? { lock.withLock { receivedResponse } }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive response: URLResponse,
                    completionHandler: @escaping (URLSession.ResponseDisposition) -> Void) {
        lock.withLock { receivedResponse = response as? HTTPURLResponse }
        completionHandler(.allow)
    }

    func urlSession(_ session: URLSession, dataTask: URLSessionDataTask, didReceive data: Data) {
        lock.withLock { received.append(data) }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
        let (continuation, result): (CheckedContinuation<(Data, (any Error)?), Never>?, (Data, (any Error)?)) = lock.withLock {
            let result = (received, error)
            outcome = result
            defer { waiting = nil }
            return (waiting, result)
        }
        continuation?.resume(returning: result)
        session.finishTasksAndInvalidate()
    }
}
