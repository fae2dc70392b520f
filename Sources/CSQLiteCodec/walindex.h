#ifndef SECUREFOUNDATION_WALINDEX_H
#define SECUREFOUNDATION_WALINDEX_H

// The WAL index (SQLite's "shared memory") of protected databases, kept on the memory file
// system instead of in `DB-shm` beside the database. The index holds the checksum of the
// WAL's last frame, which SQLite computes over the plaintext page: on a persistent disk it
// would be a test of any guess at that page. Internal to the codec (not in include/).
//
// Every connection opens the index file on its own, so open-file-description locks
// (F_OFD_SETLK) separate connections of one process as they separate processes. `DB-shm`
// stays as an empty file on which each connection holds a shared lock over SQLite's lock
// bytes: a program that opens the database with SQLite's own index (SQLCipher) cannot write
// or recover while a connection of the codec is open, and a connection of the codec refuses
// to start while such a program holds `DB-shm` (SQLITE_BUSY) — never two indexes of one WAL.

#include <stdint.h>

typedef struct sf_walindex {
    int fd;                // the index on /dev/shm; -1 until the first map or lock
    int guard_fd;          // DB-shm beside the database; -1 when the directory allows none
    char *index_path;
    char *guard_path;
    int region_count;
    int region_size;
    int chunk_regions;     // regions per mapping (more than 1 where memory pages are larger)
    void **regions;
} sf_walindex;

/// Whether the memory file system is there (otherwise the wrapped VFS keeps the index).
int sf_walindex_available(void);

void sf_walindex_init(sf_walindex *w);

/// Opens the index at `index_path` (created 0600, owned by this user, no link) and the guard
/// at `guard_path`. Returns an SQLite result code.
int sf_walindex_open(sf_walindex *w, const char *index_path, const char *guard_path);

int sf_walindex_map(sf_walindex *w, int region, int size, int extend, void volatile **out);
int sf_walindex_lock(sf_walindex *w, int offset, int count, int flags);
void sf_walindex_barrier(void);

/// Unmaps and closes; the last user of the index removes it, and with `delete_flag` (the last
/// connection, which holds the database's exclusive lock) the guard too.
int sf_walindex_close(sf_walindex *w, int delete_flag);

#endif
