// GnuTLS (it comes with libmicrohttpd-dev): Counterpart's SHA-256 and the throwaway
// certificate of --tls-self-signed.
#ifndef COUNTERPART_CGNUTLS_SHIM_H
#define COUNTERPART_CGNUTLS_SHIM_H
#include <gnutls/gnutls.h>
#include <gnutls/crypto.h>
#include <gnutls/x509.h>

// gnutls_free is a function-like macro over a mutable global function pointer: neither
// imports usefully into Swift 6 (the global is not concurrency-safe), so call it here.
static inline void cp_gnutls_free(void *pointer) { gnutls_free(pointer); }

#endif
