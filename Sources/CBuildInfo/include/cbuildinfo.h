#ifndef CBUILDINFO_H
#define CBUILDINFO_H

/// The version this build of the command-line tool reports: the value of
/// `SECUREFOUNDATION_VERSION` in the environment of the build (Package.swift passes it to this
/// target alone as a C define; scripts/build-release sets it from `git describe`), else
/// "0.0.0-dev".
const char *securefoundation_build_version(void);

#endif
