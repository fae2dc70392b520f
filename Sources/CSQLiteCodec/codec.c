#define _GNU_SOURCE
#include "sfdbcodec.h"
#include "walindex.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include <CCryptoBoringSSL_aes.h>
#include <CCryptoBoringSSL_digest.h>
#include <CCryptoBoringSSL_evp.h>
#include <CCryptoBoringSSL_hmac.h>
#include <CCryptoBoringSSL_mem.h>
#include <CCryptoBoringSSL_rand.h>

// ---------------------------------------------------------------------------------------------
// Format (SQLCipher 4, raw key): a page of 4096 bytes ends in 80 reserved bytes, IV (16) then
// HMAC-SHA512 (64). The bytes before the IV are AES-256-CBC encrypted (no padding) under the
// key with that IV; the HMAC, keyed with PBKDF2-HMAC-SHA512(key, salt XOR 0x3a, 2, 32), covers
// ciphertext ‖ IV ‖ page number (4 bytes, little-endian). Page 1 keeps the salt in its first
// 16 bytes (where the plaintext has "SQLite format 3\0"); its encryption starts at offset 16.
//
// The WAL (version 2 of this codec's WAL): SQLite computes the two checksum words of every
// header over the plaintext, before the VFS sees the bytes. They are stored masked: XOR with
// the first 8 bytes of HMAC-SHA256(wal key, ...), the wal key being HMAC-SHA256(key, "securefoundation
// database wal mask v2"). The file header's words are masked with the MAC of "H" ‖ its first
// 24 bytes (which also marks the WAL as version 2: a version 1 WAL has SQLite's checksum
// there in clear, and is read as such); a frame's words with the MAC of "F" ‖ the frame's
// offset (8 bytes, big-endian) ‖ its header's first 16 bytes ‖ the IV of its page. The IV is
// new at every write of the page, so no mask is used twice.
// ---------------------------------------------------------------------------------------------

#define PAGE SF_DB_PAGE_SIZE
#define RESERVE SF_DB_RESERVE
#define IV_SIZE 16
#define MAC_SIZE 64
#define WAL_HEADER 32
#define WAL_FRAME_HEADER 24
#define WAL_FRAME (WAL_FRAME_HEADER + PAGE)

static const uint8_t sqlite_magic[16] = "SQLite format 3";

typedef struct sf_entry {
    struct sf_entry *next;
    char *path;
    int users;
    atomic_int revoked;
    // One more at every revoke: a file opened before it stays refused even when the key comes
    // back for a new opening after the next unlock.
    atomic_uint revoke_epoch;
    int has_key;
    pthread_rwlock_t key_lock;
    uint8_t raw_key[SF_DB_KEY_SIZE];
    uint8_t salt[SF_DB_SALT_SIZE];
    AES_KEY enc;
    AES_KEY dec;
    HMAC_CTX mac;   // keyed template, copied for each page
    HMAC_CTX wal_mac;   // keyed with the wal key: masks of WAL checksums, the index's name
    uint64_t generation;   // one more at every key set, so a remembered page names its key
    atomic_int saw_v1_wal;   // a version 1 WAL was read (sf_db_codec_take_v1_wal)
} sf_entry;

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static sf_entry *registry = NULL;
static atomic_uint_fast64_t tamper_count = 0;
static atomic_uint_fast64_t copied_count = 0;
// How many revokes the process made (the statement guard does nothing while there was none).
static atomic_int revocations = 0;

enum file_kind { KIND_MAIN = 1, KIND_WAL = 2, KIND_TEMP = 3 };

typedef struct sf_file {
    sqlite3_file base;
    sf_entry *entry;         // NULL for temporary files
    unsigned epoch;          // the entry's revoke epoch when the file was opened
    int kind;
    char *temp_name;         // temporary files: the name given to the wrapped VFS
    // WAL: the frame header SQLite wrote last, held until its page comes (see wal_write).
    int has_pending;
    // WAL: the offset of the whole frame this connection read last and found authentic, with
    // its page number and commit size; 0 after any other use.
    sqlite3_int64 frame_read_offset;
    uint8_t frame_read_header[8];
    sqlite3_int64 pending_offset;
    uint8_t pending_header[WAL_FRAME_HEADER];
    // WAL: the version of the WAL whose header has these salts (WAL_V1, WAL_V2, 0: unknown).
    int wal_version;
    uint8_t wal_salts[8];
    // Main file: the WAL index on the memory file system.
    sf_walindex index;
    sqlite3_file *real;      // the wrapped VFS's file object, right after this struct
} sf_file;

static sqlite3_vfs *real_vfs = NULL;

/// The last page this thread read from a WAL and authenticated: its ciphertext, the buffer it
/// was decrypted into, and which key and page. A checkpoint reads a page from the WAL into a
/// buffer and writes that buffer to the same page of the main file; the ciphertext in the WAL
/// is already the page's ciphertext there (same key, same page number), so the write stores it
/// as it is, once the remembered ciphertext is checked to decrypt to the bytes being written
/// (no plaintext is kept here).
static _Thread_local struct {
    const void *buffer;
    const sf_entry *entry;
    uint64_t generation;
    uint32_t pgno;
    uint8_t ciphertext[PAGE];
} last_wal_read;
static pthread_once_t register_once = PTHREAD_ONCE_INIT;
static int register_result = SQLITE_ERROR;

// MARK: Registry

static sf_entry *find_entry_locked(const char *path) {
    for (sf_entry *e = registry; e != NULL; e = e->next) {
        if (strcmp(e->path, path) == 0) { return e; }
    }
    return NULL;
}

static sf_entry *find_entry(const char *path) {
    if (path == NULL) { return NULL; }
    pthread_mutex_lock(&registry_lock);
    sf_entry *e = find_entry_locked(path);
    pthread_mutex_unlock(&registry_lock);
    return e;
}

static void wipe_key_locked(sf_entry *e) {
    if (e->has_key) {
        CCryptoBoringSSL_HMAC_CTX_cleanup(&e->mac);
        CCryptoBoringSSL_HMAC_CTX_cleanup(&e->wal_mac);
    }
    CCryptoBoringSSL_OPENSSL_cleanse(e->raw_key, sizeof e->raw_key);
    CCryptoBoringSSL_OPENSSL_cleanse(&e->enc, sizeof e->enc);
    CCryptoBoringSSL_OPENSSL_cleanse(&e->dec, sizeof e->dec);
    e->has_key = 0;
}

static int derive_mac_key(const uint8_t *key, const uint8_t *salt, uint8_t *out) {
    uint8_t mac_salt[SF_DB_SALT_SIZE];
    for (int i = 0; i < SF_DB_SALT_SIZE; i++) { mac_salt[i] = salt[i] ^ 0x3a; }
    return CCryptoBoringSSL_PKCS5_PBKDF2_HMAC((const char *)key, SF_DB_KEY_SIZE, mac_salt, sizeof mac_salt, 2,
                                              CCryptoBoringSSL_EVP_sha512(), 32, out);
}

static const char wal_key_label[] = "securefoundation database wal mask v2";

static int set_key_locked(sf_entry *e, const uint8_t *key, const uint8_t *salt) {
    uint8_t mac_key[32];
    uint8_t wal_key[32];
    unsigned int wal_key_len = 0;
    if (derive_mac_key(key, salt, mac_key) != 1) { return 0; }
    CCryptoBoringSSL_HMAC_CTX_init(&e->mac);
    CCryptoBoringSSL_HMAC_CTX_init(&e->wal_mac);
    int ok = CCryptoBoringSSL_HMAC_Init_ex(&e->mac, mac_key, sizeof mac_key, CCryptoBoringSSL_EVP_sha512(), NULL) == 1
        && CCryptoBoringSSL_HMAC(CCryptoBoringSSL_EVP_sha256(), key, SF_DB_KEY_SIZE, (const uint8_t *)wal_key_label,
                                 sizeof wal_key_label - 1, wal_key, &wal_key_len) != NULL
        && wal_key_len == sizeof wal_key
        && CCryptoBoringSSL_HMAC_Init_ex(&e->wal_mac, wal_key, sizeof wal_key, CCryptoBoringSSL_EVP_sha256(), NULL) == 1
        && CCryptoBoringSSL_AES_set_encrypt_key(key, 256, &e->enc) == 0
        && CCryptoBoringSSL_AES_set_decrypt_key(key, 256, &e->dec) == 0;
    CCryptoBoringSSL_OPENSSL_cleanse(mac_key, sizeof mac_key);
    CCryptoBoringSSL_OPENSSL_cleanse(wal_key, sizeof wal_key);
    if (!ok) {
        CCryptoBoringSSL_HMAC_CTX_cleanup(&e->mac);
        CCryptoBoringSSL_HMAC_CTX_cleanup(&e->wal_mac);
        return 0;
    }
    memcpy(e->raw_key, key, SF_DB_KEY_SIZE);
    memcpy(e->salt, salt, SF_DB_SALT_SIZE);
    e->has_key = 1;
    e->generation += 1;
    return 1;
}

