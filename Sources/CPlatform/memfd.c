#define _GNU_SOURCE
#include "cplatform_memfd.h"
#include <errno.h>
#if defined(__linux__)
#include <sys/mman.h>
#endif

int sf_memory_file(const char *name) {
#if defined(__linux__)
    return memfd_create(name, MFD_CLOEXEC);
#else
    (void)name;
    errno = ENOSYS;
    return -1;
#endif
}
