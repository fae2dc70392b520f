#ifndef SECUREFOUNDATION_CAGESSH_H
#define SECUREFOUNDATION_CAGESSH_H

// The two operations of age's SSH recipient types that swift-crypto's Swift API does not
// offer, done by swift-crypto's BoringSSL behind a header that names no BoringSSL type (see
// cagepayload.h): the Edwards-to-Montgomery map of an Ed25519 public key (ssh-ed25519), and
// RSA-OAEP-SHA256 with a label (ssh-rsa; CryptoExtras' OAEP takes no label).

#include <stddef.h>
#include <stdint.h>

/// Writes to `out` the X25519 (Montgomery u) public key of the Ed25519 public key `in`
/// (u = (1 + y) / (1 - y) mod 2^255 - 19). Returns 1, or 0 when `in` does not decode to a
/// point of the curve (or is the neutral point), leaving `out` zeroed.
int sf_ssh_ed25519_to_x25519(const uint8_t in[32], uint8_t out[32]);

/// RSA-OAEP encryption with SHA-256 (hash and MGF1) and `label`, under the public key of
/// big-endian modulus `n` and exponent `e`. Writes the ciphertext (the modulus size) to `out`
/// (room for `max_out` bytes) and its length to `*out_len`. Returns 1, or 0 when the key is
/// refused (BoringSSL's checks) or the input is too long.
int sf_ssh_rsa_oaep_encrypt(const uint8_t *n, size_t n_len, const uint8_t *e, size_t e_len,
                            const uint8_t *label, size_t label_len,
                            const uint8_t *in, size_t in_len, uint8_t *out, size_t max_out, size_t *out_len);

/// RSA-OAEP decryption (as above) with the private key of big-endian `n`, `e`, `d`, `p`, `q`
/// (the CRT values are derived and the key checked). Returns 1 with the plaintext in `out`,
/// 0 when the ciphertext does not decrypt under this key and label, -1 when the key is refused.
int sf_ssh_rsa_oaep_decrypt(const uint8_t *n, size_t n_len, const uint8_t *e, size_t e_len,
                            const uint8_t *d, size_t d_len, const uint8_t *p, size_t p_len,
                            const uint8_t *q, size_t q_len, const uint8_t *label, size_t label_len,
                            const uint8_t *in, size_t in_len, uint8_t *out, size_t max_out, size_t *out_len);

#endif
