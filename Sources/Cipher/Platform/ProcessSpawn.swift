#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
import CPlatform
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Starting and reaping helper programs: the one place that calls `posix_spawn`, `pipe` and
/// `waitpid` (the helper-program runner of the TPM and credential providers, ssh-keygen for
/// encrypted SSH keys, age plugins, the unlock agent's daemon start). The child gets only the
/// descriptors its actions name: every descriptor this process opens through here is
/// close-on-exec from the start, so no program started meanwhile by another thread keeps an end
/// of a pipe open.
package enum ProcessSpawn {
    /// What the child's descriptor table gets before the program runs.
    package enum Action: Sendable {
        /// `fd` opened on `path` with `flags` (for example `/dev/null`).
        case open(fd: Int32, path: String, flags: Int32)
        /// `source` (of this process) as the child's `target`.
        case duplicate(_ source: Int32, as: Int32)
        /// Every descriptor from `lowest` up closed in the child (after the actions before it),
        /// whatever this process's descriptors are marked; where the C library cannot, this
        /// process's descriptors from `lowest` up are marked close-on-exec instead.
        case closeFrom(_ lowest: Int32)
    }

    /// A pipe whose both ends are close-on-exec: (read end, write end).
    package static func pipe() throws(SystemCallError) -> (read: Int32, write: Int32) {
        var fds: [Int32] = [0, 0]
        guard sf_pipe_cloexec(&fds) == 0 else { throw SystemCallError("pipe") }
        return (fds[0], fds[1])
    }

    /// Starts `arguments[0]` (a path) with `arguments`.
    /// - Parameters:
    ///   - arguments: The program's path, then its arguments.
    ///   - actions: The child's descriptors, in order.
    ///   - environment: `NAME=value` entries (nil: this process's environment).
    /// - Returns: The child's pid.
    /// - Throws: ``SystemCallError`` ("posix_spawn") with the error `posix_spawn` returned.
    package static func spawn(_ arguments: [String], actions: [Action], environment: [String]? = nil) throws(SystemCallError) -> pid_t {
        precondition(!arguments.isEmpty, "a program to run")
        var fileActions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&fileActions)
        defer { posix_spawn_file_actions_destroy(&fileActions) }
        for action in actions {
            // A failed action (no memory, a bad descriptor) would leave the child this
            // process's descriptor where the action should have put another: refused.
            let added: Int32
            switch action {
            case let .open(fd, path, flags): added = posix_spawn_file_actions_addopen(&fileActions, fd, path, flags, 0)
            case let .duplicate(source, target): added = posix_spawn_file_actions_adddup2(&fileActions, source, target)
            case let .closeFrom(lowest):
                added = withUnsafeMutablePointer(to: &fileActions) { sf_spawn_add_close_from(UnsafeMutableRawPointer($0), lowest) }
                if added == ENOSYS { closeOnExec(from: lowest); continue }
            }
            guard added == 0 else { throw SystemCallError("posix_spawn_file_actions", added) }
        }
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        var envp: [UnsafeMutablePointer<CChar>?]? = environment.map { $0.map { strdup($0) } + [nil] }
        defer {
            argv.forEach { free($0) }
            envp?.forEach { free($0) }
        }
        var pid: pid_t = 0
        let spawned: Int32
        if envp != nil {
            spawned = posix_spawn(&pid, arguments[0], &fileActions, nil, &argv, &envp!)
        } else {
            spawned = posix_spawn(&pid, arguments[0], &fileActions, nil, &argv, environ)
        }
        guard spawned == 0 else { throw SystemCallError("posix_spawn", spawned) }
        return pid
    }

    /// Waits for `pid` (EINTR retried) and returns its exit status, or 128 + the signal that
    /// ended it.
    package static func wait(_ pid: pid_t) -> Int32 {
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 {
            guard errno == EINTR else { return -1 }
        }
        return decode(status)
    }

    /// Waits at most `timeout` seconds for `pid` (checked every 10 ms); one still running then is
    /// killed (SIGKILL) and reaped.
    /// - Returns: Its exit status (128 + the signal that ended it), or nil when it was killed here.
    package static func wait(_ pid: pid_t, timeout: TimeInterval) -> Int32? {
        let deadline = Date().addingTimeInterval(timeout)
        while Date() < deadline {
            if let status = poll(pid) { return status }
            usleep(10_000)
        }
        if let status = poll(pid) { return status }
        kill(pid, SIGKILL)
        _ = wait(pid)
        return nil
    }

    /// The exit status of `pid` if it has ended (nil while it runs; -1 when it is no child).
    package static func poll(_ pid: pid_t) -> Int32? {
        var status: Int32 = 0
        while true {
            let result = waitpid(pid, &status, WNOHANG)
            if result < 0 && errno == EINTR { continue }
            // Not a child of this process (any more): nothing to wait for.
            if result < 0 { return -1 }
            return result == pid ? decode(status) : nil
        }
    }

    static func decode(_ status: Int32) -> Int32 {
        (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    }

    /// This process's descriptors from `lowest` up marked close-on-exec (where spawn cannot
    /// close them in the child itself).
    static func closeOnExec(from lowest: Int32) {
        guard let inherited = try? FileManager.default.contentsOfDirectory(atPath: "/proc/self/fd") else { return }
        for name in inherited { if let fd = Int32(name), fd >= lowest { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) } }
    }
}
