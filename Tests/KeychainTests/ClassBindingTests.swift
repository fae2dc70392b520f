import Foundation
import Testing
import GRDB
import Cipher
import Vault
@testable import Keychain

/// The attack of a writer of the data directory who holds the always-class key (it lives in that
/// directory) but not the blind-index key (a device sub-key kept elsewhere): re-seal a stronger
/// item's record under the always key with the documented context and mark its row `always`.
@Suite struct ClassBindingTests {
    private func open(_ dir: TemporaryDirectory, _ source: any KeychainKeySource) throws -> Keychain {
        var configuration = Keychain.Configuration()
        configuration.coalescingInterval = .milliseconds(5)
        return try Keychain(directory: dir.sub("kc"), keySource: source, configuration: configuration)
    }

    /// Rewrites the row of (service, account) as the attacker would: `value` re-sealed under the
    /// always key with "SFKC item v2" ‖ 00 ‖ code ‖ item_id, and the accessibility column set.
    private func downgrade(_ dir: TemporaryDirectory, alwaysKey: SecretBytes, service: String, account: String,
                           value: String, to accessibility: Accessibility) throws {
        let db = try DatabaseQueue(path: dir.sub("kc") + "/keychain.sqlite")
        defer { try? db.close() }
        try db.write { db in
            let ids = try Data.fetchAll(db, sql: "SELECT item_id FROM keychain_items")
            #expect(ids.count == 1)
            guard let idData = ids.first, let id = ItemID(idData) else { return }
            let code = ItemCodec.code(accessibility)
            let names = ItemCodec.encodeNames(key: .generic(service: service, account: account), label: nil, comment: nil)
            let plain = Array(value.utf8).withUnsafeBytes { ItemCodec.itemPlaintext(names: names, value: $0) }
            let context = Array("SFKC item v2".utf8) + [0, code] + id.bytes
            let sealed = try Sealed.seal(plain, with: SealingKey(key: alwaysKey), context: context)
            try db.execute(sql: "UPDATE keychain_items SET accessibility = ?, sealed = ? WHERE item_id = ?",
                           arguments: [Int64(code), Data(sealed), idData])
        }
    }

    @Test(arguments: [Accessibility.whenUnlockedThisDeviceOnly, .whenUnlocked, .afterFirstUnlock])
    func aRowMovedToTheAlwaysClassIsRefused(original: Accessibility) throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        let keychain = try open(dir, source)
        try keychain.add(SecretBytes(utf8: "the real secret"), for: .generic(service: "bank", account: "alice"), accessibility: original)
        try keychain.close()

        try downgrade(dir, alwaysKey: try source.classKey(for: .always), service: "bank", account: "alice",
                      value: "the attacker's value", to: .always)

