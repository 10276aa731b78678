import CGnuTLS
import CMicroHTTPD
import Dispatch
import Foundation
import HTTPTransfer
import Synchronization

/// Writes a 1xx response on the connection, before MHD has written anything for this
/// request: MHD answers a request only after it is read and has finished the previous
/// response before it read this one, so nothing of its own can be in the way. With TLS,
/// the bytes go through the connection's GnuTLS session (MHD's record layer is idle
/// here, on this connection's thread). MHD offers no API for a 1xx other than 100.
func sendInterim(_ response: InformationalResponse, on connection: OpaquePointer) -> Bool {
    let bytes = response.serialized
    if let session = cp_connection_tls_session(connection) {
        let tls = OpaquePointer(session)
        var sent = 0
        while sent < bytes.count {
            let count = bytes[sent...].withUnsafeBytes { gnutls_record_send(tls, $0.baseAddress, $0.count) }
            if count == GNUTLS_E_AGAIN || count == GNUTLS_E_INTERRUPTED {
                guard waitWritable(cp_connection_fd(connection)) else { return false }
                continue
            }
            guard count > 0 else { return false }
            sent += count
        }
        return true
    }
    let socket = cp_connection_fd(connection)
    var sent = 0
    while sent < bytes.count {
        let count = bytes[sent...].withUnsafeBytes { send(socket, $0.baseAddress, $0.count, Platform.sendFlags) }
        if count < 0, errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR {
            guard waitWritable(socket) else { return false }
            continue
        }
        guard count > 0 else { return false }
        sent += count
    }
    return true
}

/// Waits up to a second for a non-blocking socket to take more bytes.
func waitWritable(_ socket: Int32) -> Bool {
    var descriptor = pollfd(fd: socket, events: Int16(POLLOUT), revents: 0)
    return poll(&descriptor, 1, 1000) == 1
}
