import Cipher
import Foundation
import Testing
import TestSupport
@testable import DeviceSharing

/// The sender's stamp of the file it sends: size, then modification and change time (seconds,
/// nanoseconds), as the system reports them.
@Suite("Sharing: the sent file's stamp")
struct SourceFileStampTests {
    @Test func theStampIsSizeAndBothTimes() throws {
        let directory = try TemporaryDirectory()
        let path = directory.path + "/report.pdf"
        try Data(repeating: 0x41, count: 1234).write(to: URL(fileURLWithPath: path))
        var times = [timespec(tv_sec: 1_650_000_000, tv_nsec: 0), timespec(tv_sec: 1_700_000_001, tv_nsec: 123_456_789)]
        #expect(utimensat(AT_FDCWD, path, &times, 0) == 0)
        let source = try ShareClient.SourceFile(path)
        #expect(source.size == 1234)
        var info = stat()
        #expect(lstat(path, &info) == 0)
        #if canImport(Darwin)
        let changed = info.st_ctimespec
        #else
        let changed = info.st_ctim
        #endif
        let stamp = ShareClient.SourceFile.stamp(try FileCalls.status(source.fd))
        #expect(stamp == [1234, 1_700_000_001, 123_456_789, Int64(changed.tv_sec), Int64(changed.tv_nsec)])
        try source.checkUnchanged()
    }

    @Test func aDirectoryIsNotSent() throws {
        let directory = try TemporaryDirectory()
        #expect(throws: ShareError.io(path: directory.path, detail: "not a regular file")) { try ShareClient.SourceFile(directory.path) }
    }
}
