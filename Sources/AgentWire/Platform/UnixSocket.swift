#if canImport(FoundationEssentials)
import FoundationEssentials
#else
import Foundation
#endif
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Small UNIX-domain stream socket helpers: addresses, exact reads and writes, timeouts.
package enum UnixSocket {
    /// The longest path a `sockaddr_un` holds (107 bytes on Linux, 103 on Darwin).
    package static var maximumPathLength: Int { MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1 }

    package static func address(_ path: String) throws(AgentWireError) -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard !bytes.isEmpty, bytes.count <= maximumPathLength, !bytes.contains(0) else {
            throw AgentWireError.pathInUse(path: path, reason: "is too long for a UNIX socket (at most \(maximumPathLength) bytes)")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return address
    }

    package static func makeSocket() throws(AgentWireError) -> Int32 {
        #if os(Linux)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #else
        let fd = socket(AF_UNIX, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { throw AgentWireError.system("socket", "AF_UNIX") }
        #if !os(Linux)
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
        #endif
        return fd
    }

    /// Connects to `path`; throws ``AgentWireError/notRunning(socket:)`` when nothing listens there.
    package static func connect(to path: String, timeout: Double) throws -> Int32 {
        var address = try self.address(path)
        let fd = try makeSocket()
        setTimeouts(fd, seconds: timeout)
        let result = withUnsafePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                #if os(Linux)
                Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                #else
                Darwin.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
                #endif
            }
        }
        if result != 0 {
            let code = errno
            close(fd)
            switch code {
            case ENOENT, ECONNREFUSED, ENOTDIR: throw AgentWireError.notRunning(socket: path)
            case EACCES, EPERM: throw AgentWireError.refused("no permission to reach \(path) (\(String(cString: strerror(code)))); the agent serves only its own user")
            case EAGAIN, ETIMEDOUT: throw AgentWireError.timedOut("connecting to \(path)")
            default: throw AgentWireError.system("connect", path, code)
            }
        }
        return fd
    }

    /// Ends both directions (wakes a thread blocked reading `fd`).
    package static func shutdownBoth(_ fd: Int32) {
        #if os(Linux)
        _ = Glibc.shutdown(fd, Int32(SHUT_RDWR))
        #else
        _ = Darwin.shutdown(fd, SHUT_RDWR)
        #endif
    }

    /// Send and receive timeouts (a slow peer fails with EAGAIN instead of blocking forever).
    /// Shuts down the writing side of `fd` (the peer reads end of file after what was sent).
    package static func shutdownWriting(_ fd: Int32) {
        #if canImport(Glibc)
        _ = Glibc.shutdown(fd, Int32(SHUT_WR))
        #elseif canImport(Darwin)
        _ = Darwin.shutdown(fd, SHUT_WR)
        #endif
    }

    package static func setTimeouts(_ fd: Int32, seconds: Double) {
        var value = timeval()
        value.tv_sec = .init(Int(seconds))
        value.tv_usec = .init(Int((seconds - Double(Int(seconds))) * 1_000_000))
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &value, socklen_t(MemoryLayout<timeval>.size))
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &value, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Writes every byte (no SIGPIPE on a closed peer).
    package static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws {
        var offset = 0
        while offset < bytes.count {
            #if os(Linux)
            let n = send(fd, bytes.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
            #else
            let n = send(fd, bytes.baseAddress! + offset, bytes.count - offset, 0)
            #endif
            if n < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK { throw AgentWireError.timedOut("writing to the socket") }
                throw AgentWireError.system("send", "socket")
            }
            offset += n
        }
    }

    /// Seconds on the monotonic clock (not set by anyone, not counting suspend): for deadlines.
    package static func monotonicNow() -> Double {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Double(time.tv_sec) + Double(time.tv_nsec) / 1e9
    }

    /// Waits until `fd` is readable or `deadline` (``monotonicNow()``) passes.
    /// - Returns: false when the deadline passed first.
    package static func waitReadable(_ fd: Int32, until deadline: Double) throws -> Bool {
        while true {
            let remaining = deadline - monotonicNow()
            guard remaining > 0 else { return false }
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let milliseconds = Int32(min((remaining * 1000).rounded(.up), 60_000))
            let ready = poll(&entry, 1, max(1, milliseconds))
            if ready < 0 {
                if errno == EINTR { continue }
                throw AgentWireError.system("poll", "socket")
            }
            if ready > 0 { return true }
        }
    }

    /// Reads exactly `count` bytes into `buffer`; throws on end of stream or timeout. With a
    /// `deadline` (``monotonicNow()``), every byte must have arrived by then, however the peer
    /// spreads them out (each read waits only for the time left); without one, each read waits
    /// for the socket's receive timeout.
    package static func readExactly(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer, deadline: Double? = nil) throws {
        var offset = 0
        while offset < buffer.count {
            if let deadline, try !waitReadable(fd, until: deadline) {
                throw AgentWireError.timedOut("reading from the socket: the whole message must arrive within the time allowed")
            }
            #if os(Linux)
            let flags = deadline == nil ? Int32(0) : Int32(MSG_DONTWAIT)
            #else
            let flags = deadline == nil ? Int32(0) : MSG_DONTWAIT
            #endif
            let n = recv(fd, buffer.baseAddress! + offset, buffer.count - offset, flags)
            if n < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK {
                    if deadline != nil { continue }
                    throw AgentWireError.timedOut("reading from the socket")
                }
                throw AgentWireError.system("recv", "socket")
            }
            if n == 0 { throw AgentWireError.protocolViolation("the connection closed in the middle of a message") }
            offset += n
        }
    }

    /// Reads and discards what the peer sends until it closes, `limit` bytes were read, or
    /// `deadline` (``monotonicNow()``) passes.
    package static func discard(_ fd: Int32, limit: Int, until deadline: Double) {
        var buffer = [UInt8](repeating: 0, count: 4096)
        var total = 0
        while total < limit, (try? waitReadable(fd, until: deadline)) == true {
            #if os(Linux)
            let flags = Int32(MSG_DONTWAIT)
            #else
            let flags = MSG_DONTWAIT
            #endif
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, flags) }
            if count < 0 && (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK) { continue }
            if count <= 0 { break }
            total += count
        }
    }

    /// The bytes waiting to be read on `fd` (0 when unknown).
    package static func pendingBytes(_ fd: Int32) -> Int {
        var count: Int32 = 0
        let result = withUnsafeMutablePointer(to: &count) { pointer in
            #if canImport(Glibc)
            ioctl(fd, UInt(FIONREAD), pointer)
            #else
            ioctl(fd, FIONREAD, pointer)
            #endif
        }
        return result == 0 ? Int(count) : 0
    }

    /// Shuts down the reading side of `fd`: a thread waiting to read it wakes and reads end of file.
    package static func shutdownReading(_ fd: Int32) {
        #if canImport(Glibc)
        _ = Glibc.shutdown(fd, Int32(SHUT_RD))
        #elseif canImport(Darwin)
        _ = Darwin.shutdown(fd, SHUT_RD)
        #endif
    }
}
