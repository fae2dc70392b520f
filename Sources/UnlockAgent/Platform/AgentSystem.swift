import Foundation
import CPlatform
import AgentWire
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The system calls of the agent's own process that differ between Linux and Darwin: its
/// clock, its wake-up pipe, and binding and accepting on its listening socket.
enum AgentSystem {
    /// Seconds since boot, counting suspend (CLOCK_BOOTTIME on Linux), so a TTL runs while a
    /// laptop sleeps; Darwin's CLOCK_MONOTONIC counts suspend too.
    static func bootTime() -> Double {
        var time = timespec()
        #if os(Linux)
        clock_gettime(CLOCK_BOOTTIME, &time)
        #else
        clock_gettime(CLOCK_MONOTONIC, &time)
        #endif
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }

    /// A pipe whose ends are close-on-exec and non-blocking: (read, write).
    static func wakePipe() throws(AgentError) -> (read: Int32, write: Int32) {
        var fds: [Int32] = [0, 0]
        guard sf_pipe_cloexec(&fds) == 0 else { throw AgentError.system("pipe", "wake-up pipe") }
        for fd in fds {
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
        }
        return (fds[0], fds[1])
    }

    /// Writes one byte to `fd` (a wake-up; a full pipe already wakes the reader).
    static func poke(_ fd: Int32) {
        var byte: UInt8 = 1
        _ = write(fd, &byte, 1)
    }

    /// Reads `fd` until it is empty (a non-blocking wake-up pipe).
    static func drain(_ fd: Int32) {
        var buffer = [UInt8](repeating: 0, count: 64)
        while read(fd, &buffer, buffer.count) > 0 {}
    }

    /// Creates a listening socket at `path`, mode 0600 from its creation (umask 0177 around
    /// the bind), then `chmod` 0600 and `listen`. The caller removed what was there.
    /// - Returns: The listening descriptor.
    /// - Throws: ``AgentError/io(_:)`` naming the call that failed (nothing is left behind).
    static func listen(at path: String) throws(AgentError) -> Int32 {
        var address: sockaddr_un
        let fd: Int32
        do {
            address = try UnixSocket.address(path)
            fd = try UnixSocket.makeSocket()
        } catch {
            throw AgentError(error)
        }
        let previous = umask(0o177)
        let result = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                #if os(Linux)
                Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                #else
                Darwin.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                #endif
            }
        }
        let bindErrno = errno
        umask(previous)
        guard result == 0 else {
            close(fd)
            throw AgentError.system("bind", path, bindErrno)
        }
        #if os(Linux)
        let listening = Glibc.listen(fd, 128) == 0
        #else
        let listening = Darwin.listen(fd, 128) == 0
        #endif
        guard chmod(path, 0o600) == 0, listening else {
            let code = errno
            close(fd)
            unlink(path)
            throw AgentError.system("listen", path, code)
        }
        return fd
    }

    /// Accepts one connection, close-on-exec; nil when none is waiting or accept failed.
    static func accept(_ listenFD: Int32) -> Int32? {
        #if os(Linux)
        let fd = Glibc.accept(listenFD, nil, nil)
        #else
        let fd = Darwin.accept(listenFD, nil, nil)
        #endif
        guard fd >= 0 else { return nil }
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        return fd
    }

    /// Waits at most `milliseconds` for one of `fds` to be readable; returns which were (by
    /// index) and whether the wait itself failed (other than by a signal).
    static func waitReadable(_ fds: [Int32], milliseconds: Int32) -> (ready: [Bool], failed: Bool) {
        var entries = fds.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        let result = poll(&entries, nfds_t(entries.count), milliseconds)
        let failed = result < 0 && errno != EINTR
        return (entries.map { $0.revents != 0 }, failed)
    }
}
