#include "cbuildinfo.h"

#ifndef SECUREFOUNDATION_VERSION
#define SECUREFOUNDATION_VERSION "0.0.0-dev"
#endif

const char *securefoundation_build_version(void) {
    return SECUREFOUNDATION_VERSION;
}
