import CGnuTLS
import Foundation
import Testing
@testable import Counterpart

/// The throwaway certificate of `--tls-self-signed`, checked with independent tools
/// (OpenSSL's command line, curl) rather than with GnuTLS, which made it.
@Suite struct SelfSignedCertificateTests {
    @Test func opensslReadsTheCertificateAndTheKeyAndATLSHandshakeWorks() throws {
        let certificate = try SelfSignedCertificate.generate(hosts: ["localhost", "127.0.0.1", "::1"])
        #expect(certificate.certificatePEM.hasPrefix("-----BEGIN CERTIFICATE-----\n"))
        #expect(certificate.privateKeyPEM.hasPrefix("-----BEGIN PRIVATE KEY-----\n"))

        let folder = try makeTemporaryFolder("self-signed")
        defer { try? FileManager.default.removeItem(at: folder) }
        let certificateFile = folder.appendingPathComponent("cert.pem").path
        let keyFile = folder.appendingPathComponent("key.pem").path
        try certificate.certificatePEM.write(toFile: certificateFile, atomically: true, encoding: .utf8)
        try certificate.privateKeyPEM.write(toFile: keyFile, atomically: true, encoding: .utf8)

        // The fields.
        let text = try openssl(["x509", "-in", certificateFile, "-noout", "-text"])
        for expected in ["Version: 3 (0x2)",
                         "Signature Algorithm: ecdsa-with-SHA256",
                         "Issuer: CN = Counterpart test certificate",
                         "Subject: CN = Counterpart test certificate",
                         "Public Key Algorithm: id-ecPublicKey",
                         "NIST CURVE: P-256",
                         "CA:TRUE",
                         "Digital Signature, Certificate Sign",
                         "TLS Web Server Authentication",
                         "X509v3 Subject Key Identifier",
                         "DNS:localhost",
                         "IP Address:127.0.0.1",
                         "IP Address:0:0:0:0:0:0:0:1"] {
            #expect(text.contains(expected), "no \(expected) in:\n\(text)")
        }
        #expect(!text.contains("Key Encipherment"))

        // A positive serial of 16 bytes.
        let serial = try openssl(["x509", "-in", certificateFile, "-noout", "-serial"])
            .trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(serial.hasPrefix("serial="))
        let serialHex = serial.dropFirst("serial=".count)
        #expect(serialHex.count == 32, "\(serial)")
        #expect(serialHex.first.map { "01234567".contains($0) } == true, "\(serial)")

        // Valid from about an hour ago to about 30 days ahead.
        let dates = try openssl(["x509", "-in", certificateFile, "-noout", "-startdate", "-enddate"])
        let notBefore = try #require(opensslDate(dates, "notBefore="), "\(dates)")
        let notAfter = try #require(opensslDate(dates, "notAfter="), "\(dates)")
        let now = Date()
        #expect(abs(notBefore.timeIntervalSince(now) + 3600) < 120, "\(dates)")
        #expect(abs(notAfter.timeIntervalSince(now) - 30 * 86_400) < 120, "\(dates)")
        #expect(notBefore < now && now < notAfter)

        // Its own trust anchor, fit for a TLS server.
        let verified = try openssl(["verify", "-x509_strict", "-purpose", "sslserver", "-CAfile", certificateFile, certificateFile])
        #expect(verified.contains("\(certificateFile): OK"), "\(verified)")

        // The fingerprint.
        let fingerprint = try openssl(["x509", "-in", certificateFile, "-noout", "-fingerprint", "-sha256"])
            .trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(fingerprint == "sha256 Fingerprint=\(certificate.sha256Fingerprint)")
        #expect(certificate.sha256Fingerprint.count == 32 * 3 - 1)

        // The key is an EC P-256 key and the certificate's.
        let keyText = try openssl(["pkey", "-in", keyFile, "-noout", "-text"])
        #expect(keyText.contains("NIST CURVE: P-256"), "\(keyText)")
        let publicKeyOfKey = try openssl(["pkey", "-in", keyFile, "-pubout"])
        let publicKeyOfCertificate = try openssl(["x509", "-in", certificateFile, "-pubkey", "-noout"])
        #expect(publicKeyOfKey.hasPrefix("-----BEGIN PUBLIC KEY-----"))
        #expect(publicKeyOfKey == publicKeyOfCertificate)

        // GnuTLS takes the pair as libmicrohttpd will give it (PEM strings in memory).
        #expect(gnutlsLoads(certificate))

        // A TLS handshake against OpenSSL's server, by host name and by addresses.
        let server = try OpenSSLServer(certificateFile: certificateFile, keyFile: keyFile)
        defer { server.stop() }
        var urls = ["https://localhost:\(server.port)/", "https://127.0.0.1:\(server.port)/"]
        if server.listensOnIPv6 { urls.append("https://[::1]:\(server.port)/") }
        for url in urls {
            let (status, output) = try runCommand("/usr/bin/curl", ["--silent", "--show-error", "--max-time", "5",
                                                             "--cacert", certificateFile, "--output", "/dev/null",
                                                             "--write-out", "%{http_code}", url])
            #expect(status == 0, "curl \(url): \(output)")
            #expect(output.hasPrefix("200"), "curl \(url): \(output)")
        }
        // Without the certificate as trust anchor, curl refuses it: the trust above came from it.
        let (untrusted, _) = try runCommand("/usr/bin/curl", ["--silent", "--max-time", "5", "--output", "/dev/null", urls[0]])
        #expect(untrusted == 60)
    }

