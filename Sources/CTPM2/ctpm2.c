// The TPM 2.0 through ESYS (tpm2-tss), loaded with dlopen. tss2/tss2_common.h and
// tss2/tss2_tpm2_types.h are the tpm2-tss project's headers (version 3.2.1, BSD-2-Clause, their
// notices kept), vendored so the package builds without libtss2-dev; the functions used are
// declared here as pointer types, and checked against the real prototypes when tss2_esys.h is
// installed.
#include "ctpm2.h"
#include "tss2/tss2_tpm2_types.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

typedef uint32_t ESYS_TR;
typedef struct ESYS_CONTEXT ESYS_CONTEXT;
typedef struct TSS2_TCTI_OPAQUE_CONTEXT_BLOB TSS2_TCTI_CONTEXT;

#define ESYS_TR_NONE 0xfffU
#define ESYS_TR_PASSWORD 0x0ffU
#define ESYS_TR_RH_OWNER 0x101U

typedef TSS2_RC (*fn_Tss2_TctiLdr_Initialize)(const char *nameConf, TSS2_TCTI_CONTEXT **context);
typedef void (*fn_Tss2_TctiLdr_Finalize)(TSS2_TCTI_CONTEXT **context);
typedef TSS2_RC (*fn_Esys_Initialize)(ESYS_CONTEXT **esys_context, TSS2_TCTI_CONTEXT *tcti, TSS2_ABI_VERSION *abiVersion);
typedef void (*fn_Esys_Finalize)(ESYS_CONTEXT **context);
typedef TSS2_RC (*fn_Esys_SetTimeout)(ESYS_CONTEXT *esys_context, int32_t timeout);
typedef void (*fn_Esys_Free)(void *__ptr);
typedef TSS2_RC (*fn_Esys_CreatePrimary)(ESYS_CONTEXT *esysContext, ESYS_TR primaryHandle, ESYS_TR shandle1, ESYS_TR shandle2,
                                         ESYS_TR shandle3, const TPM2B_SENSITIVE_CREATE *inSensitive, const TPM2B_PUBLIC *inPublic,
                                         const TPM2B_DATA *outsideInfo, const TPML_PCR_SELECTION *creationPCR, ESYS_TR *objectHandle,
                                         TPM2B_PUBLIC **outPublic, TPM2B_CREATION_DATA **creationData, TPM2B_DIGEST **creationHash,
                                         TPMT_TK_CREATION **creationTicket);
typedef TSS2_RC (*fn_Esys_Create)(ESYS_CONTEXT *esysContext, ESYS_TR parentHandle, ESYS_TR shandle1, ESYS_TR shandle2,
                                  ESYS_TR shandle3, const TPM2B_SENSITIVE_CREATE *inSensitive, const TPM2B_PUBLIC *inPublic,
                                  const TPM2B_DATA *outsideInfo, const TPML_PCR_SELECTION *creationPCR, TPM2B_PRIVATE **outPrivate,
                                  TPM2B_PUBLIC **outPublic, TPM2B_CREATION_DATA **creationData, TPM2B_DIGEST **creationHash,
                                  TPMT_TK_CREATION **creationTicket);
typedef TSS2_RC (*fn_Esys_Load)(ESYS_CONTEXT *esysContext, ESYS_TR parentHandle, ESYS_TR shandle1, ESYS_TR shandle2,
                                ESYS_TR shandle3, const TPM2B_PRIVATE *inPrivate, const TPM2B_PUBLIC *inPublic, ESYS_TR *objectHandle);
typedef TSS2_RC (*fn_Esys_ReadPublic)(ESYS_CONTEXT *esysContext, ESYS_TR objectHandle, ESYS_TR shandle1, ESYS_TR shandle2,
                                      ESYS_TR shandle3, TPM2B_PUBLIC **outPublic, TPM2B_NAME **name, TPM2B_NAME **qualifiedName);
typedef TSS2_RC (*fn_Esys_Sign)(ESYS_CONTEXT *esysContext, ESYS_TR keyHandle, ESYS_TR shandle1, ESYS_TR shandle2, ESYS_TR shandle3,
                                const TPM2B_DIGEST *digest, const TPMT_SIG_SCHEME *inScheme, const TPMT_TK_HASHCHECK *validation,
                                TPMT_SIGNATURE **signature);
