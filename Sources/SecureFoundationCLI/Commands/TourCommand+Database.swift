import Foundation
import GRDB
import SecureFoundation

extension Tour {
    /// The protected-database step: a complete database written, its file checked for
    /// plaintext, then refused at the lock (open connection and reopening), reopened after the
    /// unlock, and its class changed without touching the pages. Leaves the vault unlocked.
    mutating func protectedDatabaseStep(manager: CryptoManager, passcode: SecretBytes) throws {
        say("Protected database: SQLite through GRDB in SQLCipher 4's format, class complete; refused at the lock")
        let files = ProtectedFiles(manager: manager)
        let path = filesDirectory + "/orders.db"
        let db = try ProtectedDatabase.create(at: path, protection: .complete, files: files)
        try db.write { db in
            try db.execute(sql: "CREATE TABLE orders(id INTEGER PRIMARY KEY, item TEXT NOT NULL)")
            for index in 1...100 { try db.execute(sql: "INSERT INTO orders(item) VALUES (?)", arguments: ["espresso machine \(index)"]) }
        }
        let rows = try db.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM orders") }
        try expect(rows == 100, "the database holds \(rows ?? -1) rows, not 100")
        _ = try db.writer.writeWithoutTransaction { try $0.checkpoint(.truncate) }
        let bytes = try Data(contentsOf: URL(fileURLWithPath: path))
        try expect(!bytes.contains(Data("espresso".utf8)) && !bytes.starts(with: Data("SQLite format 3".utf8)),
                   "the database file holds plaintext")
        proves("100 rows written through GRDB; the file (\(bytes.count / 4096) pages) holds no plaintext, not even SQLite's header")
        manager.lock()
        let refused = try expectFailure("reading the open database after the lock", {
            _ = try db.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM orders") }
        }, check: { error in
            if case ProtectedDatabaseError.locked(_, .complete) = error { return true }
            return false
        })
        proves("locked: the open connection refuses reads: \(refused)")
        try? db.close()
        _ = try expectFailure("opening it while locked", { _ = try ProtectedDatabase.open(at: path, files: files) }, check: { error in
            if case ProtectedDatabaseError.locked = error { return true }
            return false
        })
        try manager.unlock(passcode: passcode)
        let reopened = try ProtectedDatabase.open(at: path, files: files, expecting: .complete)
        let item = try reopened.read { db in try String.fetchOne(db, sql: "SELECT item FROM orders WHERE id = 42") }
        try expect(item == "espresso machine 42", "row 42 reads \(item ?? "nothing")")
        try reopened.close()
        proves("unlocked: reopened (expecting complete) and row 42 reads back")
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        try expect(try ProtectedDatabase.upgrade(at: path, from: .complete, to: .completeUntilFirstUserAuthentication, files: files) == .changed,
                   "the class change did not change the key record")
        try expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before, "the class change touched the pages")
        proves("class changed to completeUntilFirstUserAuthentication by re-wrapping the key record only (pages unchanged)")
    }
}
