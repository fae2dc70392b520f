#define _GNU_SOURCE
#include "walindex.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

// SQLite's unix VFS keeps its 8 locks at bytes 120..127 of the index and the "dead man
// switch" (a shared lock while the index is in use, exclusive to reset it) at byte 128.
#define LOCK_BASE 120
#define DMS_BYTE (LOCK_BASE + SQLITE_SHM_NLOCK)
// In DB-shm only, beyond SQLite's bytes: held shared by every connection whose index is live,
// exclusive for a moment by a connection that starts an index. Two live indexes of one WAL
// (the memory file system cleared under open connections, by logind's RemoveIPC or by hand,
// or processes that do not share /dev/shm) would corrupt it: the second is refused.
#define LIVE_BYTE 136

#ifdef F_OFD_SETLK

static int has_memory_directory = 0;
static pthread_once_t memory_once = PTHREAD_ONCE_INIT;

static void find_memory_directory(void) {
    struct stat st;
    has_memory_directory = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && access("/dev/shm", W_OK | X_OK) == 0;
}

int sf_walindex_available(void) {
    pthread_once(&memory_once, find_memory_directory);
    return has_memory_directory;
}

/// A lock of this open file description (never the process's, so two connections of one
/// process exclude each other). `wait`: block until it is granted.
static int ofd_lock(int fd, short type, off_t start, off_t length, int wait) {
    struct flock lock;
    memset(&lock, 0, sizeof lock);
    lock.l_type = type;
    lock.l_whence = SEEK_SET;
    lock.l_start = start;
    lock.l_len = length;
    int rc;
    do { rc = fcntl(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &lock); } while (rc != 0 && errno == EINTR);
    return rc;
}

/// Whether anyone (another process's SQLite, through classic locks) holds a lock on the byte.
static int held_by_anyone(int fd, off_t start) {
    struct flock lock;
    memset(&lock, 0, sizeof lock);
    lock.l_type = F_WRLCK;
    lock.l_whence = SEEK_SET;
    lock.l_start = start;
    lock.l_len = 1;
    if (fcntl(fd, F_OFD_GETLK, &lock) != 0) { return 1; }
    return lock.l_type != F_UNLCK;
}

void sf_walindex_init(sf_walindex *w) {
    memset(w, 0, sizeof *w);
    w->fd = -1;
    w->guard_fd = -1;
}

static void release(sf_walindex *w) {
    int per_chunk = w->chunk_regions > 0 ? w->chunk_regions : 1;
    for (int i = 0; i < w->region_count; i += per_chunk) {
        if (w->regions[i] != NULL) { munmap(w->regions[i], (size_t)per_chunk * (size_t)w->region_size); }
    }
    free(w->regions);
    w->regions = NULL;
    w->region_count = 0;
    if (w->fd >= 0) { close(w->fd); }
    if (w->guard_fd >= 0) { close(w->guard_fd); }
    free(w->index_path);
    free(w->guard_path);
    w->fd = -1;
    w->guard_fd = -1;
    w->index_path = NULL;
    w->guard_path = NULL;
}

/// `DB-shm` beside the database, held so that SQLite's own index cannot be used at the same
/// time. Returns an SQLite result code.
static int open_guard(sf_walindex *w, int first) {
    int fd;
    do { fd = open(w->guard_path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600); } while (fd < 0 && errno == EINTR);
    if (fd < 0) {
        if (errno == EACCES || errno == EROFS) { return SQLITE_OK; }   // a read-only directory: no other writer either
        sqlite3_log(SQLITE_IOERR_SHMOPEN, "securefoundation: %s cannot be opened (a link or no file)", w->guard_path);
        return SQLITE_IOERR_SHMOPEN;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) { close(fd); return SQLITE_IOERR_SHMOPEN; }
    if (st.st_uid == geteuid() && (st.st_mode & 077) != 0) { (void)fchmod(fd, 0600); }
    // A program on SQLite's own index holds its dead man switch: it goes first.
    if (held_by_anyone(fd, DMS_BYTE) || ofd_lock(fd, F_RDLCK, LOCK_BASE, SQLITE_SHM_NLOCK, 0) != 0
        || held_by_anyone(fd, DMS_BYTE)) {
        close(fd);
        sqlite3_log(SQLITE_BUSY, "securefoundation: %s is in use by a program without the codec", w->guard_path);
        return SQLITE_BUSY;
    }
    if (first) {
        if (ofd_lock(fd, F_WRLCK, LIVE_BYTE, 1, 0) != 0) {
            close(fd);
            sqlite3_log(SQLITE_BUSY, "securefoundation: another WAL index of %s is in use (was /dev/shm cleared under an open "
                        "connection, or does another process see another /dev/shm?)", w->guard_path);
            return SQLITE_BUSY;
        }
        // The first user wipes what an earlier version (or a plain SQLite) left in it.
        if (st.st_size > 0) { (void)ftruncate(fd, 0); }
        if (ofd_lock(fd, F_RDLCK, LIVE_BYTE, 1, 0) != 0) { close(fd); return SQLITE_IOERR_SHMOPEN; }
    } else if (ofd_lock(fd, F_RDLCK, LIVE_BYTE, 1, 1) != 0) {
        close(fd);
        return SQLITE_IOERR_SHMOPEN;
    }
    w->guard_fd = fd;
    return SQLITE_OK;
}

