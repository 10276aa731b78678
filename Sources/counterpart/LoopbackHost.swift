/// Whether listening on `host` keeps the server to this machine: 127.0.0.0/8, ::1 and
/// localhost. Anything else may be reached from elsewhere.
func isLoopbackHost(_ host: String) -> Bool {
    host.hasPrefix("127.") || host == "::1" || host == "localhost" || host.hasPrefix("::ffff:127.")
}
