import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// A small tmpfs mounted for one test (needs root, as CI has); nil when it cannot be mounted.
public final class SmallFileSystem {
    public let path: String
    private let holder: TemporaryDirectory

    public init?(kilobytes: Int) throws {
        #if os(Linux)
        holder = try TemporaryDirectory()
        path = holder.path("mnt")
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: false)
        guard geteuid() == 0, mount("tmpfs", path, "tmpfs", 0, "size=\(kilobytes)k,mode=0700") == 0 else { return nil }
        #else
        return nil
        #endif
    }

    /// Writes zeros to a file until the file system is full (bounded by its size).
    public func fill() {
        let fd = open((path as NSString).appendingPathComponent("filler"), O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        guard fd >= 0 else { return }
        defer { close(fd) }
        let block = [UInt8](repeating: 0, count: 1024)
        for _ in 0..<100_000 {
            if block.withUnsafeBytes({ write(fd, $0.baseAddress, $0.count) }) <= 0 { break }
        }
        // Fill the last partial block too.
        for _ in 0..<1024 {
            if block.withUnsafeBytes({ write(fd, $0.baseAddress, 1) }) <= 0 { break }
        }
    }

    public func unfill() { unlink((path as NSString).appendingPathComponent("filler")) }

    deinit {
        #if os(Linux)
        umount2(path, Int32(MNT_DETACH))
        #endif
    }
}
