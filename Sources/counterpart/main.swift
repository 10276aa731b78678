import Counterpart
import Foundation

// The command: flags and COUNTERPART_ variables (Flags.swift) → configuration → serve until
// SIGINT or SIGTERM.

func fail(_ message: String) -> Never {
    FileHandleWriter.standardError("counterpart: \(message)\n")
    FileHandleWriter.standardError(Flag.usage)
    exit(2)
}

if CommandLine.arguments.dropFirst().first == "hash-password" {
    hashPassword(Array(CommandLine.arguments.dropFirst(2)))
}

var options: Options
do {
    switch try Flag.command(arguments: Array(CommandLine.arguments.dropFirst()), environment: ProcessInfo.processInfo.environment) {
    case .help:
        FileHandleWriter.standardOutput(Flag.usage)
        exit(0)
    case .healthcheck(let given):
        exit(HealthCheck.run(host: given.configuration.host, port: given.configuration.port))
    case .serve(let given):
        options = given
    }
} catch {
    fail(error.message)
}
var configuration = options.configuration

switch (options.tlsCertificateFile, options.tlsKeyFile, options.tlsSelfSigned) {
case (nil, nil, false):
    break
case (let certificate?, let key?, false):
    do { configuration.tls = try TLSCredentials(certificateFile: certificate, privateKeyFile: key) } catch {
        FileHandleWriter.standardError("counterpart: \(error)\n")
        exit(1)
    }
case (nil, nil, true):
    do {
        let credentials = try TLSCredentials.selfSigned(hosts: [configuration.host])
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("counterpart-\(getpid())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        let file = folder.appendingPathComponent("certificate.pem")
        try credentials.certificatePEM.write(to: file, atomically: true, encoding: .utf8)
        configuration.tls = credentials
        FileHandleWriter.standardError("counterpart: HTTPS with a self-signed certificate, written to \(file.path) (trust it with curl --cacert), SHA-256 fingerprint \(credentials.sha256Fingerprint ?? "?")\n")
    } catch {
        FileHandleWriter.standardError("counterpart: \(error)\n")
        exit(1)
    }
case (_, _, true):
    fail("--tls-self-signed replaces --tls-cert and --tls-key")
default:
    fail(options.tlsCertificateFile == nil ? "--tls-key needs --tls-cert" : "--tls-cert needs --tls-key")
}

switch (options.store, options.s3Endpoint, options.s3Timeout) {
case (let store?, let endpoint, let timeout):
    do {
        configuration.objectStore = try S3Configuration(storeURL: store, endpoint: endpoint, environment: ProcessInfo.processInfo.environment)
    } catch {
        fail("--store: \(error)")
    }
    if let timeout { configuration.objectStore?.stallSeconds = timeout }
case (nil, _?, _):
    fail("--s3-endpoint needs --store s3://BUCKET/PREFIX")
case (nil, nil, _?):
    fail("--s3-timeout needs --store s3://BUCKET/PREFIX")
case (nil, nil, nil):
    break
}

if options.authFile != nil || options.tokenFile != nil {
    do { configuration.accessControl = try AccessControl.load(authFile: options.authFile, tokenFile: options.tokenFile) } catch {
        FileHandleWriter.standardError("counterpart: \(error)\n")
        exit(1)
    }
}

// Signals are taken by sigwait on this thread: block them before any server thread starts,
// so every thread inherits the mask.
var stopSignals = sigset_t()
sigemptyset(&stopSignals)
sigaddset(&stopSignals, SIGINT)
sigaddset(&stopSignals, SIGTERM)
pthread_sigmask(SIG_BLOCK, &stopSignals, nil)

let server: CounterpartServer
do {
    server = try CounterpartServer(configuration)
} catch {
    FileHandleWriter.standardError("counterpart: \(error)\n")
    exit(1)
}
if configuration.accessControl == nil, !isLoopbackHost(configuration.host) {
    FileHandleWriter.standardError("counterpart: warning: listening on \(configuration.host) without --auth-file or --token-file: anyone who reaches port \(server.port) may read and upload files; "
        + (configuration.allowsRemoteControl ? "/__counterpart/ (the journal, clearing uploads) answers them too (--allow-remote-control)\n"
                                              : "/__counterpart/ (the journal, clearing uploads) answers only this machine\n"))
}
if CounterpartServer.kernelRefusesOpenat2 {
    FileHandleWriter.standardError("counterpart: note: this kernel (or the container's seccomp profile) refuses openat2; "
        + "files are opened beneath their folder one path component at a time instead, with the same rules\n")
}
FileHandleWriter.standardOutput("listening on \(server.baseURL.absoluteString)\n")

var received: Int32 = 0
sigwait(&stopSignals, &received)
FileHandleWriter.standardError("counterpart: \(received == SIGINT ? "SIGINT" : "SIGTERM"): stopping\n")
server.stop(grace: .seconds(5))
exit(0)
