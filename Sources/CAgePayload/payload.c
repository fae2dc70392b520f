#include "cagepayload.h"

#include <stdlib.h>
#include <CCryptoBoringSSL_aead.h>
#include <CCryptoBoringSSL_mem.h>

struct sf_payload_aead {
    EVP_AEAD_CTX context;
};

sf_payload_aead *sf_payload_aead_new(const uint8_t *key, size_t key_len) {
    if (key == NULL || key_len != 32) { return NULL; }
    sf_payload_aead *aead = malloc(sizeof(sf_payload_aead));
    if (aead == NULL) { return NULL; }
    CCryptoBoringSSL_EVP_AEAD_CTX_zero(&aead->context);
    if (CCryptoBoringSSL_EVP_AEAD_CTX_init(&aead->context, CCryptoBoringSSL_EVP_aead_chacha20_poly1305(), key, key_len,
                                           16, NULL) != 1) {
        CCryptoBoringSSL_OPENSSL_cleanse(aead, sizeof(sf_payload_aead));
        free(aead);
        return NULL;
    }
    return aead;
}

void sf_payload_aead_free(sf_payload_aead *aead) {
    if (aead == NULL) { return; }
    CCryptoBoringSSL_EVP_AEAD_CTX_cleanup(&aead->context);
    // The context holds the payload key.
    CCryptoBoringSSL_OPENSSL_cleanse(aead, sizeof(sf_payload_aead));
    free(aead);
}

int sf_payload_aead_seal(const sf_payload_aead *aead, uint8_t *out, size_t *out_len, size_t max_out,
                         const uint8_t *nonce, size_t nonce_len, const uint8_t *in, size_t in_len) {
    static const uint8_t empty = 0;
    if (aead == NULL || out == NULL || out_len == NULL || nonce == NULL) { return 0; }
    return CCryptoBoringSSL_EVP_AEAD_CTX_seal(&aead->context, out, out_len, max_out, nonce, nonce_len,
                                              in != NULL ? in : &empty, in_len, NULL, 0);
}

int sf_payload_aead_open(const sf_payload_aead *aead, uint8_t *out, size_t *out_len, size_t max_out,
                         const uint8_t *nonce, size_t nonce_len, const uint8_t *in, size_t in_len) {
    uint8_t empty = 0;
    if (aead == NULL || out_len == NULL || nonce == NULL || in == NULL) { return 0; }
    if (out == NULL) {
        if (max_out != 0) { return 0; }
        out = &empty;
    }
    return CCryptoBoringSSL_EVP_AEAD_CTX_open(&aead->context, out, out_len, max_out, nonce, nonce_len,
                                              in, in_len, NULL, 0);
}
