#ifndef SECUREFOUNDATION_CPLATFORM_H
#define SECUREFOUNDATION_CPLATFORM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/// Fills buf with len bytes from the OS CSPRNG (getrandom on Linux, getentropy elsewhere).
/// Returns 0 on success or an errno value; never falls back to a weaker source.
int sf_random_bytes(void *buf, size_t len);

/// Zeroes len bytes in a way the compiler may not remove.
void sf_secure_zero(void *buf, size_t len);

#endif
