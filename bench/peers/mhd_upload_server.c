/*
 * mhd_upload_server: the C peer of `make bench` — what a plain upload server written
 * directly on libmicrohttpd costs, to set Counterpart's figures beside.
 *
 *   mhd_upload_server --uploads DIR [--root DIR] [--port N] [--threads N] [--connection-memory BYTES]
 *
 * POST /upload (multipart/form-data): parsed by libmicrohttpd's own MHD_PostProcessor;
 *   each file part is written with write(2) to DIR/REQUEST-PART.bin as its bytes come;
 *   text fields are counted. No hashing, no fsync, no name checks: the floor of a server
 *   built on MHD's parser. Answers 200 {"files":F,"fields":N,"bytes":B}.
 * GET /NAME: the file ROOT/NAME (no subfolders): up to 64 KiB copied into the response,
 *   larger from its descriptor (sendfile); one "Range: bytes=FIRST-LAST" gets 206 with
 *   those bytes. The least a libmicrohttpd file server does: a baseline for the GET rows.
 *
 * Prints "listening on http://127.0.0.1:PORT" when ready (the line Counterpart prints);
 * SIGTERM or SIGINT stops it and it exits 0. Built by `make bench`:
 *   gcc -O2 -Wall -o .build/bench/bin/mhd_upload_server bench/peers/mhd_upload_server.c -lmicrohttpd
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* What MHD_PostProcessor buffers of a part's data before it calls back (bytes). */
#define POST_BUFFER (64 * 1024)
/* Bodies up to this size are sent from memory, larger ones from their descriptor. */
#define SMALL_BODY (64 * 1024)

static const char *uploads_folder;
static const char *root_folder;
static atomic_uint_fast64_t next_request = 1;
/* The request state of a GET between its two calls (see handle). */
static int head_seen;

/* One POST /upload in progress. */
struct upload {
    struct MHD_PostProcessor *parser;
    uint64_t request;
    int file;           /* descriptor of the part being stored, or -1 */
    uint64_t files, fields, bytes;
    int failed;
};

static int write_fully(int descriptor, const char *data, size_t count) {
    while (count > 0) {
        ssize_t written = write(descriptor, data, count);
        if (written < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        data += written;
        count -= (size_t)written;
    }
    return 0;
}

static void close_part(struct upload *upload) {
    if (upload->file >= 0 && close(upload->file) != 0) upload->failed = 1;
    upload->file = -1;
}

/* MHD_PostProcessor calls this with each piece of a part; offset 0 starts a new part. */
static enum MHD_Result part_data(void *context, enum MHD_ValueKind kind, const char *name,
                                 const char *filename, const char *content_type,
                                 const char *transfer_encoding, const char *data,
                                 uint64_t offset, size_t size) {
    (void)kind; (void)name; (void)content_type; (void)transfer_encoding;
    struct upload *upload = context;
    if (offset == 0) {
        close_part(upload);
        if (filename != NULL) {
            upload->files++;
            char path[4096];
            snprintf(path, sizeof path, "%s/%" PRIu64 "-%" PRIu64 ".bin", uploads_folder,
                     upload->request, upload->files);
            upload->file = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
            if (upload->file < 0) {
                upload->failed = 1;
                return MHD_NO;
            }
        } else {
            upload->fields++;
        }
    }
    if (filename != NULL && size > 0 && write_fully(upload->file, data, size) != 0) {
        upload->failed = 1;
        return MHD_NO;
    }
    upload->bytes += size;
    return MHD_YES;
}

static enum MHD_Result answer_text(struct MHD_Connection *connection, unsigned status,
                                   const char *type, const char *text) {
    struct MHD_Response *response =
        MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_MUST_COPY);
    if (response == NULL) return MHD_NO;
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    enum MHD_Result queued = MHD_queue_response(connection, status, response);
    MHD_destroy_response(response);
    return queued;
}

