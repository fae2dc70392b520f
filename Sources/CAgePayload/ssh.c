#include "cagessh.h"

#include <string.h>
#include <CCryptoBoringSSL_bn.h>
#include <CCryptoBoringSSL_err.h>
#include <CCryptoBoringSSL_evp.h>
#include <CCryptoBoringSSL_mem.h>
#include <CCryptoBoringSSL_rsa.h>

int sf_ssh_ed25519_to_x25519(const uint8_t in[32], uint8_t out[32]) {
    int ok = 0;
    memset(out, 0, 32);
    uint8_t encoded[32];
    memcpy(encoded, in, 32);
    int sign = encoded[31] >> 7;
    encoded[31] &= 0x7f;
    BN_CTX *ctx = CCryptoBoringSSL_BN_CTX_new();
    if (ctx == NULL) { return 0; }
    CCryptoBoringSSL_BN_CTX_start(ctx);
    BIGNUM *p = CCryptoBoringSSL_BN_CTX_get(ctx), *y = CCryptoBoringSSL_BN_CTX_get(ctx);
    BIGNUM *one = CCryptoBoringSSL_BN_CTX_get(ctx), *d = CCryptoBoringSSL_BN_CTX_get(ctx);
    BIGNUM *y2 = CCryptoBoringSSL_BN_CTX_get(ctx), *num = CCryptoBoringSSL_BN_CTX_get(ctx);
    BIGNUM *den = CCryptoBoringSSL_BN_CTX_get(ctx), *x2 = CCryptoBoringSSL_BN_CTX_get(ctx);
    BIGNUM *t = CCryptoBoringSSL_BN_CTX_get(ctx), *u = CCryptoBoringSSL_BN_CTX_get(ctx);
    if (u == NULL) { goto end; }
    // p = 2^255 - 19; d = -121665 / 121666 mod p.
    if (!CCryptoBoringSSL_BN_set_bit(p, 255) || !CCryptoBoringSSL_BN_sub_word(p, 19) ||
        !CCryptoBoringSSL_BN_one(one) || CCryptoBoringSSL_BN_le2bn(encoded, 32, y) == NULL) { goto end; }
    // Non-canonical y (>= p) is read modulo p, as the usual decoders do.
    if (!CCryptoBoringSSL_BN_nnmod(y, y, p, ctx)) { goto end; }
    if (!CCryptoBoringSSL_BN_set_word(t, 121666) || CCryptoBoringSSL_BN_mod_inverse(d, t, p, ctx) == NULL ||
        !CCryptoBoringSSL_BN_set_word(t, 121665) || !CCryptoBoringSSL_BN_sub(t, p, t) ||
        !CCryptoBoringSSL_BN_mod_mul(d, d, t, p, ctx)) { goto end; }
    // On the curve: x^2 = (y^2 - 1) / (d y^2 + 1) must be a square.
    if (!CCryptoBoringSSL_BN_mod_sqr(y2, y, p, ctx) || !CCryptoBoringSSL_BN_mod_sub(num, y2, one, p, ctx) ||
        !CCryptoBoringSSL_BN_mod_mul(den, d, y2, p, ctx) || !CCryptoBoringSSL_BN_mod_add(den, den, one, p, ctx) ||
        CCryptoBoringSSL_BN_mod_inverse(t, den, p, ctx) == NULL || !CCryptoBoringSSL_BN_mod_mul(x2, num, t, p, ctx)) { goto end; }
    if (CCryptoBoringSSL_BN_is_zero(x2)) {
        if (sign) { goto end; }
    } else if (CCryptoBoringSSL_BN_mod_sqrt(t, x2, p, ctx) == NULL) {
        goto end;
    }
    // u = (1 + y) / (1 - y); y = 1 is the neutral point.
    if (!CCryptoBoringSSL_BN_mod_sub(den, one, y, p, ctx) || CCryptoBoringSSL_BN_is_zero(den)) { goto end; }
    if (!CCryptoBoringSSL_BN_mod_add(num, one, y, p, ctx) || CCryptoBoringSSL_BN_mod_inverse(t, den, p, ctx) == NULL ||
        !CCryptoBoringSSL_BN_mod_mul(u, num, t, p, ctx) || !CCryptoBoringSSL_BN_bn2le_padded(out, 32, u)) { goto end; }
    ok = 1;
end:
    CCryptoBoringSSL_ERR_clear_error();
    CCryptoBoringSSL_BN_CTX_end(ctx);
    CCryptoBoringSSL_BN_CTX_free(ctx);
    if (!ok) { memset(out, 0, 32); }
    return ok;
}