        // Locked: only the always key is available, as for an attacker without the passcode.
        source.setUnlocked(false)
        let reopened = try open(dir, source)
        let read = keychainError { _ = try reopened.password(forService: "bank", account: "alice") }
        #expect(read?.isCorrupted == true, "\(String(describing: read))")
        #expect(read.map { "\($0)" }?.contains("class binding") == true)
        // The listing does not show the item's names: it is listed as damaged.
        let listed = try reopened.summaries()
        #expect(listed.count == 1 && listed.first?.attributes == nil && listed.first?.unavailable?.isCorrupted == true)
        // A read that states the class refuses the weaker row before looking at it.
        let secure = keychainError { _ = try reopened.securePasswordData(forService: "bank", account: "alice") }
        if original.protectionClass == .whenUnlocked {
            guard case .accessibilityTooWeak(_, let stored, let required)? = secure else {
                Issue.record("expected accessibilityTooWeak, got \(String(describing: secure))"); return
            }
            #expect(stored == .always && required == .whenUnlocked)
        }
        // Unlocked, the same: the row is refused, never opened with the always key.
        source.setUnlocked(true)
        #expect(keychainError { _ = try reopened.password(forService: "bank", account: "alice") }?.isCorrupted == true)
        // The rest of the keychain works; deleting the damaged item works.
        try reopened.setPassword("other", forService: "bank", account: "bob")
        #expect(try reopened.password(forService: "bank", account: "bob") == "other")
        try reopened.deletePassword(forService: "bank", account: "alice")
        try reopened.flush()
    }

    @Test func aRowRecordOrIdCannotBeSwapped() throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        let keychain = try open(dir, source)
        try keychain.setPassword("one", forService: "s", account: "a")
        try keychain.setPassword("two", forService: "s", account: "b")
        try keychain.close()
        // Swap the MACs of the two rows: each row's own record no longer matches its MAC.
        let db = try DatabaseQueue(path: dir.sub("kc") + "/keychain.sqlite")
        try db.write { db in
            let rows = try Row.fetchAll(db, sql: "SELECT item_id, row_mac FROM keychain_items")
            #expect(rows.count == 2)
            try db.execute(sql: "UPDATE keychain_items SET row_mac = ? WHERE item_id = ?", arguments: [rows[1][1] as DatabaseValue, rows[0][0] as DatabaseValue])
            try db.execute(sql: "UPDATE keychain_items SET row_mac = ? WHERE item_id = ?", arguments: [rows[0][1] as DatabaseValue, rows[1][0] as DatabaseValue])
        }
        try db.close()
        let reopened = try open(dir, source)
        #expect(keychainError { _ = try reopened.password(forService: "s", account: "a") }?.isCorrupted == true)
        #expect(keychainError { _ = try reopened.password(forService: "s", account: "b") }?.isCorrupted == true)
    }

    @Test func minimumAccessibilityOnReads() throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        let keychain = try open(dir, source)
        try keychain.set("token", forService: "api", account: "afu", accessibility: .afterFirstUnlock)
        try keychain.set("token", forService: "api", account: "wuTDO", accessibility: .whenUnlockedThisDeviceOnly)
        try keychain.setPassword("plain", forService: "api", account: "always")

        #expect(try keychain.value(String.self, forService: "api", account: "afu", requiring: .afterFirstUnlock) == "token")
        #expect(try keychain.value(String.self, forService: "api", account: "afu", requiring: .always) == "token")
        let weaker = keychainError { _ = try keychain.value(String.self, forService: "api", account: "afu", requiring: .whenUnlocked) }
        guard case .accessibilityTooWeak(let item, .afterFirstUnlock, .whenUnlocked)? = weaker else {
            Issue.record("expected accessibilityTooWeak, got \(String(describing: weaker))"); return
        }
        #expect(item.contains("afu"))
        // thisDeviceOnly required: a portable item is weaker.
        #expect(try keychain.value(String.self, forService: "api", account: "wuTDO", requiring: .afterFirstUnlockThisDeviceOnly) == "token")
        if case .accessibilityTooWeak? = keychainError({ _ = try keychain.value(String.self, forService: "api", account: "afu", requiring: .alwaysThisDeviceOnly) }) {} else {
            Issue.record("a portable item passed a thisDeviceOnly requirement")
        }
        // securePassword requires whenUnlocked.
        if case .accessibilityTooWeak? = keychainError({ _ = try keychain.securePassword(forService: "api", account: "always") }) {} else {
            Issue.record("securePassword returned an always item")
        }
        // The query API: matching, update and delete refuse a weaker item.
        let query = KeychainQuery(service: "api", account: "always", minimumAccessibility: .afterFirstUnlock)
        if case .accessibilityTooWeak? = keychainError({ _ = try keychain.copyMatching(query) }) {} else { Issue.record("copyMatching") }
        if case .accessibilityTooWeak? = keychainError({ _ = try keychain.update(query, with: ItemUpdate(data: SecretBytes(utf8: "x"))) }) {} else { Issue.record("update") }
        let scan = KeychainQuery(service: "api", minimumAccessibility: .afterFirstUnlock, limit: .all)
        if case .accessibilityTooWeak? = keychainError({ _ = try keychain.delete(scan) }) {} else { Issue.record("delete") }
        #expect(try keychain.password(forService: "api", account: "always") == "plain")
    }

    @Test func updateKeepsTheStatedClass() throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        let keychain = try open(dir, source)
        let key = ItemKey.generic(service: "s", account: "a")
        try keychain.add(SecretBytes(utf8: "v1"), for: key, accessibility: .whenUnlockedThisDeviceOnly)
        // A data-only change keeps the stored class; a stated class wins.
        try keychain.update(KeychainQuery(service: "s", account: "a"), with: ItemUpdate(data: SecretBytes(utf8: "v2")))
        #expect(try keychain.copyMatching(KeychainQuery(service: "s", account: "a", returning: .attributes)).first?.attributes?.accessibility == .whenUnlockedThisDeviceOnly)
        try keychain.update(KeychainQuery(service: "s", account: "a"), with: ItemUpdate(accessibility: .afterFirstUnlock))
        #expect(try keychain.copyMatching(KeychainQuery(service: "s", account: "a", returning: .attributes)).first?.attributes?.accessibility == .afterFirstUnlock)
        #expect(text(try keychain.passwordData(forService: "s", account: "a", requiring: .afterFirstUnlock)) == "v2")
    }

    /// Format 2 is format 3 without the `row_mac` column: a file made that way is upgraded on
    /// open (with the vault locked), in one transaction, and every item reads as before.
    @Test func formatTwoIsUpgradedOnOpen() throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        let keychain = try open(dir, source)
        try keychain.setPassword("always-value", forService: "s", account: "always")
        try keychain.add(SecretBytes(utf8: "locked-value"), for: .generic(service: "s", account: "wu"), accessibility: .whenUnlocked)
        try keychain.close()
        let path = dir.sub("kc") + "/keychain.sqlite"
        let formatTwoCheck = ItemCodec.indexKeyCheck(format: 2, key: try source.blindIndexKey().symmetricKey)
        let db = try DatabaseQueue(path: path)
        try db.write { db in
            try db.execute(sql: "ALTER TABLE keychain_items DROP COLUMN row_mac")
            try db.execute(sql: "UPDATE keychain_meta SET value = 2 WHERE key = 'format'")
            try db.execute(sql: "UPDATE keychain_meta SET value = ? WHERE key = 'index_key_check'", arguments: [formatTwoCheck])
        }
        try db.close()

        source.setUnlocked(false)
        let upgraded = try open(dir, source)
        #expect(try upgraded.password(forService: "s", account: "always") == "always-value")
        try upgraded.close()
        let check = try DatabaseQueue(path: path)
        let (format, macs) = try check.read { db in
            (try Int64.fetchOne(db, sql: "SELECT value FROM keychain_meta WHERE key = 'format'"),
             try Int.fetchOne(db, sql: "SELECT count(*) FROM keychain_items WHERE length(row_mac) = 16"))
        }
        try check.close()
        #expect(format == 3)
        #expect(macs == 2)
        let storedCheck = try DatabaseQueue(path: path).read { db in try Data.fetchOne(db, sql: "SELECT value FROM keychain_meta WHERE key = 'index_key_check'") }
        #expect(storedCheck == ItemCodec.indexKeyCheck(format: 3, key: try source.blindIndexKey().symmetricKey))
        source.setUnlocked(true)
        let later = try open(dir, source)
        #expect(try later.securePassword(forService: "s", account: "wu") == "locked-value")
    }

    /// The attacker relabels a format-3 file as format 2 (dropping the MAC column) after moving
    /// a row to the always class, hoping the upgrade binds the tampered row: refused.
    @Test func aFormatThreeFileRelabelledAsFormatTwoIsRefused() throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        let keychain = try open(dir, source)
        try keychain.add(SecretBytes(utf8: "the real secret"), for: .generic(service: "bank", account: "alice"), accessibility: .whenUnlocked)
        try keychain.close()
        try downgrade(dir, alwaysKey: try source.classKey(for: .always), service: "bank", account: "alice",
                      value: "the attacker's value", to: .always)
        let db = try DatabaseQueue(path: dir.sub("kc") + "/keychain.sqlite")
        try db.write { db in
            try db.execute(sql: "ALTER TABLE keychain_items DROP COLUMN row_mac")
            try db.execute(sql: "UPDATE keychain_meta SET value = 2 WHERE key = 'format'")
        }
        try db.close()
        source.setUnlocked(false)
        let error = keychainError { _ = try open(dir, source) }
        #expect(error?.isCorrupted == true, "\(String(describing: error))")
        #expect(error.map { "\($0)" }?.contains("says format 2 but was written in format 3") == true)
    }

    /// A row copied from another keychain of the same device key (another home) does not pass:
    /// the MAC covers the keychain's own random id.
    @Test func aRowFromAnotherKeychainIsRefused() throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        var configuration = Keychain.Configuration()
        configuration.coalescingInterval = .milliseconds(5)
        let other = try Keychain(directory: dir.sub("other"), keySource: source, configuration: configuration)
        try other.setPassword("from the other keychain", forService: "bank", account: "alice")
        try other.close()
        let keychain = try open(dir, source)
        try keychain.add(SecretBytes(utf8: "mine"), for: .generic(service: "bank", account: "alice"), accessibility: .whenUnlocked)
        try keychain.close()
        let source2 = try DatabaseQueue(path: dir.sub("other") + "/keychain.sqlite")
        let row = try source2.read { db in try Row.fetchOne(db, sql: "SELECT item_id, accessibility, sealed, created, modified, row_mac FROM keychain_items") }
        try source2.close()
        let target = try DatabaseQueue(path: dir.sub("kc") + "/keychain.sqlite")
        try target.write { db in
            try db.execute(sql: "DELETE FROM keychain_items")
            try db.execute(sql: "INSERT INTO keychain_items (item_id, accessibility, sealed, created, modified, row_mac) VALUES (?, ?, ?, ?, ?, ?)",
                           arguments: StatementArguments((0..<6).map { row![$0] as DatabaseValue }))
        }
        try target.close()
        source.setUnlocked(false)
        let error = keychainError { _ = try open(dir, source).password(forService: "bank", account: "alice") }
        #expect(error?.isCorrupted == true, "\(String(describing: error))")
    }

    @Test func formatTwoCanBeTurnedOff() throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        try open(dir, source).close()
        let formatTwoCheck = ItemCodec.indexKeyCheck(format: 2, key: try source.blindIndexKey().symmetricKey)
        let db = try DatabaseQueue(path: dir.sub("kc") + "/keychain.sqlite")
        try db.write { db in
            try db.execute(sql: "ALTER TABLE keychain_items DROP COLUMN row_mac")
            try db.execute(sql: "UPDATE keychain_meta SET value = 2 WHERE key = 'format'")
            try db.execute(sql: "UPDATE keychain_meta SET value = ? WHERE key = 'index_key_check'", arguments: [formatTwoCheck])
        }
        try db.close()
        var configuration = Keychain.Configuration()
        configuration.upgradesFormat2 = false
        let error = keychainError { _ = try Keychain(directory: dir.sub("kc"), keySource: source, configuration: configuration) }
        #expect(error?.isCorrupted == true && "\(error!)".contains("no longer upgrades"), "\(String(describing: error))")
    }

    @Test func missingMetadataIsCorruption() throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        try open(dir, source).close()
        for key in ["format", "keychain_id"] {
            let copy = dir.sub("copy-\(key)")
            try FileManager.default.copyItem(atPath: dir.sub("kc"), toPath: copy)
            let db = try DatabaseQueue(path: copy + "/keychain.sqlite")
            try db.write { db in try db.execute(sql: "DELETE FROM keychain_meta WHERE key = ?", arguments: [key]) }
            try db.close()
            let error = keychainError { _ = try Keychain(directory: copy, keySource: source) }
            #expect(error?.isCorrupted == true, "\(key): \(String(describing: error))")
        }
    }

    @Test func aNewerFormatIsRefused() throws {
        let dir = try TemporaryDirectory()
        let source = try TestKeySource()
        try open(dir, source).close()
        let db = try DatabaseQueue(path: dir.sub("kc") + "/keychain.sqlite")
        try db.write { db in try db.execute(sql: "UPDATE keychain_meta SET value = 4 WHERE key = 'format'") }
        try db.close()
        let error = keychainError { _ = try open(dir, source) }
        #expect(error?.isCorrupted == true)
        #expect(error.map { "\($0)" }?.contains("newer version") == true)
    }
}

