#ifndef SECUREFOUNDATION_SFDBCODEC_H
#define SECUREFOUNDATION_SFDBCODEC_H

// The page codec of protected databases: an SQLite VFS that wraps the process's default VFS
// and encrypts and authenticates every page of the databases attached to it, in SQLCipher 4's
// page format (AES-256-CBC, HMAC-SHA512, 4096-byte pages with 80 reserved bytes, the salt in
// the first 16 bytes of the file). The primitives are swift-crypto's BoringSSL. The header
// names no SQLite or BoringSSL type (connections are passed as opaque pointers), so Swift
// modules that import it load neither.
//
// Files of databases that are not attached pass straight to the wrapped VFS (the same file
// object, no copy). Rollback journals of attached databases are refused (protected databases
// run in WAL mode); anonymous temporary files of every connection are placed on the memory
// file system (/dev/shm) where there is one.

#include <stddef.h>
#include <stdint.h>

/// Page geometry of the format.
#define SF_DB_PAGE_SIZE 4096
#define SF_DB_RESERVE 80
#define SF_DB_SALT_SIZE 16
#define SF_DB_KEY_SIZE 32

/// Result codes of this interface (SQLite's result codes are returned by the VFS itself).
#define SF_DB_OK 0
#define SF_DB_ERROR 1
#define SF_DB_BUSY 2        // the path is attached with another key
#define SF_DB_NOT_ATTACHED 3

/// Registers the codec VFS as the default VFS of the process, once (later calls do nothing).
/// Connections opened earlier keep the VFS they were opened with. Returns an SQLite result code.
int sf_db_codec_register(void);

/// The full path SQLite uses for `path` (the wrapped VFS's xFullPathname), into `out` (room for
/// `out_len` bytes, NUL-terminated). Returns SF_DB_OK or SF_DB_ERROR.
int sf_db_codec_full_path(const char *path, char *out, size_t out_len);

/// Attaches a 32-byte key and the database's 16-byte salt to the database at `full_path`
/// (as `sf_db_codec_full_path` gives it): every page SQLite writes to the main file or the WAL
/// of that database is encrypted from now on, every page it reads is authenticated and
/// decrypted. Attaching a path that is attached already with the same key and salt counts one
/// more user; with another key it returns SF_DB_BUSY.
int sf_db_codec_attach(const char *full_path, const uint8_t *key, size_t key_len, const uint8_t *salt, size_t salt_len);

/// One user less; the last one wipes the key. Files of the database still open fail every
/// read and write afterwards (SQLITE_IOERR_AUTH).
int sf_db_codec_detach(const char *full_path);

/// Wipes the key of the database at once, for every user: open connections fail every read,
/// write and lock from now on (SQLITE_IOERR_AUTH), and `sf_db_codec_install_guard`'s guard
/// stops their statements. The entry stays revoked until the last user detaches.
int sf_db_codec_revoke(const char *full_path);

/// Whether the database at `full_path` is attached and not revoked.
int sf_db_codec_is_live(const char *full_path);

/// Prepares the connection `db` (an `sqlite3 *`) of the database at `full_path`: checks that
/// it runs on the codec VFS with its main file attached, sets the 80 reserved bytes of a new
/// database, and with `guard` installs a progress handler that interrupts every statement once
/// the database is revoked, so no row is returned from the page cache after a revoke.
/// Returns SF_DB_OK, or SF_DB_NOT_ATTACHED when the connection does not go through the codec.
int sf_db_codec_prepare_connection(void *db, const char *full_path, int guard);

/// The number of pages that failed authentication since the process started (for tests and
/// diagnostics).
uint64_t sf_db_codec_tamper_count(void);

/// Whether a version 1 WAL (SQLite's checksums in clear, written before they were masked) of
/// the database at `full_path` was read since the last call: the caller then checkpoints it
/// away (TRUNCATE), so that no frame is appended to it in clear. Clears the flag.
int sf_db_codec_take_v1_wal(const char *full_path);

/// The number of pages a checkpoint copied from the WAL to the main file as ciphertext (no
/// second encryption) since the process started (for tests and diagnostics).
uint64_t sf_db_codec_copied_count(void);

/// Reads the first `len` bytes of the file at `path` (a regular file, no link) into `out`,
/// zeros past its end, and its size into `size`, through the wrapped VFS: a descriptor of
/// SQLite's, so that closing it keeps the locks other connections of this process hold on the
/// file. SF_DB_OK; SF_DB_BUSY when the file is shorter than `len` (`out` then holds what there
/// is); SF_DB_NOT_ATTACHED when there is no file; SF_DB_ERROR otherwise.
int sf_db_codec_read_start(const char *path, uint8_t *out, size_t len, int64_t *size);

/// Makes the file at `path` 0600 when it is a regular file of this user (not a link) that
/// group or others may read; anything else is left alone. Never drops a lock this process
/// holds on the file (Linux: an O_PATH descriptor, whose close releases no POSIX lock).
void sf_db_codec_make_private(const char *path);

/// Reads the salt of a database file written in this format (its first 16 bytes) and checks
/// that page 1 authenticates under `key`: 1 when it does, 0 when it does not, -1 when the file
/// is shorter than a page or cannot be read.
int sf_db_codec_check_first_page(const char *path, const uint8_t *key, size_t key_len, uint8_t *salt_out);

/// Checks that `page` (page 1 as read from the file, `len` = 4096 bytes, left unchanged)
/// authenticates under `key`: 1 when it does, 0 when it does not, -1 for bad arguments. For a
/// caller that read the page once for its salt and size (sf_db_codec_read_start).
int sf_db_codec_check_page_one(const uint8_t *page, size_t len, const uint8_t *key, size_t key_len);

#endif
