import Foundation
import Testing
import GRDB
import Cipher
import Vault
import ProtectedFiles
import TestSupport
@testable import ProtectedDatabase

@Suite("Protected database")
struct ProtectedDatabaseTests {
    /// A pool and a queue: rows written, closed, read back; nothing of them on disk in clear;
    /// the file starts with its salt, not SQLite's magic, and has SQLCipher's geometry.
    @Test(arguments: ProtectedDatabase.Kind.allCases)
    func roundTripLeavesNoPlaintext(kind: ProtectedDatabase.Kind) throws {
        let fixture = try DatabaseFixture()
        defer { fixture.cleanup() }
        let (_, files) = try fixture.setUp()
        let path = fixture.path("app.db")
        let marker = "plaintext-marker-\(kind.rawValue)"
        do {
            let db = try ProtectedDatabase.create(at: path, protection: .completeUnlessOpen, files: files, kind: kind)
            try db.write { db in
                try db.execute(sql: "CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT)")
                for index in 0..<500 { try db.execute(sql: "INSERT INTO notes(body) VALUES (?)", arguments: ["\(marker) \(index)"]) }
            }
            // While open: the WAL holds the rows, encrypted.
            for file in [path, path + "-wal"] where FileManager.default.fileExists(atPath: file) {
                #expect(!Data(try fileBytes(file)).contains(Data(marker.utf8)), "\(file) holds plaintext")
            }
            try db.close()
        }
        let bytes = try fileBytes(path)
        #expect(bytes.count % 4096 == 0 && bytes.count >= 4096)
        #expect(Array(bytes[0..<16]) != Array("SQLite format 3\0".utf8))
        #expect(!Data(bytes).contains(Data(marker.utf8)))
        #expect(!Data(bytes).contains(Data("CREATE TABLE".utf8)))
        let db = try ProtectedDatabase.open(at: path, files: files, expecting: .completeUnlessOpen, kind: kind)
        let count = try db.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM notes WHERE body LIKE ?", arguments: ["\(marker)%"]) }
        #expect(count == 500)
        let header = try db.read { db in
            (try Int.fetchOne(db, sql: "PRAGMA page_size"), try String.fetchOne(db, sql: "PRAGMA journal_mode"))
        }
        #expect(header.0 == 4096 && header.1 == "wal")
        try db.close()
    }

