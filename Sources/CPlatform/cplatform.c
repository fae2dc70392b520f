#define _GNU_SOURCE
#include "cplatform.h"
#include <errno.h>
#include <string.h>
#include <unistd.h>
#if defined(__linux__)
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/random.h>

// The kernel's getrandom in the vDSO (Linux 6.11 and later): the same generator as the system
// call, run in user space from a per-state ChaCha20 key that the kernel reseeds. Its states are
// mapped as the kernel asks (MAP_DROPPABLE: wiped on fork, zeroed under memory pressure, both of
// which make the next call reseed) and carry the kernel's generation, which moves when the kernel
// reseeds or the VM is forked. A state serves one call at a time. A system call costs about a
// microsecond on machines with speculation mitigations, the vDSO call a tenth of that, which is
// most of the fixed cost of sealing a small value (one nonce per seal).
struct sf_vgetrandom_params {
    uint32_t size_of_opaque_state;
    uint32_t mmap_prot;
    uint32_t mmap_flags;
    uint32_t reserved[13];
};
typedef ssize_t (*sf_vgetrandom_fn)(void *buffer, size_t len, unsigned int flags, void *state, size_t state_len);

// One page of states, each taken by an atomic flag for one call. When all are taken (more threads
// at once than states) or the vDSO has no getrandom, the system call serves.
#define SF_VDSO_STATES_MAX 64
static pthread_once_t sf_vdso_once = PTHREAD_ONCE_INIT;
static sf_vgetrandom_fn sf_vdso_getrandom;
static size_t sf_vdso_state_size;
static unsigned char *sf_vdso_states[SF_VDSO_STATES_MAX];
static int sf_vdso_state_busy[SF_VDSO_STATES_MAX];
static size_t sf_vdso_state_count;

