import Foundation
import Testing
import Cipher
import Vault
@testable import Keychain

@Suite struct QueryTests {
    @Test func addCopyUpdateDelete() throws {
        let dir = try TemporaryDirectory()
        let keychain = try open(dir, try TestKeySource())
        let web = ItemKey.internet(server: "example.com", account: "bob", networkProtocol: "https", port: 443, path: "/")
        try keychain.add(SecretBytes(utf8: "web-secret"), for: web, accessibility: .afterFirstUnlock, label: "Example", comment: "c1")
        #expect(keychainError { try keychain.add(SecretBytes(utf8: "again"), for: web) }?.isDuplicate == true)
        try keychain.add(SecretBytes(utf8: "alt"), for: .internet(server: "example.com", account: "carol", networkProtocol: "ftp", port: 21, path: "/"))
        try keychain.add(SecretBytes(utf8: "g1"), for: .generic(service: "app", account: "u1"), accessibility: .alwaysThisDeviceOnly, label: "L")
        try keychain.add(SecretBytes(utf8: "g2"), for: .generic(service: "app", account: "u2"))

        // Match one, exact, data and attributes.
        let exact = try keychain.copyMatching(KeychainQuery(itemClass: .internetPassword, account: "bob", server: "example.com",
                                                            networkProtocol: "https", port: 443, path: "/", returning: [.data, .attributes]))
        #expect(exact.count == 1)
        #expect(text(try #require(exact[0].data)) == "web-secret")
        let attributes = try #require(exact[0].attributes)
        #expect(attributes.key == web && attributes.label == "Example" && attributes.comment == "c1")
        #expect(attributes.accessibility == .afterFirstUnlock)
        #expect(attributes.creationDate <= attributes.modificationDate)

        // Match all of a server, by protocol, by label.
        #expect(try keychain.copyMatching(KeychainQuery(itemClass: .internetPassword, server: "example.com", limit: .all)).count == 2)
        let ftp = try keychain.copyMatching(KeychainQuery(itemClass: .internetPassword, networkProtocol: "ftp", limit: .all, returning: .attributes))
        #expect(ftp.map { $0.attributes?.key.account } == ["carol"])
        #expect(ftp[0].data == nil)
        let labelled = try keychain.copyMatching(KeychainQuery(label: "L", limit: .all, returning: .attributes))
        #expect(labelled.map { $0.attributes?.key.account } == ["u1"])
        #expect(try keychain.copyMatching(KeychainQuery(service: "app", limit: .all)).count == 2)
        #expect(try keychain.copyMatching(KeychainQuery(service: "app", limit: .one)).count == 1)
        #expect(try keychain.copyMatching(KeychainQuery(accessibility: .alwaysThisDeviceOnly, limit: .all)).count == 1)
        #expect(keychainError { _ = try keychain.copyMatching(KeychainQuery(service: "nope")) }?.isNotFound == true)
        #expect(keychainError { _ = try keychain.copyMatching(KeychainQuery(service: "app", account: "u1", label: "other")) }?.isNotFound == true)

        // Update: label and data of one; accessibility of a service.
        try keychain.flush()
        #expect(try keychain.update(KeychainQuery(service: "app", account: "u1"), with: ItemUpdate(data: SecretBytes(utf8: "g1b"), label: .some(nil))) == 1)
        let updated = try keychain.copyMatching(KeychainQuery(service: "app", account: "u1", returning: [.data, .attributes]))
        #expect(text(try #require(updated[0].data)) == "g1b")
        #expect(updated[0].attributes?.label == nil)
        #expect(updated[0].attributes?.accessibility == .alwaysThisDeviceOnly)
        #expect(try keychain.update(KeychainQuery(service: "app"), with: ItemUpdate(accessibility: .whenUnlockedThisDeviceOnly)) == 2)
        #expect(try keychain.copyMatching(KeychainQuery(accessibility: .whenUnlockedThisDeviceOnly, limit: .all)).count == 2)
        #expect(keychainError { try keychain.update(KeychainQuery(service: "none"), with: ItemUpdate(label: "x")) }?.isNotFound == true)

        // Delete by query.
        #expect(try keychain.delete(KeychainQuery(itemClass: .internetPassword, server: "example.com")) == 2)
        #expect(keychainError { try keychain.delete(KeychainQuery(itemClass: .internetPassword)) }?.isNotFound == true)
        try keychain.flush()
        #expect(try keychain.copyMatching(KeychainQuery(limit: .all)).count == 2)
    }

