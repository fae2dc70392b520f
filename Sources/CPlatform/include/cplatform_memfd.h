#ifndef CPLATFORM_MEMFD_H
#define CPLATFORM_MEMFD_H

/// An anonymous file in memory (Linux memfd_create, close-on-exec): a descriptor whose bytes
/// are never on a file system. Returns -1 with errno ENOSYS where the system has none.
int sf_memory_file(const char *name);

#endif
