
/// An open file descriptor with one owner: it is closed when the owner goes away, unless
/// it was taken (by libmicrohttpd, which then closes it).
final class OpenFile {
    private var descriptor: Int32

    init(_ descriptor: Int32) { self.descriptor = descriptor }

    /// The descriptor, for reading; still owned here.
    var borrowed: Int32 { descriptor }

    /// Hands the descriptor over: from now on the taker closes it.
    func take() -> Int32 {
        defer { descriptor = -1 }
        return descriptor
    }

    deinit {
        if descriptor >= 0 { close(descriptor) }
    }
}
