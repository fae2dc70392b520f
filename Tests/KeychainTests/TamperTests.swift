import Foundation
import Testing
import GRDB
import Cipher
import Vault
@testable import Keychain

@Suite struct TamperTests {
    private func setUp() throws -> (TemporaryDirectory, TestKeySource, String) {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        let keychain = try open(dir, source)
        try keychain.setPassword("first-value", forService: "s", account: "one")
        try keychain.setPassword("second-value", forService: "s", account: "two")
        try keychain.flush()
        // Closed before the test edits the file, so its own connection never meets a busy lock.
        try keychain.close()
        return (dir, source, keychain.path)
    }

    private func rows(_ path: String) throws -> [(id: Data, sealed: Data)] {
        try inspectionQueue(path).read { db in
            try GRDB.Row.fetchAll(db, sql: "SELECT item_id, sealed FROM keychain_items ORDER BY item_id").map { ($0[0], $0[1]) }
        }
    }

    @Test func flippedByteAnywhereInTheRecordIsCorruption() throws {
        let (dir, source, path) = try setUp()
        let target = try rows(path)[0]
        // Header (magic, version, key id), nonce, ciphertext, tag.
        for position in [0, 4, 9, 20, 30, target.sealed.count / 2, target.sealed.count - 3] {
            var changed = target.sealed
            changed[position] ^= 0x01
            try inspectionQueue(path).write { db in
                try db.execute(sql: "UPDATE keychain_items SET sealed = ? WHERE item_id = ?", arguments: [changed, target.id])
            }
            let keychain = try open(dir, source)
            let readError = keychainError { for account in ["one", "two"] { _ = try keychain.password(forService: "s", account: account) } }
            #expect(readError?.isCorrupted == true, "byte \(position): \(String(describing: readError))")
            let listError = keychainError { _ = try keychain.accounts(forService: "s") }
            #expect(listError?.damagedIDs == [Encoding.hex(Array(target.id))], "byte \(position): \(String(describing: listError))")
            try keychain.close()
        }
        try inspectionQueue(path).write { db in
            try db.execute(sql: "UPDATE keychain_items SET sealed = ? WHERE item_id = ?", arguments: [target.sealed, target.id])
        }
        #expect(try open(dir, source).password(forService: "s", account: "one") == "first-value")
    }

    @Test func swappedRowsAreDetected() throws {
        let (dir, source, path) = try setUp()
        let all = try rows(path)
        try inspectionQueue(path).write { db in
            try db.execute(sql: "UPDATE keychain_items SET sealed = ? WHERE item_id = ?", arguments: [all[1].sealed, all[0].id])
            try db.execute(sql: "UPDATE keychain_items SET sealed = ? WHERE item_id = ?", arguments: [all[0].sealed, all[1].id])
        }
        let keychain = try open(dir, source)
        for account in ["one", "two"] {
            let error = keychainError { _ = try keychain.password(forService: "s", account: account) }
            #expect(error?.isCorrupted == true, "\(account): \(String(describing: error))")
        }
        #expect(keychainError { _ = try keychain.accounts(forService: "s") }?.damagedIDs?.count == 2)
    }

    @Test func rowMovedToAnotherIdIsDetected() throws {
        let (dir, source, path) = try setUp()
        let all = try rows(path)
        // The row of "one" given a new id in the same service's range: it no longer opens there.
        var moved = all[0].id
        moved[moved.count - 1] ^= 0x01
        try inspectionQueue(path).write { db in
            try db.execute(sql: "UPDATE keychain_items SET item_id = ? WHERE item_id = ?", arguments: [moved, all[0].id])
        }
        let keychain = try open(dir, source)
        #expect(keychainError { _ = try keychain.accounts(forService: "s") }?.damagedIDs == [Encoding.hex(Array(moved))])
    }

    @Test func changedAccessibilityIsDetected() throws {
        let (dir, source, path) = try setUp()
        try inspectionQueue(path).write { db in
            try db.execute(sql: "UPDATE keychain_items SET accessibility = 2")
        }
        let keychain = try open(dir, source)
        #expect(keychainError { _ = try keychain.password(forService: "s", account: "one") }?.isCorrupted == true)
    }

    @Test func olderFormatIsRefusedUntouched() throws {
        let (dir, source, path) = try setUp()
        try inspectionQueue(path).write { db in
            try db.execute(sql: "UPDATE keychain_meta SET value = 1 WHERE key = 'format'")
        }
        let before = try rows(path)
        let error = keychainError { _ = try open(dir, source) }
        guard case .corrupted(let message)? = error else { Issue.record("got \(String(describing: error))"); return }
        #expect(message.contains("format 1"))
        #expect(try rows(path).map(\.sealed) == before.map(\.sealed))
    }

    @Test func garbageFileIsCorrupted() throws {
        let dir = try TemporaryDirectory()
        let kc = dir.sub("kc")
        try FileManager.default.createDirectory(atPath: kc, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let file = (kc as NSString).appendingPathComponent("keychain.sqlite")
        _ = FileManager.default.createFile(atPath: file, contents: Data(repeating: 0x41, count: 8192), attributes: [.posixPermissions: 0o600])
        let error = keychainError { _ = try open(dir, try TestKeySource()) }
        #expect(error?.isCorrupted == true, "\(String(describing: error))")
    }
}