static EVP_PKEY_CTX *oaep_context(RSA *rsa, int encrypt, const uint8_t *label, size_t label_len) {
    EVP_PKEY *key = CCryptoBoringSSL_EVP_PKEY_new();
    if (key == NULL) { CCryptoBoringSSL_RSA_free(rsa); return NULL; }
    if (!CCryptoBoringSSL_EVP_PKEY_assign_RSA(key, rsa)) {
        CCryptoBoringSSL_RSA_free(rsa);
        CCryptoBoringSSL_EVP_PKEY_free(key);
        return NULL;
    }
    EVP_PKEY_CTX *ctx = CCryptoBoringSSL_EVP_PKEY_CTX_new(key, NULL);
    CCryptoBoringSSL_EVP_PKEY_free(key);  // the context holds a reference
    if (ctx == NULL) { return NULL; }
    uint8_t *label_copy = label_len > 0 ? CCryptoBoringSSL_OPENSSL_memdup(label, label_len) : NULL;
    if ((encrypt ? CCryptoBoringSSL_EVP_PKEY_encrypt_init(ctx) : CCryptoBoringSSL_EVP_PKEY_decrypt_init(ctx)) != 1 ||
        CCryptoBoringSSL_EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_OAEP_PADDING) != 1 ||
        CCryptoBoringSSL_EVP_PKEY_CTX_set_rsa_oaep_md(ctx, CCryptoBoringSSL_EVP_sha256()) != 1 ||
        CCryptoBoringSSL_EVP_PKEY_CTX_set_rsa_mgf1_md(ctx, CCryptoBoringSSL_EVP_sha256()) != 1 ||
        (label_len > 0 && (label_copy == NULL || CCryptoBoringSSL_EVP_PKEY_CTX_set0_rsa_oaep_label(ctx, label_copy, label_len) != 1))) {
        if (label_copy != NULL) { CCryptoBoringSSL_OPENSSL_free(label_copy); }
        CCryptoBoringSSL_EVP_PKEY_CTX_free(ctx);
        return NULL;
    }
    return ctx;
}

int sf_ssh_rsa_oaep_encrypt(const uint8_t *n, size_t n_len, const uint8_t *e, size_t e_len,
                            const uint8_t *label, size_t label_len,
                            const uint8_t *in, size_t in_len, uint8_t *out, size_t max_out, size_t *out_len) {
    int ok = 0;
    BIGNUM *bn = CCryptoBoringSSL_BN_bin2bn(n, n_len, NULL), *be = CCryptoBoringSSL_BN_bin2bn(e, e_len, NULL);
    RSA *rsa = (bn != NULL && be != NULL) ? CCryptoBoringSSL_RSA_new_public_key(bn, be) : NULL;
    CCryptoBoringSSL_BN_free(bn);
    CCryptoBoringSSL_BN_free(be);
    if (rsa == NULL) { CCryptoBoringSSL_ERR_clear_error(); return 0; }
    EVP_PKEY_CTX *ctx = oaep_context(rsa, 1, label, label_len);
    if (ctx == NULL) { CCryptoBoringSSL_ERR_clear_error(); return 0; }
    size_t length = max_out;
    if (CCryptoBoringSSL_EVP_PKEY_encrypt(ctx, out, &length, in, in_len) == 1) { *out_len = length; ok = 1; }
    CCryptoBoringSSL_EVP_PKEY_CTX_free(ctx);
    CCryptoBoringSSL_ERR_clear_error();
    return ok;
}