/* "bytes=FIRST-LAST" with both numbers, inside a file of `size` bytes; else 0. */
static int parse_range(const char *header, uint64_t size, uint64_t *first, uint64_t *last) {
    if (header == NULL || strncmp(header, "bytes=", 6) != 0) return 0;
    char *end;
    errno = 0;
    unsigned long long a = strtoull(header + 6, &end, 10);
    if (errno != 0 || end == header + 6 || *end != '-') return 0;
    const char *second = end + 1;
    unsigned long long b = strtoull(second, &end, 10);
    if (errno != 0 || end == second || *end != '\0' || a > b || a >= size) return 0;
    *first = a;
    *last = b < size ? b : size - 1;
    return 1;
}

static enum MHD_Result serve_file(struct MHD_Connection *connection, const char *url) {
    if (root_folder == NULL || url[0] != '/' || url[1] == '\0' || strchr(url + 1, '/') != NULL ||
        strstr(url, "..") != NULL)
        return answer_text(connection, MHD_HTTP_NOT_FOUND, "text/plain", "not found\n");
    char path[4096];
    snprintf(path, sizeof path, "%s%s", root_folder, url);
    int file = open(path, O_RDONLY | O_CLOEXEC);
    struct stat info;
    if (file < 0 || fstat(file, &info) != 0 || !S_ISREG(info.st_mode)) {
        if (file >= 0) close(file);
        return answer_text(connection, MHD_HTTP_NOT_FOUND, "text/plain", "not found\n");
    }
    uint64_t size = (uint64_t)info.st_size, first = 0, last = 0;
    const char *range = MHD_lookup_connection_value(connection, MHD_HEADER_KIND, MHD_HTTP_HEADER_RANGE);
    int partial = parse_range(range, size, &first, &last);
    uint64_t length = partial ? last - first + 1 : size;
    struct MHD_Response *response;
    if (length <= SMALL_BODY) {
        /* From memory: libmicrohttpd sends a buffer with the headers in one write, where a
         * descriptor costs a second send. */
        char body[SMALL_BODY];
        ssize_t count = pread(file, body, (size_t)length, (off_t)first);
        close(file);
        if (count != (ssize_t)length) return MHD_NO;
        response = MHD_create_response_from_buffer((size_t)length, body, MHD_RESPMEM_MUST_COPY);
    } else {
        /* The response owns the descriptor from here on (sendfile). */
        response = MHD_create_response_from_fd_at_offset64(length, file, first);
        if (response == NULL) close(file);
    }
    if (response == NULL) return MHD_NO;
    MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_TYPE, "application/octet-stream");
    MHD_add_response_header(response, MHD_HTTP_HEADER_ACCEPT_RANGES, "bytes");
    if (partial) {
        char content_range[96];
        snprintf(content_range, sizeof content_range, "bytes %" PRIu64 "-%" PRIu64 "/%" PRIu64,
                 first, last, size);
        MHD_add_response_header(response, MHD_HTTP_HEADER_CONTENT_RANGE, content_range);
    }
    enum MHD_Result queued =
        MHD_queue_response(connection, partial ? MHD_HTTP_PARTIAL_CONTENT : MHD_HTTP_OK, response);
    MHD_destroy_response(response);
    return queued;
}

