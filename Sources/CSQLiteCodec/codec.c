#include "sfdbcodec.h"

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
    uint64_t generation;   // one more at every key set, so a remembered page names its key
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
    sqlite3_int64 last_header_offset;
    uint32_t last_header_pgno;
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

static int set_key_locked(sf_entry *e, const uint8_t *key, const uint8_t *salt) {
    uint8_t mac_key[32];
    if (derive_mac_key(key, salt, mac_key) != 1) { return 0; }
    CCryptoBoringSSL_HMAC_CTX_init(&e->mac);
    int ok = CCryptoBoringSSL_HMAC_Init_ex(&e->mac, mac_key, sizeof mac_key, CCryptoBoringSSL_EVP_sha512(), NULL) == 1
        && CCryptoBoringSSL_AES_set_encrypt_key(key, 256, &e->enc) == 0
        && CCryptoBoringSSL_AES_set_decrypt_key(key, 256, &e->dec) == 0;
    CCryptoBoringSSL_OPENSSL_cleanse(mac_key, sizeof mac_key);
    if (!ok) {
        CCryptoBoringSSL_HMAC_CTX_cleanup(&e->mac);
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

int sf_db_codec_check_first_page(const char *path, const uint8_t *key, size_t key_len, uint8_t *salt_out) {
    if (path == NULL || key == NULL || key_len != SF_DB_KEY_SIZE) { return -1; }
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) { return -1; }
    uint8_t *page = malloc(PAGE);
    if (page == NULL) { close(fd); return -1; }
    ssize_t got = pread(fd, page, PAGE, 0);
    close(fd);
    if (got != PAGE) { free(page); return -1; }
    if (salt_out != NULL) { memcpy(salt_out, page, SF_DB_SALT_SIZE); }
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

static int x_close(sqlite3_file *file) {
    sf_file *f = (sf_file *)file;
    int rc = SQLITE_OK;
    if (f->real->pMethods != NULL) { rc = f->real->pMethods->xClose(f->real); }
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

/// The page number in the WAL frame header at `header_offset`, read from the file (another
/// connection may have rewritten the WAL since this one wrote a header there).
static int wal_frame_pgno(sf_file *f, sqlite3_int64 header_offset, uint32_t *pgno) {
    uint8_t header[4];
    int rc = f->real->pMethods->xRead(f->real, header, 4, header_offset);
    if (rc != SQLITE_OK) { return rc == SQLITE_IOERR_SHORT_READ ? SQLITE_IOERR_DATA : rc; }
    *pgno = ((uint32_t)header[0] << 24) | ((uint32_t)header[1] << 16) | ((uint32_t)header[2] << 8) | header[3];
    return SQLITE_OK;
}

static int wal_read(sf_file *f, uint8_t *out, int amount, sqlite3_int64 offset) {
    int rc = f->real->pMethods->xRead(f->real, out, amount, offset);
    if (rc != SQLITE_OK && rc != SQLITE_IOERR_SHORT_READ) { return rc; }
    int short_read = rc == SQLITE_IOERR_SHORT_READ;
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
            pgno = ((uint32_t)h[0] << 24) | ((uint32_t)h[1] << 16) | ((uint32_t)h[2] << 8) | h[3];
        } else {
            int hrc = wal_frame_pgno(f, header_at, &pgno);
            if (hrc != SQLITE_OK) { rc = hrc; break; }
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
    return short_read ? SQLITE_IOERR_SHORT_READ : SQLITE_OK;
}

static int wal_write(sf_file *f, const uint8_t *in, int amount, sqlite3_int64 offset) {
    if (offset < WAL_HEADER) {
        return offset == 0 && amount == WAL_HEADER ? f->real->pMethods->xWrite(f->real, in, amount, offset) : SQLITE_IOERR_WRITE;
    }
    sqlite3_int64 within = (offset - WAL_HEADER) % WAL_FRAME;
    if (within == 0 && amount == WAL_FRAME_HEADER) {
        f->last_header_offset = offset;
        f->last_header_pgno = ((uint32_t)in[0] << 24) | ((uint32_t)in[1] << 16) | ((uint32_t)in[2] << 8) | in[3];
        return f->real->pMethods->xWrite(f->real, in, amount, offset);
    }
    if (within == WAL_FRAME_HEADER && amount == PAGE) {
        uint32_t pgno;
        int rc = SQLITE_OK;
        if (f->last_header_offset == offset - WAL_FRAME_HEADER && f->last_header_pgno != 0) {
            // The header this connection wrote just before (the usual order of a frame).
            pgno = f->last_header_pgno;
        } else {
            rc = wal_frame_pgno(f, offset - WAL_FRAME_HEADER, &pgno);
        }
        f->last_header_pgno = 0;
        if (rc != SQLITE_OK) { return rc; }
        uint8_t *page = sqlite3_malloc(PAGE);
        if (page == NULL) { return SQLITE_IOERR_NOMEM; }
        rc = encrypt_page(f->entry, pgno, in, page) ? f->real->pMethods->xWrite(f->real, page, PAGE, offset) : SQLITE_IOERR_WRITE;
        sqlite3_free(page);
        return rc;
    }
    if (within == 0 && amount == WAL_FRAME) {
        uint32_t pgno = ((uint32_t)in[0] << 24) | ((uint32_t)in[1] << 16) | ((uint32_t)in[2] << 8) | in[3];
        uint8_t *frame = sqlite3_malloc(WAL_FRAME);
        if (frame == NULL) { return SQLITE_IOERR_NOMEM; }
        memcpy(frame, in, WAL_FRAME_HEADER);
        int rc = encrypt_page(f->entry, pgno, in + WAL_FRAME_HEADER, frame + WAL_FRAME_HEADER)
            ? f->real->pMethods->xWrite(f->real, frame, WAL_FRAME, offset) : SQLITE_IOERR_WRITE;
        sqlite3_free(frame);
        return rc;
    }
    return SQLITE_IOERR_WRITE;   // a shape SQLite does not write with power-safe overwrite
}

static int x_read(sqlite3_file *file, void *buffer, int amount, sqlite3_int64 offset) {
    sf_file *f = (sf_file *)file;
    if (f->entry == NULL) { return f->real->pMethods->xRead(f->real, buffer, amount, offset); }
    if (!begin_key_use(f)) { memset(buffer, 0, (size_t)amount); return SQLITE_IOERR_AUTH; }
    int rc = f->kind == KIND_WAL ? wal_read(f, buffer, amount, offset) : main_read(f, buffer, amount, offset);
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
    return f->real->pMethods->xTruncate(f->real, size);
}

static int x_sync(sqlite3_file *file, int flags) {
    sf_file *f = (sf_file *)file;
    return f->real->pMethods->xSync(f->real, flags);
}

static int x_file_size(sqlite3_file *file, sqlite3_int64 *size) {
    sf_file *f = (sf_file *)file;
    return f->real->pMethods->xFileSize(f->real, size);
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

static int x_shm_map(sqlite3_file *file, int region, int size, int extend, void volatile **out) {
    sf_file *f = (sf_file *)file;
    if (revoked(f)) { *out = NULL; return SQLITE_IOERR_AUTH; }
    return f->real->pMethods->xShmMap(f->real, region, size, extend, out);
}

static int x_shm_lock(sqlite3_file *file, int offset, int count, int flags) {
    sf_file *f = (sf_file *)file;
    if ((flags & SQLITE_SHM_LOCK) && revoked(f)) { return SQLITE_IOERR_AUTH; }
    return f->real->pMethods->xShmLock(f->real, offset, count, flags);
}

static void x_shm_barrier(sqlite3_file *file) {
    sf_file *f = (sf_file *)file;
    f->real->pMethods->xShmBarrier(f->real);
}

static int x_shm_unmap(sqlite3_file *file, int delete_flag) {
    sf_file *f = (sf_file *)file;
    return f->real->pMethods->xShmUnmap(f->real, delete_flag);
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
