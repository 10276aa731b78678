import Counterpart
import Glibc

// The command: flags → configuration → serve until SIGINT or SIGTERM.

let usage = """
    usage: counterpart [--host ADDR] [--port N] [--root DIR] [--uploads DIR]
                       [--max-upload-bytes N] [--threads N] [--quiet] [--help]

      --host ADDR             address to listen on (default 127.0.0.1; 0.0.0.0 or :: for all)
      --port N                port (default 8080; 0 picks a free one)
      --root DIR              folder served as static files (default ./public)
      --uploads DIR           folder uploads are stored in, served at /uploads/ (default ./uploads)
      --max-upload-bytes N    larger request bodies get 413 (default 10GiB; suffixes K M G T, KiB MiB GiB TiB)
      --threads N             threads serving connections (default \(Configuration.defaultThreads); 0: one per connection)
      --quiet                 no access log on stderr
      --help                  this text

    POST /upload takes multipart/form-data; files under --root and --uploads answer GET and
    HEAD with Range, If-Range and the other conditionals.

    """

func fail(_ message: String) -> Never {
    FileHandleWriter.standardError("counterpart: \(message)\n")
    FileHandleWriter.standardError(usage)
    exit(2)
}

var configuration = Configuration(port: 8080, root: "./public", uploads: "./uploads", accessLog: true)
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
    switch flag {
    case "--host":
        configuration.host = value()
        if configuration.host.isEmpty { fail("--host needs an address") }
    case "--port":
        let text = value()
        guard let port = UInt16(text) else { fail("--port: \"\(text)\" is not a port number (0-65535)") }
        configuration.port = port
    case "--root":
        configuration.root = value()
    case "--uploads":
        configuration.uploads = value()
    case "--max-upload-bytes":
        let text = value()
        guard let size = ByteCount.parse(text), size > 0 else { fail("--max-upload-bytes: \"\(text)\" is not a size (e.g. 1048576, 512M, 10GiB)") }
        configuration.maxUploadBytes = size
    case "--threads":
        let text = value()
        guard let threads = Int(text), (0...1024).contains(threads) else { fail("--threads: \"\(text)\" is not a number from 0 to 1024") }
        configuration.threads = threads
    case "--quiet":
        if inlineValue != nil { fail("--quiet takes no value") }
        configuration.accessLog = false
    case "--help", "-h":
        FileHandleWriter.standardOutput(usage)
        exit(0)
    default:
        fail(argument.hasPrefix("-") ? "unknown flag \(flag)" : "unexpected argument \"\(argument)\"")
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
FileHandleWriter.standardOutput("listening on \(server.baseURL.absoluteString)\n")

var received: Int32 = 0
sigwait(&stopSignals, &received)
FileHandleWriter.standardError("counterpart: \(received == SIGINT ? "SIGINT" : "SIGTERM"): stopping\n")
server.stop(grace: .seconds(5))
exit(0)