    @Test func eachCertificateIsNew() throws {
        let first = try SelfSignedCertificate.generate(hosts: ["localhost"], days: 1)
        let second = try SelfSignedCertificate.generate(hosts: ["localhost"], days: 1)
        #expect(first.sha256Fingerprint != second.sha256Fingerprint)
        #expect(first.privateKeyPEM != second.privateKeyPEM)
        #expect(first.sha256Fingerprint.allSatisfy { "0123456789ABCDEF:".contains($0) })
    }

    @Test func hostsAreNormalized() throws {
        let certificate = try SelfSignedCertificate.generate(hosts: ["localhost", "[::1]", "0:0::1", "", "localhost",
                                                                     "10.1.2.3", "example.test"])
        let folder = try makeTemporaryFolder("self-signed")
        defer { try? FileManager.default.removeItem(at: folder) }
        let certificateFile = folder.appendingPathComponent("cert.pem").path
        try certificate.certificatePEM.write(toFile: certificateFile, atomically: true, encoding: .utf8)
        let names = try openssl(["x509", "-in", certificateFile, "-noout", "-ext", "subjectAltName"])
        #expect(names.contains("DNS:localhost, IP Address:0:0:0:0:0:0:0:1, IP Address:10.1.2.3, DNS:example.test"),
                "\(names)")
    }

    @Test func badArgumentsAreErrors() {
        #expect(throws: CertificateError.self) { try SelfSignedCertificate.generate(hosts: []) }
        #expect(throws: CertificateError.self) { try SelfSignedCertificate.generate(hosts: ["localhost"], days: 0) }
        #expect(throws: CertificateError.self) { try SelfSignedCertificate.generate(hosts: ["a host"]) }
    }
}

/// `openssl` with `arguments`; its stdout, or an error with its stderr if it failed.
private func openssl(_ arguments: [String]) throws -> String {
    let (status, output) = try runCommand("/usr/bin/openssl", arguments)
    try #require(status == 0, "openssl \(arguments.joined(separator: " ")) failed: \(output)")
    return output
}


