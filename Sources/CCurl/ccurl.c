#include "ccurl.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#ifdef __APPLE__
static const char *const library_name = "libcurl.4.dylib";
#else
static const char *const library_name = "libcurl.so.4";
#endif

/// libcurl's functions, found once by `load` and never changed after.
static struct {
    CURLcode (*global_init)(long flags);
    CURL *(*easy_init)(void);
    void (*easy_cleanup)(CURL *handle);
    void (*easy_reset)(CURL *handle);
    CURLcode (*easy_perform)(CURL *handle);
    const char *(*easy_strerror)(CURLcode code);
    struct curl_slist *(*slist_append)(struct curl_slist *list, const char *string);
    void (*slist_free_all)(struct curl_slist *list);
    CURLcode (*easy_setopt)(CURL *handle, CURLoption option, ...);
    CURLcode (*easy_getinfo)(CURL *handle, CURLINFO info, ...);
} curl;

static pthread_once_t loaded = PTHREAD_ONCE_INIT;
/// What `load` found wrong; empty when libcurl is ready.
static char failure[512];

static int find(void *library, void **function, const char *name) {
    *function = dlsym(library, name);
    if (*function != NULL) return 1;
    snprintf(failure, sizeof failure, "%s has no %s", library_name, name);
    return 0;
}

static void load(void) {
    // RTLD_LOCAL: libcurl's symbols (and OpenSSL's under it) stay out of the process's
    // global namespace, where GnuTLS already is.
    void *library = dlopen(library_name, RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) {
        const char *error = dlerror();
        snprintf(failure, sizeof failure, "%s", error != NULL ? error : library_name);
        return;
    }
    if (!find(library, (void **)&curl.global_init, "curl_global_init")
        || !find(library, (void **)&curl.easy_init, "curl_easy_init")
        || !find(library, (void **)&curl.easy_cleanup, "curl_easy_cleanup")
        || !find(library, (void **)&curl.easy_reset, "curl_easy_reset")
        || !find(library, (void **)&curl.easy_perform, "curl_easy_perform")
        || !find(library, (void **)&curl.easy_strerror, "curl_easy_strerror")
        || !find(library, (void **)&curl.slist_append, "curl_slist_append")
        || !find(library, (void **)&curl.slist_free_all, "curl_slist_free_all")
        || !find(library, (void **)&curl.easy_setopt, "curl_easy_setopt")
        || !find(library, (void **)&curl.easy_getinfo, "curl_easy_getinfo")) {
        return;
    }
    // Once per process, before any handle (libcurl's rule).
    if (curl.global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        snprintf(failure, sizeof failure, "curl_global_init failed");
    }
}

const char *ccurl_load(void) {
    pthread_once(&loaded, load);
    return failure[0] == 0 ? NULL : failure;
}

CURL *ccurl_easy_init(void) { return curl.easy_init(); }
void ccurl_easy_cleanup(CURL *handle) { curl.easy_cleanup(handle); }
void ccurl_easy_reset(CURL *handle) { curl.easy_reset(handle); }
CURLcode ccurl_easy_perform(CURL *handle) { return curl.easy_perform(handle); }
const char *ccurl_easy_strerror(CURLcode code) { return curl.easy_strerror(code); }
struct curl_slist *ccurl_slist_append(struct curl_slist *list, const char *string) { return curl.slist_append(list, string); }
void ccurl_slist_free_all(struct curl_slist *list) { curl.slist_free_all(list); }

CURLcode ccurl_setopt_long(CURL *handle, CURLoption option, long value) { return curl.easy_setopt(handle, option, value); }
CURLcode ccurl_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value) { return curl.easy_setopt(handle, option, value); }
CURLcode ccurl_setopt_string(CURL *handle, CURLoption option, const char *value) { return curl.easy_setopt(handle, option, value); }
CURLcode ccurl_setopt_pointer(CURL *handle, CURLoption option, void *value) { return curl.easy_setopt(handle, option, value); }
CURLcode ccurl_setopt_headers(CURL *handle, struct curl_slist *headers) { return curl.easy_setopt(handle, CURLOPT_HTTPHEADER, headers); }
CURLcode ccurl_setopt_write_function(CURL *handle, CURLoption option, curl_write_callback callback) { return curl.easy_setopt(handle, option, callback); }
CURLcode ccurl_setopt_read_function(CURL *handle, curl_read_callback callback) { return curl.easy_setopt(handle, CURLOPT_READFUNCTION, callback); }
CURLcode ccurl_setopt_seek_function(CURL *handle, curl_seek_callback callback) { return curl.easy_setopt(handle, CURLOPT_SEEKFUNCTION, callback); }
CURLcode ccurl_getinfo_long(CURL *handle, CURLINFO info, long *value) { return curl.easy_getinfo(handle, info, value); }