    /// A rollback journal would hold pages in clear: switching to one is refused.
    @Test func rollbackJournalIsRefused() throws {
        let fixture = try DatabaseFixture()
        defer { fixture.cleanup() }
        let (_, files) = try fixture.setUp()
        let path = fixture.path("journal.db")
        let db = try ProtectedDatabase.create(at: path, protection: .none, files: files, kind: .queue)
        try db.write { try $0.execute(sql: "CREATE TABLE t(x)") }
        let error = #expect(throws: DatabaseError.self) {
            try db.writer.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA journal_mode = DELETE")
                try db.execute(sql: "INSERT INTO t VALUES (1)")
            }
        }
        #expect(error?.resultCode == .SQLITE_CANTOPEN)
        #expect(!FileManager.default.fileExists(atPath: path + "-journal"))
    }

    /// SQLCipher 4 opens what the project wrote (raw key), and the project opens what
    /// SQLCipher wrote under an imported key.
    @Test func sqlcipherReadsOurDatabaseAndWeReadItsDatabase() throws {
        let fixture = try DatabaseFixture()
        defer { fixture.cleanup() }
        let (_, files) = try fixture.setUp()
        let path = fixture.path("ours.db")
        do {
            let db = try ProtectedDatabase.create(at: path, protection: .complete, files: files)
            try db.write { db in
                try db.execute(sql: "CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT)")
                for index in 0..<2000 { try db.execute(sql: "INSERT INTO t(v) VALUES (?)", arguments: [String(repeating: "v\(index)", count: 5)]) }
            }
            try db.close()
        }
        // The close checkpointed the WAL by copying its pages' ciphertext (checked to decrypt to
        // what SQLite wrote) into the main file, which SQLCipher now reads.
        #expect(ProtectedDatabase.copiedPageCount > 0)
        let key = try hexKey(path, files)
        let read = """
        import sys, sqlcipher3
        c = sqlcipher3.connect(sys.argv[1])
        c.execute("PRAGMA key = \\"x'" + sys.argv[2] + "'\\"")
        print(c.execute("PRAGMA cipher_version").fetchone()[0])
        print(c.execute("SELECT count(*), sum(length(v)) FROM t").fetchone())
        print(c.execute("PRAGMA cipher_integrity_check").fetchall())
        """
        guard let result = try sqlcipher(read, [path, key]) else {
            Issue.record("SQLCipher 4 for Python is not installed: pip install sqlcipher3-wheels")
            return
        }
        #expect(result.0 == 0, "\(result.2)")
        let lines = result.1.split(separator: "\n").map(String.init)
        #expect(lines.first?.hasPrefix("4.") == true, "\(lines)")
        let expectedLength = (0..<2000).reduce(0) { $0 + String(repeating: "v\($1)", count: 5).count }
        #expect(lines.dropFirst().first == "(2000, \(expectedLength))")
        #expect(lines.dropFirst(2).first == "[]")

        // SQLCipher writes a database; the project adopts it with its key.
        let theirs = fixture.path("theirs.db")
        let write = """
        import sys, sqlcipher3
        c = sqlcipher3.connect(sys.argv[1])
        c.execute("PRAGMA key = \\"x'" + sys.argv[2] + "'\\"")
        c.execute("CREATE TABLE s(id INTEGER PRIMARY KEY, v TEXT)")
        c.executemany("INSERT INTO s(v) VALUES (?)", [("row %d" % i,) for i in range(3000)])
        c.commit()
        c.close()
        """
        let theirKey = try SecretBytes.random(count: 32)
        let theirHex = theirKey.withUnsafeBytes { Encoding.hex(Array($0)) }
        let written = try #require(try sqlcipher(write, [theirs, theirHex]))
        #expect(written.0 == 0, "\(written.2)")
        // SQLCipher made it 0644 (the umask's mode): adopted, every file of it is 0600.
        chmod(theirs, 0o644)
        try ProtectedDatabase.adopt(at: theirs, key: theirKey, protection: .completeUntilFirstUserAuthentication, files: files)
        let db = try ProtectedDatabase.open(at: theirs, files: files, expecting: .completeUntilFirstUserAuthentication)
        try db.write { try $0.execute(sql: "CREATE TABLE IF NOT EXISTS mode_probe (x)") }
        for name in [theirs, theirs + "-wal", theirs + "-shm"] {
            var info = stat()
            #expect(lstat(name, &info) == 0 && info.st_mode & 0o777 == 0o600, "\(name): \(String(info.st_mode & 0o777, radix: 8))")
        }
        #expect(try db.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM s") } == 3000)
        #expect(try db.read { try String.fetchOne($0, sql: "SELECT v FROM s WHERE id = 3000") } == "row 2999")
        try db.write { try $0.execute(sql: "INSERT INTO s(v) VALUES ('added by the project')") }
        try db.close()
        // And SQLCipher reads the project's change.
        let check = """
        import sys, sqlcipher3
        c = sqlcipher3.connect(sys.argv[1])
        c.execute("PRAGMA key = \\"x'" + sys.argv[2] + "'\\"")
        print(c.execute("SELECT v FROM s ORDER BY id DESC LIMIT 1").fetchone()[0])
        """
        let after = try #require(try sqlcipher(check, [theirs, theirHex]))
        #expect(after.0 == 0, "\(after.2)")
        #expect(after.1 == "added by the project\n")
    }

    /// The classes: what opens unlocked, locked, and what an open database does at a lock.
    @Test func classesAtTheLock() throws {
        let fixture = try DatabaseFixture()
        defer { fixture.cleanup() }
        let (manager, files) = try fixture.setUp()
        var open: [FileProtectionClass: ProtectedDatabase] = [:]
        for cls in FileProtectionClass.allValues {
            let db = try ProtectedDatabase.create(at: fixture.path(cls.name), protection: cls, files: files)
            try db.write { db in
                try db.execute(sql: "CREATE TABLE t(v)")
                try db.execute(sql: "INSERT INTO t VALUES ('secret row')")
            }
            open[cls] = db
        }
        // A reader that holds a transaction open across the lock gets no more rows.
        let complete = try #require(open[.complete])
        manager.lock()
        for (cls, db) in open {
            switch cls.protection {
            case .complete:
                #expect(throws: ProtectedDatabaseError.locked(path: db.path, cls)) { try db.read { try String.fetchOne($0, sql: "SELECT v FROM t") } }
                // Straight through GRDB too: the connections themselves refuse.
                #expect(throws: (any Error).self) { try db.writer.read { try String.fetchOne($0, sql: "SELECT v FROM t") } }
                #expect(throws: ProtectedDatabaseError.locked(path: db.path, cls)) {
                    try ProtectedDatabase.open(at: db.path, files: files)
                }
            case .completeUnlessOpen:
                #expect(try db.read { try String.fetchOne($0, sql: "SELECT v FROM t") } == "secret row")
                try db.write { try $0.execute(sql: "INSERT INTO t VALUES ('written while locked')") }
                #expect(throws: ProtectedDatabaseError.locked(path: db.path, cls)) {
                    try ProtectedDatabase.open(at: db.path, files: files)
                }
            case .completeUntilFirstUserAuthentication, .none:
                #expect(try db.read { try String.fetchOne($0, sql: "SELECT v FROM t") } == "secret row")
                let again = try ProtectedDatabase.open(at: db.path, files: files, expecting: cls)
                #expect(try again.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM t") } == 1)
                try again.close()
            }
        }
        #expect(complete.isRevoked)
        // A new completeUnlessOpen database while locked: created, used, closed.
        let locked = try ProtectedDatabase.create(at: fixture.path("made-locked"), protection: .completeUnlessOpen, files: files)
        try locked.write { try $0.execute(sql: "CREATE TABLE t(v); INSERT INTO t VALUES ('made while locked')") }
        try locked.close()
        #expect(throws: ProtectedDatabaseError.locked(path: fixture.path("complete-new"), .complete)) {
            try ProtectedDatabase.create(at: fixture.path("complete-new"), protection: .complete, files: files)
        }
        for db in open.values { try? db.close() }
        // After the next unlock everything opens again, the rows intact.
        try manager.unlock(passcode: fixture.passcode)
        let reopened = try ProtectedDatabase.open(at: complete.path, files: files, expecting: .complete)
        #expect(try reopened.read { try String.fetchOne($0, sql: "SELECT v FROM t") } == "secret row")
        let madeLocked = try ProtectedDatabase.open(at: fixture.path("made-locked"), files: files)
        #expect(try madeLocked.read { try String.fetchOne($0, sql: "SELECT v FROM t") } == "made while locked")
        let unlessOpen = try ProtectedDatabase.open(at: fixture.path(FileProtectionClass.completeUnlessOpen.name), files: files)
        #expect(try unlessOpen.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM t") } == 2)
    }

    /// A transaction running at the lock: its next row is refused (no page from the cache).
    @Test func lockDuringAnOpenTransactionServesNoCachedRow() throws {
        let fixture = try DatabaseFixture()
        defer { fixture.cleanup() }
        let (manager, files) = try fixture.setUp()
        let db = try ProtectedDatabase.create(at: fixture.path("cached"), protection: .complete, files: files)
        try db.write { db in
            try db.execute(sql: "CREATE TABLE t(v)")
            for index in 0..<100 { try db.execute(sql: "INSERT INTO t VALUES (?)", arguments: ["row \(index)"]) }
        }
        var rowsAfterLock = 0
        var failure: (any Error)?
        try db.writer.read { conn in
            // Warm the cache, then lock in the middle of the transaction.
            _ = try Int.fetchOne(conn, sql: "SELECT count(*) FROM t")
            manager.lock()
            db.revoke()   // what the lock observer does (it runs on its own task)
            do {
                let rows = try String.fetchAll(conn, sql: "SELECT v FROM t")
                rowsAfterLock = rows.count
            } catch {
                failure = error
            }
        }
        #expect(rowsAfterLock == 0)
        #expect(failure != nil)
        // After the next unlock a new opening works; the connections of the revoked instance
        // (never closed) stay refused.
        try manager.unlock(passcode: fixture.passcode)
        let reopened = try ProtectedDatabase.open(at: fixture.path("cached"), files: files, expecting: .complete)
        #expect(try reopened.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM t") } == 100)
        #expect(throws: (any Error).self) { try db.writer.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM t") } }
        #expect(throws: ProtectedDatabaseError.locked(path: db.path, .complete)) { try db.read { try Int.fetchOne($0, sql: "SELECT 1") } }
        try reopened.close()
    }
}
