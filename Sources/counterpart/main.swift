import Counterpart
import Foundation

// The command: flags → configuration → serve until SIGINT or SIGTERM.

let defaults = Configuration()
let usage = """
    usage: counterpart [--host ADDR] [--port N] [--root DIR] [--uploads DIR]
                       [--max-upload-bytes N] [--threads N] [--quiet] [--fault SPEC]
                       [--fault-rule RULE]...
                       [--journal-size N] [--cors ORIGIN] [--allow-remote-control]
                       [--tls-cert FILE --tls-key FILE | --tls-self-signed]
                       [--max-resumable-uploads N] [--resumable-expiry SECONDS]
                       [--sync full|none] [--auth-file FILE] [--token-file FILE] [limits...] [--help]
           counterpart hash-password [--bcrypt] [--cost N] [USER [RIGHTS]]

      --host ADDR             address to listen on (default 127.0.0.1; 0.0.0.0 or :: for all)
      --port N                port (default 8080; 0 picks a free one)
      --root DIR              folder served as static files (default ./public)
      --uploads DIR           folder uploads are stored in, served at /uploads/ (default ./uploads)
      --max-upload-bytes N    larger request bodies get 413 (default 10GiB; suffixes K M G T, KiB MiB GiB TiB)
      --threads N             threads serving connections (default \(defaults.threads); 0: one per connection)
      --quiet                 no access log on stderr
      --fault SPEC            faults for every request, e.g. cut=1048576 or rate=64KiB,delay=200
                              (cut, stall, rate, delay, status, reset, reset=N, fail=P, seed,
                              jitter, first-byte; a rule's and a request's own win)
      --fault-rule RULE       arm a counted fault, repeatable, tried in order:
                              [METHOD] PATH FAULT [times=N] [skip=N], PATH exact or ending in *,
                              e.g. 'POST /upload cut=1MiB times=2' (see /__counterpart/faults)
      --journal-size N        requests kept for GET /__counterpart/requests (default \(defaults.journalCapacity))
      --cors ORIGIN           allow browser apps from ORIGIN (or *) to use the server
      --allow-remote-control  let other machines use /__counterpart/ (the journal, clearing uploads, arming faults)
      --tls-cert FILE         serve HTTPS with this PEM certificate (chain)...
      --tls-key FILE          ...and this PEM private key
      --tls-self-signed       serve HTTPS with a throwaway self-signed certificate; where it is
                              written and its SHA-256 fingerprint are printed on stderr
      --max-resumable-uploads N  tus and IETF resumable uploads in progress at once (default \(defaults.resumableLimits.maxUploads))
      --resumable-expiry SECONDS an idle resumable upload is removed after this (default \(defaults.resumableLimits.expirySeconds))
      --sync full|none        full (default): an upload is synced to disk before it is answered;
                              none: nothing is synced (fast, for CI and fixtures; a power cut may lose it)
      --auth-file FILE        every request needs HTTP Basic credentials of a line user:HASH:RIGHTS
                              (HASH from counterpart hash-password; RIGHTS a comma-separated set of
                              read, write, control)
      --token-file FILE       ...or an Authorization: Bearer token of a line name:TOKEN:RIGHTS
      --help                  this text

    hash-password reads a password from stdin and prints its yescrypt hash (bcrypt with
    --bcrypt; --cost N is crypt_gensalt's count, default yescrypt 5, bcrypt 10), or with
    USER the whole auth-file line USER:HASH:RIGHTS (RIGHTS defaults to read,write).

    limits (a limit reached gets its status and a JSON error; see the README):
      --max-part-header-bytes N  header section of one multipart part (default \(defaults.multipartLimits.maxHeaderBytes); 400)
      --max-parts N              parts in one multipart body (default \(defaults.multipartLimits.maxParts); 413)
      --max-field-bytes N        text fields, names and file names of one form together (default \(defaults.multipartLimits.maxFieldBytes); 413)
      --max-ranges N             ranges in one Range header; more get the whole file, 200 (default \(defaults.rangePolicy.maxRanges))
      --max-connections N        connections at once; more wait to be accepted (default \(defaults.maxConnections))
      --max-connections-per-client N  from one address; more get 503 (default \(defaults.maxConnectionsPerClient), 0: no limit)
      --idle-timeout SECONDS     a silent connection is closed (default \(defaults.connectionTimeout))
      --head-timeout SECONDS     time to send a whole request head, then closed (default \(defaults.headTimeout), 0: none)
      --min-free-disk N          free space kept on the uploads disk; uploads that need it get 507
                                 (default \(defaults.minFreeDiskBytes / 1_048_576)MiB, 0: none)

    POST /upload takes multipart/form-data; files under --root and --uploads answer GET and
    HEAD with Range, If-Range and the other conditionals; GET /bytes/N?seed=S sends N
    generated bytes (&version=V: other bytes; &change-after=K: a new version every K requests).
    Faults also come per request: ?cut=N or a Counterpart-Fault header; rules are armed with
    POST /__counterpart/faults ({"method","path","fault","times","skip"}; GET lists them,
    DELETE removes them) and POST /__counterpart/touch?path=/file gives a file a new mtime.
    Resumable uploads: tus 1.0.0 at /files/, and the IETF drafts (interop versions 3-9,
    as URLSession sends them) on POST /upload.

    """

