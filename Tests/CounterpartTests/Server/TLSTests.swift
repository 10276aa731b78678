import Counterpart
import Foundation
import Testing

@Suite("HTTPS")
struct TLSTests {
    let server: TestServer
    let certificateFile: String

    init() throws {
        let credentials = try TLSCredentials.selfSigned()
        server = try makeStaticServer { $0.tls = credentials }
        certificateFile = try temporaryFile("certificate.pem", Data(credentials.certificatePEM.utf8))
    }

    @Test func curlTrustsTheCertificateItIsGiven() throws {
        #expect(server.server.baseURL.absoluteString.hasPrefix("https://127.0.0.1:"))
        let get = try curl(["--cacert", certificateFile, server.url("/data.bin")])
        #expect(get.status == 200 && get.body == sampleData)
        let range = try curl(["--cacert", certificateFile, "-r", "100-199", server.url("/data.bin")])
        #expect(range.status == 206 && range.body == sampleData[100...199])
        let localhost = try curl(["--cacert", certificateFile, server.url("/hello.txt").replacingOccurrences(of: "127.0.0.1", with: "localhost")])
        #expect(localhost.text == "hello\n")
        let path = try temporaryFile("up.bin", testBytes(count: 300_000))
        let upload = try curl(["--cacert", certificateFile, "-F", "f=@\(path)", server.url("/upload")])
        #expect((try upload.json()["files"] as? [[String: Any]])?.first?["sha256"] as? String == (try sha256(testBytes(count: 300_000))))
        let cut = try curl(["--cacert", certificateFile, server.url("/data.bin?cut=5000")])
        #expect(cut.exitCode == 18 && cut.body == sampleData.prefix(5000))
    }

    @Test func withoutTheCertificateCurlRefuses() throws {
        #expect(try curl([server.url("/hello.txt")]).exitCode == 60)
    }

    @Test func theFingerprintIsTheCertificates() throws {
        let fingerprint = try #require(server.server.configuration.tls?.sha256Fingerprint)
        let openssl = try runCommand("/usr/bin/openssl", ["x509", "-noout", "-fingerprint", "-sha256", "-in", certificateFile])
        #expect(openssl.output.trimmingCharacters(in: .whitespacesAndNewlines).hasSuffix("=" + fingerprint))
    }

    /// URLSession on Linux trusts only the system's certificate store (FoundationNetworking
    /// reads no CA setting outside Android), so the URLSession client runs in a mount
    /// namespace of its own, where the store also holds this certificate: nothing outside
    /// that process is changed, and it needs no privileges (an unprivileged user namespace).
    @Test func urlSessionDownloadsAndResumesOverHTTPS() throws {
        let bundle = try temporaryFile("bundle.pem", try Data(contentsOf: URL(fileURLWithPath: "/etc/ssl/certs/ca-certificates.crt"))
            + Data(server.server.configuration.tls!.certificatePEM.utf8))
        let examples = try builtProduct("counterpart-examples").path
        let folder = try makeTemporaryFolder("tls")
        defer { try? FileManager.default.removeItem(at: folder) }
        let base = server.server.baseURL.absoluteString
        let script = """
            mount --bind '\(bundle)' /etc/ssl/certs/ca-certificates.crt && cd '\(folder.path)' && \
            '\(examples)' '\(base)' info /data.bin && '\(examples)' '\(base)' resume /data.bin
            """
        let result = try runCommand("/usr/bin/unshare", ["--user", "--map-root-user", "--mount", "/bin/sh", "-c", script])
        #expect(result.status == 0, "\(result.output)")
        #expect(result.output.contains("100000"))
    }

    /// The 104 of a resumable upload goes through the connection's TLS session: read here
    /// by Python's ssl module, byte for byte, before the body is sent.
    @Test func the104ComesOverTLSToo() throws {
        let script = """
            import socket, ssl, sys
            port, ca = int(sys.argv[1]), sys.argv[2]
            context = ssl.create_default_context(cafile=ca)
            with socket.create_connection(("127.0.0.1", port)) as raw:
                with context.wrap_socket(raw, server_hostname="127.0.0.1") as tls:
                    body = b'--b\\r\\nContent-Disposition: form-data; name="f"; filename="tls.bin"\\r\\n\\r\\nsecret\\r\\n--b--\\r\\n'
                    tls.sendall(b"POST /upload HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nContent-Type: multipart/form-data; boundary=b\\r\\n"
                                b"Upload-Draft-Interop-Version: 8\\r\\nUpload-Complete: ?1\\r\\nConnection: close\\r\\n"
                                b"Content-Length: %d\\r\\n\\r\\n" % len(body))
                    interim = b""
                    while b"\\r\\n\\r\\n" not in interim:
                        interim += tls.recv(1)
                    print(interim.decode().split("\\r\\n")[0])
                    tls.sendall(body)
                    rest = b""
                    while True:
                        chunk = tls.recv(65536)
                        if not chunk:
                            break
                        rest += chunk
                    print(rest.decode().split("\\r\\n")[0])
            """
        let result = try python(script, [String(server.server.port), certificateFile])
        #expect(result.output == "HTTP/1.1 104 Upload Resumption Supported\nHTTP/1.1 200 OK\n", "\(result.output)")
        #expect(try server.uploadedData("tls.bin") == Data("secret".utf8))
    }
}
