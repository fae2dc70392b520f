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

/// Two runs changing the same tree at the same time: each file is changed by exactly one and
/// found already changed by the other; nothing fails and the counts add up.
@Suite("Concurrent class changes")
struct ConcurrentChangeTests {
    /// Runs `body` on two threads at once (each with its own `ProtectedFiles` on one vault) and
    /// returns both results. Every rename waits a millisecond, so the runs overlap on files.
    private func twice<R: Sendable>(_ manager: CryptoManager, _ body: @escaping @Sendable (ProtectedFiles) throws -> R) throws -> [R] {
        let results = LockedBox<[Int: Result<R, any Error>]>([:])
        let group = DispatchGroup()
        for index in 0..<2 {
            let files = ProtectedFiles(manager: manager)
            files.testHooks.beforeReplace = { _ in usleep(1_000) }
            group.enter()
            Thread.detachNewThread {
                let result = Result { try body(files) }
                results.withLock { $0[index] = result }
                group.leave()
            }
        }
        #expect(group.wait(timeout: .now() + 300) == .success)
        return try results.withLock { all in try (0..<2).map { try #require(all[$0]).get() } }
    }

    @Test func twoUpgradesOfOneTreeBothSucceedAndCountEachFileOnce() throws {
        let fixture = try ProtectFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.setUp()
        let files = ProtectedFiles(manager: manager)
        let tree = fixture.path("tree")
        try FileManager.default.createDirectory(atPath: tree + "/sub", withIntermediateDirectories: true)
        let count = 60
        for i in 0..<count {
            try files.write(Array("file \(i)".utf8), to: tree + (i % 2 == 0 ? "/sub/" : "/") + "f\(i)", protection: .completeUnlessOpen)
        }
        let reports = try twice(manager) { try $0.upgradeItems(inDirectory: tree, from: .completeUnlessOpen, to: .complete) }
        for report in reports {
            #expect(report.failures.isEmpty, "\(report.failures)")
            #expect(report.skipped == 0)
            #expect(report.changed.count + report.alreadyInClass == count)
        }
        #expect(Set(reports[0].changed).isDisjoint(with: reports[1].changed))
        #expect(reports[0].changed.count + reports[1].changed.count == count)
        for i in 0..<count {
            let path = tree + (i % 2 == 0 ? "/sub/" : "/") + "f\(i)"
            #expect(try files.protection(ofItemAt: path) == .complete)
            #expect(try files.read(at: path) == Array("file \(i)".utf8))
        }
        // A third run finds everything done.
        let again = try files.upgradeItems(inDirectory: tree, from: .completeUnlessOpen, to: .complete)
        #expect(again.changed.isEmpty && again.alreadyInClass == count && again.failures.isEmpty)
    }

    @Test func twoReWrapsOfOneTreeBothSucceedAndCountEachFileOnce() throws {
        let fixture = try ProtectFixture()
        defer { fixture.cleanup() }
        let manager = try fixture.setUp()
        let files = ProtectedFiles(manager: manager)
        let tree = fixture.path("tree")
        try FileManager.default.createDirectory(atPath: tree, withIntermediateDirectories: true)
        let count = 40
        for i in 0..<count {
            try files.write(Array("file \(i)".utf8), to: tree + "/f\(i)", protection: i % 2 == 0 ? .complete : .none)
        }
        try files.rotateKeyPairs()
        let reports = try twice(manager) { try $0.rewrapItems(inDirectories: [tree]) }
        for report in reports {
            #expect(report.failed.isEmpty && report.damaged.isEmpty, "\(report.failed) \(report.damaged)")
            #expect(report.rewrapped.count + report.current == count)
        }
        #expect(Set(reports[0].rewrapped).isDisjoint(with: reports[1].rewrapped))
        #expect(reports[0].rewrapped.count + reports[1].rewrapped.count == count)
        #expect(try files.destroyRetiredKeyPairs() > 0)
        for i in 0..<count { #expect(try files.read(at: tree + "/f\(i)") == Array("file \(i)".utf8)) }
    }
}

/// A value behind a lock, for results gathered from threads.
final class LockedBox<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func withLock<T>(_ body: (inout Value) throws -> T) rethrows -> T {
        lock.lock()
        defer { lock.unlock() }
        return try body(&value)
    }
}
