#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// A bare TCP socket on 127.0.0.1, for tests of peers that stop half-way (a listener that never
/// accepts, a client that never speaks). Closed when the value goes away.
public final class LoopbackSocket {
    public let fd: Int32
    /// The local port (a listener's) or the remote one (a connected socket's).
    public let port: Int

    private init(fd: Int32, port: Int) {
        self.fd = fd
        self.port = port
    }

    deinit { close(fd) }

    /// A socket listening on a free loopback port that nobody accepts from: the kernel completes
    /// TCP handshakes, nothing answers. Nil when the socket cannot be made.
    public static func listening(backlog: Int32 = 4) -> LoopbackSocket? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        var address = loopback(port: 0)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let ok = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0 && listen(fd, backlog) == 0
            }
        }
        guard ok else { close(fd); return nil }
        return LoopbackSocket(fd: fd, port: Int(UInt16(bigEndian: address.sin_port)))
    }

    /// A socket connected to `port` on 127.0.0.1; nil when the connection is refused.
    public static func connected(to port: Int) -> LoopbackSocket? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        var address = loopback(port: port)
        let ok = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
        }
        guard ok else { close(fd); return nil }
        return LoopbackSocket(fd: fd, port: port)
    }

    private static func loopback(port: Int) -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = UInt16(port).bigEndian
        return address
    }
}
