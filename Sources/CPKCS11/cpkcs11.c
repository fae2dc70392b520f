#include <stdio.h>
// PKCS #11 through one dlopen'd module. pkcs11.h is the p11-kit project's header (vendored
// beside this file; its notice grants unlimited permission to copy it with the notice kept).
#include "cpkcs11.h"
#include "pkcs11.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct cpk_module {
    char *path;
    void *library;
    CK_FUNCTION_LIST_PTR functions;
    struct cpk_module *next;
};

// Modules loaded in this process, by the path they were loaded from. Never unloaded: a module
// finalized while another part of the process still holds a session would break it, and
// C_Initialize may be called only once per process.
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cpk_module *registry = NULL;

unsigned long cpk_module_load(const char *path, int fd, cpk_module **module, char *message, size_t message_length) {
    if (message_length > 0) message[0] = 0;
    pthread_mutex_lock(&registry_lock);
    for (struct cpk_module *m = registry; m != NULL; m = m->next) {
        if (strcmp(m->path, path) == 0) {
            *module = m;
            pthread_mutex_unlock(&registry_lock);
            return CKR_OK;
        }
    }
    // The very file the caller checked, through its descriptor (a name could be replaced
    // between the check and the load). The loader takes a name it saw before for the library
    // it loaded then (an earlier /proc/self/fd/N with the same N): each load spells the path
    // anew ("/proc/self/fd/./N", "/proc/self/fd/././N", ...), never the plain "/proc/self/fd/N"
    // that a library loaded from memory (the shredder's VolatileLibrary) is known by.
    static unsigned loads = 0;
    char load_path[256];
    if (fd >= 0) {
        unsigned spelling = ++loads;
        if (spelling > 100) { pthread_mutex_unlock(&registry_lock); return CPK_LOAD_DLOPEN_FAILED; }
        size_t used = (size_t)snprintf(load_path, sizeof load_path, "/proc/self/fd/");
        for (unsigned i = 0; i < spelling && used + 2 < sizeof load_path - 16; i++) { load_path[used++] = '.'; load_path[used++] = '/'; }
        snprintf(load_path + used, sizeof load_path - used, "%d", fd);
    }
    void *library = dlopen(fd >= 0 ? load_path : path, RTLD_NOW | RTLD_LOCAL);
    if (library == NULL) {
        const char *error = dlerror();
        if (error != NULL && message_length > 0) {
            strncpy(message, error, message_length - 1);
            message[message_length - 1] = 0;
        }
        pthread_mutex_unlock(&registry_lock);
        return CPK_LOAD_DLOPEN_FAILED;
    }
    CK_C_GetFunctionList get = (CK_C_GetFunctionList)dlsym(library, "C_GetFunctionList");
    if (get == NULL) {
        dlclose(library);
        pthread_mutex_unlock(&registry_lock);
        return CPK_LOAD_NO_ENTRY_POINT;
    }
    CK_FUNCTION_LIST_PTR functions = NULL;
    CK_RV rv = get(&functions);
    if (rv != CKR_OK || functions == NULL) {
        dlclose(library);
        pthread_mutex_unlock(&registry_lock);
        return rv != CKR_OK ? rv : CPK_LOAD_NO_FUNCTION_LIST;
    }
    CK_C_INITIALIZE_ARGS args;
    memset(&args, 0, sizeof args);
    args.flags = CKF_OS_LOCKING_OK;
    rv = functions->C_Initialize(&args);
    // Already initialized by another loader in this process (the same library reached through
    // another path): usable as it is.
    if (rv != CKR_OK && rv != CKR_CRYPTOKI_ALREADY_INITIALIZED) {
        dlclose(library);
        pthread_mutex_unlock(&registry_lock);
        return rv;
    }
    struct cpk_module *m = calloc(1, sizeof *m);
    char *copy = strdup(path);
    if (m == NULL || copy == NULL) {
        free(m);
        free(copy);
        pthread_mutex_unlock(&registry_lock);
        return CKR_HOST_MEMORY;
    }
    m->path = copy;
    m->library = library;
    m->functions = functions;
    m->next = registry;
    registry = m;
    *module = m;
    pthread_mutex_unlock(&registry_lock);
    return CKR_OK;
}

unsigned long cpk_slots(cpk_module *module, unsigned long *slots, unsigned long *count) {
    CK_ULONG n = *count;
    CK_RV rv = module->functions->C_GetSlotList(CK_TRUE, slots, &n);
    *count = n;
    return rv;
}

static void copy_padded(uint8_t *to, const unsigned char *from, size_t n) { memcpy(to, from, n); }

unsigned long cpk_token_info(cpk_module *module, unsigned long slot, uint8_t label[32], uint8_t manufacturer[32],
                             uint8_t model[16], uint8_t serial[16], unsigned long *flags) {
    CK_TOKEN_INFO info;
    memset(&info, 0, sizeof info);
    CK_RV rv = module->functions->C_GetTokenInfo(slot, &info);
    if (rv != CKR_OK) return rv;
    copy_padded(label, info.label, 32);
    copy_padded(manufacturer, info.manufacturerID, 32);
    copy_padded(model, info.model, 16);
    copy_padded(serial, info.serialNumber, 16);
    *flags = info.flags;
    return CKR_OK;
}