/// Opens the index file and takes its dead man switch: exclusive first (no other user: the
/// index starts empty, SQLite rebuilds it from the WAL), then shared for as long as it is open.
/// 1 when this is the first user, 0 when not, -1 on an error; -2 when the file was removed by
/// its last user in between (open again).
static int open_index_file(sf_walindex *w) {
    int fd;
    do { fd = open(w->index_path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600); } while (fd < 0 && errno == EINTR);
    if (fd < 0) { return -1; }
    struct stat st, now;
    // /dev/shm is shared by every user: the index must be this user's own file, private.
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077) != 0 || st.st_nlink != 1) {
        sqlite3_log(SQLITE_IOERR_SHMOPEN, "securefoundation: %s is not a private file of this user", w->index_path);
        close(fd);
        return -1;
    }
    int first = 0;
    if (ofd_lock(fd, F_WRLCK, DMS_BYTE, 1, 0) == 0) {
        first = 1;
        if (ftruncate(fd, 0) != 0 || ofd_lock(fd, F_RDLCK, DMS_BYTE, 1, 0) != 0) { close(fd); return -1; }
    } else if (ofd_lock(fd, F_RDLCK, DMS_BYTE, 1, 1) != 0) {
        close(fd);
        return -1;
    }
    // The last user removes the file while it holds the switch exclusively: a file opened
    // before that and locked after is no longer the one at the name.
    if (stat(w->index_path, &now) != 0 || now.st_dev != st.st_dev || now.st_ino != st.st_ino) {
        close(fd);
        return -2;
    }
    w->fd = fd;
    return first;
}

int sf_walindex_open(sf_walindex *w, const char *index_path, const char *guard_path) {
    if (w->fd >= 0) { return SQLITE_OK; }
    w->index_path = strdup(index_path);
    w->guard_path = strdup(guard_path);
    if (w->index_path == NULL || w->guard_path == NULL) { release(w); return SQLITE_NOMEM; }
    int first = -2;
    for (int attempt = 0; attempt < 16 && first == -2; attempt++) { first = open_index_file(w); }
    if (first < 0) { release(w); return SQLITE_IOERR_SHMOPEN; }
    int rc = open_guard(w, first);
    if (rc != SQLITE_OK) { release(w); }
    return rc;
}