int sf_db_codec_attach(const char *full_path, const uint8_t *key, size_t key_len, const uint8_t *salt, size_t salt_len) {
    if (full_path == NULL || key == NULL || salt == NULL || key_len != SF_DB_KEY_SIZE || salt_len != SF_DB_SALT_SIZE) {
        return SF_DB_ERROR;
    }
    pthread_mutex_lock(&registry_lock);
    sf_entry *e = find_entry_locked(full_path);
    if (e == NULL) {
        e = calloc(1, sizeof(sf_entry));
        if (e == NULL) { pthread_mutex_unlock(&registry_lock); return SF_DB_ERROR; }
        e->path = strdup(full_path);
        if (e->path == NULL) { free(e); pthread_mutex_unlock(&registry_lock); return SF_DB_ERROR; }
        pthread_rwlock_init(&e->key_lock, NULL);
        e->next = registry;
        registry = e;
    }
    int result = SF_DB_OK;
    pthread_rwlock_wrlock(&e->key_lock);
    if (e->users > 0 && !atomic_load(&e->revoked)) {
        int same = e->has_key && CCryptoBoringSSL_CRYPTO_memcmp(e->raw_key, key, SF_DB_KEY_SIZE) == 0
            && memcmp(e->salt, salt, SF_DB_SALT_SIZE) == 0;
        if (same) { e->users += 1; } else { result = SF_DB_BUSY; }
    } else {
        // A new entry, or one revoked by a lock whose users are still around: the key comes
        // back (as a class key does at the next unlock).
        wipe_key_locked(e);
        if (set_key_locked(e, key, salt)) {
            e->users += 1;
            atomic_store(&e->revoked, 0);
        } else {
            result = SF_DB_ERROR;
        }
    }
    pthread_rwlock_unlock(&e->key_lock);
    pthread_mutex_unlock(&registry_lock);
    return result;
}

int sf_db_codec_detach(const char *full_path) {
    pthread_mutex_lock(&registry_lock);
    sf_entry *e = find_entry_locked(full_path);
    if (e == NULL || e->users == 0) { pthread_mutex_unlock(&registry_lock); return SF_DB_NOT_ATTACHED; }
    pthread_rwlock_wrlock(&e->key_lock);
    e->users -= 1;
    if (e->users == 0) {
        atomic_store(&e->revoked, 1);
        wipe_key_locked(e);
    }
    pthread_rwlock_unlock(&e->key_lock);
    pthread_mutex_unlock(&registry_lock);
    return SF_DB_OK;
}

int sf_db_codec_revoke(const char *full_path) {
    pthread_mutex_lock(&registry_lock);
    sf_entry *e = find_entry_locked(full_path);
    if (e == NULL) { pthread_mutex_unlock(&registry_lock); return SF_DB_NOT_ATTACHED; }
    pthread_rwlock_wrlock(&e->key_lock);
    atomic_store(&e->revoked, 1);
    atomic_fetch_add(&e->revoke_epoch, 1);
    atomic_fetch_add(&revocations, 1);
    wipe_key_locked(e);
    pthread_rwlock_unlock(&e->key_lock);
    pthread_mutex_unlock(&registry_lock);
    return SF_DB_OK;
}

int sf_db_codec_is_live(const char *full_path) {
    pthread_mutex_lock(&registry_lock);
    sf_entry *e = find_entry_locked(full_path);
    int live = e != NULL && e->users > 0 && !atomic_load(&e->revoked);
    pthread_mutex_unlock(&registry_lock);
    return live;
}

uint64_t sf_db_codec_tamper_count(void) { return atomic_load(&tamper_count); }

int sf_db_codec_take_v1_wal(const char *full_path) {
    sf_entry *e = find_entry(full_path);
    return e != NULL && atomic_exchange(&e->saw_v1_wal, 0) ? 1 : 0;
}

uint64_t sf_db_codec_copied_count(void) { return atomic_load(&copied_count); }

static int is_transaction_end(const char *sql) {
    if (sql == NULL) { return 0; }
    while (*sql == ' ' || *sql == '\n' || *sql == '\t') { sql++; }
    return sqlite3_strnicmp(sql, "COMMIT", 6) == 0 || sqlite3_strnicmp(sql, "ROLLBACK", 8) == 0
        || sqlite3_strnicmp(sql, "END", 3) == 0 || sqlite3_strnicmp(sql, "RELEASE", 7) == 0;
}

static const sqlite3_io_methods codec_methods;

/// The progress handler of guarded connections (context: the connection). Once the
/// connection's database is revoked it interrupts every statement but those that end a
/// transaction (they only release locks, and the connection must be able to leave its
/// transaction).
static int guard_callback(void *context) {
    if (atomic_load_explicit(&revocations, memory_order_relaxed) == 0) { return 0; }
    sqlite3 *db = context;
    sqlite3_file *file = NULL;
    if (sqlite3_file_control(db, "main", SQLITE_FCNTL_FILE_POINTER, &file) != SQLITE_OK || file == NULL
        || file->pMethods != &codec_methods) {
        return 1;
    }
    sf_file *f = (sf_file *)file;
    sf_entry *e = f->entry;
    if (e == NULL || (!atomic_load_explicit(&e->revoked, memory_order_relaxed)
                      && atomic_load_explicit(&e->revoke_epoch, memory_order_relaxed) == f->epoch)) {
        return 0;
    }
    for (sqlite3_stmt *stmt = sqlite3_next_stmt(db, NULL); stmt != NULL; stmt = sqlite3_next_stmt(db, stmt)) {
        if (sqlite3_stmt_busy(stmt) && !is_transaction_end(sqlite3_sql(stmt))) { return 1; }
    }
    return 0;
}

static sqlite3_vfs codec_vfs;

int sf_db_codec_prepare_connection(void *connection, const char *full_path, int guard) {
    sqlite3 *db = connection;
    sf_entry *e = find_entry(full_path);
    if (e == NULL || db == NULL) { return SF_DB_NOT_ATTACHED; }
    // The connection must run on the codec, its main file attached: nothing else may write it.
    sqlite3_vfs *vfs = NULL;
    sqlite3_file *file = NULL;
    if (sqlite3_file_control(db, "main", SQLITE_FCNTL_VFS_POINTER, &vfs) != SQLITE_OK || vfs != &codec_vfs
        || sqlite3_file_control(db, "main", SQLITE_FCNTL_FILE_POINTER, &file) != SQLITE_OK || file == NULL
        || file->pMethods != &codec_methods || ((sf_file *)file)->entry != e) {
        return SF_DB_NOT_ATTACHED;
    }
    // SQLCipher's reserve: IV and HMAC at the end of every page (for a new database; an
    // existing one keeps the reserve its header names).
    int reserve = RESERVE;
    sqlite3_file_control(db, "main", SQLITE_FCNTL_RESERVE_BYTES, &reserve);
    if (guard) {
        sqlite3_progress_handler(db, 1, guard_callback, db);
    }
    return SF_DB_OK;
}

// MARK: Pages

static void page_mac(const sf_entry *e, uint32_t pgno, const uint8_t *data, size_t len, uint8_t *out) {
    HMAC_CTX ctx;
    CCryptoBoringSSL_HMAC_CTX_init(&ctx);
    uint8_t pgno_le[4] = { (uint8_t)pgno, (uint8_t)(pgno >> 8), (uint8_t)(pgno >> 16), (uint8_t)(pgno >> 24) };
    unsigned int out_len = 0;
    if (CCryptoBoringSSL_HMAC_CTX_copy_ex(&ctx, &e->mac) != 1
        || CCryptoBoringSSL_HMAC_Update(&ctx, data, len) != 1
        || CCryptoBoringSSL_HMAC_Update(&ctx, pgno_le, sizeof pgno_le) != 1
        || CCryptoBoringSSL_HMAC_Final(&ctx, out, &out_len) != 1 || out_len != MAC_SIZE) {
        // A MAC that cannot be computed must never match: fill with fresh random bytes.
        CCryptoBoringSSL_RAND_bytes(out, MAC_SIZE);
    }
    CCryptoBoringSSL_HMAC_CTX_cleanup(&ctx);
}