unsigned long cpk_slot_info(cpk_module *module, unsigned long slot, uint8_t description[64], uint8_t manufacturer[32]) {
    CK_SLOT_INFO info;
    memset(&info, 0, sizeof info);
    CK_RV rv = module->functions->C_GetSlotInfo(slot, &info);
    if (rv != CKR_OK) return rv;
    copy_padded(description, info.slotDescription, 64);
    copy_padded(manufacturer, info.manufacturerID, 32);
    return CKR_OK;
}

unsigned long cpk_library_info(cpk_module *module, uint8_t description[32], uint8_t manufacturer[32]) {
    CK_INFO info;
    memset(&info, 0, sizeof info);
    CK_RV rv = module->functions->C_GetInfo(&info);
    if (rv != CKR_OK) return rv;
    copy_padded(description, info.libraryDescription, 32);
    copy_padded(manufacturer, info.manufacturerID, 32);
    return CKR_OK;
}

unsigned long cpk_open_session(cpk_module *module, unsigned long slot, unsigned long *session) {
    CK_SESSION_HANDLE handle = 0;
    CK_RV rv = module->functions->C_OpenSession(slot, CKF_SERIAL_SESSION, NULL, NULL, &handle);
    *session = handle;
    return rv;
}

unsigned long cpk_close_session(cpk_module *module, unsigned long session) {
    return module->functions->C_CloseSession(session);
}

unsigned long cpk_login(cpk_module *module, unsigned long session, const uint8_t *pin, size_t pin_length) {
    CK_RV rv = module->functions->C_Login(session, CKU_USER, (CK_UTF8CHAR_PTR)pin, pin_length);
    return rv == CKR_USER_ALREADY_LOGGED_IN ? CKR_OK : rv;
}

unsigned long cpk_find(cpk_module *module, unsigned long session, unsigned long object_class, unsigned long key_type,
                       const uint8_t *label, size_t label_length, const uint8_t *id, size_t id_length,
                       unsigned long *objects, unsigned long *count) {
    CK_OBJECT_CLASS klass = object_class;
    CK_KEY_TYPE type = key_type;
    CK_ATTRIBUTE template[4];
    CK_ULONG n = 0;
    template[n].type = CKA_CLASS; template[n].pValue = &klass; template[n].ulValueLen = sizeof klass; n++;
    if (key_type != ~0UL) {
        template[n].type = CKA_KEY_TYPE; template[n].pValue = &type; template[n].ulValueLen = sizeof type; n++;
    }
    if (label != NULL) {
        template[n].type = CKA_LABEL; template[n].pValue = (void *)label; template[n].ulValueLen = label_length; n++;
    }
    if (id != NULL) {
        template[n].type = CKA_ID; template[n].pValue = (void *)id; template[n].ulValueLen = id_length; n++;
    }
    CK_RV rv = module->functions->C_FindObjectsInit(session, template, n);
    if (rv != CKR_OK) return rv;
    CK_ULONG found = 0;
    rv = module->functions->C_FindObjects(session, objects, *count, &found);
    CK_RV final = module->functions->C_FindObjectsFinal(session);
    *count = found;
    return rv != CKR_OK ? rv : final;
}

unsigned long cpk_attribute(cpk_module *module, unsigned long session, unsigned long object, unsigned long type,
                            uint8_t *value, unsigned long *length) {
    CK_ATTRIBUTE attribute;
    attribute.type = type;
    attribute.pValue = value;
    attribute.ulValueLen = value == NULL ? 0 : *length;
    CK_RV rv = module->functions->C_GetAttributeValue(session, object, &attribute, 1);
    if (rv == CKR_OK && attribute.ulValueLen == (CK_ULONG)-1) return CKR_ATTRIBUTE_TYPE_INVALID;
    *length = attribute.ulValueLen;
    return rv;
}

unsigned long cpk_sign(cpk_module *module, unsigned long session, unsigned long key, unsigned long mechanism_type,
                       unsigned int pss_hash_bits, const uint8_t *data, size_t data_length,
                       uint8_t *signature, unsigned long *signature_length) {
    CK_MECHANISM mechanism;
    CK_RSA_PKCS_PSS_PARAMS pss;
    memset(&mechanism, 0, sizeof mechanism);
    mechanism.mechanism = mechanism_type;
    if (pss_hash_bits != 0) {
        switch (pss_hash_bits) {
        case 256: pss.hashAlg = CKM_SHA256; pss.mgf = CKG_MGF1_SHA256; pss.sLen = 32; break;
        case 384: pss.hashAlg = CKM_SHA384; pss.mgf = CKG_MGF1_SHA384; pss.sLen = 48; break;
        case 512: pss.hashAlg = CKM_SHA512; pss.mgf = CKG_MGF1_SHA512; pss.sLen = 64; break;
        default: return CKR_MECHANISM_PARAM_INVALID;
        }
        mechanism.pParameter = &pss;
        mechanism.ulParameterLen = sizeof pss;
    }
    CK_RV rv = module->functions->C_SignInit(session, &mechanism, key);
    if (rv != CKR_OK) return rv;
    CK_ULONG length = *signature_length;
    rv = module->functions->C_Sign(session, (CK_BYTE_PTR)data, data_length, signature, &length);
    *signature_length = length;
    return rv;
}
