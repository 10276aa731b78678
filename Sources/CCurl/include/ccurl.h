// libcurl's easy interface for the S3 client (Storage/S3/CurlTransfer.swift, its only user),
// loaded with dlopen when the first S3 store opens rather than linked: libcurl and the
// libraries it brings (OpenSSL, Kerberos, LDAP, SSH, RTMP and more) held about 3 MiB of
// every Counterpart process once mapped, a server on a local folder included, which never
// uses them. `curl_easy_setopt` and `curl_easy_getinfo` are variadic, which Swift cannot
// call: each argument type has its own function here.
#ifndef COUNTERPART_CCURL_H
#define COUNTERPART_CCURL_H

#include <curl/curl.h>

/// Loads libcurl and runs curl_global_init, once per process (any thread may ask, any number
/// of times): NULL when it is ready, else what failed, as text. No other function here may be
/// called before it has returned NULL.
const char *ccurl_load(void);

CURL *ccurl_easy_init(void);
void ccurl_easy_cleanup(CURL *handle);
void ccurl_easy_reset(CURL *handle);
CURLcode ccurl_easy_perform(CURL *handle);
const char *ccurl_easy_strerror(CURLcode code);
struct curl_slist *ccurl_slist_append(struct curl_slist *list, const char *string);
void ccurl_slist_free_all(struct curl_slist *list);

CURLcode ccurl_setopt_long(CURL *handle, CURLoption option, long value);
CURLcode ccurl_setopt_off_t(CURL *handle, CURLoption option, curl_off_t value);
/// Strings are copied by libcurl (except CURLOPT_POSTFIELDS, which the S3 client does not use).
CURLcode ccurl_setopt_string(CURL *handle, CURLoption option, const char *value);
CURLcode ccurl_setopt_pointer(CURL *handle, CURLoption option, void *value);
CURLcode ccurl_setopt_headers(CURL *handle, struct curl_slist *headers);
/// The write and header callbacks have the same type.
CURLcode ccurl_setopt_write_function(CURL *handle, CURLoption option, curl_write_callback callback);
CURLcode ccurl_setopt_read_function(CURL *handle, curl_read_callback callback);
CURLcode ccurl_setopt_seek_function(CURL *handle, curl_seek_callback callback);
CURLcode ccurl_getinfo_long(CURL *handle, CURLINFO info, long *value);

#endif