/// Encrypts the plaintext page `in` (number `pgno`) into `out`.
static int encrypt_page(const sf_entry *e, uint32_t pgno, const uint8_t *in, uint8_t *out) {
    size_t offset = pgno == 1 ? SF_DB_SALT_SIZE : 0;
    size_t size = PAGE - RESERVE - offset;
    uint8_t *iv_out = out + PAGE - RESERVE;
    if (CCryptoBoringSSL_RAND_bytes(iv_out, IV_SIZE) != 1) { return 0; }
    uint8_t iv[IV_SIZE];
    memcpy(iv, iv_out, IV_SIZE);
    CCryptoBoringSSL_AES_cbc_encrypt(in + offset, out + offset, size, &e->enc, iv, AES_ENCRYPT);
    page_mac(e, pgno, out + offset, size + IV_SIZE, out + PAGE - MAC_SIZE);
    if (pgno == 1) { memcpy(out, e->salt, SF_DB_SALT_SIZE); }
    return 1;
}

static int is_zero(const uint8_t *bytes, size_t count) {
    uint8_t any = 0;
    for (size_t i = 0; i < count; i++) { any |= bytes[i]; }
    return any == 0;
}

/// Authenticates and decrypts page `pgno` in place. Returns 1, or 0 when it does not
/// authenticate (then the buffer holds no plaintext).
static int decrypt_page(const sf_entry *e, uint32_t pgno, uint8_t *page) {
    size_t offset = pgno == 1 ? SF_DB_SALT_SIZE : 0;
    size_t size = PAGE - RESERVE - offset;
    uint8_t mac[MAC_SIZE];
    page_mac(e, pgno, page + offset, size + IV_SIZE, mac);
    if (CCryptoBoringSSL_CRYPTO_memcmp(mac, page + PAGE - MAC_SIZE, MAC_SIZE) != 0
        || (pgno == 1 && memcmp(page, e->salt, SF_DB_SALT_SIZE) != 0)) {
        atomic_fetch_add(&tamper_count, 1);
        return 0;
    }
    uint8_t iv[IV_SIZE];
    memcpy(iv, page + PAGE - RESERVE, IV_SIZE);
    CCryptoBoringSSL_AES_cbc_encrypt(page + offset, page + offset, size, &e->dec, iv, AES_DECRYPT);
    // The reserved bytes read as zero, as SQLite wrote them (WAL checksums cover them).
    memset(page + PAGE - RESERVE, 0, RESERVE);
    if (pgno == 1) { memcpy(page, sqlite_magic, SF_DB_SALT_SIZE); }
    return 1;
}


int sf_db_codec_read_start(const char *path, uint8_t *out, size_t len, int64_t *size) {
    if (sf_db_codec_register() != SQLITE_OK || path == NULL || out == NULL || len > INT32_MAX) { return SF_DB_ERROR; }
    // A file of a database that may be open in this process: a descriptor of our own, closed
    // after, would drop every POSIX lock SQLite holds on it (another process could then take
    // the exclusive lock and delete the WAL). The wrapped VFS keeps such a descriptor open
    // until its locks go.
    struct stat st;
    if (lstat(path, &st) != 0) { return SF_DB_NOT_ATTACHED; }
    if (!S_ISREG(st.st_mode)) { return SF_DB_ERROR; }
    char *full = sqlite3_malloc(real_vfs->mxPathname + 1);
    sqlite3_file *file = sqlite3_malloc(real_vfs->szOsFile);
    if (full == NULL || file == NULL) { sqlite3_free(full); sqlite3_free(file); return SF_DB_ERROR; }
    memset(file, 0, (size_t)real_vfs->szOsFile);
    int result = SF_DB_ERROR;
    int rc = real_vfs->xFullPathname(real_vfs, path, real_vfs->mxPathname + 1, full);
    if ((rc == SQLITE_OK || rc == (SQLITE_OK | (2 << 8)))
        && real_vfs->xOpen(real_vfs, full, file, SQLITE_OPEN_READONLY | SQLITE_OPEN_MAIN_DB | SQLITE_OPEN_NOFOLLOW, NULL) == SQLITE_OK) {
        sqlite3_int64 file_size = 0;
        if (file->pMethods->xFileSize(file, &file_size) == SQLITE_OK) {
            *size = file_size;
            memset(out, 0, len);
            rc = len == 0 ? SQLITE_OK : file->pMethods->xRead(file, out, (int)len, 0);
            result = rc == SQLITE_OK ? SF_DB_OK : (rc == SQLITE_IOERR_SHORT_READ ? SF_DB_BUSY : SF_DB_ERROR);
        }
        file->pMethods->xClose(file);
    }
    sqlite3_free(full);
    sqlite3_free(file);
    return result;
}

void sf_db_codec_make_private(const char *path) {
    if (path == NULL) { return; }
#ifdef O_PATH
    int fd = open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
#else
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
#endif
    if (fd < 0) { return; }
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_uid == geteuid() && (st.st_mode & 077) != 0) {
#ifdef O_PATH
        char name[64];
        snprintf(name, sizeof name, "/proc/self/fd/%d", fd);
        (void)chmod(name, 0600);
#else
        (void)fchmod(fd, 0600);
#endif
    }
    close(fd);
}

int sf_db_codec_check_page_one(const uint8_t *page_in, size_t len, const uint8_t *key, size_t key_len) {
    if (page_in == NULL || len != PAGE || key == NULL || key_len != SF_DB_KEY_SIZE) { return -1; }
    uint8_t *page = malloc(PAGE);
    if (page == NULL) { return -1; }
    memcpy(page, page_in, PAGE);
    sf_entry e;
    memset(&e, 0, sizeof e);
    int result = 0;
    if (set_key_locked(&e, key, page)) {
        result = decrypt_page(&e, 1, page) ? 1 : 0;
        if (result == 0) { atomic_fetch_sub(&tamper_count, 1); }
        wipe_key_locked(&e);
    }
    CCryptoBoringSSL_OPENSSL_cleanse(page, PAGE);
    free(page);
    return result;
}

int sf_db_codec_check_first_page(const char *path, const uint8_t *key, size_t key_len, uint8_t *salt_out) {
    if (path == NULL || key == NULL || key_len != SF_DB_KEY_SIZE) { return -1; }
    uint8_t *page = malloc(PAGE);
    if (page == NULL) { return -1; }
    int64_t size = 0;
    if (sf_db_codec_read_start(path, page, PAGE, &size) != SF_DB_OK) { free(page); return -1; }
    if (salt_out != NULL) { memcpy(salt_out, page, SF_DB_SALT_SIZE); }
    int result = sf_db_codec_check_page_one(page, PAGE, key, key_len);
    free(page);
    return result;
}

// MARK: I/O methods of attached files

static int begin_key_use(sf_file *f) {
    pthread_rwlock_rdlock(&f->entry->key_lock);
    if (atomic_load(&f->entry->revoked) || !f->entry->has_key || atomic_load(&f->entry->revoke_epoch) != f->epoch) {
        pthread_rwlock_unlock(&f->entry->key_lock);
        return 0;
    }
    return 1;
}

static void end_key_use(sf_file *f) { pthread_rwlock_unlock(&f->entry->key_lock); }

static int settle(sf_file *f);

static int x_close(sqlite3_file *file) {
    sf_file *f = (sf_file *)file;
    int rc = settle(f);
    // The held header carries SQLite's clear checksum words.
    CCryptoBoringSSL_OPENSSL_cleanse(f->pending_header, sizeof f->pending_header);
    if (f->entry != NULL && f->kind == KIND_MAIN) { sf_walindex_close(&f->index, 0); }
    if (f->real->pMethods != NULL) {
        int close_rc = f->real->pMethods->xClose(f->real);
        if (rc == SQLITE_OK) { rc = close_rc; }
    }
    if (f->temp_name != NULL) { sqlite3_free(f->temp_name); f->temp_name = NULL; }
    return rc;
}

/// Reads one page of the main file (page aligned) into `page`; decrypts it. Returns an SQLite
/// result code; SQLITE_IOERR_SHORT_READ with zeros past the end of the file.
static int read_main_page(sf_file *f, uint32_t pgno, uint8_t *page) {
    int rc = f->real->pMethods->xRead(f->real, page, PAGE, (sqlite3_int64)(pgno - 1) * PAGE);
    if (rc == SQLITE_IOERR_SHORT_READ) {
        // SQLite reads past the end of the file only for the header of an empty database; a
        // later page missing means the file was cut (SQLite would take it as zeros).
        if (pgno == 1 && is_zero(page, PAGE)) { return SQLITE_IOERR_SHORT_READ; }
        atomic_fetch_add(&tamper_count, 1);
        memset(page, 0, PAGE);
        return SQLITE_IOERR_DATA;   // a page cut short
    }
    if (rc != SQLITE_OK) { return rc; }
    if (!decrypt_page(f->entry, pgno, page)) {
        memset(page, 0, PAGE);
        return SQLITE_IOERR_DATA;
    }
    return SQLITE_OK;
}

