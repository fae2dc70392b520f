#ifndef SECUREFOUNDATION_CPLATFORM_H
#define SECUREFOUNDATION_CPLATFORM_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/// Fills buf with len bytes from the OS CSPRNG (on Linux the kernel's getrandom, through the
/// vDSO where the kernel offers it and else the system call; getentropy elsewhere).
/// Returns 0 on success or an errno value; never falls back to a weaker source.
int sf_random_bytes(void *buf, size_t len);

/// Zeroes len bytes in a way the compiler may not remove.
void sf_secure_zero(void *buf, size_t len);


// ---- Shredder ------------------------------------------------------------------------------

/// One physical extent of a file as reported by FIEMAP.
typedef struct sf_extent {
    uint64_t logical;
    uint64_t physical;
    uint64_t length;
    uint32_t flags;
} sf_extent;

/// FIEMAP extent flags the Swift side needs (values of linux/fiemap.h, 0 elsewhere).
uint32_t sf_fiemap_flag_last(void);
uint32_t sf_fiemap_flag_unknown(void);
uint32_t sf_fiemap_flag_delalloc(void);
uint32_t sf_fiemap_flag_encoded(void);
uint32_t sf_fiemap_flag_not_aligned(void);
uint32_t sf_fiemap_flag_data_inline(void);
uint32_t sf_fiemap_flag_shared(void);
uint32_t sf_fiemap_flag_unwritten(void);

/// Fills up to `capacity` extents of the open file `fd` (ioctl FS_IOC_FIEMAP with
/// FIEMAP_FLAG_SYNC). Stores the number found in `*count` and whether more extents exist than
/// fit in `*truncated`. Returns 0 or an errno value (EOPNOTSUPP/ENOTTY where unsupported,
/// ENOSYS off Linux).
int sf_fiemap(int fd, sf_extent *extents, uint32_t capacity, uint32_t *count, int *truncated);

/// The inode flags (FS_IOC_GETFLAGS) of an open file, or -1 with errno set.
long sf_inode_flags(int fd);
/// FS_JOURNAL_DATA_FL, FS_NOCOW_FL and FS_COMPR_FL (0 off Linux).
long sf_inode_flag_journal_data(void);
long sf_inode_flag_nocow(void);
long sf_inode_flag_compressed(void);

/// The filesystem type of an open file: statfs f_type on Linux (stored in *type), and the
/// type name (f_fstypename) where the system has one (stored in name, NUL-terminated).
/// Returns 0 or an errno value.
int sf_fstatfs_type(int fd, int64_t *type, char *name, size_t name_capacity);

/// lseek with SEEK_DATA / SEEK_HOLE. Returns -1 with errno EINVAL where they do not exist.
off_t sf_seek_data(int fd, off_t offset);
off_t sf_seek_hole(int fd, off_t offset);

/// fdatasync where it exists, else fsync (F_FULLFSYNC on Darwin). Returns 0 or -1 with errno.
int sf_datasync(int fd);

/// posix_fadvise(POSIX_FADV_DONTNEED) over the whole file. Returns 0 or an errno value.
int sf_drop_cache(int fd);

/// major/minor of a device number.
unsigned int sf_dev_major(dev_t dev);
unsigned int sf_dev_minor(dev_t dev);

/// renameat that refuses to replace an existing entry (renameat2 RENAME_NOREPLACE on Linux,
/// renameatx_np RENAME_EXCL on Darwin, a check-then-rename elsewhere). Returns 0 or an errno value.
int sf_rename_noreplace(int olddirfd, const char *oldname, int newdirfd, const char *newname);

/// Exchanges two paths atomically (renameat2 RENAME_EXCHANGE on Linux, renameatx_np RENAME_SWAP
/// on Darwin). Returns 0 or an errno value (ENOSYS where neither exists: no emulation, since a
/// non-atomic exchange is what a caller of this must avoid).
int sf_rename_exchange(const char *first, const char *second);

/// memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING). Returns the descriptor or -1 with errno
/// (ENOSYS off Linux).
int sf_memfd_create(const char *name);

/// Seals a memfd against growing, shrinking and writing (F_ADD_SEALS). Returns 0 or an errno value.
int sf_memfd_seal(int fd);

/// dlopen(path, RTLD_NOW | RTLD_LOCAL).
void *sf_dlopen(const char *path);
/// Whether an object is loaded under the name `path` (dlopen with RTLD_NOLOAD; the reference
/// it takes is dropped): the loader matches a path by its text before opening it, so a
/// `/proc/self/fd/N` of a library loaded earlier would return that library.
int sf_dl_name_in_use(const char *path);
/// fcntl(fd, F_DUPFD_CLOEXEC, lowest): a copy of `fd` at the lowest free number >= `lowest`.
int sf_dup_above(int fd, int lowest);
/// dlsym; NULL when absent.
void *sf_dlsym(void *handle, const char *name);
/// Names the calling thread as tools show it (Linux keeps the first 15 bytes).
void sf_set_thread_name(const char *name);
/// dlclose; 0 on success.
int sf_dlclose(void *handle);
/// The last dlerror() text, or NULL.
const char *sf_dlerror(void);

/// Keeps freed heap memory mapped (glibc: M_TRIM_THRESHOLD raised to `bytes`), so a loop that
/// allocates and frees 64 KiB buffers does not return and re-fault pages every time.
/// Process-wide; a no-op outside glibc. Returns 1 when applied.
int sf_malloc_keep_freed(size_t bytes);

/// Serves allocations below `bytes` from the heap instead of a fresh mapping each (glibc:
/// M_MMAP_THRESHOLD), so buffers of a few hundred KiB allocated and freed in a loop reuse the
/// same pages. Process-wide; a no-op outside glibc. Returns 1 when applied.
int sf_malloc_heap_below(size_t bytes);


// ---- Files ---------------------------------------------------------------------------------

/// Opens an unnamed regular file in `directory` (open with O_TMPFILE | O_WRONLY | O_CLOEXEC and
/// `mode`): a crash before it is linked leaves nothing behind. Returns the descriptor, or -1
/// with errno (EOPNOTSUPP, EISDIR or EINVAL where the filesystem or kernel has no O_TMPFILE,
/// ENOSYS off Linux).
int sf_open_tmpfile(const char *directory, mode_t mode);

/// Gives the unnamed file open on `fd` the name `path` (linkat through /proc/self/fd, then
/// AT_EMPTY_PATH). Returns 0 or an errno value (EEXIST when `path` exists; ENOSYS off Linux).
int sf_link_open_file(int fd, const char *path);

/// Copies up to `length` bytes from `in` at `*in_offset` (advanced) to `out` at its file offset,
/// in the kernel (copy_file_range). Returns the bytes copied, 0 at the end of `in`, or -1 with
/// errno (EXDEV, EINVAL, ENOSYS and others where the kernel cannot: copy through a buffer).
long long sf_copy_file_range(int in, long long *in_offset, int out, size_t length);

#endif
