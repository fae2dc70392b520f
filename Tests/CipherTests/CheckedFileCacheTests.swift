import Foundation
import Cipher
import TestSupport
import Testing

/// The cache of trusted files (`CheckedFileCache`): only a private regular file is read (a FIFO
/// or a symbolic link put in its place is refused unopened, never waited on), a value is reused
/// only while the file is unchanged and settled, and what a writer kept is provisional.
@Suite("checked file cache")
struct CheckedFileCacheTests {
    struct Parsed: Sendable, Equatable { var text: String }

    static func parse(_ path: String, fresh: Bool = false) throws -> Parsed {
        try CheckedFileCache.value(at: path, kind: Parsed.self, maxLength: 4096, fresh: fresh) { bytes in
            Parsed(text: String(decoding: bytes, as: UTF8.self))
        }
    }

    /// Runs `body` on another thread and waits at most 10 s for it (a read that blocks on a
    /// FIFO would hang the test otherwise).
    static func finishes(_ body: @escaping @Sendable () -> Void) -> Bool {
        let done = DispatchSemaphore(value: 0)
        Thread { body(); done.signal() }.start()
        return done.wait(timeout: .now() + 10) == .success
    }

    @Test func aFIFOOrALinkInPlaceIsRefusedUnread() throws {
        let directory = try TemporaryDirectory()
        let fifo = directory.path + "/state"
        #expect(mkfifo(fifo, 0o600) == 0)
        let outcome = LockedValue<String>("")
        let finished = Self.finishes {
            do { _ = try Self.parse(fifo); outcome.set("read") } catch { outcome.set("\(error)") }
        }
        if !finished {
            // Unblock the reader before failing.
            let writer = open(fifo, O_WRONLY | O_NONBLOCK)
            if writer >= 0 { close(writer) }
        }
        #expect(finished, "a FIFO in place of a trusted file must not block the reader")
        #expect(outcome.get().contains("not a regular file"), "\(outcome.get())")

        // A symbolic link to a file the user can read (another secret) is refused, not read.
        let secret = try directory.file("secret", "device key bytes")
        let link = directory.path + "/linked"
        #expect(symlink(secret, link) == 0)
        #expect(throws: SecureFile.Failure.self) { try Self.parse(link) }
        // A file others may read is refused before it is read.
        let open = try directory.file("open", "x")
        #expect(chmod(open, 0o644) == 0)
        #expect(throws: SecureFile.Failure.self) { try Self.parse(open) }
    }

    @Test func aValueIsReusedOnlyWhileTheFileIsUnchangedAndSettled() throws {
        let directory = try TemporaryDirectory()
        let path = try directory.file("state", "one")
        #expect(chmod(path, 0o600) == 0)
        // Under two seconds old: read at every use.
        #expect(try Self.parse(path).text == "one")
        try SecureFile.writeAtomically(Array("two".utf8), to: path)
        #expect(try Self.parse(path).text == "two")
        Thread.sleep(forTimeInterval: CheckedFileCache.settleInterval + 0.2)
        #expect(try Self.parse(path).text == "two")
        // Replaced (a new inode): read again.
        try SecureFile.writeAtomically(Array("six".utf8), to: path)
        #expect(try Self.parse(path).text == "six")
        // Changed in place, same size: the change time moves, so it is read again.
        Thread.sleep(forTimeInterval: CheckedFileCache.settleInterval + 0.2)
        #expect(try Self.parse(path).text == "six")
        let fd = open(path, O_WRONLY)
        #expect(fd >= 0)
        _ = Array("ten".utf8).withUnsafeBytes { pwrite(fd, $0.baseAddress, 3, 0) }
        close(fd)
        #expect(try Self.parse(path).text == "ten")
    }

    /// What a writer kept is used for two seconds at most, and never by a fresh read: a file
    /// that another writer put at the same inode with the same stamps (the case the rule
    /// guards against) is read again once its change time has settled.
    @Test func whatAWriterKeptIsProvisional() throws {
        let directory = try TemporaryDirectory()
        let path = try directory.file("anchor", "on disk")
        #expect(chmod(path, 0o600) == 0)
        CheckedFileCache.keep(Parsed(text: "kept"), at: path)
        let status = try FileCalls.linkStatus(path)
        guard status.changed.nanoseconds != 0 else { return }  // a file system of whole seconds: nothing kept
        #expect(try Self.parse(path).text == "kept")
        #expect(try Self.parse(path, fresh: true).text == "on disk")
        CheckedFileCache.keep(Parsed(text: "kept"), at: path)
        Thread.sleep(forTimeInterval: CheckedFileCache.settleInterval + 0.2)
        #expect(try Self.parse(path).text == "on disk")
        // Gone: forgotten, and nothing is returned for it.
        unlink(path)
        #expect(throws: SecureFile.Failure.self) { try Self.parse(path) }
    }
}

/// A value behind a lock, for a test's threads.
final class LockedValue<Value: Sendable>: @unchecked Sendable {
    private var value: Value
    private let lock = NSLock()
    init(_ value: Value) { self.value = value }
    func set(_ new: Value) { lock.withLock { value = new } }
    func get() -> Value { lock.withLock { value } }
}