static int main_read(sf_file *f, uint8_t *out, int amount, sqlite3_int64 offset) {
    if (amount == PAGE && offset % PAGE == 0) {
        return read_main_page(f, (uint32_t)(offset / PAGE) + 1, out);
    }
    // Part of a page (the 100-byte header at open) or a range across pages.
    uint8_t *page = sqlite3_malloc(PAGE);
    if (page == NULL) { return SQLITE_IOERR_NOMEM; }
    int result = SQLITE_OK;
    sqlite3_int64 position = offset;
    sqlite3_int64 end = offset + amount;
    while (position < end) {
        uint32_t pgno = (uint32_t)(position / PAGE) + 1;
        sqlite3_int64 page_start = (sqlite3_int64)(pgno - 1) * PAGE;
        sqlite3_int64 take_end = page_start + PAGE < end ? page_start + PAGE : end;
        int rc = read_main_page(f, pgno, page);
        if (rc != SQLITE_OK && rc != SQLITE_IOERR_SHORT_READ) { result = rc; break; }
        if (rc == SQLITE_IOERR_SHORT_READ) { result = rc; }
        memcpy(out + (position - offset), page + (position - page_start), (size_t)(take_end - position));
        position = take_end;
    }
    if (result != SQLITE_OK && result != SQLITE_IOERR_SHORT_READ) { memset(out, 0, (size_t)amount); }
    CCryptoBoringSSL_OPENSSL_cleanse(page, PAGE);
    sqlite3_free(page);
    return result;
}

/// Whether `in` (page `pgno`) is the page this thread just read from the WAL, unchanged: the
/// remembered ciphertext decrypts to exactly its bytes. `scratch` is a page of work space.
static int is_last_wal_read(const sf_file *f, uint32_t pgno, const uint8_t *in, uint8_t *scratch) {
    if (last_wal_read.buffer != in || last_wal_read.entry != f->entry || last_wal_read.generation != f->entry->generation
        || last_wal_read.pgno != pgno) {
        return 0;
    }
    size_t offset = pgno == 1 ? SF_DB_SALT_SIZE : 0;
    size_t size = PAGE - RESERVE - offset;
    uint8_t iv[IV_SIZE];
    memcpy(iv, last_wal_read.ciphertext + PAGE - RESERVE, IV_SIZE);
    CCryptoBoringSSL_AES_cbc_encrypt(last_wal_read.ciphertext + offset, scratch + offset, size, &f->entry->dec, iv, AES_DECRYPT);
    int same = memcmp(scratch + offset, in + offset, size) == 0 && is_zero(in + PAGE - RESERVE, RESERVE)
        && (pgno != 1 || memcmp(in, sqlite_magic, SF_DB_SALT_SIZE) == 0);
    CCryptoBoringSSL_OPENSSL_cleanse(scratch, PAGE);
    return same;
}

static int main_write(sf_file *f, const uint8_t *in, int amount, sqlite3_int64 offset) {
    if (amount != PAGE || offset % PAGE != 0) { return SQLITE_IOERR_WRITE; }
    uint8_t *page = sqlite3_malloc(PAGE);
    if (page == NULL) { return SQLITE_IOERR_NOMEM; }
    uint32_t pgno = (uint32_t)(offset / PAGE) + 1;
    if (is_last_wal_read(f, pgno, in, page)) {
        // A checkpoint copying a page from the WAL: its ciphertext, as it was authenticated.
        last_wal_read.buffer = NULL;
        atomic_fetch_add(&copied_count, 1);
        int rc = f->real->pMethods->xWrite(f->real, last_wal_read.ciphertext, PAGE, offset);
        sqlite3_free(page);
        return rc;
    }
    int rc = encrypt_page(f->entry, (uint32_t)(offset / PAGE) + 1, in, page)
        ? f->real->pMethods->xWrite(f->real, page, PAGE, offset) : SQLITE_IOERR_WRITE;
    sqlite3_free(page);
    return rc;
}

// MARK: WAL

enum { WAL_INVALID = 0, WAL_V1 = 1, WAL_V2 = 2 };

static uint32_t get_be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static uint32_t get_le32(const uint8_t *p) {
    return ((uint32_t)p[3] << 24) | ((uint32_t)p[2] << 16) | ((uint32_t)p[1] << 8) | p[0];
}

static void put_be32(uint8_t *p, uint32_t value) {
    p[0] = (uint8_t)(value >> 24); p[1] = (uint8_t)(value >> 16); p[2] = (uint8_t)(value >> 8); p[3] = (uint8_t)value;
}

/// SQLite's WAL checksum of `count` bytes (a multiple of 8) from the words `s` (updated).
static void wal_checksum(const uint8_t *data, size_t count, int big_endian, uint32_t *s) {
    uint32_t s1 = s[0], s2 = s[1];
    for (size_t i = 0; i + 8 <= count; i += 8) {
        uint32_t x0 = big_endian ? get_be32(data + i) : get_le32(data + i);
        uint32_t x1 = big_endian ? get_be32(data + i + 4) : get_le32(data + i + 4);
        s1 += x0 + s2;
        s2 += x1 + s1;
    }
    s[0] = s1;
    s[1] = s2;
}

/// The first 8 bytes of HMAC-SHA256(wal key, input). 0 when the MAC cannot be computed (no
/// memory): the caller fails with SQLITE_IOERR_NOMEM rather than guess (random words would
/// make SQLite take the WAL as empty and restart it over committed frames).
static int wal_mask(const sf_entry *e, const uint8_t *input, size_t len, uint8_t out[8]) {
    HMAC_CTX ctx;
    CCryptoBoringSSL_HMAC_CTX_init(&ctx);
    uint8_t mac[32];
    unsigned int mac_len = 0;
    int ok = CCryptoBoringSSL_HMAC_CTX_copy_ex(&ctx, &e->wal_mac) == 1 && CCryptoBoringSSL_HMAC_Update(&ctx, input, len) == 1
        && CCryptoBoringSSL_HMAC_Final(&ctx, mac, &mac_len) == 1 && mac_len == sizeof mac;
    if (ok) { memcpy(out, mac, 8); }
    CCryptoBoringSSL_HMAC_CTX_cleanup(&ctx);
    CCryptoBoringSSL_OPENSSL_cleanse(mac, sizeof mac);
    return ok;
}

static int header_mask(const sf_entry *e, const uint8_t *header, uint8_t out[8]) {
    uint8_t input[1 + 24];
    input[0] = 'H';
    memcpy(input + 1, header, 24);
    return wal_mask(e, input, sizeof input, out);
}

static int frame_mask(const sf_entry *e, sqlite3_int64 offset, const uint8_t *frame_header, const uint8_t *iv, uint8_t out[8]) {
    uint8_t input[1 + 8 + 16 + IV_SIZE];
    input[0] = 'F';
    for (int i = 0; i < 8; i++) { input[1 + i] = (uint8_t)((uint64_t)offset >> (56 - 8 * i)); }
    memcpy(input + 9, frame_header, 16);
    memcpy(input + 25, iv, IV_SIZE);
    return wal_mask(e, input, sizeof input, out);
}

/// XORs `mask` onto the bytes of `out` (file bytes [offset, end)) that fall in [at, at + 8).
static void apply_mask(uint8_t *out, sqlite3_int64 offset, sqlite3_int64 end, sqlite3_int64 at, const uint8_t *mask) {
    for (int i = 0; i < 8; i++) {
        if (at + i >= offset && at + i < end) { out[at + i - offset] ^= mask[i]; }
    }
}

/// The version of a WAL from its 32-byte header: V1 when its checksum is SQLite's in clear,
/// V2 when masked, INVALID when neither (SQLite then takes the WAL as empty); -1 when the mask
/// cannot be computed.
static int header_version(sf_entry *e, const uint8_t *header) {
    uint32_t magic = get_be32(header);
    if ((magic & 0xFFFFFFFEu) != 0x377f0682u) { return WAL_INVALID; }
    uint32_t s[2] = { 0, 0 };
    wal_checksum(header, 24, (int)(magic & 1), s);
    uint8_t expected[8];
    put_be32(expected, s[0]);
    put_be32(expected + 4, s[1]);
    if (memcmp(header + 24, expected, 8) == 0) {
        atomic_store(&e->saw_v1_wal, 1);
        return WAL_V1;
    }
    uint8_t mask[8];
    if (!header_mask(e, header, mask)) { return -1; }
    for (int i = 0; i < 8; i++) { expected[i] ^= mask[i]; }
    return memcmp(header + 24, expected, 8) == 0 ? WAL_V2 : WAL_INVALID;
}