static enum MHD_Result handle(void *unused, struct MHD_Connection *connection, const char *url,
                              const char *method, const char *version, const char *body,
                              size_t *body_size, void **request_state) {
    (void)unused; (void)version;
    if (strcmp(method, MHD_HTTP_METHOD_GET) == 0 || strcmp(method, MHD_HTTP_METHOD_HEAD) == 0) {
        /* libmicrohttpd closes the connection after an answer queued on the first call (it
         * cannot know yet whether a body follows): answer on the second. */
        if (*request_state == NULL) {
            *request_state = &head_seen;
            return MHD_YES;
        }
        *request_state = NULL;
        return serve_file(connection, url);
    }
    if (strcmp(method, MHD_HTTP_METHOD_POST) != 0 || strcmp(url, "/upload") != 0)
        return answer_text(connection, MHD_HTTP_METHOD_NOT_ALLOWED, "text/plain", "POST /upload only\n");

    struct upload *upload = *request_state;
    if (upload == NULL) {
        /* First call: the head has arrived, no body yet. */
        upload = calloc(1, sizeof *upload);
        if (upload == NULL) return MHD_NO;
        upload->file = -1;
        upload->request = atomic_fetch_add(&next_request, 1);
        upload->parser = MHD_create_post_processor(connection, POST_BUFFER, part_data, upload);
        if (upload->parser == NULL) upload->failed = 1;  /* not multipart/form-data */
        *request_state = upload;
        return MHD_YES;
    }
    if (*body_size > 0) {
        if (!upload->failed && MHD_post_process(upload->parser, body, *body_size) != MHD_YES)
            upload->failed = 1;
        *body_size = 0;
        return MHD_YES;
    }
    /* The whole body has arrived. */
    close_part(upload);
    if (upload->failed)
        return answer_text(connection, MHD_HTTP_BAD_REQUEST, "application/json",
                           "{\"error\":\"not a multipart/form-data body that could be stored\"}\n");
    char json[160];
    snprintf(json, sizeof json, "{\"files\":%" PRIu64 ",\"fields\":%" PRIu64 ",\"bytes\":%" PRIu64 "}\n",
             upload->files, upload->fields, upload->bytes);
    return answer_text(connection, MHD_HTTP_OK, "application/json", json);
}

/* The request is over (answered, or the client left): free what it held. */
static void request_done(void *unused, struct MHD_Connection *connection, void **request_state,
                         enum MHD_RequestTerminationCode reason) {
    (void)unused; (void)connection; (void)reason;
    if (*request_state == NULL || *request_state == &head_seen) return;
    struct upload *upload = *request_state;
    if (upload->parser != NULL) MHD_destroy_post_processor(upload->parser);
    close_part(upload);
    free(upload);
    *request_state = NULL;
}

static void usage(void) {
    fprintf(stderr, "usage: mhd_upload_server --uploads DIR [--root DIR] [--port N] [--threads N] [--connection-memory BYTES]\n");
    exit(2);
}

int main(int argc, char **argv) {
    unsigned port = 0, threads = 2;
    /* libmicrohttpd's own default (32 KiB). It zeroes a connection's whole memory before each
     * request on it, so more costs every small request; an upload server wants more, for
     * larger body chunks: make bench passes 256 KiB for the upload rows. */
    size_t connection_memory = 32 * 1024;
    for (int index = 1; index < argc; index += 2) {
        if (index + 1 >= argc) usage();
        const char *flag = argv[index], *value = argv[index + 1];
        if (strcmp(flag, "--uploads") == 0) uploads_folder = value;
        else if (strcmp(flag, "--root") == 0) root_folder = value;
        else if (strcmp(flag, "--port") == 0) port = (unsigned)strtoul(value, NULL, 10);
        else if (strcmp(flag, "--threads") == 0) threads = (unsigned)strtoul(value, NULL, 10);
        else if (strcmp(flag, "--connection-memory") == 0) connection_memory = (size_t)strtoull(value, NULL, 10);
        else usage();
    }
    if (uploads_folder == NULL || port > 65535 || threads == 0) usage();

    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGTERM);
    sigaddset(&stop_signals, SIGINT);
    /* Blocked before MHD starts its threads, so that they inherit the mask and only
     * sigwait below sees these signals. */
    pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
    signal(SIGPIPE, SIG_IGN);

    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct MHD_Daemon *daemon = MHD_start_daemon(
        MHD_USE_AUTO | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, (uint16_t)port, NULL, NULL,
        handle, NULL,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&address,
        MHD_OPTION_THREAD_POOL_SIZE, threads,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, connection_memory,
        MHD_OPTION_CONNECTION_LIMIT, 4000u,
        MHD_OPTION_NOTIFY_COMPLETED, request_done, NULL,
        MHD_OPTION_END);
    if (daemon == NULL) {
        fprintf(stderr, "mhd_upload_server: cannot listen on 127.0.0.1:%u\n", port);
        return 1;
    }
    const union MHD_DaemonInfo *bound = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    printf("listening on http://127.0.0.1:%u\n", (unsigned)bound->port);
    fflush(stdout);

    int received;
    sigwait(&stop_signals, &received);
    MHD_stop_daemon(daemon);
    return 0;
}
