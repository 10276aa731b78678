import Counterpart
import Foundation
import HTTPTransfer
import Testing

/// Every fault on every endpoint leaves nothing behind: no lock (the next request is not
/// 423/409 because of it), no temporary file, no resumable-upload slot, no descriptor.
@Suite("Faults: none leaves state behind")
struct NoLeakMatrixTests {
    /// Each fault, short: a stall is given up by the client after half a second.
    static let faults = ["cut=1000", "stall=1000", "rate=4MiB", "delay=20", "status=503", "reset", "reset=1000",
                         "fail=1", "jitter=20", "first-byte=20"]

    enum Endpoint: String, CaseIterable, CustomTestStringConvertible {
        case staticFile, generatedBytes, upload, tusCreate, tusPatch, tusHead, ietfCreate, ietfAppend, ietfOffset
        var testDescription: String { rawValue }
    }

    static let slots = 3
    static let size = 20_000

    @Test(arguments: faults, Endpoint.allCases)
    func faultLeavesNothing(_ fault: String, _ endpoint: Endpoint) throws {
        let server = try makeStaticServer { $0.resumableLimits.maxUploads = Self.slots }
        let port = server.server.port
        let ietf = DraftClient(version: 8, port: port)
        let (form, _) = resumableBody("matrix.bin", size: Self.size)
        let content = [UInt8](testBytes(count: Self.size))
        let header = "Counterpart-Fault: \(fault)\r\n"

        // Set-up (an upload to append to), then the faulted request.
        var resource: String?
        let request: [UInt8]
        switch endpoint {
        case .staticFile:
            request = Array("GET /data.bin HTTP/1.1\r\nHost: x\r\n\(header)\r\n".utf8)
        case .generatedBytes:
            request = Array("GET /bytes/100000 HTTP/1.1\r\nHost: x\r\n\(header)\r\n".utf8)
        case .upload:
            request = Array(("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Type: multipart/form-data; boundary=RUFH\r\n"
                + "Content-Length: \(form.count)\r\n\(header)\r\n").utf8) + form
        case .tusCreate:
            request = Array("POST /files HTTP/1.1\r\nHost: x\r\nTus-Resumable: 1.0.0\r\nUpload-Length: \(Self.size)\r\nContent-Length: 0\r\n\(header)\r\n".utf8)
        case .tusPatch, .tusHead:
            let created = try tus(["-X", "POST", "-H", "Upload-Length: \(Self.size)", server.url("/files")])
            let location = try #require(created.header("Location"))
            resource = location
            request = endpoint == .tusHead
                ? Array("HEAD \(location) HTTP/1.1\r\nHost: x\r\nTus-Resumable: 1.0.0\r\n\(header)\r\n".utf8)
                : Array(("PATCH \(location) HTTP/1.1\r\nHost: x\r\nTus-Resumable: 1.0.0\r\nUpload-Offset: 0\r\n"
                    + "Content-Type: application/offset+octet-stream\r\nContent-Length: \(Self.size)\r\n\(header)\r\n").utf8) + content
        case .ietfCreate:
            request = Array((ietf.creationHead(length: 10_000, complete: false, extra: header) + "\r\n").utf8) + form.prefix(10_000)
        case .ietfAppend, .ietfOffset:
            let path = try ietf.createIncomplete(form, sent: 5_000, announceLength: false)
            resource = path
            request = endpoint == .ietfOffset
                ? Array(ietf.head(path).replacingOccurrences(of: "Connection: close\r\n", with: "Connection: close\r\n\(header)").utf8)
                : Array(("PATCH \(path) HTTP/1.1\r\nHost: x\r\nUpload-Draft-Interop-Version: 8\r\nUpload-Complete: ?1\r\nUpload-Offset: 5000\r\n"
                    + "Content-Type: application/partial-upload\r\nContent-Length: \(form.count - 5_000)\r\n\(header)\r\n").utf8) + form.dropFirst(5_000)
        }
        // An object store's round trips make an answer take longer than a folder's.
        let patience = server.objectStore == nil ? 0.5 : 3
        let faulted = String(decoding: try exchangeGivingUp(port: port, request, after: patience), as: UTF8.self)
        // An append the fault only slowed down completed the upload: nothing is left to resume.
        let completed = endpoint == .ietfAppend && faulted.contains("HTTP/1.1 200 ")

        // The next request is answered as if the fault had not been (waiting out a request
        // the server is still reading: it lets go once it sees the client gone).
        let next = try waitForAnswer { () throws -> Int in
            switch completed ? .ietfCreate : endpoint {
            case .staticFile: return try curl([server.url("/data.bin")]).status
            case .generatedBytes: return try curl([server.url("/bytes/100000")]).status
            case .upload: return try curl(["-F", "f=@\(try temporaryFile("next.bin", Data(content)))", server.url("/upload")]).status
            case .tusCreate: return try tus(["-X", "POST", "-H", "Upload-Length: 5", server.url("/files")]).status
            case .ietfCreate:
                let connection = try RawHTTPConnection(port: port)
                connection.send(Array((ietf.creationHead(length: form.count) + "Connection: close\r\n\r\n").utf8) + form)
                return Self.finalStatus(connection)
            case .tusPatch, .tusHead:
                let location = try #require(resource)
                let offset = try tus(["--head", server.url(location)])
                guard offset.status == 200, let from = offset.header("Upload-Offset").flatMap(Int.init) else { return offset.status }
                let rest = try temporaryFile("rest.bin", Data(content.dropFirst(from)))
                return try tus(["-X", "PATCH", "-H", "Upload-Offset: \(from)", "-H", "Content-Type: application/offset+octet-stream",
                                "--data-binary", "@\(rest)", server.url(location)]).status
            case .ietfAppend, .ietfOffset:
                let path = try #require(resource)
                guard let from = try ietf.offset(of: path).flatMap(Int.init) else { return 0 }
                let connection = try RawHTTPConnection(port: port)
                connection.send(ietf.patch(path, offset: from, Array(form.dropFirst(from)), complete: true))
                return Self.finalStatus(connection)
            }
        }
        let expected: Set<Int> = switch completed ? .ietfCreate : endpoint {
        case .tusCreate: [201]
        case .tusPatch, .tusHead: [204]
        default: [200]
        }
        #expect(expected.contains(next), "the request after \(fault) on \(endpoint) got \(next)")

        // No temporary file of an upload or of a state save.
        #expect(server.eventually { server.temporaryFiles().isEmpty }, "left: \(server.temporaryFiles())")
        // No slot: the uploads in progress are those the client was told of (a creation's
        // Location, the follow-up's tus creation), and exactly as many more creations fit.
        let toldOf = (endpoint == .tusCreate || endpoint == .ietfCreate) && faulted.lowercased().contains("\r\nlocation:") ? 1 : 0
        let inProgress = toldOf + (endpoint == .tusCreate ? 1 : 0)
        #expect(server.resumableUploadsInProgress() == inProgress, "uploads in progress after \(fault) on \(endpoint)")
        for index in 0...(Self.slots - inProgress) {
            let created = try tus(["-X", "POST", "-H", "Upload-Length: 5", server.url("/files")])
            #expect(created.status == (index < Self.slots - inProgress ? 201 : 503),
                    "creation \(index + 1) with \(inProgress) in progress got \(created.status): \(created.text)")
        }
        // No descriptor: no connection and no file of this server is open once it is done.
        #expect(waitUntil { openDescriptors(of: server).isEmpty }, "still open: \(openDescriptors(of: server))")
    }

    /// Retries while the answer is a lock's (423, 409) for up to 5 s; the last status.
    private func waitForAnswer(_ attempt: () throws -> Int) throws -> Int {
        let deadline = Date().addingTimeInterval(5)
        var status = try attempt()
        while status == 423 || status == 409 || status == 0, Date() < deadline {
            Thread.sleep(forTimeInterval: 0.1)
            status = try attempt()
        }
        return status
    }

    private static func finalStatus(_ connection: RawHTTPConnection) -> Int {
        while let head = connection.readHead() {
            guard let status = statusCode(of: head) else { return 0 }
            if status >= 200 { return status }
        }
        return 0
    }
}