/// Reads exactly `amount` bytes of the file as they are on disk; 0 when it cannot.
static int raw_read(sf_file *f, void *out, int amount, sqlite3_int64 offset) {
    return f->real->pMethods->xRead(f->real, out, amount, offset) == SQLITE_OK;
}

/// The version of the WAL whose header carries `salts` (8 bytes); the file's header is read
/// when this connection has not seen those salts. INVALID for a frame of an earlier WAL.
static int wal_version_for(sf_file *f, const uint8_t *salts) {
    if (f->wal_version != WAL_INVALID && memcmp(f->wal_salts, salts, 8) == 0) { return f->wal_version; }
    uint8_t header[WAL_HEADER];
    if (!raw_read(f, header, WAL_HEADER, 0)) { return WAL_INVALID; }
    int version = header_version(f->entry, header);
    if (version < 0) { return -1; }
    if (version != WAL_INVALID) {
        f->wal_version = version;
        memcpy(f->wal_salts, header + 16, 8);
    }
    return memcmp(header + 16, salts, 8) == 0 ? version : WAL_INVALID;
}

/// Puts SQLite's checksum words back into `out` (the bytes of [offset, offset + amount) as
/// read from disk): those of the file header and of every frame header in range.
static int unmask_checksums(sf_file *f, uint8_t *out, int amount, sqlite3_int64 offset) {
    sqlite3_int64 end = offset + amount;
    if (offset < WAL_HEADER && end > 24) {
        uint8_t header[WAL_HEADER];
        const uint8_t *h = offset == 0 && end >= WAL_HEADER ? out : (raw_read(f, header, WAL_HEADER, 0) ? header : NULL);
        int version = h != NULL ? header_version(f->entry, h) : WAL_INVALID;
        if (version < 0) { return SQLITE_IOERR_NOMEM; }
        if (version != WAL_INVALID) {
            f->wal_version = version;
            memcpy(f->wal_salts, h + 16, 8);
        }
        if (version == WAL_V2) {
            uint8_t mask[8];
            if (!header_mask(f->entry, h, mask)) { return SQLITE_IOERR_NOMEM; }
            apply_mask(out, offset, end, 24, mask);
        }
    }
    if (end <= WAL_HEADER) { return SQLITE_OK; }
    sqlite3_int64 start = offset < WAL_HEADER ? WAL_HEADER : offset;
    for (sqlite3_int64 frame = (start - WAL_HEADER) / WAL_FRAME; frame <= (end - 1 - WAL_HEADER) / WAL_FRAME; frame++) {
        sqlite3_int64 header_at = WAL_HEADER + frame * WAL_FRAME;
        sqlite3_int64 words_at = header_at + 16;
        if (words_at + 8 <= offset || words_at >= end) { continue; }
        uint8_t header[WAL_FRAME_HEADER], iv[IV_SIZE];
        const uint8_t *h = header, *v = iv;
        sqlite3_int64 iv_at = header_at + WAL_FRAME_HEADER + PAGE - RESERVE;
        if (header_at >= offset && header_at + WAL_FRAME_HEADER <= end) {
            h = out + (header_at - offset);
        } else if (!raw_read(f, header, WAL_FRAME_HEADER, header_at)) {
            continue;
        }
        if (iv_at >= offset && iv_at + IV_SIZE <= end) {
            v = out + (iv_at - offset);
        } else if (!raw_read(f, iv, IV_SIZE, iv_at)) {
            continue;   // a header without its page: nothing it could check
        }
        int version = wal_version_for(f, h + 8);
        if (version < 0) { return SQLITE_IOERR_NOMEM; }
        if (version != WAL_V2) { continue; }
        uint8_t mask[8];
        if (!frame_mask(f->entry, header_at, h, v, mask)) { return SQLITE_IOERR_NOMEM; }
        apply_mask(out, offset, end, words_at, mask);
    }
    return SQLITE_OK;
}

/// The frame at `header_offset` in one write: `frame` holds SQLite's header (checksum words in
/// clear) and the encrypted page; the words are masked under the page's IV first.
static int write_frame(sf_file *f, sqlite3_int64 header_offset, uint8_t *frame) {
    uint8_t mask[8];
    if (!frame_mask(f->entry, header_offset, frame, frame + WAL_FRAME_HEADER + PAGE - RESERVE, mask)) { return SQLITE_IOERR_NOMEM; }
    for (int i = 0; i < 8; i++) { frame[16 + i] ^= mask[i]; }
    return f->real->pMethods->xWrite(f->real, frame, WAL_FRAME, header_offset);
}

/// Writes a frame header whose page is on disk already: SQLite writing new checksums for a
/// frame (after a page of the transaction was written again, the words of every later frame
/// change; it reads each whole frame, then writes its header). The page is stored again under
/// a new IV, so the new words get a mask never used before.
/// When the page on disk does not go with the header (it does not authenticate under the
/// header's page number): with `final`, the header alone with words that check nothing (a
/// frame whose page never came); otherwise the header is held as a new frame's (its page is
/// the next write).
static int rewrite_header(sf_file *f, sqlite3_int64 at, const uint8_t *header, int final) {
    uint8_t *frame = sqlite3_malloc(WAL_FRAME);
    uint8_t *plain = sqlite3_malloc(PAGE);
    if (frame == NULL || plain == NULL) { sqlite3_free(frame); sqlite3_free(plain); return SQLITE_IOERR_NOMEM; }
    memcpy(frame, header, WAL_FRAME_HEADER);
    uint32_t pgno = get_be32(frame);
    int rc = f->real->pMethods->xRead(f->real, plain, PAGE, at + WAL_FRAME_HEADER);
    int authentic = rc == SQLITE_OK && pgno != 0 && decrypt_page(f->entry, pgno, plain);
    if (rc == SQLITE_OK && pgno != 0 && !authentic) {
        atomic_fetch_sub(&tamper_count, 1);   // a page of an earlier frame, not an attack
    }
    if (authentic) {
        rc = encrypt_page(f->entry, pgno, plain, frame + WAL_FRAME_HEADER) ? write_frame(f, at, frame) : SQLITE_IOERR_WRITE;
    } else if (rc == SQLITE_OK || rc == SQLITE_IOERR_SHORT_READ) {
        if (final) {
            CCryptoBoringSSL_RAND_bytes(frame + 16, 8);
            rc = f->real->pMethods->xWrite(f->real, frame, WAL_FRAME_HEADER, at);
        } else {
            memcpy(f->pending_header, header, WAL_FRAME_HEADER);
            f->pending_offset = at;
            f->has_pending = 1;
            rc = SQLITE_OK;
        }
    }
    CCryptoBoringSSL_OPENSSL_cleanse(plain, PAGE);
    sqlite3_free(plain);
    sqlite3_free(frame);
    return rc;
}

/// Writes the frame header held back by wal_write when its page did not come next (SQLite
/// stopped between the two writes): as a header of a page on disk, or words that check
/// nothing.
static int flush_pending(sf_file *f) {
    if (!f->has_pending) { return SQLITE_OK; }
    f->has_pending = 0;
    return rewrite_header(f, f->pending_offset, f->pending_header, 1);
}

