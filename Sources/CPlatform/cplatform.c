#define _GNU_SOURCE
#include "cplatform.h"
#include <errno.h>
#include <string.h>
#include <unistd.h>
#if defined(__linux__)
#include <sys/random.h>
#endif

int sf_random_bytes(void *buf, size_t len) {
    unsigned char *p = (unsigned char *)buf;
    size_t done = 0;
    while (done < len) {
#if defined(__linux__)
        ssize_t n = getrandom(p + done, len - done, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        done += (size_t)n;
#else
        size_t step = len - done > 256 ? 256 : len - done;
        if (getentropy(p + done, step) != 0) {
            if (errno == EINTR) continue;
            return errno;
        }
        done += step;
#endif
    }
    return 0;
}

void sf_secure_zero(void *buf, size_t len) {
#if defined(__linux__) || defined(__FreeBSD__) || defined(__OpenBSD__)
    explicit_bzero(buf, len);
#else
    volatile unsigned char *p = (volatile unsigned char *)buf;
    while (len--) *p++ = 0;
#endif
}
