import Foundation
import Testing
@testable import Cipher

/// The thin wrappers of the file calls: each gives the call's result, or its errno in a
/// `SystemCallError`, and follows no symbolic link it is not asked to.
@Suite("File calls")
struct FileCallsTests {
    @Test func statusOfMissingPathsAndLinks() throws {
        let directory = try TemporaryDirectory()
        let missing = directory.path + "/missing"
        #expect(throws: SystemCallError("stat", ENOENT)) { try FileCalls.linkStatus(missing) }
        let file = directory.path + "/file"
        try Data("abc".utf8).write(to: URL(fileURLWithPath: file))
        let link = directory.path + "/link"
        try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: file)
        #expect(try FileCalls.linkStatus(file).isRegularFile)
        #expect(try FileCalls.linkStatus(link).kind == .symbolicLink)
        let dirFD = open(directory.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        try #require(dirFD >= 0)
        defer { close(dirFD) }
        #expect(try FileCalls.linkStatus(in: dirFD, "link").kind == .symbolicLink)
        #expect(throws: SystemCallError("open", ELOOP)) { try FileCalls.open(in: dirFD, "link", O_RDONLY | O_NOFOLLOW | O_CLOEXEC) }
        let fd = try FileCalls.open(in: dirFD, "file", O_RDWR | O_CLOEXEC)
        defer { close(fd) }
        #expect(try FileCalls.status(fd).size == 3)
        #expect(throws: SystemCallError("fstat", EBADF)) { try FileCalls.status(-1) }
        #expect(throws: SystemCallError("open", ELOOP)) { try FileCalls.open(link, O_RDONLY | O_NOFOLLOW | O_CLOEXEC) }
        #expect(throws: SystemCallError("open", ENOENT)) { try FileCalls.open(missing, O_RDONLY | O_CLOEXEC) }
        let byPath = try FileCalls.open(file, O_RDONLY | O_CLOEXEC)
        #expect(try FileCalls.status(byPath).size == 3)
        FileCalls.close(byPath)
    }