static int wal_read(sf_file *f, uint8_t *out, int amount, sqlite3_int64 offset) {
    f->frame_read_offset = 0;
    int rc = f->real->pMethods->xRead(f->real, out, amount, offset);
    if (rc != SQLITE_OK && rc != SQLITE_IOERR_SHORT_READ) { return rc; }
    int short_read = rc == SQLITE_IOERR_SHORT_READ;
    int unmasked = unmask_checksums(f, out, amount, offset);
    if (unmasked != SQLITE_OK) { memset(out, 0, (size_t)amount); return unmasked; }
    int single_frame = !short_read && amount == WAL_FRAME && offset >= WAL_HEADER && (offset - WAL_HEADER) % WAL_FRAME == 0;
    int single_frame_authentic = 0;
    uint8_t single_frame_header[8];
    if (single_frame) { memcpy(single_frame_header, out, 8); }
    sqlite3_int64 end = offset + amount;
    if (end <= WAL_HEADER) { return rc; }
    sqlite3_int64 first = offset < WAL_HEADER ? 0 : (offset - WAL_HEADER) / WAL_FRAME;
    sqlite3_int64 last = (end - 1 - WAL_HEADER) / WAL_FRAME;
    uint8_t *page = NULL;
    for (sqlite3_int64 frame = first; frame <= last; frame++) {
        sqlite3_int64 header_at = WAL_HEADER + frame * WAL_FRAME;
        sqlite3_int64 data_at = header_at + WAL_FRAME_HEADER;
        sqlite3_int64 data_end = data_at + PAGE;
        if (data_end <= offset || data_at >= end) { continue; }   // only the frame header is in range
        int whole_frame = header_at >= offset && data_end <= end;
        uint32_t pgno;
        if (header_at >= offset && header_at + 4 <= end) {
            const uint8_t *h = out + (header_at - offset);
            pgno = get_be32(h);
        } else {
            uint8_t h[4];
            int hrc = f->real->pMethods->xRead(f->real, h, 4, header_at);
            if (hrc != SQLITE_OK) { rc = hrc == SQLITE_IOERR_SHORT_READ ? SQLITE_IOERR_DATA : hrc; break; }
            pgno = get_be32(h);
        }
        uint8_t *data;
        int in_place = data_at >= offset && data_end <= end;
        if (in_place) {
            data = out + (data_at - offset);
        } else {
            if (page == NULL && (page = sqlite3_malloc(PAGE)) == NULL) { rc = SQLITE_IOERR_NOMEM; break; }
            int prc = f->real->pMethods->xRead(f->real, page, PAGE, data_at);
            if (prc == SQLITE_IOERR_SHORT_READ) { memset(page, 0, PAGE); short_read = 1; }
            else if (prc != SQLITE_OK) { rc = prc; break; }
            data = page;
        }
        int remember = in_place && !whole_frame;
        if (remember) { memcpy(last_wal_read.ciphertext, data, PAGE); }
        last_wal_read.buffer = NULL;
        if (short_read && is_zero(data, PAGE)) {
            // Past the end of the WAL: zeros, as SQLite expects.
        } else if (decrypt_page(f->entry, pgno, data)) {
            single_frame_authentic = single_frame;
            if (remember) {
                last_wal_read.buffer = data;
                last_wal_read.entry = f->entry;
                last_wal_read.generation = f->entry->generation;
                last_wal_read.pgno = pgno;
            }
        } else {
            if (whole_frame) {
                // Reading whole frames is how SQLite recovers the WAL: a frame that does not
                // authenticate (torn by a crash, or forged) must end the recovery as a frame
                // with a wrong checksum does. Unpredictable bytes make sure it cannot pass
                // SQLite's (unkeyed) frame checksum.
                CCryptoBoringSSL_RAND_bytes(data, PAGE);
            } else {
                rc = SQLITE_IOERR_DATA;
                break;
            }
        }
        if (!in_place) {
            sqlite3_int64 from = data_at > offset ? data_at : offset;
            sqlite3_int64 to = data_end < end ? data_end : end;
            memcpy(out + (from - offset), page + (from - data_at), (size_t)(to - from));
        }
    }
    if (page != NULL) { CCryptoBoringSSL_OPENSSL_cleanse(page, PAGE); sqlite3_free(page); }
    if (rc != SQLITE_OK && rc != SQLITE_IOERR_SHORT_READ) { memset(out, 0, (size_t)amount); return rc; }
    if (single_frame_authentic) {
        f->frame_read_offset = offset;
        memcpy(f->frame_read_header, single_frame_header, 8);
    }
    return short_read ? SQLITE_IOERR_SHORT_READ : SQLITE_OK;
}

static int wal_write(sf_file *f, const uint8_t *in, int amount, sqlite3_int64 offset) {
    sqlite3_int64 frame_read = f->frame_read_offset;
    f->frame_read_offset = 0;
    if (offset < WAL_HEADER) {
        if (offset != 0 || amount != WAL_HEADER) { return SQLITE_IOERR_WRITE; }
        int rc = flush_pending(f);
        if (rc != SQLITE_OK) { return rc; }
        // A new WAL (SQLite restarts it after a checkpoint): version 2 from its header on.
        uint8_t header[WAL_HEADER], mask[8];
        memcpy(header, in, WAL_HEADER);
        if (!header_mask(f->entry, header, mask)) { return SQLITE_IOERR_NOMEM; }
        for (int i = 0; i < 8; i++) { header[24 + i] ^= mask[i]; }
        rc = f->real->pMethods->xWrite(f->real, header, WAL_HEADER, 0);
        if (rc == SQLITE_OK) {
            f->wal_version = WAL_V2;
            memcpy(f->wal_salts, header + 16, 8);
        }
        return rc;
    }
    sqlite3_int64 within = (offset - WAL_HEADER) % WAL_FRAME;
    sqlite3_int64 header_offset = offset - within;
    if (within == 0 && amount == WAL_FRAME_HEADER) {
        int rc = flush_pending(f);
        if (rc != SQLITE_OK) { return rc; }
        int version = wal_version_for(f, in + 8);
        if (version < 0) { return SQLITE_IOERR_NOMEM; }
        if (version == WAL_V1) {
            // A version 1 WAL keeps its form until SQLite restarts it (the open checkpoints
            // one away: sf_db_codec_take_v1_wal).
            return f->real->pMethods->xWrite(f->real, in, amount, offset);
        }
        // New checksums for the frame this connection just read whole (walRewriteChecksums:
        // the same page number and commit size; the salts may differ, as SQLite writes zeros
        // there for frames it will rewrite): its page is on disk, and the header is written at
        // once (held, a commit's last header could stay unwritten when the commit returns). A
        // new frame taken for this (an append at the offset of a frame read in recovery) is
        // still written right: its page is the next write, which masks the words anew; and a
        // page on disk that does not go with the header leaves the header held for it.
        if (frame_read == offset && memcmp(in, f->frame_read_header, 8) == 0) { return rewrite_header(f, offset, in, 0); }
        // A new frame: the header is held until its page comes (the next write; the mask
        // needs the page's IV).
        memcpy(f->pending_header, in, WAL_FRAME_HEADER);
        f->pending_offset = offset;
        f->has_pending = 1;
        return SQLITE_OK;
    }
    if ((within == WAL_FRAME_HEADER && amount == PAGE) || (within == 0 && amount == WAL_FRAME)) {
        int whole = amount == WAL_FRAME;
        const uint8_t *page_in = whole ? in + WAL_FRAME_HEADER : in;
        // The header held for this page is taken first: whatever happens next, it is never
        // written later (after an error SQLite may give the write lock, and that frame, to
        // another connection).
        uint8_t held[WAL_FRAME_HEADER];
        int has_held = !whole && f->has_pending && f->pending_offset == header_offset;
        if (has_held) {
            memcpy(held, f->pending_header, WAL_FRAME_HEADER);
            f->has_pending = 0;
        }
        int rc = has_held ? SQLITE_OK : flush_pending(f);
        if (rc != SQLITE_OK) { return rc; }
        uint8_t *frame = sqlite3_malloc(WAL_FRAME);
        if (frame == NULL) { return SQLITE_IOERR_NOMEM; }
        int known = 1;   // the header's checksum words are SQLite's, in clear
        if (whole) {
            memcpy(frame, in, WAL_FRAME_HEADER);
        } else if (has_held) {
            // The usual order: the header just written, then its page.
            memcpy(frame, held, WAL_FRAME_HEADER);
        } else {
            // A page written again in its transaction: the header on disk stays.
            rc = f->real->pMethods->xRead(f->real, frame, WAL_FRAME_HEADER, header_offset);
            if (rc == SQLITE_IOERR_SHORT_READ) { rc = SQLITE_IOERR_DATA; }
            known = 0;
        }
        int version = rc == SQLITE_OK ? wal_version_for(f, frame + 8) : WAL_INVALID;
        if (version < 0) { rc = SQLITE_IOERR_NOMEM; }
        uint8_t old_iv[IV_SIZE];
        int has_old_iv = 0;
        if (rc == SQLITE_OK && !known && version != WAL_V1) {
            // Read before the page is replaced: its IV unmasks the words on disk.
            has_old_iv = raw_read(f, old_iv, IV_SIZE, offset + PAGE - RESERVE);
        }
        if (rc == SQLITE_OK && !encrypt_page(f->entry, get_be32(frame), page_in, frame + WAL_FRAME_HEADER)) { rc = SQLITE_IOERR_WRITE; }
        if (rc == SQLITE_OK) {
            if (version == WAL_V1 && !known) {
                rc = f->real->pMethods->xWrite(f->real, frame + WAL_FRAME_HEADER, PAGE, offset);
            } else if (version == WAL_V1) {
                rc = f->real->pMethods->xWrite(f->real, frame, WAL_FRAME, header_offset);
            } else {
                if (!known) {
                    // Its words were masked under the IV of the page replaced: unmask them
                    // with that one (SQLite rewrites them at the commit anyway).
                    uint8_t mask[8];
                    if (!has_old_iv) {
                        CCryptoBoringSSL_RAND_bytes(frame + 16, 8);
                    } else if (frame_mask(f->entry, header_offset, frame, old_iv, mask)) {
                        for (int i = 0; i < 8; i++) { frame[16 + i] ^= mask[i]; }
                    } else {
                        rc = SQLITE_IOERR_NOMEM;
                    }
                }
                if (rc == SQLITE_OK) { rc = write_frame(f, header_offset, frame); }
            }
        }
        sqlite3_free(frame);
        return rc;
    }
    return SQLITE_IOERR_WRITE;   // a shape SQLite does not write with power-safe overwrite
}

