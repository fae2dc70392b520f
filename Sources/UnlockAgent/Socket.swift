import Foundation
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Small UNIX-domain stream socket helpers: addresses, exact reads and writes, timeouts.
enum UnixSocket {
    /// The longest path a `sockaddr_un` holds (107 bytes on Linux, 103 on Darwin).
    static var maximumPathLength: Int { MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1 }

    static func address(_ path: String) throws -> sockaddr_un {
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        guard !bytes.isEmpty, bytes.count <= maximumPathLength, !bytes.contains(0) else {
            throw AgentError.pathInUse(path: path, reason: "is too long for a UNIX socket (at most \(maximumPathLength) bytes)")
        }
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        return address
    }

    static func makeSocket() throws -> Int32 {
        #if os(Linux)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        #else
        let fd = socket(AF_UNIX, SOCK_STREAM, 0)
        #endif
        guard fd >= 0 else { throw AgentError.system("socket", "AF_UNIX") }
        #if !os(Linux)
        _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        var one: Int32 = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, socklen_t(MemoryLayout<Int32>.size))
        #endif
        return fd
    }

    /// Connects to `path`; throws ``AgentError/notRunning(socket:)`` when nothing listens there.
    static func connect(to path: String, timeout: Double) throws -> Int32 {
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
            case ENOENT, ECONNREFUSED, ENOTDIR: throw AgentError.notRunning(socket: path)
            case EACCES, EPERM: throw AgentError.refused("no permission to reach \(path) (\(String(cString: strerror(code)))); the agent serves only its own user")
            case EAGAIN, ETIMEDOUT: throw AgentError.timedOut("connecting to \(path)")
            default: throw AgentError.system("connect", path, code)
            }
        }
        return fd
    }

    /// Ends both directions (wakes a thread blocked reading `fd`).
    static func shutdownBoth(_ fd: Int32) {
        #if os(Linux)
        _ = Glibc.shutdown(fd, Int32(SHUT_RDWR))
        #else
        _ = Darwin.shutdown(fd, SHUT_RDWR)
        #endif
    }

    /// Send and receive timeouts (a slow peer fails with EAGAIN instead of blocking forever).
    /// Shuts down the writing side of `fd` (the peer reads end of file after what was sent).
    static func shutdownWriting(_ fd: Int32) {
        #if canImport(Glibc)
        _ = Glibc.shutdown(fd, Int32(SHUT_WR))
        #elseif canImport(Darwin)
        _ = Darwin.shutdown(fd, SHUT_WR)
        #endif
    }

    static func setTimeouts(_ fd: Int32, seconds: Double) {
        var value = timeval()
        value.tv_sec = .init(Int(seconds))
        value.tv_usec = .init(Int((seconds - Double(Int(seconds))) * 1_000_000))
        _ = setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &value, socklen_t(MemoryLayout<timeval>.size))
        _ = setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &value, socklen_t(MemoryLayout<timeval>.size))
    }

    /// Writes every byte (no SIGPIPE on a closed peer).
    static func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws {
        var offset = 0
        while offset < bytes.count {
            #if os(Linux)
            let n = send(fd, bytes.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL))
            #else
            let n = send(fd, bytes.baseAddress! + offset, bytes.count - offset, 0)
            #endif
            if n < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK { throw AgentError.timedOut("writing to the socket") }
                throw AgentError.system("send", "socket")
            }
            offset += n
        }
    }

    /// Reads exactly `count` bytes into `buffer`; throws on end of stream or timeout.
    static func readExactly(_ fd: Int32, into buffer: UnsafeMutableRawBufferPointer) throws {
        var offset = 0
        while offset < buffer.count {
            let n = recv(fd, buffer.baseAddress! + offset, buffer.count - offset, 0)
            if n < 0 {
                if errno == EINTR { continue }
                if errno == EAGAIN || errno == EWOULDBLOCK { throw AgentError.timedOut("reading from the socket") }
                throw AgentError.system("recv", "socket")
            }
            if n == 0 { throw AgentError.protocolViolation("the connection closed in the middle of a message") }
            offset += n
        }
    }
}