/// The date after `label` in `openssl x509 -startdate -enddate` output ("Jan  2 03:04:05 2026 GMT").
private func opensslDate(_ output: String, _ label: String) -> Date? {
    guard let line = output.split(separator: "\n").first(where: { $0.hasPrefix(label) }) else { return nil }
    let formatter = DateFormatter()
    formatter.locale = Locale(identifier: "en_US_POSIX")
    formatter.timeZone = TimeZone(identifier: "GMT")
    formatter.dateFormat = "MMM d HH:mm:ss yyyy 'GMT'"
    let value = line.dropFirst(label.count).split(separator: " ").joined(separator: " ")
    return formatter.date(from: value)
}

/// Whether GnuTLS accepts the PEM pair as a server credential, as libmicrohttpd loads it.
private func gnutlsLoads(_ certificate: SelfSignedCertificate) -> Bool {
    var credentials: gnutls_certificate_credentials_t?
    guard gnutls_certificate_allocate_credentials(&credentials) == 0 else { return false }
    defer { gnutls_certificate_free_credentials(credentials) }
    var certificateBytes = Array(certificate.certificatePEM.utf8)
    var keyBytes = Array(certificate.privateKeyPEM.utf8)
    return certificateBytes.withUnsafeMutableBufferPointer { certificateBuffer in
        keyBytes.withUnsafeMutableBufferPointer { keyBuffer in
            var certificateDatum = gnutls_datum_t(data: certificateBuffer.baseAddress, size: UInt32(certificateBuffer.count))
            var keyDatum = gnutls_datum_t(data: keyBuffer.baseAddress, size: UInt32(keyBuffer.count))
            return gnutls_certificate_set_x509_key_mem(credentials, &certificateDatum, &keyDatum, GNUTLS_X509_FMT_PEM) == 0
        }
    }
}

/// `openssl s_server -www` on a port the system picks, serving a status page over TLS.
private final class OpenSSLServer {
    let process = Process()
    private(set) var port = 0
    private(set) var listensOnIPv6 = false

    init(certificateFile: String, keyFile: String) throws {
        process.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
        // Not -quiet: that also hides the ACCEPT line.
        process.arguments = ["s_server", "-accept", "0", "-cert", certificateFile, "-key", keyFile, "-www"]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        // "ACCEPT [::]:40395" or "ACCEPT 0.0.0.0:40395": the address it listens on. Read on
        // another thread so that a server that never says it can be stopped after a while.
        let reader = BackgroundLine(output.fileHandleForReading, prefix: "ACCEPT ")
        guard let line = reader.wait(seconds: 5) else {
            stop()
            throw CertificateError(description: "openssl s_server did not say where it listens")
        }
        listensOnIPv6 = line.hasPrefix("ACCEPT [")
        port = Int(line.split(separator: ":").last ?? "") ?? 0
        if port == 0 {
            stop()
            throw CertificateError(description: "no port in \(line)")
        }
    }

    /// SIGKILL, not Process.terminate()'s SIGTERM: the child inherits the signal mask of
    /// the thread that started it, and the test threads block SIGTERM.
    func stop() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }
}

/// The first line starting with `prefix` that a pipe gives, read on another thread.
/// Unchecked: `line` is written once before `done` is signalled and read after waiting for it.
private final class BackgroundLine: @unchecked Sendable {
    private let done = DispatchSemaphore(value: 0)
    private var line: String?

    init(_ handle: FileHandle, prefix: String) {
        DispatchQueue.global().async { [self] in
            var current = Data()
            while true {
                let byte = handle.readData(ofLength: 1)
                if byte.isEmpty { break }
                if byte != Data("\n".utf8) {
                    current.append(byte)
                    continue
                }
                let text = String(decoding: current, as: UTF8.self)
                if text.hasPrefix(prefix) {
                    line = text
                    break
                }
                current = Data()
            }
            done.signal()
        }
    }

    /// The line, or nil if the pipe ended without one or `seconds` passed.
    func wait(seconds: Double) -> String? {
        done.wait(timeout: .now() + seconds) == .success ? line : nil
    }
}
