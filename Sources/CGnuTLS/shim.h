// GnuTLS's hash functions (it comes with libmicrohttpd-dev): Counterpart's SHA-256.
#ifndef COUNTERPART_CGNUTLS_SHIM_H
#define COUNTERPART_CGNUTLS_SHIM_H
#include <gnutls/gnutls.h>
#include <gnutls/crypto.h>
#endif