/// Writes a frame header held back by wal_write before any other use of the WAL.
static int settle(sf_file *f) {
    if (f->entry == NULL || f->kind != KIND_WAL || !f->has_pending) { return SQLITE_OK; }
    if (!begin_key_use(f)) { f->has_pending = 0; return SQLITE_IOERR_AUTH; }
    int rc = flush_pending(f);
    end_key_use(f);
    return rc;
}

static int x_read(sqlite3_file *file, void *buffer, int amount, sqlite3_int64 offset) {
    sf_file *f = (sf_file *)file;
    if (f->entry == NULL) { return f->real->pMethods->xRead(f->real, buffer, amount, offset); }
    if (!begin_key_use(f)) { memset(buffer, 0, (size_t)amount); return SQLITE_IOERR_AUTH; }
    int rc = f->kind == KIND_WAL ? flush_pending(f) : SQLITE_OK;
    if (rc != SQLITE_OK) { memset(buffer, 0, (size_t)amount); }
    else { rc = f->kind == KIND_WAL ? wal_read(f, buffer, amount, offset) : main_read(f, buffer, amount, offset); }
    end_key_use(f);
    return rc;
}

static int x_write(sqlite3_file *file, const void *buffer, int amount, sqlite3_int64 offset) {
    sf_file *f = (sf_file *)file;
    if (f->entry == NULL) { return f->real->pMethods->xWrite(f->real, buffer, amount, offset); }
    if (!begin_key_use(f)) { return SQLITE_IOERR_AUTH; }
    int rc = f->kind == KIND_WAL ? wal_write(f, buffer, amount, offset) : main_write(f, buffer, amount, offset);
    end_key_use(f);
    return rc;
}

static int revoked(sf_file *f) {
    return f->entry != NULL && (atomic_load(&f->entry->revoked) || atomic_load(&f->entry->revoke_epoch) != f->epoch);
}

static int x_truncate(sqlite3_file *file, sqlite3_int64 size) {
    sf_file *f = (sf_file *)file;
    if (revoked(f)) { return SQLITE_IOERR_AUTH; }
    int rc = settle(f);
    return rc != SQLITE_OK ? rc : f->real->pMethods->xTruncate(f->real, size);
}

static int x_sync(sqlite3_file *file, int flags) {
    sf_file *f = (sf_file *)file;
    int rc = settle(f);
    return rc != SQLITE_OK ? rc : f->real->pMethods->xSync(f->real, flags);
}

static int x_file_size(sqlite3_file *file, sqlite3_int64 *size) {
    sf_file *f = (sf_file *)file;
    int rc = settle(f);
    return rc != SQLITE_OK ? rc : f->real->pMethods->xFileSize(f->real, size);
}

static int x_lock(sqlite3_file *file, int level) {
    sf_file *f = (sf_file *)file;
    if (revoked(f)) { return SQLITE_IOERR_AUTH; }
    return f->real->pMethods->xLock(f->real, level);
}

static int x_unlock(sqlite3_file *file, int level) {
    sf_file *f = (sf_file *)file;
    return f->real->pMethods->xUnlock(f->real, level);
}

static int x_check_reserved_lock(sqlite3_file *file, int *out) {
    sf_file *f = (sf_file *)file;
    return f->real->pMethods->xCheckReservedLock(f->real, out);
}

static int x_file_control(sqlite3_file *file, int op, void *arg) {
    sf_file *f = (sf_file *)file;
    if (f->entry != NULL && op == SQLITE_FCNTL_MMAP_SIZE) {
        // Pages are never mapped: every read goes through the codec.
        if (arg != NULL) { *(sqlite3_int64 *)arg = 0; }
        return SQLITE_OK;
    }
    if (op == SQLITE_FCNTL_VFSNAME && arg != NULL) {
        char *inner = NULL;
        int rc = f->real->pMethods->xFileControl(f->real, op, &inner);
        *(char **)arg = sqlite3_mprintf("securefoundation/%z", inner != NULL ? inner : sqlite3_mprintf("%s", real_vfs->zName));
        return rc == SQLITE_NOTFOUND ? SQLITE_OK : rc;
    }
    return f->real->pMethods->xFileControl(f->real, op, arg);
}

static int x_sector_size(sqlite3_file *file) {
    sf_file *f = (sf_file *)file;
    return f->real->pMethods->xSectorSize(f->real);
}

static int x_device_characteristics(sqlite3_file *file) {
    sf_file *f = (sf_file *)file;
    int characteristics = f->real->pMethods->xDeviceCharacteristics(f->real);
    // Whole frames and pages, never a page split across two writes (the codec needs whole
    // pages): with power-safe overwrite SQLite does not pad or split WAL frames.
    return f->entry != NULL ? (characteristics | SQLITE_IOCAP_POWERSAFE_OVERWRITE) : characteristics;
}

// The WAL index of an attached database lives on the memory file system (walindex.h): it
// holds the checksum of the WAL's last frame, a function of the plaintext. Elsewhere (no
// /dev/shm) the wrapped VFS keeps it in DB-shm.

static int own_index(const sf_file *f) { return f->entry != NULL && sf_walindex_available(); }

/// Opens the index of this connection: /dev/shm/securefoundation-wal-index-NAME, NAME a MAC
/// (under the database's key) of the main file's device and inode, so that every connection
/// with the key finds the same index, a replaced file gets a new one, and no other user can
/// take the name in advance.
static int open_index(sf_file *f) {
    if (f->index.fd >= 0) { return SQLITE_OK; }
    struct stat st;
    if (stat(f->entry->path, &st) != 0) { return SQLITE_IOERR_SHMOPEN; }
    uint8_t input[1 + 16], name[8];
    uint64_t device = (uint64_t)st.st_dev, inode = (uint64_t)st.st_ino;
    input[0] = 'I';
    for (int i = 0; i < 8; i++) {
        input[1 + i] = (uint8_t)(device >> (56 - 8 * i));
        input[9 + i] = (uint8_t)(inode >> (56 - 8 * i));
    }
    if (!begin_key_use(f)) { return SQLITE_IOERR_AUTH; }
    int named = wal_mask(f->entry, input, sizeof input, name);
    end_key_use(f);
    if (!named) { return SQLITE_IOERR_NOMEM; }
    char index_path[80];
    snprintf(index_path, sizeof index_path, "/dev/shm/securefoundation-wal-index-%02x%02x%02x%02x%02x%02x%02x%02x",
             name[0], name[1], name[2], name[3], name[4], name[5], name[6], name[7]);
    char *guard_path = sqlite3_mprintf("%s-shm", f->entry->path);
    if (guard_path == NULL) { return SQLITE_NOMEM; }
    int rc = sf_walindex_open(&f->index, index_path, guard_path);
    sqlite3_free(guard_path);
    return rc;
}

static int x_shm_map(sqlite3_file *file, int region, int size, int extend, void volatile **out) {
    sf_file *f = (sf_file *)file;
    *out = NULL;
    if (revoked(f)) { return SQLITE_IOERR_AUTH; }
    if (!own_index(f)) { return f->real->pMethods->xShmMap(f->real, region, size, extend, out); }
    int rc = open_index(f);
    return rc != SQLITE_OK ? rc : sf_walindex_map(&f->index, region, size, extend, out);
}

static int x_shm_lock(sqlite3_file *file, int offset, int count, int flags) {
    sf_file *f = (sf_file *)file;
    if ((flags & SQLITE_SHM_LOCK) && revoked(f)) { return SQLITE_IOERR_AUTH; }
    if (!own_index(f)) { return f->real->pMethods->xShmLock(f->real, offset, count, flags); }
    int rc = open_index(f);
    return rc != SQLITE_OK ? rc : sf_walindex_lock(&f->index, offset, count, flags);
}

static void x_shm_barrier(sqlite3_file *file) {
    sf_file *f = (sf_file *)file;
    if (own_index(f)) { sf_walindex_barrier(); } else { f->real->pMethods->xShmBarrier(f->real); }
}