/// A keychain written by the previous release (format 2, by its command line: `mail`/`alice`
/// = "hunter2" as always, `api`/`token` = "device-bound token" as alwaysThisDeviceOnly with
/// label "a label"), with its always key and device key: it opens, upgrades to format 3 and
/// reads as it was.
@Suite struct FormatTwoFixtureTests {
    @Test func aKeychainOfThePreviousFormatOpensAndUpgrades() throws {
        let dir = try TemporaryDirectory()
        let fixture = packageRoot + "/Tests/KeychainTests/Fixtures/format2"
        let home = dir.sub("home")
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        for (name, target) in [("keychain.sqlite", home + "/keychain.sqlite"), ("always.key", home + "/always.key"), ("device.key", dir.sub("device.key"))] {
            try FileManager.default.copyItem(atPath: fixture + "/" + name, toPath: target)
            #expect(chmod(target, 0o600) == 0)
        }
        let manager = try CryptoManager(directory: home, deviceKeyProvider: FileDeviceKeyProvider(path: dir.sub("device.key")))
        let keychain = try Keychain(manager: manager)
        #expect(try keychain.password(forService: "mail", account: "alice") == "hunter2")
        let token = try keychain.copyMatching(KeychainQuery(service: "api", account: "token", returning: [.data, .attributes]))
        #expect(token.first?.data.map(text) == "device-bound token")
        #expect(token.first?.attributes?.label == "a label")
        #expect(token.first?.attributes?.accessibility == .alwaysThisDeviceOnly)
        try keychain.close()
        let db = try DatabaseQueue(path: home + "/keychain.sqlite")
        let (format, macs) = try db.read { db in
            (try Int64.fetchOne(db, sql: "SELECT value FROM keychain_meta WHERE key = 'format'"),
             try Int.fetchOne(db, sql: "SELECT count(*) FROM keychain_items WHERE length(row_mac) = 16"))
        }
        try db.close()
        #expect(format == 3 && macs == 2)
    }
}
