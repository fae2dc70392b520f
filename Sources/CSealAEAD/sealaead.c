#include "csealaead.h"

#include <stdalign.h>
#include <CCryptoBoringSSL_aead.h>

static const uint8_t sf_seal_empty = 0;

size_t sf_seal_schedule_size(void) { return sizeof(EVP_AEAD_CTX); }

size_t sf_seal_schedule_alignment(void) { return alignof(EVP_AEAD_CTX); }

int sf_seal_schedule_init(void *schedule, size_t schedule_len, int algorithm, const uint8_t *key, size_t key_len) {
    if (schedule == NULL || key == NULL || key_len != 32 || schedule_len < sizeof(EVP_AEAD_CTX) ||
        ((uintptr_t)schedule % alignof(EVP_AEAD_CTX)) != 0) {
        return 0;
    }
    const EVP_AEAD *aead;
    switch (algorithm) {
    case SF_SEAL_AES_256_GCM: aead = CCryptoBoringSSL_EVP_aead_aes_256_gcm(); break;
    case SF_SEAL_CHACHA20_POLY1305: aead = CCryptoBoringSSL_EVP_aead_chacha20_poly1305(); break;
    default: return 0;
    }
    EVP_AEAD_CTX *context = (EVP_AEAD_CTX *)schedule;
    CCryptoBoringSSL_EVP_AEAD_CTX_zero(context);
    return CCryptoBoringSSL_EVP_AEAD_CTX_init(context, aead, key, key_len, 16, NULL) == 1 ? 1 : 0;
}

void sf_seal_schedule_cleanup(void *schedule) {
    if (schedule == NULL) { return; }
    CCryptoBoringSSL_EVP_AEAD_CTX_cleanup((EVP_AEAD_CTX *)schedule);
}

int sf_seal_schedule_seal(const void *schedule, uint8_t *out, uint8_t tag[16], const uint8_t nonce[12],
                          const uint8_t *in, size_t in_len, const uint8_t *ad, size_t ad_len) {
    if (schedule == NULL || tag == NULL || nonce == NULL || (out == NULL && in_len != 0)) { return 0; }
    uint8_t empty_out = 0;
    size_t tag_len = 0;
    int ok = CCryptoBoringSSL_EVP_AEAD_CTX_seal_scatter((const EVP_AEAD_CTX *)schedule, out != NULL ? out : &empty_out,
                                                        tag, &tag_len, 16, nonce, 12, in != NULL ? in : &sf_seal_empty,
                                                        in_len, NULL, 0, ad != NULL ? ad : &sf_seal_empty, ad_len);
    return ok == 1 && tag_len == 16 ? 1 : 0;
}

int sf_seal_schedule_open(const void *schedule, uint8_t *out, const uint8_t nonce[12], const uint8_t *in, size_t in_len,
                          const uint8_t tag[16], const uint8_t *ad, size_t ad_len) {
    uint8_t empty = 0;
    if (schedule == NULL || tag == NULL || nonce == NULL || ((out == NULL || in == NULL) && in_len != 0)) { return 0; }
    return CCryptoBoringSSL_EVP_AEAD_CTX_open_gather((const EVP_AEAD_CTX *)schedule, out != NULL ? out : &empty, nonce, 12,
                                                     in != NULL ? in : &sf_seal_empty, in_len, tag, 16,
                                                     ad != NULL ? ad : &sf_seal_empty, ad_len) == 1 ? 1 : 0;
}