typedef TSS2_RC (*fn_Esys_Unseal)(ESYS_CONTEXT *esysContext, ESYS_TR itemHandle, ESYS_TR shandle1, ESYS_TR shandle2,
                                  ESYS_TR shandle3, TPM2B_SENSITIVE_DATA **outData);
typedef TSS2_RC (*fn_Esys_FlushContext)(ESYS_CONTEXT *esysContext, ESYS_TR flushHandle);
typedef TSS2_RC (*fn_Esys_TR_Close)(ESYS_CONTEXT *esys_context, ESYS_TR *rsrc_handle);
typedef TSS2_RC (*fn_Esys_StartAuthSession)(ESYS_CONTEXT *esysContext, ESYS_TR tpmKey, ESYS_TR bind, ESYS_TR shandle1,
                                            ESYS_TR shandle2, ESYS_TR shandle3, const TPM2B_NONCE *nonceCaller, TPM2_SE sessionType,
                                            const TPMT_SYM_DEF *symmetric, TPMI_ALG_HASH authHash, ESYS_TR *sessionHandle);
typedef TSS2_RC (*fn_Esys_TRSess_SetAttributes)(ESYS_CONTEXT *esysContext, ESYS_TR session, TPMA_SESSION flags, TPMA_SESSION mask);
typedef TSS2_RC (*fn_Esys_PolicyPCR)(ESYS_CONTEXT *esysContext, ESYS_TR policySession, ESYS_TR shandle1, ESYS_TR shandle2,
                                     ESYS_TR shandle3, const TPM2B_DIGEST *pcrDigest, const TPML_PCR_SELECTION *pcrs);
typedef TSS2_RC (*fn_Esys_PolicyGetDigest)(ESYS_CONTEXT *esysContext, ESYS_TR policySession, ESYS_TR shandle1, ESYS_TR shandle2,
                                           ESYS_TR shandle3, TPM2B_DIGEST **policyDigest);
typedef TSS2_RC (*fn_Esys_ContextSave)(ESYS_CONTEXT *esysContext, ESYS_TR saveHandle, TPMS_CONTEXT **context);
typedef TSS2_RC (*fn_Esys_ContextLoad)(ESYS_CONTEXT *esysContext, const TPMS_CONTEXT *context, ESYS_TR *loadedHandle);
typedef TSS2_RC (*fn_Tss2_MU_TPM2B_PUBLIC_Marshal)(TPM2B_PUBLIC const *src, uint8_t buffer[], size_t buffer_size, size_t *offset);
typedef TSS2_RC (*fn_Tss2_MU_TPM2B_PUBLIC_Unmarshal)(uint8_t const buffer[], size_t buffer_size, size_t *offset, TPM2B_PUBLIC *dest);
typedef TSS2_RC (*fn_Tss2_MU_TPM2B_PRIVATE_Marshal)(TPM2B_PRIVATE const *src, uint8_t buffer[], size_t buffer_size, size_t *offset);
typedef TSS2_RC (*fn_Tss2_MU_TPM2B_PRIVATE_Unmarshal)(uint8_t const buffer[], size_t buffer_size, size_t *offset, TPM2B_PRIVATE *dest);
typedef const char *(*fn_Tss2_RC_Decode)(TSS2_RC rc);

#define CTPM_FUNCTIONS(X) \
    X(tctildr, Tss2_TctiLdr_Initialize) X(tctildr, Tss2_TctiLdr_Finalize) \
    X(esys, Esys_Initialize) X(esys, Esys_Finalize) X(esys, Esys_SetTimeout) X(esys, Esys_Free) X(esys, Esys_CreatePrimary) X(esys, Esys_Create) \
    X(esys, Esys_Load) X(esys, Esys_ReadPublic) X(esys, Esys_Sign) X(esys, Esys_Unseal) X(esys, Esys_FlushContext) \
    X(esys, Esys_TR_Close) X(esys, Esys_StartAuthSession) X(esys, Esys_TRSess_SetAttributes) X(esys, Esys_PolicyPCR) \
    X(esys, Esys_PolicyGetDigest) X(esys, Esys_ContextSave) X(esys, Esys_ContextLoad) \
    X(mu, Tss2_MU_TPM2B_PUBLIC_Marshal) X(mu, Tss2_MU_TPM2B_PUBLIC_Unmarshal) \
    X(mu, Tss2_MU_TPM2B_PRIVATE_Marshal) X(mu, Tss2_MU_TPM2B_PRIVATE_Unmarshal)

