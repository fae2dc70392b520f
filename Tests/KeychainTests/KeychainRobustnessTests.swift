import Foundation
import Testing
import GRDB
import Synchronization
import Cipher
import Vault
@testable import Keychain

/// A row with a value of the wrong SQLite type in any column is reported as a damaged item (the
/// process used to stop in GRDB's non-throwing decoder); the other items stay usable.
@Suite struct MistypedColumnTests {
    @Test(arguments: [
        "created = 'abc'", "accessibility = 'xyz'", "sealed = 12345", "modified = 'x'", "row_mac = NULL",
        "row_mac = x'00'", "accessibility = 300", "created = 1e999", "item_id = x'01'",
    ])
    func aMistypedColumnIsACorruptedItem(assignment: String) throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        var configuration = Keychain.Configuration()
        configuration.coalescingInterval = .milliseconds(5)
        let keychain = try Keychain(directory: dir.sub("kc"), keySource: source, configuration: configuration)
        try keychain.setPassword("damaged", forService: "svc", account: "victim")
        try keychain.close()
        let db = try DatabaseQueue(path: dir.sub("kc") + "/keychain.sqlite")
        let victim = try db.read { db in try Data.fetchAll(db, sql: "SELECT item_id FROM keychain_items") }
        #expect(victim.count == 1)
        try db.close()
        let second = try Keychain(directory: dir.sub("kc"), keySource: source, configuration: configuration)
        try second.setPassword("fine", forService: "other", account: "bystander")
        try second.close()
        let writer = try DatabaseQueue(path: dir.sub("kc") + "/keychain.sqlite")
        try writer.write { db in
            try db.execute(sql: "UPDATE keychain_items SET \(assignment) WHERE item_id = ?", arguments: [victim.first])
            #expect(db.changesCount == 1)
        }
        try writer.close()
        let reopened = try Keychain(directory: dir.sub("kc"), keySource: source, configuration: configuration)
        let error = keychainError { _ = try reopened.password(forService: "svc", account: "victim") }
        if assignment.hasPrefix("item_id") {
            #expect(error?.isNotFound == true, "\(String(describing: error))")
        } else {
            #expect(error?.isCorrupted == true, "\(String(describing: error))")
        }
        #expect(try reopened.password(forService: "other", account: "bystander") == "fine")
        try reopened.setPassword("new", forService: "other", account: "new")
        try reopened.flush()
        #expect(try reopened.password(forService: "other", account: "new") == "new")
    }
}

@Suite struct UpsertTests {
    /// Two keychains on one file (as two processes) race: one deletes and re-adds the item, the
    /// other upserts it. An upsert never fails as a duplicate, and the last write wins.
    @Test func addOrUpdateNeverReportsADuplicate() throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        var configuration = Keychain.Configuration()
        configuration.coalescingInterval = .milliseconds(1)
        let first = try Keychain(directory: dir.sub("kc"), keySource: source, configuration: configuration)
        let second = try Keychain(directory: dir.sub("kc"), keySource: source, configuration: configuration)
        let key = ItemKey.generic(service: "race", account: "a")
        let errors = Mutex<[String]>([])
        DispatchQueue.concurrentPerform(iterations: 2) { worker in
            for round in 0..<300 {
                do {
                    if worker == 0 {
                        try? first.deletePassword(forService: "race", account: "a")
                        try? first.add(SecretBytes(utf8: "added"), for: key, accessibility: .always)
                        try first.flush()
                    } else {
                        try second.addOrUpdate(SecretBytes(utf8: "upsert \(round)"), for: key, accessibility: .always, label: "L")
                        try second.flush()
                    }
                } catch {
                    errors.withLock { $0.append("\(error)") }
                }
            }
        }
        #expect(errors.withLock { $0 }.isEmpty, "\(errors.withLock { $0 })")
        try second.addOrUpdate(SecretBytes(utf8: "last"), for: key, accessibility: .afterFirstUnlock)
        try second.flush()
        #expect(try first.password(forService: "race", account: "a") == "last")
        // A nil label keeps the existing one.
        let attributes = try first.copyMatching(KeychainQuery(service: "race", account: "a", returning: .attributes)).first?.attributes
        #expect(attributes?.accessibility == .afterFirstUnlock)
    }

    @Test func addOrUpdateKeepsLabelCommentAndCreationDate() throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        let keychain = try Keychain(directory: dir.sub("kc"), keySource: source)
        let key = ItemKey.generic(service: "s", account: "a")
        try keychain.addOrUpdate(SecretBytes(utf8: "one"), for: key, label: "label", comment: "comment")
        try keychain.flush()
        let before = try #require(try keychain.copyMatching(KeychainQuery(service: "s", account: "a", returning: .attributes)).first?.attributes)
        try keychain.addOrUpdate(SecretBytes(utf8: "two"), for: key, accessibility: .whenUnlockedThisDeviceOnly)
        try keychain.flush()
        let after = try #require(try keychain.copyMatching(KeychainQuery(service: "s", account: "a", returning: .attributes)).first?.attributes)
        #expect(after.label == "label" && after.comment == "comment")
        #expect(after.accessibility == .whenUnlockedThisDeviceOnly)
        #expect(after.creationDate == before.creationDate)
        #expect(try keychain.securePassword(forService: "s", account: "a") == "two")
    }
}
