import Counterpart
import Foundation

/// What the command starts with: the configuration, and the TLS files that join it once
/// every flag is read (a certificate needs its key, whichever comes first).
struct Options {
    var configuration = Configuration(port: 8080, root: "./public", uploads: "./uploads", accessLog: true)
    var tlsCertificateFile: String?
    var tlsKeyFile: String?
    var tlsSelfSigned = false
    /// `--store`, `--s3-endpoint` and `--s3-timeout`, read into `configuration.objectStore`
    /// with the environment's credentials once every flag is known.
    var store: String?
    var s3Endpoint: String?
    var s3Timeout: Int?
    var authFile: String?
    var tokenFile: String?
}

/// A value the command cannot use: one line that names the flag or the variable it came from.
struct UsageError: Error {
    let message: String
}

/// One flag of the command, which is also the environment variable `COUNTERPART_<FLAG>`.
/// The usage text, the command line and the environment are all read from `Flag.all`, so a
/// flag is one entry there.
struct Flag: Sendable {
    enum Section { case general, limits }
    typealias Setter = @Sendable (_ value: String, _ source: String, _ options: inout Options) throws(UsageError) -> Void

    let name: String
    /// The value's placeholder in the usage (`N`, `DIR`); nil for a switch, which takes no value.
    let placeholder: String?
    let help: String
    let section: Section
    /// Sets the options from a value; `source` (the flag or the variable) names it in errors.
    let set: Setter

    /// A flag with a value.
    init(_ name: String, value placeholder: String, _ help: String, section: Section = .general, set: @escaping Setter) {
        self.name = name
        self.placeholder = placeholder
        self.help = help
        self.section = section
        self.set = set
    }

    /// A switch: on the command line it takes no value; in the environment it is on for
    /// 1, true, yes or on and off for 0, false, no, off or nothing.
    init(_ name: String, _ help: String, section: Section = .general, turnOn: @escaping @Sendable (inout Options) -> Void) {
        self.name = name
        self.placeholder = nil
        self.help = help
        self.section = section
        self.set = { value, source, options throws(UsageError) in
            switch value.lowercased() {
            case "1", "true", "yes", "on": turnOn(&options)
            case "0", "false", "no", "off", "": break
            default: throw UsageError(message: "\(source): \"\(value)\" is not 1, true, yes, on or 0, false, no, off")
            }
        }
    }

    /// `--max-upload-bytes` → `COUNTERPART_MAX_UPLOAD_BYTES`.
    var variable: String {
        "COUNTERPART_" + name.dropFirst(2).uppercased().replacingOccurrences(of: "-", with: "_")
    }
}

/// What the command line asks for.
enum Command {
    case serve(Options)
    case healthcheck(Options)
    case help
}

extension Flag {
    /// Reads the environment, then the command line over it: a flag given on the command line
    /// wins, and its variable is not read at all.
    static func command(arguments: [String], environment: [String: String]) throws(UsageError) -> Command {
        var arguments = arguments[...]
        let healthcheck = arguments.first == "healthcheck"
        if healthcheck { arguments = arguments.dropFirst() }
        var given: [(flag: Flag, value: String, source: String)] = []
        while let argument = arguments.popFirst() {
            if argument == "--help" || argument == "-h" { return .help }
            var name = argument
            var inlineValue: String?
            if argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") {
                name = String(argument[..<equals])
                inlineValue = String(argument[argument.index(after: equals)...])
            }
            guard let flag = all.first(where: { $0.name == name }) else {
                throw UsageError(message: argument.hasPrefix("-") ? "unknown flag \(name)" : "unexpected argument \"\(argument)\"")
            }
            if flag.placeholder == nil {
                if inlineValue != nil { throw UsageError(message: "\(name) takes no value") }
                given.append((flag, "1", name))
            } else if let value = inlineValue ?? arguments.popFirst() {
                given.append((flag, value, name))
            } else {
                throw UsageError(message: "\(name) needs a value")
            }
        }
        var options = Options()
        for flag in all where !given.contains(where: { $0.flag.name == flag.name }) {
            if let value = environment[flag.variable] { try flag.set(value, flag.variable, &options) }
        }
        for (flag, value, source) in given { try flag.set(value, source, &options) }
        return healthcheck ? .healthcheck(options) : .serve(options)
    }

    /// The usage text, from the table.
    static var usage: String {
        func entries(_ section: Section) -> String {
            all.filter { $0.section == section }.map { flag in
                let spelled = flag.placeholder.map { "\(flag.name) \($0)" } ?? flag.name
                let help = flag.help.split(separator: "\n").map { "        " + $0 }.joined(separator: "\n")
                return "  \(spelled), \(flag.variable)\n\(help)"
            }.joined(separator: "\n")
        }
        return """
            usage: counterpart [FLAG ...]       serve until SIGINT or SIGTERM
                   counterpart healthcheck [FLAG ...]
                                                GET /__counterpart/health of the server these flags
                                                describe; exit 0 when it answers 200 (for containers)
                   counterpart hash-password [--bcrypt] [--cost N] [USER [RIGHTS]]
                                                read a password on stdin, print its yescrypt hash
                                                (bcrypt with --bcrypt; --cost N is crypt_gensalt's
                                                count, default yescrypt 5, bcrypt 10), or with USER
                                                the auth-file line USER:HASH:RIGHTS (read,write)
                   counterpart --help

            Every flag can also be set as the environment variable after it; a flag on the
            command line wins over its variable. A switch's variable is on for 1, true, yes or on.

            \(entries(.general))

            limits (a limit reached gets its status and a JSON error; see the README):
            \(entries(.limits))

            POST /upload takes multipart/form-data; files under --root and --uploads answer GET and
            HEAD with Range, If-Range and the other conditionals; GET /bytes/N?seed=S sends N
            generated bytes (&version=V: other bytes; &change-after=K: a new version every K requests).
            Faults also come per request: ?cut=N or a Counterpart-Fault header; rules are armed with
            POST /__counterpart/faults ({"method","path","fault","times","skip"}; GET lists them,
            DELETE removes them) and POST /__counterpart/touch?path=/file gives a file a new mtime.
            Resumable uploads: tus 1.0.0 at /files/, and the IETF drafts (interop versions 3-9,
            as URLSession sends them) on POST /upload.

            """
    }
}

/// A whole number in `range`, or an error saying what it should be.
func number(_ text: String, _ source: String, in range: ClosedRange<Int>, _ what: String) throws(UsageError) -> Int {
    guard let value = Int(text), range.contains(value) else { throw UsageError(message: "\(source): \"\(text)\" is not \(what)") }
    return value
}

/// A size in bytes (`1048576`, `512M`, `10GiB`).
func size(_ text: String, _ source: String, allowingZero: Bool = false) throws(UsageError) -> UInt64 {
    guard let size = ByteCount.parse(text), allowingZero || size > 0 else {
        throw UsageError(message: "\(source): \"\(text)\" is not a size (e.g. 1048576, 512M, 10GiB)\(allowingZero ? " or 0" : "")")
    }
    return size
}
