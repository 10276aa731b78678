/*
 * mhd_postprocessor_bench: libmicrohttpd's MHD_PostProcessor parsing a multipart body held
 * in memory — the peer of counterpart-bench's parser figures.
 *
 *   mhd_postprocessor_bench BODY_FILE BOUNDARY CHUNK_BYTES RUNS
 *
 * Reads BODY_FILE into memory, then RUNS times: a fresh post processor (64 KiB buffer) is
 * fed the body in CHUNK_BYTES pieces; its callback only counts parts and data bytes, as the
 * Swift side's consumer does. A part is counted when the name changes: MHD reports a text
 * field cut by a chunk boundary in two calls that both say offset 0, and every part of
 * counterpart-bench's bodies has a name of its own. Prints one line per run:
 *   run SECONDS PARTS DATA_BYTES
 * No I/O is timed.
 *
 * MHD_create_post_processor takes a struct MHD_Connection (it reads the request's
 * Content-Type from it), and there is none outside a request. So this starts a daemon on
 * 127.0.0.1, sends itself one POST with the multipart Content-Type and an empty body, and
 * runs the timed loop inside that request's handler.
 * Built by `make bench` with gcc -O2 ... -lmicrohttpd.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <fcntl.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define POST_BUFFER (64 * 1024)

static const char *body;
static size_t body_size, chunk_size;
static int runs, failed;

struct counts {
    uint64_t parts, bytes;
    char name[64];  /* of the part reported last */
};

static enum MHD_Result count_part(void *context, enum MHD_ValueKind kind, const char *name,
                                  const char *filename, const char *content_type,
                                  const char *transfer_encoding, const char *data,
                                  uint64_t offset, size_t size) {
    (void)kind; (void)filename; (void)content_type; (void)transfer_encoding; (void)data; (void)offset;
    struct counts *counts = context;
    if (name != NULL && strncmp(name, counts->name, sizeof counts->name) != 0) {
        counts->parts++;
        snprintf(counts->name, sizeof counts->name, "%s", name);
    }
    counts->bytes += size;
    return MHD_YES;
}

static double now(void) {
    struct timespec time;
    clock_gettime(CLOCK_MONOTONIC, &time);
    return (double)time.tv_sec + (double)time.tv_nsec / 1e9;
}

/* The timed loop, inside the request whose Content-Type the post processors read. */
static void measure(struct MHD_Connection *connection) {
    for (int run = 0; run < runs && !failed; run++) {
        struct counts counts = {0, 0, ""};
        double start = now();
        struct MHD_PostProcessor *parser =
            MHD_create_post_processor(connection, POST_BUFFER, count_part, &counts);
        if (parser == NULL) {
            failed = 1;
            break;
        }
        for (size_t offset = 0; offset < body_size; offset += chunk_size) {
            size_t count = body_size - offset < chunk_size ? body_size - offset : chunk_size;
            if (MHD_post_process(parser, body + offset, count) != MHD_YES) failed = 1;
        }
        if (MHD_destroy_post_processor(parser) != MHD_YES) failed = 1;
        double seconds = now() - start;
        printf("run %.6f %" PRIu64 " %" PRIu64 "\n", seconds, counts.parts, counts.bytes);
    }
    fflush(stdout);
}

static enum MHD_Result handle(void *unused, struct MHD_Connection *connection, const char *url,
                              const char *method, const char *version, const char *data,
                              size_t *data_size, void **request_state) {
    (void)unused; (void)url; (void)method; (void)version; (void)data;
    static int started;
    if (*request_state == NULL) {
        *request_state = &started;
        return MHD_YES;
    }
    *data_size = 0;
    measure(connection);
    struct MHD_Response *response = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
    enum MHD_Result queued = MHD_queue_response(connection, MHD_HTTP_NO_CONTENT, response);
    MHD_destroy_response(response);
    return queued;
}

static void fail(const char *message) {
    perror(message);
    exit(1);
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: mhd_postprocessor_bench BODY_FILE BOUNDARY CHUNK_BYTES RUNS\n");
        return 2;
    }
    const char *boundary = argv[2];
    chunk_size = strtoull(argv[3], NULL, 10);
    runs = atoi(argv[4]);
    if (chunk_size == 0 || runs <= 0) return 2;

    int file = open(argv[1], O_RDONLY | O_CLOEXEC);
    struct stat info;
    if (file < 0 || fstat(file, &info) != 0) fail(argv[1]);
    body_size = (size_t)info.st_size;
    char *bytes = malloc(body_size ? body_size : 1);
    if (bytes == NULL) fail("malloc");
    for (size_t done = 0; done < body_size;) {
        ssize_t count = read(file, bytes + done, body_size - done);
        if (count <= 0) fail("read");
        done += (size_t)count;
    }
    close(file);
    body = bytes;

    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = 0};
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    struct MHD_Daemon *daemon = MHD_start_daemon(
        MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL, handle, NULL,
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&address,
        MHD_OPTION_CONNECTION_TIMEOUT, 0u, MHD_OPTION_END);
    if (daemon == NULL) fail("MHD_start_daemon");
    address.sin_port = htons(MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT)->port);

    int client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (client < 0 || connect(client, (struct sockaddr *)&address, sizeof address) != 0) fail("connect");
    char request[512];
    int length = snprintf(request, sizeof request,
                          "POST /parse HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                          "Content-Type: multipart/form-data; boundary=%s\r\n"
                          "Content-Length: 0\r\nConnection: close\r\n\r\n", boundary);
    if (length <= 0 || (size_t)length >= sizeof request || write(client, request, (size_t)length) != length)
        fail("write");
    char answer[256];
    ssize_t answered = read(client, answer, sizeof answer - 1);  /* after the timed runs */
    close(client);
    MHD_stop_daemon(daemon);
    free(bytes);
    if (answered <= 0 || failed) {
        fprintf(stderr, "mhd_postprocessor_bench: the post processor failed on this body\n");
        return 1;
    }
    return 0;
}
