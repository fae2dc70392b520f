import Foundation
import Testing
import GRDB
import Cipher
import Vault
import TestSupport
@testable import ProtectedFiles
@testable import ProtectedDatabase

/// What someone who can write the data directory (but knows no key) can do to a protected
/// database, and what a crash leaves.
@Suite("Protected database attacks")
struct DatabaseAttackTests {
    /// A closed database of `rows` rows (each about 300 bytes) in a few pages.
    static func make(_ path: String, _ files: ProtectedFiles, protection: FileProtectionClass = .completeUnlessOpen, rows: Int = 200, tag: String = "row") throws {
        let db = try ProtectedDatabase.create(at: path, protection: protection, files: files)
        try db.write { db in
            try db.execute(sql: "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)")
            for index in 0..<rows { try db.execute(sql: "INSERT INTO t(v) VALUES (?)", arguments: ["\(tag) \(index) " + String(repeating: "x", count: 300)]) }
        }
        try db.close()
    }

    static func count(_ path: String, _ files: ProtectedFiles) throws -> Int {
        let db = try ProtectedDatabase.open(at: path, files: files)
        defer { try? db.close() }
        return try db.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM t") } ?? -1
    }

    /// Every way of reading all the rows, which must fail with `tampered` after the attack.
    static func expectTampered(_ path: String, _ files: ProtectedFiles, _ comment: Comment) {
        do {
            let db = try ProtectedDatabase.open(at: path, files: files)
            defer { try? db.close() }
            _ = try db.read { try String.fetchAll($0, sql: "SELECT v FROM t") }
            Issue.record("no error: \(comment)")
        } catch let error as ProtectedDatabaseError {
            if case .tampered = error {} else { Issue.record("\(error): \(comment)") }
        } catch {
            Issue.record("\(error): \(comment)")
        }
    }

    @Test func pagesSwappedWithinTheFileOrFromAnotherDatabase() throws {
        let fixture = try DatabaseFixture()
        defer { fixture.cleanup() }
        let (_, files) = try fixture.setUp()
        let a = fixture.path("a.db"), b = fixture.path("b.db")
        try Self.make(a, files)
        try Self.make(b, files)
        let original = try fileBytes(a)
        #expect(original.count >= 5 * 4096)
        // Pages 2 and 3 exchanged.
        var swapped = original
        swapped.replaceSubrange(4096..<8192, with: original[8192..<12288])
        swapped.replaceSubrange(8192..<12288, with: original[4096..<8192])
        try writeFileBytes(swapped, a)
        Self.expectTampered(a, files, "pages 2 and 3 swapped")
        // Page 3 of b in a's page 3.
        var foreign = original
        foreign.replaceSubrange(8192..<12288, with: try fileBytes(b)[8192..<12288])
        try writeFileBytes(foreign, a)
        Self.expectTampered(a, files, "a page of another database")
        // One bit of a page.
        var flipped = original
        flipped[4096 * 2 + 100] ^= 1
        try writeFileBytes(flipped, a)
        Self.expectTampered(a, files, "a flipped bit")
        // Cut in the middle of a page, and cut by a whole page (SQLite would read zeros).
        try writeFileBytes(Array(original.prefix(original.count - 1000)), a)
        Self.expectTampered(a, files, "a truncated file")
        try writeFileBytes(Array(original.prefix(original.count - 4096)), a)
        Self.expectTampered(a, files, "a file without its last page")
        try writeFileBytes(original, a)
        #expect(try Self.count(a, files) == 200)
        #expect(ProtectedDatabase.tamperedPageCount > 0)
    }

