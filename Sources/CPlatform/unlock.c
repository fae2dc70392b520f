#define _GNU_SOURCE
#include "cplatform_unlock.h"
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <spawn.h>
#if defined(__linux__)
#include <sys/prctl.h>
#include <sys/syscall.h>
#endif

int sf_peer_credentials(int fd, uint32_t *uid, int32_t *pid) {
#if defined(__linux__)
    struct ucred credentials;
    socklen_t length = sizeof(credentials);
    memset(&credentials, 0, sizeof(credentials));
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) != 0) return errno;
    if (length != sizeof(credentials)) return EPROTO;
    *uid = (uint32_t)credentials.uid;
    *pid = (int32_t)credentials.pid;
    return 0;
#else
    uid_t peer;
    gid_t group;
    if (getpeereid(fd, &peer, &group) != 0) return errno;
    *uid = (uint32_t)peer;
    *pid = -1;
    return 0;
#endif
}

int sf_pipe_cloexec(int fds[2]) {
#if defined(__linux__)
    return pipe2(fds, O_CLOEXEC) == 0 ? 0 : errno;
#else
    if (pipe(fds) != 0) return errno;
    fcntl(fds[0], F_SETFD, FD_CLOEXEC);
    fcntl(fds[1], F_SETFD, FD_CLOEXEC);
    return 0;
#endif
}

int sf_set_nondumpable(void) {
#if defined(__linux__)
    return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) == 0 ? 0 : errno;
#else
    return ENOSYS;
#endif
}

int sf_spawn_add_close_from(void *actions, int lowest) {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
    return posix_spawn_file_actions_addclosefrom_np((posix_spawn_file_actions_t *)actions, lowest);
#else
    (void)actions; (void)lowest;
    return ENOSYS;
#endif
}

int sf_is_dumpable(void) {
#if defined(__linux__)
    int value = prctl(PR_GET_DUMPABLE, 0, 0, 0, 0);
    return value < 0 ? -1 : (value != 0);
#else
    return -1;
#endif
}

// Values of linux/keyctl.h, spelled out so the shim needs no kernel headers or libkeyutils.
#define SF_KEY_SPEC_PROCESS_KEYRING -2
#define SF_KEY_SPEC_SESSION_KEYRING -3
#define SF_KEY_SPEC_USER_KEYRING -4
#define SF_KEYCTL_SETPERM 5
#define SF_KEYCTL_LINK 8
#define SF_KEYCTL_UNLINK 9
#define SF_KEYCTL_SEARCH 10
#define SF_KEYCTL_READ 11
#define SF_KEYCTL_SET_TIMEOUT 15
#define SF_KEYCTL_INVALIDATE 21

int32_t sf_keyring_spec_process(void) { return SF_KEY_SPEC_PROCESS_KEYRING; }
int32_t sf_keyring_spec_session(void) { return SF_KEY_SPEC_SESSION_KEYRING; }
int32_t sf_keyring_spec_user(void) { return SF_KEY_SPEC_USER_KEYRING; }

int32_t sf_keyring_add(const char *type, const char *description, const void *payload, size_t length, int32_t keyring) {
#if defined(__linux__) && defined(SYS_add_key)
    long result = syscall(SYS_add_key, type, description, payload, length, keyring);
    return result < 0 ? -errno : (int32_t)result;
#else
    (void)type; (void)description; (void)payload; (void)length; (void)keyring;
    return -ENOSYS;
#endif
}

int32_t sf_keyring_search(int32_t keyring, const char *type, const char *description) {
#if defined(__linux__) && defined(SYS_keyctl)
    long result = syscall(SYS_keyctl, SF_KEYCTL_SEARCH, keyring, type, description, 0);
    return result < 0 ? -errno : (int32_t)result;
#else
    (void)keyring; (void)type; (void)description;
    return -ENOSYS;
#endif
}

long sf_keyring_read(int32_t key, void *buffer, size_t length) {
#if defined(__linux__) && defined(SYS_keyctl)
    long result = syscall(SYS_keyctl, SF_KEYCTL_READ, key, buffer, length);
    return result < 0 ? -errno : result;
#else
    (void)key; (void)buffer; (void)length;
    return -ENOSYS;
#endif
}

int sf_keyring_set_timeout(int32_t key, unsigned int seconds) {
#if defined(__linux__) && defined(SYS_keyctl)
    return syscall(SYS_keyctl, SF_KEYCTL_SET_TIMEOUT, key, seconds) < 0 ? -errno : 0;
#else
    (void)key; (void)seconds;
    return -ENOSYS;
#endif
}

int sf_keyring_invalidate(int32_t key) {
#if defined(__linux__) && defined(SYS_keyctl)
    return syscall(SYS_keyctl, SF_KEYCTL_INVALIDATE, key) < 0 ? -errno : 0;
#else
    (void)key;
    return -ENOSYS;
#endif
}

int sf_keyring_link(int32_t key, int32_t keyring) {
#if defined(__linux__) && defined(SYS_keyctl)
    return syscall(SYS_keyctl, SF_KEYCTL_LINK, key, keyring) < 0 ? -errno : 0;
#else
    (void)key; (void)keyring;
    return -ENOSYS;
#endif
}

int sf_keyring_unlink(int32_t key, int32_t keyring) {
#if defined(__linux__) && defined(SYS_keyctl)
    return syscall(SYS_keyctl, SF_KEYCTL_UNLINK, key, keyring) < 0 ? -errno : 0;
#else
    (void)key; (void)keyring;
    return -ENOSYS;
#endif
}

int sf_keyring_set_permissions(int32_t key, uint32_t permissions) {
#if defined(__linux__) && defined(SYS_keyctl)
    return syscall(SYS_keyctl, SF_KEYCTL_SETPERM, key, permissions) < 0 ? -errno : 0;
#else
    (void)key; (void)permissions;
    return -ENOSYS;
#endif
}
