#ifndef SECUREFOUNDATION_CAGEPAYLOAD_H
#define SECUREFOUNDATION_CAGEPAYLOAD_H

// ChaCha20-Poly1305 for the age payload, sealed and opened straight between the caller's
// buffers by swift-crypto's BoringSSL. The header names no BoringSSL type: Swift modules that
// import this one (Age, and through it every client) never load swift-crypto's internal C
// module, which clashes with swift-nio-ssl's copy of BoringSSL in a module that sees both.

#include <stddef.h>
#include <stdint.h>

/// A ChaCha20-Poly1305 key schedule with 16-byte tags. Opaque.
typedef struct sf_payload_aead sf_payload_aead;

/// A context for the 32-byte `key`, or NULL when `key_len` is not 32 or memory is short.
/// Free it with `sf_payload_aead_free`.
sf_payload_aead *sf_payload_aead_new(const uint8_t *key, size_t key_len);

/// Clears the key schedule and frees the context. NULL is ignored.
void sf_payload_aead_free(sf_payload_aead *aead);

/// Seals `in_len` bytes of `in` into `out` (room for `max_out` bytes, at least in_len + 16)
/// under the 12-byte `nonce`; stores the sealed length in `*out_len`. Returns 1 on success.
/// `in` may be NULL when `in_len` is 0. Safe to call from several threads on one context.
int sf_payload_aead_seal(const sf_payload_aead *aead, uint8_t *out, size_t *out_len, size_t max_out,
                         const uint8_t *nonce, size_t nonce_len, const uint8_t *in, size_t in_len);

/// Opens `in_len` sealed bytes (ciphertext then tag) into `out`; stores the plaintext length in
/// `*out_len`. Returns 1 when the bytes authenticate, 0 otherwise (then `out` holds no plaintext).
int sf_payload_aead_open(const sf_payload_aead *aead, uint8_t *out, size_t *out_len, size_t max_out,
                         const uint8_t *nonce, size_t nonce_len, const uint8_t *in, size_t in_len);

#endif
