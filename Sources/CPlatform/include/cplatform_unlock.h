#ifndef SECUREFOUNDATION_CPLATFORM_UNLOCK_H
#define SECUREFOUNDATION_CPLATFORM_UNLOCK_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

// ---- Unlock agent ---------------------------------------------------------------------------

/// The uid and pid of the process at the other end of a connected UNIX socket (SO_PEERCRED on
/// Linux, getpeereid elsewhere, pid -1 there). Returns 0 or an errno value.
int sf_peer_credentials(int fd, uint32_t *uid, int32_t *pid);

/// Makes the process non-dumpable (no core dump, no ptrace or /proc/PID/mem by the same uid
/// without CAP_SYS_PTRACE). Returns 0 or an errno value; ENOSYS where there is no such switch.
int sf_set_nondumpable(void);

/// Whether the process is dumpable (1), not (0), or unknown (-1).
int sf_is_dumpable(void);

/// Adds "close every descriptor from `lowest` up" to spawn file actions (glibc 2.34's
/// posix_spawn_file_actions_addclosefrom_np). Returns 0, or ENOSYS where the C library has no
/// such action (the caller then marks its descriptors close-on-exec itself).
int sf_spawn_add_close_from(void *actions, int lowest);

/// pipe2(fds, O_CLOEXEC) (pipe + FD_CLOEXEC elsewhere): both ends closed on exec from the
/// start, so a program started by another thread never inherits them. 0 or an errno value.
int sf_pipe_cloexec(int fds[2]);

// ---- Kernel keyring (raw syscalls, no libkeyutils) ------------------------------------------

/// Special keyring ids (KEY_SPEC_*): thread -1, process -2, session -3, user -4, user session -5.
int32_t sf_keyring_spec_process(void);
int32_t sf_keyring_spec_session(void);
int32_t sf_keyring_spec_user(void);

/// add_key(2): adds or updates a key of `type` named `description` in `keyring`. Returns the
/// key's serial (> 0) or -errno.
int32_t sf_keyring_add(const char *type, const char *description, const void *payload, size_t length, int32_t keyring);

/// keyctl(KEYCTL_SEARCH): a key of `type` and `description` reachable from `keyring`. Returns
/// its serial or -errno (-ENOKEY when there is none, -EKEYEXPIRED when its timeout passed).
int32_t sf_keyring_search(int32_t keyring, const char *type, const char *description);

/// keyctl(KEYCTL_READ) into buffer; returns the key's full length or -errno.
long sf_keyring_read(int32_t key, void *buffer, size_t length);

/// keyctl(KEYCTL_SET_TIMEOUT): the key expires `seconds` from now (0: never). 0 or -errno.
int sf_keyring_set_timeout(int32_t key, unsigned int seconds);

/// keyctl(KEYCTL_INVALIDATE): the key is gone at once. 0 or -errno.
int sf_keyring_invalidate(int32_t key);

/// keyctl(KEYCTL_SETPERM): the key's permission mask. 0 or -errno.
int sf_keyring_set_permissions(int32_t key, uint32_t permissions);

/// Links `key` into `keyring` (KEYCTL_LINK: a key of the same type and description there is
/// displaced), or unlinks it (KEYCTL_UNLINK). 0 or -errno.
int sf_keyring_link(int32_t key, int32_t keyring);
int sf_keyring_unlink(int32_t key, int32_t keyring);

#endif
