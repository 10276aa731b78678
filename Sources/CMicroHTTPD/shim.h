// libmicrohttpd for Swift. Swift cannot call C variadic functions, so the few variadic
// entry points Counterpart needs are wrapped here in non-variadic static inline helpers.
#ifndef COUNTERPART_CMICROHTTPD_SHIM_H
#define COUNTERPART_CMICROHTTPD_SHIM_H

#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <microhttpd.h>

/// MHD_start_daemon with every option passed as an MHD_OPTION_ARRAY (ended by MHD_OPTION_END).
static inline struct MHD_Daemon *cp_start_daemon(unsigned int flags, uint16_t port,
                                                 MHD_AccessHandlerCallback handler, void *handler_cls,
                                                 const struct MHD_OptionItem *options) {
    return MHD_start_daemon(flags, port, NULL, NULL, handler, handler_cls,
                            MHD_OPTION_ARRAY, options, MHD_OPTION_END);
}

/// The port the daemon listens on (the real one when it was started on port 0); 0 on error.
static inline uint16_t cp_daemon_port(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    return info == NULL ? 0 : info->port;
}

/// The client's address, or NULL.
static inline const struct sockaddr *cp_client_address(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    return info == NULL ? NULL : info->client_addr;
}

/// The connection's socket, or -1.
static inline int cp_connection_fd(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info == NULL ? -1 : info->connect_fd;
}

/// The connection's GnuTLS session (a gnutls_session_t), or NULL without TLS.
static inline void *cp_connection_tls_session(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    return info == NULL ? NULL : info->tls_session;
}

/// What the connection-notify callback stored for the connection (its socket context), or NULL.
static inline void *cp_connection_context(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info =
        MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info == NULL ? NULL : info->socket_context;
}

/// Restarts the connection's idle timer, `seconds` being its timeout: libmicrohttpd 0.9.75
/// resets the timer when a timeout is set on a connection whose timeout is 0, so it is set
/// to 0 first. Only from a callback of the connection's own.
static inline void cp_restart_connection_timeout(struct MHD_Connection *connection, unsigned int seconds) {
    MHD_set_connection_option(connection, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
    MHD_set_connection_option(connection, MHD_CONNECTION_OPTION_TIMEOUT, seconds);
}

/// Every header and query argument of the request, in one pass (the kinds are a bit mask,
/// which Swift's import of the enum cannot combine); the iterator is told each value's kind.
static inline int cp_headers_and_arguments(struct MHD_Connection *connection, MHD_KeyValueIterator iterator, void *cls) {
    return MHD_get_connection_values(connection, (enum MHD_ValueKind)(MHD_HEADER_KIND | MHD_GET_ARGUMENT_KIND), iterator, cls);
}

/// Bytes a TCP socket has received in all (tcpi_bytes_received, Linux 4.1), or -1. glibc's
/// struct tcp_info (netinet/tcp.h) stops before that field, and the kernel's (linux/tcp.h)
/// cannot be included beside it, so the field is read at its fixed place in the kernel's
/// struct: the 64-bit word at byte 128. (The options are numbers for the same reason: the
/// headers that name them, IPPROTO_TCP 6 and TCP_INFO 11, change how Swift sees the rest.)
static inline long long cp_tcp_bytes_received(int socket) {
#ifdef __linux__
    uint64_t info[29] = {0};
    socklen_t size = sizeof info;
    if (getsockopt(socket, 6, 11, info, &size) != 0 || size < 136) return -1;
    return (long long) info[16];
#else
    (void) socket;
    return -1;
#endif
}

/// Bytes of what a TCP socket sent that the peer has acknowledged, in all
/// (tcpi_bytes_acked, Linux 4.1), or -1: the 64-bit word at byte 120 of the kernel's
/// struct tcp_info, for the reasons above.
static inline long long cp_tcp_bytes_acked(int socket) {
#ifdef __linux__
    uint64_t info[29] = {0};
    socklen_t size = sizeof info;
    if (getsockopt(socket, 6, 11, info, &size) != 0 || size < 128) return -1;
    return (long long) info[15];
#else
    (void) socket;
    return -1;
#endif
}

#endif