static int x_shm_unmap(sqlite3_file *file, int delete_flag) {
    sf_file *f = (sf_file *)file;
    if (!own_index(f)) { return f->real->pMethods->xShmUnmap(f->real, delete_flag); }
    return sf_walindex_close(&f->index, delete_flag);
}

static const sqlite3_io_methods codec_methods = {
    2,   // shared memory, no memory-mapped reads (xFetch would hand SQLite ciphertext)
    x_close, x_read, x_write, x_truncate, x_sync, x_file_size, x_lock, x_unlock, x_check_reserved_lock,
    x_file_control, x_sector_size, x_device_characteristics, x_shm_map, x_shm_lock, x_shm_barrier, x_shm_unmap,
    NULL, NULL,
};

// MARK: VFS

static int has_memory_temp_directory = 0;
static pthread_once_t memory_temp_once = PTHREAD_ONCE_INIT;

static void find_memory_temp_directory(void) {
    struct stat st;
    has_memory_temp_directory = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && access("/dev/shm", W_OK | X_OK) == 0;
}

static int memory_temp_directory(void) {
    pthread_once(&memory_temp_once, find_memory_temp_directory);
    return has_memory_temp_directory;
}

static int v_open(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *file, int flags, int *out_flags) {
    (void)vfs;
    sf_file *f = (sf_file *)file;
    sf_entry *entry = NULL;
    int kind = 0;
    if (name != NULL && (flags & SQLITE_OPEN_MAIN_DB)) {
        entry = find_entry(name);
        kind = KIND_MAIN;
    } else if (name != NULL && (flags & SQLITE_OPEN_WAL)) {
        entry = find_entry(sqlite3_filename_database(name));
        kind = KIND_WAL;
    } else if (name != NULL && (flags & (SQLITE_OPEN_MAIN_JOURNAL | SQLITE_OPEN_SUPER_JOURNAL))) {
        if (find_entry(sqlite3_filename_database(name)) != NULL) {
            // Protected databases run in WAL mode; a rollback journal would hold plaintext.
            sqlite3_log(SQLITE_CANTOPEN, "securefoundation: rollback journals are refused for protected databases");
            return SQLITE_CANTOPEN;
        }
    }
    if (entry != NULL && atomic_load(&entry->revoked)) { return SQLITE_AUTH; }

    int temporary = name == NULL && memory_temp_directory();
    if (entry == NULL && !temporary) {
        // Not ours: the wrapped VFS's file object, with its own methods, in place.
        return real_vfs->xOpen(real_vfs, name, file, flags, out_flags);
    }

    memset(f, 0, sizeof(sf_file));
    sf_walindex_init(&f->index);
    f->real = (sqlite3_file *)(((char *)file) + ((sizeof(sf_file) + 15) & ~(size_t)15));
    f->entry = entry;
    f->epoch = entry != NULL ? atomic_load(&entry->revoke_epoch) : 0;
    f->kind = entry != NULL ? kind : KIND_TEMP;
    const char *real_name = name;
    int real_flags = flags;
    if (temporary) {
        uint8_t random[16];
        if (CCryptoBoringSSL_RAND_bytes(random, sizeof random) != 1) { return SQLITE_IOERR; }
        unsigned long long high, low;
        memcpy(&high, random, sizeof high);
        memcpy(&low, random + 8, sizeof low);
        f->temp_name = sqlite3_mprintf("/dev/shm/securefoundation-sqlite-%016llx%016llx", high, low);
        if (f->temp_name == NULL) { return SQLITE_NOMEM; }
        real_name = f->temp_name;
        real_flags |= SQLITE_OPEN_DELETEONCLOSE | SQLITE_OPEN_EXCLUSIVE | SQLITE_OPEN_CREATE | SQLITE_OPEN_READWRITE;
    }
    int rc = real_vfs->xOpen(real_vfs, real_name, f->real, real_flags, out_flags);
    if (rc != SQLITE_OK) {
        if (f->temp_name != NULL) { sqlite3_free(f->temp_name); f->temp_name = NULL; }
        f->real->pMethods = NULL;
        file->pMethods = NULL;
        return rc;
    }
    file->pMethods = &codec_methods;
    return SQLITE_OK;
}

static int v_delete(sqlite3_vfs *vfs, const char *name, int sync_dir) { (void)vfs; return real_vfs->xDelete(real_vfs, name, sync_dir); }
static int v_access(sqlite3_vfs *vfs, const char *name, int flags, int *out) { (void)vfs; return real_vfs->xAccess(real_vfs, name, flags, out); }
static int v_full_pathname(sqlite3_vfs *vfs, const char *name, int size, char *out) { (void)vfs; return real_vfs->xFullPathname(real_vfs, name, size, out); }
static void *v_dl_open(sqlite3_vfs *vfs, const char *name) { (void)vfs; return real_vfs->xDlOpen(real_vfs, name); }
static void v_dl_error(sqlite3_vfs *vfs, int size, char *out) { (void)vfs; real_vfs->xDlError(real_vfs, size, out); }
static void (*v_dl_sym(sqlite3_vfs *vfs, void *handle, const char *symbol))(void) { (void)vfs; return real_vfs->xDlSym(real_vfs, handle, symbol); }
static void v_dl_close(sqlite3_vfs *vfs, void *handle) { (void)vfs; real_vfs->xDlClose(real_vfs, handle); }
static int v_randomness(sqlite3_vfs *vfs, int size, char *out) { (void)vfs; return real_vfs->xRandomness(real_vfs, size, out); }
static int v_sleep(sqlite3_vfs *vfs, int microseconds) { (void)vfs; return real_vfs->xSleep(real_vfs, microseconds); }
static int v_current_time(sqlite3_vfs *vfs, double *out) { (void)vfs; return real_vfs->xCurrentTime(real_vfs, out); }
static int v_get_last_error(sqlite3_vfs *vfs, int size, char *out) {
    (void)vfs;
    return real_vfs->xGetLastError != NULL ? real_vfs->xGetLastError(real_vfs, size, out) : 0;
}
static int v_current_time_int64(sqlite3_vfs *vfs, sqlite3_int64 *out) {
    (void)vfs;
    if (real_vfs->iVersion >= 2 && real_vfs->xCurrentTimeInt64 != NULL) { return real_vfs->xCurrentTimeInt64(real_vfs, out); }
    double now = 0;
    int rc = real_vfs->xCurrentTime(real_vfs, &now);
    *out = (sqlite3_int64)(now * 86400000.0);
    return rc;
}

static void register_codec(void) {
    register_result = sqlite3_initialize();
    if (register_result != SQLITE_OK) { return; }
    sqlite3_vfs *current = sqlite3_vfs_find(NULL);
    if (current == NULL) { register_result = SQLITE_ERROR; return; }
    if (strcmp(current->zName, "securefoundation") == 0) { register_result = SQLITE_OK; return; }
    real_vfs = current;
    memset(&codec_vfs, 0, sizeof codec_vfs);
    codec_vfs.iVersion = 2;
    codec_vfs.szOsFile = (int)(((sizeof(sf_file) + 15) & ~(size_t)15) + (size_t)current->szOsFile);
    codec_vfs.mxPathname = current->mxPathname;
    codec_vfs.zName = "securefoundation";
    codec_vfs.xOpen = v_open;
    codec_vfs.xDelete = v_delete;
    codec_vfs.xAccess = v_access;
    codec_vfs.xFullPathname = v_full_pathname;
    codec_vfs.xDlOpen = v_dl_open;
    codec_vfs.xDlError = v_dl_error;
    codec_vfs.xDlSym = v_dl_sym;
    codec_vfs.xDlClose = v_dl_close;
    codec_vfs.xRandomness = v_randomness;
    codec_vfs.xSleep = v_sleep;
    codec_vfs.xCurrentTime = v_current_time;
    codec_vfs.xGetLastError = v_get_last_error;
    codec_vfs.xCurrentTimeInt64 = v_current_time_int64;
    register_result = sqlite3_vfs_register(&codec_vfs, 1);
}

int sf_db_codec_register(void) {
    pthread_once(&register_once, register_codec);
    return register_result;
}

int sf_db_codec_full_path(const char *path, char *out, size_t out_len) {
    if (sf_db_codec_register() != SQLITE_OK || path == NULL || out == NULL) { return SF_DB_ERROR; }
    if (out_len < (size_t)real_vfs->mxPathname + 1) { return SF_DB_ERROR; }
    int rc = real_vfs->xFullPathname(real_vfs, path, (int)out_len, out);
    // SQLITE_OK_SYMLINK: the path went through a symbolic link; the resolved path is what
    // SQLite opens.
    return (rc == SQLITE_OK || rc == (SQLITE_OK | (2 << 8))) ? SF_DB_OK : SF_DB_ERROR;
}
