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
        try FileCalls.lockExclusive(first)
        #expect(!FileCalls.tryLockExclusive(second))   // held by the first open file description
        FileCalls.unlock(first)
        #expect(FileCalls.tryLockExclusive(second))
        FileCalls.unlock(second)
        try FileCalls.lockExclusive(first)
        #expect(throws: SystemCallError("flock", EBADF)) { try FileCalls.lockExclusive(-1) }
    }

    @Test func failuresBecomeSecureFileFailures() {
        #expect(SecureFile.Failure(SystemCallError("stat", ENOENT), path: "/x") == .system(operation: "stat", path: "/x", errno: ENOENT))
    }
}