/// Sends `request` and reads what comes until the connection ends or `seconds` pass, then
/// hangs up (a client that gives up on a stall).
func exchangeGivingUp(port: UInt16, _ request: [UInt8], after seconds: Double) throws -> [UInt8] {
    let socket = try connectedSocket(port: port)
    defer { close(socket) }
    var sent = 0
    while sent < request.count {
        let count = request[sent...].withUnsafeBytes { send(socket, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL | MSG_DONTWAIT)) }
        if count <= 0 { break }
        sent += count
    }
    let deadline = Date().addingTimeInterval(seconds)
    var received: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 65_536)
    while Date() < deadline {
        var descriptor = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
        guard poll(&descriptor, 1, 50) == 1 else { continue }
        let count = recv(socket, &buffer, buffer.count, Int32(MSG_DONTWAIT))
        if count <= 0 { break }
        received += buffer[0..<count]
    }
    return received
}

/// The descriptors this process holds for `server`: its accepted connections (sockets whose
/// local port is the server's, listening socket aside, from /proc/net/tcp) and files in its
/// folders. The server runs in the test process, so its descriptors are the process's own.
func openDescriptors(of server: TestServer) -> [String] {
    let port = String(format: "%04X", server.server.port)
    var connections: Set<String> = []
    for line in ((try? String(contentsOfFile: "/proc/net/tcp", encoding: .utf8)) ?? "").split(separator: "\n").dropFirst() {
        let fields = line.split(separator: " ")
        guard fields.count > 9, fields[1].hasSuffix(":" + port), fields[3] != "0A" else { continue }
        connections.insert("socket:[\(fields[9])]")
    }
    let folders = [server.root.resolvingSymlinksInPath().path, server.uploads.resolvingSymlinksInPath().path]
    var open: [String] = []
    for name in (try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd")) ?? [] {
        guard let target = try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + name) else { continue }
        if connections.contains(target) || folders.contains(where: { target.hasPrefix($0 + "/") }) { open.append(target) }
    }
    return open
}
