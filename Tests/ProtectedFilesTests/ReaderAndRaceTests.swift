import Foundation
import Testing
import Cipher
import Age
import Vault
@testable import ProtectedFiles

@Suite("Protected files: readers across a lock, class changes racing a replacement")
struct ReaderAndRaceTests {
    /// A complete reader's file key is wiped when the vault locks, without waiting for a read;
    /// its next read fails with the locked error (and after an unlock asks to reopen). A
    /// completeUnlessOpen reader keeps its key and reads on until it is closed.
    @Test func completeReaderKeyWipedAtLock() throws {
        let fixture = try ProtectFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.setUp()
        let files = ProtectedFiles(manager: manager)
        let plaintext = (0..<200_000).map { UInt8(truncatingIfNeeded: $0 &* 3) }
        try files.write(plaintext, to: fixture.path("c"), protection: .completeThisDeviceOnly)
        try files.write(plaintext, to: fixture.path("u"), protection: .completeUnlessOpen)
        let complete = try files.openForReading(at: fixture.path("c"))
        let unlessOpen = try files.openForReading(at: fixture.path("u"))
        #expect(try complete.read(offset: 100_000, count: 10) == Array(plaintext[100_000..<100_010]))
        #expect(try unlessOpen.read(offset: 0, count: 10) == Array(plaintext[0..<10]))
        #expect(complete.holdsFileKey && unlessOpen.holdsFileKey)

        manager.lock()
        // Wiped by the lock observer alone: no read is made here (bounded wait, 10 s).
        let deadline = Date().addingTimeInterval(10)
        while complete.holdsFileKey && Date() < deadline { usleep(2_000) }
        #expect(!complete.holdsFileKey, "the complete reader still holds its file key after the lock")
        #expect(complete.isClosed)
        #expect(unlessOpen.holdsFileKey)
        #expect(throws: ProtectedFileError.locked(.completeThisDeviceOnly, .locked)) { try complete.read(upToCount: 10) }
        #expect(try unlessOpen.read(offset: 199_990, count: 100) == Array(plaintext[199_990...]))

        try manager.unlock(passcode: fixture.passcode)
        #expect(throws: ProtectedFileError.invalidArgument("\(fixture.path("c")) was closed when the vault locked; open it again")) {
            try complete.read(upToCount: 10)
        }
        let reopened = try files.openForReading(at: fixture.path("c"))
        #expect(try reopened.read(upToCount: 5) == Array(plaintext[0..<5]))
        reopened.close()
        #expect(!reopened.holdsFileKey)
        unlessOpen.close()
        #expect(!unlessOpen.holdsFileKey)
        complete.close()
    }

    /// A complete reader opened while the vault is locking (between the open and its
    /// subscription) is wiped as well: the observer sees the current state first.
    @Test func completeReaderOpenedJustBeforeLockIsWiped() throws {
        let fixture = try ProtectFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.setUp()
        let files = ProtectedFiles(manager: manager)
        try files.write(Array("x".utf8), to: fixture.path("c"), protection: .complete)
        for _ in 0..<5 {
            try manager.unlock(passcode: fixture.passcode)
            let reader = try files.openForReading(at: fixture.path("c"))
            manager.lock()
            let deadline = Date().addingTimeInterval(10)
            while reader.holdsFileKey && Date() < deadline { usleep(2_000) }
            #expect(!reader.holdsFileKey)
            #expect(throws: ProtectedFileError.locked(.complete, .locked)) { try reader.read(upToCount: 1) }
        }
    }

    /// The file is replaced by another writer after its header was read and before the class
    /// change renames its copy into place: the change is refused and the replacement stays.
    @Test func setProtectionRefusesAFileReplacedMeanwhile() throws {
        let fixture = try ProtectFixture()
        defer { fixture.cleanup() }
        let files = ProtectedFiles(manager: try fixture.setUp())
        let path = fixture.path("doc")
        let newer = fixture.path("newer")
        try files.write(Array("old contents".utf8), to: path, protection: .completeUnlessOpen)
        try files.write(Array("new contents".utf8), to: newer, protection: .completeUnlessOpen)
        let replacement = try bytes(newer)
        files.testHooks.beforeReplace = { hooked in
            // The other writer's atomic replacement lands now.
            if hooked == path { rename(newer, path) }
        }
        #expect(throws: ProtectedFileError.modifiedDuringChange(path: path)) { try files.setProtection(.complete, ofItemAt: path) }
        #expect(try bytes(path) == replacement)
        #expect(try files.read(at: path) == Array("new contents".utf8))
        #expect(try files.protection(ofItemAt: path) == .completeUnlessOpen)

        // A write in place (same inode, new size and time) is caught the same way.
        files.testHooks.beforeReplace = { hooked in
            guard hooked == path, let handle = FileHandle(forWritingAtPath: hooked) else { return }
            handle.seekToEndOfFile()
            handle.write(Data([0x41]))
            try? handle.close()
        }
        #expect(throws: ProtectedFileError.modifiedDuringChange(path: path)) { try files.setProtection(.complete, ofItemAt: path) }
        #expect(try bytes(path) == replacement + [0x41])

        // Nothing left behind; without interference the change goes through.
        files.testHooks.beforeReplace = nil
        try files.write(Array("again".utf8), to: path, protection: .completeUnlessOpen)
        try files.setProtection(.complete, ofItemAt: path)
        #expect(try files.protection(ofItemAt: path) == .complete)
        #expect(try files.read(at: path) == Array("again".utf8))
        let names = try FileManager.default.contentsOfDirectory(atPath: fixture.files)
        #expect(names.allSatisfy { !$0.hasSuffix(".tmp") }, "\(names)")
    }
}
