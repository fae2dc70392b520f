#ifndef CTPM2_H
#define CTPM2_H

// The TPM 2.0 for HardwareKeys, in-process through the TPM Software Stack's Enhanced System API
// (ESYS, tpm2-tss). The libraries (libtss2-esys, libtss2-tctildr, libtss2-mu, libtss2-rc) are
// loaded with dlopen at the first use, never linked: a program that does not touch the TPM maps
// none of them, and the package builds without them (the TSS2 type headers are vendored beside
// the C file; with Debian's libtss2-dev installed the build also checks every prototype used
// against tss2_esys.h). The header names no TSS2 type: return values are TSS2_RC (TPM and
// TSS response codes) as uint32_t, objects are ESYS_TR handles (uint32_t), a connection and a
// saved object context are opaque pointers. Nothing here is thread-safe: one caller at a time
// per connection (HardwareKeys' TPM2.lock).

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// A connection to the TPM: a TCTI and its ESYS context.
typedef struct ctpm ctpm;
/// A transient object's saved context (TPM2_ContextSave), loaded again with ctpm_restore.
typedef struct ctpm_saved ctpm_saved;

/// Return values that are not a TSS2_RC: the libraries are not installed, blobs that do not
/// unmarshal, a key that is not ECC P-256, a buffer too small, an answer of the wrong shape.
#define CTPM_NOT_INSTALLED 0xFFFF0001U
#define CTPM_BAD_BLOB 0xFFFF0002U
#define CTPM_NOT_P256 0xFFFF0003U
#define CTPM_TOO_SMALL 0xFFFF0004U
#define CTPM_MALFORMED 0xFFFF0005U

/// Loads the libraries (once per process), then opens the TCTI `tcti` ("swtpm:host=…,port=…",
/// "device:/dev/tpmrm0"; NULL: the loader's default, as tpm2-tools without a TCTI) and an
/// ESYS context on it. On CTPM_NOT_INSTALLED `message` gets dlerror()'s text.
uint32_t ctpm_open(const char *tcti, ctpm **connection, char *message, size_t message_length);
/// Closes the ESYS context and the TCTI (objects still loaded are not flushed).
void ctpm_close(ctpm *connection);

/// The owner hierarchy's primary key, as `tpm2_createprimary -C o -g sha256 -G ecc256` makes
/// it (ECC P-256, AES-128-CFB, restricted decrypt): the same key from the same seed, so blobs
/// made under either load under the other.
uint32_t ctpm_primary(ctpm *connection, uint32_t *handle);
/// Loads an object from its TPM2B_PUBLIC and TPM2B_PRIVATE (marshaled, as `tpm2_create -u/-r`
/// writes them; nothing may follow either) under `parent`.
uint32_t ctpm_load(ctpm *connection, uint32_t parent, const uint8_t *public_area, size_t public_length,
                   const uint8_t *private_area, size_t private_length, uint32_t *handle);
/// The loaded object's public key as an uncompressed P-256 point (0x04, X, Y), as the TPM
/// reports it; CTPM_NOT_P256 for any other object.
uint32_t ctpm_p256_point(ctpm *connection, uint32_t handle, uint8_t point[65]);
/// Flushes a loaded object or session; the handle is gone even when the TPM answers with an error.
uint32_t ctpm_flush(ctpm *connection, uint32_t handle);

/// Forgets a handle here without flushing it (it may name another process's object now).
void ctpm_forget(ctpm *connection, uint32_t handle);

/// Saves a loaded object's context (it stays loaded; flush it after).
uint32_t ctpm_save(ctpm *connection, uint32_t handle, ctpm_saved **saved);
/// Loads a saved context again: a new handle for the same object, without its parent.
uint32_t ctpm_restore(ctpm *connection, const ctpm_saved *saved, uint32_t *handle);
void ctpm_saved_free(ctpm_saved *saved);

/// Signs a SHA-256 digest with the loaded ECC key (ECDSA): r and s, 32 bytes each. With
/// `pcrs` (a bit per PCR of the SHA-256 bank, 0 for none) the key is used through a policy
/// session bound to those PCRs' current values; otherwise with its empty password.
uint32_t ctpm_sign_p256(ctpm *connection, uint32_t key, const uint8_t digest[32], uint32_t pcrs,
                        uint8_t r[32], uint8_t s[32]);

/// Unseals a loaded sealed-data object into `data` (up to `capacity` bytes; `*length` is set).
/// The answer travels encrypted (a session salted by `parent`, AES-128-CFB), so the bytes are
/// never in clear between the TPM and this process. `pcrs` as for ctpm_sign_p256.
uint32_t ctpm_unseal(ctpm *connection, uint32_t parent, uint32_t item, uint32_t pcrs,
                     uint8_t *data, size_t capacity, size_t *length);

/// Creates an object under `parent` and writes its marshaled TPM2B_PUBLIC and TPM2B_PRIVATE
/// (as tpm2-tools writes them; `*public_length` and `*private_length` are the capacities in,
/// the lengths out). With `data` (sealing): a sealed-data object holding those bytes, sent
/// encrypted (a session salted by `parent`); without: an ECDSA P-256 signing key generated in
/// the TPM. With `pcrs` non-zero the object has no password use: its policy is those PCRs'
/// current values (computed by a trial session, as `tpm2_createpolicy --policy-pcr` does).
uint32_t ctpm_create(ctpm *connection, uint32_t parent, const uint8_t *data, size_t data_length, uint32_t pcrs,
                     uint8_t *public_area, size_t *public_length, uint8_t *private_area, size_t *private_length);

/// A TSS2_RC in words (libtss2-rc), or NULL when that library is not installed.
const char *ctpm_describe(uint32_t rc);

#ifdef __cplusplus
}
#endif

#endif