int sf_ssh_rsa_oaep_decrypt(const uint8_t *n, size_t n_len, const uint8_t *e, size_t e_len,
                            const uint8_t *d, size_t d_len, const uint8_t *p, size_t p_len,
                            const uint8_t *q, size_t q_len, const uint8_t *label, size_t label_len,
                            const uint8_t *in, size_t in_len, uint8_t *out, size_t max_out, size_t *out_len) {
    int result = -1;
    BN_CTX *bctx = CCryptoBoringSSL_BN_CTX_new();
    if (bctx == NULL) { return -1; }
    BIGNUM *bn = CCryptoBoringSSL_BN_bin2bn(n, n_len, NULL), *be = CCryptoBoringSSL_BN_bin2bn(e, e_len, NULL);
    BIGNUM *bd = CCryptoBoringSSL_BN_bin2bn(d, d_len, NULL), *bp = CCryptoBoringSSL_BN_bin2bn(p, p_len, NULL);
    BIGNUM *bq = CCryptoBoringSSL_BN_bin2bn(q, q_len, NULL);
    BIGNUM *dmp1 = CCryptoBoringSSL_BN_new(), *dmq1 = CCryptoBoringSSL_BN_new(), *iqmp = CCryptoBoringSSL_BN_new();
    BIGNUM *t = CCryptoBoringSSL_BN_new();
    RSA *rsa = NULL;
    if (bn == NULL || be == NULL || bd == NULL || bp == NULL || bq == NULL || dmp1 == NULL || dmq1 == NULL ||
        iqmp == NULL || t == NULL) { goto end; }
    // The CRT values: d mod (p - 1), d mod (q - 1), q^-1 mod p.
    if (!CCryptoBoringSSL_BN_sub(t, bp, CCryptoBoringSSL_BN_value_one()) || !CCryptoBoringSSL_BN_nnmod(dmp1, bd, t, bctx) ||
        !CCryptoBoringSSL_BN_sub(t, bq, CCryptoBoringSSL_BN_value_one()) || !CCryptoBoringSSL_BN_nnmod(dmq1, bd, t, bctx) ||
        CCryptoBoringSSL_BN_mod_inverse(iqmp, bq, bp, bctx) == NULL) { goto end; }
    rsa = CCryptoBoringSSL_RSA_new_private_key(bn, be, bd, bp, bq, dmp1, dmq1, iqmp);
    if (rsa == NULL) { goto end; }
    EVP_PKEY_CTX *ctx = oaep_context(rsa, 0, label, label_len);
    rsa = NULL;
    if (ctx == NULL) { goto end; }
    size_t length = max_out;
    if (CCryptoBoringSSL_EVP_PKEY_decrypt(ctx, out, &length, in, in_len) == 1) {
        *out_len = length;
        result = 1;
    } else {
        result = 0;
    }
    CCryptoBoringSSL_EVP_PKEY_CTX_free(ctx);
end:
    CCryptoBoringSSL_BN_clear_free(bd);
    CCryptoBoringSSL_BN_clear_free(bp);
    CCryptoBoringSSL_BN_clear_free(bq);
    CCryptoBoringSSL_BN_clear_free(dmp1);
    CCryptoBoringSSL_BN_clear_free(dmq1);
    CCryptoBoringSSL_BN_clear_free(iqmp);
    CCryptoBoringSSL_BN_clear_free(t);
    CCryptoBoringSSL_BN_free(bn);
    CCryptoBoringSSL_BN_free(be);
    CCryptoBoringSSL_BN_CTX_free(bctx);
    CCryptoBoringSSL_ERR_clear_error();
    return result;
}