// With the real headers installed, every pointer type above must match its function's prototype.
#if __has_include(<tss2/tss2_esys.h>) && __has_include(<tss2/tss2_tctildr.h>) && __has_include(<tss2/tss2_mu.h>) \
    && __has_include(<tss2/tss2_rc.h>)
#include <tss2/tss2_esys.h>
#include <tss2/tss2_mu.h>
#include <tss2/tss2_rc.h>
#include <tss2/tss2_tctildr.h>
#define CTPM_CHECK(library, name) \
    _Static_assert(__builtin_types_compatible_p(__typeof__(&name), fn_##name), #name " differs from tss2's prototype");
CTPM_FUNCTIONS(CTPM_CHECK)
CTPM_CHECK(rc, Tss2_RC_Decode)
#endif

static struct {
#define CTPM_FIELD(library, name) fn_##name name;
    CTPM_FUNCTIONS(CTPM_FIELD)
    fn_Tss2_RC_Decode Tss2_RC_Decode;
    char error[256];
    bool loaded;
} tss;

static pthread_once_t tss_once = PTHREAD_ONCE_INIT;

#if defined(__APPLE__)
#define CTPM_LIBRARY(name) "libtss2-" name ".0.dylib"
#else
#define CTPM_LIBRARY(name) "libtss2-" name ".so.0"
#endif

static void tss_load(void) {
    void *esys = dlopen(CTPM_LIBRARY("esys"), RTLD_NOW | RTLD_LOCAL);
    void *tctildr = esys ? dlopen(CTPM_LIBRARY("tctildr"), RTLD_NOW | RTLD_LOCAL) : NULL;
    void *mu = tctildr ? dlopen(CTPM_LIBRARY("mu"), RTLD_NOW | RTLD_LOCAL) : NULL;
    if (mu == NULL) {
        const char *error = dlerror();
        strncpy(tss.error, error ? error : "dlopen failed", sizeof tss.error - 1);
        return;
    }
#define CTPM_SYMBOL(library, name) \
    if ((tss.name = (fn_##name)dlsym(library, #name)) == NULL) { \
        strncpy(tss.error, #name " is missing from " CTPM_LIBRARY(#library), sizeof tss.error - 1); \
        return; \
    }
    CTPM_FUNCTIONS(CTPM_SYMBOL)
    // Only for messages: without it a response code is shown in hexadecimal.
    void *rc = dlopen(CTPM_LIBRARY("rc"), RTLD_NOW | RTLD_LOCAL);
    if (rc != NULL) tss.Tss2_RC_Decode = (fn_Tss2_RC_Decode)dlsym(rc, "Tss2_RC_Decode");
    tss.loaded = true;
}

struct ctpm {
    TSS2_TCTI_CONTEXT *tcti;
    ESYS_CONTEXT *esys;
};

struct ctpm_saved {
    TPMS_CONTEXT *context;
};

uint32_t ctpm_open(const char *tcti, ctpm **connection, char *message, size_t message_length) {
    *connection = NULL;
    if (message_length > 0) message[0] = 0;
    pthread_once(&tss_once, tss_load);
    if (!tss.loaded) {
        if (message_length > 0) {
            strncpy(message, tss.error, message_length - 1);
            message[message_length - 1] = 0;
        }
        return CTPM_NOT_INSTALLED;
    }
    ctpm *opened = calloc(1, sizeof *opened);
    if (opened == NULL) return TSS2_BASE_RC_MEMORY;
    TSS2_RC rc = tss.Tss2_TctiLdr_Initialize(tcti, &opened->tcti);
    if (rc != TSS2_RC_SUCCESS) {
        free(opened);
        return rc;
    }
    TSS2_ABI_VERSION abi = TSS2_ABI_VERSION_CURRENT;
    rc = tss.Esys_Initialize(&opened->esys, opened->tcti, &abi);
    if (rc != TSS2_RC_SUCCESS) {
        tss.Tss2_TctiLdr_Finalize(&opened->tcti);
        free(opened);
        return rc;
    }
    // A TPM that stops answering (a hung device, a remote swtpm behind a dead network) must
    // not hold the caller forever: 30 s per response, far above any command used here.
    rc = tss.Esys_SetTimeout(opened->esys, 30000);
    if (rc != TSS2_RC_SUCCESS) {
        ctpm_close(opened);
        return rc;
    }
    *connection = opened;
    return TSS2_RC_SUCCESS;
}

void ctpm_close(ctpm *connection) {
    if (connection == NULL) return;
    tss.Esys_Finalize(&connection->esys);
    tss.Tss2_TctiLdr_Finalize(&connection->tcti);
    free(connection);
}

const char *ctpm_describe(uint32_t rc) {
    pthread_once(&tss_once, tss_load);
    return tss.Tss2_RC_Decode ? tss.Tss2_RC_Decode(rc) : NULL;
}

uint32_t ctpm_flush(ctpm *connection, uint32_t handle) {
    TSS2_RC rc = tss.Esys_FlushContext(connection->esys, handle);
    // Not flushed (the TPM lost it already, or the connection broke): forget it here all the same.
    if (rc != TSS2_RC_SUCCESS) tss.Esys_TR_Close(connection->esys, &handle);
    return rc;
}

void ctpm_forget(ctpm *connection, uint32_t handle) {
    tss.Esys_TR_Close(connection->esys, &handle);
}

static void free_all(void *a, void *b, void *c, void *d) {
    tss.Esys_Free(a);
    tss.Esys_Free(b);
    tss.Esys_Free(c);
    tss.Esys_Free(d);
}

uint32_t ctpm_primary(ctpm *connection, uint32_t *handle) {
    // tpm2_createprimary -C o -g sha256 -G ecc256: the tools' default attributes for a primary
    // key, a restricted decryption key with AES-128-CFB for its children, no scheme, no unique.
    TPM2B_PUBLIC template = {0};
    template.publicArea.type = TPM2_ALG_ECC;
    template.publicArea.nameAlg = TPM2_ALG_SHA256;
    template.publicArea.objectAttributes = TPMA_OBJECT_RESTRICTED | TPMA_OBJECT_DECRYPT | TPMA_OBJECT_FIXEDTPM
        | TPMA_OBJECT_FIXEDPARENT | TPMA_OBJECT_SENSITIVEDATAORIGIN | TPMA_OBJECT_USERWITHAUTH;
    template.publicArea.parameters.eccDetail.symmetric.algorithm = TPM2_ALG_AES;
    template.publicArea.parameters.eccDetail.symmetric.keyBits.aes = 128;
    template.publicArea.parameters.eccDetail.symmetric.mode.aes = TPM2_ALG_CFB;
    template.publicArea.parameters.eccDetail.scheme.scheme = TPM2_ALG_NULL;
    template.publicArea.parameters.eccDetail.curveID = TPM2_ECC_NIST_P256;
    template.publicArea.parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
    TPM2B_SENSITIVE_CREATE sensitive = {0};
    TPM2B_DATA outside = {0};
    TPML_PCR_SELECTION creation = {0};
    TPM2B_PUBLIC *public_area = NULL;
    TPM2B_CREATION_DATA *creation_data = NULL;
    TPM2B_DIGEST *creation_hash = NULL;
    TPMT_TK_CREATION *ticket = NULL;
    TSS2_RC rc = tss.Esys_CreatePrimary(connection->esys, ESYS_TR_RH_OWNER, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE,
                                        &sensitive, &template, &outside, &creation, handle, &public_area, &creation_data,
                                        &creation_hash, &ticket);
    free_all(public_area, creation_data, creation_hash, ticket);
    return rc;
}

uint32_t ctpm_load(ctpm *connection, uint32_t parent, const uint8_t *public_area, size_t public_length,
                   const uint8_t *private_area, size_t private_length, uint32_t *handle) {
    TPM2B_PUBLIC in_public = {0};
    TPM2B_PRIVATE in_private = {0};
    size_t offset = 0;
    if (tss.Tss2_MU_TPM2B_PUBLIC_Unmarshal(public_area, public_length, &offset, &in_public) != TSS2_RC_SUCCESS
        || offset != public_length)
        return CTPM_BAD_BLOB;
    offset = 0;
    if (tss.Tss2_MU_TPM2B_PRIVATE_Unmarshal(private_area, private_length, &offset, &in_private) != TSS2_RC_SUCCESS
        || offset != private_length)
        return CTPM_BAD_BLOB;
    return tss.Esys_Load(connection->esys, parent, ESYS_TR_PASSWORD, ESYS_TR_NONE, ESYS_TR_NONE, &in_private, &in_public, handle);
}

uint32_t ctpm_p256_point(ctpm *connection, uint32_t handle, uint8_t point[65]) {
    TPM2B_PUBLIC *public_area = NULL;
    TPM2B_NAME *name = NULL, *qualified = NULL;
    TSS2_RC rc = tss.Esys_ReadPublic(connection->esys, handle, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &public_area, &name,
                                     &qualified);
    if (rc == TSS2_RC_SUCCESS) {
        const TPMT_PUBLIC *area = &public_area->publicArea;
        const TPMS_ECC_POINT *ecc = &area->unique.ecc;
        if (area->type != TPM2_ALG_ECC || area->parameters.eccDetail.curveID != TPM2_ECC_NIST_P256 || ecc->x.size == 0
            || ecc->x.size > 32 || ecc->y.size == 0 || ecc->y.size > 32) {
            rc = CTPM_NOT_P256;
        } else {
            // Coordinates shorter than 32 bytes lost leading zeros.
            memset(point, 0, 65);
            point[0] = 4;
            memcpy(point + 1 + 32 - ecc->x.size, ecc->x.buffer, ecc->x.size);
            memcpy(point + 33 + 32 - ecc->y.size, ecc->y.buffer, ecc->y.size);
        }
    }
    free_all(public_area, name, qualified, NULL);
    return rc;
}

uint32_t ctpm_save(ctpm *connection, uint32_t handle, ctpm_saved **saved) {
    *saved = NULL;
    ctpm_saved *made = calloc(1, sizeof *made);
    if (made == NULL) return TSS2_BASE_RC_MEMORY;
    TSS2_RC rc = tss.Esys_ContextSave(connection->esys, handle, &made->context);
    if (rc != TSS2_RC_SUCCESS) {
        free(made);
        return rc;
    }
    *saved = made;
    return rc;
}

uint32_t ctpm_restore(ctpm *connection, const ctpm_saved *saved, uint32_t *handle) {
    return tss.Esys_ContextLoad(connection->esys, saved->context, handle);
}

void ctpm_saved_free(ctpm_saved *saved) {
    if (saved == NULL) return;
    tss.Esys_Free(saved->context);
    free(saved);
}

static TPML_PCR_SELECTION pcr_selection(uint32_t pcrs) {
    TPML_PCR_SELECTION selection = {0};
    selection.count = 1;
    selection.pcrSelections[0].hash = TPM2_ALG_SHA256;
    selection.pcrSelections[0].sizeofSelect = 3;
    for (unsigned pcr = 0; pcr < 24; pcr++) {
        if (pcrs & (1U << pcr)) selection.pcrSelections[0].pcrSelect[pcr / 8] |= (uint8_t)(1U << (pcr % 8));
    }
    return selection;
}

// A session: a policy session bound to `pcrs` (with `pcrs` non-zero; a trial one with `trial`),
// or an HMAC session; salted by `salt_key` and encrypting the command's first parameter
// (`decrypt`) or the response's (`encrypt`) when asked. Flushed by the caller.
static TSS2_RC start_session(ctpm *connection, uint32_t pcrs, bool trial, ESYS_TR salt_key, TPMA_SESSION encryption,
                             ESYS_TR *session) {
    TPMT_SYM_DEF symmetric = {.algorithm = TPM2_ALG_NULL};
    if (encryption != 0) {
        symmetric.algorithm = TPM2_ALG_AES;
        symmetric.keyBits.aes = 128;
        symmetric.mode.aes = TPM2_ALG_CFB;
    }
    TPM2_SE type = pcrs == 0 ? TPM2_SE_HMAC : (trial ? TPM2_SE_TRIAL : TPM2_SE_POLICY);
    TSS2_RC rc = tss.Esys_StartAuthSession(connection->esys, encryption != 0 ? salt_key : ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE,
                                           ESYS_TR_NONE, ESYS_TR_NONE, NULL, type, &symmetric, TPM2_ALG_SHA256, session);
    if (rc != TSS2_RC_SUCCESS) return rc;
    rc = tss.Esys_TRSess_SetAttributes(connection->esys, *session, TPMA_SESSION_CONTINUESESSION | encryption, 0xff);
    if (rc == TSS2_RC_SUCCESS && pcrs != 0) {
        TPM2B_DIGEST current = {0};  // empty: the TPM uses the PCRs' current values
        TPML_PCR_SELECTION selection = pcr_selection(pcrs);
        rc = tss.Esys_PolicyPCR(connection->esys, *session, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &current, &selection);
    }
    if (rc != TSS2_RC_SUCCESS) ctpm_flush(connection, *session);
    return rc;
}

uint32_t ctpm_sign_p256(ctpm *connection, uint32_t key, const uint8_t digest[32], uint32_t pcrs, uint8_t r[32], uint8_t s[32]) {
    ESYS_TR session = ESYS_TR_PASSWORD;
    if (pcrs != 0) {
        TSS2_RC rc = start_session(connection, pcrs, false, ESYS_TR_NONE, 0, &session);
        if (rc != TSS2_RC_SUCCESS) return rc;
    }
    TPM2B_DIGEST in_digest = {.size = 32};
    memcpy(in_digest.buffer, digest, 32);
    TPMT_SIG_SCHEME scheme = {.scheme = TPM2_ALG_ECDSA};
    scheme.details.ecdsa.hashAlg = TPM2_ALG_SHA256;
    TPMT_TK_HASHCHECK validation = {.tag = TPM2_ST_HASHCHECK, .hierarchy = TPM2_RH_NULL};
    TPMT_SIGNATURE *signature = NULL;
    TSS2_RC rc = tss.Esys_Sign(connection->esys, key, session, ESYS_TR_NONE, ESYS_TR_NONE, &in_digest, &scheme, &validation,
                               &signature);
    if (pcrs != 0) ctpm_flush(connection, session);
    if (rc == TSS2_RC_SUCCESS) {
        const TPMS_SIGNATURE_ECC *ecdsa = &signature->signature.ecdsa;
        if (signature->sigAlg != TPM2_ALG_ECDSA || ecdsa->signatureR.size == 0 || ecdsa->signatureR.size > 32
            || ecdsa->signatureS.size == 0 || ecdsa->signatureS.size > 32) {
            rc = CTPM_MALFORMED;
        } else {
            memset(r, 0, 32);
            memset(s, 0, 32);
            memcpy(r + 32 - ecdsa->signatureR.size, ecdsa->signatureR.buffer, ecdsa->signatureR.size);
            memcpy(s + 32 - ecdsa->signatureS.size, ecdsa->signatureS.buffer, ecdsa->signatureS.size);
        }
    }
    tss.Esys_Free(signature);
    return rc;
}

uint32_t ctpm_unseal(ctpm *connection, uint32_t parent, uint32_t item, uint32_t pcrs, uint8_t *data, size_t capacity,
                     size_t *length) {
    *length = 0;
    ESYS_TR session;
    TSS2_RC rc = start_session(connection, pcrs, false, parent, TPMA_SESSION_ENCRYPT, &session);
    if (rc != TSS2_RC_SUCCESS) return rc;
    TPM2B_SENSITIVE_DATA *out = NULL;
    rc = tss.Esys_Unseal(connection->esys, item, session, ESYS_TR_NONE, ESYS_TR_NONE, &out);
    ctpm_flush(connection, session);
    if (rc == TSS2_RC_SUCCESS) {
        if (out->size > capacity) {
            rc = CTPM_TOO_SMALL;
        } else {
            memcpy(data, out->buffer, out->size);
            *length = out->size;
        }
        explicit_bzero(out->buffer, sizeof out->buffer);
    }
    tss.Esys_Free(out);
    return rc;
}

static TSS2_RC policy_digest(ctpm *connection, uint32_t pcrs, TPM2B_DIGEST *digest) {
    ESYS_TR session;
    TSS2_RC rc = start_session(connection, pcrs, true, ESYS_TR_NONE, 0, &session);
    if (rc != TSS2_RC_SUCCESS) return rc;
    TPM2B_DIGEST *computed = NULL;
    rc = tss.Esys_PolicyGetDigest(connection->esys, session, ESYS_TR_NONE, ESYS_TR_NONE, ESYS_TR_NONE, &computed);
    ctpm_flush(connection, session);
    if (rc == TSS2_RC_SUCCESS) *digest = *computed;
    tss.Esys_Free(computed);
    return rc;
}

uint32_t ctpm_create(ctpm *connection, uint32_t parent, const uint8_t *data, size_t data_length, uint32_t pcrs,
                     uint8_t *public_area, size_t *public_length, uint8_t *private_area, size_t *private_length) {
    size_t public_capacity = *public_length, private_capacity = *private_length;
    *public_length = 0;
    *private_length = 0;
    TPM2B_PUBLIC template = {0};
    TPMT_PUBLIC *area = &template.publicArea;
    area->nameAlg = TPM2_ALG_SHA256;
    area->objectAttributes = TPMA_OBJECT_FIXEDTPM | TPMA_OBJECT_FIXEDPARENT | (pcrs == 0 ? TPMA_OBJECT_USERWITHAUTH : 0);
    if (pcrs != 0) {
        TSS2_RC rc = policy_digest(connection, pcrs, &area->authPolicy);
        if (rc != TSS2_RC_SUCCESS) return rc;
    }
    TPM2B_SENSITIVE_CREATE sensitive = {0};
    ESYS_TR session = ESYS_TR_PASSWORD;
    if (data != NULL) {
        // As `tpm2_create -i`: a sealed-data object; with a policy it is also exempt from the
        // dictionary-attack lockout (a PCR mismatch is not a guessed password).
        if (data_length > sizeof sensitive.sensitive.data.buffer) return CTPM_TOO_SMALL;
        area->type = TPM2_ALG_KEYEDHASH;
        area->parameters.keyedHashDetail.scheme.scheme = TPM2_ALG_NULL;
        if (pcrs != 0) area->objectAttributes |= TPMA_OBJECT_NODA;
        sensitive.sensitive.data.size = (UINT16)data_length;
        memcpy(sensitive.sensitive.data.buffer, data, data_length);
        TSS2_RC rc = start_session(connection, 0, false, parent, TPMA_SESSION_DECRYPT, &session);
        if (rc != TSS2_RC_SUCCESS) {
            explicit_bzero(&sensitive, sizeof sensitive);
            return rc;
        }
    } else {
        // As `tpm2_create -G ecc256:ecdsa-sha256 -a sign|fixedtpm|fixedparent|sensitivedataorigin[|userwithauth]`.
        area->type = TPM2_ALG_ECC;
        area->objectAttributes |= TPMA_OBJECT_SIGN_ENCRYPT | TPMA_OBJECT_SENSITIVEDATAORIGIN;
        area->parameters.eccDetail.symmetric.algorithm = TPM2_ALG_NULL;
        area->parameters.eccDetail.scheme.scheme = TPM2_ALG_ECDSA;
        area->parameters.eccDetail.scheme.details.ecdsa.hashAlg = TPM2_ALG_SHA256;
        area->parameters.eccDetail.curveID = TPM2_ECC_NIST_P256;
        area->parameters.eccDetail.kdf.scheme = TPM2_ALG_NULL;
    }
    TPM2B_DATA outside = {0};
    TPML_PCR_SELECTION creation = {0};
    TPM2B_PRIVATE *out_private = NULL;
    TPM2B_PUBLIC *out_public = NULL;
    TPM2B_CREATION_DATA *creation_data = NULL;
    TPM2B_DIGEST *creation_hash = NULL;
    TPMT_TK_CREATION *ticket = NULL;
    TSS2_RC rc = tss.Esys_Create(connection->esys, parent, session, ESYS_TR_NONE, ESYS_TR_NONE, &sensitive, &template, &outside,
                                 &creation, &out_private, &out_public, &creation_data, &creation_hash, &ticket);
    explicit_bzero(&sensitive, sizeof sensitive);
    if (session != ESYS_TR_PASSWORD) ctpm_flush(connection, session);
    if (rc == TSS2_RC_SUCCESS) {
        size_t offset = 0;
        if (tss.Tss2_MU_TPM2B_PUBLIC_Marshal(out_public, public_area, public_capacity, &offset) != TSS2_RC_SUCCESS) {
            rc = CTPM_TOO_SMALL;
        } else {
            *public_length = offset;
            offset = 0;
            if (tss.Tss2_MU_TPM2B_PRIVATE_Marshal(out_private, private_area, private_capacity, &offset) != TSS2_RC_SUCCESS) {
                rc = CTPM_TOO_SMALL;
                *public_length = 0;
            } else {
                *private_length = offset;
            }
        }
    }
    free_all(out_private, out_public, creation_data, creation_hash);
    tss.Esys_Free(ticket);
    return rc;
}