static void sf_vdso_setup(void) {
    void *vdso = dlopen("linux-vdso.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (vdso == NULL) { return; }
    sf_vgetrandom_fn fn = (sf_vgetrandom_fn)dlvsym(vdso, "__vdso_getrandom", "LINUX_2.6");
    if (fn == NULL) { return; }
    struct sf_vgetrandom_params params;
    memset(&params, 0, sizeof(params));
    // Asking with a NULL buffer and a length of ~0 fills in how states are to be made.
    if (fn(NULL, 0, 0, &params, ~(size_t)0) != 0 || params.size_of_opaque_state == 0) { return; }
    long page = sysconf(_SC_PAGESIZE);
    if (page <= 0 || params.size_of_opaque_state > (size_t)page) { return; }
    size_t count = (size_t)page / params.size_of_opaque_state;
    if (count > SF_VDSO_STATES_MAX) { count = SF_VDSO_STATES_MAX; }
    // States must not cross a page boundary: one page holds them all.
    void *pages = mmap(NULL, (size_t)page, (int)params.mmap_prot, (int)params.mmap_flags, -1, 0);
    if (pages == MAP_FAILED) { return; }
    for (size_t index = 0; index < count; index++) {
        sf_vdso_states[index] = (unsigned char *)pages + index * params.size_of_opaque_state;
    }
    sf_vdso_state_size = params.size_of_opaque_state;
    sf_vdso_state_count = count;
    sf_vdso_getrandom = fn;
}

/// Fills all of buf from a free vDSO state: 0 when done, -1 when no state was free or the vDSO
/// has no getrandom (the caller then uses the system call), or an errno value.
static int sf_vdso_random(unsigned char *p, size_t len) {
    pthread_once(&sf_vdso_once, sf_vdso_setup);
    if (sf_vdso_getrandom == NULL) { return -1; }
    for (size_t index = 0; index < sf_vdso_state_count; index++) {
        if (__atomic_exchange_n(&sf_vdso_state_busy[index], 1, __ATOMIC_ACQUIRE) != 0) { continue; }
        int result = 0;
        size_t done = 0;
        while (done < len) {
            ssize_t n = sf_vdso_getrandom(p + done, len - done, 0, sf_vdso_states[index], sf_vdso_state_size);
            if (n < 0) {
                if (n == -EINTR) { continue; }
                result = (int)-n;
                break;
            }
            done += (size_t)n;
        }
        __atomic_store_n(&sf_vdso_state_busy[index], 0, __ATOMIC_RELEASE);
        return result;
    }
    return -1;
}
#endif

int sf_random_bytes(void *buf, size_t len) {
    unsigned char *p = (unsigned char *)buf;
    size_t done = 0;
#if defined(__linux__)
    if (len > 0) {
        int vdso = sf_vdso_random(p, len);
        if (vdso >= 0) { return vdso; }
    }
#endif
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

// ---- Shredder ------------------------------------------------------------------------------

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <dlfcn.h>
#include <sys/stat.h>
#include <sys/types.h>
#if defined(__linux__)
#include <sys/vfs.h>
#else
#include <sys/param.h>
#include <sys/mount.h>
#endif
#if defined(__linux__)
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <linux/fs.h>
#include <linux/fiemap.h>
#endif

#if defined(__linux__)
uint32_t sf_fiemap_flag_last(void) { return FIEMAP_EXTENT_LAST; }
uint32_t sf_fiemap_flag_unknown(void) { return FIEMAP_EXTENT_UNKNOWN; }
uint32_t sf_fiemap_flag_delalloc(void) { return FIEMAP_EXTENT_DELALLOC; }
uint32_t sf_fiemap_flag_encoded(void) { return FIEMAP_EXTENT_ENCODED; }
uint32_t sf_fiemap_flag_not_aligned(void) { return FIEMAP_EXTENT_NOT_ALIGNED; }
uint32_t sf_fiemap_flag_data_inline(void) { return FIEMAP_EXTENT_DATA_INLINE; }
uint32_t sf_fiemap_flag_shared(void) { return FIEMAP_EXTENT_SHARED; }
uint32_t sf_fiemap_flag_unwritten(void) { return FIEMAP_EXTENT_UNWRITTEN; }

int sf_fiemap(int fd, sf_extent *extents, uint32_t capacity, uint32_t *count, int *truncated) {
    *count = 0;
    *truncated = 0;
    size_t size = sizeof(struct fiemap) + (size_t)capacity * sizeof(struct fiemap_extent);
    struct fiemap *map = calloc(1, size);
    if (map == NULL) return ENOMEM;
    map->fm_start = 0;
    map->fm_length = FIEMAP_MAX_OFFSET;
    map->fm_flags = FIEMAP_FLAG_SYNC;
    map->fm_extent_count = capacity;
    if (ioctl(fd, FS_IOC_FIEMAP, map) != 0) {
        int code = errno;
        free(map);
        return code;
    }
    uint32_t n = map->fm_mapped_extents;
    if (n > capacity) n = capacity;
    for (uint32_t i = 0; i < n; i++) {
        extents[i].logical = map->fm_extents[i].fe_logical;
        extents[i].physical = map->fm_extents[i].fe_physical;
        extents[i].length = map->fm_extents[i].fe_length;
        extents[i].flags = map->fm_extents[i].fe_flags;
    }
    *count = n;
    if (n > 0 && n == capacity && !(map->fm_extents[n - 1].fe_flags & FIEMAP_EXTENT_LAST)) *truncated = 1;
    free(map);
    return 0;
}

long sf_inode_flags(int fd) {
    int flags = 0;
    if (ioctl(fd, FS_IOC_GETFLAGS, &flags) != 0) return -1;
    return (long)(unsigned int)flags;
}
long sf_inode_flag_journal_data(void) { return FS_JOURNAL_DATA_FL; }
long sf_inode_flag_nocow(void) { return FS_NOCOW_FL; }
long sf_inode_flag_compressed(void) { return FS_COMPR_FL; }
#else
uint32_t sf_fiemap_flag_last(void) { return 0; }
uint32_t sf_fiemap_flag_unknown(void) { return 0; }
uint32_t sf_fiemap_flag_delalloc(void) { return 0; }
uint32_t sf_fiemap_flag_encoded(void) { return 0; }
uint32_t sf_fiemap_flag_not_aligned(void) { return 0; }
uint32_t sf_fiemap_flag_data_inline(void) { return 0; }
uint32_t sf_fiemap_flag_shared(void) { return 0; }
uint32_t sf_fiemap_flag_unwritten(void) { return 0; }
int sf_fiemap(int fd, sf_extent *extents, uint32_t capacity, uint32_t *count, int *truncated) {
    (void)fd; (void)extents; (void)capacity;
    *count = 0; *truncated = 0;
    return ENOSYS;
}
long sf_inode_flags(int fd) { (void)fd; errno = ENOSYS; return -1; }
long sf_inode_flag_journal_data(void) { return 0; }
long sf_inode_flag_nocow(void) { return 0; }
long sf_inode_flag_compressed(void) { return 0; }
#endif

int sf_fstatfs_type(int fd, int64_t *type, char *name, size_t name_capacity) {
    struct statfs info;
    if (fstatfs(fd, &info) != 0) return errno;
    if (name_capacity > 0) name[0] = 0;
#if defined(__linux__)
    *type = (int64_t)(uint32_t)info.f_type;
#else
    *type = (int64_t)info.f_type;
#if defined(__APPLE__) || defined(__FreeBSD__)
    if (name_capacity > 0) {
        strncpy(name, info.f_fstypename, name_capacity - 1);
        name[name_capacity - 1] = 0;
    }
#endif
#endif
    return 0;
}

off_t sf_seek_data(int fd, off_t offset) {
#if defined(SEEK_DATA)
    return lseek(fd, offset, SEEK_DATA);
#else
    (void)fd; (void)offset; errno = EINVAL; return -1;
#endif
}

off_t sf_seek_hole(int fd, off_t offset) {
#if defined(SEEK_HOLE)
    return lseek(fd, offset, SEEK_HOLE);
#else
    (void)fd; (void)offset; errno = EINVAL; return -1;
#endif
}

int sf_datasync(int fd) {
#if defined(__APPLE__)
    if (fcntl(fd, F_FULLFSYNC) == 0) return 0;
    return fsync(fd);
#elif defined(__linux__)
    return fdatasync(fd);
#else
    return fsync(fd);
#endif
}

int sf_drop_cache(int fd) {
#if defined(POSIX_FADV_DONTNEED)
    return posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
#else
    (void)fd; return ENOSYS;
#endif
}

unsigned int sf_dev_major(dev_t dev) { return (unsigned int)major(dev); }
unsigned int sf_dev_minor(dev_t dev) { return (unsigned int)minor(dev); }

int sf_rename_noreplace(int olddirfd, const char *oldname, int newdirfd, const char *newname) {
#if defined(__linux__) && defined(SYS_renameat2)
    if (syscall(SYS_renameat2, olddirfd, oldname, newdirfd, newname, 1 /* RENAME_NOREPLACE */) == 0) return 0;
    if (errno != ENOSYS && errno != EINVAL) return errno;
#endif
    struct stat info;
    if (fstatat(newdirfd, newname, &info, AT_SYMLINK_NOFOLLOW) == 0) return EEXIST;
    if (errno != ENOENT) return errno;
    if (renameat(olddirfd, oldname, newdirfd, newname) != 0) return errno;
    return 0;
}

int sf_rename_exchange(const char *first, const char *second) {
#if defined(__linux__) && defined(SYS_renameat2)
    if (syscall(SYS_renameat2, AT_FDCWD, first, AT_FDCWD, second, 2 /* RENAME_EXCHANGE */) == 0) return 0;
    return errno;
#elif defined(__APPLE__)
    if (renameatx_np(AT_FDCWD, first, AT_FDCWD, second, RENAME_SWAP) == 0) return 0;
    return errno;
#else
    (void)first; (void)second;
    return ENOSYS;
#endif
}

int sf_memfd_create(const char *name) {
#if defined(__linux__) && defined(SYS_memfd_create)
    return (int)syscall(SYS_memfd_create, name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
#else
    (void)name; errno = ENOSYS; return -1;
#endif
}

int sf_memfd_seal(int fd) {
#if defined(__linux__) && defined(F_ADD_SEALS)
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0) return errno;
    return 0;
#else
    (void)fd; return ENOSYS;
#endif
}

void *sf_dlopen(const char *path) { return dlopen(path, RTLD_NOW | RTLD_LOCAL); }
int sf_dup_above(int fd, int lowest) { return fcntl(fd, F_DUPFD_CLOEXEC, lowest); }
int sf_dl_name_in_use(const char *path) {
    void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    if (handle == NULL) return 0;
    dlclose(handle);
    return 1;
}
void *sf_dlsym(void *handle, const char *name) { return dlsym(handle, name); }
int sf_dlclose(void *handle) { return dlclose(handle); }
const char *sf_dlerror(void) { return dlerror(); }

#if defined(__GLIBC__)
#include <malloc.h>
int sf_malloc_keep_freed(size_t bytes) {
    return mallopt(M_TRIM_THRESHOLD, (int)(bytes > 0x7fffffff ? 0x7fffffff : bytes)) == 1 ? 1 : 0;
}
int sf_malloc_heap_below(size_t bytes) {
    return mallopt(M_MMAP_THRESHOLD, (int)(bytes > 0x7fffffff ? 0x7fffffff : bytes)) == 1 ? 1 : 0;
}
#else
int sf_malloc_keep_freed(size_t bytes) {
    (void)bytes;
    return 0;
}
int sf_malloc_heap_below(size_t bytes) {
    (void)bytes;
    return 0;
}
#endif

#include <fcntl.h>
#include <stdio.h>

int sf_open_tmpfile(const char *directory, mode_t mode) {
#if defined(__linux__) && defined(O_TMPFILE)
    return open(directory, O_TMPFILE | O_WRONLY | O_CLOEXEC, mode);
#else
    (void)directory; (void)mode; errno = ENOSYS; return -1;
#endif
}

int sf_link_open_file(int fd, const char *path) {
#if defined(__linux__)
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    if (linkat(AT_FDCWD, proc, AT_FDCWD, path, AT_SYMLINK_FOLLOW) == 0) return 0;
    if (errno == EEXIST) return EEXIST;
    int first = errno;
#if defined(AT_EMPTY_PATH)
    if (linkat(fd, "", AT_FDCWD, path, AT_EMPTY_PATH) == 0) return 0;
    if (errno == EEXIST) return EEXIST;
#endif
    return first;
#else
    (void)fd; (void)path; return ENOSYS;
#endif
}

long long sf_copy_file_range(int in, long long *in_offset, int out, size_t length) {
#if defined(__linux__)
    loff_t offset = (loff_t)*in_offset;
    ssize_t n = copy_file_range(in, &offset, out, NULL, length, 0);
    if (n > 0) *in_offset = (long long)offset;
    return (long long)n;
#else
    (void)in; (void)in_offset; (void)out; (void)length;
    errno = ENOSYS;
    return -1;
#endif
}

#include <pthread.h>
void sf_set_thread_name(const char *name) {
#if defined(__linux__)
    char shortened[16];
    strncpy(shortened, name, sizeof shortened - 1);
    shortened[sizeof shortened - 1] = 0;
    (void)pthread_setname_np(pthread_self(), shortened);
#elif defined(__APPLE__)
    (void)pthread_setname_np(name);
#else
    (void)name;
#endif
}