int sf_walindex_map(sf_walindex *w, int region, int size, int extend, void volatile **out) {
    *out = NULL;
    if (w->fd < 0 || region < 0 || region > 1 << 20 || size <= 0 || (w->region_size != 0 && size != w->region_size)) {
        return SQLITE_IOERR_SHMMAP;
    }
    // Mappings start at multiples of the memory page: with pages larger than a region (64 KiB
    // pages) one mapping holds several regions, as in SQLite's unix VFS.
    long page_size = sysconf(_SC_PAGESIZE);
    int per_chunk = page_size > size ? (int)(page_size / size) : 1;
    int chunk_first = region - region % per_chunk;
    if (chunk_first + per_chunk > w->region_count) {
        int count = chunk_first + per_chunk;
        void **grown = realloc(w->regions, sizeof(void *) * (size_t)count);
        if (grown == NULL) { return SQLITE_IOERR_NOMEM; }
        for (int i = w->region_count; i < count; i++) { grown[i] = NULL; }
        w->regions = grown;
        w->region_count = count;
    }
    w->region_size = size;
    if (w->regions[region] == NULL) {
        off_t need = (off_t)(chunk_first + per_chunk) * size;
        struct stat st;
        if (fstat(w->fd, &st) != 0) { return SQLITE_IOERR_SHMSIZE; }
        if (st.st_size < (off_t)(region + 1) * size) {
            if (!extend) { return SQLITE_OK; }
        }
        if (st.st_size < need) {
            // Allocated now, so a full memory file system is an error here, not a signal later.
            int rc = posix_fallocate(w->fd, 0, need);
            if (rc != 0 && (rc != EOPNOTSUPP && rc != EINVAL)) { return SQLITE_IOERR_SHMSIZE; }
            if (rc != 0 && ftruncate(w->fd, need) != 0) { return SQLITE_IOERR_SHMSIZE; }
        }
        size_t length = (size_t)per_chunk * (size_t)size;
        void *map = mmap(NULL, length, PROT_READ | PROT_WRITE, MAP_SHARED, w->fd, (off_t)chunk_first * size);
        if (map == MAP_FAILED) { return SQLITE_IOERR_SHMMAP; }
        for (int i = 0; i < per_chunk; i++) { w->regions[chunk_first + i] = (char *)map + (size_t)i * (size_t)size; }
        w->chunk_regions = per_chunk;
    }
    *out = w->regions[region];
    return SQLITE_OK;
}

int sf_walindex_lock(sf_walindex *w, int offset, int count, int flags) {
    if (w->fd < 0 || offset < 0 || count < 1 || offset + count > SQLITE_SHM_NLOCK) { return SQLITE_IOERR_LOCK; }
    short type = (flags & SQLITE_SHM_UNLOCK) ? F_UNLCK : ((flags & SQLITE_SHM_SHARED) ? F_RDLCK : F_WRLCK);
    if (ofd_lock(w->fd, type, LOCK_BASE + offset, count, 0) == 0) { return SQLITE_OK; }
    return (errno == EAGAIN || errno == EACCES) ? SQLITE_BUSY : SQLITE_IOERR_LOCK;
}

void sf_walindex_barrier(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

int sf_walindex_close(sf_walindex *w, int delete_flag) {
    if (w->fd < 0) { return SQLITE_OK; }
    // The last user removes the index (the next first user would empty it anyway), so none is
    // left on /dev/shm when a WAL outlives its connections (a read-only last connection).
    struct stat own, named;
    if (ofd_lock(w->fd, F_WRLCK, DMS_BYTE, 1, 0) == 0 && fstat(w->fd, &own) == 0 && stat(w->index_path, &named) == 0
        && own.st_dev == named.st_dev && own.st_ino == named.st_ino) {
        (void)unlink(w->index_path);
    }
    if (delete_flag && w->guard_fd >= 0 && ofd_lock(w->guard_fd, F_WRLCK, LOCK_BASE, SQLITE_SHM_NLOCK + 1, 0) == 0) {
        (void)unlink(w->guard_path);
    }
    release(w);
    return SQLITE_OK;
}

#else   // no open-file-description locks: the wrapped VFS keeps the index beside the database

int sf_walindex_available(void) { return 0; }
void sf_walindex_init(sf_walindex *w) { memset(w, 0, sizeof *w); w->fd = -1; w->guard_fd = -1; }
int sf_walindex_open(sf_walindex *w, const char *index_path, const char *guard_path) {
    (void)w; (void)index_path; (void)guard_path; return SQLITE_IOERR_SHMOPEN;
}
int sf_walindex_map(sf_walindex *w, int region, int size, int extend, void volatile **out) {
    (void)w; (void)region; (void)size; (void)extend; *out = NULL; return SQLITE_IOERR_SHMMAP;
}
int sf_walindex_lock(sf_walindex *w, int offset, int count, int flags) {
    (void)w; (void)offset; (void)count; (void)flags; return SQLITE_IOERR_LOCK;
}
void sf_walindex_barrier(void) {}
int sf_walindex_close(sf_walindex *w, int delete_flag) { (void)w; (void)delete_flag; return SQLITE_OK; }

#endif