    @Test func linkTruncateSyncLockAndUnlink() throws {
        let directory = try TemporaryDirectory()
        let file = directory.path + "/file"
        try Data("abcdef".utf8).write(to: URL(fileURLWithPath: file))
        let fd = open(file, O_RDWR | O_CLOEXEC)
        try #require(fd >= 0)
        defer { close(fd) }
        try FileCalls.truncate(fd, to: 2)
        try FileCalls.sync(fd)
        #expect(try FileCalls.status(fd).size == 2)
        #expect(FileCalls.tryLockExclusive(fd))
        let other = open(file, O_RDONLY | O_CLOEXEC)
        try #require(other >= 0)
        defer { close(other) }
        #expect(!FileCalls.tryLockExclusive(other))   // another open file description holds it

        try FileCalls.hardLink(file, directory.path + "/second")
        #expect(try FileCalls.status(fd).links == 2)
        #expect(throws: SystemCallError("link", EEXIST)) { try FileCalls.hardLink(file, directory.path + "/second") }

        let dirFD = open(directory.path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        try #require(dirFD >= 0)
        defer { close(dirFD) }
        try FileCalls.unlink(in: dirFD, "second")
        #expect(throws: SystemCallError("unlink", ENOENT)) { try FileCalls.unlink(in: dirFD, "second") }
        #expect(mkdir(directory.path + "/sub", 0o700) == 0)
        #expect(throws: SystemCallError("unlink", EISDIR)) { try FileCalls.unlink(in: dirFD, "sub") }
        try FileCalls.unlink(in: dirFD, "sub", isDirectory: true)
        #expect(throws: SystemCallError("fsync", EBADF)) { try FileCalls.sync(-1) }
    }

    @Test func blockingLockAndUnlock() throws {
        let directory = try TemporaryDirectory()
        let file = directory.path + "/lock"
        try Data().write(to: URL(fileURLWithPath: file))
        let first = open(file, O_RDWR | O_CLOEXEC)
        try #require(first >= 0)
        defer { close(first) }
        let second = open(file, O_RDWR | O_CLOEXEC)
        try #require(second >= 0)
        defer { close(second) }
        #expect(try FileCalls.lockExclusive(first, wait: true))
        #expect(!FileCalls.tryLockExclusive(second))   // held by the first open file description
        #expect(try !FileCalls.lockExclusive(second, wait: false))
        FileCalls.unlock(first)
        #expect(FileCalls.tryLockExclusive(second))
        FileCalls.unlock(second)
        #expect(try FileCalls.lockExclusive(first, wait: true))
        #expect(throws: SystemCallError("flock", EBADF)) { try FileCalls.lockExclusive(-1, wait: true) }
        #expect(throws: SystemCallError("flock", EBADF)) { try FileCalls.lockExclusive(-1, wait: false) }
    }

    @Test func writeAllAndReadFullyAtAnOffsetAndAtTheEnd() throws {
        let directory = try TemporaryDirectory()
        let file = directory.path + "/data"
        let fd = open(file, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        try #require(fd >= 0)
        defer { close(fd) }
        let bytes = (0..<300_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        try bytes.withUnsafeBytes { try FileCalls.writeAll(fd, $0) }
        try [UInt8](repeating: 0xEE, count: 4).withUnsafeBytes { try FileCalls.writeAll(fd, $0, at: 10) }
        var expected = bytes
        expected.replaceSubrange(10..<14, with: [0xEE, 0xEE, 0xEE, 0xEE])
        var back = [UInt8](repeating: 0, count: 400_000)
        let count = try back.withUnsafeMutableBytes { try FileCalls.readFully(fd, into: $0, at: 0) }
        #expect(count == bytes.count)          // fewer at the end of the file
        #expect(Array(back[0..<count]) == expected)
        var tail = [UInt8](repeating: 0, count: 8)
        #expect(try tail.withUnsafeMutableBytes { try FileCalls.readFully(fd, into: $0, at: Int64(bytes.count - 3)) } == 3)
        #expect(throws: SystemCallError("write", EBADF)) { try [1].withUnsafeBytes { try FileCalls.writeAll(-1, $0) } }
        #expect(throws: SystemCallError("read", EBADF)) { try tail.withUnsafeMutableBytes { _ = try FileCalls.readFully(-1, into: $0) } }
    }

    @Test func moveIntoPlaceReplacesRegularFilesOnly() throws {
        let directory = try TemporaryDirectory()
        let staged = directory.path + "/staged", target = directory.path + "/target"
        try Data("new".utf8).write(to: URL(fileURLWithPath: staged))
        chmod(staged, 0o644)
        try Data("old".utf8).write(to: URL(fileURLWithPath: target))
        try SecureFile.moveIntoPlace(staged, over: target)
        #expect(try Data(contentsOf: URL(fileURLWithPath: target)) == Data("new".utf8))
        #expect(try FileCalls.linkStatus(target).permissions & 0o777 == 0o600)
        #expect(access(staged, F_OK) != 0)
        // A FIFO (or a link) a user named is never replaced; the staged file stays for its writer.
        let fifo = directory.path + "/fifo"
        try #require(mkfifo(fifo, 0o600) == 0)
        try Data("new".utf8).write(to: URL(fileURLWithPath: staged))
        #expect(throws: SecureFile.Failure.self) { try SecureFile.moveIntoPlace(staged, over: fifo) }
        #expect(try FileCalls.linkStatus(fifo).kind == .fifo)
        #expect(access(staged, F_OK) == 0)
        // A staged name that is a link is refused unfollowed.
        let link = directory.path + "/link"
        try #require(symlink(staged, link) == 0)
        #expect(throws: SecureFile.Failure.insecurePermissions(path: link, reason: "it is not a regular file", fix: "rm \(link)")) {
            try SecureFile.moveIntoPlace(link, over: target)
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: target)) == Data("new".utf8))
    }

    @Test func failuresBecomeSecureFileFailures() {
        #expect(SecureFile.Failure(SystemCallError("stat", ENOENT), path: "/x") == .system(operation: "stat", path: "/x", errno: ENOENT))
    }
}