    @Test func creationDateSurvivesUpdates() throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        let keychain = try open(dir, source)
        try keychain.setPassword("a", forService: "s", account: "x")
        try keychain.flush()
        let created = try #require(keychain.copyMatching(KeychainQuery(service: "s", account: "x", returning: .attributes))[0].attributes).creationDate
        Thread.sleep(forTimeInterval: 0.02)
        let other = try open(dir, source)
        try other.setPassword("b", forService: "s", account: "x")
        try other.flush()
        let after = try #require(keychain.copyMatching(KeychainQuery(service: "s", account: "x", returning: .attributes))[0].attributes)
        #expect(after.creationDate == created)
        #expect(after.modificationDate > created)
    }

    /// A write of an item this keychain has not read (another keychain object created it) keeps
    /// the creation date in the file: read back while the write is pending, by key and in a
    /// listing (which stays in creation order), and after the commit, it reports that date.
    @Test func pendingWriteOfAnUnreadItemReportsTheStoredCreationDate() throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        let first = try open(dir, source)
        try first.setPassword("a", forService: "s", account: "old")
        try first.flush()
        let created = try #require(first.copyMatching(KeychainQuery(service: "s", account: "old", returning: .attributes))[0].attributes).creationDate
        Thread.sleep(forTimeInterval: 0.02)
        let second = try open(dir, source, interval: .seconds(3600))
        try second.setPassword("n", forService: "s", account: "new")
        try second.setPassword("b", forService: "s", account: "old")
        let byKey = try #require(second.copyMatching(KeychainQuery(service: "s", account: "old", returning: .attributes))[0].attributes)
        #expect(byKey.creationDate == created)
        #expect(byKey.modificationDate > created)
        let listed = try second.copyMatching(KeychainQuery(service: "s", limit: .all, returning: .attributes)).compactMap(\.attributes)
        #expect(listed.map(\.key.account) == ["old", "new"])
        #expect(listed.first?.creationDate == created)
        #expect(try second.accounts(forService: "s").map(\.account) == ["old", "new"])
        #expect(try second.password(forService: "s", account: "old") == "b")
        try second.flush()
        let stored = try #require(try open(dir, source).copyMatching(KeychainQuery(service: "s", account: "old", returning: .attributes))[0].attributes)
        #expect(stored.creationDate == created)
        #expect(stored.modificationDate == byKey.modificationDate)
    }

    /// Within one coalescing window: repeated sets keep the first creation date, an update of a
    /// cached item keeps the stored one, and an item deleted and set again is a new item.
    @Test func creationDatesWithinOneCoalescingWindow() throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        let keychain = try open(dir, source, interval: .seconds(3600))
        func attributes(_ keychain: Keychain) throws -> ItemAttributes {
            try #require(keychain.copyMatching(KeychainQuery(service: "s", account: "x", returning: .attributes))[0].attributes)
        }
        try keychain.setPassword("a", forService: "s", account: "x")
        Thread.sleep(forTimeInterval: 0.02)
        try keychain.setPassword("b", forService: "s", account: "x")
        try keychain.flush()
        let first = try attributes(keychain)
        #expect(first.modificationDate > first.creationDate)

        _ = try keychain.password(forService: "s", account: "x")  // now cached
        Thread.sleep(forTimeInterval: 0.02)
        try keychain.setPassword("c", forService: "s", account: "x")
        try keychain.flush()
        #expect(try attributes(keychain).creationDate == first.creationDate)

        Thread.sleep(forTimeInterval: 0.02)
        try keychain.deletePassword(forService: "s", account: "x")
        try keychain.setPassword("d", forService: "s", account: "x")
        let renewed = try attributes(keychain)
        #expect(renewed.creationDate > first.creationDate)
        #expect(renewed.creationDate == renewed.modificationDate)
        try keychain.flush()
        let stored = try attributes(try open(dir, source))
        #expect(stored.creationDate == renewed.creationDate)
        #expect(try open(dir, source).password(forService: "s", account: "x") == "d")
    }
}
