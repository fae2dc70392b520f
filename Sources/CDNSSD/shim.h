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
#endif