    @Test func keyRecordSwappedOrOfAnotherClass() throws {
        let fixture = try DatabaseFixture()
        defer { fixture.cleanup() }
        let (_, files) = try fixture.setUp()
        let a = fixture.path("a.db"), b = fixture.path("b.db")
        try Self.make(a, files, protection: .complete)
        try Self.make(b, files, protection: .complete)
        let keyA = try fileBytes(ProtectedDatabase.keyPath(for: a))
        // b's key record beside a.
        try writeFileBytes(try fileBytes(ProtectedDatabase.keyPath(for: b)), ProtectedDatabase.keyPath(for: a))
        #expect(throws: ProtectedDatabaseError.keyMismatch(path: a)) { try ProtectedDatabase.open(at: a, files: files) }
        // a's record before an upgrade put back after it: refused by an application that
        // states the class it expects.
        try writeFileBytes(keyA, ProtectedDatabase.keyPath(for: a))
        let weak = try fileBytes(ProtectedDatabase.keyPath(for: a))
        try ProtectedDatabase.upgrade(at: a, from: .complete, to: .none, files: files)   // a weaker record of a, kept by the attacker
        let weakRecord = try fileBytes(ProtectedDatabase.keyPath(for: a))
        try ProtectedDatabase.upgrade(at: a, from: .none, to: .complete, files: files)
        #expect(weak != weakRecord)
        try writeFileBytes(weakRecord, ProtectedDatabase.keyPath(for: a))
        #expect(throws: ProtectedDatabaseError.classMismatch(path: a, expected: .complete, found: .none)) {
            try ProtectedDatabase.open(at: a, files: files, expecting: .complete)
        }
        // A record that is a protected file but not a key record.
        try files.write(Array("not a key".utf8), to: ProtectedDatabase.keyPath(for: a), protection: .complete)
        #expect(throws: ProtectedDatabaseError.self) { try ProtectedDatabase.open(at: a, files: files) }
        // No record at all.
        unlink(ProtectedDatabase.keyPath(for: a))
        #expect(throws: ProtectedDatabaseError.notFound(path: a)) { try ProtectedDatabase.open(at: a, files: files) }
    }

    /// The WAL cut short, or a frame of it altered while no connection is open: SQLite's
    /// recovery ends the WAL at the first frame that does not authenticate (as at a torn
    /// write); the database opens with the transactions before it. An altered frame read
    /// while the database is open is an error.
    @Test func walTruncatedOrAltered() throws {
        let fixture = try DatabaseFixture()
        defer { fixture.cleanup() }
        let (_, files) = try fixture.setUp()
        let path = fixture.path("wal.db")
        try Self.make(path, files, rows: 10)
        let db = try ProtectedDatabase.open(at: path, files: files)
        for batch in 0..<5 {
            try db.write { db in
                for index in 0..<10 { try db.execute(sql: "INSERT INTO t(v) VALUES (?)", arguments: ["batch \(batch) \(index)"]) }
            }
        }
        let main = try fileBytes(path)
        let wal = try fileBytes(path + "-wal")
        #expect(wal.count > 32 + 5 * (24 + 4096))
        // What a kill -9 leaves: the files as they are, no checkpoint.
        let copy = fixture.path("copy.db")
        try writeFileBytes(main, copy)
        try writeFileBytes(wal, copy + "-wal")
        try writeFileBytes(try fileBytes(ProtectedDatabase.keyPath(for: path)), ProtectedDatabase.keyPath(for: copy))
        #expect(try Self.count(copy, files) == 60)
        // The WAL cut after its first frames.
        let frame = 24 + 4096
        for name in ["cut.db", "flip.db"] {
            let target = fixture.path(name)
            try writeFileBytes(main, target)
            try writeFileBytes(try fileBytes(ProtectedDatabase.keyPath(for: path)), ProtectedDatabase.keyPath(for: target))
            var altered = wal
            if name == "cut.db" {
                altered = Array(wal.prefix(32 + 2 * frame + 100))
            } else {
                altered[32 + 2 * frame + 24 + 50] ^= 0x80
            }
            try writeFileBytes(altered, target + "-wal")
            let rows = try Self.count(target, files)
            #expect(rows >= 10 && rows < 60, "\(name): \(rows) rows")
        }
        // Altered under an open connection: the page read fails.
        var altered = wal
        altered[32 + 24 + 50] ^= 0x80
        let fd = open(path + "-wal", O_WRONLY)
        #expect(fd >= 0)
        _ = altered.withUnsafeBytes { pwrite(fd, $0.baseAddress! + 32 + 24 + 50, 1, 32 + 24 + 50) }
        close(fd)
        (db.writer as? DatabasePool)?.releaseMemory()
        let error = #expect(throws: ProtectedDatabaseError.self) { try db.read { try String.fetchAll($0, sql: "SELECT v FROM t") } }
        if case .tampered = error {} else { Issue.record("\(String(describing: error))") }
        try? db.close()
    }

    /// kill -9 in a transaction (files copied while it is open): the copy opens without it.
    @Test func killedInATransaction() throws {
        let fixture = try DatabaseFixture()
        defer { fixture.cleanup() }
        let (_, files) = try fixture.setUp()
        let path = fixture.path("tx.db")
        try Self.make(path, files, rows: 20)
        let db = try ProtectedDatabase.open(at: path, files: files)
        let copy = fixture.path("copy.db")
        try db.write { conn in
            for index in 0..<2000 { try conn.execute(sql: "INSERT INTO t(v) VALUES (?)", arguments: ["uncommitted \(index) " + String(repeating: "y", count: 200)]) }
            // Pages of the open transaction spill to the WAL: the disk as a kill leaves it.
            try writeFileBytes(try fileBytes(path), copy)
            if FileManager.default.fileExists(atPath: path + "-wal") { try writeFileBytes(try fileBytes(path + "-wal"), copy + "-wal") }
            try writeFileBytes(try fileBytes(ProtectedDatabase.keyPath(for: path)), ProtectedDatabase.keyPath(for: copy))
        }
        try db.close()
        #expect(try Self.count(copy, files) == 20)
        #expect(try Self.count(path, files) == 2020)
    }

    /// A rekey stopped at each step (as a kill would stop it): the database opens with every
    /// row, under the old key or the new one; a finished rekey changes the key and the salt,
    /// and SQLCipher's view (the exported key) follows.
    @Test func rekeyStoppedAtEveryStep() throws {
        let fixture = try DatabaseFixture()
        defer { fixture.cleanup() }
        let (_, files) = try fixture.setUp()
        struct Stop: Error {}
        let hooks = ProtectedDatabase.testHooks
        defer { hooks.afterBothKeys = nil; hooks.beforeRename = nil; hooks.afterRename = nil }
        for step in 0..<4 {
            let path = fixture.path("rekey-\(step).db")
            try Self.make(path, files, protection: .complete, rows: 50)
            let oldKey = try hexKey(path, files)
            let oldSalt = Array(try fileBytes(path).prefix(16))
            hooks.afterBothKeys = step == 0 ? { throw Stop() } : nil
            hooks.beforeRename = step == 1 ? { throw Stop() } : nil
            hooks.afterRename = step == 2 ? { throw Stop() } : nil
            do {
                try ProtectedDatabase.rekey(at: path, files: files)
                #expect(step == 3)
            } catch {
                // A hook's error comes out as `io` with its message (rekey throws only
                // `ProtectedDatabaseError`).
                guard case .io("\(Stop())") = error else { throw error }
                #expect(step < 3)
            }
            #expect(try Self.count(path, files) == 50, "stopped at step \(step)")
            let newKey = try hexKey(path, files)
            let newSalt = Array(try fileBytes(path).prefix(16))
            if step >= 2 {
                #expect(newKey != oldKey && newSalt != oldSalt, "step \(step)")
            } else {
                #expect(newKey == oldKey && newSalt == oldSalt, "step \(step)")
            }
            // Whatever happened, the record now holds one key again and no staging file is left.
            #expect(!FileManager.default.fileExists(atPath: path + "-rekey"))
        }
    }

    /// A class change stopped just before the record is renamed into place, and just after:
    /// old class or new, never neither.
    @Test func classChangeOldOrNewNeverNeither() throws {
        let fixture = try DatabaseFixture()
        defer { fixture.cleanup() }
        let (_, files) = try fixture.setUp()
        let path = fixture.path("class.db")
        try Self.make(path, files, protection: .completeUnlessOpen, rows: 30)
        let keyPath = ProtectedDatabase.keyPath(for: path)
        let before = try fileBytes(keyPath)
        let snapshot = Protected<[UInt8]?>(nil)
        files.testHooks.beforeReplace = { _ in snapshot.set(try? fileBytes(keyPath)) }
        defer { files.testHooks.beforeReplace = nil }
        #expect(try ProtectedDatabase.upgrade(at: path, from: .completeUnlessOpen, to: .complete, files: files) == .changed)
        #expect(try ProtectedDatabase.upgrade(at: path, from: .completeUnlessOpen, to: .complete, files: files) == .alreadyInClass)
        #expect(snapshot.get() == before)
        // Killed before the rename: the old record, which opens as the old class.
        let after = try fileBytes(keyPath)
        try writeFileBytes(before, keyPath)
        #expect(try ProtectedDatabase.status(at: path, files: files).protection == .completeUnlessOpen)
        #expect(try Self.count(path, files) == 30)
        try writeFileBytes(after, keyPath)
        #expect(try ProtectedDatabase.status(at: path, files: files).protection == .complete)
        #expect(try Self.count(path, files) == 30)
        // The pages were not touched.
        #expect(throws: ProtectedDatabaseError.classMismatch(path: path, expected: .none, found: .complete)) {
            try ProtectedDatabase.upgrade(at: path, from: .none, to: .completeUnlessOpen, files: files)
        }
    }

    /// A full disk during a checkpoint: a clear error, the database intact.
    @Test func fullDiskDuringACheckpoint() throws {
        guard let disk = try SmallFileSystem(kilobytes: 1024) else {
            print("skipped: mounting a small tmpfs needs root")
            return
        }
        let fixture = try DatabaseFixture()
        defer { fixture.cleanup() }
        let (_, files) = try fixture.setUp()
        let path = disk.path + "/full.db"
        let db = try ProtectedDatabase.create(at: path, protection: .completeUnlessOpen, files: files)
        try db.write { db in
            try db.execute(sql: "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)")
            for index in 0..<300 { try db.execute(sql: "INSERT INTO t(v) VALUES (?)", arguments: ["row \(index) " + String(repeating: "z", count: 500)]) }
        }
        disk.fill()
        let error = #expect(throws: ProtectedDatabaseError.self) {
            try db.write { db in
                for index in 0..<300 { try db.execute(sql: "INSERT INTO t(v) VALUES (?)", arguments: ["more \(index) " + String(repeating: "w", count: 500)]) }
            }
            _ = try db.writer.writeWithoutTransaction { try $0.checkpoint(.truncate) }
        }
        if case .diskFull = error {} else if case .sqlite = error {} else { Issue.record("\(String(describing: error))") }
        disk.unfill()
        try? db.close()
        let reopened = try ProtectedDatabase.open(at: path, files: files)
        let rows = try reopened.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM t") }
        #expect(rows == 300 || rows == 600)
        #expect(try reopened.read { try String.fetchOne($0, sql: "PRAGMA integrity_check") } == "ok")
        try reopened.close()
    }
}

/// A value behind a lock, for hooks.
final class Protected<Value>: @unchecked Sendable {
    private let lock = NSLock()
    private var value: Value
    init(_ value: Value) { self.value = value }
    func get() -> Value { lock.withLock { value } }
    func set(_ newValue: Value) { lock.withLock { value = newValue } }
}
