import Foundation
import Testing
import Synchronization
import Cipher
import Vault
@testable import Keychain

/// A key source that counts every key it hands out, to show that a closed keychain asks for none.
final class CountingKeySource: KeychainKeySource, Sendable {
    private let keys: StaticKeySource
    let classKeyCalls = Atomic<Int>(0)
    let retiredKeyCalls = Atomic<Int>(0)
    let indexKeyCalls = Atomic<Int>(0)

    init() throws {
        keys = try StaticKeySource(masterKey: SecretBytes(copying: try SecureRandom.bytes(32)))
    }

    func classKey(for accessibility: Accessibility) throws -> SecretBytes {
        classKeyCalls.add(1, ordering: .sequentiallyConsistent)
        return try keys.classKey(for: accessibility)
    }

    func retiredClassKeys(for accessibility: Accessibility) throws -> [SecretBytes] {
        retiredKeyCalls.add(1, ordering: .sequentiallyConsistent)
        return []
    }

    func blindIndexKey() throws -> SecretBytes {
        indexKeyCalls.add(1, ordering: .sequentiallyConsistent)
        return try keys.blindIndexKey()
    }

    var totalCalls: Int {
        classKeyCalls.load(ordering: .sequentiallyConsistent) + retiredKeyCalls.load(ordering: .sequentiallyConsistent)
            + indexKeyCalls.load(ordering: .sequentiallyConsistent)
    }
}

/// After `close()`, every entry point throws `KeychainError.closed` before it asks the key source
/// for a key or touches a file (a write used to fetch, or derive, its class key first).
@Suite struct ClosedKeychainTests {
    /// Names, sizes and modification times of the files of a directory.
    private static func snapshot(_ directory: String) throws -> [String: [Int64]] {
        var result: [String: [Int64]] = [:]
        for name in try FileManager.default.contentsOfDirectory(atPath: directory) {
            let attributes = try FileManager.default.attributesOfItem(atPath: directory + "/" + name)
            let size = (attributes[.size] as? NSNumber)?.int64Value ?? -1
            let modified = (attributes[.modificationDate] as? Date).map { Int64($0.timeIntervalSince1970 * 1e9) } ?? -1
            result[name] = [size, modified]
        }
        return result
    }

    @Test func aClosedKeychainRefusesEveryOperationWithoutKeysOrFiles() throws {
        let dir = try TemporaryDirectory()
        let source = try CountingKeySource()
        let keychain = try Keychain(directory: dir.sub("kc"), keySource: source)
        try keychain.setPassword("v", forService: "s", account: "a")
        try keychain.add(SecretBytes(utf8: "w"), for: .generic(service: "s", account: "b"), accessibility: .afterFirstUnlock)
        try keychain.close()
        let before = try Self.snapshot(dir.sub("kc"))
        let calls = source.totalCalls
        // A legacy file that exists: an open keychain would read it.
        let legacy = dir.sub("legacy.plist")
        try Data().write(to: URL(fileURLWithPath: legacy))
        let key = ItemKey.generic(service: "s", account: "a")
        let query = KeychainQuery(service: "s", account: "a")
        let operations: [(String, () throws -> Void)] = [
            ("setPassword", { try keychain.setPassword("x", forService: "s", account: "a") }),
            ("setPasswordData", { try keychain.setPasswordData([1, 2], forService: "s", account: "a") }),
            ("setSecurePassword", { try keychain.setSecurePassword("x", forService: "s", account: "a") }),
            ("setSecurePasswordData", { try keychain.setSecurePasswordData(SecretBytes(utf8: "x"), forService: "s", account: "c") }),
            ("set", { try keychain.set([1, 2, 3], forService: "s", account: "codable", accessibility: .always) }),
            ("add", { try keychain.add(SecretBytes(utf8: "x"), for: .generic(service: "s", account: "new"), accessibility: .always) }),
            ("addOrUpdate with names", { try keychain.addOrUpdate(SecretBytes(utf8: "x"), for: key, accessibility: .always, label: "l", comment: "c") }),
            ("addOrUpdate", { try keychain.addOrUpdate(SecretBytes(utf8: "x"), for: key) }),
            ("update", { _ = try keychain.update(query, with: ItemUpdate(data: SecretBytes(utf8: "y"))) }),
            ("delete", { _ = try keychain.delete(query) }),
            ("deletePassword", { try keychain.deletePassword(forService: "s", account: "a") }),
            ("deleteAccounts", { _ = try keychain.deleteAccounts(forService: "s") }),
            ("deleteAll", { _ = try keychain.deleteAll() }),
            ("password", { _ = try keychain.password(forService: "s", account: "a") }),
            ("passwordData", { _ = try keychain.passwordData(forService: "s", account: "a") }),
            ("securePassword", { _ = try keychain.securePassword(forService: "s", account: "a") }),
            ("securePasswordData", { _ = try keychain.securePasswordData(forService: "s", account: "a") }),
            ("value", { _ = try keychain.value([Int].self, forService: "s", account: "codable") }),
            ("copyMatching", { _ = try keychain.copyMatching(query) }),
            ("copyMatching all", { _ = try keychain.copyMatching(KeychainQuery(service: "s", limit: .all)) }),
            ("accounts", { _ = try keychain.accounts() }),
            ("summaries", { _ = try keychain.summaries() }),
            ("listing", { _ = try keychain.listing() }),
            ("rotateClassKeys", { _ = try keychain.rotateClassKeys() }),
            ("resealUnderCurrentClassKeys", { _ = try keychain.resealUnderCurrentClassKeys() }),
            ("importLegacyKeychain", { _ = try keychain.importLegacyKeychain(at: legacy) }),
            ("flush", { try keychain.flush() }),
        ]
        for (name, operation) in operations {
            let error = keychainError(operation)
            guard case .closed(let path)? = error else {
                Issue.record("\(name) after close: expected closed, got \(String(describing: error))"); continue
            }
            #expect(path == keychain.path, "\(name)")
            #expect(source.totalCalls == calls, "\(name) asked the key source for a key after close")
        }
        #expect(source.classKeyCalls.load(ordering: .sequentiallyConsistent) > 0, "the writes before close used class keys")
        #expect(try Self.snapshot(dir.sub("kc")) == before)
        // Closing again does nothing; the data is intact for the next opening.
        try keychain.close()
        let reopened = try Keychain(directory: dir.sub("kc"), keySource: source)
        #expect(try reopened.password(forService: "s", account: "a") == "v")
        #expect(text(try reopened.passwordData(forService: "s", account: "b")) == "w")
        try reopened.close()
    }

    /// The error says what to do.
    @Test func theClosedErrorNamesTheFile() {
        #expect(KeychainError.closed(path: "/x/keychain.sqlite").description
                == "the keychain /x/keychain.sqlite was closed; open it again to use it")
    }
}
