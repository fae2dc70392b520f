#ifndef SECUREFOUNDATION_CSEALAEAD_H
#define SECUREFOUNDATION_CSEALAEAD_H

// The AEADs of the sealed-data format (AES-256-GCM, ChaCha20-Poly1305; 12-byte nonces, 16-byte
// tags) from swift-crypto's BoringSSL, with the key schedule in memory the caller provides (the
// locked storage of the key's SecretBytes), so that one schedule serves every seal and open under
// a key, and sealing writes straight into the caller's envelope. The header names no BoringSSL
// type: Cipher, which imports it, never loads swift-crypto's internal C module (see
// cagepayload.h).

#include <stddef.h>
#include <stdint.h>

/// The algorithm ids of the sealed-data format (SealAlgorithm's raw values).
enum {
    SF_SEAL_AES_256_GCM = 1,
    SF_SEAL_CHACHA20_POLY1305 = 2,
};

/// The bytes a key schedule takes, and the alignment its memory needs.
size_t sf_seal_schedule_size(void);
size_t sf_seal_schedule_alignment(void);

/// Sets up the schedule of the 32-byte `key` for `algorithm` in `schedule` (at least
/// sf_seal_schedule_size() bytes, aligned as sf_seal_schedule_alignment()). Returns 1, or 0 for
/// an unknown algorithm, a key that is not 32 bytes or memory too small or misaligned.
int sf_seal_schedule_init(void *schedule, size_t schedule_len, int algorithm, const uint8_t *key, size_t key_len);

/// Releases what the schedule holds outside its memory (nothing for these AEADs); the caller then
/// zeroes the memory.
void sf_seal_schedule_cleanup(void *schedule);

/// Seals `in_len` bytes of `in` into `out` (in_len bytes) and the 16-byte tag into `tag`, under
/// the 12-byte `nonce`, authenticating `ad`. Returns 1 on success. Safe from several threads on
/// one schedule. `in` and `ad` may be NULL when their length is 0.
int sf_seal_schedule_seal(const void *schedule, uint8_t *out, uint8_t tag[16], const uint8_t nonce[12],
                          const uint8_t *in, size_t in_len, const uint8_t *ad, size_t ad_len);

/// Opens `in_len` bytes of ciphertext `in` with its 16-byte `tag` into `out` (in_len bytes).
/// Returns 1 when they authenticate; otherwise 0, and `out` is zeroed.
int sf_seal_schedule_open(const void *schedule, uint8_t *out, const uint8_t nonce[12], const uint8_t *in, size_t in_len,
                          const uint8_t tag[16], const uint8_t *ad, size_t ad_len);

#endif
