import Foundation
import Testing
@testable import Cipher

/// ``FileStatus``: the values the file calls return carry exactly what the system's `stat`
/// structure says, whatever module a caller reads them from.
@Suite("File status")
struct FileStatusTests {
    /// Each file type the system has is named.
    @Test func eachFileTypeIsNamed() throws {
        let directory = try TemporaryDirectory.short(prefix: "sf-status")
        let file = directory.path + "/file"
        try Data("abc".utf8).write(to: URL(fileURLWithPath: file))
        #expect(try FileCalls.linkStatus(file).kind == .regular)
        #expect(try FileCalls.linkStatus(file).isRegularFile)
        #expect(try FileCalls.linkStatus(directory.path).kind == .directory)
        #expect(try !FileCalls.linkStatus(directory.path).isRegularFile)
        try FileManager.default.createSymbolicLink(atPath: directory.path + "/link", withDestinationPath: file)
        #expect(try FileCalls.linkStatus(directory.path + "/link").kind == .symbolicLink)
        #expect(mkfifo(directory.path + "/fifo", 0o600) == 0)
        #expect(try FileCalls.linkStatus(directory.path + "/fifo").kind == .fifo)
        #expect(try FileCalls.linkStatus("/dev/null").kind == .characterDevice)

        let socketPath = directory.path + "/socket"
        #if canImport(Glibc)
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        #else
        let fd = socket(AF_UNIX, SOCK_STREAM, 0)
        #endif
        try #require(fd >= 0)
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let name = Array(socketPath.utf8)
        try #require(name.count < MemoryLayout.size(ofValue: address.sun_path))
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: name)
            raw[name.count] = 0
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
        }
        try #require(bound == 0)
        #expect(try FileCalls.linkStatus(socketPath).kind == .socket)

        // A block device only where the system has one to look at (containers often have none).
        let devices = (try? FileManager.default.contentsOfDirectory(atPath: "/dev")) ?? []
        for name in devices.sorted() {
            var info = stat()
            guard lstat("/dev/" + name, &info) == 0, info.st_mode & S_IFMT == S_IFBLK else { continue }
            #expect(try FileCalls.linkStatus("/dev/" + name).kind == .blockDevice)
            break
        }
    }

    /// Size, device, inode, links, owner, permission bits and both times are the structure's,
    /// the times to the nanosecond.
    @Test func fieldsAreTheSystemStructures() throws {
        let directory = try TemporaryDirectory()
        let file = directory.path + "/file"
        try Data("abcdefgh".utf8).write(to: URL(fileURLWithPath: file))
        try FileCalls.hardLink(file, directory.path + "/second")
        #expect(chmod(file, 0o2640) == 0)
        var times = [timespec(tv_sec: 1_700_000_000, tv_nsec: 5), timespec(tv_sec: 1_600_000_123, tv_nsec: 987_654_321)]
        #expect(utimensat(AT_FDCWD, file, &times, 0) == 0)

        let status = try FileCalls.linkStatus(file)
        var info = stat()
        #expect(lstat(file, &info) == 0)
        #expect(status.size == 8)
        #expect(status.links == 2)
        #expect(status.permissions == 0o2640)
        #expect(status.owner == geteuid())
        #expect(status.device == UInt64(truncatingIfNeeded: info.st_dev))
        #expect(status.inode == UInt64(info.st_ino))
        #expect(status.modified == FileStatus.Time(seconds: 1_600_000_123, nanoseconds: 987_654_321))
        #if canImport(Darwin)
        let changed = info.st_ctimespec
        #else
        let changed = info.st_ctim
        #endif
        #expect(status.changed == FileStatus.Time(seconds: Int64(changed.tv_sec), nanoseconds: Int64(changed.tv_nsec)))

        // The same file by descriptor, by a second name, and through a symbolic link followed.
        let fd = try FileCalls.open(file, O_RDONLY | O_CLOEXEC)
        defer { FileCalls.close(fd) }
        #expect(try FileCalls.status(fd) == status)
        #expect(try FileCalls.linkStatus(directory.path + "/second") == status)
        try FileManager.default.createSymbolicLink(atPath: directory.path + "/link", withDestinationPath: file)
        #expect(try FileCalls.status(atPath: directory.path + "/link") == status)
        #expect(try FileCalls.linkStatus(directory.path + "/link").isSameFile(as: status) == false)
        #expect(try FileCalls.linkStatus(directory.path).permissions == 0o700)
    }

    @Test func followingAMissingPathFails() throws {
        let directory = try TemporaryDirectory()
        #expect(throws: SystemCallError("stat", ENOENT)) { try FileCalls.status(atPath: directory.path + "/missing") }
        try FileManager.default.createSymbolicLink(atPath: directory.path + "/dangling", withDestinationPath: directory.path + "/missing")
        #expect(throws: SystemCallError("stat", ENOENT)) { try FileCalls.status(atPath: directory.path + "/dangling") }
        #expect(try FileCalls.linkStatus(directory.path + "/dangling").kind == .symbolicLink)
    }
}
