#ifndef CPKCS11_H
#define CPKCS11_H

// PKCS #11 (Cryptoki) for HardwareKeys: one module loaded with dlopen, initialized once per
// process, reached through these functions only. The header names no PKCS #11 type: return
// values are the module's CK_RV (CKR_*) as unsigned long, handles are unsigned long, so
// nothing of the vendored pkcs11.h reaches a Swift module.

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/// A loaded and initialized module (opaque; lives until the process ends).
typedef struct cpk_module cpk_module;

/// Return values of cpk_module_load that are not a CKR_ value of the module.
#define CPK_LOAD_DLOPEN_FAILED 0xFFFF0001UL
#define CPK_LOAD_NO_ENTRY_POINT 0xFFFF0002UL
#define CPK_LOAD_NO_FUNCTION_LIST 0xFFFF0003UL
/// A buffer given was too small (the needed size is written back).
#define CPK_BUFFER_TOO_SMALL 0x150UL

/// Loads the module at `path` (already checked by the caller) with dlopen, calls
/// C_GetFunctionList and C_Initialize (CKF_OS_LOCKING_OK) the first time this path is loaded
/// in the process; later calls return the same module. With `fd` >= 0 (the caller's open
/// descriptor of the checked file) the library is loaded through /proc/self/fd/FD, so the file
/// loaded is the file checked; `path` then only names it. On a dlopen failure, `message` gets
/// dlerror()'s text (truncated to `message_length`).
unsigned long cpk_module_load(const char *path, int fd, cpk_module **module, char *message, size_t message_length);

/// The slots that have a token, up to `*count`; `*count` is set to the number found.
unsigned long cpk_slots(cpk_module *module, unsigned long *slots, unsigned long *count);

/// The token's label, manufacturer, model (blank-padded, not terminated; 32, 32, 16 and 16
/// bytes) and flags.
unsigned long cpk_token_info(cpk_module *module, unsigned long slot, uint8_t label[32], uint8_t manufacturer[32],
                             uint8_t model[16], uint8_t serial[16], unsigned long *flags);

/// The slot's description and manufacturer (blank-padded, 64 and 32 bytes), and its id.
unsigned long cpk_slot_info(cpk_module *module, unsigned long slot, uint8_t description[64], uint8_t manufacturer[32]);

/// The library's description and manufacturer (blank-padded, 32 bytes each).
unsigned long cpk_library_info(cpk_module *module, uint8_t description[32], uint8_t manufacturer[32]);

unsigned long cpk_open_session(cpk_module *module, unsigned long slot, unsigned long *session);
unsigned long cpk_close_session(cpk_module *module, unsigned long session);

/// Logs the normal user in (CKU_USER); a token already logged in is not an error.
unsigned long cpk_login(cpk_module *module, unsigned long session, const uint8_t *pin, size_t pin_length);

/// Object handles of class `object_class` matching the label and id given (NULL: any), up to
/// `*count`; `*count` is set to the number found. `key_type` ~0UL: any key type.
unsigned long cpk_find(cpk_module *module, unsigned long session, unsigned long object_class, unsigned long key_type,
                       const uint8_t *label, size_t label_length, const uint8_t *id, size_t id_length,
                       unsigned long *objects, unsigned long *count);

/// One attribute's value: with `value` NULL, `*length` gets the size; otherwise up to
/// `*length` bytes are written and `*length` is set to the size. An attribute the object
/// does not have or that is sensitive returns its CKR_ value.
unsigned long cpk_attribute(cpk_module *module, unsigned long session, unsigned long object, unsigned long type,
                            uint8_t *value, unsigned long *length);

/// Signs `data` with `key` under `mechanism`. When `pss_hash_bits` is 256, 384 or 512 the
/// mechanism gets CK_RSA_PKCS_PSS_PARAMS with that SHA-2, MGF1 with the same hash and a salt
/// of the hash's length. `*signature_length` is the buffer's size in, the signature's out.
unsigned long cpk_sign(cpk_module *module, unsigned long session, unsigned long key, unsigned long mechanism,
                       unsigned int pss_hash_bits, const uint8_t *data, size_t data_length,
                       uint8_t *signature, unsigned long *signature_length);

#ifdef __cplusplus
}
#endif

#endif
