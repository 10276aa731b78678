// The system's crypt(3) from libxcrypt (Debian's libcrypt-dev): yescrypt and bcrypt
// password hashes for --auth-file, never hashed by hand.
#ifndef COUNTERPART_CCRYPT_SHIM_H
#define COUNTERPART_CCRYPT_SHIM_H

#include <crypt.h>

#endif
