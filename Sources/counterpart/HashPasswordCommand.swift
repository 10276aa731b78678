import Counterpart
import Foundation

/// `counterpart hash-password [--bcrypt] [--cost N] [USER [RIGHTS]]`: reads a password
/// (the first line of stdin; asked for without echo on a terminal) and prints its hash, or
/// the auth-file line with USER.
func hashPassword(_ arguments: [String]) -> Never {
    var method = PasswordHash.Method.yescrypt
    var cost = 0
    var positional: [String] = []
    var rest = arguments[...]
    while let argument = rest.popFirst() {
        switch argument {
        case "--bcrypt": method = .bcrypt
        case "--cost":
            guard let text = rest.popFirst(), let value = Int(text), (0...31).contains(value) else { fail("--cost needs a number from 0 to 31") }
            cost = value
        case "--help", "-h":
            FileHandleWriter.standardOutput(Flag.usage)
            exit(0)
        default:
            if argument.hasPrefix("-") { fail("hash-password: unknown flag \(argument)") }
            positional.append(argument)
        }
    }
    guard positional.count <= 2 else { fail("hash-password takes at most USER and RIGHTS") }
    let rights = positional.count == 2 ? positional[1] : "read,write"
    if AccessRights(parsing: rights) == nil { fail("hash-password: \"\(rights)\" is not a comma-separated set of read, write and control") }
    if let user = positional.first, user.isEmpty || user.contains(":") { fail("hash-password: a user name cannot be empty or hold a colon") }

    let password = readPassword()
    guard !password.isEmpty else {
        FileHandleWriter.standardError("counterpart: hash-password: the password is empty (give it on stdin)\n")
        exit(2)
    }
    do {
        let hash = try PasswordHash.make(password: password, method: method, cost: cost)
        FileHandleWriter.standardOutput((positional.first.map { "\($0):\(hash.encoded):\(rights)" } ?? hash.encoded) + "\n")
        exit(0)
    } catch {
        FileHandleWriter.standardError("counterpart: hash-password: \(error)\n")
        exit(1)
    }
}

/// The first line of stdin, without its line end. On a terminal it asks on stderr and
/// turns the echo off while the password is typed.
private func readPassword() -> [UInt8] {
    var saved = termios()
    let terminal = isatty(0) == 1 && tcgetattr(0, &saved) == 0
    if terminal {
        FileHandleWriter.standardError("password: ")
        var quiet = saved
        quiet.c_lflag &= ~tcflag_t(ECHO)
        tcsetattr(0, TCSAFLUSH, &quiet)
    }
    defer {
        if terminal {
            tcsetattr(0, TCSAFLUSH, &saved)
            FileHandleWriter.standardError("\n")
        }
    }
    var line: [UInt8] = []
    var byte: UInt8 = 0
    while read(0, &byte, 1) == 1, byte != 0x0A { line.append(byte) }
    if line.last == 0x0D { line.removeLast() }
    return line
}
