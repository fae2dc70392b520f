#ifndef SECUREFOUNDATION_CDNSSD_SHIM_H
#define SECUREFOUNDATION_CDNSSD_SHIM_H
// Apple platforms: the SDK's dns_sd.h. Linux: Avahi's compatibility header
// (libavahi-compat-libdnssd-dev), found by its directory under /usr/include rather than through
// pkg-config, whose -D_REENTRANT SwiftPM refuses for a system library.
#if __has_include(<dns_sd.h>)
#include <dns_sd.h>
#else
#include <avahi-compat-libdns_sd/dns_sd.h>
#endif

// The calls DeviceSharing makes, as sf_DNSService…: on Apple platforms the SDK's functions
// themselves; on Linux, Avahi's libdns_sd.so.1 is loaded (dlopen, RTLD_NOW | RTLD_LOCAL) only at
// the first discovery call. Linked into the program instead, it brought ten more shared
// libraries (the Avahi client, D-Bus, libsystemd, libgcrypt, three compressors...) that the
// loader mapped and relocated at every start of every command, whether it shared anything or
// not. When the library cannot be loaded, the calls that start an operation return
// SF_DNSSD_NOT_INSTALLED; the others are only reached with a reference those returned.
#define SF_DNSSD_NOT_INSTALLED (-65544) /* kDNSServiceErr_Unsupported */

#if defined(__linux__)
#include <dlfcn.h>
#include <stddef.h>

/// The library's handle, loaded once; NULL when it is not installed.
static inline void *sf_dnssd_library(void) {
    static void *handle = NULL;
    static int tried = 0;
    if (__atomic_load_n(&tried, __ATOMIC_ACQUIRE)) return __atomic_load_n(&handle, __ATOMIC_ACQUIRE);
    // dlopen is thread-safe and counts references: two threads racing here get the same handle.
    void *loaded = dlopen("libdns_sd.so.1", RTLD_NOW | RTLD_LOCAL);
    __atomic_store_n(&handle, loaded, __ATOMIC_RELEASE);
    __atomic_store_n(&tried, 1, __ATOMIC_RELEASE);
    return loaded;
}

static inline void *sf_dnssd_symbol(const char *name) {
    void *library = sf_dnssd_library();
    return library ? dlsym(library, name) : NULL;
}

#define SF_DNSSD_CALL(type, name, fallback, params, args) \
    typedef type (*sf_##name##_fn) params; \
    static inline type sf_##name params { \
        sf_##name##_fn function = (sf_##name##_fn)sf_dnssd_symbol(#name); \
        if (!function) { fallback; } \
        return function args; \
    }
#else
#define SF_DNSSD_CALL(type, name, fallback, params, args) \
    static inline type sf_##name params { return name args; }
#endif

SF_DNSSD_CALL(DNSServiceErrorType, DNSServiceBrowse, return SF_DNSSD_NOT_INSTALLED,
    (DNSServiceRef *sdRef, DNSServiceFlags flags, uint32_t interfaceIndex, const char *regtype,
     const char *domain, DNSServiceBrowseReply callBack, void *context),
    (sdRef, flags, interfaceIndex, regtype, domain, callBack, context))

SF_DNSSD_CALL(DNSServiceErrorType, DNSServiceResolve, return SF_DNSSD_NOT_INSTALLED,
    (DNSServiceRef *sdRef, DNSServiceFlags flags, uint32_t interfaceIndex, const char *name,
     const char *regtype, const char *domain, DNSServiceResolveReply callBack, void *context),
    (sdRef, flags, interfaceIndex, name, regtype, domain, callBack, context))

SF_DNSSD_CALL(DNSServiceErrorType, DNSServiceQueryRecord, return SF_DNSSD_NOT_INSTALLED,
    (DNSServiceRef *sdRef, DNSServiceFlags flags, uint32_t interfaceIndex, const char *fullname,
     uint16_t rrtype, uint16_t rrclass, DNSServiceQueryRecordReply callBack, void *context),
    (sdRef, flags, interfaceIndex, fullname, rrtype, rrclass, callBack, context))

SF_DNSSD_CALL(DNSServiceErrorType, DNSServiceRegister, return SF_DNSSD_NOT_INSTALLED,
    (DNSServiceRef *sdRef, DNSServiceFlags flags, uint32_t interfaceIndex, const char *name,
     const char *regtype, const char *domain, const char *host, uint16_t port, uint16_t txtLen,
     const void *txtRecord, DNSServiceRegisterReply callBack, void *context),
    (sdRef, flags, interfaceIndex, name, regtype, domain, host, port, txtLen, txtRecord, callBack, context))

SF_DNSSD_CALL(int, DNSServiceRefSockFD, return -1, (DNSServiceRef sdRef), (sdRef))

SF_DNSSD_CALL(DNSServiceErrorType, DNSServiceProcessResult, return SF_DNSSD_NOT_INSTALLED,
    (DNSServiceRef sdRef), (sdRef))

#if defined(__linux__)
static inline void sf_DNSServiceRefDeallocate(DNSServiceRef sdRef) {
    void (*function)(DNSServiceRef) = (void (*)(DNSServiceRef))sf_dnssd_symbol("DNSServiceRefDeallocate");
    if (function) function(sdRef);
}
#else
static inline void sf_DNSServiceRefDeallocate(DNSServiceRef sdRef) { DNSServiceRefDeallocate(sdRef); }
#endif

#endif