func fail(_ message: String) -> Never {
    FileHandleWriter.standardError("counterpart: \(message)\n")
    FileHandleWriter.standardError(usage)
    exit(2)
}

/// A whole number in `range` for `flag`, or a usage error saying what it should be.
func number(_ text: String, for flag: String, in range: ClosedRange<Int>, _ what: String) -> Int {
    guard let value = Int(text), range.contains(value) else { fail("\(flag): \"\(text)\" is not \(what)") }
    return value
}

/// A size in bytes (`1048576`, `512M`, `10GiB`) for `flag`.
func size(_ text: String, for flag: String, allowingZero: Bool = false) -> UInt64 {
    guard let size = ByteCount.parse(text), allowingZero || size > 0 else {
        fail("\(flag): \"\(text)\" is not a size (e.g. 1048576, 512M, 10GiB)\(allowingZero ? " or 0" : "")")
    }
    return size
}

if CommandLine.arguments.dropFirst().first == "hash-password" {
    hashPassword(Array(CommandLine.arguments.dropFirst(2)))
}

var configuration = Configuration(port: 8080, root: "./public", uploads: "./uploads", accessLog: true)
var authFile: String?
var tokenFile: String?
var tlsCertificateFile: String?
var tlsKeyFile: String?
var tlsSelfSigned = false
var arguments = CommandLine.arguments.dropFirst()
while let argument = arguments.popFirst() {
    var flag = argument
    var inlineValue: String?
    if argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") {
        flag = String(argument[..<equals])
        inlineValue = String(argument[argument.index(after: equals)...])
    }
    func value() -> String {
        if let inlineValue { return inlineValue }
        guard let next = arguments.popFirst() else { fail("\(flag) needs a value") }
        return next
    }
    func noValue() {
        if inlineValue != nil { fail("\(flag) takes no value") }
    }
    let positive = 1...Int(Int32.max)
    let seconds = 0...Int(Int32.max)
    switch flag {
    case "--host":
        configuration.host = value()
        if configuration.host.isEmpty { fail("--host needs an address") }
    case "--port":
        configuration.port = UInt16(number(value(), for: flag, in: 0...65535, "a port number (0-65535)"))
    case "--root":
        configuration.root = value()
    case "--uploads":
        configuration.uploads = value()
    case "--max-upload-bytes":
        configuration.maxUploadBytes = size(value(), for: flag)
    case "--threads":
        configuration.threads = number(value(), for: flag, in: 0...1024, "a number from 0 to 1024")
    case "--quiet":
        noValue()
        configuration.accessLog = false
    case "--fault":
        let text = value()
        do { configuration.faults = try FaultSpec(parsing: text) } catch { fail("--fault: \(error)") }
    case "--fault-rule":
        let text = value()
        do { configuration.faultRules.append(try FaultRule(parsing: text)) } catch { fail("--fault-rule: \(error)") }
    case "--journal-size":
        configuration.journalCapacity = number(value(), for: flag, in: 0...Int.max, "a number of requests")
    case "--cors":
        let origin = value()
        guard origin == "*" || origin.hasPrefix("http://") || origin.hasPrefix("https://") else {
            fail("--cors: \"\(origin)\" is not * or an origin such as https://app.example")
        }
        configuration.corsOrigin = origin
    case "--allow-remote-control":
        noValue()
        configuration.allowsRemoteControl = true
    case "--tls-cert":
        tlsCertificateFile = value()
    case "--tls-key":
        tlsKeyFile = value()
    case "--tls-self-signed":
        noValue()
        tlsSelfSigned = true
    case "--max-resumable-uploads":
        configuration.resumableLimits.maxUploads = number(value(), for: flag, in: positive, "a positive number")
    case "--resumable-expiry":
        configuration.resumableLimits.expirySeconds = number(value(), for: flag, in: positive, "a positive number of seconds")
    case "--max-part-header-bytes":
        configuration.multipartLimits.maxHeaderBytes = Int(min(size(value(), for: flag), UInt64(Int32.max)))
    case "--max-parts":
        configuration.multipartLimits.maxParts = number(value(), for: flag, in: positive, "a positive number")
    case "--max-field-bytes":
        configuration.multipartLimits.maxFieldBytes = Int(min(size(value(), for: flag), UInt64(Int.max)))
    case "--max-ranges":
        configuration.rangePolicy.maxRanges = number(value(), for: flag, in: positive, "a positive number")
    case "--max-connections":
        configuration.maxConnections = UInt32(number(value(), for: flag, in: positive, "a positive number"))
    case "--max-connections-per-client":
        configuration.maxConnectionsPerClient = UInt32(number(value(), for: flag, in: 0...Int(Int32.max), "a number (0: no limit)"))
    case "--idle-timeout":
        configuration.connectionTimeout = UInt32(number(value(), for: flag, in: positive, "a positive number of seconds"))
    case "--head-timeout":
        configuration.headTimeout = UInt32(number(value(), for: flag, in: seconds, "a number of seconds (0: none)"))
    case "--min-free-disk":
        configuration.minFreeDiskBytes = size(value(), for: flag, allowingZero: true)
    case "--sync":
        let text = value()
        guard let mode = SyncMode(rawValue: text) else { fail("--sync: \"\(text)\" is not full or none") }
        configuration.sync = mode
    case "--auth-file":
        authFile = value()
    case "--token-file":
        tokenFile = value()
    case "--help", "-h":
        FileHandleWriter.standardOutput(usage)
        exit(0)
    default:
        fail(argument.hasPrefix("-") ? "unknown flag \(flag)" : "unexpected argument \"\(argument)\"")
    }
}

switch (tlsCertificateFile, tlsKeyFile, tlsSelfSigned) {
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
    fail(tlsCertificateFile == nil ? "--tls-key needs --tls-cert" : "--tls-cert needs --tls-key")
}

if authFile != nil || tokenFile != nil {
    do { configuration.accessControl = try AccessControl.load(authFile: authFile, tokenFile: tokenFile) } catch {
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
FileHandleWriter.standardOutput("listening on \(server.baseURL.absoluteString)\n")

var received: Int32 = 0
sigwait(&stopSignals, &received)
FileHandleWriter.standardError("counterpart: \(received == SIGINT ? "SIGINT" : "SIGTERM"): stopping\n")
server.stop(grace: .seconds(5))
exit(0)
